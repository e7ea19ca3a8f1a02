//! Sorted runs: [`SortedRuns`], an output for high fan-out under a small memory limit.
//!
//! When each destination's share of the memory limit holds a few rows, flushing destinations
//! one by one writes a message per few rows: its header, its padding and a compression frame
//! per buffer outweigh the rows. So a writer with [`Flush::AllAtLimit`] hands every buffered
//! row over at once, destination by destination, and they are spilled as one run; once the
//! input is consumed the runs are merged destination by destination into the real output,
//! each destination's rows gathered into messages of a useful size:
//!
//! ```text
//!  spill   every destination's rows, in destination order ─► .runs-NAME-XXXXXX.arrows
//!          (a spill file: an uncompressed Arrow IPC stream cut into chunks of rows, whatever
//!           their destination) and .runs-NAME-XXXXXX.rows (each destination's rows in it,
//!           u64 LE)
//!  merge   destination p: its rows of run 0, run 1, … (one open chunk per run)
//!          ─► coalesced to messages of `message_bytes` ─► the output's write_batch(p, …)
//! ```
//!
//! Merging holds one chunk per run and reads the row counts as it goes, so that memory grows
//! with neither the destinations nor the input: when the runs are more than the memory
//! allows, groups of consecutive runs are first merged into one (the order of every
//! destination's rows is kept).
//! The run files are removed once merged, and when the output is dropped unfinished.
//!
//! [`Flush::AllAtLimit`]: partout_exchange::Flush::AllAtLimit

use crate::spill_file::{SpillReader, SpillWriter};
use crate::{io_error, sink_error};
use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_schema::{DataType, SchemaRef};
use arrow_select::coalesce::BatchCoalescer;
use partout_exchange::{BatchSink, Flushed, SinkCapabilities, WriterError};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Bytes each of a run's two files buffers while merging, besides its open chunk.
const READ_BUFFER: usize = 8 << 10;

/// The most runs merged at once.
const MAX_FAN_IN: usize = 64;

/// How [`SortedRuns`] spills and merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// About how many bytes of rows each chunk of a run holds: merging holds one chunk per
    /// run being merged.
    pub chunk_bytes: usize,
    /// The most memory a merge may hold in open chunks: it sets how many runs merge at once.
    pub merge_bytes: usize,
    /// About how many bytes of rows each batch handed to the output holds (a destination
    /// with fewer rows gets one batch).
    pub message_bytes: usize,
}

impl RunOptions {
    /// Options for a writer whose buffers may hold `memory_limit` bytes: merging, which
    /// happens once the buffers are given up, may hold as much; chunks are a 64th of it
    /// (between 32 KiB and 1 MiB), messages up to 1 MiB.
    pub fn within(memory_limit: usize) -> Self {
        Self {
            chunk_bytes: (memory_limit / 64).clamp(32 << 10, 1 << 20),
            merge_bytes: memory_limit,
            message_bytes: (memory_limit / 4).clamp(64 << 10, 1 << 20),
        }
    }

    /// How many runs merge at once: as many as `merge_bytes` holds, from 2 to
    /// [`MAX_FAN_IN`] (each open run takes two file descriptors).
    fn fan_in(&self) -> usize {
        (self.merge_bytes / (self.chunk_bytes + 2 * READ_BUFFER)).clamp(2, MAX_FAN_IN)
    }
}

/// A spilled run: a spill file of rows in destination order, and each destination's rows in
/// it (a file beside it); both removed when it is dropped.
struct SpilledRun {
    file: crate::spill_file::SpillFile,
    rows_path: PathBuf,
    rows: u64,
    /// Bytes of Arrow data in the run, by the spilled batches' size.
    bytes: u64,
}

impl Drop for SpilledRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.rows_path);
    }
}

/// Wraps an output `O`: what a [`PartitionedWriter`](partout_exchange::PartitionedWriter) with
/// [`Flush::AllAtLimit`](partout_exchange::Flush::AllAtLimit) flushes is spilled into sorted
/// runs in a scratch directory, merged into `O` by [`finish`](BatchSink::finish); see the
/// module's documentation. Until then `O` receives nothing, and
/// [`write_batch`](BatchSink::write_batch) reports no bytes added to any destination's output.
pub struct SortedRuns<O: BatchSink> {
    output: O,
    schema: SchemaRef,
    dir: PathBuf,
    name: String,
    destinations: usize,
    options: RunOptions,
    runs: Vec<SpilledRun>,
    spilling: Option<RunWriter>,
}

impl<O: BatchSink> std::fmt::Debug for SortedRuns<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SortedRuns")
            .field("dir", &self.dir)
            .field("name", &self.name)
            .field("destinations", &self.destinations)
            .field("options", &self.options)
            .field("runs", &self.runs.len())
            .finish_non_exhaustive()
    }
}

impl<O: BatchSink> SortedRuns<O> {
    /// Runs of batches of `schema` for `destinations` destinations, spilled as
    /// `DIR/.runs-{name}-XXXXXX.arrows` and merged into `output`.
    pub fn new(
        output: O,
        schema: SchemaRef,
        destinations: usize,
        dir: &Path,
        name: &str,
        options: RunOptions,
    ) -> Self {
        Self {
            output,
            schema,
            dir: dir.to_path_buf(),
            name: name.to_string(),
            destinations,
            options,
            runs: Vec::new(),
            spilling: None,
        }
    }

    /// The wrapped output.
    pub fn output(&self) -> &O {
        &self.output
    }

    /// Runs spilled and not yet merged.
    pub fn runs(&self) -> usize {
        self.runs.len() + usize::from(self.spilling.is_some())
    }

    /// A new run file's writer.
    fn start_run(&mut self) -> Result<RunWriter, WriterError> {
        RunWriter::try_new(
            &self.dir,
            &format!(".runs-{}-", self.name),
            self.schema.clone(),
            self.destinations,
            self.options.chunk_bytes,
        )
    }

    /// Merges groups of consecutive runs until a merge can hold one chunk of each.
    fn reduce_runs(&mut self) -> Result<(), WriterError> {
        let fan_in = self.options.fan_in();
        let mut at = 0;
        while self.runs.len() > fan_in {
            if at + 1 >= self.runs.len() {
                at = 0;
            }
            // Merge no more than it takes to come down to the fan-in.
            let group = fan_in.min(self.runs.len() - fan_in + 1);
            let end = (at + group).min(self.runs.len());
            let mut writer = self.start_run()?;
            let merged = merge(&self.runs[at..end], self.destinations, |p, piece| {
                writer.push(p, piece)
            });
            // A writer dropped unfinished leaves nothing; runs merged go as they are dropped.
            let merged = merged.and_then(|()| writer.finish())?;
            drop(self.runs.splice(at..end, [merged]));
            at += 1;
        }
        Ok(())
    }

    /// Spills `batch`, rows of consecutive destinations, as their next rows in the current run.
    fn spill_sorted(
        &mut self,
        batch: &RecordBatch,
        runs: &[(usize, usize)],
    ) -> Result<u64, WriterError> {
        if self.spilling.is_none() {
            self.spilling = Some(self.start_run()?);
        }
        let run = self.spilling.as_mut().expect("a run being spilled");
        let mut last = run.last;
        let mut rows = 0;
        for &(p, n) in runs {
            if p >= self.destinations {
                return Err(WriterError::NoSuchDestination {
                    destination: p,
                    destinations: self.destinations,
                });
            }
            if p < last {
                return Err(sink_error(
                    Some(p),
                    format!("rows of destination {p} came after destination {last}'s in one run"),
                ));
            }
            last = p;
            rows += n;
        }
        if rows != batch.num_rows() {
            return Err(sink_error(
                None,
                format!(
                    "a batch of {} rows said to hold {rows} rows of destinations",
                    batch.num_rows()
                ),
            ));
        }
        for &(p, n) in runs {
            run.rows[p] += n as u64;
        }
        run.last = last;
        run.append(batch.clone())?;
        Ok(0)
    }

    /// Ends the run being spilled, if any; one without rows is removed.
    fn end_run(&mut self) -> Result<(), WriterError> {
        if let Some(run) = self.spilling.take() {
            let run = run.finish()?;
            if run.rows > 0 {
                self.runs.push(run);
            }
        }
        Ok(())
    }
}

impl<O: BatchSink> BatchSink for SortedRuns<O> {
    /// Spills `batch` as destination `p`'s next rows in the current run.
    fn write_batch(&mut self, p: usize, batch: &RecordBatch) -> Result<u64, WriterError> {
        if p >= self.destinations {
            return Err(WriterError::NoSuchDestination {
                destination: p,
                destinations: self.destinations,
            });
        }
        if self.spilling.is_none() {
            self.spilling = Some(self.start_run()?);
        }
        let run = self.spilling.as_mut().expect("a run being spilled");
        if p < run.last {
            return Err(sink_error(
                Some(p),
                format!(
                    "rows of destination {p} came after destination {}'s in one run",
                    run.last
                ),
            ));
        }
        run.push(p, batch.clone())?;
        Ok(0)
    }

    /// Sorted batches are spilled whole into the current run, which ends with the round.
    fn write_flushed(&mut self, flushed: Flushed<'_>) -> Result<u64, WriterError> {
        match flushed {
            Flushed::Sorted { batch, runs, .. } => self.spill_sorted(batch, runs),
            Flushed::EndOfRound => self.end_run().map(|()| 0),
            other => other.write_as_batches(self),
        }
    }

    /// Merges the runs into the output, destination by destination, then finishes it.
    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<(), WriterError> {
        self.end_run()?;
        self.reduce_runs()?;
        let rows: u64 = self.runs.iter().map(|r| r.rows).sum();
        let bytes: u64 = self.runs.iter().map(|r| r.bytes).sum();
        let row_bytes = bytes.checked_div(rows).unwrap_or(1).max(1);
        let message_rows = (self.options.message_bytes as u64 / row_bytes).max(1) as usize;
        let mut coalescer = BatchCoalescer::new(self.schema.clone(), message_rows);
        let output = &mut self.output;
        let mut current = usize::MAX;
        let mut drain = |p: usize, coalescer: &mut BatchCoalescer| -> Result<(), WriterError> {
            while let Some(batch) = coalescer.next_completed_batch() {
                destination_bytes[p] += output.write_batch(p, &batch)?;
            }
            Ok(())
        };
        merge(&self.runs, self.destinations, |p, piece| {
            if p != current && current != usize::MAX {
                coalescer
                    .finish_buffered_batch()
                    .map_err(|e| sink_error(Some(current), e))?;
                drain(current, &mut coalescer)?;
            }
            current = p;
            coalescer
                .push_batch(piece)
                .map_err(|e| sink_error(Some(p), e))?;
            drain(p, &mut coalescer)
        })?;
        if current != usize::MAX {
            coalescer
                .finish_buffered_batch()
                .map_err(|e| sink_error(Some(current), e))?;
            drain(current, &mut coalescer)?;
        }
        self.runs.clear();
        self.output.finish(destination_bytes)
    }

    /// The output's clock: merging into it at the end is where its time is spent.
    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities {
            clock: self.output.capabilities().clock,
            ..SinkCapabilities::default()
        }
    }
}

/// Streams the rows of `runs`, destination by destination and, within a destination, run by
/// run, as slices of the runs' chunks handed to `emit` with their destination.
fn merge(
    runs: &[SpilledRun],
    destinations: usize,
    mut emit: impl FnMut(usize, RecordBatch) -> Result<(), WriterError>,
) -> Result<(), WriterError> {
    let mut readers = runs
        .iter()
        .map(RunReader::try_new)
        .collect::<Result<Vec<_>, _>>()?;
    for p in 0..destinations {
        for reader in &mut readers {
            reader.take(p, &mut emit)?;
        }
    }
    for reader in &mut readers {
        reader.check_ended()?;
    }
    Ok(())
}

/// Writes a run: rows pushed in destination order, coalesced into chunks.
struct RunWriter {
    rows_path: PathBuf,
    schema: SchemaRef,
    writer: Option<SpillWriter>,
    coalescer: Option<BatchCoalescer>,
    chunk_bytes: usize,
    rows: Vec<u64>,
    bytes: u64,
    /// The destination of the rows last pushed.
    last: usize,
}

impl RunWriter {
    /// A run written as `dir/{prefix}XXXXXX.arrows` and `.rows` beside it.
    fn try_new(
        dir: &Path,
        prefix: &str,
        schema: SchemaRef,
        destinations: usize,
        chunk_bytes: usize,
    ) -> Result<Self, WriterError> {
        let writer = SpillWriter::create(dir, prefix, &schema, None)?;
        let rows_path = writer.path().with_extension("rows");
        Ok(Self {
            rows_path,
            schema,
            writer: Some(writer),
            coalescer: None,
            chunk_bytes,
            rows: vec![0; destinations],
            bytes: 0,
            last: 0,
        })
    }

    /// Appends `batch` as destination `p`'s next rows (`p` at least the last destination).
    fn push(&mut self, p: usize, batch: RecordBatch) -> Result<(), WriterError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.last = p;
        self.rows[p] += batch.num_rows() as u64;
        self.append(batch)
    }

    /// Appends `batch`, whose rows are counted by the caller.
    fn append(&mut self, batch: RecordBatch) -> Result<(), WriterError> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        let bytes = slice_bytes(&batch);
        if self.coalescer.is_none() {
            // Chunks of about `chunk_bytes`, by the first rows' size. Every batch is copied
            // into a chunk, even one of a chunk's size: a gathered view array refers to the
            // data buffers of every batch it came from, which IPC would write whole.
            let chunk_rows =
                (self.chunk_bytes as u64 * rows as u64 / bytes.max(1)).clamp(1, 1 << 20);
            self.coalescer = Some(BatchCoalescer::new(
                self.schema.clone(),
                chunk_rows as usize,
            ));
        }
        self.bytes += bytes;
        let coalescer = self.coalescer.as_mut().expect("made above");
        coalescer
            .push_batch(batch)
            .map_err(|e| sink_error(None, e))?;
        self.write_completed()
    }

    fn write_completed(&mut self) -> Result<(), WriterError> {
        let (Some(coalescer), Some(writer)) = (self.coalescer.as_mut(), self.writer.as_mut())
        else {
            return Ok(());
        };
        while let Some(chunk) = coalescer.next_completed_batch() {
            writer.write(&chunk)?;
        }
        Ok(())
    }

    /// Writes the last chunk, ends the stream and writes the row counts; on failure removes
    /// what was written (the spill file goes with its writer).
    fn finish(mut self) -> Result<SpilledRun, WriterError> {
        let run = self.write_end();
        if run.is_err() {
            let _ = std::fs::remove_file(&self.rows_path);
        }
        run
    }

    fn write_end(&mut self) -> Result<SpilledRun, WriterError> {
        if let Some(coalescer) = self.coalescer.as_mut() {
            coalescer
                .finish_buffered_batch()
                .map_err(|e| sink_error(None, e))?;
        }
        self.write_completed()?;
        let file = self.writer.take().expect("finished once").finish()?;
        let mut counts = Vec::with_capacity(self.rows.len() * 8);
        for rows in &self.rows {
            counts.extend_from_slice(&rows.to_le_bytes());
        }
        std::fs::write(&self.rows_path, counts).map_err(io_error(None))?;
        Ok(SpilledRun {
            file,
            rows_path: self.rows_path.clone(),
            rows: self.rows.iter().sum(),
            bytes: self.bytes,
        })
    }
}

/// Bytes of Arrow data `batch`'s rows hold: of slices, the sliced part; of view arrays, the
/// views and the bytes they use (a gathered view array refers to whole buffers of other
/// batches).
fn slice_bytes(batch: &RecordBatch) -> u64 {
    batch
        .columns()
        .iter()
        .map(|c| {
            let views = match c.data_type() {
                DataType::Utf8View => Some(c.as_string_view().total_buffer_bytes_used()),
                DataType::BinaryView => Some(c.as_binary_view().total_buffer_bytes_used()),
                _ => None,
            };
            match views {
                Some(used) => (c.len() * 16 + used) as u64,
                None => c.to_data().get_slice_memory_size().unwrap_or(0) as u64,
            }
        })
        .sum()
}

/// Reads a run's rows in order, a chunk at a time, and each destination's row count.
struct RunReader<'a> {
    path: &'a Path,
    reader: SpillReader,
    counts: BufReader<File>,
    chunk: Option<RecordBatch>,
    at: usize,
}

impl<'a> RunReader<'a> {
    fn try_new(run: &'a SpilledRun) -> Result<Self, WriterError> {
        let counts = File::open(&run.rows_path).map_err(|e| {
            sink_error(
                None,
                format!(
                    "the spilled run {} cannot be read: {e}",
                    run.rows_path.display()
                ),
            )
        })?;
        Ok(Self {
            path: run.file.path(),
            reader: run.file.read(READ_BUFFER)?,
            counts: BufReader::with_capacity(READ_BUFFER, counts),
            chunk: None,
            at: 0,
        })
    }

    fn damaged(&self, e: impl std::fmt::Display) -> WriterError {
        sink_error(
            None,
            format!(
                "the spilled run {} cannot be read: {e}",
                self.path.display()
            ),
        )
    }

    /// Hands destination `p`'s rows (the next destination's) to `emit`, in slices of chunks.
    fn take(
        &mut self,
        p: usize,
        emit: &mut impl FnMut(usize, RecordBatch) -> Result<(), WriterError>,
    ) -> Result<(), WriterError> {
        let mut count = [0u8; 8];
        self.counts
            .read_exact(&mut count)
            .map_err(|e| self.damaged(format_args!("the row count of destination {p}: {e}")))?;
        let mut rows = u64::from_le_bytes(count);
        while rows > 0 {
            let left = self.chunk.as_ref().map_or(0, |c| c.num_rows() - self.at);
            if left == 0 {
                match self.reader.next() {
                    Some(Ok(chunk)) => {
                        self.chunk = Some(chunk);
                        self.at = 0;
                        continue;
                    }
                    Some(Err(e)) => return Err(e),
                    None => return Err(self.damaged("it ends before its rows do")),
                }
            }
            let n = (rows as usize).min(left);
            let chunk = self.chunk.as_ref().expect("a chunk with rows left");
            emit(p, chunk.slice(self.at, n))?;
            self.at += n;
            rows -= n as u64;
        }
        Ok(())
    }

    /// Fails when the run holds rows or counts past those read.
    fn check_ended(&mut self) -> Result<(), WriterError> {
        if self
            .counts
            .read(&mut [0u8; 1])
            .map_err(|e| self.damaged(e))?
            > 0
        {
            return Err(self.damaged("it counts rows of more destinations"));
        }
        let left = self.chunk.as_ref().map_or(0, |c| c.num_rows() - self.at);
        if left > 0 {
            return Err(self.damaged("it holds more rows than were spilled"));
        }
        self.chunk = None;
        loop {
            match self.reader.next() {
                Some(Ok(chunk)) if chunk.num_rows() == 0 => {}
                Some(Ok(_)) => return Err(self.damaged("it holds more rows than were spilled")),
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    }
}

//! Ballista's sort-shuffle files, written from partout's per-destination IPC streams.
//!
//! Each input partition of a task has a partitioned writer whose output is an
//! [`EncodedPartitions`]: every destination's Arrow IPC stream, encoded (and compressed) as
//! the writer flushes, held in memory until the task ends, or, when its memory runs short,
//! ended and spilled partition by partition to a file of its own. Once every input is
//! done, [`write_task_files`] lays the task's output out as Ballista reads it:
//!
//! ```text
//!  data.arrow        [schema-only IPC stream] [partition 0: streams] [partition 1: …] …
//!                     each partition's streams: input 0's spilled ones, then its held one,
//!                     then input 1's, …; every stream complete, ending with its EOS marker
//!  data.arrow.index  K + 1 little-endian i64: where each partition starts (the first is
//!                    the end of the schema-only stream), then the file's length
//! ```

use arrow_array::RecordBatch;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::SchemaRef;
use datafusion::execution::memory_pool::MemoryReservation;
use partout_exchange::{BatchSink, Flushed, SinkCapabilities, WriterError};
use partout_format::{Encoding, StreamEncoders};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What one partition of a task's output holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PartitionStats {
    /// Rows.
    pub rows: u64,
    /// IPC record batches.
    pub batches: u64,
    /// The batches' Arrow memory size (`get_array_memory_size`), which Ballista reports as a
    /// sort-shuffle partition's bytes.
    pub bytes: u64,
}

/// One input partition's share of a task's shuffle output: each destination's IPC stream,
/// held encoded in memory, spilled to `spill_path` (each destination's streams ended and
/// written one after another) when more than the limit is held or the memory pool refuses.
pub(crate) struct EncodedPartitions {
    encoders: StreamEncoders,
    /// Each destination's stream being written.
    open: Vec<Vec<u8>>,
    held: usize,
    limit: usize,
    reservation: MemoryReservation,
    spill_path: PathBuf,
    spill: Option<File>,
    spill_len: u64,
    /// Each destination's spilled streams: (offset, length) in the spill file.
    spilled: Vec<Vec<(u64, u64)>>,
    stats: Vec<PartitionStats>,
    spills: usize,
    spill_time: Duration,
}

impl std::fmt::Debug for EncodedPartitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncodedPartitions")
            .field("held", &self.held)
            .field("spill", &self.spill_path)
            .field("spills", &self.spills)
            .finish_non_exhaustive()
    }
}

fn sink_error(destination: Option<usize>, e: io::Error) -> WriterError {
    WriterError::sink(destination, e)
}

impl EncodedPartitions {
    /// Streams of batches of `schema` for `destinations` destinations in `encoding`, holding
    /// up to `limit` encoded bytes (reserved through `reservation`) before spilling to
    /// `spill_path`.
    pub(crate) fn try_new(
        schema: SchemaRef,
        destinations: usize,
        encoding: Encoding,
        limit: usize,
        reservation: MemoryReservation,
        spill_path: PathBuf,
    ) -> Result<Self, WriterError> {
        Ok(Self {
            encoders: StreamEncoders::try_new(schema, destinations, encoding)
                .map_err(WriterError::Encode)?,
            open: vec![Vec::new(); destinations],
            held: 0,
            limit,
            reservation,
            spill_path,
            spill: None,
            spill_len: 0,
            spilled: vec![Vec::new(); destinations],
            stats: vec![PartitionStats::default(); destinations],
            spills: 0,
            spill_time: Duration::ZERO,
        })
    }

    /// Each destination's rows, batches and bytes.
    pub(crate) fn stats(&self) -> &[PartitionStats] {
        &self.stats
    }

    /// Times spilled, and the time it took.
    pub(crate) fn spills(&self) -> (usize, Duration) {
        (self.spills, self.spill_time)
    }

    /// Bytes spilled.
    pub(crate) fn spilled_bytes(&self) -> u64 {
        self.spill_len
    }

    /// Ends every destination's stream and writes them to the spill file, one after another;
    /// the memory is given back.
    fn spill(&mut self) -> Result<(), WriterError> {
        let started = Instant::now();
        if self.spill.is_none() {
            let file = File::options()
                .create_new(true)
                .read(true)
                .write(true)
                .open(&self.spill_path)
                .map_err(|e| sink_error(None, e))?;
            self.spill = Some(file);
        }
        let file = self.spill.as_mut().expect("the spill file was just opened");
        let mut out = BufWriter::with_capacity(1 << 20, file);
        for p in 0..self.open.len() {
            if self.open[p].is_empty() {
                continue;
            }
            let mut stream = std::mem::take(&mut self.open[p]);
            self.encoders
                .finish_begun(p, &mut stream)
                .map_err(WriterError::Encode)?;
            out.write_all(&stream).map_err(|e| sink_error(Some(p), e))?;
            self.spilled[p].push((self.spill_len, stream.len() as u64));
            self.spill_len += stream.len() as u64;
        }
        out.flush().map_err(|e| sink_error(None, e))?;
        self.held = 0;
        self.reservation.free();
        self.spills += 1;
        self.spill_time += started.elapsed();
        Ok(())
    }
}

impl EncodedPartitions {
    /// Counts `rows` (of `arrow` bytes in memory) written to destination `p` as `added`
    /// encoded bytes, held until the end of the task: spills past the limit or what the pool
    /// grants.
    fn written(
        &mut self,
        p: usize,
        rows: usize,
        arrow: usize,
        added: usize,
    ) -> Result<(), WriterError> {
        let stats = &mut self.stats[p];
        stats.rows += rows as u64;
        stats.batches += 1;
        stats.bytes += arrow as u64;
        self.held += added;
        if self.held > self.limit || self.reservation.try_grow(added).is_err() {
            self.spill()?;
        }
        Ok(())
    }
}

impl BatchSink for EncodedPartitions {
    fn write_batch(&mut self, p: usize, batch: &RecordBatch) -> Result<u64, WriterError> {
        if p >= self.open.len() {
            return Err(WriterError::NoSuchDestination {
                destination: p,
                destinations: self.open.len(),
            });
        }
        let before = self.open[p].len();
        self.encoders
            .encode(p, batch, &mut self.open[p])
            .map_err(WriterError::Encode)?;
        let added = self.open[p].len() - before;
        self.written(p, batch.num_rows(), batch.get_array_memory_size(), added)?;
        Ok(added as u64)
    }

    /// Slices where the encoders take them (Arrow IPC streams of flat columns).
    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities {
            slices: self.encoders.takes_slices(),
            ..SinkCapabilities::default()
        }
    }

    /// Slices are encoded straight from the held batches.
    fn write_flushed(&mut self, flushed: Flushed<'_>) -> Result<u64, WriterError> {
        let Flushed::Slices {
            destination: p,
            slices,
        } = flushed
        else {
            return flushed.write_as_batches(self);
        };
        if p >= self.open.len() {
            return Err(WriterError::NoSuchDestination {
                destination: p,
                destinations: self.open.len(),
            });
        }
        let mut parts = Vec::new();
        self.encoders
            .encode_slices(p, slices, &mut parts)
            .map_err(WriterError::Encode)?;
        let added: usize = parts.iter().map(|part| part.len()).sum();
        let open = &mut self.open[p];
        open.reserve(added);
        for part in &parts {
            open.extend_from_slice(part);
        }
        drop(parts);
        let rows = slices.iter().map(|(_, r)| r.len()).sum();
        // The Arrow size of the rows, as a batch of them would count it: their share of
        // each held batch's buffers.
        let arrow: usize = slices
            .iter()
            .map(|(source, r)| source.bytes() * r.len() / source.num_rows().max(1))
            .sum();
        self.written(p, rows, arrow, added)?;
        Ok(added as u64)
    }

    /// Ends every begun stream (held ones; spilled ones are ended already).
    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<(), WriterError> {
        for (p, bytes) in destination_bytes.iter_mut().enumerate() {
            let before = self.open[p].len();
            if self
                .encoders
                .finish_begun(p, &mut self.open[p])
                .map_err(WriterError::Encode)?
            {
                let added = self.open[p].len() - before;
                *bytes += added as u64;
                self.held += added;
                self.reservation.grow(added);
            }
        }
        Ok(())
    }
}

impl Drop for EncodedPartitions {
    fn drop(&mut self) {
        if self.spill.take().is_some() {
            let _ = std::fs::remove_file(&self.spill_path);
        }
    }
}

/// The data file and index of a task's sort-shuffle output, as Ballista names them.
pub fn shuffle_files(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("data.arrow"), dir.join("data.arrow.index"))
}

/// A task's files written under names of their own beside their final ones
/// (`data.arrow.{tag}` and `data.arrow.index.{tag}`), until [`StagedFiles::commit`] moves them
/// into place; dropped uncommitted, they are removed.
#[derive(Debug)]
pub(crate) struct StagedFiles {
    /// (staged, final) for the data file, then the index.
    files: [(PathBuf, PathBuf); 2],
    committed: bool,
}

impl StagedFiles {
    /// Renames the data file, then the index, into place (over an earlier execution's).
    pub(crate) fn commit(mut self) -> io::Result<()> {
        for (staged, target) in &self.files {
            std::fs::rename(staged, target)?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for StagedFiles {
    fn drop(&mut self) {
        if !self.committed {
            for (staged, _) in &self.files {
                let _ = std::fs::remove_file(staged);
            }
        }
    }
}

/// Writes `dir/data.arrow` and `dir/data.arrow.index` from every input's streams (in input
/// order): the schema-only stream, then partition by partition each input's spilled streams
/// and its held one; staged under `tag` (see [`StagedFiles`]). Returns the index's offsets. On
/// error nothing is left.
pub(crate) fn write_task_files(
    dir: &Path,
    tag: u64,
    schema: &SchemaRef,
    inputs: &mut [EncodedPartitions],
    partitions: usize,
) -> io::Result<(Vec<i64>, StagedFiles)> {
    let (data_path, index_path) = shuffle_files(dir);
    let staged = |path: &Path| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{tag}"));
        PathBuf::from(name)
    };
    let staged = StagedFiles {
        files: [
            (staged(&data_path), data_path),
            (staged(&index_path), index_path),
        ],
        committed: false,
    };
    let offsets = write_files(
        &staged.files[0].0,
        &staged.files[1].0,
        schema,
        inputs,
        partitions,
    )?;
    Ok((offsets, staged))
}

fn write_files(
    data_path: &Path,
    index_path: &Path,
    schema: &SchemaRef,
    inputs: &mut [EncodedPartitions],
    partitions: usize,
) -> io::Result<Vec<i64>> {
    let mut header = Vec::new();
    StreamWriter::try_new(&mut header, schema)
        .and_then(|mut writer| writer.finish())
        .map_err(io::Error::other)?;
    let mut data = BufWriter::with_capacity(1 << 20, File::create(data_path)?);
    data.write_all(&header)?;
    let mut at = header.len() as u64;
    let mut offsets = Vec::with_capacity(partitions + 1);
    for p in 0..partitions {
        offsets.push(at as i64);
        for input in inputs.iter_mut() {
            if let Some(spill) = input.spill.as_mut() {
                for &(offset, len) in &input.spilled[p] {
                    spill.seek(SeekFrom::Start(offset))?;
                    let copied = io::copy(&mut Read::by_ref(spill).take(len), &mut data)?;
                    if copied != len {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!(
                                "{}: {copied} of {len} spilled bytes of partition {p}",
                                input.spill_path.display()
                            ),
                        ));
                    }
                    at += len;
                }
            }
            let held = std::mem::take(&mut input.open[p]);
            data.write_all(&held)?;
            at += held.len() as u64;
        }
    }
    offsets.push(at as i64);
    data.flush()?;
    drop(data);
    let mut index = Vec::with_capacity(8 * offsets.len());
    for offset in &offsets {
        index.extend_from_slice(&offset.to_le_bytes());
    }
    std::fs::write(index_path, index)?;
    Ok(offsets)
}

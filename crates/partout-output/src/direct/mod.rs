//! Parquet files written as the workers flush: [`DirectParquet`], when the files open at once
//! fit the memory budget (a few dozen destinations at the default limit).
//!
//! Staging ([`StagedParquet`]) writes every row to a scratch file as Arrow IPC and reads it
//! back before it is encoded: on lineitem SF 1 into 64 files, a fifth of the run's CPU went
//! to that round trip (copies into and out of the page cache, UTF-8 checks of the strings
//! read back, gathering runs into batches). It is what many destinations need, since a
//! Parquet writer open for each would leave each a sliver of memory. With few, each
//! destination's file is open from its first flush, behind its own lock, and the worker that
//! flushes encodes:
//!
//! ```text
//!  first flushes ─► held, until 64Ki rows tell which columns a dictionary pays for
//!  worker w ── flush of p ─► lock p ─► p's ArrowWriter ─► finished pages ─► p's page file
//!                        └─ p was refused a writer (as many open as the budget holds)
//!                           ─► worker w's scratch file: p is staged, as StagedParquet does
//!  rolling over: a full file ends (its footer written) and waits under its hidden name;
//!               the destination's next file opens with its next rows
//!  finish ─► each open writer ends its last row group (pages read back) and its file, and
//!            its files are named; then the staged destinations' files, from their staged rows
//! ```
//!
//! A worker that finds a destination's lock held does not wait for it while the batches
//! waiting for that destination fit the writers' budget: it leaves its batch for the holder,
//! which writes what waits before it lets go (re-checked after, so none is left behind). At
//! few destinations one file's encoding is then one worker's whole work while the others
//! partition (at 4 values of lineitem the largest holds half the rows, and the workers spent
//! nearly half the run waiting on its lock).
//!
//! An open writer costs its pages being filled (pages end at [`PAGE_ROWS`] rows, so the
//! dictionary keys buffered for a page stay small) and its dictionaries; finished pages wait
//! in a [page file](pages) of the destination's, so row groups are as large as staged files'.
//! The writers together are held within their budget: past it, the writer that just wrote
//! ends its row group.

mod pages;

use super::staged::StagedParquet;
use super::{
    DICTIONARY_SAMPLE_ROWS, DestinationFile, FileList, Partial, ShuffleFile, contained, io_error,
    sink_error,
};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use pages::PageFile;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::file::properties::WriterProperties;
use partout_exchange::{BatchSink, WriterError};
use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};

/// The rows at which a direct writer ends a data page (checked between its mini-batches of
/// 1024 rows, so a page may hold a few more): the dictionary keys it buffers for a
/// page are 8 bytes a row, and 64 open files of lineitem held 1.75 MiB each at 8192 rows,
/// 1.26 MiB at 4096, for 0.4% more bytes on disk (measured, SF 1).
pub const PAGE_ROWS: usize = 4096;

/// What an open writer holds per leaf column, for planning: its page being filled (up to
/// [`PAGE_ROWS`] values and their dictionary keys), its dictionary and statistics. Measured on
/// lineitem SF 1 at 64 files: 100-110 KiB a column by the writer's own count
/// (`ArrowWriter::memory_size`), with 1.4x that in the process's peak RSS over what the
/// workers' buffers and the writers count.
const WRITER_COLUMN_BYTES: u64 = 128 << 10;

/// What an open writer holds besides its columns: its file's buffers and metadata, its page
/// file's page being read back.
const WRITER_BASE_BYTES: u64 = 256 << 10;

/// What an open writer holds for a leaf column whose dictionary is left to the parquet
/// writer (nested leaves, dictionary columns: no sample judges them): its dictionary grows to
/// the writer's limit (1 MiB by default) before it falls back to plain pages, and its hash
/// table with it. Measured: 50 bytes a row and growing in a file of a list and a struct.
const UNJUDGED_COLUMN_BYTES: u64 = 2 << 20;

/// A destination's writer.
enum Slot {
    /// No rows yet.
    Unopened,
    /// Open: rows go to its writer.
    Open(Box<OpenFile>),
    /// Refused a writer: its rows are staged.
    Staged,
    /// Written.
    Done,
    /// A write failed, for this reason.
    Failed(String),
}

/// A destination's files being written as flushed: the open one, and (rolling over) those
/// ended before it, waiting for their names until the output is finished.
struct OpenFile {
    /// The file being written; none between two files rolling over.
    part: Option<OpenPart>,
    /// What the writer held after its last write, as counted in [`DirectParquet::held`].
    held: usize,
    /// The properties a next file is opened with.
    properties: WriterProperties,
    /// Files ended rolling over, in order, not yet named.
    ended: Vec<(Partial, DestinationFile)>,
}

/// One file of a destination being written.
struct OpenPart {
    writer: ArrowWriter<File>,
    rows: u64,
    /// The file: a file abandoned (a failed write, a failed job) leaves nothing
    /// half-written behind.
    partial: Partial,
}

/// The properties chosen on the sample.
struct Chosen {
    /// The direct writers'.
    direct: WriterProperties,
    /// The staged destinations' (the same dictionaries; row groups bounded by bytes, as
    /// staging bounds them).
    staged: WriterProperties,
}

/// Rows held until the dictionaries are chosen.
#[derive(Default)]
struct Sample {
    batches: Vec<(usize, RecordBatch)>,
    rows: usize,
    bytes: usize,
}

/// Parquet files, one per destination, written as the workers flush, for as many
/// destinations as the budget holds writers for; the rest staged. See the module's
/// documentation.
pub struct DirectParquet {
    staged: StagedParquet,
    slots: Vec<Mutex<Slot>>,
    /// The most the open writers may hold together (their `memory_size`).
    budget: usize,
    /// What they hold.
    held: AtomicUsize,
    /// Each destination's batches left by a worker that found its lock held, for the holder
    /// to write; and their bytes, held within `budget` beside the writers'.
    waiting: Vec<Mutex<Vec<RecordBatch>>>,
    waiting_bytes: AtomicUsize,
    /// How many batches were left so.
    left: AtomicUsize,
    /// Writers that may be open at once, and those opened.
    writers: usize,
    opened: AtomicUsize,
    /// The writers' properties, once chosen (dictionaries from the sample).
    properties: OnceLock<Chosen>,
    sample: Mutex<Sample>,
}

impl std::fmt::Debug for DirectParquet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectParquet")
            .field("staged", &self.staged)
            .field("budget", &self.budget)
            .field("writers", &self.writers)
            .finish_non_exhaustive()
    }
}

impl DirectParquet {
    /// What each open writer of batches of `schema` is planned to hold: see
    /// [`new`](Self::new); `u64::MAX` for a schema Parquet cannot carry (which the output refuses, naming the
    /// column: [`StagedParquet::check_schema`]).
    pub fn writer_bytes(schema: &SchemaRef) -> u64 {
        // Checked first: the parquet crate's schema conversion panics on some of them.
        if StagedParquet::check_schema(schema).is_err() {
            return u64::MAX;
        }
        let Ok(parquet) = parquet::arrow::ArrowSchemaConverter::new().convert(schema) else {
            return u64::MAX;
        };
        let leaves = parquet.columns().iter().map(|leaf| {
            let top = schema.field_with_name(&leaf.path().parts()[0]);
            let judged = leaf.path().parts().len() == 1
                && top.is_ok_and(|f| {
                    !matches!(f.data_type(), arrow_schema::DataType::Dictionary(..))
                });
            match judged {
                true => WRITER_COLUMN_BYTES,
                false => UNJUDGED_COLUMN_BYTES,
            }
        });
        WRITER_BASE_BYTES + leaves.sum::<u64>()
    }

    /// The destinations of `staged` written directly, with writers holding at most `budget`
    /// bytes together: as many writers open as `budget` holds at
    /// [`writer_bytes`](Self::writer_bytes) each (at least one); destinations met past them
    /// are staged.
    pub fn new(staged: StagedParquet, budget: usize) -> Self {
        let writers = (budget as u64 / Self::writer_bytes(&staged.schema())).max(1) as usize;
        let destinations = staged.destinations();
        Self {
            staged,
            slots: (0..destinations)
                .map(|_| Mutex::new(Slot::Unopened))
                .collect(),
            budget,
            held: AtomicUsize::new(0),
            waiting: (0..destinations).map(|_| Mutex::default()).collect(),
            waiting_bytes: AtomicUsize::new(0),
            left: AtomicUsize::new(0),
            writers,
            opened: AtomicUsize::new(0),
            properties: OnceLock::new(),
            sample: Mutex::new(Sample::default()),
        }
    }

    /// How many batches a worker left for another that held their destination's lock (see
    /// the module's documentation).
    pub fn left(&self) -> usize {
        self.left.load(Ordering::Relaxed)
    }

    /// Worker `worker`'s sink: flushes go to their destination's writer, or to the worker's
    /// scratch file for a staged destination.
    ///
    /// # Errors
    /// When the scratch file cannot be created.
    pub fn sink(&self, worker: usize) -> Result<DirectSink<'_>, WriterError> {
        Ok(DirectSink {
            output: self,
            scratch: self.staged.scratch(worker)?,
        })
    }

    fn lock(&self, p: usize) -> Result<MutexGuard<'_, Slot>, WriterError> {
        super::lock_destination(&self.slots, p)
    }

    /// Writes destination `p`'s `batch`, held in the sample until the properties are chosen.
    fn write(
        &self,
        p: usize,
        batch: &RecordBatch,
        scratch: &mut ShuffleFile,
    ) -> Result<u64, WriterError> {
        if let Some(chosen) = self.properties.get() {
            return self.write_chosen(p, batch, &chosen.direct, scratch);
        }
        let mut sample = self
            .sample
            .lock()
            .map_err(|_| sink_error(Some(p), "a writer panicked while sampling"))?;
        if let Some(chosen) = self.properties.get() {
            drop(sample);
            return self.write_chosen(p, batch, &chosen.direct, scratch);
        }
        sample.rows += batch.num_rows();
        sample.bytes += batch.get_array_memory_size();
        sample.batches.push((p, batch.clone()));
        // The sample is held before any writer opens: within the writers' budget.
        if sample.rows < DICTIONARY_SAMPLE_ROWS && sample.bytes < self.budget / 2 {
            return Ok(0);
        }
        let properties = &self.choose(&sample).direct;
        let mut bytes = 0;
        for (q, batch) in std::mem::take(&mut sample.batches) {
            bytes += self.write_chosen(q, &batch, properties, scratch)?;
        }
        Ok(bytes)
    }

    /// Chooses the writers' properties on `sample`: dictionaries where they pay, pages of
    /// [`PAGE_ROWS`], row groups by rows only (their pages wait on disk).
    fn choose(&self, sample: &Sample) -> &Chosen {
        self.properties.get_or_init(|| {
            let staged = self
                .staged
                .dictionaries_from(sample.batches.iter().map(|(_, b)| b));
            let direct = staged
                .clone()
                .into_builder()
                .set_data_page_row_count_limit(PAGE_ROWS)
                .set_max_row_group_bytes(None)
                .build();
            Chosen { direct, staged }
        })
    }

    /// Writes `batch` to destination `p`, or leaves it for the worker holding `p`'s lock
    /// (see the module's documentation); the bytes written, with those of the batches left
    /// for `p` that this call wrote.
    fn write_chosen(
        &self,
        p: usize,
        batch: &RecordBatch,
        properties: &WriterProperties,
        scratch: &mut ShuffleFile,
    ) -> Result<u64, WriterError> {
        let slots = self.slots.get(p).ok_or(WriterError::NoSuchDestination {
            destination: p,
            destinations: self.slots.len(),
        })?;
        let mut slot = match slots.try_lock() {
            Ok(slot) => slot,
            Err(TryLockError::WouldBlock) if self.leave(p, batch)? => {
                return self.write_waiting(p, properties, scratch);
            }
            Err(_) => self.lock(p)?,
        };
        if matches!(*slot, Slot::Staged) {
            // Into this worker's own scratch file: no need to hold the lock.
            drop(slot);
            return scratch.write_batch(p, batch);
        }
        let mut bytes = self.write_slot(p, &mut slot, batch, properties, scratch)?;
        drop(slot);
        bytes += self.write_waiting(p, properties, scratch)?;
        Ok(bytes)
    }

    /// Leaves `batch` for the worker holding `p`'s lock, when the batches waiting fit the
    /// budget beside the open writers; false when they do not.
    fn leave(&self, p: usize, batch: &RecordBatch) -> Result<bool, WriterError> {
        let bytes = batch.get_array_memory_size();
        let fits = self
            .waiting_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |waiting| {
                let held = self.held.load(Ordering::Relaxed);
                (held + waiting + bytes <= self.budget).then_some(waiting + bytes)
            })
            .is_ok();
        if fits {
            self.waiting_list(p)?.push(batch.clone());
            self.left.fetch_add(1, Ordering::Relaxed);
        }
        Ok(fits)
    }

    fn waiting_list(&self, p: usize) -> Result<MutexGuard<'_, Vec<RecordBatch>>, WriterError> {
        super::lock_destination(&self.waiting, p)
    }

    /// Writes the batches left for `p` while no other worker holds its lock: by whoever holds
    /// it last, after every write, so none waits past the write after which it was left.
    fn write_waiting(
        &self,
        p: usize,
        properties: &WriterProperties,
        scratch: &mut ShuffleFile,
    ) -> Result<u64, WriterError> {
        let mut bytes = 0;
        loop {
            if self.waiting_list(p)?.is_empty() {
                return Ok(bytes);
            }
            // Held: its holder writes what waits when it has written.
            let Ok(mut slot) = self.slots[p].try_lock() else {
                return Ok(bytes);
            };
            let batches = std::mem::take(&mut *self.waiting_list(p)?);
            let left: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
            self.waiting_bytes.fetch_sub(left, Ordering::Relaxed);
            for batch in &batches {
                bytes += self.write_slot(p, &mut slot, batch, properties, scratch)?;
            }
        }
    }

    /// Writes `batch` to `p`'s slot, locked by the caller: to its writer (opened if one may
    /// be), or to the worker's scratch file when `p` is staged.
    fn write_slot(
        &self,
        p: usize,
        slot: &mut Slot,
        batch: &RecordBatch,
        properties: &WriterProperties,
        scratch: &mut ShuffleFile,
    ) -> Result<u64, WriterError> {
        if matches!(*slot, Slot::Unopened) {
            *slot = match self.claim() {
                true => Slot::Open(Box::new(self.open(p, properties)?)),
                false => Slot::Staged,
            };
        }
        let file = match slot {
            Slot::Open(file) => file,
            Slot::Staged => return scratch.write_batch(p, batch),
            Slot::Unopened | Slot::Done => {
                return Err(sink_error(Some(p), "its file is already closed"));
            }
            Slot::Failed(cause) => return Err(super::failed_earlier(p, cause)),
        };
        let written = contained(p, || self.write_open(p, file, batch));
        if let Err(e) = &written {
            *slot = Slot::Failed(super::causes(e));
        }
        written
    }

    /// Takes one of the writers that may be open, if one is left.
    fn claim(&self) -> bool {
        self.opened
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.writers).then_some(n + 1)
            })
            .is_ok()
    }

    fn open(&self, p: usize, properties: &WriterProperties) -> Result<OpenFile, WriterError> {
        Ok(OpenFile {
            part: Some(self.open_part(p, 0, properties)?),
            held: 0,
            properties: properties.clone(),
            ended: Vec::new(),
        })
    }

    /// Opens destination `p`'s file `part`.
    fn open_part(
        &self,
        p: usize,
        part: usize,
        properties: &WriterProperties,
    ) -> Result<OpenPart, WriterError> {
        let pages = PageFile::try_new(self.staged.dir()).map_err(io_error(Some(p)))?;
        let partial = Partial::new(self.staged.partial(p, part));
        let file = File::create(partial.path()).map_err(io_error(Some(p)))?;
        let options = ArrowWriterOptions::new()
            .with_properties(properties.clone())
            .with_page_store_factory(Arc::new(pages));
        let writer = ArrowWriter::try_new_with_options(file, self.staged.schema(), options)
            .map_err(|e| sink_error(Some(p), e))?;
        Ok(OpenPart {
            writer,
            rows: 0,
            partial,
        })
    }

    /// Writes `batch` to `file`, ending its row group when the open writers hold more than
    /// their budget and this one more than its share; the bytes the file grew by (encoded,
    /// as the writer estimates them).
    ///
    /// Rolling over, the batch is cut where the file fills (by rows, or at a row group's end
    /// past the byte limit) and the rest goes to the next file, opened as needed.
    fn write_open(
        &self,
        p: usize,
        file: &mut OpenFile,
        batch: &RecordBatch,
    ) -> Result<u64, WriterError> {
        let rollover = self.staged.rollover();
        let mut offset = 0;
        let mut grew = 0;
        while offset < batch.num_rows() {
            if file.part.is_none() {
                file.part = Some(self.open_part(p, file.ended.len(), &file.properties)?);
            }
            let Some(part) = file.part.as_mut() else {
                return Err(sink_error(Some(p), "its file is not open"));
            };
            let mut room = rollover.rows_left(part.rows);
            if rollover.max_bytes().is_some()
                && let Some(max) = file.properties.max_row_group_row_count()
            {
                room = room.min(max.saturating_sub(part.writer.in_progress_rows()).max(1) as u64);
            }
            let take = room.min((batch.num_rows() - offset) as u64) as usize;
            if take == 0 {
                // A full file is ended as it fills; were one left open, it ends now.
                self.end_part(p, file)?;
                continue;
            }
            let rows = match (offset, take) {
                (0, n) if n == batch.num_rows() => batch.clone(),
                _ => batch.slice(offset, take),
            };
            grew += self.write_part(p, file, &rows)?;
            offset += take;
            let full = file.part.as_ref().is_some_and(|part| {
                let bytes = part.writer.bytes_written() + part.writer.in_progress_size();
                rollover.is_set() && rollover.is_full(part.rows, bytes as u64)
            });
            if full {
                self.end_part(p, file)?;
            }
        }
        Ok(grew)
    }

    /// Writes `batch` to `file`'s open part, ending its row group when the open writers hold
    /// more than their budget and this one more than its share; the bytes it grew by.
    fn write_part(
        &self,
        p: usize,
        file: &mut OpenFile,
        batch: &RecordBatch,
    ) -> Result<u64, WriterError> {
        let parquet = |e| sink_error(Some(p), e);
        let Some(part) = file.part.as_mut() else {
            return Err(sink_error(Some(p), "its file is not open"));
        };
        let before = part.writer.bytes_written() + part.writer.in_progress_size();
        part.writer.write(batch).map_err(parquet)?;
        part.rows += batch.num_rows() as u64;
        let after = part.writer.bytes_written() + part.writer.in_progress_size();
        let held = part.writer.memory_size();
        let total = self.account(file, held);
        if total > self.budget && held > self.budget / self.writers.max(1) {
            let Some(part) = file.part.as_mut() else {
                return Err(sink_error(Some(p), "its file is not open"));
            };
            part.writer.flush().map_err(parquet)?;
            let held = part.writer.memory_size();
            self.account(file, held);
        }
        Ok(after.saturating_sub(before) as u64)
    }

    /// Ends `file`'s open part, rolling over: its footer written, waiting for its name.
    fn end_part(&self, p: usize, file: &mut OpenFile) -> Result<(), WriterError> {
        let Some(part) = file.part.take() else {
            return Ok(());
        };
        self.account(file, 0);
        let ended = self.finish_part(p, part)?;
        file.ended.push(ended);
        Ok(())
    }

    /// Ends `part`: its last row group and footer (its statistics read when asked for).
    fn finish_part(
        &self,
        p: usize,
        mut part: OpenPart,
    ) -> Result<(Partial, DestinationFile), WriterError> {
        let metadata = part.writer.finish().map_err(|e| sink_error(Some(p), e))?;
        let row_groups: Vec<u64> = metadata
            .row_groups()
            .iter()
            .map(|rg| rg.num_rows() as u64)
            .collect();
        let file = DestinationFile {
            name: String::new(),
            rows: row_groups.iter().sum(),
            bytes: part.writer.bytes_written() as u64,
            row_groups: Some(row_groups),
            columns: (self.staged.records_statistics())
                .then(|| super::statistics::of_file(&self.staged.schema(), &metadata)),
        };
        Ok((part.partial, file))
    }

    /// Counts that `file` now holds `held` bytes; what the open writers hold together.
    fn account(&self, file: &mut OpenFile, held: usize) -> usize {
        let total = if held >= file.held {
            self.held.fetch_add(held - file.held, Ordering::Relaxed) + (held - file.held)
        } else {
            self.held.fetch_sub(file.held - held, Ordering::Relaxed) - (file.held - held)
        };
        file.held = held;
        total
    }

    /// Ends every file: the sample's destinations written (when the input ended before the
    /// sample was full), each open writer closed, on `threads` threads; then the staged
    /// destinations' files. Files are named as [`StagedParquet::finish_named`] names them.
    ///
    /// # Errors
    /// Parquet and IO errors naming the destination; [`WriterError::Failed`] when cancelled.
    pub fn finish(
        self,
        names: Option<Vec<String>>,
        threads: usize,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<FileList>, WriterError> {
        let names =
            names.unwrap_or_else(|| (0..self.slots.len()).map(|p| self.staged.name(p)).collect());
        let sample = std::mem::take(
            &mut *self
                .sample
                .lock()
                .map_err(|_| sink_error(None, "a writer panicked while sampling"))?,
        );
        let mut written: Vec<Option<FileList>> = vec![None; names.len()];
        let past = |p: usize| sink_error(Some(p), format!("rows past the {} named", names.len()));
        if !sample.batches.is_empty() {
            // Every row so far is in the sample: no destination is open or staged yet. Each
            // sampled destination's file is written whole, one at a time.
            let properties = self.choose(&sample).direct.clone();
            let mut batches: Vec<&(usize, RecordBatch)> = sample.batches.iter().collect();
            batches.sort_by_key(|(p, _)| *p);
            for one in batches.chunk_by(|a, b| a.0 == b.0) {
                let p = one[0].0;
                let name = names.get(p).ok_or_else(|| past(p))?;
                let mut file = self.open(p, &properties)?;
                for (_, batch) in one {
                    contained(p, || self.write_open(p, &mut file, batch))?;
                }
                *self.lock(p)? = Slot::Open(Box::new(file));
                written[p] = Some(self.close(p, name)?);
            }
        }
        // Every write leaves no batch waiting behind it (see `write_waiting`).
        if let Some(p) = (0..self.waiting.len()).find(|&p| {
            self.waiting_list(p)
                .map_or(true, |waiting| !waiting.is_empty())
        }) {
            return Err(sink_error(Some(p), "batches were left unwritten"));
        }
        let mut open = Vec::new();
        for p in 0..self.slots.len() {
            if matches!(*self.lock(p)?, Slot::Open(_)) {
                if p >= names.len() {
                    return Err(past(p));
                }
                open.push(p);
            }
        }
        let next = AtomicUsize::new(0);
        let results: Vec<Result<Vec<(usize, FileList)>, WriterError>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads.clamp(1, open.len().max(1)))
                    .map(|_| {
                        scope.spawn(|| {
                            let mut done = Vec::new();
                            while let Some(&p) = open.get(next.fetch_add(1, Ordering::Relaxed)) {
                                if cancelled() {
                                    return Err(WriterError::Failed);
                                }
                                done.push((p, self.close(p, &names[p])?));
                            }
                            Ok(done)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(sink_error(None, "a thread closing Parquet files panicked"))
                        })
                    })
                    .collect()
            });
        for result in results {
            for (p, file) in result? {
                written[p] = Some(file);
            }
        }
        // The staged destinations' files: dictionaries as chosen.
        let properties = self.properties.get().map(|chosen| chosen.staged.clone());
        let Self { staged, .. } = self;
        staged.finish_rest(names, threads, cancelled, written, properties)
    }

    /// Closes destination `p`'s writer and renames its files to `name` (rolling over, each
    /// numbered: [`Rollover::file_name`](crate::Rollover::file_name)).
    fn close(&self, p: usize, name: &str) -> Result<FileList, WriterError> {
        let mut slot = self.lock(p)?;
        let Slot::Open(mut file) = std::mem::replace(&mut *slot, Slot::Done) else {
            return Err(sink_error(Some(p), "its file is not open"));
        };
        self.held.fetch_sub(file.held, Ordering::Relaxed);
        contained(p, || {
            if let Some(part) = file.part.take() {
                let ended = self.finish_part(p, part)?;
                file.ended.push(ended);
            }
            let rollover = self.staged.rollover();
            let mut files = FileList::new();
            for (k, (mut partial, mut ended)) in file.ended.drain(..).enumerate() {
                ended.name = rollover.file_name(name, k);
                partial
                    .place(&self.staged.dir().join(&ended.name))
                    .map_err(io_error(Some(p)))?;
                files.push(ended);
            }
            Ok(files)
        })
    }
}

/// One worker's way into a [`DirectParquet`]: see [`DirectParquet::sink`].
pub struct DirectSink<'a> {
    output: &'a DirectParquet,
    scratch: ShuffleFile,
}

impl BatchSink for DirectSink<'_> {
    fn write_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64, WriterError> {
        self.output.write(destination, batch, &mut self.scratch)
    }

    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<(), WriterError> {
        self.scratch.finish(destination_bytes)
    }
}

//! Parquet files written as the workers flush: [`FlushedParquet`], when the files open at once
//! fit the memory budget (a few dozen destinations at the default limit).
//!
//! Staging ([`StagedFiles`]) writes every row to a scratch file as Arrow IPC and reads it
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
//!                           ─► worker w's scratch file: p is staged, as StagedFiles does
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
//! in a [page file](crate::parquet_file::pages) of the destination's, so row groups are as large as staged files'.
//! The writers together are held within their budget: past it, the writer that just wrote
//! ends its row group.

use super::staged::StagedFiles;
use super::{
    DICTIONARY_SAMPLE_ROWS, DestinationFile, FileList, Partial, ShuffleFile, contained, io_error,
    sink_error,
};
use crate::parquet_file::ParquetFile;
use crate::parquet_file::pages::PageFile;
use crate::rollover::{Ended, PartFile, Parts, Rolling};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::file::properties::WriterProperties;
use partout_exchange::{BatchSink, WriterError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};

/// The rows at which a writer of a file written as flushed ends a data page (checked between its mini-batches of
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
    files: Rolling<ParquetFile, Unnamed>,
    /// What the open file's writer held after its last write, as counted in
    /// [`FlushedParquet::held`].
    held: usize,
    /// The properties each of its files is opened with.
    properties: WriterProperties,
}

/// A file ended, under its hidden name (a file abandoned, by a failed write or a failed job,
/// leaves nothing half-written behind), waiting for its name until the output is finished.
struct Unnamed {
    partial: Partial,
    file: DestinationFile,
}

impl Ended for Unnamed {
    fn bytes(&self) -> u64 {
        self.file.bytes
    }
}

/// Destination `p`'s files as a write opens, writes and ends them: each write counted in the
/// writers' budget, ending its row group when they hold too much (see
/// [`FlushedParts::write`]).
struct FlushedParts<'a> {
    output: &'a FlushedParquet,
    p: usize,
    properties: &'a WriterProperties,
    /// The open file's count in [`FlushedParquet::held`].
    held: &'a mut usize,
    /// The bytes the files grew by (encoded, as the writer estimates them).
    grew: u64,
}

impl Parts for FlushedParts<'_> {
    type File = ParquetFile;
    type Ended = Unnamed;

    fn open(&mut self, part: usize) -> Result<ParquetFile, WriterError> {
        let (p, staged) = (self.p, &self.output.staged);
        let pages = PageFile::try_new(staged.dir()).map_err(io_error(Some(p)))?;
        let path = staged.partial(p, part);
        ParquetFile::create(p, path, staged.schema(), self.properties, Some(pages))
    }

    /// Writes `batch`, ending the file's row group when the open writers hold more than
    /// their budget and this one more than its share.
    fn write(&mut self, file: &mut ParquetFile, batch: &RecordBatch) -> Result<(), WriterError> {
        let output = self.output;
        let before = file.bytes();
        file.write(batch)?;
        let after = file.bytes();
        let held = file.memory_size();
        let total = output.account(self.held, held);
        if total > output.budget && held > output.budget / output.writers.max(1) {
            file.end_row_group()?;
            output.account(self.held, file.memory_size());
        }
        self.grew += after.saturating_sub(before);
        Ok(())
    }

    /// Ends the file: its last row group and footer (its statistics read when asked for).
    fn close(&mut self, file: ParquetFile, _part: usize) -> Result<Unnamed, WriterError> {
        self.output.account(self.held, 0);
        let (partial, file) = file.end(self.output.staged.records_statistics())?;
        Ok(Unnamed { partial, file })
    }
}

/// The properties chosen on the sample.
struct Chosen {
    /// The properties of the files written as flushed.
    flushed: WriterProperties,
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
pub struct FlushedParquet {
    staged: StagedFiles,
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

impl std::fmt::Debug for FlushedParquet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushedParquet")
            .field("staged", &self.staged)
            .field("budget", &self.budget)
            .field("writers", &self.writers)
            .finish_non_exhaustive()
    }
}

impl FlushedParquet {
    /// What each open writer of batches of `schema` is planned to hold: see
    /// [`new`](Self::new); `u64::MAX` for a schema Parquet cannot carry (which the output refuses, naming the
    /// column: [`StagedFiles::check_schema`]).
    pub fn writer_bytes(schema: &SchemaRef) -> u64 {
        // Checked first: the parquet crate's schema conversion panics on some of them.
        if StagedFiles::check_schema(schema).is_err() {
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

    /// The destinations of `staged` written as flushed, with writers holding at most `budget`
    /// bytes together: as many writers open as `budget` holds at
    /// [`writer_bytes`](Self::writer_bytes) each (at least one); destinations met past them
    /// are staged.
    pub fn new(staged: StagedFiles, budget: usize) -> Self {
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
    pub fn sink(&self, worker: usize) -> Result<FlushedSink<'_>, WriterError> {
        Ok(FlushedSink {
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
            return self.write_chosen(p, batch, &chosen.flushed, scratch);
        }
        let mut sample = self
            .sample
            .lock()
            .map_err(|_| sink_error(Some(p), "a writer panicked while sampling"))?;
        if let Some(chosen) = self.properties.get() {
            drop(sample);
            return self.write_chosen(p, batch, &chosen.flushed, scratch);
        }
        sample.rows += batch.num_rows();
        sample.bytes += batch.get_array_memory_size();
        sample.batches.push((p, batch.clone()));
        // The sample is held before any writer opens: within the writers' budget.
        if sample.rows < DICTIONARY_SAMPLE_ROWS && sample.bytes < self.budget / 2 {
            return Ok(0);
        }
        let properties = &self.choose(&sample).flushed;
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
            let flushed = staged
                .clone()
                .into_builder()
                .set_data_page_row_count_limit(PAGE_ROWS)
                .set_max_row_group_bytes(None)
                .build();
            Chosen { flushed, staged }
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
                true => Slot::Open(Box::new(self.open(properties))),
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

    fn open(&self, properties: &WriterProperties) -> OpenFile {
        OpenFile {
            files: Rolling::new(self.staged.rollover()),
            held: 0,
            properties: properties.clone(),
        }
    }

    /// Writes `batch` to destination `p`'s `file`, rolling over where it fills (by rows, or
    /// at a row group's end past the byte limit); the bytes its files grew by (encoded, as
    /// the writer estimates them).
    fn write_open(
        &self,
        p: usize,
        file: &mut OpenFile,
        batch: &RecordBatch,
    ) -> Result<u64, WriterError> {
        let OpenFile {
            files,
            held,
            properties,
        } = file;
        let mut parts = FlushedParts {
            output: self,
            p,
            properties,
            held,
            grew: 0,
        };
        files.write(batch, &mut parts)?;
        Ok(parts.grew)
    }

    /// Counts that a writer counted at `counted` now holds `held` bytes; what the open
    /// writers hold together.
    fn account(&self, counted: &mut usize, held: usize) -> usize {
        let total = if held >= *counted {
            self.held.fetch_add(held - *counted, Ordering::Relaxed) + (held - *counted)
        } else {
            self.held.fetch_sub(*counted - held, Ordering::Relaxed) - (*counted - held)
        };
        *counted = held;
        total
    }

    /// Ends every file: the sample's destinations written (when the input ended before the
    /// sample was full), each open writer closed, on `threads` threads; then the staged
    /// destinations' files. Files are named as [`StagedFiles::finish_named`] names them.
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
            let properties = self.choose(&sample).flushed.clone();
            let mut batches: Vec<&(usize, RecordBatch)> = sample.batches.iter().collect();
            batches.sort_by_key(|(p, _)| *p);
            for one in batches.chunk_by(|a, b| a.0 == b.0) {
                let p = one[0].0;
                let name = names.get(p).ok_or_else(|| past(p))?;
                let mut file = self.open(&properties);
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
        let Slot::Open(file) = std::mem::replace(&mut *slot, Slot::Done) else {
            return Err(sink_error(Some(p), "its file is not open"));
        };
        let OpenFile {
            files,
            mut held,
            properties,
        } = *file;
        let ended = contained(p, || {
            let mut parts = FlushedParts {
                output: self,
                p,
                properties: &properties,
                held: &mut held,
                grew: 0,
            };
            // A destination given a writer was given rows: it has a file.
            files.finish(&mut parts, true)
        });
        // Whatever happened, the writer holds nothing now.
        self.account(&mut held, 0);
        let rollover = self.staged.rollover();
        let mut named = FileList::new();
        for (
            k,
            Unnamed {
                mut partial,
                mut file,
            },
        ) in ended?.into_iter().enumerate()
        {
            file.name = rollover.file_name(name, k);
            partial
                .place(&self.staged.dir().join(&file.name))
                .map_err(io_error(Some(p)))?;
            named.push(file);
        }
        Ok(named)
    }
}

/// One worker's way into a [`FlushedParquet`]: see [`FlushedParquet::sink`].
pub struct FlushedSink<'a> {
    output: &'a FlushedParquet,
    scratch: ShuffleFile,
}

impl BatchSink for FlushedSink<'_> {
    fn write_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64, WriterError> {
        self.output.write(destination, batch, &mut self.scratch)
    }

    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<(), WriterError> {
        self.scratch.finish(destination_bytes)
    }
}

//! partout-output: the outputs partout writes, and the one owner of each. What it is ([`OutputSpec`]: format ×
//! compression × layout × [`Location`]), how it is written ([`OutputSpec::create`] gives an
//! [`OutputWriter`], whose sinks the workers write into and whose
//! [`finish`](OutputWriter::finish) ends every file), and where it is committed
//! ([`location`]: staged, then made visible all at once).
//!
//! ```text
//!  OutputSpec ── check_schema (before anything is written)
//!     │
//!     └─ create(dir, Destinations) ─► dyn OutputWriter
//!           files    DestinationFiles  one stream file per destination, shared by workers
//!           shuffle  ShuffleOutput     one data file + index per worker
//!           staged   StagedFiles     rows staged per worker, then each file written whole
//!                                      (Parquet, or Arrow IPC files partitioning by value)
//!           flushed  FlushedParquet    Parquet files written as flushed, when their writers
//!                                      fit the budget (the rest staged)
//!        worker w ─► sink(w): a BatchSink ─► … ─► finish(Finish) ─► Written ─► manifest
//!        (a destination's file rolls over to its next at a size: rollover::Rolling, the one
//!        driver every file writer shares; every Parquet file is a parquet_file::ParquetFile)
//!  Location ─► Place::stage ─► Pending::dir (the writers' directory) ─► Pending::commit
//!
//!  FinishedOutput::open(dir) ── the manifest's spec ─► cursor(p): FileCursor
//!        ─► next_message: Message (IPC batch with its dictionaries, or a Presto page)
//! ```
//!
//! How it is read back ([`finished`]): [`FinishedOutput`] opens a committed output through
//! its manifest and reads each destination's messages with a [`FileCursor`], through the
//! shuffle indexes or from the destination's file; the network servers, Python's `read` and
//! `partout inspect` all read this way.
//!
//! A new format is a variant of [`partout_format::Format`] and the file that writes it (a
//! stream encoding in partout-format, or a staged file writer here); a new location is a
//! variant of [`Location`] and one file under [`location`] implementing [`Place`].
//!
//! Also here: the [`manifest`] (`_manifest.json`, what a run wrote, read back by
//! [`manifest::Manifest::read`]) and [`SortedRuns`], the sink that spills a worker's rows
//! sorted by destination and merges them per destination when memory is short (each run,
//! like every spill of rows here, a `spill_file::SpillFile`).
//!
//! Inputs are partout-input's: this crate reads its own files back through that crate's
//! checked readers and object store client, and nothing there depends on anything here.

// No unsafe code but `read_back`'s: arrow's validation turned off for the IPC this run wrote
// itself, every batch checked after but for UTF-8.
#![deny(unsafe_code)]

mod files;
pub mod finished;
mod flushed;
mod layout;
pub mod location;
pub mod manifest;
mod names;
mod parquet_file;
mod parquet_options;
mod read_back;
mod rollover;
mod shuffle;
mod sort_order;
mod sorted_runs;
mod spec;
mod spill_file;
mod staged;
mod statistics;

pub use files::{DestinationFiles, FilesHandle};
pub use finished::{FileCursor, FinishedOutput};
pub use flushed::{FlushedParquet, FlushedSink, PAGE_ROWS};
pub use layout::Layout;
pub use location::{
    Commit, LocalDir, Location, Pending, Place, RunShape, WriteMode, check_compatible,
};
pub use names::FileNamePattern;
pub use parquet_options::ParquetSettings;
pub use rollover::Rollover;
pub(crate) use shuffle::for_each_shuffle_range;
pub use shuffle::{
    SHUFFLE_INDEX_MAGIC, ShuffleFile, ShuffleRange, parse_shuffle_index, read_shuffle_index,
};
pub use sort_order::{SortKey, SortOrder};
pub use sorted_runs::{RunOptions, SortedRuns};
pub use spec::OutputSpec;
pub use staged::{ParquetWriterConfig, Sorting, StagedFiles};
pub use statistics::ColumnStatistics;

use arrow_schema::SchemaRef;
use partout_exchange::{BatchSink, WriterError};
use partout_format::{Compression, Encoding, Format};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Why an output cannot be written as asked.
#[derive(Debug)]
#[non_exhaustive]
pub enum OutputError {
    /// A spec that cannot work (a compression its format does not take, Parquet in the
    /// shuffle layout, a location that names no directory), named with values.
    Invalid(String),
    /// The location holds data, and overwriting it was not asked for: the location.
    NotEmpty(String),
    /// The commit was cancelled before it was done: nothing is left of the output.
    Cancelled,
    /// A storage operation failed.
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The system's error.
        source: io::Error,
    },
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(what) => f.write_str(what),
            Self::NotEmpty(location) => write!(
                f,
                "{location} exists and is not empty (replacing it takes the overwrite option)"
            ),
            Self::Cancelled => f.write_str("cancelled while committing: nothing was written"),
            Self::Io { context, .. } => f.write_str(context),
        }
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Invalid(_) | Self::NotEmpty(_) | Self::Cancelled => None,
        }
    }
}

/// The result type of the output layer.
pub type Result<T, E = OutputError> = std::result::Result<T, E>;

/// `context` for a storage error.
pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> OutputError {
    let context = context.into();
    move |source| OutputError::Io { context, source }
}

/// A sink error whose source is `e` (a Parquet error, or a message).
pub(crate) fn sink_error(
    destination: Option<usize>,
    e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> WriterError {
    WriterError::sink(destination, e)
}

/// Runs `work` on destination `p`'s rows; a panic in a format crate (the parquet writer, or
/// arrow-ipc meeting a damaged scratch file) is an error naming the destination.
pub(crate) fn contained<T>(
    p: usize,
    work: impl FnOnce() -> std::result::Result<T, WriterError>,
) -> std::result::Result<T, WriterError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        Err(sink_error(
            Some(p),
            format!(
                "writing its file failed: {}",
                partout_input::panic_message(panic.as_ref())
            ),
        ))
    })
}

/// Rows sampled to choose the columns worth a dictionary: the first flushes of a Parquet
/// file written as flushed, and the largest destination's rows when staged.
pub(crate) const DICTIONARY_SAMPLE_ROWS: usize = 1 << 16;

/// A write to destination `p`'s file after a write to it failed with `cause`: the error
/// says why, whichever worker's error the run reports (a disk that filled up, not a file
/// closed).
pub(crate) fn failed_earlier(p: usize, cause: &str) -> WriterError {
    sink_error(Some(p), format!("its file failed earlier: {cause}"))
}

/// What `e` says after its first line (its causes, joined): why a write failed.
pub(crate) fn causes(e: &WriterError) -> String {
    let mut text = Vec::new();
    let mut next = std::error::Error::source(e);
    while let Some(cause) = next {
        text.push(cause.to_string());
        next = cause.source();
    }
    match text.is_empty() {
        true => e.to_string(),
        false => text.join(": "),
    }
}

/// A sink error caused by the system's error.
pub(crate) fn io_error(destination: Option<usize>) -> impl FnOnce(io::Error) -> WriterError {
    move |source| WriterError::sink(destination, source)
}

/// A file being written under a hidden name (`.NAME.partial`): removed when dropped unless it
/// was put in place, so nothing half-written is left behind.
#[derive(Debug)]
pub(crate) struct Partial {
    path: PathBuf,
    placed: bool,
}

impl Partial {
    /// The file at `path`, not yet in place.
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            placed: false,
        }
    }

    /// Where it is written.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Renames it to `to`, its directories made first.
    pub(crate) fn place(&mut self, to: &Path) -> io::Result<()> {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(&self.path, to)?;
        self.placed = true;
        Ok(())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Destination `p`'s slot among `slots`, locked: the files of every layout that shares a
/// destination's file between workers keep one lock per destination.
pub(crate) fn lock_destination<T>(
    slots: &[Mutex<T>],
    p: usize,
) -> Result<std::sync::MutexGuard<'_, T>, WriterError> {
    let slot = slots.get(p).ok_or(WriterError::NoSuchDestination {
        destination: p,
        destinations: slots.len(),
    })?;
    // A writer that panicked holding the lock left the file unusable.
    slot.lock()
        .map_err(|_| sink_error(Some(p), "a writer of this destination panicked"))
}

/// The extension of a destination's file written as `format` is flushed (or, for Parquet,
/// whole): `parquet`, `arrows` (an Arrow IPC stream), `presto`.
pub fn extension(format: Format) -> &'static str {
    match format {
        Format::Parquet => "parquet",
        Format::Ipc => "arrows",
        Format::Presto => "presto",
    }
}

/// One of a destination's finished files (one per destination, unless files roll over at a
/// size: [`Rollover`]); as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestinationFile {
    /// Its name, a path relative to the output's directory.
    pub name: String,
    /// Its rows.
    pub rows: u64,
    /// Its size.
    pub bytes: u64,
    /// Rows of each of its row groups, in order (Parquet files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_groups: Option<Vec<u64>>,
    /// Each top-level column's smallest and largest value and nulls, from the footer written
    /// (Parquet files, when asked for; nested columns have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<ColumnStatistics>>,
}

/// A destination's files, in order: one inline, more (rolling over) on the heap.
pub type FileList = smallvec::SmallVec<[DestinationFile; 1]>;

/// What a finished writer wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Each destination's files, in destination order, each destination's in order (files
    /// and staged layouts): one, several when they roll over, none for Presto pages of no
    /// rows.
    Files(Vec<FileList>),
    /// Each worker's data file and index, by worker (the shuffle layout): the files' base
    /// names, `shuffle-000` for `shuffle-000.data` and `shuffle-000.index`.
    Shuffle(Vec<String>),
}

/// The destinations an output is made for.
#[derive(Debug, Clone)]
pub struct Destinations {
    /// Their batches' schema.
    pub schema: SchemaRef,
    /// How many.
    pub count: usize,
    /// The file name prefix of each destination's file (`part`, or Spark's `bucket`).
    pub prefix: String,
    /// Whether each destination's file is written whole from staged rows (see
    /// [`OutputSpec::is_staged`]).
    pub staged: bool,
    /// The most a Parquet writer's open row group may hold, in bytes (from the memory
    /// budget; see [`ParquetWriterConfig::row_group_bytes`]).
    pub row_group_bytes: usize,
    /// The most Parquet writers open while the workers run may hold together: then files are
    /// written as they are flushed ([`FlushedParquet`]), as many as it holds. Zero: every
    /// staged file is written from its staged rows.
    pub parquet_writers_open: usize,
    /// Sorting the rows of each file ([`OutputSpec::sort_order`]), the most each thread's
    /// rows being sorted may hold, in bytes.
    pub sort_bytes: usize,
}

/// How a writer finishes.
pub struct Finish<'a> {
    /// Threads that end the files.
    pub threads: usize,
    /// Asked between files: whether to stop (the writer then fails with
    /// [`WriterError::Failed`]).
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
    /// Each destination's file name, a path relative to the directory, for the first
    /// `names.len()` destinations (partitioning by value: the destinations met, at their
    /// Hive paths); `None`: every destination at its numbered name. Staged outputs only.
    pub names: Option<Vec<String>>,
}

/// The writer of one output: the sinks its workers write into, and the end of its files.
/// One implementation per layout; made by [`OutputSpec::create`].
pub trait OutputWriter: fmt::Debug + Send + Sync {
    /// Worker `worker`'s sink (each worker takes one, once).
    ///
    /// # Errors
    /// When its files cannot be created.
    fn sink(&self, worker: usize) -> Result<Box<dyn BatchSink + Send + '_>, WriterError>;

    /// Ends every file once every worker's sink is finished, and says what was written.
    ///
    /// # Errors
    /// Encoding and IO errors naming the destination; [`WriterError::Failed`] when
    /// cancelled. Nothing partial is left in the directory then.
    fn finish(self: Box<Self>, finish: Finish<'_>) -> Result<Written, WriterError>;
}

/// How rows bound for staged files are staged: uncompressed Arrow IPC. On lineitem SF 1, LZ4
/// took more CPU (compressing 1.2 GiB, then decompressing it) than writing twice the bytes
/// into the page cache and reading them back (see bench/HISTORY.md, issue 12); the scratch
/// files take as much disk as the input's Arrow data.
const STAGING_COMPRESSION: Compression = Compression::None;

impl OutputSpec {
    /// The writer of this output into `dir` (the [`Pending::dir`] of the location's stage) for
    /// `destinations`: the one place the layout and format choose how files are made.
    ///
    /// # Errors
    /// When `dir` cannot be written; a schema the format cannot carry; staged Presto pages
    /// (files written whole are Parquet or Arrow IPC).
    pub fn create(
        &self,
        dir: &Path,
        destinations: Destinations,
    ) -> Result<Box<dyn OutputWriter>, WriterError> {
        let Destinations {
            schema,
            count,
            prefix,
            staged,
            row_group_bytes,
            parquet_writers_open,
            sort_bytes,
        } = destinations;
        if self.layout() == Layout::Shuffle {
            return Ok(Box::new(ShuffleOutput {
                dir: dir.to_path_buf(),
                schema,
                destinations: count,
                encoding: self.encoding()?,
                workers: Mutex::new(Vec::new()),
            }));
        }
        if !staged && self.format() != Format::Parquet {
            let files = DestinationFiles::try_new(dir, &prefix, schema, count, self.encoding()?)?
                .with_rollover(self.rollover());
            return Ok(Box::new(files));
        }
        let properties = match self.format() {
            Format::Parquet => self
                .parquet_properties(&schema)
                .map_err(|e| sink_error(None, e.to_string()))?,
            _ => Default::default(),
        };
        let options = ParquetWriterConfig {
            properties,
            row_group_bytes,
            staging: STAGING_COMPRESSION,
            chosen: self.parquet_settings().clone(),
        };
        let mut files = StagedFiles::try_new(dir, &prefix, schema, count, options)?
            .with_rollover(self.rollover())
            .with_sorting(Sorting {
                order: self.sort_order().clone(),
                memory: sort_bytes,
            })?;
        if self.format() != Format::Parquet {
            files = files.with_ipc_output(self.encoding()?)?;
        } else if parquet_writers_open > 0 && !files.is_sorted() {
            return Ok(Box::new(FlushedParquet::new(files, parquet_writers_open)));
        }
        Ok(Box::new(files))
    }
}

impl OutputWriter for DestinationFiles {
    fn sink(&self, _worker: usize) -> Result<Box<dyn BatchSink + Send + '_>, WriterError> {
        Ok(Box::new(self.handle()))
    }

    fn finish(self: Box<Self>, finish: Finish<'_>) -> Result<Written, WriterError> {
        if finish.names.is_some() {
            return Err(sink_error(None, "stream files take no names of their own"));
        }
        Ok(Written::Files((*self).finish(finish.threads)?))
    }
}

impl OutputWriter for StagedFiles {
    fn sink(&self, worker: usize) -> Result<Box<dyn BatchSink + Send + '_>, WriterError> {
        Ok(Box::new(self.scratch(worker)?))
    }

    fn finish(self: Box<Self>, finish: Finish<'_>) -> Result<Written, WriterError> {
        let files = match finish.names {
            None => (*self).finish(finish.threads, finish.cancelled)?,
            Some(names) => (*self).finish_named(names, finish.threads, finish.cancelled)?,
        };
        Ok(Written::Files(files))
    }
}

impl OutputWriter for FlushedParquet {
    fn sink(&self, worker: usize) -> Result<Box<dyn BatchSink + Send + '_>, WriterError> {
        Ok(Box::new(FlushedParquet::sink(self, worker)?))
    }

    fn finish(self: Box<Self>, finish: Finish<'_>) -> Result<Written, WriterError> {
        let files = (*self).finish(finish.names, finish.threads, finish.cancelled)?;
        Ok(Written::Files(files))
    }
}

/// The shuffle layout's writer: each worker's own [`ShuffleFile`], `shuffle-{w:03}`.
#[derive(Debug)]
struct ShuffleOutput {
    dir: PathBuf,
    schema: SchemaRef,
    destinations: usize,
    encoding: Encoding,
    /// The workers whose files were made.
    workers: Mutex<Vec<usize>>,
}

impl OutputWriter for ShuffleOutput {
    fn sink(&self, worker: usize) -> Result<Box<dyn BatchSink + Send + '_>, WriterError> {
        let name = format!("shuffle-{worker:03}");
        let file = ShuffleFile::try_new(
            &self.dir,
            &name,
            self.schema.clone(),
            self.destinations,
            self.encoding,
        )?;
        self.workers
            .lock()
            .map_err(|_| sink_error(None, "a worker panicked while creating its shuffle file"))?
            .push(worker);
        Ok(Box::new(file))
    }

    fn finish(self: Box<Self>, finish: Finish<'_>) -> Result<Written, WriterError> {
        if finish.names.is_some() {
            return Err(sink_error(None, "shuffle files take no names of their own"));
        }
        let mut workers = self
            .workers
            .into_inner()
            .map_err(|_| sink_error(None, "a worker panicked while creating its shuffle file"))?;
        workers.sort_unstable();
        Ok(Written::Shuffle(
            workers.iter().map(|w| format!("shuffle-{w:03}")).collect(),
        ))
    }
}

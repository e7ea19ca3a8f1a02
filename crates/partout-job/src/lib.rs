//! partout-job: the parallel repartition job as a library — files in, one output per
//! destination out, within a memory limit.
//!
//! ```text
//!  JobOptions ─► Job::try_new (options checked, inputs found and cut into frames, keys and
//!                              formats checked against the schema, memory limit shared out)
//!             ─► Job::run     (rayon workers, each with its own PartitionedWriter, into a
//!                              staging directory; Parquet: rows staged in scratch files,
//!                              then each file written whole; _manifest.json; renamed into
//!                              place)
//! ```
//!
//! ```no_run
//! use partout_job::{Compression, Job, JobOptions};
//!
//! let options = JobOptions::new(["data/"], "out/", 64)
//!     .with_keys(["l_orderkey"])
//!     .with_compression(Compression::Snappy)
//!     .with_memory_limit(256 << 20);
//! let report = Job::try_new(options)?.run(&())?;
//! println!("{} rows in {:.2} s", report.manifest.input_rows, report.seconds);
//! # Ok::<(), partout_job::JobError>(())
//! ```
//!
//! A failed, cancelled or interrupted run leaves no output: everything is written into a
//! hidden sibling of the output directory, renamed into place at the end; a later run removes
//! what a killed one left.
//!
//! # Keeping the memory bound in your process
//!
//! The job holds its buffers, open row groups and encoders within
//! [`JobOptions::memory_limit`] (over what reading the input takes). Whether the process's
//! resident memory follows depends on the allocator giving freed memory back. The `partout`
//! binary uses mimalloc and, for `repartition`, starts with `MIMALLOC_PURGE_DELAY=2` (`100`
//! from a 256 MiB limit, where the memory kept is a small share of the limit and giving it
//! back at once cost a sixth of the run in pages faulted in again) and
//! `MIMALLOC_ARENA_EAGER_COMMIT=0` (it sets them and re-executes itself, since mimalloc reads
//! them before `main`): with mimalloc's defaults (a 10 ms purge delay, arenas committed
//! eagerly) a 24 MiB limit peaked at over 100 MiB. An embedder that wants the bound must do
//! the same: use mimalloc as the global allocator and set both variables in the environment
//! the process starts with (or call `mi_option_set` before any allocation). With another
//! allocator, compare the manifest's `peak_rss_bytes` with the limit on your data. The cost: the in-memory writer ran 30-60% slower under a 2 ms purge delay, which is why
//! the binary applies the settings to the file job only.

#![forbid(unsafe_code)]

mod budget;
mod by_value;
mod error;
pub mod hive;
mod options;
mod partitioning;
mod plan;
mod progress;
mod record;
mod run;
mod stream;
mod worker;

pub use budget::{BudgetExt, Discovered};
pub use error::{JobError, Result};
pub use options::{
    DEFAULT_MAX_PARTITIONS, DEFAULT_MEMORY_LIMIT, FileNamePattern, JobOptions, ParquetSettings,
    Rollover, Scheme, SortKey, SortOrder, StorageOption, StorageOptions, WriteMode,
};
pub use plan::Job;
pub use progress::Progress;
pub use run::{Report, repartition};
// Sizes as users write them (`--memory-limit 256MiB`) are read as the output layer reads them.
pub use partout_input::parse_bytes;
// The manifest and the options of the outputs it names are partout-output's; here as ever.
pub use partout_output::manifest::{
    Budget, Compression, DestinationEntry, DestinationFile, Format, Layout, MANIFEST_FILE,
    Manifest, ManifestError, RowGroupSizes, ShuffleFiles, WorkerTimings, ZstdLevel,
};

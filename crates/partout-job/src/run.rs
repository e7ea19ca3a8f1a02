//! [`Job::run`]: the checked job run in parallel — orchestration only.
//!
//! ```text
//!  Job::run: the location's stage ─► the spec's writer ─► workers (crate::worker, a rayon
//!            pool of their own) each into its sink ─► the writer's finish ─► _manifest.json
//!            ─► the stage committed
//! ```
//!
//! Everything is written into the location's stage, committed at the end: a failed,
//! cancelled or interrupted run leaves no output.

use crate::budget::BudgetExt;
use crate::by_value::{self};
use crate::error::{JobError, Result, io, writing};
use crate::options::{JobOptions, Scheme};
use crate::partitioning::describe_bounds;
use crate::plan::Job;
use crate::progress::Progress;
use crate::record::{self, Outcome};
use crate::worker::{Workers, first_error};
use partout_output::manifest::{Manifest, WorkerTimings};
use partout_output::{Commit, Destinations, Finish};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::Instant;

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The manifest written beside the outputs.
    pub manifest: Manifest,
    /// Wall time of the whole job, checks included.
    pub seconds: f64,
}

impl Job {
    /// Runs the workers into a staging directory, writes the manifest, and renames the
    /// staging directory to the output (replacing what is there). On any failure nothing is
    /// left behind.
    ///
    /// # Errors
    /// [`JobError::Input`] for input that cannot be read; [`JobError::Write`] for partitioning,
    /// encoding and file errors; [`JobError::Io`]; [`JobError::WorkerPanicked`];
    /// [`JobError::Cancelled`].
    pub fn run(self, progress: &dyn Progress) -> Result<Report> {
        let stage = self.spec.location().place().stage(self.options.mode)?;
        progress.start(self.input_rows());
        // A writer's error names the rows and the destination; the directory it wrote in
        // names the disk (one that filled up, say).
        let mut manifest = self.write_all(progress, stage.dir()).map_err(|e| match e {
            JobError::Write { context, source } => JobError::Write {
                context: format!("{context} (writing in {})", stage.dir().display()),
                source,
            },
            e => e,
        })?;
        if let Some(pattern) = self.spec.file_names() {
            pattern.apply(stage.dir(), &mut manifest, self.options.partitions)?;
        }
        // The workers and their buffers are gone: the commit may hold most of the limit.
        let cancelled = || progress.cancelled();
        let commit = Commit {
            memory: self.options.memory_limit / 4 * 3,
            cancelled: &cancelled,
        };
        let manifest = stage.commit(manifest, &commit)?;
        Ok(Report {
            manifest,
            seconds: self.started.elapsed().as_secs_f64(),
        })
    }

    /// Runs the workers into the output's writer in `dir`, ends its files and writes the
    /// manifest there.
    fn write_all(&self, progress: &dyn Progress, dir: &Path) -> Result<Manifest> {
        let run = Workers {
            job: self,
            progress,
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            timings: Mutex::new(Vec::new()),
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads)
            .thread_name(|i| format!("partout-worker-{i}"))
            .build()
            .map_err(|e| io("starting the worker threads")(std::io::Error::other(e)))?;
        // Sorting, each thread writing files has half its share for the rows being sorted,
        // half for its open row group.
        let (row_group_bytes, sort_bytes) = match self.spec.sort_order().is_empty() {
            true => (self.budget.row_group_bytes(self.threads), 0),
            false => (
                self.budget.row_group_bytes(2 * self.threads),
                (self.budget.parquet_row_groups / 2 / self.threads as u64) as usize,
            ),
        };
        let destinations = Destinations {
            schema: self.out_schema.clone(),
            count: self.destinations as usize,
            prefix: self.prefix().to_string(),
            staged: self.spec.is_staged(self.by_value.is_some()),
            row_group_bytes,
            parquet_writers_open: self.budget.parquet_writers_open as usize,
            sort_bytes,
        };
        let staged = destinations.staged;
        let output = self
            .spec
            .create(dir, destinations)
            .map_err(writing("creating the output files"))?;
        let results = pool.broadcast(|ctx| {
            let worker = ctx.index();
            run.guard(|| {
                let sink = output
                    .sink(worker)
                    .map_err(writing(format!("creating worker {worker}'s output file")))?;
                run.work_in(worker, sink, dir)
            })
        });
        let metrics = first_error(results)?;
        let finishing = Instant::now();
        let names = match &self.by_value {
            Some(b) => Some(by_value::hive_names(
                b,
                self.prefix(),
                self.spec.extension(staged),
            )?),
            None => None,
        };
        let finish = Finish {
            threads: self.threads,
            cancelled: &|| progress.cancelled(),
            names,
        };
        let written = output
            .finish(finish)
            .map_err(|e| match progress.cancelled() {
                true => JobError::Cancelled,
                false => writing("ending the output files")(e),
            })?;
        let written = Outcome {
            metrics,
            written,
            finish_seconds: finishing.elapsed().as_secs_f64(),
        };
        let mut workers = run.timings.into_inner().unwrap_or_default();
        workers.sort_by_key(|t| t.worker);
        Ok(self.manifest(written, workers))
    }

    /// The file name prefix of each destination's file: Spark's buckets, or parts.
    fn prefix(&self) -> &'static str {
        match self.options.scheme == Scheme::Spark {
            true => "bucket",
            false => "part",
        }
    }

    /// The manifest of a run that wrote `written`, its workers' timings `workers`.
    fn manifest(&self, written: Outcome, workers: Vec<WorkerTimings>) -> Manifest {
        let destinations = match (&self.by_value, &written.written) {
            (Some(_), partout_output::Written::Files(files)) => files.len(),
            _ => self.options.partitions as usize,
        };
        record::from_run(
            self,
            destinations,
            self.partitioning.as_ref().and_then(describe_bounds),
            written,
            workers,
        )
    }
}

/// Repartitions the inputs as `options` say: [`Job::try_new`], then [`Job::run`] without
/// progress.
///
/// # Errors
/// As [`Job::try_new`] and [`Job::run`].
pub fn repartition(options: JobOptions) -> Result<Report> {
    Job::try_new(options)?.run(&())
}

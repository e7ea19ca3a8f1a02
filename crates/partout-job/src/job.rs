//! [`Job`]: options checked against the inputs, then the parallel run.
//!
//! ```text
//!  inputs ─► frames (row groups, batch ranges, whole files) ─► workers pull frames in turn
//!  worker w: its own PartitionedWriter (ids, plan, destination buffers, flush policy)
//!            └─ flush ─► files layout:   the destination's shared file, behind its own lock
//!                        shuffle layout: the worker's own data file + index of byte ranges
//!                        Parquet files:  the worker's own scratch shuffle file (Arrow IPC, LZ4)
//!  Parquet files, once the input is consumed: each destination's file written whole from its
//!            runs in every scratch file, one open writer per thread (see StagedParquet)
//! ```
//!
//! Partitioning by value (`--partition-by`): each worker's ids come from one table of the
//! distinct keys shared by all workers (a key's id is `value * buckets + bucket`), the writer
//! runs over as many destinations as values are allowed, and once the input is consumed only
//! the destinations met are written, at their Hive paths (`col=value/part-00000.parquet`).
//!
//! Workers run on a rayon pool of their own. The first worker to fail stops the others
//! (between batches); the run's error is the first that is not another worker's echo, and a
//! worker's panic becomes an error, not the process's end. Everything is written into a
//! staging directory renamed into place at the end.

use crate::budget::BudgetExt;
use crate::error::{JobError, Result, io, writing};
use crate::manifest::{self, Written};
use crate::options::{JobOptions, Scheme};
use crate::staging::{Staging, check_output};
use arrow_schema::SchemaRef;
use parquet::basic::{Compression as ParquetCompression, ZstdLevel as ParquetZstdLevel};
use parquet::file::properties::WriterProperties;
use partout_core::PartoutError;
use partout_core::ids::{PartitionIds, Partitioning, PartitioningSpec, ValueIds, ValueTable};
use partout_exchange::{BatchSink, Flush, PartitionedWriter, WriterMetrics, WriterOptions};
use partout_format::ipc::Compression as IpcCompression;
use partout_format::{Encoding, FormatError};
use partout_io::manifest::{
    Budget, Compression, Format, Layout, Manifest, ShuffleFiles, WorkerTimings,
};
use partout_io::{
    DestinationFiles, Frames, InputFile, ParquetOptions, RunOptions, ShuffleFile, SortedRuns,
    StagedParquet, discover, plan_frames_by,
};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Told how a run advances; asked whether to stop. Called from every worker thread.
pub trait Progress: Sync {
    /// The run starts; `rows` is the inputs' row count, where their metadata tells it.
    fn start(&self, rows: Option<u64>) {
        let _ = rows;
    }

    /// A worker has partitioned a batch of `rows` rows holding `bytes` bytes of Arrow data.
    fn advance(&self, rows: u64, bytes: u64) {
        let _ = (rows, bytes);
    }

    /// Whether the run should stop (asked between batches); it then ends with
    /// [`JobError::Cancelled`] and leaves no output.
    fn cancelled(&self) -> bool {
        false
    }
}

/// No progress to show, never cancelled.
impl Progress for () {}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The manifest written beside the outputs.
    pub manifest: Manifest,
    /// Wall time of the whole job, checks included.
    pub seconds: f64,
}

/// Why the shuffle layout refuses Parquet.
const SHUFFLE_PARQUET: &str = "the shuffle layout writes ipc or presto, not parquet (its files cannot be cut into byte ranges)";

/// Bytes the distinct values' table is given per value it may hold, taken from the memory
/// limit: a key's encoding (up to ~80 bytes on average) and its entry.
const VALUE_TABLE_BYTES_PER_VALUE: u64 = 128;

/// Frames sampled for range bounds.
const SAMPLE_FRAMES: usize = 64;

/// A repartition job, checked and ready to run.
#[derive(Debug)]
pub struct Job {
    options: JobOptions,
    threads: usize,
    budget: Budget,
    frames: Frames,
    partitioning: Partitioning,
    writer: WriterOptions,
    /// Set when workers spill sorted runs.
    runs: Option<RunOptions>,
    output: Output,
    /// The schema written: the input's, or without the columns partitioned by value.
    out_schema: SchemaRef,
    /// Partitioning by value, when asked.
    by_value: Option<ByValue>,
    /// The input, when it is a stream of batches rather than files.
    stream: Option<StreamInput>,
    started: Instant,
}

/// An input stream of batches, read by the workers in turn.
struct StreamInput(Mutex<Box<dyn arrow_array::RecordBatchReader + Send>>);

impl std::fmt::Debug for StreamInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamInput")
    }
}

impl StreamInput {
    /// The stream's next batch, or `None` at its end.
    fn next(&self) -> Option<Result<arrow_array::RecordBatch, arrow_schema::ArrowError>> {
        // A worker that panicked while reading left the stream where it was.
        let mut reader = self.0.lock().unwrap_or_else(|e| e.into_inner());
        reader.next()
    }
}

/// Partitioning by value: destination `value * buckets + bucket`, where `value` is the key's
/// id in the shared table and `bucket` its bucket by the key columns (0 without them).
#[derive(Debug)]
struct ByValue {
    /// The columns partitioned by, in the input.
    columns: Vec<usize>,
    /// Their names.
    names: Vec<String>,
    table: Arc<ValueTable>,
    /// Buckets per value.
    buckets: u32,
    /// The buckets' partitioning over the key columns, when there are buckets.
    bucket_partitioning: Option<Partitioning>,
    /// The input's columns written, when the partition columns are left out.
    kept: Option<Vec<usize>>,
    /// Bytes of the memory limit the table may hold.
    table_bytes: u64,
}

/// What the destinations' outputs are written as.
#[derive(Debug, Clone)]
enum Output {
    /// Arrow IPC streams or Presto pages, written as they are flushed.
    Stream(Encoding),
    /// Parquet files, written from staged rows once the input is consumed (boxed: the
    /// writer's properties are large).
    Parquet(Box<ParquetOptions>),
}

impl Job {
    /// Checks `options` and the inputs they name: the partition count, the output directory,
    /// format, compression and layout together, the memory limit, the input files (found,
    /// readable, of one schema, cut into frames), the key columns (present, of types the
    /// scheme can hash), and for range partitioning the split points, sampled now.
    ///
    /// # Errors
    /// [`JobError::InvalidOption`] naming what cannot work; [`JobError::OutputNotEmpty`];
    /// [`JobError::Input`] for inputs that cannot be read; [`JobError::Write`] for a
    /// partitioning or output format that does not fit the inputs' schema.
    pub fn try_new(options: JobOptions) -> Result<Self> {
        Self::checked(options, None)
    }

    /// As [`try_new`](Self::try_new), for a job whose input is the stream of batches
    /// `reader` instead of files (`options.inputs` empty): workers read its batches in turn,
    /// each partitioning the batch it took. Range partitioning, which samples its input
    /// before the run, takes files only.
    ///
    /// # Errors
    /// As [`try_new`](Self::try_new); [`JobError::InvalidOption`] for input files named too,
    /// or range partitioning. A batch of another schema than the stream's fails the run.
    pub fn from_stream(
        options: JobOptions,
        reader: Box<dyn arrow_array::RecordBatchReader + Send>,
    ) -> Result<Self> {
        Self::checked(options, Some(reader))
    }

    fn checked(
        options: JobOptions,
        stream: Option<Box<dyn arrow_array::RecordBatchReader + Send>>,
    ) -> Result<Self> {
        let started = Instant::now();
        partout_core::plan::check_partition_count(options.partitions)
            .map_err(|e| JobError::InvalidOption(e.to_string()))?;
        let by_value = !options.partition_by.is_empty();
        // The writer's destinations: every value's buckets, for as many values as allowed.
        let destinations = match by_value {
            false => options.partitions,
            true => check_by_value(&options)?,
        };
        check_output(&options.output, options.overwrite)?;
        let threads = match options.threads {
            Some(0) => {
                return Err(JobError::InvalidOption(
                    "a job needs at least one thread".into(),
                ));
            }
            Some(threads) => threads,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if options.layout == Layout::Shuffle && options.format == Format::Parquet {
            return Err(JobError::InvalidOption(SHUFFLE_PARQUET.into()));
        }
        // Parquet files, and every file of values, are written whole from staged rows.
        let parquet_files =
            options.layout == Layout::Files && (options.format == Format::Parquet || by_value);
        let table_bytes = match by_value {
            true => u64::from(options.max_partitions) * VALUE_TABLE_BYTES_PER_VALUE,
            false => 0,
        };
        if table_bytes >= options.memory_limit / 2 {
            return Err(JobError::InvalidOption(format!(
                "a memory limit of {} bytes is too small for {} distinct values (their table \
                 alone takes up to {table_bytes} bytes)",
                options.memory_limit, options.max_partitions
            )));
        }
        let budget = Budget::try_new(
            options.memory_limit - table_bytes,
            destinations,
            threads,
            parquet_files,
        )?;
        let output = output(&options, budget, threads)?;
        let per_worker = budget.per_worker as usize;
        let target = WriterOptions::default().target_bytes.min(per_worker);
        // Workers spilling sorted runs hold whole batches. A stream's batches are another
        // library's memory, whose buffers can be twice the bytes their arrays show (builders
        // grow by doubling; the C data interface tells lengths, not capacities): such
        // workers hold half as many.
        let held = match (stream.is_some(), budget.sorted_runs) {
            (true, true) => per_worker / 2,
            _ => per_worker,
        };
        let mut writer = WriterOptions::default()
            .with_memory_limit(held)
            .with_target_bytes(target);
        let runs = budget.sorted_runs.then(|| RunOptions::within(per_worker));
        if runs.is_some() {
            writer = writer.with_flush(Flush::AllAtLimit);
        }

        // Frames: about sixteen per worker, of 64K rows at least: the workers' last frames
        // end within a small frame of each other, and frames do not shrink to nothing.
        let (frames, stream) = match stream {
            None => {
                let files = inputs_outside(discover(&options.inputs)?, &options.output)?;
                let frames = plan_frames_by(&files, |rows| {
                    rows.map_or(1 << 20, |rows| {
                        (rows as usize / (threads * 16)).max(64 << 10)
                    })
                })?;
                (frames, None)
            }
            Some(reader) => {
                if !options.inputs.is_empty() {
                    return Err(JobError::InvalidOption(
                        "a job reads either input files or a stream of batches, not both".into(),
                    ));
                }
                if options.scheme == Scheme::Range {
                    return Err(JobError::InvalidOption(
                        "range partitioning samples its input files before the run: a stream \
                         of batches takes hash, spark or round-robin"
                            .into(),
                    ));
                }
                let frames = Frames {
                    schema: reader.schema(),
                    frames: Vec::new(),
                };
                (frames, Some(StreamInput(Mutex::new(reader))))
            }
        };
        // The key columns and the output format checked before anything is written.
        let context = || match options.keys.is_empty() {
            true => format!("partitioning by {}", options.scheme),
            false => format!("partitioning by {}", options.keys.join(",")),
        };
        let (partitioning, by_value, out_schema) =
            match by_value {
                false => (
                    partitioning(&options, &frames, context())?,
                    None,
                    frames.schema.clone(),
                ),
                true => {
                    let by_value = value_partitioning(&options, &frames, table_bytes)?;
                    let out_schema =
                        match &by_value.kept {
                            Some(kept) => Arc::new(frames.schema.project(kept).map_err(|e| {
                                writing("leaving out the partition columns")(e.into())
                            })?),
                            None => frames.schema.clone(),
                        };
                    (
                        Partitioning::round_robin(destinations),
                        Some(by_value),
                        out_schema,
                    )
                }
            };
        PartitionedWriter::check(&out_schema, &partitioning, &writer)
            .map_err(writing(context()))?;
        match &output {
            Output::Stream(encoding) => encoding
                .check_schema(&out_schema)
                .map_err(|e| writing(context())(e.into()))?,
            Output::Parquet(_) => {
                StagedParquet::check_schema(&out_schema).map_err(writing(context()))?
            }
        }
        Ok(Self {
            options,
            threads,
            budget,
            frames,
            partitioning,
            writer,
            runs,
            output,
            out_schema,
            by_value,
            stream,
            started,
        })
    }

    /// The options.
    pub fn options(&self) -> &JobOptions {
        &self.options
    }

    /// Worker threads the run uses.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How the memory limit is shared.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Bytes of the memory limit set aside for the table of distinct values (partitioning
    /// by value; 0 otherwise), besides the [`budget`](Self::budget)'s shares.
    pub fn value_table_bytes(&self) -> u64 {
        self.by_value.as_ref().map_or(0, |b| b.table_bytes)
    }

    /// The inputs' rows, where their metadata tells it (not for CSV files, IPC streams or a
    /// stream of batches).
    pub fn input_rows(&self) -> Option<u64> {
        match self.stream {
            Some(_) => None,
            None => self.frames.rows(),
        }
    }

    /// The partitioning (for range partitioning, with its sampled split points).
    pub fn partitioning(&self) -> &Partitioning {
        &self.partitioning
    }

    /// Runs the workers into a staging directory, writes the manifest, and renames the
    /// staging directory to the output (replacing what is there). On any failure nothing is
    /// left behind.
    ///
    /// # Errors
    /// [`JobError::Input`] for input that cannot be read; [`JobError::Write`] for partitioning,
    /// encoding and file errors; [`JobError::Io`]; [`JobError::WorkerPanicked`];
    /// [`JobError::Cancelled`].
    pub fn run(self, progress: &dyn Progress) -> Result<Report> {
        let staging = Staging::try_new(&self.options.output)?;
        progress.start(self.input_rows());
        let manifest = self.write_all(progress, staging.path())?;
        staging.publish(&self.options.output)?;
        Ok(Report {
            manifest,
            seconds: self.started.elapsed().as_secs_f64(),
        })
    }

    /// Runs the workers into `staging` and writes the manifest there.
    fn write_all(&self, progress: &dyn Progress, staging: &Path) -> Result<Manifest> {
        let run = Run {
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
        let written = match (self.options.layout, &self.output) {
            (Layout::Files, Output::Stream(encoding)) if self.by_value.is_some() => {
                let staged = ParquetOptions {
                    properties: WriterProperties::default(),
                    row_group_bytes: self.budget.row_group_bytes(self.threads),
                    staging: STAGING_COMPRESSION,
                };
                self.write_parquet(&pool, &run, staging, &staged, Some(*encoding))?
            }
            (Layout::Files, Output::Stream(encoding)) => {
                self.write_streams(&pool, &run, staging, *encoding)?
            }
            (Layout::Files, Output::Parquet(parquet)) => {
                self.write_parquet(&pool, &run, staging, parquet.as_ref(), None)?
            }
            (Layout::Shuffle, Output::Parquet(_)) => {
                return Err(JobError::InvalidOption(SHUFFLE_PARQUET.into()));
            }
            (Layout::Shuffle, Output::Stream(encoding)) => {
                self.write_shuffle(&pool, &run, staging, *encoding)?
            }
        };
        let mut workers = run.timings.into_inner().unwrap_or_default();
        workers.sort_by_key(|t| t.worker);
        let manifest = self.manifest(written, workers);
        manifest.write(staging)?;
        Ok(manifest)
    }

    /// The file name prefix of each destination's file: Spark's buckets, or parts.
    fn prefix(&self) -> &'static str {
        match self.options.scheme == Scheme::Spark {
            true => "bucket",
            false => "part",
        }
    }

    /// The files layout of Arrow IPC streams or Presto pages: every worker writes into each
    /// destination's one file.
    fn write_streams(
        &self,
        pool: &rayon::ThreadPool,
        run: &Run<'_>,
        staging: &Path,
        encoding: Encoding,
    ) -> Result<Written> {
        let n = self.options.partitions as usize;
        let schema = self.frames.schema.clone();
        let files = DestinationFiles::try_new(staging, self.prefix(), schema, n, encoding)
            .map_err(writing("creating the destination files"))?;
        let results =
            pool.broadcast(|ctx| run.guard(|| run.work_in(ctx.index(), files.handle(), staging)));
        let metrics = first_error(results)?;
        let finishing = Instant::now();
        let files = files
            .finish(self.threads)
            .map_err(writing("ending the destination files"))?;
        Ok(Written::files(metrics, files, finishing))
    }

    /// The files layout of Parquet (or, partitioning by value, of Arrow IPC streams of
    /// `ipc`): workers stage their rows, then each destination's file is written whole.
    fn write_parquet(
        &self,
        pool: &rayon::ThreadPool,
        run: &Run<'_>,
        staging: &Path,
        parquet: &ParquetOptions,
        ipc: Option<Encoding>,
    ) -> Result<Written> {
        let n = self.partitioning.num_partitions() as usize;
        let schema = self.out_schema.clone();
        let mut staged = StagedParquet::try_new(staging, self.prefix(), schema, n, parquet.clone())
            .map_err(writing("creating the Parquet output"))?;
        if let Some(encoding) = ipc {
            staged = staged
                .with_ipc_output(encoding)
                .map_err(writing("creating the Arrow IPC output"))?;
        }
        let results = pool.broadcast(|ctx| {
            run.guard(|| {
                let scratch = staged.scratch(ctx.index()).map_err(writing(format!(
                    "creating worker {}'s scratch file",
                    ctx.index()
                )))?;
                run.work_in(ctx.index(), scratch, staging)
            })
        });
        let metrics = first_error(results)?;
        let finishing = Instant::now();
        let progress = run.progress;
        let files = match &self.by_value {
            None => staged.finish(self.threads, &|| progress.cancelled()),
            Some(by_value) => {
                let extension = match ipc {
                    Some(_) => "arrow",
                    None => "parquet",
                };
                let names = hive_names(by_value, self.prefix(), extension)?;
                staged.finish_named(names, self.threads, &|| progress.cancelled())
            }
        };
        let files = files.map_err(|e| match progress.cancelled() {
            true => JobError::Cancelled,
            false => writing("writing the Parquet files from the staged rows")(e),
        })?;
        Ok(Written::files(metrics, files, finishing))
    }

    /// The shuffle layout: one data file and its index per worker.
    fn write_shuffle(
        &self,
        pool: &rayon::ThreadPool,
        run: &Run<'_>,
        staging: &Path,
        encoding: Encoding,
    ) -> Result<Written> {
        let n = self.options.partitions as usize;
        let schema = &self.frames.schema;
        let results = pool.broadcast(|ctx| {
            let name = format!("shuffle-{:03}", ctx.index());
            run.guard(|| {
                let output = ShuffleFile::try_new(staging, &name, schema.clone(), n, encoding)
                    .map_err(writing(format!("creating {name}.data")))?;
                run.work_in(ctx.index(), output, staging)
            })
        });
        let metrics = first_error(results)?;
        let workers = (0..self.threads)
            .map(|w| ShuffleFiles {
                data: format!("shuffle-{w:03}.data"),
                index: format!("shuffle-{w:03}.index"),
            })
            .collect();
        Ok(Written {
            metrics,
            files: None,
            shuffle_files: Some(workers),
            finish_seconds: 0.0,
        })
    }

    /// The manifest of a run that wrote `written`, its workers' timings `workers`.
    fn manifest(&self, written: Written, workers: Vec<WorkerTimings>) -> Manifest {
        let destinations = match (&self.by_value, &written.files) {
            (Some(_), Some(files)) => files.len(),
            _ => self.options.partitions as usize,
        };
        manifest::from_run(
            &self.options,
            destinations,
            self.threads,
            self.budget,
            describe_bounds(&self.partitioning),
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

/// The shared state of one run's workers.
struct Run<'a> {
    job: &'a Job,
    progress: &'a dyn Progress,
    next: AtomicUsize,
    stop: AtomicBool,
    timings: Mutex<Vec<WorkerTimings>>,
}

/// How a worker ended without its metrics.
enum Failure {
    /// The run's error.
    Error(JobError),
    /// Stopped because another worker failed: the echo, not the cause, of a failed run.
    Stopped,
}

impl From<JobError> for Failure {
    fn from(e: JobError) -> Self {
        Self::Error(e)
    }
}

impl Run<'_> {
    /// One worker into `output`, through sorted runs spilled in `scratch` when the job
    /// spills them.
    fn work_in<O: BatchSink>(
        &self,
        worker: usize,
        output: O,
        scratch: &Path,
    ) -> Result<WriterMetrics, Failure> {
        match self.job.runs {
            Some(options) => {
                let schema = self.job.out_schema.clone();
                let n = self.job.partitioning.num_partitions() as usize;
                let name = format!("w{worker}");
                let runs = SortedRuns::new(output, schema, n, scratch, &name, options);
                self.work(worker, runs)
            }
            None => self.work(worker, output),
        }
    }

    /// One worker: frames pulled in turn until none is left (or another worker failed, or
    /// the run is cancelled), rows through its own writer into `output`.
    fn work<O: BatchSink>(&self, worker: usize, output: O) -> Result<WriterMetrics, Failure> {
        let started = Instant::now();
        let schema = self.job.frames.schema.clone();
        let options = self.job.writer.clone().with_seed(worker as u64);
        let mut by_value = match &self.job.by_value {
            Some(b) => Some(WorkerValues::try_new(b, &schema)?),
            None => None,
        };
        let mut writer = match &by_value {
            // Each row's destination is its value's (append_with_ids).
            Some(_) => PartitionedWriter::with_given_ids(
                self.job.out_schema.clone(),
                self.job.partitioning.num_partitions(),
                options,
                output,
            ),
            None => PartitionedWriter::with_output(
                self.job.out_schema.clone(),
                self.job.partitioning.clone(),
                options,
                output,
            ),
        }
        .map_err(writing("starting a worker"))?;
        let mut append = |batch: &arrow_array::RecordBatch, what: &dyn Fn() -> String| {
            match &mut by_value {
                None => writer.append(batch).map_err(writing(what()))?,
                Some(values) => {
                    let (out, ids) = values.ids(batch, &self.job.options, what)?;
                    writer.append_with_ids(&out, ids).map_err(writing(what()))?;
                }
            }
            self.progress.advance(
                batch.num_rows() as u64,
                batch.get_array_memory_size() as u64,
            );
            Ok::<(), JobError>(())
        };
        match &self.job.stream {
            None => {
                while !self.stopped() {
                    let i = self.next.fetch_add(1, Ordering::Relaxed);
                    let Some(frame) = self.job.frames.frames.get(i) else {
                        break;
                    };
                    for batch in frame.read(&schema).map_err(JobError::from)? {
                        let batch = batch.map_err(JobError::from)?;
                        append(&batch, &|| {
                            format!("partitioning rows of {}", frame.path().display())
                        })?;
                        if self.stopped() {
                            break;
                        }
                    }
                }
            }
            Some(stream) => {
                let what = || "partitioning rows of the input stream".to_string();
                while !self.stopped() {
                    let Some(batch) = stream.next() else {
                        break;
                    };
                    let batch = batch.map_err(|e| {
                        JobError::Input(partout_io::IoError::Inputs(format!(
                            "reading the input stream: {e}"
                        )))
                    })?;
                    if batch.schema_ref().fields() != schema.fields() {
                        return Err(JobError::Input(partout_io::IoError::Inputs(format!(
                            "a batch of schema {} in a stream of {}",
                            batch.schema(),
                            schema
                        )))
                        .into());
                    }
                    append(&batch, &what)?;
                }
            }
        }
        if self.progress.cancelled() {
            self.stop.store(true, Ordering::Relaxed);
            return Err(JobError::Cancelled.into());
        }
        if self.stop.load(Ordering::Relaxed) {
            return Err(Failure::Stopped);
        }
        let metrics = writer
            .finish_output()
            .map_err(writing("ending a worker's output"))?
            .1;
        let timing = WorkerTimings {
            worker,
            seconds: started.elapsed().as_secs_f64(),
            ids_seconds: metrics.ids_time.as_secs_f64(),
            scatter_seconds: metrics.scatter_time.as_secs_f64(),
            output_seconds: (metrics.encode_time + metrics.sink_time).as_secs_f64(),
        };
        if let Ok(mut timings) = self.timings.lock() {
            timings.push(timing);
        }
        Ok(metrics)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.progress.cancelled()
    }

    /// Runs a worker, stopping the others when it fails. A panic (a bug, or a library
    /// meeting input it did not expect) becomes this worker's error, not the process's end.
    fn guard(
        &self,
        work: impl FnOnce() -> Result<WriterMetrics, Failure>,
    ) -> Result<WriterMetrics, Failure> {
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("no message");
                Err(JobError::WorkerPanicked(what.to_string()).into())
            });
        if result.is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
        result
    }
}

/// The error that explains a failed run: the first that is not another worker's echo.
fn first_error(results: Vec<Result<WriterMetrics, Failure>>) -> Result<Vec<WriterMetrics>> {
    let mut metrics = Vec::with_capacity(results.len());
    let mut stopped = false;
    for result in results {
        match result {
            Ok(m) => metrics.push(m),
            Err(Failure::Error(e)) => return Err(e),
            Err(Failure::Stopped) => stopped = true,
        }
    }
    if stopped {
        // Every worker stopped and none says why: only a cancellation does that.
        return Err(JobError::Cancelled);
    }
    Ok(metrics)
}

/// Range partitioning's sample of the input: the key columns of the first batch of up to
/// [`SAMPLE_FRAMES`] frames spread over it. `None` without keys or with a key the input does
/// not have (resolving the partitioning says which).
fn sample(frames: &Frames, spec: &PartitioningSpec) -> Result<Option<arrow_array::RecordBatch>> {
    let keys = match spec.key_columns(&frames.schema) {
        Ok(keys) if !keys.is_empty() => keys,
        _ => return Ok(None),
    };
    let count = frames.frames.len();
    let picks = count.min(SAMPLE_FRAMES);
    let mut samples = Vec::with_capacity(picks);
    let failed = |e: arrow_schema::ArrowError| writing("sampling range bounds")(e.into());
    for i in 0..picks {
        let frame = &frames.frames[i * count / picks];
        if let Some(batch) = frame.read(&frames.schema)?.next() {
            samples.push(batch?.project(&keys).map_err(failed)?);
        }
    }
    let schema = std::sync::Arc::new(frames.schema.project(&keys).map_err(failed)?);
    let sample = arrow_select::concat::concat_batches(&schema, &samples).map_err(failed)?;
    Ok(Some(sample))
}

/// The split points of range partitioning, each as its key values' text.
fn describe_bounds(partitioning: &Partitioning) -> Option<Vec<Vec<String>>> {
    let splits = &partitioning.bounds()?.splits;
    let options = arrow_cast::display::FormatOptions::default().with_null("null");
    let formatters: Vec<_> = splits
        .columns()
        .iter()
        .map(|c| arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<_, _>>()
        .ok()?;
    Some(
        (0..splits.num_rows())
            .map(|r| formatters.iter().map(|f| f.value(r).to_string()).collect())
            .collect(),
    )
}

/// The partitioning the options ask for ([`PartitioningSpec::resolve`]; range split points
/// from a [`sample`] of the input). Options that cannot work are [`JobError::InvalidOption`]s;
/// key types the scheme cannot take are errors of `context`.
fn partitioning(options: &JobOptions, frames: &Frames, context: String) -> Result<Partitioning> {
    let spec = PartitioningSpec::new(options.scheme, &options.keys, options.partitions);
    let sample = match spec.scheme {
        Scheme::Range => sample(frames, &spec)?,
        _ => None,
    };
    spec.resolve(&frames.schema, sample.as_ref())
        .map_err(|e| match e {
            PartoutError::InvalidArgument(what) => JobError::InvalidOption(what),
            e @ PartoutError::MissingKeyColumn { .. } => JobError::InvalidOption(e.to_string()),
            e => writing(context)(e.into()),
        })
}

/// Most rows a Parquet row group holds: parquet's own default, 1Mi rows (the writer's byte
/// limit, from the memory budget, may end a row group sooner).
const MAX_ROW_GROUP_ROWS: usize = 1 << 20;

/// Data pages of Parquet files end at about this many bytes (parquet's default: 1 MiB). A
/// page's buffers grow by doubling to its size and are freed when it is compressed; at 1 MiB
/// they are memory the allocator (purging freed memory after 2 ms, for the memory limit's
/// sake) hands back to the system and faults in again, page after page. With 64 KiB pages,
/// writing lineitem SF 1 took 9% less time, for 0.5% larger files (Snappy compresses 64 KiB
/// blocks anyway).
const DATA_PAGE_BYTES: usize = 64 << 10;

/// How rows bound for Parquet files are staged: uncompressed Arrow IPC. On lineitem SF 1, LZ4
/// took more CPU (compressing 1.2 GiB, then decompressing it) than writing twice the bytes
/// into the page cache and reading them back (see bench/HISTORY.md, issue 12); the scratch files
/// take as much disk as the input's Arrow data.
const STAGING_COMPRESSION: IpcCompression = IpcCompression::None;

/// The output the options ask for, with `threads` writing Parquet files.
fn output(options: &JobOptions, budget: Budget, threads: usize) -> Result<Output> {
    use Compression as C;
    Ok(match (options.format, options.output_compression()) {
        (Format::Parquet, compression) => {
            let codec = match compression {
                C::None => ParquetCompression::UNCOMPRESSED,
                C::Snappy => ParquetCompression::SNAPPY,
                C::Lz4 => ParquetCompression::LZ4_RAW,
                C::Zstd(level) => ParquetCompression::ZSTD(
                    ParquetZstdLevel::try_new(level.get()).map_err(|_| {
                        JobError::InvalidOption(format!(
                            "Parquet takes ZSTD levels 1 to 22, not {} (negative levels are for \
                             IPC output)",
                            level.get()
                        ))
                    })?,
                ),
            };
            // Otherwise parquet's defaults: dictionaries (given up for a column chunk whose
            // dictionary passes 1 MiB; StagedParquet turns them off where a sample says they
            // do not pay), page statistics.
            let properties = WriterProperties::builder()
                .set_compression(codec)
                .set_max_row_group_row_count(Some(MAX_ROW_GROUP_ROWS))
                .set_data_page_size_limit(DATA_PAGE_BYTES)
                .build();
            Output::Parquet(Box::new(ParquetOptions {
                properties,
                row_group_bytes: budget.row_group_bytes(threads),
                staging: STAGING_COMPRESSION,
            }))
        }
        (format, compression) => {
            let name = compression.to_string();
            let encoding = Encoding::parse(&format.to_string(), Some(&name));
            Output::Stream(encoding.map_err(|e| match e {
                FormatError::InvalidArgument(what) => JobError::InvalidOption(what),
                other => JobError::InvalidOption(other.to_string()),
            })?)
        }
    })
}

/// The input files but those under the output directory (an earlier run's output, when the
/// output directory lies in an input directory: it is about to be replaced, and reading it
/// would duplicate rows).
fn inputs_outside(files: Vec<InputFile>, out: &Path) -> Result<Vec<InputFile>> {
    let Ok(out) = out.canonicalize() else {
        return Ok(files);
    };
    let kept: Vec<_> = files
        .into_iter()
        .filter(|f| !f.path.canonicalize().is_ok_and(|p| p.starts_with(&out)))
        .collect();
    if kept.is_empty() {
        return Err(JobError::InvalidOption(format!(
            "every input file is inside the output directory {}",
            out.display()
        )));
    }
    Ok(kept)
}

/// Checks the options of partitioning by value; the writer's destinations: every value's
/// buckets, for as many values as allowed.
fn check_by_value(options: &JobOptions) -> Result<u32> {
    let invalid = |what: String| Err(JobError::InvalidOption(what));
    if !matches!(options.format, Format::Parquet | Format::Ipc) {
        return invalid(format!(
            "partitioning by value writes Parquet or Arrow IPC files, not {}",
            options.format
        ));
    }
    if options.layout != Layout::Files {
        return invalid("partitioning by value writes the files layout".into());
    }
    if options.keys.is_empty() && options.partitions != 1 {
        return invalid(format!(
            "{} buckets per value need key columns to bucket by (--by)",
            options.partitions
        ));
    }
    if options.max_partitions == 0 {
        return invalid("--max-partitions must be at least 1".into());
    }
    if let Some(c) = options
        .partition_by
        .iter()
        .find(|c| options.keys.contains(c))
    {
        return invalid(format!(
            "{c} is both partitioned by value and bucketed by: each value's buckets would hold \
             one key"
        ));
    }
    options
        .max_partitions
        .checked_mul(options.partitions)
        .filter(|&n| partout_core::plan::check_partition_count(n).is_ok())
        .ok_or_else(|| {
            JobError::InvalidOption(format!(
                "{} values x {} buckets is more destinations than partout takes ({})",
                options.max_partitions,
                options.partitions,
                partout_core::plan::MAX_PARTITIONS
            ))
        })
}

/// Partitioning by value over the inputs' schema: the columns (present, of types a value
/// can be), the buckets' partitioning, the columns written.
fn value_partitioning(options: &JobOptions, frames: &Frames, table_bytes: u64) -> Result<ByValue> {
    let schema = &frames.schema;
    let columns: Vec<usize> = options
        .partition_by
        .iter()
        .map(|name| {
            schema.index_of(name).map_err(|_| {
                JobError::InvalidOption(
                    PartoutError::MissingKeyColumn {
                        name: name.clone(),
                        columns: schema.fields().iter().map(|f| f.name().clone()).collect(),
                    }
                    .to_string(),
                )
            })
        })
        .collect::<Result<_>>()?;
    let context = format!(
        "partitioning by the values of {}",
        options.partition_by.join(",")
    );
    let types = columns
        .iter()
        .map(|&c| schema.field(c).data_type().clone())
        .collect();
    let table = ValueTable::try_new(types, options.max_partitions)
        .map_err(|e| writing(context.clone())(e.into()))?;
    let bucket_partitioning = match options.keys.is_empty() {
        true => None,
        false => Some(partitioning(options, frames, context)?),
    };
    let kept = (!options.keep_partition_columns).then(|| {
        (0..schema.fields().len())
            .filter(|c| !columns.contains(c))
            .collect::<Vec<_>>()
    });
    if kept.as_ref().is_some_and(Vec::is_empty) {
        return Err(JobError::InvalidOption(
            "every column is partitioned by value: the files would have no column (keep them \
             with --keep-partition-columns)"
                .into(),
        ));
    }
    Ok(ByValue {
        columns,
        names: options.partition_by.clone(),
        table: Arc::new(table),
        buckets: options.partitions,
        bucket_partitioning,
        kept,
        table_bytes,
    })
}

/// One worker's ids when partitioning by value: the value's, then the bucket's.
struct WorkerValues<'a> {
    by_value: &'a ByValue,
    values: ValueIds,
    buckets: Option<PartitionIds>,
    ids: Vec<u32>,
    bucket_ids: Vec<u32>,
}

impl<'a> WorkerValues<'a> {
    fn try_new(by_value: &'a ByValue, schema: &arrow_schema::Schema) -> Result<Self> {
        let failed = writing("starting a worker");
        let values = ValueIds::try_new(by_value.table.clone(), by_value.columns.clone(), schema)
            .map_err(|e| failed(e.into()))?;
        let buckets = match &by_value.bucket_partitioning {
            Some(p) => Some(
                PartitionIds::try_new(p.clone(), schema)
                    .map_err(|e| writing("starting a worker")(e.into()))?,
            ),
            None => None,
        };
        Ok(Self {
            by_value,
            values,
            buckets,
            ids: Vec::new(),
            bucket_ids: Vec::new(),
        })
    }

    /// `batch`'s columns written and every row's destination.
    fn ids(
        &mut self,
        batch: &arrow_array::RecordBatch,
        options: &JobOptions,
        what: &dyn Fn() -> String,
    ) -> Result<(arrow_array::RecordBatch, &[u32])> {
        self.values
            .compute(batch, &mut self.ids)
            .map_err(|e| match e {
                PartoutError::TooManyValues { limit } => JobError::InvalidOption(format!(
                    "{} has more than {limit} distinct values (--max-partitions {limit}): \
                     raise the limit if that many partitions are meant",
                    options.partition_by.join(",")
                )),
                e => writing(what())(e.into()),
            })?;
        let table = self.by_value.table.memory_bytes() as u64;
        if table > self.by_value.table_bytes {
            return Err(JobError::InvalidOption(format!(
                "the distinct values of {} take {table} bytes, more than the {} bytes of the \
                 memory limit set aside for them (long keys): raise --memory-limit",
                options.partition_by.join(","),
                self.by_value.table_bytes
            )));
        }
        if let Some(buckets) = &mut self.buckets {
            buckets
                .compute(batch, &mut self.bucket_ids)
                .map_err(|e| writing(what())(e.into()))?;
            let n = self.by_value.buckets;
            for (id, bucket) in self.ids.iter_mut().zip(&self.bucket_ids) {
                *id = *id * n + bucket;
            }
        }
        let out = match &self.by_value.kept {
            Some(kept) => batch.project(kept).map_err(|e| writing(what())(e.into()))?,
            None => batch.clone(),
        };
        Ok((out, &self.ids))
    }
}

/// Each destination's file in the Hive layout: `col=value/…/{prefix}-{bucket:05}.{extension}`,
/// for every value met and each of its buckets, in destination order.
fn hive_names(by_value: &ByValue, prefix: &str, extension: &str) -> Result<Vec<String>> {
    let failed =
        |e: arrow_schema::ArrowError| writing("naming the partitions' directories")(e.into());
    let keys = by_value
        .table
        .keys()
        .map_err(|e| writing("naming the partitions' directories")(e.into()))?;
    let texts: Vec<Vec<Option<String>>> = keys
        .iter()
        .map(|k| crate::hive::format_values(k.as_ref()))
        .collect::<Result<_, _>>()
        .map_err(failed)?;
    let values = by_value.table.len();
    // Escaping is one to one, and each type's text tells its values apart: two values share
    // a directory only through a string spelling the null directory, and only then are the
    // directories compared.
    let mut seen = texts
        .iter()
        .flatten()
        .any(|t| t.as_deref() == Some(crate::hive::NULL_DIR))
        .then(|| std::collections::HashSet::with_capacity(values));
    let mut names = Vec::with_capacity(values * by_value.buckets as usize);
    for v in 0..values {
        let dir: Vec<String> = by_value
            .names
            .iter()
            .zip(&texts)
            .map(|(column, text)| crate::hive::partition_segment(column, text[v].as_deref()))
            .collect();
        let dir = dir.join("/");
        if let Some(seen) = &mut seen
            && !seen.insert(dir.clone())
        {
            return Err(JobError::InvalidOption(format!(
                "two distinct values share the directory {dir:?} (a string equal to {}, which \
                 stands for null)",
                crate::hive::NULL_DIR
            )));
        }
        for bucket in 0..by_value.buckets {
            names.push(format!("{dir}/{prefix}-{bucket:05}.{extension}"));
        }
    }
    Ok(names)
}

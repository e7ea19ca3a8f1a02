//! The workers of a run: each pulls frames (or the input stream's batches) in turn and
//! partitions them through its own `PartitionedWriter` into its sink of the output. The first
//! worker to fail stops the others (between batches); the run's error is the first that is
//! not another worker's echo, and a worker's panic becomes an error, not the process's end.

use crate::by_value::WorkerValues;
use crate::error::{JobError, Result, writing};
use crate::plan::{Job, Turn};
use crate::progress::Progress;
use partout_exchange::{BatchSink, PartitionedWriter, WriterMetrics};
use partout_output::SortedRuns;
use partout_output::manifest::WorkerTimings;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

/// The shared state of one run's workers.
pub(crate) struct Workers<'a> {
    pub(crate) job: &'a Job,
    pub(crate) progress: &'a dyn Progress,
    pub(crate) next: AtomicUsize,
    pub(crate) stop: AtomicBool,
    pub(crate) timings: Mutex<Vec<WorkerTimings>>,
}

/// How a worker ended without its metrics.
pub(crate) enum Failure {
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

impl Workers<'_> {
    /// One worker into `output`, through sorted runs spilled in `scratch` when the job
    /// spills them.
    pub(crate) fn work_in<O: BatchSink>(
        &self,
        worker: usize,
        output: O,
        scratch: &Path,
    ) -> Result<WriterMetrics, Failure> {
        match self.job.runs {
            Some(options) => {
                let schema = self.job.out_schema.clone();
                let n = self.job.destinations as usize;
                let name = format!("w{worker}");
                let runs = SortedRuns::new(output, schema, n, scratch, &name, options);
                self.work(worker, runs, scratch)
            }
            None => self.work(worker, output, scratch),
        }
    }

    /// One worker: frames pulled in turn until none is left (or another worker failed, or
    /// the run is cancelled), rows through its own writer into `output` (turning to sorted
    /// runs spilled in `scratch` where the job says so).
    fn work<O: BatchSink>(
        &self,
        worker: usize,
        output: O,
        scratch: &Path,
    ) -> Result<WriterMetrics, Failure> {
        let started = Instant::now();
        let schema = self.job.frames.schema.clone();
        let options = self.job.writer.clone().with_seed(worker as u64);
        let mut by_value = match &self.job.by_value {
            Some(b) => Some(WorkerValues::try_new(b, &schema)?),
            None => None,
        };
        let writer = match &self.job.partitioning {
            Some(partitioning) => PartitionedWriter::with_output(
                self.job.out_schema.clone(),
                partitioning.clone(),
                options,
                output,
            ),
            // Each row's destination is its value's (append_with_ids).
            None => PartitionedWriter::with_given_ids(
                self.job.out_schema.clone(),
                self.job.destinations,
                options,
                output,
            ),
        }
        .map_err(writing("starting a worker"))?;
        let mut writer = Phase::Buffered(Box::new(writer));
        let mut append = |batch: &arrow_array::RecordBatch, what: &dyn Fn() -> String| {
            match &mut by_value {
                None => writer.append(batch).map_err(writing(what()))?,
                Some(values) => {
                    let (out, ids) = values.ids(batch, &self.job.options, what)?;
                    writer.append_with_ids(&out, ids).map_err(writing(what()))?;
                    if let Some(turn) = &self.job.turn
                        && values.destinations_met() > turn.past
                    {
                        writer.turn(self.job, turn, worker, scratch)?;
                    }
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
                        JobError::Input(partout_input::IoError::Inputs(format!(
                            "reading the input stream: {e}"
                        )))
                    })?;
                    if batch.schema_ref().fields() != schema.fields() {
                        return Err(JobError::Input(partout_input::IoError::Inputs(format!(
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
        let turned = writer.turned_at();
        let metrics = writer
            .finish_output()
            .map_err(writing("ending a worker's output"))?;
        let timing = WorkerTimings {
            worker,
            seconds: started.elapsed().as_secs_f64(),
            ids_seconds: metrics.ids_time.as_secs_f64(),
            scatter_seconds: metrics.scatter_time.as_secs_f64(),
            output_seconds: (metrics.encode_time + metrics.sink_time).as_secs_f64(),
            sorted_runs_from_row: turned,
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
    pub(crate) fn guard(
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

/// A worker's writer: buffering its destinations into the output, or, once it has turned
/// (partitioning by value, past the destinations its buffers are planned for), spilling
/// sorted runs merged into the same output at the end.
enum Phase<O: BatchSink> {
    Buffered(Box<PartitionedWriter<O>>),
    Runs {
        writer: Box<PartitionedWriter<SortedRuns<O>>>,
        /// What the buffering writer did before the turn.
        before: WriterMetrics,
    },
    /// Between the two, and after a failed turn.
    Turning,
}

impl<O: BatchSink> Phase<O> {
    fn append(&mut self, batch: &arrow_array::RecordBatch) -> partout_exchange::Result<()> {
        match self {
            Self::Buffered(writer) => writer.append(batch),
            Self::Runs { writer, .. } => writer.append(batch),
            Self::Turning => Err(partout_exchange::WriterError::Failed),
        }
    }

    fn append_with_ids(
        &mut self,
        batch: &arrow_array::RecordBatch,
        ids: &[u32],
    ) -> partout_exchange::Result<()> {
        match self {
            Self::Buffered(writer) => writer.append_with_ids(batch, ids),
            Self::Runs { writer, .. } => writer.append_with_ids(batch, ids),
            Self::Turning => Err(partout_exchange::WriterError::Failed),
        }
    }

    /// Turns a buffering writer to sorted runs: its buffered rows handed to the output, the
    /// output wrapped in sorted runs spilled in `scratch`, a writer of `turn`'s options over
    /// them. Once turned, nothing more.
    fn turn(&mut self, job: &Job, turn: &Turn, worker: usize, scratch: &Path) -> Result<()> {
        if !matches!(self, Self::Buffered(_)) {
            return Ok(());
        }
        let Self::Buffered(writer) = std::mem::replace(self, Self::Turning) else {
            unreachable!("matched above");
        };
        let failed = || writing("turning a worker to sorted runs");
        let (output, before) = (*writer).into_output().map_err(failed())?;
        let n = job.destinations as usize;
        let name = format!("w{worker}");
        let runs = SortedRuns::new(output, job.out_schema.clone(), n, scratch, &name, turn.runs);
        let options = turn.writer.clone().with_seed(worker as u64);
        let writer = PartitionedWriter::with_given_ids(
            job.out_schema.clone(),
            job.destinations,
            options,
            runs,
        )
        .map_err(failed())?;
        *self = Self::Runs {
            writer: Box::new(writer),
            before,
        };
        Ok(())
    }

    /// The rows taken before the writer turned to sorted runs, once it has.
    fn turned_at(&self) -> Option<u64> {
        match self {
            Self::Runs { before, .. } => Some(before.rows_in),
            _ => None,
        }
    }

    /// Ends the output; what the writers did.
    fn finish_output(self) -> partout_exchange::Result<WriterMetrics> {
        match self {
            Self::Buffered(writer) => Ok(writer.finish_output()?.1),
            Self::Runs { writer, mut before } => {
                before.add(&writer.finish_output()?.1);
                Ok(before)
            }
            Self::Turning => Err(partout_exchange::WriterError::Failed),
        }
    }
}

/// The error that explains a failed run: the first that is not another worker's echo.
pub(crate) fn first_error(
    results: Vec<Result<WriterMetrics, Failure>>,
) -> Result<Vec<WriterMetrics>> {
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

//! `repartition`: the `partout repartition` job, run on a thread of its own while the calling
//! thread waits without the GIL, reports progress and lets Ctrl-C cancel it.

use crate::errors::{Error, Result, job_error};
use crate::partition::{key_names, partition_count};
use partout_core::ids::Scheme;
use partout_job::{
    Job, JobOptions, ParquetSettings, Progress, Rollover, SortOrder, StorageOptions, WriteMode,
    parse_bytes,
};
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// What the waiting thread sees of a running job, and how it cancels it.
#[derive(Default)]
struct Watch {
    cancel: AtomicBool,
    /// The inputs' rows, where their metadata tells (`u64::MAX` until known or when not).
    total: AtomicU64,
    rows: AtomicU64,
}

/// Shares a [`Watch`] with the job.
struct Watched(Arc<Watch>);

impl Progress for Watched {
    fn start(&self, rows: Option<u64>) {
        self.0
            .total
            .store(rows.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    fn advance(&self, rows: u64, _bytes: u64) {
        self.0.rows.fetch_add(rows, Ordering::Relaxed);
    }

    fn cancelled(&self) -> bool {
        self.0.cancel.load(Ordering::Relaxed)
    }
}

/// repartition(inputs, output, n=None, *, by=None, scheme="hash", format="parquet",
/// compression=None, layout="files", threads=None, memory_limit=None, overwrite=False,
/// mode="error", progress=None, partition_by=None, max_partitions=None, keep_partition_columns=False,
/// storage_options=None, row_group_rows=None, parquet_options=None, file_statistics=False,
/// max_rows_per_file=None, max_bytes_per_file=None, sort_by=None, file_name=None) -> dict
///
/// The `partout repartition` job: every Parquet, Arrow IPC and CSV file of `inputs` into `n`
/// destinations under `output`; with `partition_by` (a column name or several), a directory
/// per distinct value in the Hive layout (`n`, default 1, is then the buckets per value, by
/// `by`; `max_partitions`, default 1000, the most values). Returns the manifest. The GIL is released while it runs;
/// Ctrl-C (or any signal handler raising) cancels it, and it leaves no output. `progress`, a
/// callable, is called about every 50 ms and at the end with the rows partitioned so far and
/// the inputs' rows (`None` when their metadata does not tell); an exception it raises
/// cancels the job. `max_rows_per_file` and `max_bytes_per_file` (bytes, or text such as
/// `"64MiB"`) roll a destination's file over to its next, `part-00003-00001.parquet`.
/// `sort_by` (`"a, b DESC"`, or a list of keys, each `COL [ASC|DESC] [NULLS FIRST|LAST]`)
/// sorts the rows within each file, in the memory limit (spilling sorted runs). `file_name`
/// names each file after a pattern (`"data-{dest}-{part}"`; `{uuid}`, `{run}`).
#[pyfunction]
#[pyo3(signature = (inputs, output, n=None, *, by=None, scheme="hash", format="parquet",
    compression=None, layout="files", threads=None, memory_limit=None, overwrite=false,
    mode="error", progress=None, partition_by=None, max_partitions=None, keep_partition_columns=false,
    storage_options=None, row_group_rows=None, parquet_options=None, file_statistics=false,
    max_rows_per_file=None, max_bytes_per_file=None, sort_by=None, file_name=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn repartition<'py>(
    py: Python<'py>,
    inputs: &Bound<'py, PyAny>,
    output: PathBuf,
    n: Option<&Bound<'py, PyAny>>,
    by: Option<&Bound<'py, PyAny>>,
    scheme: &str,
    format: &str,
    compression: Option<&str>,
    layout: &str,
    threads: Option<usize>,
    memory_limit: Option<&Bound<'py, PyAny>>,
    overwrite: bool,
    mode: &str,
    progress: Option<&Bound<'py, PyAny>>,
    partition_by: Option<&Bound<'py, PyAny>>,
    max_partitions: Option<u32>,
    keep_partition_columns: bool,
    storage_options: Option<BTreeMap<String, String>>,
    row_group_rows: Option<u64>,
    parquet_options: Option<BTreeMap<String, Bound<'py, PyAny>>>,
    file_statistics: bool,
    max_rows_per_file: Option<u64>,
    max_bytes_per_file: Option<&Bound<'py, PyAny>>,
    sort_by: Option<&Bound<'py, PyAny>>,
    file_name: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let inputs: Vec<PathBuf> = match inputs.extract::<PathBuf>() {
        Ok(one) => vec![one],
        Err(_) => inputs.extract()?,
    };
    let options = Options {
        n,
        by,
        scheme,
        format,
        compression,
        layout,
        threads,
        memory_limit,
        overwrite,
        mode,
        partition_by,
        max_partitions,
        keep_partition_columns,
        storage_options,
        row_group_rows,
        parquet_options,
        file_statistics,
        max_rows_per_file,
        max_bytes_per_file,
        sort_by,
        file_name,
    }
    .job_options(py, inputs, output)?;
    run_job(py, options, progress, Job::try_new)
}

/// write_dataset(data, output, n=None, *, partition_by=None, by=None, scheme="hash",
/// format="parquet", compression=None, threads=None, memory_limit=None, overwrite=False,
/// mode="error", progress=None, max_partitions=None, keep_partition_columns=False, storage_options=None,
/// row_group_rows=None, parquet_options=None, file_statistics=False, max_rows_per_file=None,
/// max_bytes_per_file=None, sort_by=None, file_name=None) -> dict
///
/// The job of `repartition` with `data` as its input instead of files: anything exporting
/// the Arrow PyCapsule interface, read batch by batch by the job's workers (never collected
/// first). Returns the manifest.
#[pyfunction]
#[pyo3(signature = (data, output, n=None, *, partition_by=None, by=None, scheme="hash",
    format="parquet", compression=None, threads=None, memory_limit=None, overwrite=false,
    mode="error", progress=None, max_partitions=None, keep_partition_columns=false, storage_options=None,
    row_group_rows=None, parquet_options=None, file_statistics=false, max_rows_per_file=None,
    max_bytes_per_file=None, sort_by=None, file_name=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_dataset<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    output: PathBuf,
    n: Option<&Bound<'py, PyAny>>,
    partition_by: Option<&Bound<'py, PyAny>>,
    by: Option<&Bound<'py, PyAny>>,
    scheme: &str,
    format: &str,
    compression: Option<&str>,
    threads: Option<usize>,
    memory_limit: Option<&Bound<'py, PyAny>>,
    overwrite: bool,
    mode: &str,
    progress: Option<&Bound<'py, PyAny>>,
    max_partitions: Option<u32>,
    keep_partition_columns: bool,
    storage_options: Option<BTreeMap<String, String>>,
    row_group_rows: Option<u64>,
    parquet_options: Option<BTreeMap<String, Bound<'py, PyAny>>>,
    file_statistics: bool,
    max_rows_per_file: Option<u64>,
    max_bytes_per_file: Option<&Bound<'py, PyAny>>,
    sort_by: Option<&Bound<'py, PyAny>>,
    file_name: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let reader = crate::partition::arrow_data(py, data)?
        .into_reader()
        .map_err(|e| Error::Input(e.to_string()).into_py(py))?;
    let options = Options {
        n,
        by,
        scheme,
        format,
        compression,
        layout: "files",
        threads,
        memory_limit,
        overwrite,
        mode,
        partition_by,
        max_partitions,
        keep_partition_columns,
        storage_options,
        row_group_rows,
        parquet_options,
        file_statistics,
        max_rows_per_file,
        max_bytes_per_file,
        sort_by,
        file_name,
    }
    .job_options(py, Vec::new(), output)?;
    run_job(py, options, progress, move |options| {
        Job::from_stream(options, reader)
    })
}

/// The options `repartition` and `write_dataset` share, as Python gave them.
struct Options<'a, 'py> {
    n: Option<&'a Bound<'py, PyAny>>,
    by: Option<&'a Bound<'py, PyAny>>,
    scheme: &'a str,
    format: &'a str,
    compression: Option<&'a str>,
    layout: &'a str,
    threads: Option<usize>,
    memory_limit: Option<&'a Bound<'py, PyAny>>,
    overwrite: bool,
    mode: &'a str,
    partition_by: Option<&'a Bound<'py, PyAny>>,
    max_partitions: Option<u32>,
    keep_partition_columns: bool,
    storage_options: Option<BTreeMap<String, String>>,
    row_group_rows: Option<u64>,
    parquet_options: Option<BTreeMap<String, Bound<'py, PyAny>>>,
    file_statistics: bool,
    max_rows_per_file: Option<u64>,
    max_bytes_per_file: Option<&'a Bound<'py, PyAny>>,
    sort_by: Option<&'a Bound<'py, PyAny>>,
    file_name: Option<&'a str>,
}

impl Options<'_, '_> {
    /// The job's options for `inputs` into `output`.
    fn job_options(
        self,
        py: Python<'_>,
        inputs: Vec<PathBuf>,
        output: PathBuf,
    ) -> PyResult<JobOptions> {
        let Self {
            n,
            by,
            scheme,
            format,
            compression,
            layout,
            threads,
            memory_limit,
            overwrite,
            mode,
            partition_by,
            max_partitions,
            keep_partition_columns,
            storage_options,
            row_group_rows,
            parquet_options,
            file_statistics,
            max_rows_per_file,
            max_bytes_per_file,
            sort_by,
            file_name,
        } = self;
        let mut parquet = Vec::new();
        for (key, value) in parquet_options.unwrap_or_default() {
            parquet.push((key, setting_text(&value)?));
        }
        parquet.extend(row_group_rows.map(|n| ("row_group_rows".to_string(), n.to_string())));
        let partition_by = key_names(partition_by)?;
        let n = match (n, partition_by.is_empty()) {
            (Some(n), _) => partition_count(py, n)?,
            (None, false) => 1,
            (None, true) => {
                return Err(Error::InvalidArgument(
                    "the partition count n is needed unless partition_by names columns".into(),
                )
                .into_py(py));
            }
        };
        let keys = key_names(by)?;
        let memory_limit = memory_limit.map(|m| size(py, m)).transpose()?;
        let max_bytes_per_file = max_bytes_per_file.map(|m| size(py, m)).transpose()?;
        // "a, b DESC", or a list of keys each "COL [ASC|DESC] [NULLS FIRST|LAST]".
        let sort_by = key_names(sort_by)?.join(",");
        let options = || -> Result<JobOptions> {
            let parse = |what: &str, text: &str, err: String| {
                Error::InvalidArgument(format!("{what} {text:?}: {err}"))
            };
            // The names' one reading (partout_format's vocabulary), in its own words.
            let reason = |e: partout_format::FormatError| match e {
                partout_format::FormatError::InvalidArgument(why) => why,
                other => other.to_string(),
            };
            let mut options = JobOptions::new(inputs, output, n)
                .with_keys(keys)
                .with_scheme(scheme.parse::<Scheme>()?)
                .with_format(
                    format
                        .parse()
                        .map_err(|e| parse("format", format, reason(e)))?,
                )
                .with_layout(layout.parse().map_err(|e| parse("layout", layout, e))?)
                .with_mode(match (overwrite, mode) {
                    (false, mode) => mode.parse().map_err(|e| parse("mode", mode, e))?,
                    (true, "error" | "overwrite") => WriteMode::Overwrite,
                    (true, mode) => {
                        return Err(Error::InvalidArgument(format!(
                            "overwrite=True and mode={mode:?} disagree"
                        )));
                    }
                })
                .with_partition_by(partition_by)
                .with_keep_partition_columns(keep_partition_columns)
                .with_storage_options(StorageOptions::new(storage_options.unwrap_or_default()));
            if let Some(max) = max_partitions {
                options = options.with_max_partitions(max);
            }
            if let Some(text) = compression {
                options = options.with_compression(
                    text.parse()
                        .map_err(|e| parse("compression", text, reason(e)))?,
                );
            }
            if let Some(threads) = threads {
                options = options.with_threads(threads);
            }
            if let Some(bytes) = memory_limit {
                options = options.with_memory_limit(bytes);
            }
            let parquet = ParquetSettings::parse(parquet)
                .map_err(|e| Error::InvalidArgument(e.to_string()))?
                .with_file_statistics(file_statistics);
            let rollover = Rollover::new(max_rows_per_file, max_bytes_per_file)
                .map_err(|e| Error::InvalidArgument(e.to_string()))?;
            let sort_by: SortOrder = match sort_by.is_empty() {
                true => SortOrder::default(),
                false => sort_by
                    .parse()
                    .map_err(|e| Error::InvalidArgument(format!("sort_by: {e}")))?,
            };
            let mut options = options
                .with_parquet_settings(parquet)
                .with_rollover(rollover)
                .with_sort_by(sort_by);
            if let Some(pattern) = file_name {
                options = options.with_file_name(pattern.parse().map_err(Error::InvalidArgument)?);
            }
            Ok(options)
        };
        options().map_err(|e| e.into_py(py))
    }
}

/// A size: bytes, or text with a unit (`"64MiB"`).
fn size(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    match value.extract::<u64>() {
        Ok(bytes) => Ok(bytes),
        Err(_) => {
            let text: String = value.extract()?;
            parse_bytes(&text).map_err(|e| Error::InvalidArgument(e).into_py(py))
        }
    }
}

/// A Parquet option's value as its text: `True` as `true`, a list of names joined by commas,
/// anything else as `str()` makes it.
fn setting_text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(flag) = value.extract::<bool>() {
        return Ok(flag.to_string());
    }
    if !value.is_instance_of::<pyo3::types::PyString>()
        && let Ok(names) = value.extract::<Vec<String>>()
    {
        return Ok(names.join(","));
    }
    Ok(value.str()?.to_string())
}

/// Runs the job `start` makes of `options` on a thread of its own while this thread waits
/// without the GIL (taking it back every 50 ms to run signal handlers and `progress`); the
/// manifest as a dict.
fn run_job<'py>(
    py: Python<'py>,
    options: JobOptions,
    progress: Option<&Bound<'py, PyAny>>,
    start: impl FnOnce(JobOptions) -> partout_job::Result<Job> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    let watch = Arc::new(Watch::default());
    watch.total.store(u64::MAX, Ordering::Relaxed);
    let (done, result) = std::sync::mpsc::channel();
    let job = {
        let watched = Watched(watch.clone());
        std::thread::spawn(move || {
            let report = start(options).and_then(|job| job.run(&watched));
            let _ = done.send(report);
        })
    };
    let report_progress = || -> PyResult<()> {
        let Some(progress) = progress else {
            return Ok(());
        };
        let total = watch.total.load(Ordering::Relaxed);
        let total = (total != u64::MAX).then_some(total);
        progress
            .call1((watch.rows.load(Ordering::Relaxed), total))
            .map(drop)
    };
    // Wait without the GIL, taking it back now and then to run Python's signal handlers.
    // (The receiver moves into each wait and back: it is not `Sync`.)
    let mut result = result;
    let report = loop {
        let (back, waited) = py.detach(move || {
            let waited = result.recv_timeout(Duration::from_millis(50));
            (result, waited)
        });
        result = back;
        match waited {
            Ok(report) => break report,
            Err(RecvTimeoutError::Timeout) => {
                let checked = py.check_signals().and_then(|()| report_progress());
                if let Err(interrupt) = checked {
                    watch.cancel.store(true, Ordering::Relaxed);
                    // The job stops at its next check and removes what it wrote.
                    py.detach(move || {
                        let _ = result.recv();
                        let _ = job.join();
                    });
                    return Err(interrupt);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(
                    Error::Input("the job's thread ended without a result".into()).into_py(py),
                );
            }
        }
    };
    let _ = job.join();
    let report = report.map_err(|e| job_error(e).into_py(py))?;
    report_progress()?;
    let json = serde_json::to_string(&report.manifest)
        .map_err(|e| Error::Input(format!("the manifest: {e}")).into_py(py))?;
    py.import("json")?.getattr("loads")?.call1((json,))
}

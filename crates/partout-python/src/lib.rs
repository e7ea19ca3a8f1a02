//! The native module of the `partout` Python package (`partout._partout`): partition ids and
//! the partitioning of Arrow data that arrives through the Arrow PyCapsule interface (anything
//! with `__arrow_c_array__` or `__arrow_c_stream__`: pyarrow, polars, DuckDB, ...).
//!
//! ```text
//!  data ──C stream──► batch by batch, the GIL released ─► ids ─► Partitioner ─► slices
//!                                                                       n pyarrow Tables ◄─┘
//! ```
//!
//! Input batches are read through the C data interface without a copy; each is laid out by
//! destination once (one copy of every row), and every destination's table is made of
//! zero-copy slices of those reordered batches, a chunk per input batch that sent it rows.
//! (Moving every destination's rows into buffers of its own instead, one chunk per table,
//! measured slower: the buffers grow by doubling.) Errors are raised as the classes of
//! `partout.errors`, by kind.

use arrow_array::{RecordBatch, RecordBatchReader, UInt32Array};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use partout_core::ids::{PartitionIds, Partitioning, RangeBounds};
use partout_core::{Partitioner, PartoutError};
use partout_exchange::{
    Encoded, FileSink, MemorySink, PartitionedWriter as ExchangeWriter, Sink, WriterError,
    WriterOptions,
};
use partout_format::ipc::{Compression, decode_stream};
use partout_format::presto::decode_pages;
use partout_format::{Encoding, FormatError, OutputFormat};
use partout_io::{IoError, read_shuffle_destination};
use partout_job::{Job, JobError, JobOptions, Progress, parse_bytes};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PyArray, PySchema, PyTable};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// What can go wrong, by the kind of `partout.errors` class it is raised as.
#[derive(Debug)]
enum Error {
    /// An argument that can never work.
    InvalidArgument(String),
    /// A column type the operation cannot handle.
    UnsupportedType(String),
    /// Data whose schema does not fit the call (a missing key, batches of two schemas).
    SchemaMismatch(String),
    /// The input could not be read, or the job failed otherwise.
    Input(String),
    /// Bytes that are not what they claim to be.
    Corrupt(String),
    /// A file could not be read or written.
    Io(String),
}

impl Error {
    /// The same kind of error with `message`.
    fn with_message(self, message: String) -> Self {
        match self {
            Error::InvalidArgument(_) => Error::InvalidArgument(message),
            Error::UnsupportedType(_) => Error::UnsupportedType(message),
            Error::SchemaMismatch(_) => Error::SchemaMismatch(message),
            Error::Input(_) => Error::Input(message),
            Error::Corrupt(_) => Error::Corrupt(message),
            Error::Io(_) => Error::Io(message),
        }
    }
}

impl From<PartoutError> for Error {
    fn from(error: PartoutError) -> Self {
        match error {
            PartoutError::UnsupportedType { .. } => Error::UnsupportedType(error.to_string()),
            PartoutError::Arrow(e) => Error::Input(e.to_string()),
            other => Error::InvalidArgument(other.to_string()),
        }
    }
}

impl From<ArrowError> for Error {
    fn from(error: ArrowError) -> Self {
        Error::Input(error.to_string())
    }
}

impl Error {
    /// The Python exception: an instance of the class of `partout.errors` for the kind.
    fn into_py(self, py: Python<'_>) -> PyErr {
        let (class, message) = match self {
            Error::InvalidArgument(m) => ("InvalidArgumentError", m),
            Error::UnsupportedType(m) => ("UnsupportedTypeError", m),
            Error::SchemaMismatch(m) => ("SchemaMismatchError", m),
            Error::Input(m) => ("PartoutError", m),
            Error::Corrupt(m) => ("CorruptInputError", m),
            Error::Io(m) => ("PartoutIOError", m),
        };
        match py
            .import("partout.errors")
            .and_then(|errors| errors.getattr(class))
            .and_then(|class| class.call1((message,)))
        {
            Ok(instance) => PyErr::from_value(instance),
            Err(e) => e,
        }
    }
}

type Result<T> = std::result::Result<T, Error>;

/// The partitioning scheme a caller names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Hash,
    Spark,
    RoundRobin,
    Range,
}

impl Scheme {
    fn parse(name: &str) -> Result<Self> {
        match name {
            "hash" => Ok(Scheme::Hash),
            "spark" => Ok(Scheme::Spark),
            "round_robin" | "round-robin" => Ok(Scheme::RoundRobin),
            "range" => Ok(Scheme::Range),
            other => Err(Error::InvalidArgument(format!(
                "unknown scheme {other:?}: expected \"hash\", \"spark\", \"round_robin\" or \"range\""
            ))),
        }
    }
}

/// The key columns `by` names (one name or a sequence of names), as indices into `schema`.
fn key_columns(schema: &Schema, by: &[String], scheme: Scheme) -> Result<Vec<usize>> {
    match (scheme, by.is_empty()) {
        (Scheme::RoundRobin, false) => {
            return Err(Error::InvalidArgument(
                "round_robin deals rows in turn and takes no key columns (by=None)".into(),
            ));
        }
        (Scheme::RoundRobin, true) => return Ok(Vec::new()),
        (_, true) => {
            return Err(Error::InvalidArgument(format!(
                "the {scheme:?} scheme needs key columns: by=\"column\" or by=[...]"
            )));
        }
        _ => {}
    }
    by.iter()
        .map(|name| {
            schema.index_of(name).map_err(|_| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                Error::SchemaMismatch(format!(
                    "no column {name:?} to partition by; the data has [{}]",
                    names.join(", ")
                ))
            })
        })
        .collect()
}

/// The partitioning of `n` destinations by `scheme` on `keys`; range split points come from
/// the keys of `first` (the first batch).
fn partitioning(
    scheme: Scheme,
    keys: Vec<usize>,
    n: u32,
    first: Option<&RecordBatch>,
) -> Result<Partitioning> {
    Ok(match scheme {
        Scheme::Hash => Partitioning::hash(keys, n),
        Scheme::Spark => Partitioning::spark(keys, n),
        Scheme::RoundRobin => Partitioning::round_robin(n),
        Scheme::Range => {
            let sample = match first {
                Some(batch) if batch.num_rows() > 0 => batch.project(&keys)?,
                // No rows: every split point is as good; one row of the keys' nulls.
                _ => {
                    return Err(Error::InvalidArgument(
                        "range partitioning samples its split points from the data, which has no rows"
                            .into(),
                    ));
                }
            };
            let options = vec![arrow_schema::SortOptions::default(); keys.len()];
            Partitioning::range(keys, RangeBounds::from_sample(&sample, n, options)?)
        }
    })
}

/// The `data` argument: anything exporting the Arrow PyCapsule interface.
fn arrow_data(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<AnyRecordBatch> {
    data.extract().map_err(|_| {
        Error::InvalidArgument(format!(
            "data must export the Arrow PyCapsule interface (__arrow_c_array__ or \
             __arrow_c_stream__: a pyarrow Table, RecordBatch or RecordBatchReader, a polars \
             DataFrame, a DuckDB relation), not {}",
            data.get_type()
                .name()
                .map_or_else(|_| "this object".to_string(), |n| n.to_string())
        ))
        .into_py(py)
    })
}

/// The `by` argument: `None`, one column name, or a sequence of names.
fn key_names(by: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    match by {
        None => Ok(Vec::new()),
        Some(by) if by.is_instance_of::<PyString>() => Ok(vec![by.extract()?]),
        Some(by) => by.extract(),
    }
}

/// Reads every batch of `data` (the GIL released) and hands it, with its partition ids under
/// `scheme` on the columns `by` names, to `each`. Returns the schema.
fn for_each_batch(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    n: u32,
    by: Option<&Bound<'_, PyAny>>,
    scheme: &str,
    mut each: impl FnMut(&RecordBatch, &[u32]) -> Result<()> + Send,
) -> PyResult<SchemaRef> {
    let data = arrow_data(py, data)?;
    let by = key_names(by)?;
    let run = || -> Result<SchemaRef> {
        let scheme = Scheme::parse(scheme)?;
        if n == 0 {
            return Err(Error::InvalidArgument(
                "the partition count must be at least 1, got 0".into(),
            ));
        }
        let reader = data
            .into_reader()
            .map_err(|e| Error::Input(e.to_string()))?;
        py.detach(move || {
            let schema = reader.schema();
            let keys = key_columns(&schema, &by, scheme)?;
            let mut reader = reader.peekable();
            let first = match reader.peek() {
                Some(Ok(batch)) => Some(batch.clone()),
                Some(Err(_)) => reader.next().transpose()?,
                None => None,
            };
            let partitioning = partitioning(scheme, keys, n, first.as_ref())?;
            let mut ids = PartitionIds::try_new(partitioning, &schema)?;
            let mut buffer = Vec::new();
            for batch in reader {
                let batch = batch?;
                if batch.schema_ref().fields() != schema.fields() {
                    return Err(Error::SchemaMismatch(format!(
                        "a batch of schema {} in a stream of {}",
                        batch.schema(),
                        schema
                    )));
                }
                ids.compute(&batch, &mut buffer)?;
                each(&batch, &buffer)?;
            }
            Ok(schema)
        })
    };
    run().map_err(|e| e.into_py(py))
}

/// partition(data, n, *, by=None, scheme="hash") -> list[pyarrow.Table]
///
/// The rows of `data` in `n` tables, one per destination (empty ones included), in input order
/// within each. The tables are zero-copy slices of the batches partout laid out by
/// destination.
#[pyfunction]
#[pyo3(signature = (data, n, *, by=None, scheme="hash"))]
fn partition<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    n: u32,
    by: Option<&Bound<'py, PyAny>>,
    scheme: &str,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let mut partitioner = Partitioner::try_new(n.max(1)).map_err(|e| Error::from(e).into_py(py))?;
    let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); n as usize];
    let schema = for_each_batch(py, data, n, by, scheme, |batch, ids| {
        let partitioned = partitioner.partition(batch, ids)?;
        for (p, rows) in partitioned.non_empty() {
            parts[p].push(rows);
        }
        Ok(())
    })?;
    parts
        .into_iter()
        .map(|batches| PyTable::try_new(batches, schema.clone())?.into_pyarrow(py))
        .collect()
}

/// partition_ids(data, n, *, by=None, scheme="hash") -> pyarrow.UInt32Array
///
/// Each row's destination, in input order.
#[pyfunction]
#[pyo3(signature = (data, n, *, by=None, scheme="hash"))]
fn partition_ids<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    n: u32,
    by: Option<&Bound<'py, PyAny>>,
    scheme: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let mut all = Vec::new();
    for_each_batch(py, data, n, by, scheme, |_, ids| {
        all.extend_from_slice(ids);
        Ok(())
    })?;
    let field = Arc::new(Field::new("partition", DataType::UInt32, false));
    // As `PyArray::to_pyarrow` does, without its borrow: pyarrow imports the array through
    // the PyCapsule interface.
    let array = PyArray::new(Arc::new(UInt32Array::from(all)), field);
    py.import("pyarrow")?
        .getattr("array")?
        .call1((array.into_pyobject(py)?,))
}

/// `error` and its causes, each after the last (a job's error names what it was doing, its
/// causes what went wrong).
fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !message.ends_with(&text) {
            message = format!("{message}: {text}");
        }
        cause = e.source();
    }
    message
}

/// The Python exception for a failed job, by kind, with its whole message.
fn job_error(error: JobError) -> Error {
    let message = chain(&error);
    match error {
        // The writer's kind of error (an unsupported type, an invalid option), the job's
        // context before its message.
        JobError::Write { source, .. } => writer_error(source).with_message(message),
        JobError::InvalidOption(_) => Error::InvalidArgument(message),
        JobError::OutputNotEmpty(_) | JobError::Io { .. } => Error::Io(message),
        JobError::Input(IoError::File { cause, .. }) => {
            if cause.is_some_and(|c| c.downcast_ref::<std::io::Error>().is_some()) {
                Error::Io(message)
            } else {
                Error::Corrupt(message)
            }
        }
        JobError::Input(IoError::Inputs(_)) => Error::SchemaMismatch(message),
        _ => Error::Input(message),
    }
}

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

/// repartition(inputs, output, n, *, by=None, scheme="hash", format="parquet",
/// compression=None, layout="files", threads=None, memory_limit=None, overwrite=False,
/// progress=None) -> dict
///
/// The `partout repartition` job: every Parquet, Arrow IPC and CSV file of `inputs` into `n`
/// destinations under `output`. Returns the manifest. The GIL is released while it runs;
/// Ctrl-C (or any signal handler raising) cancels it, and it leaves no output. `progress`, a
/// callable, is called about every 50 ms and at the end with the rows partitioned so far and
/// the inputs' rows (`None` when their metadata does not tell); an exception it raises
/// cancels the job.
#[pyfunction]
#[pyo3(signature = (inputs, output, n, *, by=None, scheme="hash", format="parquet",
    compression=None, layout="files", threads=None, memory_limit=None, overwrite=false,
    progress=None))]
#[allow(clippy::too_many_arguments)]
fn repartition<'py>(
    py: Python<'py>,
    inputs: &Bound<'py, PyAny>,
    output: PathBuf,
    n: u32,
    by: Option<&Bound<'py, PyAny>>,
    scheme: &str,
    format: &str,
    compression: Option<&str>,
    layout: &str,
    threads: Option<usize>,
    memory_limit: Option<&Bound<'py, PyAny>>,
    overwrite: bool,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let inputs: Vec<PathBuf> = match inputs.extract::<PathBuf>() {
        Ok(one) => vec![one],
        Err(_) => inputs.extract()?,
    };
    let keys = key_names(by)?;
    let memory_limit: Option<u64> = match memory_limit {
        None => None,
        Some(limit) => Some(match limit.extract::<u64>() {
            Ok(bytes) => bytes,
            Err(_) => {
                let text: String = limit.extract()?;
                parse_bytes(&text).map_err(|e| Error::InvalidArgument(e).into_py(py))?
            }
        }),
    };
    let options = || -> Result<JobOptions> {
        let parse = |what: &str, text: &str, err: String| {
            Error::InvalidArgument(format!("{what} {text:?}: {err}"))
        };
        let scheme = match scheme {
            "round_robin" => "round-robin",
            other => other,
        };
        let mut options = JobOptions::new(inputs, output, n)
            .with_keys(keys)
            .with_scheme(scheme.parse().map_err(|e| parse("scheme", scheme, e))?)
            .with_format(format.parse().map_err(|e| parse("format", format, e))?)
            .with_layout(layout.parse().map_err(|e| parse("layout", layout, e))?)
            .with_overwrite(overwrite);
        if let Some(text) = compression {
            options =
                options.with_compression(text.parse().map_err(|e| parse("compression", text, e))?);
        }
        if let Some(threads) = threads {
            options = options.with_threads(threads);
        }
        if let Some(bytes) = memory_limit {
            options = options.with_memory_limit(bytes);
        }
        Ok(options)
    };
    let options = options().map_err(|e| e.into_py(py))?;
    let watch = Arc::new(Watch::default());
    watch.total.store(u64::MAX, Ordering::Relaxed);
    let (done, result) = std::sync::mpsc::channel();
    let job = {
        let watched = Watched(watch.clone());
        std::thread::spawn(move || {
            let report = Job::try_new(options).and_then(|job| job.run(&watched));
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

/// read(path, *, schema=None, destination=None) -> pyarrow.Table
///
/// One of partout's outputs as a table: an Arrow IPC stream file; a file of Presto pages, given
/// the `schema` they were written with; or, given `destination`, that destination's rows of a
/// shuffle layout directory (every worker's ranges of it, read through the indexes).
#[pyfunction]
#[pyo3(signature = (path, *, schema=None, destination=None))]
fn read<'py>(
    py: Python<'py>,
    path: PathBuf,
    schema: Option<PySchema>,
    destination: Option<u32>,
) -> PyResult<Bound<'py, PyAny>> {
    let schema = schema.map(|s| s.into_inner());
    let run = || -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let streams = match destination {
            None => vec![std::fs::read(&path).map_err(|e| io(&path, e))?],
            Some(p) => shuffle_pieces(&path, p)?,
        };
        let mut found: Option<SchemaRef> = schema.clone();
        let mut batches = Vec::new();
        for bytes in streams {
            let decoded = match &schema {
                Some(schema) => decode_pages(&bytes, schema),
                None => decode_stream(&bytes).map(|(schema, batches)| {
                    found.get_or_insert(schema);
                    batches
                }),
            };
            batches
                .extend(decoded.map_err(|e| Error::Corrupt(format!("{}: {e}", path.display())))?);
        }
        let schema = found.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: destination {} has no rows and no stream to take a schema from",
                path.display(),
                destination.unwrap_or(0)
            ))
        })?;
        Ok((schema, batches))
    };
    let (schema, batches) = py.detach(run).map_err(|e| e.into_py(py))?;
    PyTable::try_new(batches, schema)?.into_pyarrow(py)
}

fn io(path: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

/// Destination `p`'s bytes in a shuffle layout directory: per worker (`shuffle-*.index`), its
/// ranges of `p` concatenated (one stream each).
fn shuffle_pieces(dir: &std::path::Path, p: u32) -> Result<Vec<Vec<u8>>> {
    let mut indexes: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "index"))
        .collect();
    indexes.sort();
    if indexes.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{}: no shuffle index (shuffle-*.index) to read destination {p} from",
            dir.display()
        )));
    }
    let mut pieces = Vec::new();
    for index in indexes {
        let bytes = read_shuffle_destination(&index.with_extension("data"), &index, p).map_err(
            |e| match e {
                IoError::File { cause: Some(_), .. } => Error::Io(e.to_string()),
                other if other.to_string().contains("no destination") => {
                    Error::InvalidArgument(other.to_string())
                }
                other => Error::Corrupt(other.to_string()),
            },
        )?;
        if !bytes.is_empty() {
            pieces.push(bytes);
        }
    }
    Ok(pieces)
}

/// The Python exception for a writer's error, by kind.
fn writer_error(error: WriterError) -> Error {
    match error {
        WriterError::Partition(e) => Error::from(e),
        WriterError::InvalidOption(_) | WriterError::NoSuchDestination { .. } => {
            Error::InvalidArgument(error.to_string())
        }
        WriterError::Encode(FormatError::InvalidArgument(_)) => {
            Error::UnsupportedType(error.to_string())
        }
        WriterError::Sink { .. } => Error::Io(error.to_string()),
        other => Error::Input(other.to_string()),
    }
}

/// Where a Python writer's bytes go: kept in memory, or one file per destination.
#[derive(Debug)]
enum Output {
    Memory(MemorySink),
    Files(FileSink),
}

impl Sink for Output {
    fn write(&mut self, destination: usize, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Memory(sink) => sink.write(destination, bytes),
            Output::Files(sink) => sink.write(destination, bytes),
        }
    }

    fn write_parts(
        &mut self,
        destination: usize,
        parts: &[arrow_buffer::Buffer],
    ) -> std::io::Result<()> {
        match self {
            Output::Memory(sink) => sink.write_parts(destination, parts),
            Output::Files(sink) => sink.write_parts(destination, parts),
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        match self {
            Output::Memory(sink) => sink.finish(),
            Output::Files(sink) => sink.finish(),
        }
    }
}

/// PartitionedWriter(schema, n, *, by=None, scheme="hash", format="ipc", compression=None,
/// memory_limit=None, target_bytes=None, directory=None)
///
/// partout's partitioned writer: batches written to it are partitioned by `scheme` and each
/// destination's rows buffered and flushed, as an Arrow IPC stream or Presto pages, within
/// `memory_limit` bytes. `finish()` gives each destination's bytes, or, with `directory`,
/// writes one file per destination there (`part-00000.arrows` or `.presto`, renamed into
/// place only when finished).
#[pyclass(module = "partout._partout")]
struct PartitionedWriter {
    writer: Option<ExchangeWriter<Encoded<Output>>>,
    directory: bool,
}

#[pymethods]
impl PartitionedWriter {
    #[new]
    #[pyo3(signature = (schema, n, *, by=None, scheme="hash", format="ipc", compression=None,
        memory_limit=None, target_bytes=None, directory=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        schema: PySchema,
        n: u32,
        by: Option<&Bound<'_, PyAny>>,
        scheme: &str,
        format: &str,
        compression: Option<&str>,
        memory_limit: Option<usize>,
        target_bytes: Option<usize>,
        directory: Option<PathBuf>,
    ) -> PyResult<Self> {
        let schema = schema.into_inner();
        let by = key_names(by)?;
        let make = || -> Result<Self> {
            let scheme = Scheme::parse(scheme)?;
            if scheme == Scheme::Range {
                return Err(Error::InvalidArgument(
                    "a writer cannot sample range split points before its data: use \
                     partition or repartition for range partitioning"
                        .into(),
                ));
            }
            let keys = key_columns(&schema, &by, scheme)?;
            let partitioning = partitioning(scheme, keys, n.max(1), None)?;
            let compression = match compression.unwrap_or("none") {
                "none" => Compression::None,
                "lz4" => Compression::Lz4Frame,
                "zstd" => Compression::Zstd,
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "unknown compression {other:?}: expected \"none\", \"lz4\" or \"zstd\""
                    )));
                }
            };
            let (encoding, extension) = match format {
                "ipc" => (Encoding::ipc(compression), "arrows"),
                "presto" => (
                    Encoding::try_new(OutputFormat::Presto, compression)
                        .map_err(|e| Error::InvalidArgument(e.to_string()))?,
                    "presto",
                ),
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "unknown format {other:?}: expected \"ipc\" or \"presto\""
                    )));
                }
            };
            let mut options = WriterOptions::default();
            if let Some(bytes) = memory_limit {
                options = options.with_memory_limit(bytes);
            }
            if let Some(bytes) = target_bytes {
                options = options.with_target_bytes(bytes);
            }
            if n == 0 {
                return Err(Error::InvalidArgument(
                    "the partition count must be at least 1, got 0".into(),
                ));
            }
            let output = match &directory {
                None => Output::Memory(MemorySink::new(n as usize)),
                Some(dir) => Output::Files(
                    FileSink::try_new(dir, extension, n as usize).map_err(|e| io(dir, e))?,
                ),
            };
            let writer = ExchangeWriter::try_new(schema, partitioning, options, encoding, output)
                .map_err(writer_error)?;
            Ok(Self {
                writer: Some(writer),
                directory: directory.is_some(),
            })
        };
        make().map_err(|e| e.into_py(py))
    }

    /// Partitions and buffers every batch of `data` (anything exporting the Arrow PyCapsule
    /// interface, of the writer's schema), flushing destinations as they fill.
    fn write(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let data = arrow_data(py, data)?;
        let Some(writer) = self.writer.as_mut() else {
            return Err(Error::InvalidArgument("the writer is finished".into()).into_py(py));
        };
        let reader = data.into_reader()?;
        py.detach(|| -> Result<()> {
            for batch in reader {
                let batch = batch?;
                if batch.schema_ref().fields() != writer.schema().fields() {
                    return Err(Error::SchemaMismatch(format!(
                        "a batch of schema {} for a writer of {}",
                        batch.schema(),
                        writer.schema()
                    )));
                }
                writer.append(&batch).map_err(writer_error)?;
            }
            Ok(())
        })
        .map_err(|e| e.into_py(py))
    }

    /// Flushes every destination and ends its output. Returns each destination's bytes (a
    /// list of `bytes`, one per destination), or, for a writer into a directory, `None` once
    /// the files are in place.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Vec<Bound<'py, PyBytes>>>> {
        let Some(writer) = self.writer.take() else {
            return Err(Error::InvalidArgument("the writer is finished".into()).into_py(py));
        };
        let (output, _) = py
            .detach(|| writer.finish())
            .map_err(|e| writer_error(e).into_py(py))?;
        Ok(match output {
            Output::Memory(sink) => Some(
                sink.into_outputs()
                    .iter()
                    .map(|bytes| PyBytes::new(py, bytes))
                    .collect(),
            ),
            Output::Files(_) => None,
        })
    }

    /// Rows written so far.
    #[getter]
    fn rows(&self) -> u64 {
        self.writer.as_ref().map_or(0, |w| w.metrics().rows_in)
    }

    /// Whether the writer writes files into a directory.
    #[getter]
    fn writes_files(&self) -> bool {
        self.directory
    }

    /// Drops what is unfinished: a writer into a directory leaves no files behind.
    fn abort(&mut self) {
        self.writer = None;
    }
}

/// The native module: `partout._partout`.
#[pymodule]
fn _partout(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(partition, module)?)?;
    module.add_function(wrap_pyfunction!(partition_ids, module)?)?;
    module.add_function(wrap_pyfunction!(repartition, module)?)?;
    module.add_function(wrap_pyfunction!(read, module)?)?;
    module.add_class::<PartitionedWriter>()?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

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
use pyo3::prelude::*;
use pyo3::types::PyString;
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PyArray, PyTable};
use std::sync::Arc;

/// What can go wrong, by the kind of `partout.errors` class it is raised as.
#[derive(Debug)]
enum Error {
    /// An argument that can never work.
    InvalidArgument(String),
    /// A column type the operation cannot handle.
    UnsupportedType(String),
    /// Data whose schema does not fit the call (a missing key, batches of two schemas).
    SchemaMismatch(String),
    /// The input could not be read.
    Input(String),
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

/// The native module: `partout._partout`.
#[pymodule]
fn _partout(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(partition, module)?)?;
    module.add_function(wrap_pyfunction!(partition_ids, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

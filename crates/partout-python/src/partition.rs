//! `partition` and `partition_ids`: the rows of Arrow data that arrives through the Arrow
//! PyCapsule interface, laid out by destination, or each row's destination.

use crate::errors::{Error, Result};
use arrow_array::{RecordBatch, RecordBatchReader, UInt32Array};
use arrow_schema::{DataType, Field, SchemaRef};
use partout_core::ids::{PartitionIds, PartitioningSpec, Scheme};
use partout_core::plan::MAX_PARTITIONS;
use partout_core::{Partitioner, partition_each};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PyArray, PyTable};
use std::sync::Arc;

/// The `data` argument: anything exporting the Arrow PyCapsule interface.
pub(crate) fn arrow_data(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<AnyRecordBatch> {
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

/// The `n` argument of every call that takes a destination count: any Python integer (or
/// object with `__index__`), checked here to be from 1 to [`MAX_PARTITIONS`] (2^20). One out
/// of that range, however large or negative, is an `InvalidArgumentError` naming it, not the
/// `OverflowError` of a conversion to `u32`; what is not an integer stays a `TypeError`.
pub(crate) fn partition_count(py: Python<'_>, n: &Bound<'_, PyAny>) -> PyResult<u32> {
    let out_of_range = |value: &dyn std::fmt::Display| {
        Error::InvalidArgument(format!(
            "the partition count n must be at least 1 and at most 2^20 = {MAX_PARTITIONS}, \
             got {value}"
        ))
        .into_py(py)
    };
    match n.extract::<i64>() {
        Ok(count) => u32::try_from(count)
            .ok()
            .filter(|c| (1..=MAX_PARTITIONS).contains(c))
            .ok_or_else(|| out_of_range(&count)),
        // An integer past i64 either way (2**64, -2**70): named as Python writes it.
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => Err(out_of_range(&n.str()?)),
        Err(e) => Err(e),
    }
}

/// The `by` argument: `None`, one column name, or a sequence of names.
pub(crate) fn key_names(by: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
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
        let spec = PartitioningSpec::new(scheme.parse::<Scheme>()?, by, n);
        let reader = data
            .into_reader()
            .map_err(|e| Error::Input(e.to_string()))?;
        py.detach(move || {
            let schema = reader.schema();
            let mut reader = reader.peekable();
            // Range partitioning's sample: the first batch (none: the data has no rows).
            let first = match spec.scheme {
                Scheme::Range => match reader.peek() {
                    Some(Ok(batch)) => Some(batch.clone()),
                    Some(Err(_)) => reader.next().transpose()?,
                    None => Some(RecordBatch::new_empty(schema.clone())),
                },
                _ => None,
            };
            let partitioning = spec.resolve(&schema, first.as_ref())?;
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

/// Rows of the input laid out at once by one thread: larger batches are laid out in slices of
/// this many, so that a table of one chunk keeps every thread busy. (Each slice becomes a
/// chunk of every destination's table, so not fewer: at 64Ki rows, lineitem's chunks of
/// ~113,000 rows were cut in two, and importing twice the chunks cost more than the threads
/// gained.)
const SLICE_ROWS: usize = 1 << 18;

/// Input slices laid out together, per thread: enough that threads given slices of different
/// sizes wait little for each other.
const SLICES_PER_THREAD: usize = 4;

/// partition(data, n, *, by=None, scheme="hash", threads=None) -> list[pyarrow.Table]
///
/// The rows of `data` in `n` tables, one per destination (empty ones included), in input order
/// within each, laid out on `threads` threads (default: one per core). The tables are
/// zero-copy slices of the batches partout laid out by destination.
#[pyfunction]
#[pyo3(signature = (data, n, *, by=None, scheme="hash", threads=None))]
pub(crate) fn partition<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    n: &Bound<'py, PyAny>,
    by: Option<&Bound<'py, PyAny>>,
    scheme: &str,
    threads: Option<usize>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let n = partition_count(py, n)?;
    let threads = match threads {
        Some(0) => {
            let e = Error::InvalidArgument("threads must be at least 1, got 0".into());
            return Err(e.into_py(py));
        }
        Some(t) => t,
        None => std::thread::available_parallelism().map_or(1, |t| t.get()),
    };
    let mut partitioners = (0..threads)
        .map(|_| Partitioner::try_new(n.max(1)))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::from(e).into_py(py))?;
    let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); n as usize];
    let mut slices: Vec<(RecordBatch, Vec<u32>)> = Vec::new();
    let mut lay_out = |slices: &mut Vec<(RecordBatch, Vec<u32>)>| -> Result<()> {
        for partitioned in partition_each(&mut partitioners, slices)? {
            for (p, rows) in partitioned.non_empty() {
                parts[p].push(rows);
            }
        }
        slices.clear();
        Ok(())
    };
    let schema = for_each_batch(py, data, n, by, scheme, |batch, ids| {
        for start in (0..batch.num_rows()).step_by(SLICE_ROWS) {
            let rows = SLICE_ROWS.min(batch.num_rows() - start);
            let slice = (batch.slice(start, rows), ids[start..start + rows].to_vec());
            slices.push(slice);
            if slices.len() >= SLICES_PER_THREAD * threads {
                lay_out(&mut slices)?;
            }
        }
        Ok(())
    })?;
    py.detach(|| lay_out(&mut slices))
        .map_err(|e| e.into_py(py))?;
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
pub(crate) fn partition_ids<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    n: &Bound<'py, PyAny>,
    by: Option<&Bound<'py, PyAny>>,
    scheme: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let n = partition_count(py, n)?;
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

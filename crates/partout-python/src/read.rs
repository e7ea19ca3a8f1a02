//! `read`: one of partout's outputs (an Arrow IPC stream, Presto pages, a destination of a
//! finished output directory) as a pyarrow table, read through the output layer's reader.

use crate::errors::{Error, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_exchange::ExchangeError;
use partout_format::Format;
use partout_input::StorageOptions;
use partout_output::{FileCursor, FinishedOutput};
use pyo3::prelude::*;
use pyo3_arrow::{PySchema, PyTable};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// read(path, *, schema=None, destination=None, storage_options=None) -> pyarrow.Table
///
/// One of partout's outputs as a table: an Arrow IPC stream file; a file of Presto pages, given
/// the `schema` they were written with; or, given `destination`, that destination's rows of a
/// finished output directory (its own file, or every worker's ranges of it in the shuffle
/// layout, read through the indexes the manifest lists), or of a finished output in an object
/// store (`s3://bucket/out`, …, its client configured from the environment and then
/// `storage_options`).
#[pyfunction]
#[pyo3(signature = (path, *, schema=None, destination=None, storage_options=None))]
pub(crate) fn read<'py>(
    py: Python<'py>,
    path: PathBuf,
    schema: Option<PySchema>,
    destination: Option<u32>,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<Bound<'py, PyAny>> {
    let schema = schema.map(|s| s.into_inner());
    let options = StorageOptions::new(storage_options.unwrap_or_default());
    let run = || read_batches(&path, schema.as_ref(), destination, &options);
    let (schema, batches) = py.detach(run).map_err(|e| e.into_py(py))?;
    PyTable::try_new(batches, schema)?.into_pyarrow(py)
}

/// The batches `read` gives, and their schema.
fn read_batches(
    path: &Path,
    pages_schema: Option<&SchemaRef>,
    destination: Option<u32>,
    options: &StorageOptions,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let in_store = path.to_str().is_some_and(partout_input::is_store_url);
    let (mut cursor, output_schema) = match destination {
        // A stream file: pages when their schema is given, an IPC stream (which carries its
        // own) when not.
        None if in_store => {
            return Err(Error::InvalidArgument(format!(
                "{}: a stream file in an object store is read as a destination of its output \
                 (give the output's prefix and destination)",
                path.display()
            )));
        }
        None => {
            let format = match pages_schema {
                Some(_) => Format::Presto,
                None => Format::Ipc,
            };
            (FileCursor::file(path, format).map_err(error)?, None)
        }
        Some(p) => {
            let output = match path.to_str() {
                Some(text) if in_store || !options.is_empty() => {
                    FinishedOutput::open_at(text, options)
                }
                _ => FinishedOutput::open(path),
            }
            .map_err(error)?;
            if p >= output.partitions() {
                return Err(Error::InvalidArgument(format!(
                    "{}: no destination {p}; the output has {}",
                    path.display(),
                    output.partitions()
                )));
            }
            (output.cursor(p).map_err(error)?, output.schema().cloned())
        }
    };
    let mut batches = Vec::new();
    while let Some(batch) = cursor.next_batch(pages_schema).map_err(error)? {
        batches.push(batch);
    }
    let schema = pages_schema
        .or(cursor.schema())
        .or(output_schema.as_ref())
        .cloned()
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: Presto pages carry no schema: give the one they were written with",
                path.display()
            ))
        })?;
    Ok((schema, batches))
}

/// A reader's error as the Python exception of its kind.
fn error(e: ExchangeError) -> Error {
    let message = e.report();
    match e {
        ExchangeError::NotFound(_) => Error::Io(message),
        ExchangeError::InvalidArgument(_) => Error::InvalidArgument(message),
        _ => Error::Corrupt(message),
    }
}

//! `read`: one of partout's outputs (an Arrow IPC stream, Presto pages, a destination of a
//! shuffle layout directory) as a pyarrow table.

use crate::errors::{Error, Result, io};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_format::ipc::decode_stream;
use partout_format::presto::decode_pages;
use partout_io::{IoError, read_shuffle_destination};
use pyo3::prelude::*;
use pyo3_arrow::{PySchema, PyTable};
use std::path::PathBuf;

/// read(path, *, schema=None, destination=None) -> pyarrow.Table
///
/// One of partout's outputs as a table: an Arrow IPC stream file; a file of Presto pages, given
/// the `schema` they were written with; or, given `destination`, that destination's rows of a
/// shuffle layout directory (every worker's ranges of it, read through the indexes).
#[pyfunction]
#[pyo3(signature = (path, *, schema=None, destination=None))]
pub(crate) fn read<'py>(
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

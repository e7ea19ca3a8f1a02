//! `PartitionedWriter`: partout's partitioned writer, its destinations' bytes kept in memory
//! or written to one file per destination.

use crate::errors::{Error, Result, io, writer_error};
use crate::partition::{arrow_data, key_names, partition_count};
use partout_core::ids::{PartitioningSpec, Scheme};
use partout_exchange::{
    Encoded, FileSink, MemorySink, PartitionedWriter as ExchangeWriter, Sink, WriterOptions,
};
use partout_format::Encoding;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::PySchema;
use std::path::PathBuf;

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
pub(crate) struct PartitionedWriter {
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
        n: &Bound<'_, PyAny>,
        by: Option<&Bound<'_, PyAny>>,
        scheme: &str,
        format: &str,
        compression: Option<&str>,
        memory_limit: Option<usize>,
        target_bytes: Option<usize>,
        directory: Option<PathBuf>,
    ) -> PyResult<Self> {
        let n = partition_count(py, n)?;
        let schema = schema.into_inner();
        let by = key_names(by)?;
        let make = || -> Result<Self> {
            let scheme = scheme.parse::<Scheme>()?;
            if scheme == Scheme::Range {
                return Err(Error::InvalidArgument(
                    "a writer cannot sample range split points before its data: use \
                     partition or repartition for range partitioning"
                        .into(),
                ));
            }
            let partitioning = PartitioningSpec::new(scheme, by, n).resolve(&schema, None)?;
            let encoding = Encoding::parse(format, compression)?;
            let extension = partout_output::extension(encoding.format());
            let mut options = WriterOptions::default();
            if let Some(bytes) = memory_limit {
                options = options.with_memory_limit(bytes);
            }
            if let Some(bytes) = target_bytes {
                options = options.with_target_bytes(bytes);
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

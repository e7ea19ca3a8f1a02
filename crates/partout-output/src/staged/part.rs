//! One staged destination's files as they are written: [`StagedParts`] opens each part (a
//! Parquet file, or an Arrow IPC file), writes the destination's gathered batches into it and,
//! once it is full or the rows end, closes it and renames it to its name.

use super::StagedParquet;
use crate::rollover::{PartFile, Parts};
use crate::{DestinationFile, Partial, io_error, sink_error, statistics};
use arrow_array::RecordBatch;
use arrow_ipc::writer::FileWriter;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use partout_exchange::WriterError;
use partout_format::Encoding;
use statistics::Running;
use std::fs::File;
use std::io::{BufWriter, Write};

/// What an open part is written with.
enum Writer {
    Parquet(ArrowWriter<File>),
    Ipc(FileWriter<Counting<BufWriter<File>>>),
}

/// An open part of a destination's files, written as `.NAME.partial` (removed when dropped
/// before it is renamed into place).
pub(super) struct StagedPart {
    writer: Writer,
    rows: u64,
    /// The most rows a Parquet row group holds.
    max_row_group_rows: Option<usize>,
    /// An Arrow IPC file's column statistics, as its batches are written (when recorded).
    running: Option<Running>,
    partial: Partial,
}

impl PartFile for StagedPart {
    fn rows(&self) -> u64 {
        self.rows
    }

    /// For Parquet, the row groups written and the writer's estimate of its open one.
    fn bytes(&self) -> u64 {
        match &self.writer {
            Writer::Parquet(writer) => (writer.bytes_written() + writer.in_progress_size()) as u64,
            Writer::Ipc(writer) => writer.get_ref().bytes,
        }
    }

    fn row_group_room(&self) -> Option<u64> {
        match &self.writer {
            Writer::Parquet(writer) => {
                let max = self.max_row_group_rows? as u64;
                Some(max.saturating_sub(writer.in_progress_rows() as u64))
            }
            Writer::Ipc(_) => None,
        }
    }
}

/// Destination `p`'s way to open, write and close its files, named after `name`.
pub(super) struct StagedParts<'a> {
    pub(super) staged: &'a StagedParquet,
    pub(super) p: usize,
    pub(super) name: &'a str,
    pub(super) properties: &'a WriterProperties,
}

impl Parts for StagedParts<'_> {
    type File = StagedPart;

    fn open(&mut self, part: usize) -> Result<StagedPart, WriterError> {
        let p = self.p;
        let partial = Partial::new(self.staged.partial(p, part));
        let file = File::create(partial.path()).map_err(io_error(Some(p)))?;
        let writer = match self.staged.ipc {
            Some(encoding) => Writer::Ipc(self.ipc_writer(file, encoding)?),
            None => Writer::Parquet(
                ArrowWriter::try_new(file, self.staged.schema(), Some(self.properties.clone()))
                    .map_err(|e| sink_error(Some(p), e))?,
            ),
        };
        let running = (self.staged.ipc.is_some() && self.staged.records_statistics())
            .then(|| Running::new(&self.staged.schema()));
        Ok(StagedPart {
            writer,
            rows: 0,
            max_row_group_rows: self.properties.max_row_group_row_count(),
            running,
            partial,
        })
    }

    fn write(&mut self, file: &mut StagedPart, batch: &RecordBatch) -> Result<(), WriterError> {
        match &mut file.writer {
            Writer::Parquet(writer) => writer.write(batch).map_err(|e| sink_error(Some(self.p), e)),
            Writer::Ipc(writer) => writer.write(batch).map_err(|e| sink_error(Some(self.p), e)),
        }?;
        if let Some(running) = &mut file.running {
            running
                .add(batch)
                .map_err(|e| sink_error(Some(self.p), e))?;
        }
        file.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Ends the file (for Parquet, its last row group and its footer, its statistics read
    /// from it when asked for; for Arrow IPC, those gathered as it was written) and renames
    /// it to its name, its directories made.
    fn close(&mut self, mut file: StagedPart, part: usize) -> Result<DestinationFile, WriterError> {
        let p = self.p;
        let (bytes, row_groups, columns) = match &mut file.writer {
            Writer::Parquet(writer) => {
                let metadata = writer.finish().map_err(|e| sink_error(Some(p), e))?;
                let row_groups = metadata
                    .row_groups()
                    .iter()
                    .map(|rg| rg.num_rows() as u64)
                    .collect();
                let columns = (self.staged.records_statistics())
                    .then(|| statistics::of_file(&self.staged.schema(), &metadata));
                (writer.bytes_written() as u64, Some(row_groups), columns)
            }
            Writer::Ipc(writer) => {
                writer.finish().map_err(|e| sink_error(Some(p), e))?;
                writer.get_mut().flush().map_err(io_error(Some(p)))?;
                let columns = file.running.take().map(Running::finish);
                (writer.get_ref().bytes, None, columns)
            }
        };
        let name = self.staged.rollover.file_name(self.name, part);
        file.partial
            .place(&self.staged.dir().join(&name))
            .map_err(io_error(Some(p)))?;
        // A file that does not roll over is named by its writer's caller, which owns the
        // name (see `StagedParquet::finish_rest`).
        let name = match self.staged.rollover.is_set() {
            true => name,
            false => String::new(),
        };
        Ok(DestinationFile {
            name,
            rows: file.rows,
            bytes,
            row_groups,
            columns,
        })
    }
}

impl StagedParts<'_> {
    /// An Arrow IPC file (the format dataset readers take: pyarrow's `format="ipc"`, Polars'
    /// `scan_ipc`) compressed as `encoding` says.
    fn ipc_writer(
        &self,
        file: File,
        encoding: Encoding,
    ) -> Result<FileWriter<Counting<BufWriter<File>>>, WriterError> {
        let p = self.p;
        let options = partout_format::ipc::ipc_options(encoding.compression())
            .map_err(|e| sink_error(Some(p), e))?;
        let out = Counting {
            inner: BufWriter::with_capacity(256 << 10, file),
            bytes: 0,
        };
        FileWriter::try_new_with_options(out, &self.staged.schema(), options)
            .map_err(|e| sink_error(Some(p), e))
    }
}

/// A writer that counts the bytes it is given.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

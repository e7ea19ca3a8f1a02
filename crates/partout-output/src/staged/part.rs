//! One staged destination's files as they are written: [`StagedParts`] opens each part (a
//! [`ParquetFile`], or an Arrow IPC file), writes the destination's gathered batches into it and,
//! once it is full or the rows end, closes it and renames it to its name.

use super::StagedFiles;
use crate::parquet_file::ParquetFile;
use crate::rollover::{PartFile, Parts};
use crate::{DestinationFile, Partial, io_error, sink_error, statistics};
use arrow_array::RecordBatch;
use arrow_ipc::writer::FileWriter;
use parquet::file::properties::WriterProperties;
use partout_exchange::WriterError;
use partout_format::Encoding;
use statistics::Running;
use std::fs::File;
use std::io::{BufWriter, Write};

/// An open part of a destination's files, written as `.NAME.partial` (removed when dropped
/// before it is renamed into place).
pub(super) enum StagedPart {
    Parquet(ParquetFile),
    Ipc(IpcPart),
}

/// An open Arrow IPC part.
pub(super) struct IpcPart {
    writer: FileWriter<Counting<BufWriter<File>>>,
    rows: u64,
    /// Its column statistics, as its batches are written (when recorded).
    running: Option<Running>,
    partial: Partial,
}

impl PartFile for StagedPart {
    fn rows(&self) -> u64 {
        match self {
            StagedPart::Parquet(file) => file.rows(),
            StagedPart::Ipc(file) => file.rows,
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            StagedPart::Parquet(file) => file.bytes(),
            StagedPart::Ipc(file) => file.writer.get_ref().bytes,
        }
    }

    fn row_group_room(&self) -> Option<u64> {
        match self {
            StagedPart::Parquet(file) => file.row_group_room(),
            StagedPart::Ipc(_) => None,
        }
    }
}

/// Destination `p`'s way to open, write and close its files, named after `name`.
pub(super) struct StagedParts<'a> {
    pub(super) staged: &'a StagedFiles,
    pub(super) p: usize,
    pub(super) name: &'a str,
    pub(super) properties: &'a WriterProperties,
}

impl Parts for StagedParts<'_> {
    type File = StagedPart;
    type Ended = DestinationFile;

    fn open(&mut self, part: usize) -> Result<StagedPart, WriterError> {
        let (p, path) = (self.p, self.staged.partial(self.p, part));
        let Some(encoding) = self.staged.ipc else {
            let file = ParquetFile::create(p, path, self.staged.schema(), self.properties, None)?;
            return Ok(StagedPart::Parquet(file));
        };
        let partial = Partial::new(path);
        let file = File::create(partial.path()).map_err(io_error(Some(p)))?;
        Ok(StagedPart::Ipc(IpcPart {
            writer: self.ipc_writer(file, encoding)?,
            rows: 0,
            running: (self.staged.records_statistics())
                .then(|| Running::new(&self.staged.schema())),
            partial,
        }))
    }

    fn write(&mut self, file: &mut StagedPart, batch: &RecordBatch) -> Result<(), WriterError> {
        let file = match file {
            StagedPart::Parquet(file) => return file.write(batch),
            StagedPart::Ipc(file) => file,
        };
        let p = self.p;
        file.writer
            .write(batch)
            .map_err(|e| sink_error(Some(p), e))?;
        if let Some(running) = &mut file.running {
            running.add(batch).map_err(|e| sink_error(Some(p), e))?;
        }
        file.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Ends the file (for Parquet, its last row group and its footer, its statistics read
    /// from it when asked for; for Arrow IPC, those gathered as it was written) and renames
    /// it to its name, its directories made.
    fn close(&mut self, file: StagedPart, part: usize) -> Result<DestinationFile, WriterError> {
        let p = self.p;
        let (mut partial, mut ended) = match file {
            StagedPart::Parquet(file) => file.end(self.staged.records_statistics())?,
            StagedPart::Ipc(mut file) => {
                file.writer.finish().map_err(|e| sink_error(Some(p), e))?;
                file.writer.get_mut().flush().map_err(io_error(Some(p)))?;
                let ended = DestinationFile {
                    name: String::new(),
                    rows: file.rows,
                    bytes: file.writer.get_ref().bytes,
                    row_groups: None,
                    columns: file.running.take().map(Running::finish),
                };
                (file.partial, ended)
            }
        };
        let name = self.staged.rollover.file_name(self.name, part);
        partial
            .place(&self.staged.dir().join(&name))
            .map_err(io_error(Some(p)))?;
        // A file that does not roll over is named by its writer's caller, which owns the
        // name (see `StagedFiles::finish_rest`).
        if self.staged.rollover.is_set() {
            ended.name = name;
        }
        Ok(ended)
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

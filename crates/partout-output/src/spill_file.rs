//! A spill file: batches of one schema written to a hidden file of a directory as an Arrow IPC
//! stream, then read back in order. It is the one way this crate spills rows, whether a
//! worker's rows sorted by destination ([`SortedRuns`](crate::SortedRuns)) or one
//! destination's rows sorted by key before its file is written (`staged::sort`).
//!
//! ```text
//!  SpillWriter::create(dir, prefix) ─► write(batch)… ─► finish ─► SpillFile ─► read(): batches
//!        DIR/PREFIX-XXXXXX.arrows, removed once the writer or the file is dropped
//! ```
//!
//! The exchange's spill file (`partout_exchange`'s, items read back at their offsets in any
//! order) and Ballista's (the task's output itself, laid out for Ballista's reader) are other
//! things: neither is a stream read back once in order.

use crate::read_back::{check, own_stream_reader};
use crate::sink_error;
use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::SchemaRef;
use partout_exchange::WriterError;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use tempfile::TempPath;

/// Bytes a spill file's writer buffers.
const WRITE_BUFFER: usize = 64 << 10;

/// A spill file being written.
pub(crate) struct SpillWriter {
    writer: StreamWriter<BufWriter<File>>,
    file: SpillFile,
}

impl SpillWriter {
    /// A new hidden file `dir/{prefix}XXXXXX.arrows` for batches of `schema`, spilled for
    /// `destination` (the destination its errors name, if one).
    pub(crate) fn create(
        dir: &Path,
        prefix: &str,
        schema: &SchemaRef,
        destination: Option<usize>,
    ) -> Result<Self, WriterError> {
        let failed = |e: &dyn std::fmt::Display| {
            sink_error(
                destination,
                format!("making a spill file in {}: {e}", dir.display()),
            )
        };
        let (handle, path) = tempfile::Builder::new()
            .prefix(prefix)
            .suffix(".arrows")
            .tempfile_in(dir)
            .map_err(|e| failed(&e))?
            .into_parts();
        let file = SpillFile { path, destination };
        let writer = StreamWriter::try_new(BufWriter::with_capacity(WRITE_BUFFER, handle), schema)
            .map_err(|e| file.error("writing", &e))?;
        Ok(Self { writer, file })
    }

    /// Where it is written.
    pub(crate) fn path(&self) -> &Path {
        self.file.path()
    }

    /// Appends `batch`.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<(), WriterError> {
        self.writer
            .write(batch)
            .map_err(|e| self.file.error("writing", &e))
    }

    /// Ends the stream and closes the file, to be read back.
    pub(crate) fn finish(mut self) -> Result<SpillFile, WriterError> {
        let file = &self.file;
        self.writer
            .finish()
            .map_err(|e| file.error("writing", &e))?;
        self.writer
            .get_mut()
            .flush()
            .map_err(|e| file.error("writing", &e))?;
        Ok(self.file)
    }
}

/// A spill file written whole; removed when dropped.
pub(crate) struct SpillFile {
    path: TempPath,
    destination: Option<usize>,
}

impl SpillFile {
    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Its batches, in order, through a buffer of `buffer` bytes.
    pub(crate) fn read(&self, buffer: usize) -> Result<SpillReader, WriterError> {
        let handle = File::open(&self.path).map_err(|e| self.error("reading back", &e))?;
        let reader = StreamReader::try_new(BufReader::with_capacity(buffer, handle), None)
            .map(own_stream_reader)
            .map_err(|e| self.error("reading back", &e))?;
        Ok(SpillReader {
            reader,
            path: self.path.to_path_buf(),
            destination: self.destination,
        })
    }

    /// The error of `doing` something to it, for `why`.
    fn error(&self, doing: &str, why: &dyn std::fmt::Display) -> WriterError {
        spill_error(self.destination, doing, &self.path, why)
    }
}

/// A spill file's batches, read back in order; each error names the file.
pub(crate) struct SpillReader {
    reader: StreamReader<BufReader<File>>,
    path: PathBuf,
    destination: Option<usize>,
}

impl Iterator for SpillReader {
    type Item = Result<RecordBatch, WriterError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self
            .reader
            .next()?
            .and_then(|batch| check(&batch).map(|()| batch));
        Some(next.map_err(|e| spill_error(self.destination, "reading back", &self.path, &e)))
    }
}

fn spill_error(
    destination: Option<usize>,
    doing: &str,
    path: &Path,
    why: &dyn std::fmt::Display,
) -> WriterError {
    sink_error(
        destination,
        format!("{doing} the spill file {}: {why}", path.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;

    fn batch(from: i64, rows: i64) -> RecordBatch {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(from..from + rows));
        let names: ArrayRef = Arc::new(StringArray::from_iter_values(
            (from..from + rows).map(|i| format!("row {i}")),
        ));
        RecordBatch::try_from_iter([("id", ids), ("name", names)]).unwrap()
    }

    #[test]
    fn batches_come_back_as_written_and_the_file_goes_with_its_handle() {
        let dir = tempfile::tempdir().unwrap();
        let written = [batch(0, 5), batch(5, 0), batch(5, 1000)];
        let mut writer =
            SpillWriter::create(dir.path(), ".spill-", &written[0].schema(), None).unwrap();
        let name = writer
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with(".spill-") && name.ends_with(".arrows"),
            "{name}"
        );
        for b in &written {
            writer.write(b).unwrap();
        }
        let file = writer.finish().unwrap();
        let read: Vec<RecordBatch> = file.read(1024).unwrap().map(Result::unwrap).collect();
        assert_eq!(read, written);
        // Read twice: the file stays until its handle goes.
        assert_eq!(file.read(1024).unwrap().count(), 3);
        let path = file.path().to_path_buf();
        drop(file);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_abandoned_writer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer =
            SpillWriter::create(dir.path(), ".spill-", &batch(0, 1).schema(), Some(3)).unwrap();
        writer.write(&batch(0, 100)).unwrap();
        drop(writer);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it_and_the_destination() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer =
            SpillWriter::create(dir.path(), ".spill-", &batch(0, 1).schema(), Some(7)).unwrap();
        writer.write(&batch(0, 100)).unwrap();
        let file = writer.finish().unwrap();
        let bytes = std::fs::read(file.path()).unwrap();
        std::fs::write(file.path(), &bytes[..bytes.len() / 2]).unwrap();
        let error = file
            .read(1024)
            .unwrap()
            .find_map(Result::err)
            .expect("a cut file fails");
        assert!(error.to_string().contains("destination 7"), "{error}");
        let why = crate::causes(&error);
        let name = file.path().display().to_string();
        assert!(why.contains(&name) && why.contains("reading back"), "{why}");
    }
}

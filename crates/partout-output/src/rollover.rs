//! [`Rollover`]: when a destination's file ends and its next begins (at most so many rows, or
//! about so many bytes), and [`Rolling`], the one driver every writer of files rolls with.
//!
//! ```text
//!  batch ─► Rolling::write ─► the open part (opened on the first row) takes the rows it has
//!           room for ─► full? ─► closed, named `part-00003-00001.parquet` ─► the next part
//! ```
//!
//! A row limit is exact: a batch is cut where the file fills. A byte limit is the writer's own
//! estimate of the file so far (for Parquet, its written row groups and its open one), checked
//! after each batch and, for Parquet, at each row group's end (a batch is cut there): a file
//! ends at the first such boundary past it, so no file passes the limit by more than one row
//! group (or batch).

use crate::{DestinationFile, OutputError, Result};
use arrow_array::RecordBatch;
use partout_exchange::WriterError;
use smallvec::SmallVec;

/// When a destination's file rolls over to the next: after `max_rows` rows, or once it holds
/// about `max_bytes` bytes; neither set, one file per destination.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rollover {
    max_rows: Option<u64>,
    max_bytes: Option<u64>,
}

impl Rollover {
    /// Files of at most `max_rows` rows and about `max_bytes` bytes (`None`: no limit).
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for a limit of zero.
    pub fn new(max_rows: Option<u64>, max_bytes: Option<u64>) -> Result<Self> {
        if max_rows == Some(0) {
            return Err(OutputError::Invalid(
                "a file holds at least one row: the most rows per file must be above zero".into(),
            ));
        }
        if max_bytes == Some(0) {
            return Err(OutputError::Invalid(
                "the most bytes per file must be above zero".into(),
            ));
        }
        Ok(Self {
            max_rows,
            max_bytes,
        })
    }

    /// Whether files roll over at all.
    pub fn is_set(&self) -> bool {
        self.max_rows.is_some() || self.max_bytes.is_some()
    }

    /// The most rows a file holds.
    pub fn max_rows(&self) -> Option<u64> {
        self.max_rows
    }

    /// About the most bytes a file holds.
    pub fn max_bytes(&self) -> Option<u64> {
        self.max_bytes
    }

    /// The name of file `part` of a destination whose file is `name` without rollover:
    /// `name` itself when files do not roll; else the part's number before the extension,
    /// `year=2024/part-00000-00003.parquet`.
    pub fn file_name(&self, name: &str, part: usize) -> String {
        if !self.is_set() {
            return name.to_string();
        }
        let base = name.rfind('/').map_or(0, |slash| slash + 1);
        match name[base..].rfind('.').filter(|&dot| dot > 0) {
            Some(dot) => {
                let (stem, extension) = name.split_at(base + dot);
                format!("{stem}-{part:05}{extension}")
            }
            None => format!("{name}-{part:05}"),
        }
    }

    /// Rows a file holding `rows` may still take.
    pub(crate) fn rows_left(&self, rows: u64) -> u64 {
        self.max_rows
            .map_or(u64::MAX, |max| max.saturating_sub(rows))
    }

    /// Whether a file of `rows` rows and about `bytes` bytes is full.
    pub(crate) fn is_full(&self, rows: u64, bytes: u64) -> bool {
        self.rows_left(rows) == 0 || self.max_bytes.is_some_and(|max| bytes >= max)
    }
}

/// A destination's file being written, one part of its files.
pub(crate) trait PartFile {
    /// Rows written to it.
    fn rows(&self) -> u64;

    /// About the bytes it holds: what the file will be if it ends now.
    fn bytes(&self) -> u64;

    /// Rows until its open row group ends (`None`: every write is a unit of its own): a byte
    /// limit is checked at each row group's end, not after a write of several.
    fn row_group_room(&self) -> Option<u64> {
        None
    }
}

/// A file a writer ended, as its destination's [`Rolling`] keeps it.
pub(crate) trait Ended {
    /// Its bytes.
    fn bytes(&self) -> u64;
}

impl Ended for DestinationFile {
    fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// How a writer opens and closes a destination's files.
pub(crate) trait Parts {
    /// Its open file.
    type File: PartFile;

    /// A file it ended (named and in place, or waiting for its name).
    type Ended: Ended;

    /// Opens file `part`.
    fn open(&mut self, part: usize) -> Result<Self::File, WriterError>;

    /// Writes `batch` to `file`.
    fn write(&mut self, file: &mut Self::File, batch: &RecordBatch) -> Result<(), WriterError>;

    /// Ends file `part`.
    fn close(&mut self, file: Self::File, part: usize) -> Result<Self::Ended, WriterError>;
}

/// A destination's files as they roll: the open one, and those ended before it.
pub(crate) struct Rolling<F, E = DestinationFile> {
    rollover: Rollover,
    open: Option<F>,
    done: SmallVec<[E; 1]>,
    /// The bytes of the files in `done`.
    closed_bytes: u64,
}

impl<F: PartFile, E: Ended> Rolling<F, E> {
    /// No file yet.
    pub(crate) fn new(rollover: Rollover) -> Self {
        Self {
            rollover,
            open: None,
            done: SmallVec::new(),
            closed_bytes: 0,
        }
    }

    /// About the bytes written so far, every file together.
    pub(crate) fn bytes(&self) -> u64 {
        self.closed_bytes + self.open.as_ref().map_or(0, PartFile::bytes)
    }

    /// Writes `batch`: into the open file (opened first when there is none) as many rows as
    /// it has room for, closing it when full, then the rest into the next.
    pub(crate) fn write(
        &mut self,
        batch: &RecordBatch,
        parts: &mut impl Parts<File = F, Ended = E>,
    ) -> Result<(), WriterError> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let file = match &mut self.open {
                Some(file) => file,
                None => self.open.insert(parts.open(self.done.len())?),
            };
            let mut room = self.rollover.rows_left(file.rows());
            if self.rollover.max_bytes.is_some() {
                room = room.min(file.row_group_room().unwrap_or(u64::MAX).max(1));
            }
            let take = usize::try_from(room).map_or(batch.num_rows() - offset, |room| {
                room.min(batch.num_rows() - offset)
            });
            if take == 0 {
                // A full file is closed as it fills; were one left open, it closes now.
                self.close(parts)?;
                continue;
            }
            match (offset, take) {
                (0, n) if n == batch.num_rows() => parts.write(file, batch)?,
                _ => parts.write(file, &batch.slice(offset, take))?,
            }
            offset += take;
            if self.rollover.is_full(file.rows(), file.bytes()) {
                self.close(parts)?;
            }
        }
        Ok(())
    }

    /// Ends the open file, if any.
    fn close(&mut self, parts: &mut impl Parts<File = F, Ended = E>) -> Result<(), WriterError> {
        if let Some(file) = self.open.take() {
            let part = self.done.len();
            let closed = parts.close(file, part)?;
            self.closed_bytes += closed.bytes();
            self.done.push(closed);
        }
        Ok(())
    }

    /// Ends the files: the open one closed; a destination that got no rows gets one file
    /// (of the schema alone) when `empty_file`, else none.
    pub(crate) fn finish(
        mut self,
        parts: &mut impl Parts<File = F, Ended = E>,
        empty_file: bool,
    ) -> Result<SmallVec<[E; 1]>, WriterError> {
        if self.open.is_none() && self.done.is_empty() && empty_file {
            self.open = Some(parts.open(0)?);
        }
        self.close(parts)?;
        Ok(self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int32Array};
    use std::sync::Arc;

    /// A file that counts what it is given, its bytes four a row.
    struct Counted {
        part: usize,
        rows: u64,
        writes: Vec<usize>,
    }

    impl PartFile for Counted {
        fn rows(&self) -> u64 {
            self.rows
        }
        fn bytes(&self) -> u64 {
            self.rows * 4
        }
    }

    #[derive(Default)]
    struct Opened {
        opened: Vec<usize>,
        closed: Vec<(usize, Vec<usize>)>,
    }

    impl Parts for Opened {
        type File = Counted;
        type Ended = DestinationFile;
        fn open(&mut self, part: usize) -> Result<Counted, WriterError> {
            self.opened.push(part);
            Ok(Counted {
                part,
                rows: 0,
                writes: Vec::new(),
            })
        }
        fn write(&mut self, file: &mut Counted, batch: &RecordBatch) -> Result<(), WriterError> {
            file.rows += batch.num_rows() as u64;
            file.writes.push(batch.num_rows());
            Ok(())
        }
        fn close(&mut self, file: Counted, part: usize) -> Result<DestinationFile, WriterError> {
            assert_eq!(file.part, part);
            self.closed.push((part, file.writes));
            Ok(DestinationFile {
                name: format!("f-{part}"),
                rows: file.rows,
                bytes: file.rows * 4,
                row_groups: None,
                columns: None,
            })
        }
    }

    fn batch(rows: i32) -> RecordBatch {
        let column: ArrayRef = Arc::new(Int32Array::from_iter_values(0..rows));
        RecordBatch::try_from_iter([("v", column)]).unwrap()
    }

    fn roll(rollover: Rollover, batches: &[i32], empty_file: bool) -> (Vec<u64>, Opened) {
        let mut parts = Opened::default();
        let mut rolling = Rolling::new(rollover);
        for &rows in batches {
            rolling.write(&batch(rows), &mut parts).unwrap();
        }
        let files = rolling.finish(&mut parts, empty_file).unwrap();
        (files.iter().map(|f| f.rows).collect(), parts)
    }

    #[test]
    fn a_row_limit_cuts_batches_where_files_fill() {
        let rows = Rollover::new(Some(10), None).unwrap();
        let (files, parts) = roll(rows, &[7, 7, 25, 1], false);
        assert_eq!(files, vec![10, 10, 10, 10]);
        assert_eq!(parts.opened, vec![0, 1, 2, 3]);
        // Each write takes what the file has room for, in order.
        let writes: Vec<Vec<usize>> = parts.closed.into_iter().map(|(_, w)| w).collect();
        assert_eq!(writes, vec![vec![7, 3], vec![4, 6], vec![10], vec![9, 1]]);
    }

    #[test]
    fn a_byte_limit_ends_a_file_at_the_first_batch_past_it() {
        // 4 bytes a row: 100 bytes is 25 rows; a file ends once it holds 25 rows or more.
        let bytes = Rollover::new(None, Some(100)).unwrap();
        let (files, _) = roll(bytes, &[10, 10, 10, 10, 10, 3], false);
        assert_eq!(files, vec![30, 23]);
        let both = Rollover::new(Some(12), Some(100)).unwrap();
        let (files, _) = roll(both, &[30], false);
        assert_eq!(files, vec![12, 12, 6]);
    }

    #[test]
    fn without_limits_a_destination_has_one_file() {
        let (files, parts) = roll(Rollover::default(), &[5, 1000, 3], false);
        assert_eq!(files, vec![1008]);
        assert_eq!(parts.opened, vec![0]);
    }

    #[test]
    fn a_destination_without_rows_gets_one_empty_file_or_none() {
        let rows = Rollover::new(Some(10), None).unwrap();
        assert_eq!(roll(rows, &[0], true).0, vec![0]);
        assert_eq!(roll(rows, &[], false).0, Vec::<u64>::new());
        // A file filled exactly is closed: no empty file follows it.
        assert_eq!(roll(rows, &[10], true).0, vec![10]);
    }

    #[test]
    fn parts_are_numbered_before_the_extension() {
        let r = Rollover::new(Some(1), None).unwrap();
        assert_eq!(
            r.file_name("part-00001.parquet", 3),
            "part-00001-00003.parquet"
        );
        assert_eq!(
            r.file_name("year=2024/part-00000.arrow", 12),
            "year=2024/part-00000-00012.arrow"
        );
        assert_eq!(r.file_name("a.b=1/part", 0), "a.b=1/part-00000");
        assert_eq!(
            Rollover::default().file_name("part-00001.parquet", 0),
            "part-00001.parquet"
        );
    }

    #[test]
    fn zero_limits_are_refused() {
        let rows = Rollover::new(Some(0), None).unwrap_err().to_string();
        assert!(rows.contains("at least one row"), "{rows}");
        let bytes = Rollover::new(None, Some(0)).unwrap_err().to_string();
        assert!(bytes.contains("bytes per file"), "{bytes}");
    }
}

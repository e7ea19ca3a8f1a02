//! Frames: the inputs cut into pieces that workers read independently.
//!
//! A Parquet file is cut by row groups (a large row group into equal row ranges, but not in an
//! object store, where each range would get the group's bytes again), an Arrow IPC
//! file by record batches; a CSV file or an IPC stream can only be read from its start and is
//! one frame. Pieces are grouped into frames of about the asked size, and a frame that would
//! come out under half of it is merged into its neighbour, so no tiny trailing task is made.
//!
//! A local file's `Version` (length, modification time, identity) is taken before it is
//! planned, and each frame checks it when it opens the file and once it has read its rows: a
//! file truncated, written over or replaced while the run reads it is an error naming it,
//! never rows of two versions of it.

use crate::contain::{Batches, Contained, contain};
use crate::reader::{ipc_file, open, parquet_metadata};
use crate::{InputFile, InputFormat, IoError, Result, file_error, file_io_error};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use std::fmt;
use std::path::{Path, PathBuf};

/// Bytes of a Parquet file per frame: a file is cut into about one frame per this many of
/// its bytes at most (and one per row group), whatever rows its metadata claims.
const PARQUET_BYTES_PER_FRAME: u64 = 64;

/// What of its file a frame reads.
#[derive(Clone)]
enum Part {
    /// Row groups `groups` of a Parquet file; with `rows`, only rows `rows.0..rows.1` of them
    /// (counted from the first group's start).
    Parquet {
        metadata: ArrowReaderMetadata,
        groups: Vec<usize>,
        rows: Option<(usize, usize)>,
    },
    /// Record batches `start..end` of an Arrow IPC file.
    IpcFile { start: usize, end: usize },
    /// The whole file.
    Whole,
}

/// What a local input file was when the run planned it: a frame reads it only as long as it
/// is still this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    len: u64,
    modified: Option<std::time::SystemTime>,
    /// Its device and inode: the same file, not another put in its place.
    #[cfg(unix)]
    identity: (u64, u64),
}

impl Version {
    /// The version of the local file `path` now.
    fn of(path: &Path) -> Result<Self> {
        let meta = std::fs::metadata(path).map_err(|e| file_io_error(path, "cannot be read", e))?;
        Ok(Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            identity: {
                use std::os::unix::fs::MetadataExt;
                (meta.dev(), meta.ino())
            },
        })
    }

    /// The version of `file` before it is read; none for an object of a store (whose reads
    /// are checked against the size it was listed with) or a file that is not a regular one
    /// (a pipe's or a device's times change as it is used).
    fn planned(file: &InputFile) -> Result<Option<Self>> {
        match file.in_store() || !file.path.is_file() {
            true => Ok(None),
            false => Self::of(&file.path).map(Some),
        }
    }

    /// An error naming `path` unless the file is still `planned`.
    fn check(planned: Option<Self>, path: &Path) -> Result<()> {
        let Some(planned) = planned else {
            return Ok(());
        };
        let now = Self::of(path)?;
        #[cfg(unix)]
        let replaced = now.identity != planned.identity;
        #[cfg(not(unix))]
        let replaced = false;
        let how = if replaced {
            "another file was put in its place".to_string()
        } else if now.len != planned.len {
            format!("{} bytes when the run began, {} now", planned.len, now.len)
        } else if now.modified != planned.modified {
            "written over".to_string()
        } else {
            return Ok(());
        };
        Err(file_error(
            path,
            format!("changed while the run read it ({how}): its rows cannot be trusted"),
        ))
    }
}

/// A piece of one input file that a worker reads on its own.
#[derive(Clone)]
pub struct Frame {
    file: InputFile,
    rows: Option<u64>,
    part: Part,
    version: Option<Version>,
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = match &self.part {
            Part::Parquet { groups, rows, .. } => format!("row groups {groups:?}, rows {rows:?}"),
            Part::IpcFile { start, end } => format!("batches {start}..{end}"),
            Part::Whole => "whole".to_string(),
        };
        f.debug_struct("Frame")
            .field("path", &self.file.path)
            .field("rows", &self.rows)
            .field("part", &part)
            .finish()
    }
}

impl Frame {
    /// The file the frame is a piece of.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Its rows, when the file says so without being read (Parquet).
    pub fn rows(&self) -> Option<u64> {
        self.rows
    }

    /// Reads the frame's batches; each must have `schema`'s fields.
    ///
    /// # Errors
    /// [`IoError::File`] when the file cannot be opened; read errors come from the iterator,
    /// each naming the file.
    pub fn read(&self, schema: &SchemaRef) -> Result<FrameReader> {
        let path = &self.file.path;
        Version::check(self.version, path)?;
        let batches: Batches = match &self.part {
            Part::Parquet {
                metadata,
                groups,
                rows,
            } => {
                let handle = crate::source::parquet_bytes(&self.file, metadata.metadata(), groups)?;
                let reader = contain(&self.file, || {
                    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
                        handle,
                        metadata.clone(),
                    )
                    .with_batch_size(crate::BATCH_ROWS)
                    .with_row_groups(groups.clone());
                    if let Some((from, to)) = *rows {
                        builder = builder.with_row_selection(RowSelection::from(vec![
                            RowSelector::skip(from),
                            RowSelector::select(to - from),
                        ]));
                    }
                    builder.build()
                })?;
                Contained::boxed(Box::new(reader), self.rows)
            }
            Part::IpcFile { start, end } => {
                let (_, reader) = ipc_file(&self.file)?;
                let reader = contain(&self.file, || reader.with_range(*start, *end))?;
                Contained::boxed(Box::new(reader), None)
            }
            Part::Whole => open(&self.file, Some(schema))?.1,
        };
        Ok(FrameReader {
            path: path.clone(),
            schema: schema.clone(),
            batches,
            failed: false,
            version: self.version,
        })
    }
}

/// The batches of one frame.
pub struct FrameReader {
    path: PathBuf,
    schema: SchemaRef,
    batches: Batches,
    /// Ended: after an error, or the last batch and the file's check.
    failed: bool,
    version: Option<Version>,
}

impl fmt::Debug for FrameReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameReader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Iterator for FrameReader {
    type Item = Result<RecordBatch>;

    /// The next batch; after an error, nothing more. Once the frame's rows are read, an
    /// error if the file changed while they were (they may be of two versions of it); a
    /// read that fails on a file that changed says so.
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let Some(next) = self.batches.next() else {
            self.failed = true;
            return Version::check(self.version, &self.path).err().map(Err);
        };
        let item = match next {
            Ok(batch) if batch.schema_ref().fields() != self.schema.fields() => Err(file_error(
                &self.path,
                format!(
                    "a batch of schema {} where {} was expected",
                    batch.schema(),
                    self.schema
                ),
            )),
            Ok(batch) => Ok(batch),
            Err(e) => Err(Version::check(self.version, &self.path)
                .err()
                .unwrap_or_else(|| file_error(&self.path, format!("reading failed: {e}")))),
        };
        self.failed = item.is_err();
        Some(item)
    }
}

/// The frames of a set of inputs, and their one schema.
#[derive(Debug, Clone)]
pub struct Frames {
    /// The schema of every input (the first file's).
    pub schema: SchemaRef,
    /// The frames, in file order.
    pub frames: Vec<Frame>,
}

impl Frames {
    /// Rows in all, when every frame knows its count.
    pub fn rows(&self) -> Option<u64> {
        self.frames
            .iter()
            .try_fold(0u64, |rows, frame| Some(rows.saturating_add(frame.rows()?)))
    }
}

/// Cuts `files` into frames of about `frame_rows` rows (Parquet) or `frame_rows` /
/// [`BATCH_ROWS`](crate::BATCH_ROWS) batches (IPC files), checking that every file has the
/// first one's schema.
///
/// # Errors
/// [`IoError::Inputs`] for no files; [`IoError::File`] for a file that cannot be opened, is
/// not of its format, or has another schema.
pub fn plan_frames(files: &[InputFile], frame_rows: usize) -> Result<Frames> {
    plan_frames_by(files, |_| frame_rows)
}

/// As [`plan_frames`], the frame size chosen by `frame_rows` from the inputs' rows in all
/// (when every file tells them without being read: Parquet), once every file is opened.
///
/// # Errors
/// As [`plan_frames`].
pub fn plan_frames_by(
    files: &[InputFile],
    frame_rows: impl FnOnce(Option<u64>) -> usize,
) -> Result<Frames> {
    /// A file opened: its pieces, still to be cut.
    enum Source {
        /// The metadata, the rows of each row group, the file's length.
        Parquet(ArrowReaderMetadata, Vec<usize>, u64),
        IpcFile(usize),
        Whole,
    }
    let mut schema: Option<SchemaRef> = None;
    let mut opened = Vec::with_capacity(files.len());
    for file in files {
        let path = &file.path;
        // (Taken before the file is read: a change from now on is seen.)
        let version = Version::planned(file)?;
        let (file_schema, source) = match file.format {
            InputFormat::Parquet => {
                let (metadata, len) = parquet_metadata(file)?;
                // (Row counts are checked not negative and to sum within i64.)
                let group_rows: Vec<usize> = metadata
                    .metadata()
                    .row_groups()
                    .iter()
                    .map(|g| g.num_rows().max(0) as usize)
                    .collect();
                (
                    metadata.schema().clone(),
                    Source::Parquet(metadata, group_rows, len),
                )
            }
            InputFormat::IpcFile => {
                let (schema, reader) = ipc_file(file)?;
                (schema, Source::IpcFile(reader.num_batches()))
            }
            InputFormat::IpcStream
            | InputFormat::Csv
            | InputFormat::CsvGzip
            | InputFormat::CsvZstd => (open(file, schema.as_ref())?.0, Source::Whole),
        };
        match &schema {
            None => schema = Some(file_schema),
            Some(first) if first.fields() != file_schema.fields() => {
                return Err(file_error(
                    path,
                    format!("its schema {file_schema} differs from the first input's {first}"),
                ));
            }
            Some(_) => {}
        }
        opened.push((file, source, version));
    }
    let schema = schema.ok_or_else(|| IoError::Inputs("no input files".into()))?;
    let rows: Option<u64> = opened
        .iter()
        .map(|(_, source, _)| match source {
            Source::Parquet(_, groups, _) => Some(groups.iter().map(|&r| r as u64).sum::<u64>()),
            _ => None,
        })
        .try_fold(0u64, |rows, file: Option<u64>| {
            Some(rows.saturating_add(file?))
        });
    // (Capped so that the sizing arithmetic below cannot overflow.)
    let frame_rows = frame_rows(rows).clamp(1, 1 << 40);
    let mut frames = Vec::new();
    for (file, source, version) in opened {
        let frame = |part, rows| Frame {
            file: file.clone(),
            rows,
            part,
            version,
        };
        match source {
            Source::Parquet(metadata, group_rows, len) => {
                // No more frames than the file's bytes could hold, however many rows it claims.
                let max_frames = len / PARQUET_BYTES_PER_FRAME;
                let rows: u64 = group_rows.iter().map(|&r| r as u64).sum();
                let mut frame_rows = frame_rows.max(rows.div_ceil(max_frames.max(1)) as usize);
                if file.in_store() {
                    // A row group cut into row ranges is read by each of them from its start:
                    // from a store, every frame would get its bytes again. And a frame of two
                    // groups or more gets the next while the one before is read.
                    let largest = group_rows.iter().copied().max().unwrap_or(0);
                    frame_rows = frame_rows.max(largest.saturating_mul(2));
                }
                frames.extend(parquet_parts(&group_rows, frame_rows).into_iter().map(
                    |(groups, rows, count)| {
                        let part = Part::Parquet {
                            metadata: metadata.clone(),
                            groups,
                            rows,
                        };
                        frame(part, Some(count as u64))
                    },
                ));
            }
            Source::IpcFile(batches) => {
                let per_frame = (frame_rows / crate::BATCH_ROWS).max(1);
                frames.extend(
                    even_ranges(batches, per_frame)
                        .into_iter()
                        .map(|(start, end)| frame(Part::IpcFile { start, end }, None)),
                );
            }
            Source::Whole => frames.push(frame(Part::Whole, None)),
        }
    }
    Ok(Frames { schema, frames })
}

/// `count` items cut into ranges of about `per` (at least one range when `count > 0`), the
/// ranges as equal as can be: no range under half of `per` unless there is only one.
fn even_ranges(count: usize, per: usize) -> Vec<(usize, usize)> {
    if count == 0 {
        return Vec::new();
    }
    let ranges = count.saturating_add(per / 2) / per.max(1);
    let ranges = ranges.clamp(1, count);
    // (In u128: `i * count` passes usize for counts of more than 2^32.)
    let at = |i: usize| (i as u128 * count as u128 / ranges as u128) as usize;
    (0..ranges).map(|i| (at(i), at(i + 1))).collect()
}

/// A Parquet frame: its row groups, its row range within them (when cut), its rows.
type ParquetPart = (Vec<usize>, Option<(usize, usize)>, usize);

/// Parquet row groups (their row counts) grouped into frames of about `frame_rows` rows:
/// consecutive small groups together, a group of more than 1.5 frames cut into equal row
/// ranges. Each frame: its groups, its row range within them (when cut), its rows.
fn parquet_parts(group_rows: &[usize], frame_rows: usize) -> Vec<ParquetPart> {
    let mut parts: Vec<ParquetPart> = Vec::new();
    let mut open: (Vec<usize>, usize) = (Vec::new(), 0);
    let close = |open: &mut (Vec<usize>, usize), parts: &mut Vec<_>| {
        if !open.0.is_empty() {
            parts.push((std::mem::take(&mut open.0), None, open.1));
            open.1 = 0;
        }
    };
    for (g, &rows) in group_rows.iter().enumerate() {
        if rows == 0 {
            continue;
        }
        let frame_and_half = frame_rows.saturating_add(frame_rows / 2);
        if rows > frame_and_half {
            close(&mut open, &mut parts);
            for (from, to) in even_ranges(rows, frame_rows) {
                let range = (from, to);
                parts.push((vec![g], (range != (0, rows)).then_some(range), to - from));
            }
            continue;
        }
        if open.1 > 0 && open.1 + rows > frame_and_half {
            close(&mut open, &mut parts);
        }
        open.0.push(g);
        open.1 += rows;
    }
    // A small last frame joins the one before when that one is made of whole groups.
    if open.1 > 0
        && open.1 < frame_rows.div_ceil(2)
        && let Some((groups, None, rows)) = parts.last_mut()
    {
        groups.append(&mut open.0);
        *rows += open.1;
        open.1 = 0;
    }
    close(&mut open, &mut parts);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each change the version check names, each alone: the length, the modification time
    /// (the same length written over), and the file's identity (another file of the same
    /// length and time renamed over it).
    #[test]
    fn a_file_changed_in_any_way_is_told_apart_from_the_one_planned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.bin");
        let time = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
        let write = |at: &Path, bytes: &[u8], modified| {
            std::fs::write(at, bytes).unwrap();
            let file = std::fs::File::options().write(true).open(at).unwrap();
            file.set_modified(modified).unwrap();
        };
        write(&path, b"0123456789", time);
        let planned = Version::of(&path).unwrap();
        Version::check(Some(planned), &path).unwrap();
        Version::check(None, &path).unwrap();
        let said = |planned| {
            Version::check(Some(planned), &path)
                .unwrap_err()
                .to_string()
        };
        // Another file, as long and as old, put in its place.
        let beside = dir.path().join("beside.bin");
        write(&beside, b"9876543210", time);
        std::fs::rename(&beside, &path).unwrap();
        let error = said(planned);
        assert!(
            error.contains("another file was put in its place"),
            "{error}"
        );
        // The same file written over: as long, later.
        let planned = Version::of(&path).unwrap();
        write(
            &path,
            b"abcdefghij",
            time + std::time::Duration::from_secs(1),
        );
        assert!(
            said(planned).contains("(written over)"),
            "{}",
            said(planned)
        );
        // Cut short.
        let planned = Version::of(&path).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_len(4).unwrap();
        let error = said(planned);
        assert!(
            error.contains("10 bytes when the run began, 4 now"),
            "{error}"
        );
        assert!(error.contains("changed while the run read it"), "{error}");
    }

    #[test]
    fn ranges_are_even_and_cover_everything() {
        assert_eq!(even_ranges(0, 10), vec![]);
        assert_eq!(even_ranges(3, 10), vec![(0, 3)]);
        assert_eq!(even_ranges(10, 10), vec![(0, 10)]);
        assert_eq!(even_ranges(14, 10), vec![(0, 14)]);
        assert_eq!(even_ranges(16, 10), vec![(0, 8), (8, 16)]);
        for count in 1..200 {
            for per in 1..40 {
                let ranges = even_ranges(count, per);
                assert_eq!(ranges[0].0, 0);
                assert_eq!(ranges.last().unwrap().1, count);
                assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0));
                let (min, max) = ranges.iter().fold((usize::MAX, 0), |(lo, hi), r| {
                    (lo.min(r.1 - r.0), hi.max(r.1 - r.0))
                });
                assert!(max - min <= 1, "{count} by {per}: {ranges:?}");
                assert!(ranges.len() == 1 || min * 2 >= per, "{count} by {per}");
            }
        }
    }

    #[test]
    fn row_groups_make_frames_without_a_tiny_tail() {
        // Small groups are joined; the small tail joins the frame before.
        let parts = parquet_parts(&[40, 40, 40, 40, 10], 100);
        let rows: Vec<usize> = parts.iter().map(|p| p.2).collect();
        assert_eq!(rows, vec![120, 50]);
        let parts = parquet_parts(&[100, 100, 20], 100);
        assert_eq!(
            parts.iter().map(|p| p.2).collect::<Vec<_>>(),
            vec![100, 120]
        );
        // A big group is cut into equal row ranges.
        let parts = parquet_parts(&[1000, 30], 300);
        assert_eq!(
            parts,
            vec![
                (vec![0], Some((0, 333)), 333),
                (vec![0], Some((333, 666)), 333),
                (vec![0], Some((666, 1000)), 334),
                (vec![1], None, 30),
            ]
        );
        // Every row of every group is in exactly one frame.
        for groups in [vec![7, 0, 900, 3, 3, 3, 250, 1], vec![5; 40], vec![10_000]] {
            for frame_rows in [1, 7, 100, 1000, 100_000, 1 << 40] {
                let parts = parquet_parts(&groups, frame_rows);
                let total: usize = parts.iter().map(|p| p.2).sum();
                assert_eq!(total, groups.iter().sum::<usize>());
                let mut seen = vec![0usize; groups.len()];
                for (gs, rows, count) in &parts {
                    match rows {
                        Some((from, to)) => {
                            assert_eq!(gs.len(), 1);
                            seen[gs[0]] += to - from;
                            assert_eq!(to - from, *count);
                        }
                        None => {
                            for &g in gs {
                                seen[g] += groups[g];
                            }
                        }
                    }
                }
                assert_eq!(seen, groups);
            }
        }
    }
}

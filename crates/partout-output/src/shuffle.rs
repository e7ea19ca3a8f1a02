//! The shuffle layout: [`ShuffleFile`], one worker's data file and index of byte ranges, and
//! the index read back ([`read_shuffle_index`], [`parse_shuffle_index`]; a destination's
//! messages through it by [`crate::FileCursor`]), every index through one checked path
//! (`IndexCheck`).

use crate::{io_error, sink_error};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_exchange::{BatchSink, Flushed, SinkCapabilities, WriterError};
use partout_format::{Encoding, StreamEncoders};
use std::fs::File;
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};

/// The magic bytes that open a shuffle index.
pub const SHUFFLE_INDEX_MAGIC: &[u8; 8] = b"PTSHUF01";

/// A byte range of a shuffle data file that holds a piece of one destination's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShuffleRange {
    /// The destination.
    pub destination: u32,
    /// Where the piece starts in the data file.
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// Rows in it.
    pub rows: u64,
}

/// One worker's shuffle output: every destination's pieces appended to one data file
/// (`{name}.data`), and an index (`{name}.index`) of the byte range, destination and rows of
/// each piece. A destination's ranges, in index order, concatenate to its whole output (an
/// Arrow IPC stream, or Presto pages), so a reader of destination `p` reads just its ranges.
///
/// The index: the magic `PTSHUF01`, the destination count (u32), the range count (u64), then
/// per range its destination (u32), offset, length and rows (u64 each), all little-endian.
/// The range count is written last, by `finish`: the index of an unfinished file does not
/// match its length and reads as damaged.
pub struct ShuffleFile {
    data_path: PathBuf,
    index: Option<io::BufWriter<File>>,
    ranges: u64,
    data: Option<File>,
    encoders: StreamEncoders,
    offset: u64,
    out: Vec<u8>,
}

impl std::fmt::Debug for ShuffleFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShuffleFile")
            .field("data", &self.data_path)
            .field("ranges", &self.ranges)
            .finish_non_exhaustive()
    }
}

impl ShuffleFile {
    /// A shuffle output `DIR/{name}.data` and `DIR/{name}.index` for `destinations`
    /// destinations, in `encoding` (Arrow IPC or Presto pages).
    ///
    /// # Errors
    /// When the data file cannot be created; [`WriterError::Encode`] for a schema the
    /// encoding cannot carry.
    pub fn try_new(
        dir: &Path,
        name: &str,
        schema: SchemaRef,
        destinations: usize,
        encoding: Encoding,
    ) -> Result<Self, WriterError> {
        let encoders = StreamEncoders::try_new(schema, destinations, encoding)?;
        let data_path = dir.join(format!("{name}.data"));
        let data = File::create(&data_path).map_err(io_error(None))?;
        // The index is written as ranges are made (its range count filled in at the end):
        // its size grows with the output, the memory it takes does not.
        let mut index = io::BufWriter::new(
            File::create(dir.join(format!("{name}.index"))).map_err(io_error(None))?,
        );
        index
            .write_all(SHUFFLE_INDEX_MAGIC)
            .and_then(|()| index.write_all(&(destinations as u32).to_le_bytes()))
            .and_then(|()| index.write_all(&0u64.to_le_bytes()))
            .map_err(io_error(None))?;
        Ok(Self {
            index: Some(index),
            ranges: 0,
            data_path,
            data: Some(data),
            encoders,
            offset: 0,
            out: Vec::new(),
        })
    }

    /// Appends destination `p`'s next range, `rows` rows encoded as `parts` one after
    /// another: written as they are, never gathered into one buffer first (a destination's
    /// runs may be all the rows a writer holds).
    fn append(&mut self, p: usize, parts: &[&[u8]], rows: u64) -> Result<u64, WriterError> {
        let data = self
            .data
            .as_mut()
            .ok_or_else(|| sink_error(Some(p), "the shuffle file is finished"))?;
        let mut len = 0;
        for part in parts {
            data.write_all(part).map_err(io_error(Some(p)))?;
            len += part.len() as u64;
        }
        let index = self
            .index
            .as_mut()
            .ok_or_else(|| sink_error(Some(p), "the shuffle file is finished"))?;
        let mut entry = [0u8; 28];
        entry[..4].copy_from_slice(&(p as u32).to_le_bytes());
        entry[4..12].copy_from_slice(&self.offset.to_le_bytes());
        entry[12..20].copy_from_slice(&len.to_le_bytes());
        entry[20..].copy_from_slice(&rows.to_le_bytes());
        index.write_all(&entry).map_err(io_error(Some(p)))?;
        self.ranges += 1;
        self.offset += len;
        Ok(len)
    }
}

impl BatchSink for ShuffleFile {
    fn write_batch(&mut self, p: usize, batch: &RecordBatch) -> Result<u64, WriterError> {
        if p >= self.encoders.len() {
            return Err(WriterError::NoSuchDestination {
                destination: p,
                destinations: self.encoders.len(),
            });
        }
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let appended = self
            .encoders
            .encode(p, batch, &mut out)
            .map_err(WriterError::from)
            .and_then(|()| self.append(p, &[&out], batch.num_rows() as u64));
        self.out = out;
        appended
    }

    /// Slices where the encoders take them (Arrow IPC streams of flat columns).
    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities {
            slices: self.encoders.takes_slices(),
            ..SinkCapabilities::default()
        }
    }

    /// Slices are encoded straight from the held batches.
    fn write_flushed(&mut self, flushed: Flushed<'_>) -> Result<u64, WriterError> {
        let Flushed::Slices {
            destination,
            slices,
        } = flushed
        else {
            return flushed.write_as_batches(self);
        };
        let mut parts = Vec::new();
        self.encoders
            .encode_slices(destination, slices, &mut parts)?;
        let parts: Vec<&[u8]> = parts.iter().map(|part| part.as_slice()).collect();
        let rows = slices.iter().map(|(_, r)| r.len() as u64).sum();
        self.append(destination, &parts, rows)
    }

    /// Ends the IPC stream of every destination that has rows (Presto pages need no end)
    /// and completes the index.
    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<(), WriterError> {
        let mut out = std::mem::take(&mut self.out);
        for (p, bytes) in destination_bytes.iter_mut().enumerate() {
            out.clear();
            if self.encoders.finish_begun(p, &mut out)? && !out.is_empty() {
                *bytes += self.append(p, &[&out], 0)?;
            }
        }
        let data = self
            .data
            .take()
            .ok_or_else(|| sink_error(None, "the shuffle file is finished"))?;
        drop(data);
        let index = self
            .index
            .take()
            .ok_or_else(|| sink_error(None, "the shuffle file is finished"))?;
        let mut file = index
            .into_inner()
            .map_err(|e| io_error(None)(e.into_error()))?;
        file.seek(io::SeekFrom::Start(12))
            .and_then(|_| file.write_all(&self.ranges.to_le_bytes()))
            .map_err(io_error(None))
    }
}

/// Reads a shuffle index: the destination count and the ranges, checked against the data
/// file's size.
///
/// # Errors
/// [`partout_input::IoError::File`] naming the index when it cannot be read, or for anything
/// [`parse_shuffle_index`] refuses.
pub fn read_shuffle_index(
    index: &Path,
    data_len: u64,
) -> partout_input::Result<(u32, Vec<ShuffleRange>)> {
    let bytes = std::fs::read(index)
        .map_err(|e| partout_input::IoError::system(index, "cannot be read", e))?;
    parse_shuffle_index(index, &bytes, data_len)
}

/// Parses the bytes of the shuffle index `index` (the file named in errors): the destination
/// count and the ranges, checked against the data file's size `data_len`.
///
/// ```
/// use partout_output::{SHUFFLE_INDEX_MAGIC, ShuffleRange, parse_shuffle_index};
/// let mut index = SHUFFLE_INDEX_MAGIC.to_vec();
/// index.extend_from_slice(&2u32.to_le_bytes()); // destinations
/// index.extend_from_slice(&1u64.to_le_bytes()); // ranges
/// for field in [1u32.to_le_bytes().as_slice(), &0u64.to_le_bytes(), &100u64.to_le_bytes(), &7u64.to_le_bytes()] {
///     index.extend_from_slice(field);
/// }
/// let path = std::path::Path::new("w0.index");
/// let (destinations, ranges) = parse_shuffle_index(path, &index, 100).unwrap();
/// assert_eq!(destinations, 2);
/// assert_eq!(ranges, [ShuffleRange { destination: 1, offset: 0, len: 100, rows: 7 }]);
/// // A data file shorter than the ranges is an error naming the index.
/// let err = parse_shuffle_index(path, &index, 99).unwrap_err();
/// assert!(err.to_string().starts_with("w0.index: "), "{err}");
/// ```
///
/// # Errors
/// [`partout_input::IoError::File`] naming `index` for a missing magic, a truncated or overlong
/// index, a destination out of range, or a range past the data file's end or overlapping
/// another.
pub fn parse_shuffle_index(
    index: &Path,
    bytes: &[u8],
    data_len: u64,
) -> partout_input::Result<(u32, Vec<ShuffleRange>)> {
    let header = bytes.get(..INDEX_HEADER).unwrap_or(bytes);
    let mut check = IndexCheck::try_new(index, header, bytes.len() as u64, data_len)?;
    let mut ranges = Vec::with_capacity(check.count as usize);
    for entry in bytes[INDEX_HEADER..].chunks_exact(INDEX_ENTRY) {
        ranges.push(check.range(entry)?);
    }
    Ok((check.destinations, ranges))
}

/// Reads a shuffle index as [`read_shuffle_index`] does, range by range, handing each to
/// `each` as it is checked: memory for one range at a time, whatever the index's size.
/// The destination count.
///
/// # Errors
/// As [`read_shuffle_index`]; what `each` returns.
pub(crate) fn for_each_shuffle_range(
    index: &Path,
    data_len: u64,
    mut each: impl FnMut(ShuffleRange) -> partout_input::Result<()>,
) -> partout_input::Result<u32> {
    let failed = |e| partout_input::IoError::system(index, "cannot be read", e);
    let file = File::open(index).map_err(failed)?;
    let len = file.metadata().map_err(failed)?.len();
    let mut reader = io::BufReader::with_capacity(64 << 10, file);
    let mut header = [0u8; INDEX_HEADER];
    let header = match io::Read::read_exact(&mut reader, &mut header) {
        Ok(()) => &header[..],
        // Too short: the check says so.
        Err(_) => &[][..],
    };
    let mut check = IndexCheck::try_new(index, header, len, data_len)?;
    let mut entry = [0u8; INDEX_ENTRY];
    for _ in 0..check.count {
        io::Read::read_exact(&mut reader, &mut entry).map_err(failed)?;
        each(check.range(&entry)?)?;
    }
    Ok(check.destinations)
}

/// Bytes of a shuffle index's header: magic, destinations (u32), ranges (u64).
const INDEX_HEADER: usize = 20;

/// Bytes of each of its ranges: destination (u32), offset, length, rows (u64 each).
const INDEX_ENTRY: usize = 28;

/// A shuffle index checked range by range: the one place its bytes are trusted.
struct IndexCheck<'a> {
    index: &'a Path,
    destinations: u32,
    count: u64,
    data_len: u64,
    /// Ranges checked so far, and where the last one ended.
    checked: u64,
    end: u64,
}

impl<'a> IndexCheck<'a> {
    /// Checks the header (`header`, the first 20 bytes, or fewer when the index is shorter)
    /// of an index of `len` bytes.
    fn try_new(
        index: &'a Path,
        header: &[u8],
        len: u64,
        data_len: u64,
    ) -> partout_input::Result<Self> {
        let bad = |what: String| {
            partout_input::IoError::file(index, format!("not a shuffle index: {what}"))
        };
        if header.len() < INDEX_HEADER || &header[..8] != SHUFFLE_INDEX_MAGIC {
            return Err(bad("no PTSHUF01 header".into()));
        }
        let destinations = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        let count = u64::from_le_bytes(header[12..20].try_into().expect("8 bytes"));
        let expected = (count as u128) * INDEX_ENTRY as u128 + INDEX_HEADER as u128;
        if expected != u128::from(len) {
            return Err(bad(format!(
                "{count} ranges need {expected} bytes, the index has {len}"
            )));
        }
        Ok(Self {
            index,
            destinations,
            count,
            data_len,
            checked: 0,
            end: 0,
        })
    }

    /// The next range, from its 28 bytes: of a destination the index has, within the data
    /// file, after the ranges before it.
    fn range(&mut self, entry: &[u8]) -> partout_input::Result<ShuffleRange> {
        let bad = |what: String| {
            partout_input::IoError::file(self.index, format!("not a shuffle index: {what}"))
        };
        let u64_at = |at: usize| u64::from_le_bytes(entry[at..at + 8].try_into().expect("8 bytes"));
        let range = ShuffleRange {
            destination: u32::from_le_bytes(entry[..4].try_into().expect("4 bytes")),
            offset: u64_at(4),
            len: u64_at(12),
            rows: u64_at(20),
        };
        let i = self.checked;
        if range.destination >= self.destinations {
            return Err(bad(format!(
                "range {i} is of destination {} of {}",
                range.destination, self.destinations
            )));
        }
        let range_end = range.offset.checked_add(range.len);
        if range.offset < self.end || range_end.is_none_or(|e| e > self.data_len) {
            return Err(bad(format!(
                "range {i} ({} bytes at {}) overlaps another or passes the data's {} bytes",
                range.len, range.offset, self.data_len
            )));
        }
        self.end = range_end.unwrap_or(self.end);
        self.checked += 1;
        Ok(range)
    }
}

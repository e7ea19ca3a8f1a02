//! Presto's SerializedPage, the page format Presto and Velox workers exchange, byte-compatible
//! with Presto's own `PagesSerde`.
//!
//! ```text
//!  page   = header (21 bytes) body
//!  header = rows:i32  markers:u8  uncompressed_size:i32  size:i32  checksum:i64   (little-endian)
//!  body   = columns:i32  block*            block = name_len:i32 name payload
//! ```
//!
//! Markers: 0x01 compressed (raw LZ4 block), 0x04 checksummed; the checksum is the CRC-32 of the
//! body as sent, then the marker byte, the row count and the uncompressed size (both
//! little-endian), zero when not checksummed. Pages are concatenated as they are.
//!
//! Arrow types map to Presto's block encodings:
//!
//! | Arrow | encoding | values |
//! |---|---|---|
//! | Boolean, Int8 | BYTE_ARRAY | one byte |
//! | Int16 | SHORT_ARRAY | |
//! | Int32, Date32, Float32 | INT_ARRAY | Float32 as its bits |
//! | Int64, Float64, Timestamp, Decimal64, Decimal128 (precision ≤ 18) | LONG_ARRAY | Float64 as its bits, timestamps in milliseconds |
//! | Decimal128 (precision > 18) | INT128_ARRAY | sign and magnitude, low word first |
//! | Utf8, LargeUtf8, Utf8View, Binary, LargeBinary, BinaryView | VARIABLE_WIDTH | |
//! | List, LargeList, ListView, LargeListView | ARRAY | a list view's ranges laid out in row order |
//! | Map | MAP | no hash table |
//! | Struct (with at least one field) | ROW | fields hold the non-null rows only |
//! | Dictionary | DICTIONARY | the dictionary, then an `i32` id per row |
//! | RunEndEncoded, one run in the page | RLE | of the run's value |
//! | RunEndEncoded, several runs | DICTIONARY | the runs' values, each row's id its run |
//! | Null, and any fixed-width column with no valid row | RLE | of a one-row null block, as Presto's block builders do |
//!
//! Fixed-width blocks carry values for their non-null rows only; null flags are bits, most
//! significant first, 1 for null. Other Arrow types (unions, unsigned integers, Float16, times
//! of day, intervals, durations, ...) have no Presto type and are refused with
//! [`FormatError::InvalidArgument`] naming them.
//!
//! Reading goes `page` (header, checksum, LZ4) → `walk` (the walk over a page's blocks into a
//! tree of `block`s, one file per encoding: `fixed`, `variable`, `rle`, `dictionary`, `array`,
//! `map`, `row`) → either `decode` (Arrow arrays, copies paid from a `budget`) or `inspect`
//! (the structure alone). The encodings depend on `block` (the tree's types) alone: `walk` and
//! `decode` dispatch to them, and hand each the way to read or decode the blocks nested in
//! its own, so no import goes back up.

mod array;
mod block;
mod budget;
mod cursor;
mod decode;
mod dictionary;
mod encode;
mod fixed;
mod inspect;
mod map;
mod page;
mod rle;
mod row;
mod runs;
mod variable;
mod walk;

pub use decode::{decode_page, decode_pages};
pub use encode::{can_encode, encode_page};
pub use inspect::{BlockInfo, PageInfo, inspect_pages};

use crate::FormatError;

/// Checks the one page `bytes` holds, without decoding its body: a header whose sizes fit
/// the bytes, known markers, and the checksum when the page carries one. Its rows.
///
/// # Errors
/// [`FormatError::Corrupt`] naming what does not hold, or bytes left after the page.
pub fn check_page(bytes: &[u8]) -> crate::Result<usize> {
    let header = page::Header::read(bytes, 0)?;
    if HEADER_SIZE + header.size != bytes.len() {
        return Err(corrupt(format!(
            "{} bytes after a page of {}",
            bytes.len() - HEADER_SIZE - header.size,
            HEADER_SIZE + header.size
        )));
    }
    Ok(header.rows)
}

/// The bytes of body that follow a page's `header`, as its size field gives them: how a
/// reader of concatenated pages finds where the next one starts. The rest of the header is
/// checked with the page ([`check_page`]).
///
/// # Errors
/// [`FormatError::Corrupt`] for a negative size.
pub fn body_size(header: &[u8; HEADER_SIZE]) -> crate::Result<usize> {
    let size = i32::from_le_bytes([header[9], header[10], header[11], header[12]]);
    usize::try_from(size).map_err(|_| corrupt(format!("a page header claiming {size} body bytes")))
}

/// Bytes before a page's body.
pub const HEADER_SIZE: usize = 21;

/// Marker bit: the body is a raw LZ4 block.
pub const COMPRESSED: u8 = 0x01;
/// Marker bit: the body is encrypted (spill files only; never on the exchange).
pub const ENCRYPTED: u8 = 0x02;
/// Marker bit: the header carries the body's checksum.
pub const CHECKSUMMED: u8 = 0x04;

/// How pages are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageOptions {
    /// Write the CRC-32 checksum (default on).
    pub checksum: bool,
    /// Compress the body as one raw LZ4 block when that makes it smaller than
    /// [`MIN_COMPRESSION_RATIO`] of its size (default off).
    pub lz4: bool,
}

impl Default for PageOptions {
    fn default() -> Self {
        Self {
            checksum: true,
            lz4: false,
        }
    }
}

/// A compressed body is kept only when at most this fraction of the uncompressed one, as
/// Presto's `PagesSerde` decides.
pub const MIN_COMPRESSION_RATIO: f64 = 0.9;

/// The page checksum: CRC-32 of the body as sent, the marker byte, the row count and the
/// uncompressed size.
fn checksum(body: &[u8], markers: u8, rows: i32, uncompressed: i32) -> u64 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(body);
    crc.update(&[markers]);
    crc.update(&rows.to_le_bytes());
    crc.update(&uncompressed.to_le_bytes());
    u64::from(crc.finalize())
}

/// The fixed-width encodings, indexed by the base-2 logarithm of their value width.
const FIXED: [&str; 5] = [
    "BYTE_ARRAY",
    "SHORT_ARRAY",
    "INT_ARRAY",
    "LONG_ARRAY",
    "INT128_ARRAY",
];

/// The value width of a fixed-width encoding.
fn fixed_width(name: &str) -> Option<usize> {
    FIXED.iter().position(|&n| n == name).map(|log| 1 << log)
}

fn corrupt(what: impl Into<String>) -> FormatError {
    FormatError::Corrupt(format!("Presto page: {}", what.into()))
}

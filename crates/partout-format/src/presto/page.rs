//! A page's header and body: the header checked against the body (sizes, markers, checksum),
//! the body decompressed, and the walk over its columns that decoding and inspection share.
//!
//! ```text
//!  off  size  field
//!   0    4    rows               covered by the checksum
//!   4    1    markers            covered; unknown bits and ENCRYPTED refused
//!   5    4    uncompressed size  covered; equal to the size unless COMPRESSED
//!   9    4    size               not covered: checked against the uncompressed size, the
//!                                bytes that follow, and what the LZ4 body decompresses from
//!  13    8    checksum           CRC-32 zero-extended, 0 unless CHECKSUMMED
//! ```

use super::block::{Block, MAX_ROWS, Nesting};
use super::cursor::Cursor;
use super::walk;
use super::{CHECKSUMMED, COMPRESSED, ENCRYPTED, HEADER_SIZE, checksum, corrupt};
use crate::Result;
use std::borrow::Cow;

/// A page, its header checked and its body ready to walk.
pub(super) struct Page<'b> {
    /// Where the page starts in the input.
    pub at: usize,
    /// Rows.
    pub rows: usize,
    /// The marker byte.
    pub markers: u8,
    /// Body bytes before compression.
    pub uncompressed: usize,
    /// Body bytes as sent.
    pub size: usize,
    /// The body, decompressed.
    body: Cow<'b, [u8]>,
}

/// A page's header, checked against the bytes that follow it and its checksum.
pub(super) struct Header<'b> {
    pub rows: usize,
    pub markers: u8,
    pub uncompressed: usize,
    pub size: usize,
    /// The body as sent.
    pub sent: &'b [u8],
}

impl<'b> Header<'b> {
    /// Reads the header of the page at byte `at` of `bytes` and checks it: sizes that fit,
    /// known markers, and the checksum, if the page has one.
    pub(super) fn read(bytes: &'b [u8], at: usize) -> Result<Self> {
        let Some(h) = bytes.get(at..at + HEADER_SIZE) else {
            return Err(corrupt(format!(
                "a page header at byte {at} needs {HEADER_SIZE} bytes, {} remain",
                bytes.len() - at
            )));
        };
        let i32_at = |o: usize| i32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let count = |o: usize, what: &str| {
            usize::try_from(i32_at(o)).map_err(|_| {
                corrupt(format!(
                    "negative {what} {} in the page at byte {at}",
                    i32_at(o)
                ))
            })
        };
        let rows = count(0, "row count")?;
        let markers = h[4];
        let uncompressed = count(5, "uncompressed size")?;
        let size = count(9, "size")?;
        let stored = u64::from_le_bytes(h[13..21].try_into().expect("8 bytes"));
        if rows > MAX_ROWS {
            return Err(corrupt(format!("the page at byte {at} claims {rows} rows")));
        }
        let start = at + HEADER_SIZE;
        let Some(sent) = bytes.get(start..start + size) else {
            return Err(corrupt(format!(
                "the page at byte {at} claims {size} body bytes, {} remain",
                bytes.len() - start
            )));
        };
        if markers & !(COMPRESSED | ENCRYPTED | CHECKSUMMED) != 0 {
            return Err(corrupt(format!(
                "unknown markers {markers:#04x} in the page at byte {at}"
            )));
        }
        if markers & ENCRYPTED != 0 {
            return Err(corrupt(format!(
                "the page at byte {at} is encrypted (spill pages only)"
            )));
        }
        let expected = if markers & CHECKSUMMED != 0 {
            checksum(sent, markers, rows as i32, uncompressed as i32)
        } else {
            0
        };
        if expected != stored {
            return Err(corrupt(format!(
                "checksum mismatch in the page at byte {at}: the header says {stored:#x}, the body gives {expected:#x}"
            )));
        }
        Ok(Self {
            rows,
            markers,
            uncompressed,
            size,
            sent,
        })
    }
}

impl<'b> Page<'b> {
    /// Reads the page at byte `at` of `bytes`: its header, checked against its body, and the
    /// body, decompressed.
    pub(super) fn open(bytes: &'b [u8], at: usize) -> Result<Self> {
        let Header {
            rows,
            markers,
            uncompressed,
            size,
            sent,
        } = Header::read(bytes, at)?;
        let body = if markers & COMPRESSED == 0 {
            if uncompressed != size {
                return Err(corrupt(format!(
                    "the uncompressed page at byte {at} gives two sizes, {uncompressed} and {size}"
                )));
            }
            Cow::Borrowed(sent)
        } else {
            Cow::Owned(decompress(sent, uncompressed, at)?)
        };
        Ok(Self {
            at,
            rows,
            markers,
            uncompressed,
            size,
            body,
        })
    }

    /// Bytes the page takes in the input, header included.
    pub(super) fn len(&self) -> usize {
        HEADER_SIZE + self.size
    }

    /// The page's blocks, one per column, each read with the nesting `nesting(column)`
    /// allows; `columns` is the column count a schema expects, if there is one.
    ///
    /// Every block must hold the page's rows, and the last must end the body.
    pub(super) fn blocks(
        &self,
        columns: Option<usize>,
        nesting: impl Fn(usize) -> Nesting,
    ) -> Result<Vec<Block<'_>>> {
        let at = self.at;
        let mut c = Cursor::new(&self.body, at + HEADER_SIZE);
        let count = c.count("column count", 1 << 16)?;
        if let Some(want) = columns.filter(|&want| want != count) {
            return Err(corrupt(format!(
                "the page at byte {at} has {count} columns, the schema {want}"
            )));
        }
        let mut blocks = Vec::new();
        for i in 0..count {
            let block = walk::read(&mut c, &nesting(i), self.rows)?;
            if block.rows != self.rows {
                return Err(corrupt(format!(
                    "column {i} of the page at byte {at} has {} rows, the page {}",
                    block.rows, self.rows
                )));
            }
            blocks.push(block);
        }
        if c.remaining() != 0 {
            return Err(corrupt(format!(
                "{} bytes left over after the last column of the page at byte {at}",
                c.remaining()
            )));
        }
        Ok(blocks)
    }
}

/// The LZ4 block `sent`, which must decompress to exactly `uncompressed` bytes.
fn decompress(sent: &[u8], uncompressed: usize, at: usize) -> Result<Vec<u8>> {
    // LZ4 expands at most 255-fold.
    if uncompressed > sent.len().saturating_mul(255) {
        return Err(corrupt(format!(
            "the page at byte {at} claims {uncompressed} bytes from {} compressed",
            sent.len()
        )));
    }
    let body = lz4_flex::block::decompress(sent, uncompressed)
        .map_err(|e| corrupt(format!("LZ4 body of the page at byte {at}: {e}")))?;
    if body.len() != uncompressed {
        return Err(corrupt(format!(
            "the page at byte {at} decompresses to {} bytes, not {uncompressed}",
            body.len()
        )));
    }
    Ok(body)
}

//! A cursor over a page body: little-endian reads, each checked against the bytes that remain,
//! every error naming the byte where the bad value starts.

use super::corrupt;
use crate::Result;
use arrow_buffer::{BooleanBuffer, NullBuffer};

/// Reads little-endian values from a page body, naming the byte of anything out of bounds.
pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Where `bytes` starts in the input (for messages).
    base: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`, which begin at byte `base` of the input.
    pub(super) fn new(bytes: &'a [u8], base: usize) -> Self {
        Self {
            bytes,
            pos: 0,
            base,
        }
    }

    /// Where the next read starts, as a byte of the input.
    pub(super) fn at(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes not read yet.
    pub(super) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `n` bytes.
    pub(super) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(corrupt(format!(
                "{what} of {n} bytes at byte {} runs past the end of the body",
                self.at()
            )));
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub(super) fn i32(&mut self, what: &str) -> Result<i32> {
        let b = self.take(4, what)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A count: non-negative, and at most `max`.
    pub(super) fn count(&mut self, what: &str, max: usize) -> Result<usize> {
        let at = self.at();
        let v = self.i32(what)?;
        match usize::try_from(v) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(corrupt(format!(
                "{what} {v} at byte {at} is impossible here"
            ))),
        }
    }

    /// A block's encoding name.
    pub(super) fn name(&mut self) -> Result<&'a str> {
        let at = self.at();
        let len = self.count("encoding name length", 64)?;
        std::str::from_utf8(self.take(len, "encoding name")?)
            .map_err(|_| corrupt(format!("encoding name at byte {at} is not text")))
    }

    /// The null section of `len` rows: `None` when no row is null.
    pub(super) fn nulls(&mut self, len: usize) -> Result<Option<NullBuffer>> {
        let at = self.at();
        match self.take(1, "null flag")?[0] {
            0 => Ok(None),
            1 => {
                let bits = self.take(len.div_ceil(8), "null bits")?;
                let valid: BooleanBuffer = (0..len)
                    .map(|r| bits[r / 8] & (0x80 >> (r % 8)) == 0)
                    .collect();
                Ok(Some(NullBuffer::new(valid)).filter(|n| n.null_count() > 0))
            }
            flag => Err(corrupt(format!("null flag {flag} at byte {at} (0 or 1)"))),
        }
    }

    /// `len + 1` offsets starting at 0, never decreasing, ending at `end` (when known).
    pub(super) fn offsets(
        &mut self,
        len: usize,
        end: Option<usize>,
        what: &str,
    ) -> Result<Vec<i32>> {
        let at = self.at();
        let raw = self.take((len + 1) * 4, what)?;
        let offsets = le_i32s(raw).collect::<Vec<_>>();
        let ok = offsets[0] == 0
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && end.is_none_or(|end| offsets[len] as usize == end);
        if !ok {
            return Err(corrupt(format!(
                "{what} at byte {at} do not run from 0 up to {}",
                end.map_or("their end".to_string(), |e| e.to_string())
            )));
        }
        Ok(offsets)
    }
}

/// The little-endian `i32`s of `bytes` (a multiple of four long).
pub(super) fn le_i32s(bytes: &[u8]) -> impl Iterator<Item = i32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

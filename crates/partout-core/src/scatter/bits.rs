//! Moving bit-packed values (booleans and validity) by an order.
//!
//! Reading one bit costs a shift and a mask on top of the load, so the source bitmap is first
//! unpacked to one byte per row (a table lookup per 8 rows, in reused scratch). Output bits are
//! then built 8 at a time: eight byte loads through the order, combined in a register and
//! packed by one multiplication, and stored as whole bytes, written once, in order.
//!
//! ```text
//!  bits 0b0000_0101 ──unpack──► [1, 0, 1, 0, ...] ──gather by order──► 8 bytes ──pack──► 1 byte
//! ```
//!
//! The validity of a whole batch moves faster still ([`scatter_nulls_many`]): up to eight
//! columns' bitmaps are unpacked into the bits of one byte per row (bit `c` for column `c`), that
//! byte is gathered once for all of them, and each column's bits are picked back out of the
//! gathered bytes with a shift, a mask and the same packing multiplication.

use super::Order;
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};

/// `SPREAD[b]` holds bit `i` of `b` in byte `i`.
const SPREAD: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut i = 0;
        while i < 8 {
            table[b] |= (((b >> i) & 1) as u64) << (8 * i);
            i += 1;
        }
        b += 1;
    }
    table
};

/// Packs eight 0/1 bytes (byte `i` of `x`) into the bits of one byte (bit `i`).
///
/// Multiplying by `sum(2^(7j), j = 1..=8)` moves byte `i`'s bit to bit `56 + i`; every other
/// partial product lands on a distinct lower bit, so nothing carries into the top byte.
#[inline(always)]
fn pack8(x: u64) -> u8 {
    (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

/// Hands `emit` the bytes `bytes[order[j]]` eight at a time (byte `k` of the `u64` from row
/// `j + k`; the last group zero-padded).
///
/// # Panics
/// If the order's bound reaches past `bytes`.
#[inline(always)]
fn gather_bytes8(bytes: &[u8], order: Order<'_>, mut emit: impl FnMut(u64)) {
    assert!(
        order.bound() <= bytes.len(),
        "order addresses bytes up to {} of {}",
        order.bound(),
        bytes.len()
    );
    let read = |r: u32| -> u64 {
        debug_assert!((r as usize) < bytes.len());
        // SAFETY: `r < order.bound()` (the `Order` invariant) `<= bytes.len()`, checked above.
        u64::from(unsafe { *bytes.get_unchecked(r as usize) })
    };
    let mut chunks = order.rows().chunks_exact(8);
    for c in &mut chunks {
        emit(
            read(c[0])
                | read(c[1]) << 8
                | read(c[2]) << 16
                | read(c[3]) << 24
                | read(c[4]) << 32
                | read(c[5]) << 40
                | read(c[6]) << 48
                | read(c[7]) << 56,
        );
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        emit(
            rest.iter()
                .enumerate()
                .fold(0u64, |x, (k, &r)| x | read(r) << (8 * k)),
        );
    }
}

/// Unpacks bits `offset..offset + len` of `bits` into `bytes`, one 0/1 byte per bit, starting
/// at `bytes[offset % 8]` (the caller indexes with `offset % 8 + row`).
fn unpack(bits: &[u8], offset: usize, len: usize, bytes: &mut Vec<u8>) {
    let first = offset / 8;
    let last = (offset + len).div_ceil(8);
    bytes.clear();
    bytes.resize((last - first) * 8, 0);
    for (out, &b) in bytes.chunks_exact_mut(8).zip(&bits[first..last]) {
        out.copy_from_slice(&SPREAD[b as usize].to_le_bytes());
    }
}

/// Returns the bits `bits[offset + order[j]]` for every `j`, packed from bit 0.
///
/// # Panics
/// If the order's bound reaches past the end of `bits` (a caller bug: orders come from a plan
/// of the same array).
pub(crate) fn gather_bits(
    bits: &[u8],
    offset: usize,
    order: Order<'_>,
    scratch: &mut Vec<u8>,
) -> Buffer {
    assert!(
        offset + order.bound() <= bits.len() * 8,
        "order addresses bits up to {} of a {}-byte bitmap",
        offset + order.bound(),
        bits.len()
    );
    unpack(bits, offset, order.bound(), scratch);
    let unpacked = &scratch[offset % 8..];
    let mut out = vec![0u8; order.len().div_ceil(8)];
    let mut next = out.iter_mut();
    gather_bytes8(unpacked, order, |x| {
        if let Some(byte) = next.next() {
            *byte = pack8(x);
        }
    });
    Buffer::from_vec(out)
}

/// Unpacks bits `offset..offset + len` of `bits` into `scratch` and returns the unpacked
/// bytes of those rows, `len` of them (plus up to 7 of padding after).
///
/// # Panics
/// If the bits reach past the bitmap.
pub(crate) fn unpack_rows<'a>(
    bits: &[u8],
    offset: usize,
    len: usize,
    scratch: &'a mut Vec<u8>,
) -> &'a [u8] {
    assert!(
        offset + len <= bits.len() * 8,
        "bits up to {} of a {}-byte bitmap",
        offset + len,
        bits.len()
    );
    unpack(bits, offset, len, scratch);
    &scratch[offset % 8..]
}

/// Appends the bits `unpacked[order[j]]` (0/1 bytes, from [`unpack_rows`]) to the bitmap in
/// `out`, which holds `bit_len` bits.
///
/// # Panics
/// If the order's bound reaches past `unpacked`.
pub(crate) fn append_gathered(
    unpacked: &[u8],
    order: Order<'_>,
    out: &mut arrow_buffer::MutableBuffer,
    bit_len: usize,
) {
    let mut appender = BitAppender::new(out, bit_len, order.len());
    gather_bytes8(unpacked, order, |x| appender.push(pack8(x)));
    appender.finish();
}

/// Appends `count` set bits to the bitmap in `out`, which holds `bit_len` bits.
pub(crate) fn append_ones(out: &mut arrow_buffer::MutableBuffer, bit_len: usize, count: usize) {
    let mut appender = BitAppender::new(out, bit_len, count);
    for _ in 0..count.div_ceil(8) {
        appender.push(0xff);
    }
    appender.finish();
}

/// Appends whole bytes of bits to a bitmap whose length need not be a multiple of 8: each byte
/// is shifted past the bits already in the last, partial byte.
struct BitAppender<'a> {
    out: &'a mut arrow_buffer::MutableBuffer,
    shift: u32,
    /// The partial byte's bits, then each pushed byte's bits that did not fit.
    pending: u16,
    end_bits: usize,
}

impl<'a> BitAppender<'a> {
    /// Room for `count` more bits after the `bit_len` `out` holds (`bit_len.div_ceil(8)`
    /// bytes, the bits past `bit_len` zero).
    fn new(out: &'a mut arrow_buffer::MutableBuffer, bit_len: usize, count: usize) -> Self {
        debug_assert_eq!(out.len(), bit_len.div_ceil(8));
        let shift = (bit_len % 8) as u32;
        let pending = if shift == 0 {
            0
        } else {
            u16::from(out.as_slice()[bit_len / 8])
        };
        out.truncate(bit_len / 8);
        out.reserve(count.div_ceil(8) + 1);
        Self {
            out,
            shift,
            pending,
            end_bits: bit_len + count,
        }
    }

    #[inline(always)]
    fn push(&mut self, byte: u8) {
        let v = self.pending | u16::from(byte) << self.shift;
        self.out.push(v as u8);
        self.pending = v >> 8;
    }

    /// Writes the carried bits and cuts the bitmap to its new length, clearing the bits past
    /// it.
    fn finish(self) {
        if self.shift != 0 {
            self.out.push(self.pending as u8);
        }
        let bytes = self.end_bits.div_ceil(8);
        debug_assert!(self.out.len() >= bytes);
        self.out.truncate(bytes);
        let rest = self.end_bits % 8;
        if rest != 0 {
            self.out.as_slice_mut()[bytes - 1] &= (1u8 << rest) - 1;
        }
    }
}

/// Up to this many bitmaps share one byte per row in [`scatter_nulls_many`].
const LANES: usize = 8;

/// Moves several validity bitmaps (every one with at least one null) by one `order`, eight at
/// a time; the result lines up with `nulls`.
///
/// # Panics
/// If a bitmap is shorter than the order's bound (a caller bug).
pub(crate) fn scatter_nulls_many(
    nulls: &[&NullBuffer],
    order: Order<'_>,
    unpacked: &mut Vec<u8>,
    lanes: &mut Vec<u8>,
) -> Vec<NullBuffer> {
    let bound = order.bound();
    let rows = order.rows();
    let out_bytes = rows.len().div_ceil(8);
    let mut out = Vec::with_capacity(nulls.len());
    for group in nulls.chunks(LANES) {
        if let [single] = group {
            // One bitmap: its unpacked bytes are already its lanes.
            let bits = gather_bits(single.validity(), single.offset(), order, unpacked);
            out.push(NullBuffer::new(BooleanBuffer::new(bits, 0, rows.len())));
            continue;
        }
        // Bit `c` of `lanes[r]` is row `r`'s validity in the group's column `c`.
        lanes.clear();
        lanes.resize(bound, 0);
        for (c, validity) in group.iter().enumerate() {
            assert!(
                validity.len() >= bound,
                "a bitmap of {} bits for {bound} rows",
                validity.len()
            );
            unpack(validity.validity(), validity.offset(), bound, unpacked);
            let first = validity.offset() % 8;
            for (lane, &bit) in lanes.iter_mut().zip(&unpacked[first..first + bound]) {
                *lane |= bit << c;
            }
        }
        let mut moved: Vec<Vec<u8>> = group
            .iter()
            .map(|_| Vec::with_capacity(out_bytes))
            .collect();
        // Plain pointers in a local array: the compiler keeps them in registers rather than
        // reloading every Vec's length and capacity per byte.
        let mut dst = [std::ptr::null_mut::<u8>(); LANES];
        for (d, bytes) in dst.iter_mut().zip(&mut moved) {
            *d = bytes.as_mut_ptr();
        }
        let lanes_used = group.len();
        let mut written = 0usize;
        gather_bytes8(lanes, order, |x| {
            debug_assert!(written < out_bytes);
            for (lane, d) in dst.iter().enumerate().take(lanes_used) {
                // SAFETY: `gather_bytes8` emits `rows.len().div_ceil(8) == out_bytes` words,
                // so `written < out_bytes`, the capacity of every output.
                unsafe { *d.add(written) = pack8((x >> lane) & 0x0101_0101_0101_0101) };
            }
            written += 1;
        });
        debug_assert_eq!(written, out_bytes);
        out.extend(moved.into_iter().map(|mut bytes| {
            // SAFETY: the loop above wrote all `out_bytes` bytes of every output.
            unsafe { bytes.set_len(out_bytes) };
            NullBuffer::new(BooleanBuffer::new(Buffer::from_vec(bytes), 0, rows.len()))
        }));
    }
    out
}

/// Moves a validity bitmap by `order`. No bitmap in, or one without nulls, gives none out: a
/// column without nulls never gains a null buffer.
pub(crate) fn scatter_nulls(
    nulls: Option<&NullBuffer>,
    order: Order<'_>,
    scratch: &mut Vec<u8>,
) -> Option<NullBuffer> {
    let nulls = nulls.filter(|n| n.null_count() > 0)?;
    let bits = gather_bits(nulls.validity(), nulls.offset(), order, scratch);
    Some(NullBuffer::new(BooleanBuffer::new(bits, 0, order.len())))
}

/// Moves a boolean value bitmap by `order`.
pub(crate) fn scatter_boolean_values(
    values: &BooleanBuffer,
    order: Order<'_>,
    scratch: &mut Vec<u8>,
) -> BooleanBuffer {
    let bits = gather_bits(values.values(), values.offset(), order, scratch);
    BooleanBuffer::new(bits, 0, order.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_bits_land_after_any_partial_byte() {
        let source: Vec<bool> = (0..90).map(|i| (i * 13 + i / 5) % 3 == 0).collect();
        let buffer = BooleanBuffer::from(source.as_slice());
        let mut scratch = Vec::new();
        let unpacked = unpack_rows(buffer.values(), 0, source.len(), &mut scratch).to_vec();
        let mut out = arrow_buffer::MutableBuffer::new(0);
        let mut want: Vec<bool> = Vec::new();
        for (k, step) in [3usize, 1, 8, 5, 2, 7].into_iter().enumerate() {
            let order: Vec<u32> = (k as u32..source.len() as u32).step_by(step).collect();
            let order = Order::try_new(&order, source.len()).unwrap();
            append_gathered(&unpacked, order, &mut out, want.len());
            want.extend(order.rows().iter().map(|&r| source[r as usize]));
            append_ones(&mut out, want.len(), k);
            want.extend(std::iter::repeat_n(true, k));
            assert_eq!(out.len(), want.len().div_ceil(8));
            let got = BooleanBuffer::new(Buffer::from(out.as_slice()), 0, want.len());
            assert_eq!(got.iter().collect::<Vec<_>>(), want, "round {k}");
            let rest = want.len() % 8;
            if rest != 0 {
                assert_eq!(
                    out.as_slice()[out.len() - 1] >> rest,
                    0,
                    "bits past the end"
                );
            }
        }
    }

    #[test]
    fn pack8_is_the_inverse_of_spread() {
        for b in 0..=255u8 {
            assert_eq!(pack8(SPREAD[b as usize]), b);
        }
    }

    #[test]
    fn gathers_across_word_boundaries_with_offsets() {
        let source: Vec<bool> = (0..300).map(|i| (i * 37 + i / 3) % 5 < 2).collect();
        let buffer = BooleanBuffer::from(source.as_slice());
        let mut scratch = Vec::new();
        for offset in [0usize, 1, 7, 8, 63, 64, 65] {
            let sliced = buffer.slice(offset, 300 - offset);
            for step in [1, 3, 8] {
                let order: Vec<u32> = (0..sliced.len() as u32).rev().step_by(step).collect();
                let got = scatter_boolean_values(
                    &sliced,
                    Order::try_new(&order, sliced.len()).unwrap(),
                    &mut scratch,
                );
                let want: Vec<bool> = order.iter().map(|&r| source[offset + r as usize]).collect();
                assert_eq!(
                    got.iter().collect::<Vec<_>>(),
                    want,
                    "offset {offset} step {step}"
                );
            }
        }
    }

    #[test]
    fn many_bitmaps_move_like_single_ones() {
        let mut unpacked = Vec::new();
        let mut lanes = Vec::new();
        for count in [1usize, 2, 7, 8, 9, 17] {
            for rows in [0usize, 1, 8, 13, 64, 100] {
                let bitmaps: Vec<NullBuffer> = (0..count)
                    .map(|c| {
                        let bits: BooleanBuffer = (0..rows + c + 3)
                            .map(|i| (i * 7 + c * 3) % 5 != 0)
                            .collect();
                        NullBuffer::new(bits.slice(c, rows))
                    })
                    .collect();
                let refs: Vec<&NullBuffer> = bitmaps.iter().collect();
                let order: Vec<u32> = (0..rows as u32)
                    .map(|i| (i * 7 + 3) % rows as u32)
                    .collect();
                let order = Order::try_new(&order, rows).unwrap();
                let many = scatter_nulls_many(&refs, order, &mut unpacked, &mut lanes);
                assert_eq!(many.len(), count);
                for (got, bitmap) in many.iter().zip(&bitmaps) {
                    let want: Vec<bool> = order
                        .rows()
                        .iter()
                        .map(|&r| bitmap.is_valid(r as usize))
                        .collect();
                    assert_eq!(
                        got.iter().collect::<Vec<_>>(),
                        want,
                        "{count} bitmaps, {rows} rows"
                    );
                }
            }
        }
    }

    #[test]
    fn an_order_within_the_last_partial_byte_is_fine() {
        // 3 bits at offset 5 straddle two bytes; the last byte is read but not past it.
        let bits = [0b1010_0000u8, 0b0000_0001];
        let got = gather_bits(
            &bits,
            5,
            Order::try_new(&[2, 1, 0], 3).unwrap(),
            &mut Vec::new(),
        );
        assert_eq!(got.as_slice()[0] & 0b111, 0b101);
    }

    #[test]
    #[should_panic(expected = "order addresses bits")]
    fn an_order_past_the_bitmap_is_caught() {
        gather_bits(
            &[0xff],
            0,
            Order::try_new(&[3, 8], 9).unwrap(),
            &mut Vec::new(),
        );
    }
}

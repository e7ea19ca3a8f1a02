//! Moving fixed-width values by an order, erased down to their byte width.
//!
//! One monomorphic loop per width (1, 2, 4, 8, 16 and 32 bytes) serves every primitive,
//! temporal, interval and decimal type, dictionary keys and the 16-byte views of
//! Utf8View/BinaryView. Other widths (FixedSizeBinary) copy `width` bytes per row.

use super::Order;
use arrow_buffer::{ArrowNativeType, Buffer, i256};

/// `out[j] = values[order[j]]` for values of `width` bytes, read from `bytes`.
///
/// # Panics
/// If `bytes.len()` is not a multiple of `width` or an entry of `order` is past the end of
/// the values (a caller bug: orders come from a plan of the same array).
pub(crate) fn gather_fixed(bytes: &[u8], width: usize, order: Order<'_>) -> Buffer {
    match width {
        1 => gather_native::<u8>(bytes, order),
        2 => gather_native::<u16>(bytes, order),
        4 => gather_native::<u32>(bytes, order),
        8 => gather_native::<u64>(bytes, order),
        16 => gather_native::<[u64; 2]>(bytes, order),
        32 => gather_native::<[u64; 4]>(bytes, order),
        _ => gather_chunks(bytes, width, order),
    }
}

/// A type of which every bit pattern is a valid value, so that bytes may be viewed as it,
/// with the arrow native type of the same size that output buffers are allocated as.
///
/// Values wider than 8 bytes move as arrays of `u64`: copying `[u64; 2]` compiles to one
/// 16-byte load and store, where `i128` took two of each.
///
/// # Safety
/// Implement only for types without padding, invalid bit patterns or drop glue, whose
/// `Storage` has the same size and at least the same alignment.
pub(crate) unsafe trait Plain: Copy + 'static {
    /// The arrow native type output buffers are allocated as.
    type Storage: ArrowNativeType;
}
// SAFETY: integers and arrays of integers: no padding, every bit pattern valid; each storage
// type is the same size with at least the alignment (i128 and i256 are 16-byte aligned).
unsafe impl Plain for u8 {
    type Storage = u8;
}
// SAFETY: as above.
unsafe impl Plain for u16 {
    type Storage = u16;
}
// SAFETY: as above.
unsafe impl Plain for u32 {
    type Storage = u32;
}
// SAFETY: as above.
unsafe impl Plain for u64 {
    type Storage = u64;
}
// SAFETY: as above.
unsafe impl Plain for [u64; 2] {
    type Storage = i128;
}
// SAFETY: as above.
unsafe impl Plain for [u64; 4] {
    type Storage = i256;
}

/// Views `bytes` as values of `T`, or `None` when they are not aligned for `T` (possible for
/// FixedSizeBinary; arrow aligns the buffers of primitive arrays).
pub(crate) fn typed<T: Plain>(bytes: &[u8]) -> Option<&[T]> {
    // SAFETY: `T: Plain`, so every bit pattern is a valid `T` and viewing aligned bytes as `T`
    // is sound.
    let (head, values, tail) = unsafe { bytes.align_to::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(values)
}

/// Room for `n` values of `T`, allocated as `T::Storage` so that it can become an arrow
/// buffer, with a pointer to write them through.
pub(crate) fn output<T: Plain>(n: usize) -> (Vec<T::Storage>, *mut T) {
    const { assert!(size_of::<T>() == size_of::<T::Storage>()) };
    const { assert!(align_of::<T>() <= align_of::<T::Storage>()) };
    let mut out = Vec::<T::Storage>::with_capacity(n);
    let ptr = out.as_mut_ptr().cast::<T>();
    (out, ptr)
}

fn gather_native<T: Plain>(bytes: &[u8], order: Order<'_>) -> Buffer {
    match typed::<T>(bytes) {
        Some(values) => Buffer::from_vec(gather_values::<T>(values, order)),
        // Unaligned input: the byte-wise path is still right.
        None => gather_chunks(bytes, size_of::<T>(), order),
    }
}

/// The hot loop: one sequential read of `order`, one read of `values`, one sequential write.
#[inline(never)]
pub(crate) fn gather_values<T: Plain>(values: &[T], order: Order<'_>) -> Vec<T::Storage> {
    let n = order.len();
    let (mut out, dst) = output::<T>(n);
    debug_assert!(out.capacity() >= n);
    debug_assert_eq!(out.as_ptr().cast::<T>(), dst.cast_const());
    // SAFETY: `dst` points at `out`'s capacity of `n` values.
    unsafe { gather_values_to(values, order, dst) };
    // SAFETY: all `n` values were written above, as `T`, which has `T::Storage`'s size and
    // every bit pattern of which is a valid `T::Storage` (both plain integers).
    unsafe { out.set_len(n) };
    out
}

/// Writes `values[order[j]]` to `dst[j]` for every `j`.
///
/// # Safety
/// `dst` must be valid for writes of `order.len()` values of `T` and aligned for `T`.
///
/// # Panics
/// If the order's bound reaches past `values`.
#[inline(always)]
pub(crate) unsafe fn gather_values_to<T: Plain>(values: &[T], order: Order<'_>, dst: *mut T) {
    assert!(
        order.bound() <= values.len(),
        "order addresses values up to {} of {}",
        order.bound(),
        values.len()
    );
    for (j, &r) in order.rows().iter().enumerate() {
        debug_assert!((r as usize) < values.len());
        // SAFETY: `r < order.bound()` (the `Order` invariant) `<= values.len()`, checked above;
        // `j < order.len()`, for which the caller vouches that `dst` is valid.
        unsafe { *dst.add(j) = *values.get_unchecked(r as usize) };
    }
}

/// Appends the `width`-byte values `bytes[order[j]]` to `out`, back to back: a gather
/// straight into the end of a buffer (reserved first, so it grows at most once).
///
/// # Panics
/// If `width` is 0, `bytes.len()` is not a multiple of it, or the order's bound reaches past
/// the values.
pub(crate) fn gather_fixed_into(
    bytes: &[u8],
    width: usize,
    order: Order<'_>,
    out: &mut arrow_buffer::MutableBuffer,
) {
    let (len, n) = (out.len(), order.len());
    out.reserve(n * width);
    debug_assert!(out.capacity() >= len + n * width);
    // SAFETY: room for `n * width` bytes past `len` was reserved, and `gather_fixed_to` writes
    // `width` bytes for each of the order's `n` rows, initialising all of them.
    unsafe {
        gather_fixed_to(bytes, width, order, out.as_mut_ptr().add(len));
        out.set_len(len + n * width);
    }
}

/// Writes the `width`-byte values `bytes[order[j]]` to `dst`, back to back, whatever the
/// alignment of either.
///
/// # Safety
/// `dst` must be valid for writes of `order.len() * width` bytes.
///
/// # Panics
/// If `width` is 0, `bytes.len()` is not a multiple of it, or the order's bound reaches past
/// the values.
pub(crate) unsafe fn gather_fixed_to(bytes: &[u8], width: usize, order: Order<'_>, dst: *mut u8) {
    macro_rules! native {
        ($t:ty) => {
            if let Some(values) = typed::<$t>(bytes)
                && dst.cast::<$t>().is_aligned()
            {
                debug_assert_eq!(size_of::<$t>(), width);
                // SAFETY: `dst` is aligned for the type (checked) and valid for
                // `order.len() * width` bytes, `order.len()` values (the caller's promise).
                return unsafe { gather_values_to::<$t>(values, order, dst.cast()) };
            }
        };
    }
    match width {
        1 => native!(u8),
        2 => native!(u16),
        4 => native!(u32),
        8 => native!(u64),
        16 => native!([u64; 2]),
        32 => native!([u64; 4]),
        _ => {}
    }
    check_chunks(bytes, width, order);
    for (j, &r) in order.rows().iter().enumerate() {
        let start = r as usize * width;
        let value = &bytes[start..start + width];
        debug_assert!(j < order.len());
        // SAFETY: `j < order.len()`, so the `width` bytes at `j * width` are within the
        // caller's `order.len() * width`; `value` is a distinct live slice.
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), dst.add(j * width), width) };
    }
}

fn check_chunks(bytes: &[u8], width: usize, order: Order<'_>) {
    assert!(
        width > 0 && bytes.len().is_multiple_of(width),
        "{} bytes of width {width}",
        bytes.len()
    );
    assert!(
        order.bound() * width <= bytes.len(),
        "order addresses values up to {} of {}",
        order.bound(),
        bytes.len() / width
    );
}

fn gather_chunks(bytes: &[u8], width: usize, order: Order<'_>) -> Buffer {
    check_chunks(bytes, width, order);
    let mut out = Vec::with_capacity(order.len() * width);
    for &r in order.rows() {
        let start = r as usize * width;
        out.extend_from_slice(&bytes[start..start + width]);
    }
    Buffer::from_vec(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_width_gathers_the_same_bytes() {
        for width in [1usize, 2, 3, 4, 5, 8, 16, 17, 32] {
            let bytes: Vec<u8> = (0..width * 50).map(|i| (i * 31 % 251) as u8).collect();
            let order: Vec<u32> = [49u32, 0, 7, 7, 23].to_vec();
            let got = gather_fixed(&bytes, width, Order::try_new(&order, 50).unwrap());
            let want: Vec<u8> = order
                .iter()
                .flat_map(|&r| bytes[r as usize * width..][..width].to_vec())
                .collect();
            assert_eq!(got.as_slice(), &want[..], "width {width}");
        }
    }

    #[test]
    #[should_panic(expected = "order addresses values")]
    fn an_order_past_odd_width_values_is_caught() {
        gather_fixed(&[0u8; 9], 3, Order::try_new(&[0, 3], 4).unwrap());
    }

    #[test]
    fn unaligned_wide_values_take_the_byte_path() {
        let backing: Vec<u8> = (0..16 * 10 + 1).map(|i| i as u8).collect();
        let bytes = &backing[1..];
        let got = gather_fixed(bytes, 16, Order::try_new(&[9, 2], 10).unwrap());
        let want = [&bytes[144..160], &bytes[32..48]].concat();
        assert_eq!(got.as_slice(), &want[..]);
    }

    #[test]
    #[should_panic(expected = "order addresses values")]
    fn an_order_past_the_values_is_caught() {
        // Aligned for `u32` (a byte array might not be, and would take the byte path).
        let values = Buffer::from_vec(vec![0u32; 4]);
        gather_fixed(values.as_slice(), 4, Order::try_new(&[0, 4], 5).unwrap());
    }
}

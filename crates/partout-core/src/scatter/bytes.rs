//! Moving variable-width values (Utf8, LargeUtf8, Binary, LargeBinary) by an order.
//!
//! Two passes: the offsets pass walks the order once, summing the lengths of the rows it takes
//! into the output offsets; the bytes pass then copies every row's bytes to the place its
//! offset names, appending to one output buffer sized exactly by the first pass.

use super::Order;
use arrow_buffer::{ArrowNativeType, Buffer};

/// Offsets and values of the rows `order` takes from a variable-width array whose logical
/// offsets are `offsets` (`len + 1` entries, not necessarily starting at 0).
///
/// # Panics
/// If the order's bound reaches past `offsets.len() - 1`, or the offsets point outside
/// `values` (neither happens for a valid array and an order planned for it).
pub(crate) fn gather_bytes<O: ArrowNativeType + std::ops::AddAssign + std::ops::Sub<Output = O>>(
    offsets: &[O],
    values: &[u8],
    order: Order<'_>,
) -> (Buffer, Buffer) {
    let mut out_offsets = Vec::<O>::with_capacity(order.len() + 1);
    debug_assert!(out_offsets.capacity() > order.len());
    // SAFETY: `out_offsets` has room for `order.len() + 1` offsets.
    let total = unsafe { offsets_to(offsets, order, O::usize_as(0), out_offsets.as_mut_ptr()) };
    // SAFETY: `offsets_to` wrote all `order.len() + 1` offsets.
    unsafe { out_offsets.set_len(order.len() + 1) };
    let total = total.as_usize();
    let mut out: Vec<u8> = Vec::with_capacity(total + SHORT);
    debug_assert!(out.capacity() >= total + SHORT);
    // SAFETY: `out` has room for the `total` bytes the offsets pass summed, plus `SHORT`.
    unsafe { copy_values_to(offsets, values, order, total, out.as_mut_ptr()) };
    // SAFETY: `copy_values_to` initialised the first `total` bytes.
    unsafe { out.set_len(total) };
    (Buffer::from_vec(out_offsets), Buffer::from_vec(out))
}

/// The offsets pass: writes `base`, then `base` plus the running total of the lengths of the
/// rows `order` takes, to `dst` (`order.len() + 1` offsets); returns the last one.
///
/// # Safety
/// `dst` must be valid for writes of `order.len() + 1` offsets.
///
/// # Panics
/// If the order's bound reaches past `offsets.len() - 1`.
pub(crate) unsafe fn offsets_to<O>(offsets: &[O], order: Order<'_>, base: O, dst: *mut O) -> O
where
    O: ArrowNativeType + std::ops::AddAssign + std::ops::Sub<Output = O>,
{
    assert!(
        order.bound() < offsets.len(),
        "order addresses rows up to {} of {}",
        order.bound(),
        offsets.len().saturating_sub(1)
    );
    let mut total = base;
    // SAFETY: the caller's promise covers `order.len() + 1` offsets.
    unsafe { *dst = total };
    for (j, &r) in order.rows().iter().enumerate() {
        let r = r as usize;
        debug_assert!(r + 1 < offsets.len());
        // SAFETY: `r < order.bound() < offsets.len()` (the `Order` invariant and the check
        // above), so `r` and `r + 1` are both in bounds; `j + 1 <= order.len()`.
        unsafe {
            let (start, end) = (*offsets.get_unchecked(r), *offsets.get_unchecked(r + 1));
            total += end - start;
            *dst.add(j + 1) = total;
        }
    }
    total
}

/// Values shorter than this are copied as one fixed-size block: a `memcpy` call per short
/// string costs more than the string.
pub(crate) const SHORT: usize = 16;

/// The bytes pass: every taken row's bytes, in order, `total` bytes in all, to `dst`.
///
/// # Safety
/// `dst` must be valid for writes of `total + SHORT` bytes (the block copies may write up to
/// `SHORT` bytes past the last value), and `total` must be the sum of the lengths of the rows
/// `order` takes (what [`offsets_to`] returns minus its base).
///
/// # Panics
/// If the offsets reach past `values`.
pub(crate) unsafe fn copy_values_to<O: ArrowNativeType>(
    offsets: &[O],
    values: &[u8],
    order: Order<'_>,
    total: usize,
    dst: *mut u8,
) {
    // A valid array's offsets are monotone and end inside `values`: check the end once here;
    // monotonicity is the array's own invariant.
    let end = offsets[order.bound()].as_usize();
    assert!(
        end <= values.len(),
        "offsets end at {end} past {} value bytes",
        values.len()
    );
    let src = values.as_ptr();
    let mut written = 0usize;
    for &r in order.rows() {
        let r = r as usize;
        debug_assert!(r + 1 < offsets.len());
        // SAFETY: `r < order.bound() < offsets.len()` as in the offsets pass.
        let (start, stop) = unsafe {
            (
                offsets.get_unchecked(r).as_usize(),
                offsets.get_unchecked(r + 1).as_usize(),
            )
        };
        debug_assert!(start <= stop && stop <= end);
        let len = stop - start;
        debug_assert!(written + len <= total);
        // SAFETY: `start..stop` lies inside `values` (monotone offsets ending at `end <=
        // values.len()`), and `written + len <= total` because the lengths sum to `total`
        // (the caller's promise). A short value copies a whole block only when `start + SHORT`
        // is still inside `values`, and its block ends by `written + SHORT <= total + SHORT`,
        // the room the caller vouches for; bytes past the value are overwritten by the next
        // values or lie past the `total` bytes the caller keeps.
        unsafe {
            if len <= SHORT && start + SHORT <= values.len() {
                std::ptr::copy_nonoverlapping(src.add(start), dst.add(written), SHORT);
            } else {
                std::ptr::copy_nonoverlapping(src.add(start), dst.add(written), len);
            }
        }
        written += len;
    }
    debug_assert_eq!(written, total);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_rows_of_a_sliced_array() {
        // Rows "ab", "", "cde", "f" living at bytes 2.. of the values buffer.
        let values = b"xxabcdef";
        let offsets: [i64; 5] = [2, 4, 4, 7, 8];
        let order = [3u32, 0, 2, 1];
        let (o, v) = gather_bytes(&offsets, values, Order::try_new(&order, 4).unwrap());
        assert_eq!(o.typed_data::<i64>(), &[0, 1, 3, 6, 6]);
        assert_eq!(v.as_slice(), b"fabcde");
    }

    #[test]
    fn short_and_long_values_near_the_end_of_the_buffer() {
        // Values of every length up to 40 bytes, the last ones ending at the buffer's end so
        // the short-block copy must fall back to an exact copy.
        let mut values = Vec::new();
        let mut offsets = vec![0i32];
        for len in (0..=40).chain([1, 0, 17, 3]) {
            values.extend((0..len).map(|i| (len * 7 + i) as u8));
            offsets.push(values.len() as i32);
        }
        let rows = offsets.len() - 1;
        let order: Vec<u32> = (0..rows as u32).rev().chain(0..rows as u32).collect();
        let (o, v) = gather_bytes(&offsets, &values, Order::try_new(&order, rows).unwrap());
        let want: Vec<u8> = order
            .iter()
            .flat_map(|&r| {
                values[offsets[r as usize] as usize..offsets[r as usize + 1] as usize].to_vec()
            })
            .collect();
        assert_eq!(v.as_slice(), &want[..]);
        assert_eq!(*o.typed_data::<i32>().last().unwrap() as usize, want.len());
    }
}

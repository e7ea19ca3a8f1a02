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
    assert!(
        order.bound() < offsets.len(),
        "order addresses rows up to {} of {}",
        order.bound(),
        offsets.len().saturating_sub(1)
    );
    let mut out_offsets = Vec::with_capacity(order.len() + 1);
    let mut total = O::usize_as(0);
    out_offsets.push(total);
    out_offsets.extend(order.rows().iter().map(|&r| {
        let r = r as usize;
        debug_assert!(r + 1 < offsets.len());
        // SAFETY: `r < order.bound() < offsets.len()` (the `Order` invariant and the check
        // above), so `r` and `r + 1` are both in bounds.
        let (start, end) = unsafe { (*offsets.get_unchecked(r), *offsets.get_unchecked(r + 1)) };
        total += end - start;
        total
    }));

    (
        Buffer::from_vec(out_offsets),
        copy_values(offsets, values, order, total.as_usize()),
    )
}

/// Values shorter than this are copied as one fixed-size block: a `memcpy` call per short
/// string costs more than the string.
const SHORT: usize = 16;

/// The bytes pass: every taken row's bytes, in order, `total` bytes in all.
fn copy_values<O: ArrowNativeType>(
    offsets: &[O],
    values: &[u8],
    order: Order<'_>,
    total: usize,
) -> Buffer {
    // A valid array's offsets are monotone and end inside `values`: check the end once here;
    // monotonicity is the array's own invariant.
    let end = offsets[order.bound()].as_usize();
    assert!(
        end <= values.len(),
        "offsets end at {end} past {} value bytes",
        values.len()
    );
    // Room for a whole block past the last value.
    let mut out: Vec<u8> = Vec::with_capacity(total + SHORT);
    let dst = out.as_mut_ptr();
    let src = values.as_ptr();
    let mut written = 0usize;
    for &r in order.rows() {
        let r = r as usize;
        // SAFETY: `r < order.bound() < offsets.len()` as in the offsets pass.
        let (start, stop) = unsafe {
            (
                offsets.get_unchecked(r).as_usize(),
                offsets.get_unchecked(r + 1).as_usize(),
            )
        };
        debug_assert!(start <= stop && stop <= end);
        let len = stop - start;
        // SAFETY: `start..stop` lies inside `values` (monotone offsets ending at `end <=
        // values.len()`), and `written + len <= total` because the offsets pass summed exactly
        // these lengths. A short value copies a whole block only when `start + SHORT` is still
        // inside `values`, and its block ends by `written + SHORT <= total + SHORT`, the
        // capacity; bytes past the value are overwritten by the next values or cut off by
        // `set_len` below.
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
    // SAFETY: the loop initialised `total` bytes (every value written in full, back to back),
    // and `total <= capacity`.
    unsafe { out.set_len(total) };
    Buffer::from_vec(out)
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

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

    let mut out_values = Vec::with_capacity(total.as_usize());
    for &r in order.rows() {
        let r = r as usize;
        // Bounds-checked: a corrupt array panics here rather than reading out of bounds.
        out_values.extend_from_slice(&values[offsets[r].as_usize()..offsets[r + 1].as_usize()]);
    }
    (Buffer::from_vec(out_offsets), Buffer::from_vec(out_values))
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
}

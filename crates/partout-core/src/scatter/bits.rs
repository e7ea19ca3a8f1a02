//! Moving bit-packed values (booleans and validity) by an order.
//!
//! Output bits are built 64 at a time in a register and stored as whole words, so the output
//! is written once, in order, with no read-modify-write of partial bytes.

use super::Order;
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};

/// Returns the bits `bits[offset + order[j]]` for every `j`, packed from bit 0.
///
/// # Panics
/// If the order's bound reaches past the end of `bits` (a caller bug: orders come from a plan
/// of the same array).
pub(crate) fn gather_bits(bits: &[u8], offset: usize, order: Order<'_>) -> Buffer {
    assert!(
        offset + order.bound() <= bits.len() * 8,
        "order addresses bits up to {} of a {}-byte bitmap",
        offset + order.bound(),
        bits.len()
    );
    let order = order.rows();
    let mut words: Vec<u64> = Vec::with_capacity(order.len().div_ceil(64));
    let read = |r: u32| -> u64 {
        let b = offset + r as usize;
        debug_assert!(b / 8 < bits.len());
        // SAFETY: `r < order.bound()` (the `Order` invariant) and the assertion above checked
        // `offset + bound <= bits.len() * 8`, so bit `b` is inside `bits`.
        let byte = unsafe { *bits.get_unchecked(b >> 3) };
        ((byte >> (b & 7)) & 1) as u64
    };
    let mut chunks = order.chunks_exact(64);
    for chunk in &mut chunks {
        let mut word = 0u64;
        for (k, &r) in chunk.iter().enumerate() {
            word |= read(r) << k;
        }
        words.push(word);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = 0u64;
        for (k, &r) in rest.iter().enumerate() {
            word |= read(r) << k;
        }
        words.push(word);
    }
    Buffer::from_vec(words)
}

/// Moves a validity bitmap by `order`. No bitmap in, or one without nulls, gives none out: a
/// column without nulls never gains a null buffer.
pub(crate) fn scatter_nulls(nulls: Option<&NullBuffer>, order: Order<'_>) -> Option<NullBuffer> {
    let nulls = nulls.filter(|n| n.null_count() > 0)?;
    let bits = gather_bits(nulls.validity(), nulls.offset(), order);
    Some(NullBuffer::new(BooleanBuffer::new(bits, 0, order.len())))
}

/// Moves a boolean value bitmap by `order`.
pub(crate) fn scatter_boolean_values(values: &BooleanBuffer, order: Order<'_>) -> BooleanBuffer {
    let bits = gather_bits(values.values(), values.offset(), order);
    BooleanBuffer::new(bits, 0, order.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_across_word_boundaries_with_offsets() {
        let source: Vec<bool> = (0..300).map(|i| (i * 37 + i / 3) % 5 < 2).collect();
        let buffer = BooleanBuffer::from(source.as_slice());
        for offset in [0usize, 1, 7, 8, 63, 64, 65] {
            let sliced = buffer.slice(offset, 300 - offset);
            let order: Vec<u32> = (0..sliced.len() as u32).rev().step_by(3).collect();
            let got =
                scatter_boolean_values(&sliced, Order::try_new(&order, sliced.len()).unwrap());
            let want: Vec<bool> = order.iter().map(|&r| source[offset + r as usize]).collect();
            assert_eq!(got.iter().collect::<Vec<_>>(), want, "offset {offset}");
        }
    }

    #[test]
    #[should_panic(expected = "order addresses bits")]
    fn an_order_past_the_bitmap_is_caught() {
        gather_bits(&[0xff], 0, Order::try_new(&[3, 8], 9).unwrap());
    }
}

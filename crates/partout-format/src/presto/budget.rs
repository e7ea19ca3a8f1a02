//! The allowance of a decode call for bytes it makes by repeating what the input holds.
//!
//! An RLE block repeats one row as often as its four-byte row count says, a DICTIONARY block
//! repeats its entries once per four-byte id, and a ROW block with nulls gives every field a
//! null row per null row (four bytes and a bit each, times the fields). Nested in each other,
//! these multiply: a 100-byte page can describe terabytes. Arrow has no such blocks for the
//! plain types a schema names, so the decoder copies; before each copy it takes the copy's
//! size from this allowance, and refuses the input with [`FormatError::TooLarge`] when the
//! allowance runs out.
//!
//! The allowance is [`BASE`] plus [`PER_INPUT_BYTE`] for every byte of every page read so
//! far. Presto's and Velox's exchange pages are at most a few MiB and rarely hold more than
//! ten thousand rows, so real pages stay far below it; a page of four million rows of
//! all-null BIGINT columns (RLE blocks of a null) fits about a dozen columns in [`BASE`].

use super::HEADER_SIZE;
use crate::{FormatError, Result};
use arrow_array::cast::AsArray;
use arrow_array::{Array, OffsetSizeTrait};
use arrow_schema::DataType;

/// Bytes any decode call may make by repetition.
pub(super) const BASE: usize = 256 << 20;

/// Bytes more that each byte of input (a page's header and body as sent) allows.
pub(super) const PER_INPUT_BYTE: usize = 64;

/// Bytes counted for every position at every level of a copied row, besides its values: the
/// indices and offsets `take` makes on the way.
const PER_POSITION: usize = 8;

/// What a decode call may still allocate by repetition.
#[derive(Debug)]
pub(super) struct Budget {
    spent: usize,
    allowed: usize,
}

impl Budget {
    /// The allowance of a call that has read nothing yet.
    pub(super) fn new() -> Self {
        Self {
            spent: 0,
            allowed: BASE,
        }
    }

    /// Raises the allowance for a page of `body` bytes as sent.
    pub(super) fn earn(&mut self, body: usize) {
        let earned = (HEADER_SIZE + body).saturating_mul(PER_INPUT_BYTE);
        self.allowed = self.allowed.saturating_add(earned);
    }

    /// Takes `bytes` from the allowance for the block `what` names, or refuses.
    pub(super) fn spend(&mut self, bytes: usize, what: impl FnOnce() -> String) -> Result<()> {
        match self.spent.checked_add(bytes).filter(|&s| s <= self.allowed) {
            Some(spent) => {
                self.spent = spent;
                Ok(())
            }
            None => Err(FormatError::TooLarge(format!(
                "Presto page: {} would copy {bytes} bytes, past what this input allows \
                 ({} bytes copied, {} allowed: {BASE} and {PER_INPUT_BYTE} per byte of input)",
                what(),
                self.spent,
                self.allowed
            ))),
        }
    }
}

/// What copying each row of `array` allocates: its values and offsets and those of everything
/// nested in it, and [`PER_POSITION`] for every position. A dictionary's row costs its key (the
/// dictionary is shared, not copied).
pub(super) fn row_costs(array: &dyn Array) -> Vec<usize> {
    let len = array.len();
    match array.data_type() {
        DataType::Utf8 => byte_costs(array.as_string::<i32>().value_offsets()),
        DataType::LargeUtf8 => byte_costs(array.as_string::<i64>().value_offsets()),
        DataType::Binary => byte_costs(array.as_binary::<i32>().value_offsets()),
        DataType::LargeBinary => byte_costs(array.as_binary::<i64>().value_offsets()),
        DataType::Utf8View => view_costs(array.as_string_view().views()),
        DataType::BinaryView => view_costs(array.as_binary_view().views()),
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            nested_costs(list.value_offsets(), &row_costs(list.values().as_ref()))
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            nested_costs(list.value_offsets(), &row_costs(list.values().as_ref()))
        }
        DataType::Map(_, _) => {
            let map = array.as_map();
            nested_costs(map.value_offsets(), &row_costs(map.entries()))
        }
        DataType::Struct(_) => {
            let mut costs = vec![PER_POSITION; len];
            for field in array.as_struct().columns() {
                for (cost, field_cost) in costs.iter_mut().zip(row_costs(field.as_ref())) {
                    *cost += field_cost;
                }
            }
            costs
        }
        DataType::Dictionary(key, _) => vec![width(key) + PER_POSITION; len],
        other => vec![width(other) + PER_POSITION; len],
    }
}

/// Bytes of one value of a fixed-width type (1 for booleans, 0 for nulls).
fn width(data_type: &DataType) -> usize {
    match data_type {
        DataType::Null => 0,
        DataType::Boolean => 1,
        DataType::FixedSizeBinary(w) => usize::try_from(*w).unwrap_or(0),
        other => other.primitive_width().unwrap_or(0),
    }
}

fn byte_costs<O: OffsetSizeTrait>(offsets: &[O]) -> Vec<usize> {
    offsets
        .windows(2)
        .map(|w| (w[1] - w[0]).as_usize() + O::get_byte_width() + PER_POSITION)
        .collect()
}

fn view_costs(views: &[u128]) -> Vec<usize> {
    views
        .iter()
        .map(|&v| {
            let len = v as u32 as usize;
            16 + if len > 12 { len } else { 0 } + PER_POSITION
        })
        .collect()
}

/// Each row's offset and the costs of the child rows it spans.
fn nested_costs<O: OffsetSizeTrait>(offsets: &[O], child: &[usize]) -> Vec<usize> {
    let mut before = Vec::with_capacity(child.len() + 1);
    before.push(0usize);
    for &c in child {
        before.push(before[before.len() - 1] + c);
    }
    offsets
        .windows(2)
        .map(|w| {
            before[w[1].as_usize()] - before[w[0].as_usize()] + O::get_byte_width() + PER_POSITION
        })
        .collect()
}

//! ARRAY, a list per row:
//!
//! ```text
//!  elements block  rows:i32  offsets:i32[rows + 1] (from 0 up to the elements)  nulls
//! ```

use super::block::{Decode, Kind, List, MAX_ROWS, Walk, mismatch};
use super::budget::Budget;
use super::cursor::Cursor;
use crate::Result;
use arrow_array::{ArrayRef, LargeListArray, LargeListViewArray, ListArray, ListViewArray};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::DataType;
use std::sync::Arc;

/// Reads the payload of an ARRAY block.
pub(super) fn read<'a>(
    c: &mut Cursor<'a>,
    limit: usize,
    walk: Walk<'_>,
) -> Result<(usize, Kind<'a>)> {
    let elements = walk.child(c, MAX_ROWS)?;
    let rows = c.count("row count", limit.min(c.remaining() / 4))?;
    let offsets = c.offsets(rows, Some(elements.rows), "ARRAY offsets")?;
    let nulls = c.nulls(rows)?;
    Ok((
        rows,
        Kind::Array(List {
            elements: Box::new(elements),
            offsets,
            nulls,
        }),
    ))
}

/// The block as a list array of `data_type`.
pub(super) fn to_array(
    block: List<'_>,
    at: usize,
    data_type: &DataType,
    budget: &mut Budget,
    decode: Decode,
) -> Result<ArrayRef> {
    let (DataType::List(item)
    | DataType::LargeList(item)
    | DataType::ListView(item)
    | DataType::LargeListView(item)) = data_type
    else {
        return Err(mismatch("ARRAY", data_type, at));
    };
    let List {
        elements,
        offsets,
        nulls,
    } = block;
    let elements = decode(*elements, item.data_type(), budget)?;
    let list = || {
        ListArray::try_new(
            item.clone(),
            OffsetBuffer::new(ScalarBuffer::from(offsets.clone())),
            elements.clone(),
            nulls.clone(),
        )
    };
    let large = || {
        LargeListArray::try_new(
            item.clone(),
            OffsetBuffer::new(ScalarBuffer::from(
                offsets.iter().map(|&o| i64::from(o)).collect::<Vec<_>>(),
            )),
            elements.clone(),
            nulls.clone(),
        )
    };
    Ok(match data_type {
        DataType::List(_) => Arc::new(list()?),
        DataType::LargeList(_) => Arc::new(large()?),
        DataType::ListView(_) => Arc::new(ListViewArray::from(list()?)),
        _ => Arc::new(LargeListViewArray::from(large()?)),
    })
}

//! RLE, one row repeated:
//!
//! ```text
//!  rows:i32  value block (one row)
//! ```
//!
//! Presto's block builders write an all-null (or empty) fixed-width column as RLE of a one-row
//! null block.

use super::block::{Decode, Kind, Rle, Walk};
use super::budget::{Budget, row_costs};
use super::corrupt;
use super::cursor::Cursor;
use crate::Result;
use arrow_array::{ArrayRef, NullArray, UInt32Array};
use arrow_schema::DataType;
use std::sync::Arc;

/// Reads the payload of an RLE block that starts at byte `at`.
pub(super) fn read<'a>(
    c: &mut Cursor<'a>,
    at: usize,
    limit: usize,
    walk: Walk<'_>,
) -> Result<(usize, Kind<'a>)> {
    let rows = c.count("RLE row count", limit)?;
    let value = walk.child(c, 1)?;
    if value.rows != 1 {
        return Err(corrupt(format!(
            "the RLE block at byte {at} repeats {} rows",
            value.rows
        )));
    }
    Ok((
        rows,
        Kind::Rle(Rle {
            value: Box::new(value),
        }),
    ))
}

/// The block as `rows` copies of its value, an array of `data_type`.
pub(super) fn to_array(
    block: Rle<'_>,
    rows: usize,
    at: usize,
    data_type: &DataType,
    budget: &mut Budget,
    decode: Decode,
) -> Result<ArrayRef> {
    let value = decode(*block.value, data_type, budget)?;
    if let DataType::Null = data_type {
        return Ok(Arc::new(NullArray::new(rows)));
    }
    if rows == 1 {
        return Ok(value);
    }
    let row = row_costs(value.as_ref())[0];
    budget.spend(rows.saturating_mul(row + 4), || {
        format!("the RLE block at byte {at} ({rows} rows of {row} bytes)")
    })?;
    let zeros = UInt32Array::from(vec![0u32; rows]);
    Ok(arrow_select::take::take(value.as_ref(), &zeros, None)?)
}

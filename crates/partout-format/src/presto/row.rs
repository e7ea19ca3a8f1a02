//! ROW, a struct per row:
//!
//! ```text
//!  fields:i32  field blocks (the non-null rows only)  rows:i32
//!  offsets:i32[rows + 1] (non-null rows before each row)  nulls
//! ```

use super::block::{Decode, Kind, MAX_ROWS, Row, Walk, mismatch};
use super::budget::{Budget, row_costs};
use super::corrupt;
use super::cursor::Cursor;
use crate::Result;
use arrow_array::{ArrayRef, StructArray, UInt32Array, new_null_array};
use arrow_schema::DataType;
use std::sync::Arc;

/// Reads the payload of a ROW block that starts at byte `at`.
pub(super) fn read<'a>(
    c: &mut Cursor<'a>,
    at: usize,
    limit: usize,
    walk: Walk<'_>,
) -> Result<(usize, Kind<'a>)> {
    let count = c.count("field count", 1 << 16)?;
    let fields = (0..count)
        .map(|_| walk.child(c, MAX_ROWS))
        .collect::<Result<Vec<_>>>()?;
    let rows = c.count("row count", limit.min(c.remaining() / 4))?;
    let valid_rows = fields.first().map(|f| f.rows);
    if fields.iter().any(|f| Some(f.rows) != valid_rows) {
        return Err(corrupt(format!(
            "the ROW block at byte {at} has fields of different lengths"
        )));
    }
    let offsets = c.offsets(rows, valid_rows, "ROW offsets")?;
    let nulls = c.nulls(rows)?;
    // A valid row takes the next field entry, a null row none.
    for r in 0..rows {
        let step = offsets[r + 1] - offsets[r];
        let null = nulls.as_ref().is_some_and(|n| n.is_null(r));
        if step != i32::from(!null) {
            return Err(corrupt(format!(
                "the ROW block at byte {at}: row {r}'s offsets do not match its null flag"
            )));
        }
    }
    Ok((rows, Kind::Row(Row { fields, nulls })))
}

/// The block as a struct array of `data_type`, each field spread over the rows (nulls under
/// null rows).
pub(super) fn to_array(
    block: Row<'_>,
    rows: usize,
    at: usize,
    data_type: &DataType,
    budget: &mut Budget,
    decode: Decode,
) -> Result<ArrayRef> {
    let DataType::Struct(fields) = data_type else {
        return Err(mismatch("ROW", data_type, at));
    };
    if block.fields.len() != fields.len() {
        return Err(corrupt(format!(
            "the ROW block at byte {at} has {} fields, the type {}",
            block.fields.len(),
            fields.len()
        )));
    }
    let children = block
        .fields
        .into_iter()
        .zip(fields.iter())
        .map(|(b, f)| decode(b, f.data_type(), budget))
        .collect::<Result<Vec<_>>>()?;
    let children = match &block.nulls {
        // Every row valid: each field already holds a value per row.
        None => children,
        Some(nulls) => {
            let mut bytes = rows.saturating_mul(4);
            for child in &children {
                let null_row = row_costs(new_null_array(child.data_type(), 1).as_ref())[0];
                let valid: usize = row_costs(child.as_ref()).iter().sum();
                bytes = bytes
                    .saturating_add(valid)
                    .saturating_add(nulls.null_count().saturating_mul(null_row));
            }
            budget.spend(bytes, || {
                format!(
                    "the ROW block at byte {at} ({rows} rows, {} null, {} fields)",
                    nulls.null_count(),
                    children.len()
                )
            })?;
            let mut next = 0u32;
            let indices: UInt32Array = (0..rows)
                .map(|r| {
                    nulls.is_valid(r).then(|| {
                        next += 1;
                        next - 1
                    })
                })
                .collect();
            children
                .iter()
                .map(|f| arrow_select::take::take(f.as_ref(), &indices, None))
                .collect::<std::result::Result<Vec<_>, _>>()?
        }
    };
    Ok(Arc::new(StructArray::try_new_with_length(
        fields.clone(),
        children,
        block.nulls,
        rows,
    )?))
}

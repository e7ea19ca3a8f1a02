//! DICTIONARY, rows as ids into a dictionary block:
//!
//! ```text
//!  rows:i32  dictionary block  ids:i32[rows]  dictionary id (24 bytes, ignored)
//! ```
//!
//! Presto has no null ids: a null row points at a null entry. Decoded as an Arrow dictionary
//! type, such rows get null keys; decoded as any other type, the rows are copied out of the
//! dictionary.

use super::block::{Decode, Dictionary, Kind, MAX_ROWS, Walk};
use super::budget::{Budget, row_costs};
use super::corrupt;
use super::cursor::{Cursor, le_i32s};
use crate::Result;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, PrimitiveArray, UInt32Array};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
use std::sync::Arc;

/// Reads the payload of a DICTIONARY block that starts at byte `at`.
pub(super) fn read<'a>(
    c: &mut Cursor<'a>,
    at: usize,
    limit: usize,
    walk: Walk<'_>,
) -> Result<(usize, Kind<'a>)> {
    let rows = c.count("dictionary row count", limit.min(c.remaining() / 4))?;
    let dictionary = walk.child(c, MAX_ROWS)?;
    let ids = c.take(rows * 4, "dictionary ids")?;
    let outside = |id: i32| usize::try_from(id).map_or(true, |id| id >= dictionary.rows);
    if let Some(id) = le_i32s(ids).find(|&id| outside(id)) {
        return Err(corrupt(format!(
            "dictionary id {id} at byte {at} outside a dictionary of {}",
            dictionary.rows
        )));
    }
    c.take(24, "dictionary id")?;
    Ok((
        rows,
        Kind::Dictionary(Dictionary {
            dictionary: Box::new(dictionary),
            ids,
        }),
    ))
}

/// The block as an array of `data_type`: an Arrow dictionary of the decoded dictionary, or its
/// rows copied out.
pub(super) fn to_array(
    block: Dictionary<'_>,
    rows: usize,
    at: usize,
    data_type: &DataType,
    budget: &mut Budget,
    decode: Decode,
) -> Result<ArrayRef> {
    let value_type = match data_type {
        DataType::Dictionary(_, value) => value.as_ref(),
        other => other,
    };
    let ids = UInt32Array::from_iter_values(block.ids());
    let dictionary = decode(*block.dictionary, value_type, budget)?;
    match data_type {
        DataType::Dictionary(key, _) => {
            let key_nulls = dictionary.logical_nulls().map(|entries| {
                NullBuffer::new(
                    ids.values()
                        .iter()
                        .map(|&id| entries.is_valid(id as usize))
                        .collect(),
                )
            });
            let ids = UInt32Array::new(ids.values().clone(), key_nulls);
            let keys = keys(&ids, key, at)?;
            Ok(arrow_array::make_array(
                keys.into_data()
                    .into_builder()
                    .data_type(data_type.clone())
                    .child_data(vec![dictionary.to_data()])
                    .build()?,
            ))
        }
        _ => {
            let costs = row_costs(dictionary.as_ref());
            let bytes = ids.values().iter().fold(0usize, |sum, &id| {
                sum.saturating_add(costs[id as usize] + 4)
            });
            budget.spend(bytes, || {
                format!("the DICTIONARY block at byte {at} ({rows} rows)")
            })?;
            Ok(arrow_select::take::take(dictionary.as_ref(), &ids, None)?)
        }
    }
}

/// The ids as keys of type `key`, when they fit.
fn keys(ids: &UInt32Array, key: &DataType, at: usize) -> Result<ArrayRef> {
    let fits = |max: u64| ids.values().iter().all(|&v| u64::from(v) <= max);
    let keys: ArrayRef = match key {
        DataType::Int8 if fits(i8::MAX as u64) => Arc::new(
            PrimitiveArray::<Int8Type>::from_iter_values(ids.values().iter().map(|&v| v as i8)),
        ),
        DataType::Int16 if fits(i16::MAX as u64) => Arc::new(
            PrimitiveArray::<Int16Type>::from_iter_values(ids.values().iter().map(|&v| v as i16)),
        ),
        DataType::Int32 if fits(i32::MAX as u64) => Arc::new(
            PrimitiveArray::<Int32Type>::from_iter_values(ids.values().iter().map(|&v| v as i32)),
        ),
        DataType::Int64 => Arc::new(PrimitiveArray::<Int64Type>::from_iter_values(
            ids.values().iter().map(|&v| i64::from(v)),
        )),
        DataType::UInt8 if fits(u8::MAX as u64) => Arc::new(
            PrimitiveArray::<UInt8Type>::from_iter_values(ids.values().iter().map(|&v| v as u8)),
        ),
        DataType::UInt16 if fits(u16::MAX as u64) => Arc::new(
            PrimitiveArray::<UInt16Type>::from_iter_values(ids.values().iter().map(|&v| v as u16)),
        ),
        DataType::UInt32 => Arc::new(ids.clone()),
        DataType::UInt64 => Arc::new(PrimitiveArray::<UInt64Type>::from_iter_values(
            ids.values().iter().map(|&v| u64::from(v)),
        )),
        other => {
            return Err(corrupt(format!(
                "the DICTIONARY block at byte {at} has ids that do not fit {other} keys"
            )));
        }
    };
    let with_nulls = keys
        .into_data()
        .into_builder()
        .nulls(ids.nulls().cloned())
        .build()?;
    Ok(arrow_array::make_array(with_nulls))
}

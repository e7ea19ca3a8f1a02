//! MAP, a map per row:
//!
//! ```text
//!  keys block  values block  hash_table_length:i32  hash_table:i32[hash_table_length]
//!  rows:i32  offsets:i32[rows + 1] (from 0 up to the entries)  nulls
//! ```
//!
//! The hash table length is -1 when there is none (partout and Velox write none); when there
//! is one, Presto requires two slots per entry. Its contents are skipped.

use super::block::{Decode, Kind, MAX_ROWS, Map, Walk, mismatch};
use super::budget::Budget;
use super::corrupt;
use super::cursor::Cursor;
use crate::Result;
use arrow_array::{ArrayRef, MapArray, StructArray};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::DataType;
use std::sync::Arc;

/// Reads the payload of a MAP block that starts at byte `at`.
pub(super) fn read<'a>(
    c: &mut Cursor<'a>,
    at: usize,
    limit: usize,
    walk: Walk<'_>,
) -> Result<(usize, Kind<'a>)> {
    let keys = walk.child(c, MAX_ROWS)?;
    let values = walk.child(c, MAX_ROWS)?;
    if keys.rows != values.rows {
        return Err(corrupt(format!(
            "the MAP block at byte {at} has {} keys and {} values",
            keys.rows, values.rows
        )));
    }
    let hash_at = c.at();
    let hash = c.i32("hash table length")?;
    if hash != -1 {
        if usize::try_from(hash).ok() != Some(keys.rows * 2) {
            return Err(corrupt(format!(
                "hash table length {hash} at byte {hash_at} in the MAP block at byte {at} \
                 (-1, or two per entry: {})",
                keys.rows * 2
            )));
        }
        c.take(keys.rows * 2 * 4, "hash table")?;
    }
    let rows = c.count("row count", limit.min(c.remaining() / 4))?;
    let offsets = c.offsets(rows, Some(keys.rows), "MAP offsets")?;
    let nulls = c.nulls(rows)?;
    Ok((
        rows,
        Kind::Map(Map {
            keys: Box::new(keys),
            values: Box::new(values),
            offsets,
            nulls,
        }),
    ))
}

/// The block as a map array of `data_type`.
pub(super) fn to_array(
    block: Map<'_>,
    at: usize,
    data_type: &DataType,
    budget: &mut Budget,
    decode: Decode,
) -> Result<ArrayRef> {
    let DataType::Map(entries, sorted) = data_type else {
        return Err(mismatch("MAP", data_type, at));
    };
    let DataType::Struct(kv) = entries.data_type() else {
        return Err(mismatch("MAP", data_type, at));
    };
    if kv.len() != 2 {
        return Err(mismatch("MAP", data_type, at));
    }
    let Map {
        keys,
        values,
        offsets,
        nulls,
    } = block;
    let keys = decode(*keys, kv[0].data_type(), budget)?;
    let values = decode(*values, kv[1].data_type(), budget)?;
    let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
    Ok(Arc::new(MapArray::try_new(
        entries.clone(),
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        entries_array,
        nulls,
        *sorted,
    )?))
}

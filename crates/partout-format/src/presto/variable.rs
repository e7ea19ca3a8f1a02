//! VARIABLE_WIDTH, Presto's strings and binaries:
//!
//! ```text
//!  rows:i32  end_offsets:i32[rows]  nulls  total:i32  bytes[total]
//! ```

use super::block::{Kind, Variable, mismatch};
use super::corrupt;
use super::cursor::{Cursor, le_i32s};
use crate::Result;
use arrow_array::types::*;
use arrow_array::{ArrayRef, FixedSizeBinaryArray, GenericByteArray, GenericByteViewArray};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::DataType;
use std::sync::Arc;

/// Reads the payload of a VARIABLE_WIDTH block that starts at byte `at`.
pub(super) fn read<'a>(c: &mut Cursor<'a>, at: usize, limit: usize) -> Result<(usize, Kind<'a>)> {
    let rows = c.count("row count", limit.min(c.remaining() / 4))?;
    let ends = c.take(rows * 4, "end offsets")?;
    let nulls = c.nulls(rows)?;
    let total = c.count("total length", c.remaining())?;
    let data = c.take(total, "values")?;
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0i32);
    offsets.extend(le_i32s(ends));
    if offsets.windows(2).any(|w| w[0] > w[1]) || offsets[rows] as usize != total {
        return Err(corrupt(format!(
            "the VARIABLE_WIDTH block at byte {at} has offsets that do not run up to {total}"
        )));
    }
    Ok((
        rows,
        Kind::Variable(Variable {
            offsets,
            nulls,
            data,
        }),
    ))
}

/// The block as an array of `data_type`: a string (checked to be UTF-8), binary or
/// fixed-size binary type.
pub(super) fn to_array(block: Variable<'_>, at: usize, data_type: &DataType) -> Result<ArrayRef> {
    let Variable {
        offsets,
        nulls,
        data,
    } = block;
    let offsets32 = OffsetBuffer::new(ScalarBuffer::from(offsets.clone()));
    let offsets64 = || {
        OffsetBuffer::new(ScalarBuffer::from(
            offsets.iter().map(|&o| i64::from(o)).collect::<Vec<_>>(),
        ))
    };
    let buffer = arrow_buffer::Buffer::from_slice_ref(data);
    let array: ArrayRef = match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let s = std::str::from_utf8(data).map_err(|e| {
                corrupt(format!(
                    "the VARIABLE_WIDTH block at byte {at} is not UTF-8 for {data_type}: {e}"
                ))
            })?;
            // Whole values of valid UTF-8: each value boundary must be a char boundary too.
            if offsets.iter().any(|&o| !s.is_char_boundary(o as usize)) {
                return Err(corrupt(format!(
                    "the VARIABLE_WIDTH block at byte {at} splits a character between values"
                )));
            }
            match data_type {
                DataType::Utf8 => Arc::new(GenericByteArray::<Utf8Type>::try_new(
                    offsets32, buffer, nulls,
                )?),
                DataType::LargeUtf8 => Arc::new(GenericByteArray::<LargeUtf8Type>::try_new(
                    offsets64(),
                    buffer,
                    nulls,
                )?),
                _ => {
                    let array = GenericByteArray::<Utf8Type>::try_new(offsets32, buffer, nulls)?;
                    Arc::new(GenericByteViewArray::<StringViewType>::from(&array))
                }
            }
        }
        DataType::Binary => Arc::new(GenericByteArray::<BinaryType>::try_new(
            offsets32, buffer, nulls,
        )?),
        DataType::LargeBinary => Arc::new(GenericByteArray::<LargeBinaryType>::try_new(
            offsets64(),
            buffer,
            nulls,
        )?),
        DataType::BinaryView => {
            let array = GenericByteArray::<BinaryType>::try_new(offsets32, buffer, nulls)?;
            Arc::new(GenericByteViewArray::<BinaryViewType>::from(&array))
        }
        DataType::FixedSizeBinary(width) => {
            let width = *width;
            let valid = |r: usize| nulls.as_ref().is_none_or(|n| n.is_valid(r));
            let ok = offsets
                .windows(2)
                .enumerate()
                .all(|(r, w)| w[1] - w[0] == if valid(r) { width } else { 0 });
            if !ok {
                return Err(mismatch("VARIABLE_WIDTH", data_type, at));
            }
            let values = (0..offsets.len() - 1)
                .map(|r| valid(r).then(|| &data[offsets[r] as usize..offsets[r + 1] as usize]));
            Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                values, width,
            )?)
        }
        other => return Err(mismatch("VARIABLE_WIDTH", other, at)),
    };
    Ok(array)
}

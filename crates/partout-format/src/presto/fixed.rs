//! The fixed-width encodings, BYTE_ARRAY, SHORT_ARRAY, INT_ARRAY, LONG_ARRAY and INT128_ARRAY:
//!
//! ```text
//!  rows:i32  nulls  values (width bytes for each non-null row, in row order)
//! ```

use super::block::{Fixed, Kind, mismatch};
use super::cursor::Cursor;
use crate::Result;
use arrow_array::types::*;
use arrow_array::{ArrayRef, BooleanArray, NullArray, PrimitiveArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, TimeUnit};
use std::sync::Arc;

/// Reads the payload of a block of fixed-width encoding `name`.
pub(super) fn read<'a>(c: &mut Cursor<'a>, name: &str, limit: usize) -> Result<(usize, Kind<'a>)> {
    let width = super::fixed_width(name).expect("a fixed-width encoding");
    // At least one bit per row must be there.
    let rows = c.count("row count", limit.min(c.remaining().saturating_mul(8)))?;
    let nulls = c.nulls(rows)?;
    let valid = rows - nulls.as_ref().map_or(0, |n| n.null_count());
    let values = c.take(valid * width, "values")?;
    Ok((
        rows,
        Kind::Fixed(Fixed {
            width,
            nulls,
            values,
        }),
    ))
}

/// The block as an array of `data_type`, when that type has the block's width.
pub(super) fn to_array(
    block: Fixed<'_>,
    rows: usize,
    at: usize,
    data_type: &DataType,
) -> Result<ArrayRef> {
    let Fixed {
        width,
        nulls,
        values: packed,
    } = block;
    // Values at their rows, zeros under nulls.
    let values = match &nulls {
        None => packed.to_vec(),
        Some(nulls) => {
            let mut values = vec![0u8; rows * width];
            for (r, v) in nulls.valid_indices().zip(packed.chunks_exact(width)) {
                values[r * width..(r + 1) * width].copy_from_slice(v);
            }
            values
        }
    };
    let name = super::FIXED[width.trailing_zeros() as usize];
    fixed_array(&values, width, rows, nulls, data_type).ok_or_else(|| mismatch(name, data_type, at))
}

/// A fixed-width array of `data_type` from `len` values of `width` bytes (zeros under nulls);
/// `None` when the type does not use that width.
fn fixed_array(
    values: &[u8],
    width: usize,
    len: usize,
    nulls: Option<NullBuffer>,
    data_type: &DataType,
) -> Option<ArrayRef> {
    fn each<const W: usize>(values: &[u8]) -> impl Iterator<Item = [u8; W]> + '_ {
        values
            .chunks_exact(W)
            .map(|c| c.try_into().expect("W bytes"))
    }
    fn prim<T: arrow_array::ArrowPrimitiveType>(
        values: impl Iterator<Item = T::Native>,
        nulls: Option<NullBuffer>,
        data_type: &DataType,
    ) -> ArrayRef {
        Arc::new(
            PrimitiveArray::<T>::new(values.collect(), nulls).with_data_type(data_type.clone()),
        )
    }
    let array: ArrayRef = match (width, data_type) {
        (1, DataType::Null) => {
            if nulls.as_ref().map_or(0, |n| n.null_count()) != len {
                return None;
            }
            Arc::new(NullArray::new(len))
        }
        (1, DataType::Boolean) => Arc::new(BooleanArray::new(
            values.iter().map(|&b| b != 0).collect(),
            nulls,
        )),
        (1, DataType::Int8) => {
            prim::<Int8Type>(each::<1>(values).map(i8::from_le_bytes), nulls, data_type)
        }
        (2, DataType::Int16) => {
            prim::<Int16Type>(each::<2>(values).map(i16::from_le_bytes), nulls, data_type)
        }
        (4, DataType::Int32) => {
            prim::<Int32Type>(each::<4>(values).map(i32::from_le_bytes), nulls, data_type)
        }
        (4, DataType::Date32) => {
            prim::<Date32Type>(each::<4>(values).map(i32::from_le_bytes), nulls, data_type)
        }
        (4, DataType::Float32) => prim::<Float32Type>(
            each::<4>(values).map(|b| f32::from_bits(u32::from_le_bytes(b))),
            nulls,
            data_type,
        ),
        (8, DataType::Int64) => {
            prim::<Int64Type>(each::<8>(values).map(i64::from_le_bytes), nulls, data_type)
        }
        (8, DataType::Float64) => prim::<Float64Type>(
            each::<8>(values).map(|b| f64::from_bits(u64::from_le_bytes(b))),
            nulls,
            data_type,
        ),
        (8, DataType::Timestamp(unit, _)) => {
            let ms = each::<8>(values).map(i64::from_le_bytes);
            let scaled = ms.map(|v| match unit {
                TimeUnit::Second => v.div_euclid(1000),
                TimeUnit::Millisecond => v,
                TimeUnit::Microsecond => v.saturating_mul(1000),
                TimeUnit::Nanosecond => v.saturating_mul(1_000_000),
            });
            match unit {
                TimeUnit::Second => prim::<TimestampSecondType>(scaled, nulls, data_type),
                TimeUnit::Millisecond => prim::<TimestampMillisecondType>(scaled, nulls, data_type),
                TimeUnit::Microsecond => prim::<TimestampMicrosecondType>(scaled, nulls, data_type),
                TimeUnit::Nanosecond => prim::<TimestampNanosecondType>(scaled, nulls, data_type),
            }
        }
        (8, DataType::Decimal64(_, _)) => {
            prim::<Decimal64Type>(each::<8>(values).map(i64::from_le_bytes), nulls, data_type)
        }
        (8, DataType::Decimal128(p, _)) if *p <= 18 => prim::<Decimal128Type>(
            each::<8>(values).map(|b| i128::from(i64::from_le_bytes(b))),
            nulls,
            data_type,
        ),
        (16, DataType::Decimal128(p, _)) if *p > 18 => prim::<Decimal128Type>(
            each::<16>(values).map(|b| {
                let low = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                let high = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
                let magnitude = (u128::from(high & !(1 << 63)) << 64 | u128::from(low)) as i128;
                if high >> 63 == 1 {
                    magnitude.wrapping_neg()
                } else {
                    magnitude
                }
            }),
            nulls,
            data_type,
        ),
        _ => return None,
    };
    Some(array)
}

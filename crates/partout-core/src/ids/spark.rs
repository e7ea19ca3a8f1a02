//! Spark's `HashPartitioning`, bit for bit: Murmur3_x86_32 with seed 42, chained over the key
//! columns (`h = hash(column_i, seed = h)`), a null leaving the running hash unchanged, and
//! the destination `pmod(h, n)`.
//!
//! Per Arrow type, the value Spark would hash:
//!
//! | Arrow | Spark type | hashed as |
//! |---|---|---|
//! | Boolean | boolean | `hashInt(0 or 1)` |
//! | Int8, Int16, Int32, UInt8, UInt16 | byte, short, int | `hashInt` of the value widened to int |
//! | Date32, Date64 | date (days) | `hashInt(days)` (Date64 floored to days) |
//! | Int64, UInt32 | long | `hashLong` of the value widened to long |
//! | Timestamp, any unit or zone | timestamp (µs) | `hashLong` of microseconds (floored) |
//! | Duration, any unit | day-time interval (µs) | `hashLong` of microseconds (floored) |
//! | Float32 / Float64 | float / double | `hashInt(floatToIntBits)` / `hashLong(doubleToLongBits)`, -0.0 as 0.0, every NaN canonical |
//! | Decimal32/64/128/256, precision ≤ 18 | decimal | `hashLong(unscaled)` |
//! | Decimal128/256, precision > 18 | decimal | `hashUnsafeBytes` of the unscaled value's minimal big-endian two's complement |
//! | Utf8, LargeUtf8, Utf8View, Binary, LargeBinary, BinaryView, FixedSizeBinary | string / binary | `hashUnsafeBytes` |
//! | Dictionary | its value type | as its values |
//! | List, LargeList, FixedSizeList | array | chained over the elements, null elements skipped |
//! | Struct | struct | chained over the fields |
//!
//! Anything else (unsigned 64-bit integers, times of day, maps, unions, ...) has no Spark
//! hash and is refused when the partitioning is built.

use super::{double_bits, float_bits};
use crate::error::{PartoutError, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::ByteArrayType;
use arrow_array::types::*;
use arrow_array::{Array, ArrowPrimitiveType, GenericByteArray, OffsetSizeTrait, PrimitiveArray};
use arrow_buffer::{ArrowNativeType, i256};
use arrow_schema::{DataType, TimeUnit};

/// Spark's seed for `hash()` and `HashPartitioning`.
pub const SEED: u32 = 42;

const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

#[inline(always)]
fn mix_k1(k: u32) -> u32 {
    k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2)
}

#[inline(always)]
fn mix_h1(h: u32, k: u32) -> u32 {
    (h ^ k)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

#[inline(always)]
fn fmix(h: u32, len: u32) -> u32 {
    let mut h = h ^ len;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Spark's `hashInt`.
#[inline(always)]
pub fn hash_int(value: i32, seed: u32) -> u32 {
    fmix(mix_h1(seed, mix_k1(value as u32)), 4)
}

/// Spark's `hashLong`: the low 32 bits, then the high 32 bits.
#[inline(always)]
pub fn hash_long(value: i64, seed: u32) -> u32 {
    let v = value as u64;
    let h = mix_h1(seed, mix_k1(v as u32));
    fmix(mix_h1(h, mix_k1((v >> 32) as u32)), 8)
}

/// Spark's `hashUnsafeBytes`: little-endian 4-byte words, then each tail byte on its own,
/// sign-extended (not standard Murmur3's tail).
pub fn hash_bytes(bytes: &[u8], seed: u32) -> u32 {
    let mut h = seed;
    let mut words = bytes.chunks_exact(4);
    for word in &mut words {
        h = mix_h1(
            h,
            mix_k1(u32::from_le_bytes(word.try_into().expect("4 bytes"))),
        );
    }
    for &byte in words.remainder() {
        h = mix_h1(h, mix_k1(byte as i8 as i32 as u32));
    }
    fmix(h, bytes.len() as u32)
}

/// Java's `BigInteger.toByteArray()`: big-endian two's complement, as short as possible (at
/// least one byte).
fn minimal_be(bytes: &[u8]) -> &[u8] {
    let mut start = 0;
    while start + 1 < bytes.len() {
        let (b, next) = (bytes[start], bytes[start + 1]);
        if (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    &bytes[start..]
}

fn micros_per(unit: &TimeUnit) -> (i64, i64) {
    // (multiply, floor-divide) to reach microseconds.
    match unit {
        TimeUnit::Second => (1_000_000, 1),
        TimeUnit::Millisecond => (1_000, 1),
        TimeUnit::Microsecond => (1, 1),
        TimeUnit::Nanosecond => (1, 1_000),
    }
}

/// Checks that `data_type` has a Spark hash.
///
/// # Errors
/// [`PartoutError::UnsupportedType`] naming the type (or the nested type) that has none.
pub fn check_type(data_type: &DataType) -> Result<()> {
    use DataType::*;
    let ok = match data_type {
        Null
        | Boolean
        | Int8
        | Int16
        | Int32
        | Int64
        | UInt8
        | UInt16
        | UInt32
        | Float32
        | Float64
        | Date32
        | Date64
        | Timestamp(_, _)
        | Duration(_)
        | Utf8
        | LargeUtf8
        | Utf8View
        | Binary
        | LargeBinary
        | BinaryView
        | FixedSizeBinary(_) => true,
        Decimal32(_, _) | Decimal64(_, _) | Decimal128(_, _) | Decimal256(_, _) => true,
        Dictionary(_, value) => return check_type(value),
        List(f) | LargeList(f) | FixedSizeList(f, _) => return check_type(f.data_type()),
        Struct(fields) => return fields.iter().try_for_each(|f| check_type(f.data_type())),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(PartoutError::UnsupportedType {
            data_type: data_type.clone(),
            context: "the spark hash (Spark has no hash for it)",
        })
    }
}

/// Folds `column` into the running hashes: `hashes[i] = hash(column[i], hashes[i])` where
/// the row is valid, unchanged where it is null.
///
/// Every type runs a columnar loop (a struct's fields each their own) except the list types,
/// whose elements, and the values of dictionaries, go through [`row_hash`] one value at a
/// time.
///
/// # Errors
/// [`PartoutError::UnsupportedType`] for a type [`check_type`] refuses.
///
/// # Panics
/// If `hashes` and `column` differ in length.
pub fn update(column: &dyn Array, hashes: &mut [u32]) -> Result<()> {
    assert_eq!(column.len(), hashes.len(), "one running hash per row");
    check_type(column.data_type())?;
    use DataType::*;
    match column.data_type() {
        Null => {}
        Int8 => ints(column.as_primitive::<Int8Type>(), hashes, |v| v as i32),
        Int16 => ints(column.as_primitive::<Int16Type>(), hashes, |v| v as i32),
        Int32 => ints(column.as_primitive::<Int32Type>(), hashes, |v| v),
        UInt8 => ints(column.as_primitive::<UInt8Type>(), hashes, |v| v as i32),
        UInt16 => ints(column.as_primitive::<UInt16Type>(), hashes, |v| v as i32),
        Date32 => ints(column.as_primitive::<Date32Type>(), hashes, |v| v),
        Int64 => longs(column.as_primitive::<Int64Type>(), hashes, |v| v),
        UInt32 => longs(column.as_primitive::<UInt32Type>(), hashes, |v| v as i64),
        Float32 => ints(column.as_primitive::<Float32Type>(), hashes, float_bits),
        Float64 => longs(column.as_primitive::<Float64Type>(), hashes, double_bits),
        Date64 => ints(column.as_primitive::<Date64Type>(), hashes, |millis| {
            millis.div_euclid(86_400_000) as i32
        }),
        Decimal32(..) => longs(column.as_primitive::<Decimal32Type>(), hashes, i64::from),
        Decimal64(..) => longs(column.as_primitive::<Decimal64Type>(), hashes, |v| v),
        Decimal128(p, _) if *p <= 18 => {
            longs(column.as_primitive::<Decimal128Type>(), hashes, |v| {
                v as i64
            })
        }
        Decimal128(..) => fold_values(column.as_primitive::<Decimal128Type>(), hashes, |v, h| {
            hash_bytes(minimal_be(&v.to_be_bytes()), h)
        }),
        Decimal256(p, _) if *p <= 18 => {
            longs(column.as_primitive::<Decimal256Type>(), hashes, |v| {
                v.as_i128() as i64
            })
        }
        Decimal256(..) => fold_values(column.as_primitive::<Decimal256Type>(), hashes, |v, h| {
            hash_bytes(minimal_be(&v.to_be_bytes()), h)
        }),
        FixedSizeBinary(_) => {
            let values = column.as_fixed_size_binary();
            for_each_valid(column, hashes, |i, h| hash_bytes(values.value(i), h));
        }
        Struct(_) => {
            // Spark chains over the fields, skipping null ones, and a null struct leaves the
            // hash as it is: fold every field in, then put back the null rows' hashes.
            let array = column.as_struct();
            let kept: Vec<(usize, u32)> = match array.nulls().filter(|n| n.null_count() > 0) {
                Some(nulls) => nulls
                    .iter()
                    .zip(hashes.iter())
                    .enumerate()
                    .filter(|(_, (valid, _))| !valid)
                    .map(|(i, (_, &h))| (i, h))
                    .collect(),
                None => Vec::new(),
            };
            for field in array.columns() {
                update(field.as_ref(), hashes)?;
            }
            for (i, h) in kept {
                hashes[i] = h;
            }
        }
        Timestamp(unit, _) | Duration(unit) => {
            // Every timestamp and duration type stores an i64: read the buffer once.
            let raw = i64_values(column);
            let (mul, div) = micros_per(unit);
            for_each_valid(column, hashes, |i, h| {
                hash_long(raw[i].wrapping_mul(mul).div_euclid(div), h)
            });
        }
        Boolean => {
            let values = column.as_boolean();
            for_each_valid(column, hashes, |i, h| {
                hash_int(i32::from(values.value(i)), h)
            });
        }
        Utf8 => bytes(column.as_string::<i32>(), hashes),
        LargeUtf8 => bytes(column.as_string::<i64>(), hashes),
        Binary => bytes(column.as_binary::<i32>(), hashes),
        LargeBinary => bytes(column.as_binary::<i64>(), hashes),
        Utf8View => {
            let values = column.as_string_view();
            for_each_valid(column, hashes, |i, h| {
                hash_bytes(values.value(i).as_bytes(), h)
            });
        }
        BinaryView => {
            let values = column.as_binary_view();
            for_each_valid(column, hashes, |i, h| hash_bytes(values.value(i), h));
        }
        // An empty dictionary: every key is null, and nulls leave Spark's hash as it is.
        Dictionary(_, _) if column.as_any_dictionary().values().is_empty() => {}
        Dictionary(_, _) => {
            let dictionary = column.as_any_dictionary();
            let keys = dictionary.normalized_keys();
            let values = dictionary.values().as_ref();
            let key_nulls = dictionary.keys().nulls().filter(|n| n.null_count() > 0);
            let valid =
                |i: usize| key_nulls.is_none_or(|n| n.is_valid(i)) && values.is_valid(keys[i]);
            if hashes.iter().all(|&h| h == SEED) {
                // Every row still has the initial seed (the first key column): hash each
                // dictionary value once and gather through the keys.
                let value_hashes: Vec<u32> = (0..values.len())
                    .map(|v| {
                        if values.is_valid(v) {
                            row_hash(values, v, SEED)
                        } else {
                            SEED
                        }
                    })
                    .collect();
                for (i, h) in hashes.iter_mut().enumerate() {
                    if valid(i) {
                        *h = value_hashes[keys[i]];
                    }
                }
            } else {
                // Each row hashes its value with its own running hash as the seed.
                for (i, h) in hashes.iter_mut().enumerate() {
                    if valid(i) {
                        *h = row_hash(values, keys[i], *h);
                    }
                }
            }
        }
        _ => for_each_valid(column, hashes, |i, h| row_hash(column, i, h)),
    }
    Ok(())
}

/// Spark's hash of row `row` of `column` with seed `seed`; the row must be valid and the
/// type accepted by [`check_type`]. The reference for every type, one value at a time.
pub fn row_hash(column: &dyn Array, row: usize, seed: u32) -> u32 {
    use DataType::*;
    debug_assert!(column.is_valid(row));
    let chain = |elements: &dyn Array, seed: u32| {
        (0..elements.len())
            .filter(|&j| elements.is_valid(j))
            .fold(seed, |h, j| row_hash(elements, j, h))
    };
    match column.data_type() {
        Null => seed,
        Boolean => hash_int(i32::from(column.as_boolean().value(row)), seed),
        Int8 => hash_int(column.as_primitive::<Int8Type>().value(row) as i32, seed),
        Int16 => hash_int(column.as_primitive::<Int16Type>().value(row) as i32, seed),
        Int32 => hash_int(column.as_primitive::<Int32Type>().value(row), seed),
        UInt8 => hash_int(column.as_primitive::<UInt8Type>().value(row) as i32, seed),
        UInt16 => hash_int(column.as_primitive::<UInt16Type>().value(row) as i32, seed),
        Date32 => hash_int(column.as_primitive::<Date32Type>().value(row), seed),
        Date64 => {
            let millis = column.as_primitive::<Date64Type>().value(row);
            hash_int(millis.div_euclid(86_400_000) as i32, seed)
        }
        Int64 => hash_long(column.as_primitive::<Int64Type>().value(row), seed),
        UInt32 => hash_long(column.as_primitive::<UInt32Type>().value(row) as i64, seed),
        Float32 => hash_int(
            float_bits(column.as_primitive::<Float32Type>().value(row)),
            seed,
        ),
        Float64 => hash_long(
            double_bits(column.as_primitive::<Float64Type>().value(row)),
            seed,
        ),
        Timestamp(unit, _) | Duration(unit) => {
            // Every timestamp and duration type stores an i64.
            let raw = i64_values(column)[row];
            let (mul, div) = micros_per(unit);
            hash_long(raw.wrapping_mul(mul).div_euclid(div), seed)
        }
        Decimal32(..) => hash_long(
            column.as_primitive::<Decimal32Type>().value(row) as i64,
            seed,
        ),
        Decimal64(..) => hash_long(column.as_primitive::<Decimal64Type>().value(row), seed),
        Decimal128(p, _) => {
            let v = column.as_primitive::<Decimal128Type>().value(row);
            if *p <= 18 {
                hash_long(v as i64, seed)
            } else {
                hash_bytes(minimal_be(&v.to_be_bytes()), seed)
            }
        }
        Decimal256(p, _) => {
            let v: i256 = column.as_primitive::<Decimal256Type>().value(row);
            if *p <= 18 {
                hash_long(v.as_i128() as i64, seed)
            } else {
                hash_bytes(minimal_be(&v.to_be_bytes()), seed)
            }
        }
        Utf8 => hash_bytes(column.as_string::<i32>().value(row).as_bytes(), seed),
        LargeUtf8 => hash_bytes(column.as_string::<i64>().value(row).as_bytes(), seed),
        Utf8View => hash_bytes(column.as_string_view().value(row).as_bytes(), seed),
        Binary => hash_bytes(column.as_binary::<i32>().value(row), seed),
        LargeBinary => hash_bytes(column.as_binary::<i64>().value(row), seed),
        BinaryView => hash_bytes(column.as_binary_view().value(row), seed),
        FixedSizeBinary(_) => hash_bytes(column.as_fixed_size_binary().value(row), seed),
        Dictionary(_, _) => {
            let dictionary = column.as_any_dictionary();
            let key = dictionary.normalized_keys()[row];
            let values = dictionary.values();
            if values.is_valid(key) {
                row_hash(values.as_ref(), key, seed)
            } else {
                seed
            }
        }
        List(_) => chain(column.as_list::<i32>().value(row).as_ref(), seed),
        LargeList(_) => chain(column.as_list::<i64>().value(row).as_ref(), seed),
        FixedSizeList(_, _) => chain(column.as_fixed_size_list().value(row).as_ref(), seed),
        Struct(_) => column
            .as_struct()
            .columns()
            .iter()
            .filter(|field| field.is_valid(row))
            .fold(seed, |h, field| row_hash(field.as_ref(), row, h)),
        other => unreachable!("check_type refuses {other}"),
    }
}

/// `hashes[i] = f(values[i], hashes[i])` for a column without nulls: compiled for AVX2 too
/// and picked at run time, where the murmur steps vectorise eight rows at a time (baseline
/// SSE2 has no 32-bit multiply).
#[inline(always)]
fn dense<V: Copy>(hashes: &mut [u32], values: &[V], f: impl Fn(V, u32) -> u32) {
    #[inline(always)]
    fn each<V: Copy>(hashes: &mut [u32], values: &[V], f: impl Fn(V, u32) -> u32) {
        for (h, &v) in hashes.iter_mut().zip(values) {
            *h = f(v, *h);
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn each_avx2<V: Copy>(hashes: &mut [u32], values: &[V], f: impl Fn(V, u32) -> u32) {
            each(hashes, values, f);
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            unsafe { each_avx2(hashes, values, f) };
            return;
        }
    }
    each(hashes, values, f);
}

/// `hashInt` of every valid value, converted by `to_int`.
fn ints<T: ArrowPrimitiveType>(
    values: &PrimitiveArray<T>,
    hashes: &mut [u32],
    to_int: impl Fn(T::Native) -> i32,
) {
    fold_values(values, hashes, |v, h| hash_int(to_int(v), h));
}

/// `hashLong` of every valid value, converted by `to_long`.
fn longs<T: ArrowPrimitiveType>(
    values: &PrimitiveArray<T>,
    hashes: &mut [u32],
    to_long: impl Fn(T::Native) -> i64,
) {
    fold_values(values, hashes, |v, h| hash_long(to_long(v), h));
}

/// `hashes[i] = f(values[i], hashes[i])` for every valid row: the dense loop when there are
/// no nulls.
#[inline(always)]
fn fold_values<T: ArrowPrimitiveType>(
    values: &PrimitiveArray<T>,
    hashes: &mut [u32],
    f: impl Fn(T::Native, u32) -> u32,
) {
    match values.nulls().filter(|n| n.null_count() > 0) {
        None => dense(hashes, values.values(), f),
        Some(nulls) => {
            for ((h, &v), valid) in hashes
                .iter_mut()
                .zip(values.values().iter())
                .zip(nulls.iter())
            {
                if valid {
                    *h = f(v, *h);
                }
            }
        }
    }
}

fn bytes<T: ByteArrayType>(values: &GenericByteArray<T>, hashes: &mut [u32])
where
    T::Offset: OffsetSizeTrait,
{
    let offsets = values.value_offsets();
    let data = values.value_data();
    let hash_row =
        |i: usize, h: u32| hash_bytes(&data[offsets[i].as_usize()..offsets[i + 1].as_usize()], h);
    for_each_valid(values, hashes, hash_row);
}

/// `hashes[i] = f(i, hashes[i])` for every valid row.
fn for_each_valid(column: &dyn Array, hashes: &mut [u32], f: impl Fn(usize, u32) -> u32) {
    match column.nulls().filter(|n| n.null_count() > 0) {
        None => hashes
            .iter_mut()
            .enumerate()
            .for_each(|(i, h)| *h = f(i, *h)),
        Some(nulls) => {
            for (i, h) in hashes.iter_mut().enumerate() {
                if nulls.is_valid(i) {
                    *h = f(i, *h);
                }
            }
        }
    }
}

/// The values of a timestamp or duration column (every unit stores an `i64`), read without
/// building its `ArrayData` (which would allocate).
fn i64_values(column: &dyn Array) -> &[i64] {
    use arrow_array::types::*;
    use arrow_schema::TimeUnit::*;
    match column.data_type() {
        DataType::Timestamp(Second, _) => column.as_primitive::<TimestampSecondType>().values(),
        DataType::Timestamp(Millisecond, _) => {
            column.as_primitive::<TimestampMillisecondType>().values()
        }
        DataType::Timestamp(Microsecond, _) => {
            column.as_primitive::<TimestampMicrosecondType>().values()
        }
        DataType::Timestamp(Nanosecond, _) => {
            column.as_primitive::<TimestampNanosecondType>().values()
        }
        DataType::Duration(Second) => column.as_primitive::<DurationSecondType>().values(),
        DataType::Duration(Millisecond) => {
            column.as_primitive::<DurationMillisecondType>().values()
        }
        DataType::Duration(Microsecond) => {
            column.as_primitive::<DurationMicrosecondType>().values()
        }
        DataType::Duration(Nanosecond) => column.as_primitive::<DurationNanosecondType>().values(),
        other => unreachable!("{other} is not a timestamp or duration"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_vectors() {
        // Murmur3 of longs 1, 0, -1, MAX, MIN with seed 42, and their pmod 200.
        let longs = [1i64, 0, -1, i64::MAX, i64::MIN];
        let want = [
            0x99f0149du32,
            0x9c67b85d,
            0xc8008529,
            0xa05b5d7b,
            0xcd1e64fb,
        ];
        for (v, w) in longs.iter().zip(want) {
            assert_eq!(hash_long(*v, SEED), w, "{v}");
        }
        assert_eq!(hash_int(1, SEED), 0xdea578e3);
        assert_eq!(hash_bytes(b"", SEED), 142593372);
        assert_eq!(hash_bytes(b"hello", SEED), 3286402344);
        assert_eq!(hash_long(double_bits(-0.0), SEED), 0x9c67b85d);
    }

    #[test]
    fn minimal_two_complement_bytes() {
        assert_eq!(minimal_be(&0i128.to_be_bytes()), &[0x00]);
        assert_eq!(minimal_be(&128i128.to_be_bytes()), &[0x00, 0x80]);
        assert_eq!(minimal_be(&127i128.to_be_bytes()), &[0x7f]);
        assert_eq!(minimal_be(&(-1i128).to_be_bytes()), &[0xff]);
        assert_eq!(minimal_be(&(-128i128).to_be_bytes()), &[0x80]);
        assert_eq!(minimal_be(&(-129i128).to_be_bytes()), &[0xff, 0x7f]);
    }
}

//! partout's fast hash (`Partitioning::hash`, partout-core's `ids::hash`) written again the
//! plain way, as the independent reference the benchmarks' expected destinations come from:
//! one value of one row at a time, through arrow's own accessors, with its own arithmetic
//! (the 128-bit product built from 32-bit halves), sharing no code with partout-core.
//!
//! What it computes, from partout's documentation of its hash:
//!
//! * A row's hash is its first key's value hash; each further key is folded in:
//!   `h = mix(h ^ value, M)`, where `mix(a, b)` xors the high and low halves of the 128-bit
//!   product `a * b`. The destination is `((h >> 32) * n) >> 32`.
//! * A null (a null slot, a dictionary key or a run pointing at a null value, a union slot
//!   whose child is null, every value of the Null type) hashes to a fixed constant.
//! * Booleans and fixed-width values of up to 8 bytes hash their little-endian bits, zero
//!   extended to 64: `mix(v ^ X, M)`. Wider ones (16 and 32 bytes) xor, over each 16-byte
//!   part, the part's two-word hash rotated left by 17.
//! * Floats hash their bits with `-0.0` as `0.0` and every NaN as the one canonical NaN
//!   (Float16 as the Float32 it widens to).
//! * Strings and binary values of up to 12 bytes hash the 16 bytes of an Arrow view (the
//!   length, then the bytes, zero-padded) as two words, `mix(lo ^ X, hi ^ M)`; longer ones
//!   hash with XXH3 under a fixed seed (XXH3 from the xxhash-rust crate: a published hash,
//!   not partout's code).
//! * A list of any kind (and a map, a list of its entries) starts from its length hashed and
//!   folds in each element; a struct starts from a fixed constant and folds in each field; a
//!   union value folds its child's value into its type id hashed; a run-end encoded value is
//!   its run's value; a dictionary value is the value its key points at.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{ArrowError, DataType, IntervalUnit, TimeUnit};

/// The hash of a null.
const NULL: u64 = 0x1319_8a2e_0370_7344;
/// The multiplier of every mixing step.
const M: u64 = 0xa409_3822_299f_31d0;
/// Xored into a value before it is mixed.
const X: u64 = 0x243f_6a88_85a3_08d3;
/// XXH3's seed, for strings longer than 12 bytes.
const XXH3_SEED: u64 = 0x4528_21e6_38d0_1377;
/// The start of a struct's hash (and xored into a union's type id).
const STRUCT: u64 = 0x0801_f2e2_858e_fc16;

/// The high and low 64-bit halves of `a * b`, schoolbook from 32-bit halves.
fn wide_product(a: u64, b: u64) -> (u64, u64) {
    let (a_lo, a_hi) = (a & 0xffff_ffff, a >> 32);
    let (b_lo, b_hi) = (b & 0xffff_ffff, b >> 32);
    let (ll, lh, hl, hh) = (a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi);
    // The bits 32 to 95 of the product, before their carry into the high half.
    let middle = (ll >> 32) + (lh & 0xffff_ffff) + (hl & 0xffff_ffff);
    let low = (ll & 0xffff_ffff) | (middle << 32);
    let high = hh + (lh >> 32) + (hl >> 32) + (middle >> 32);
    (high, low)
}

/// The mixing step: the halves of the 128-bit product, xored.
fn mix(a: u64, b: u64) -> u64 {
    let (high, low) = wide_product(a, b);
    high ^ low
}

/// A 64-bit word's hash.
fn word(v: u64) -> u64 {
    mix(v ^ X, M)
}

/// Two words' hash (a 16-byte value, low word first).
fn two_words(lo: u64, hi: u64) -> u64 {
    mix(lo ^ X, hi ^ M)
}

/// A value's hash folded into the hash so far.
fn fold_in(h: u64, value: u64) -> u64 {
    mix(h ^ value, M)
}

/// The little-endian word of up to 8 bytes, zero-extended.
fn le_word(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .enumerate()
        .fold(0, |v, (i, &b)| v | u64::from(b) << (8 * i))
}

/// A string's or binary value's hash.
fn bytes_hash(bytes: &[u8]) -> u64 {
    if bytes.len() > 12 {
        return xxhash_rust::xxh3::xxh3_64_with_seed(bytes, XXH3_SEED);
    }
    // The 16 bytes of an inline Arrow view: the length (4 bytes), then the bytes, zeros after.
    let mut view = [0u8; 16];
    view[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    view[4..4 + bytes.len()].copy_from_slice(bytes);
    two_words(le_word(&view[..8]), le_word(&view[8..]))
}

/// A fixed-width value's hash from its little-endian bytes.
fn fixed_hash(bytes: &[u8]) -> u64 {
    if bytes.len() <= 8 {
        return word(le_word(bytes));
    }
    bytes.chunks(16).fold(0, |h, part| {
        let mut padded = [0u8; 16];
        padded[..part.len()].copy_from_slice(part);
        h ^ two_words(le_word(&padded[..8]), le_word(&padded[8..])).rotate_left(17)
    })
}

/// An f32's bits, with `-0.0` as `0.0` and every NaN the canonical one.
fn f32_bits(v: f32) -> u64 {
    if v.is_nan() {
        0x7fc0_0000
    } else if v == 0.0 {
        0
    } else {
        u64::from(v.to_bits())
    }
}

/// An f64's bits, with `-0.0` as `0.0` and every NaN the canonical one.
fn f64_bits(v: f64) -> u64 {
    if v.is_nan() {
        0x7ff8_0000_0000_0000
    } else if v == 0.0 {
        0
    } else {
        v.to_bits()
    }
}

/// The start of a list's hash: its length.
fn list_start(len: usize) -> u64 {
    word(len as u64 ^ M)
}

/// The hash of a list whose elements are the rows of `elements`.
fn list_hash(elements: &dyn Array) -> Result<u64, ArrowError> {
    let mut h = list_start(elements.len());
    for e in 0..elements.len() {
        h = fold_in(h, value_hash(elements, e)?);
    }
    Ok(h)
}

/// Row `i`'s key in a dictionary's keys, whatever their integer type (`None`: a null key).
fn dictionary_key(keys: &dyn Array, i: usize) -> Option<usize> {
    if keys.is_null(i) {
        return None;
    }
    Some(match keys.data_type() {
        DataType::Int8 => keys.as_primitive::<Int8Type>().value(i) as usize,
        DataType::Int16 => keys.as_primitive::<Int16Type>().value(i) as usize,
        DataType::Int32 => keys.as_primitive::<Int32Type>().value(i) as usize,
        DataType::Int64 => keys.as_primitive::<Int64Type>().value(i) as usize,
        DataType::UInt8 => keys.as_primitive::<UInt8Type>().value(i) as usize,
        DataType::UInt16 => keys.as_primitive::<UInt16Type>().value(i) as usize,
        DataType::UInt32 => keys.as_primitive::<UInt32Type>().value(i) as usize,
        _ => keys.as_primitive::<UInt64Type>().value(i) as usize,
    })
}

/// The row of a run-end encoded array's values that holds its row `i`.
fn run_of(array: &dyn Array, i: usize) -> usize {
    // The run ends count from the start of the unsliced array.
    fn find<R: RunEndIndexType>(array: &dyn Array, i: usize) -> usize {
        use arrow_buffer::ArrowNativeType;
        let runs = array.as_run::<R>();
        let logical = runs.offset() + i;
        let ends = runs.run_ends().values();
        ends.iter()
            .position(|&end| end.as_usize() > logical)
            .expect("a row inside the runs")
    }
    let DataType::RunEndEncoded(ends, _) = array.data_type() else {
        unreachable!("a run-end encoded array")
    };
    match ends.data_type() {
        DataType::Int16 => find::<Int16Type>(array, i),
        DataType::Int32 => find::<Int32Type>(array, i),
        _ => find::<Int64Type>(array, i),
    }
}

/// The values of a run-end encoded array.
fn run_values(array: &dyn Array) -> &dyn Array {
    match array.data_type() {
        DataType::RunEndEncoded(ends, _) => match ends.data_type() {
            DataType::Int16 => array.as_run::<Int16Type>().values().as_ref(),
            DataType::Int32 => array.as_run::<Int32Type>().values().as_ref(),
            _ => array.as_run::<Int64Type>().values().as_ref(),
        },
        _ => unreachable!("a run-end encoded array"),
    }
}

/// Whether row `i` of `array` is null as a value: its own slot null, or, for the types that
/// have no slots of their own, the value it stands for null.
fn is_null(array: &dyn Array, i: usize) -> bool {
    match array.data_type() {
        DataType::Null => true,
        DataType::Dictionary(_, _) => {
            let dictionary = array.as_any_dictionary();
            match dictionary_key(dictionary.keys(), i) {
                None => true,
                Some(k) => is_null(dictionary.values().as_ref(), k),
            }
        }
        DataType::RunEndEncoded(_, _) => is_null(run_values(array), run_of(array, i)),
        DataType::Union(_, _) => {
            let union = array.as_union();
            is_null(
                union.child(union.type_id(i)).as_ref(),
                union.value_offset(i),
            )
        }
        _ => array.is_null(i),
    }
}

/// The little-endian bytes of row `i` of a fixed-width column (`None`: not fixed-width).
fn le_bytes(array: &dyn Array, i: usize) -> Option<Vec<u8>> {
    macro_rules! of {
        ($t:ty) => {
            array.as_primitive::<$t>().value(i).to_le_bytes().to_vec()
        };
    }
    use DataType::*;
    Some(match array.data_type() {
        Int8 => of!(Int8Type),
        Int16 => of!(Int16Type),
        Int32 => of!(Int32Type),
        Int64 => of!(Int64Type),
        UInt8 => of!(UInt8Type),
        UInt16 => of!(UInt16Type),
        UInt32 => of!(UInt32Type),
        UInt64 => of!(UInt64Type),
        Date32 => of!(Date32Type),
        Date64 => of!(Date64Type),
        Time32(TimeUnit::Second) => of!(Time32SecondType),
        Time32(_) => of!(Time32MillisecondType),
        Time64(TimeUnit::Microsecond) => of!(Time64MicrosecondType),
        Time64(_) => of!(Time64NanosecondType),
        Timestamp(TimeUnit::Second, _) => of!(TimestampSecondType),
        Timestamp(TimeUnit::Millisecond, _) => of!(TimestampMillisecondType),
        Timestamp(TimeUnit::Microsecond, _) => of!(TimestampMicrosecondType),
        Timestamp(TimeUnit::Nanosecond, _) => of!(TimestampNanosecondType),
        Duration(TimeUnit::Second) => of!(DurationSecondType),
        Duration(TimeUnit::Millisecond) => of!(DurationMillisecondType),
        Duration(TimeUnit::Microsecond) => of!(DurationMicrosecondType),
        Duration(TimeUnit::Nanosecond) => of!(DurationNanosecondType),
        Interval(IntervalUnit::YearMonth) => of!(IntervalYearMonthType),
        Interval(IntervalUnit::DayTime) => {
            let v = array.as_primitive::<IntervalDayTimeType>().value(i);
            [v.days.to_le_bytes(), v.milliseconds.to_le_bytes()].concat()
        }
        Interval(IntervalUnit::MonthDayNano) => {
            let v = array.as_primitive::<IntervalMonthDayNanoType>().value(i);
            [
                &v.months.to_le_bytes()[..],
                &v.days.to_le_bytes(),
                &v.nanoseconds.to_le_bytes(),
            ]
            .concat()
        }
        Decimal32(_, _) => of!(Decimal32Type),
        Decimal64(_, _) => of!(Decimal64Type),
        Decimal128(_, _) => of!(Decimal128Type),
        Decimal256(_, _) => of!(Decimal256Type),
        _ => return None,
    })
}

/// The hash of row `i` of `array` alone (partout's value hash).
///
/// # Errors
/// For a type partout's fast hash does not take.
pub fn value_hash(array: &dyn Array, i: usize) -> Result<u64, ArrowError> {
    use DataType::*;
    if is_null(array, i) {
        return Ok(NULL);
    }
    Ok(match array.data_type() {
        Boolean => word(u64::from(array.as_boolean().value(i))),
        Float16 => word(f32_bits(
            array.as_primitive::<Float16Type>().value(i).to_f32(),
        )),
        Float32 => word(f32_bits(array.as_primitive::<Float32Type>().value(i))),
        Float64 => word(f64_bits(array.as_primitive::<Float64Type>().value(i))),
        Utf8 => bytes_hash(array.as_string::<i32>().value(i).as_bytes()),
        LargeUtf8 => bytes_hash(array.as_string::<i64>().value(i).as_bytes()),
        Utf8View => bytes_hash(array.as_string_view().value(i).as_bytes()),
        Binary => bytes_hash(array.as_binary::<i32>().value(i)),
        LargeBinary => bytes_hash(array.as_binary::<i64>().value(i)),
        BinaryView => bytes_hash(array.as_binary_view().value(i)),
        FixedSizeBinary(_) => bytes_hash(array.as_fixed_size_binary().value(i)),
        List(_) => list_hash(array.as_list::<i32>().value(i).as_ref())?,
        LargeList(_) => list_hash(array.as_list::<i64>().value(i).as_ref())?,
        ListView(_) => list_hash(array.as_list_view::<i32>().value(i).as_ref())?,
        LargeListView(_) => list_hash(array.as_list_view::<i64>().value(i).as_ref())?,
        FixedSizeList(_, _) => list_hash(array.as_fixed_size_list().value(i).as_ref())?,
        Map(_, _) => list_hash(&array.as_map().value(i))?,
        Struct(_) => {
            let mut h = STRUCT;
            for field in array.as_struct().columns() {
                h = fold_in(h, value_hash(field.as_ref(), i)?);
            }
            h
        }
        Union(_, _) => {
            let union = array.as_union();
            let type_id = union.type_id(i);
            let child = value_hash(union.child(type_id).as_ref(), union.value_offset(i))?;
            fold_in(word(u64::from(type_id as u8) ^ STRUCT), child)
        }
        RunEndEncoded(_, _) => value_hash(run_values(array), run_of(array, i))?,
        Dictionary(_, _) => {
            let dictionary = array.as_any_dictionary();
            let key = dictionary_key(dictionary.keys(), i).expect("a null key is a null");
            value_hash(dictionary.values().as_ref(), key)?
        }
        other => match le_bytes(array, i) {
            Some(bytes) => fixed_hash(&bytes),
            None => {
                return Err(ArrowError::NotYetImplemented(format!(
                    "the reference fast hash does not hash {other}"
                )));
            }
        },
    })
}

/// The hash of row `row` of `batch` over the key columns `keys`: the first key's value hash,
/// each further key's folded in.
///
/// # Errors
/// For a key type partout's fast hash does not take.
///
/// # Panics
/// If `keys` is empty or names a column past the batch's.
pub fn row_hash(batch: &RecordBatch, keys: &[usize], row: usize) -> Result<u64, ArrowError> {
    let (first, rest) = keys.split_first().expect("at least one key column");
    let mut h = value_hash(batch.column(*first).as_ref(), row)?;
    for &k in rest {
        h = fold_in(h, value_hash(batch.column(k).as_ref(), row)?);
    }
    Ok(h)
}

/// The destination below `n` of a row hashed to `h`: the top 32 bits scaled to `n`.
pub fn destination(h: u64, n: u32) -> u32 {
    (((h >> 32) * u64::from(n)) >> 32) as u32
}

/// Every row's destination of `n` by the fast hash of `keys`, into `ids` (cleared first):
/// what `Partitioning::hash(keys, n)` must give.
///
/// # Errors
/// For a key type partout's fast hash does not take.
///
/// # Panics
/// If `keys` is empty or names a column past the batch's.
pub fn ids(
    batch: &RecordBatch,
    keys: &[usize],
    n: u32,
    ids: &mut Vec<u32>,
) -> Result<(), ArrowError> {
    ids.clear();
    for row in 0..batch.num_rows() {
        ids.push(destination(row_hash(batch, keys, row)?, n));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schoolbook product is the 128-bit product, carries and all.
    #[test]
    fn the_wide_product_is_exact() {
        let values = [
            0,
            1,
            2,
            0xffff_ffff,
            1 << 32,
            u64::MAX,
            u64::MAX - 1,
            M,
            X,
            0x8000_0000_0000_0001,
        ];
        for a in values {
            for b in values {
                let p = u128::from(a) * u128::from(b);
                assert_eq!(
                    wide_product(a, b),
                    ((p >> 64) as u64, p as u64),
                    "{a:#x} * {b:#x}"
                );
            }
        }
    }

    #[test]
    fn destinations_scale_the_top_bits() {
        assert_eq!(destination(u64::MAX, 10), 9);
        assert_eq!(destination(0xffff_ffff, 10), 0);
        assert_eq!(destination(1 << 63, 10), 5);
        assert_eq!(destination(u64::MAX, 1), 0);
    }
}

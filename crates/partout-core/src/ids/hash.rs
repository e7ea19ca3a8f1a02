//! The fast hash: a 64-bit hash of the key columns, fixed seeds, the same on every machine.
//!
//! Each value gets a 64-bit hash of its own; a row's hash is its first key's value hash, with
//! every further key folded in, `h = fold(h ^ value_hash)`. Keeping the value hash independent
//! of the running one lets a dictionary hash each distinct value once and gather the hashes
//! through its keys.
//!
//! * Fixed-width values hash from their bits (floats with `-0.0` as `0.0` and every NaN as one
//!   NaN, so that equal keys hash equal): one folded multiplication, two for 16 and 32 bytes.
//! * Strings and binary up to 12 bytes hash from the 16 bytes an Arrow view holds for them
//!   (length and bytes, zero-padded): two folded multiplications, read straight from a
//!   Utf8View's views and built the same way from a Utf8 value, so a key hashes the same in
//!   either layout. Longer values use XXH3 with a fixed seed.
//! * A null hashes to a fixed constant.
//! * Nested values hash from their children's value hashes: a list (large, fixed-size, or a
//!   list view, alike for equal values) folds each element's hash into a start drawn from its
//!   length; a map is a list of its entries; a struct folds its fields' hashes into a fixed
//!   start; a union value folds its child's hash into a start drawn from its type id; a
//!   run-end encoded value is its run's value hash.

use super::{double_bits, float_bits};
use crate::error::{PartoutError, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::ByteArrayType;
use arrow_array::{Array, GenericByteArray, OffsetSizeTrait};
use arrow_buffer::ArrowNativeType;
use arrow_schema::DataType;

/// The hash of a null value.
pub const NULL_HASH: u64 = 0x1319_8a2e_0370_7344;
const K0: u64 = 0xa409_3822_299f_31d0;
const K1: u64 = 0x243f_6a88_85a3_08d3;
const XXH3_SEED: u64 = 0x4528_21e6_38d0_1377;

/// The folded multiplication (high and low halves of the 128-bit product, xored): a fast,
/// well-mixing 64-bit step.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Folds a value hash into a row's running hash.
#[inline(always)]
pub fn combine(h: u64, value: u64) -> u64 {
    fold(h ^ value, K0)
}

#[inline(always)]
fn hash_u64(v: u64) -> u64 {
    fold(v ^ K1, K0)
}

#[inline(always)]
fn hash_u128(v: u128) -> u64 {
    fold((v as u64) ^ K1, ((v >> 64) as u64) ^ K0)
}

/// The hash of a string or binary value (see the module documentation).
#[inline(always)]
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    if len <= 12 {
        // The 16 bytes of an inline view, `len` then the bytes zero-padded, assembled from
        // (possibly overlapping) fixed-size reads rather than a copy of run-time length.
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let value: u128 = match len {
            0 => 0,
            1..=3 => {
                u128::from(bytes[0])
                    | u128::from(bytes[len / 2]) << (8 * (len / 2))
                    | u128::from(bytes[len - 1]) << (8 * (len - 1))
            }
            4..=8 => u128::from(word(0)) | u128::from(word(len - 4)) << (8 * (len - 4)),
            _ => {
                u128::from(word(0))
                    | u128::from(word(4)) << 32
                    | u128::from(word(len - 4)) << (8 * (len - 4))
            }
        };
        hash_u128(value << 32 | len as u128)
    } else {
        xxhash_rust::xxh3::xxh3_64_with_seed(bytes, XXH3_SEED)
    }
}

/// Checks that `data_type` has a fast hash.
///
/// # Errors
/// [`PartoutError::UnsupportedType`] naming the type.
pub fn check_type(data_type: &DataType) -> Result<()> {
    use DataType::*;
    let ok = match data_type {
        Null | Boolean | Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView
        | FixedSizeBinary(_) => true,
        Dictionary(_, value) => return check_type(value),
        List(f)
        | LargeList(f)
        | FixedSizeList(f, _)
        | ListView(f)
        | LargeListView(f)
        | Map(f, _) => return check_type(f.data_type()),
        Struct(fields) => return fields.iter().try_for_each(|f| check_type(f.data_type())),
        Union(fields, _) => {
            return fields
                .iter()
                .try_for_each(|(_, f)| check_type(f.data_type()));
        }
        RunEndEncoded(_, values) => return check_type(values.data_type()),
        other => other.primitive_width().is_some(),
    };
    if ok {
        Ok(())
    } else {
        Err(PartoutError::UnsupportedType {
            data_type: data_type.clone(),
            context: "the fast hash",
        })
    }
}

/// The start of a list value's hash: its length, hashed.
#[inline(always)]
pub fn list_start(len: usize) -> u64 {
    hash_u64(len as u64 ^ K0)
}

/// The start of every struct value's hash.
pub const STRUCT_START: u64 = 0x0801_f2e2_858e_fc16;

/// The start of a union value's hash: its type id, hashed.
#[inline(always)]
pub fn union_start(type_id: i8) -> u64 {
    hash_u64(type_id as u8 as u64 ^ STRUCT_START)
}

/// The value hashes of the list values whose elements are `ranges` (start, length) of
/// `values`.
fn lists(
    values: &dyn Array,
    ranges: impl Iterator<Item = (usize, usize)>,
    out: &mut Vec<u64>,
) -> Result<()> {
    let mut elements = Vec::new();
    value_hashes(values, &mut elements)?;
    for (start, len) in ranges {
        let mut h = list_start(len);
        for &e in &elements[start..start + len] {
            h = combine(h, e);
        }
        out.push(h);
    }
    Ok(())
}

/// The value hashes of a list (or large list) column.
fn offset_lists<O: OffsetSizeTrait>(column: &dyn Array, out: &mut Vec<u64>) -> Result<()> {
    let list = column.as_list::<O>();
    let ranges = list.value_offsets().windows(2);
    let ranges = ranges.map(|w| (w[0].as_usize(), (w[1] - w[0]).as_usize()));
    lists(list.values().as_ref(), ranges, out)
}

/// The value hashes of a list view (or large list view) column.
fn view_lists<O: OffsetSizeTrait>(column: &dyn Array, out: &mut Vec<u64>) -> Result<()> {
    let list = column.as_list_view::<O>();
    let ranges = list.value_offsets().iter().zip(list.value_sizes());
    let ranges = ranges.map(|(o, s)| (o.as_usize(), s.as_usize()));
    lists(list.values().as_ref(), ranges, out)
}

/// The value hashes of a run-end encoded column: each row its run's value hash.
fn runs<R: arrow_array::types::RunEndIndexType>(
    column: &arrow_array::RunArray<R>,
    out: &mut Vec<u64>,
) -> Result<()> {
    let mut values = Vec::new();
    value_hashes(column.values().as_ref(), &mut values)?;
    let ends = column.run_ends();
    let mut physical = ends.get_start_physical_index();
    for logical in ends.offset()..ends.offset() + ends.len() {
        while ends.values()[physical].as_usize() <= logical {
            physical += 1;
        }
        out.push(values[physical]);
    }
    Ok(())
}

/// Writes every row's value hash (nulls included) to `out`.
///
/// # Errors
/// [`PartoutError::UnsupportedType`] for a type [`check_type`] refuses.
pub fn value_hashes(column: &dyn Array, out: &mut Vec<u64>) -> Result<()> {
    out.clear();
    use DataType::*;
    match column.data_type() {
        Null => out.resize(column.len(), NULL_HASH),
        Boolean => {
            let values = column.as_boolean();
            out.extend(values.values().iter().map(|b| hash_u64(u64::from(b))));
        }
        Float16 => {
            let values = column.as_primitive::<arrow_array::types::Float16Type>();
            out.extend(
                values
                    .values()
                    .iter()
                    .map(|v| hash_u64(float_bits(v.to_f32()) as u32 as u64)),
            );
        }
        Float32 => {
            let values = column.as_primitive::<arrow_array::types::Float32Type>();
            out.extend(
                values
                    .values()
                    .iter()
                    .map(|&v| hash_u64(float_bits(v) as u32 as u64)),
            );
        }
        Float64 => {
            let values = column.as_primitive::<arrow_array::types::Float64Type>();
            out.extend(
                values
                    .values()
                    .iter()
                    .map(|&v| hash_u64(double_bits(v) as u64)),
            );
        }
        Utf8 => bytes(column.as_string::<i32>(), out),
        LargeUtf8 => bytes(column.as_string::<i64>(), out),
        Binary => bytes(column.as_binary::<i32>(), out),
        LargeBinary => bytes(column.as_binary::<i64>(), out),
        Utf8View | BinaryView => {
            let (views, buffers) = crate::scatter::view_parts(column);
            out.extend(views.iter().map(|&view| {
                let len = view as u32 as usize;
                if len <= 12 {
                    // The inline fast path: the view is the value.
                    hash_u128(view)
                } else {
                    let buffer = (view >> 64) as u32 as usize;
                    let offset = (view >> 96) as u32 as usize;
                    hash_bytes(&buffers[buffer].as_slice()[offset..offset + len])
                }
            }));
        }
        FixedSizeBinary(_) => {
            let values = column.as_fixed_size_binary();
            out.extend((0..values.len()).map(|i| hash_bytes(values.value(i))));
        }
        List(_) => offset_lists::<i32>(column, out)?,
        LargeList(_) => offset_lists::<i64>(column, out)?,
        ListView(_) => view_lists::<i32>(column, out)?,
        LargeListView(_) => view_lists::<i64>(column, out)?,
        FixedSizeList(_, _) => {
            let list = column.as_fixed_size_list();
            let size = list.value_length() as usize;
            let ranges = (0..list.len()).map(|i| (list.value_offset(i) as usize, size));
            lists(list.values().as_ref(), ranges, out)?;
        }
        Map(_, _) => {
            let map = column.as_map();
            let ranges = map.value_offsets().windows(2);
            lists(
                map.entries(),
                ranges.map(|w| (w[0].as_usize(), (w[1] - w[0]).as_usize())),
                out,
            )?;
        }
        Struct(_) => {
            out.resize(column.len(), STRUCT_START);
            let mut field = Vec::new();
            for child in column.as_struct().columns() {
                value_hashes(child.as_ref(), &mut field)?;
                for (h, &f) in out.iter_mut().zip(&field) {
                    *h = combine(*h, f);
                }
            }
        }
        Union(fields, _) => {
            let union = column.as_union();
            let mut children = vec![Vec::new(); 128];
            for (type_id, _) in fields.iter() {
                value_hashes(
                    union.child(type_id).as_ref(),
                    &mut children[type_id as u8 as usize],
                )?;
            }
            let type_ids = union.type_ids();
            match union.offsets() {
                Some(offsets) => out.extend(type_ids.iter().zip(offsets.iter()).map(|(&t, &o)| {
                    combine(union_start(t), children[t as u8 as usize][o as usize])
                })),
                None => out.extend(
                    type_ids
                        .iter()
                        .enumerate()
                        .map(|(i, &t)| combine(union_start(t), children[t as u8 as usize][i])),
                ),
            }
        }
        RunEndEncoded(run_ends, _) => match run_ends.data_type() {
            Int16 => runs(column.as_run::<arrow_array::types::Int16Type>(), out)?,
            Int32 => runs(column.as_run::<arrow_array::types::Int32Type>(), out)?,
            _ => runs(column.as_run::<arrow_array::types::Int64Type>(), out)?,
        },
        // An empty dictionary: every key is null (its hash is set below).
        Dictionary(_, _) if column.as_any_dictionary().values().is_empty() => {
            out.resize(column.len(), NULL_HASH)
        }
        Dictionary(_, _) => {
            let dictionary = column.as_any_dictionary();
            let mut value_hashes = Vec::new();
            self::value_hashes(dictionary.values().as_ref(), &mut value_hashes)?;
            out.extend(
                dictionary
                    .normalized_keys()
                    .iter()
                    .map(|&k| value_hashes[k]),
            );
        }
        other => match other.primitive_width() {
            Some(width) => fixed(crate::scatter::fixed_bytes(column, width), width, out),
            None => {
                return Err(PartoutError::UnsupportedType {
                    data_type: other.clone(),
                    context: "the fast hash",
                });
            }
        },
    }
    if let Some(nulls) = column.logical_nulls().filter(|n| n.null_count() > 0) {
        for (h, valid) in out.iter_mut().zip(nulls.iter()) {
            if !valid {
                *h = NULL_HASH;
            }
        }
    }
    Ok(())
}

/// Fixed-width values hashed from their little-endian bits.
fn fixed(bytes: &[u8], width: usize, out: &mut Vec<u64>) {
    // A loop per width: a copy of a run-time width would be a `memcpy` call per value. Reading
    // through `as_chunks` is safe code, needs no alignment, and compiles to one load per value.
    fn words<const W: usize>(bytes: &[u8], out: &mut Vec<u64>, to_u64: impl Fn([u8; W]) -> u64) {
        let (values, rest) = bytes.as_chunks::<W>();
        debug_assert!(rest.is_empty(), "{} bytes of width {W}", bytes.len());
        out.extend(values.iter().map(|&v| hash_u64(to_u64(v))));
    }
    match width {
        1 => words::<1>(bytes, out, |[b]| u64::from(b)),
        2 => words::<2>(bytes, out, |v| u64::from(u16::from_le_bytes(v))),
        4 => words::<4>(bytes, out, |v| u64::from(u32::from_le_bytes(v))),
        8 => words::<8>(bytes, out, u64::from_le_bytes),
        _ => out.extend(bytes.chunks_exact(width).map(|c| {
            c.chunks(16).fold(0u64, |h, part| {
                let mut v = [0u8; 16];
                v[..part.len()].copy_from_slice(part);
                h ^ hash_u128(u128::from_le_bytes(v)).rotate_left(17)
            })
        })),
    }
}

fn bytes<T: ByteArrayType>(values: &GenericByteArray<T>, out: &mut Vec<u64>)
where
    T::Offset: OffsetSizeTrait,
{
    let offsets = values.value_offsets();
    let data = values.value_data();
    out.extend(
        offsets
            .windows(2)
            .map(|w| hash_bytes(&data[w[0].as_usize()..w[1].as_usize()])),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{StringArray, StringViewArray};

    #[test]
    fn short_values_are_assembled_like_views() {
        for len in 0..=12usize {
            let bytes: Vec<u8> = (0..len as u8)
                .map(|b| b.wrapping_mul(37).wrapping_add(200))
                .collect();
            let mut view = [0u8; 16];
            view[..4].copy_from_slice(&(len as u32).to_le_bytes());
            view[4..4 + len].copy_from_slice(&bytes);
            assert_eq!(
                hash_bytes(&bytes),
                hash_u128(u128::from_le_bytes(view)),
                "length {len}"
            );
        }
    }

    /// Each value's hash is that of its little-endian bits widened to 64, wherever the bytes
    /// start (an unaligned slice hashes like an aligned one).
    #[test]
    fn fixed_width_values_hash_their_little_endian_bits() {
        let backing: Vec<u8> = (0..8 * 9 + 1).map(|i| (i * 37 + 11) as u8).collect();
        for start in [0, 1] {
            let bytes = &backing[start..start + 8 * 9];
            for width in [1usize, 2, 4, 8] {
                let mut got = Vec::new();
                fixed(bytes, width, &mut got);
                let want: Vec<u64> = bytes
                    .chunks_exact(width)
                    .map(|c| {
                        let mut v = [0u8; 8];
                        v[..width].copy_from_slice(c);
                        hash_u64(u64::from_le_bytes(v))
                    })
                    .collect();
                assert_eq!(got, want, "width {width} from byte {start}");
            }
        }
    }

    #[test]
    fn a_string_hashes_the_same_in_every_layout() {
        let strings = [
            "",
            "a",
            "twelve bytes",
            "thirteen byte",
            "a much longer string than that",
        ];
        let plain = StringArray::from(strings.to_vec());
        let views = StringViewArray::from(strings.to_vec());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        value_hashes(&plain, &mut a).unwrap();
        value_hashes(&views, &mut b).unwrap();
        assert_eq!(a, b);
        let distinct: std::collections::HashSet<u64> = a.iter().copied().collect();
        assert_eq!(distinct.len(), strings.len());
    }
}

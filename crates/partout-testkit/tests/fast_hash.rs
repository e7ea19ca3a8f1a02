//! The test kit's reference fast hash against partout-core's: every value hash equal, bit for
//! bit, for every type partout hashes (nulls, slices, nested values included), and every
//! destination equal for keys of one column and of several, at every kind of partition count.

use arrow_array::{
    ArrayRef, Float16Array, Float32Array, Float64Array, RecordBatch, StringArray, StringViewArray,
};
use partout_core::ids::{PartitionIds, Partitioning, hash};
use partout_testkit::{batch_of, every_type, fast_hash, random_array, random_sliced_array, rng};
use proptest::prelude::*;
use std::sync::Arc;

/// partout's value hashes of `column`.
fn partout_hashes(column: &ArrayRef) -> Vec<u64> {
    let mut out = Vec::new();
    hash::value_hashes(column.as_ref(), &mut out).expect("partout hashes it");
    out
}

/// The reference's value hashes of `column`.
fn reference_hashes(column: &ArrayRef) -> Vec<u64> {
    (0..column.len())
        .map(|i| fast_hash::value_hash(column.as_ref(), i).expect("the reference hashes it"))
        .collect()
}

/// partout's destinations of `batch`'s rows by its fast hash of `keys`.
fn partout_ids(batch: &RecordBatch, keys: &[usize], n: u32) -> Vec<u32> {
    let mut ids = PartitionIds::try_new(Partitioning::hash(keys.to_vec(), n), &batch.schema())
        .expect("partout takes the keys");
    let mut out = Vec::new();
    ids.compute(batch, &mut out).expect("ids");
    out
}

/// The reference's destinations.
fn reference_ids(batch: &RecordBatch, keys: &[usize], n: u32) -> Vec<u32> {
    let mut out = Vec::new();
    fast_hash::ids(batch, keys, n, &mut out).expect("the reference hashes the keys");
    out
}

/// Partition counts: one, small, odd, large, and the most partout takes.
fn counts() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(1u32),
        2..=17u32,
        Just(200u32),
        Just(1000u32),
        Just(partout_core::plan::MAX_PARTITIONS),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// One key column of any type: the same value hash for every row, the same destination.
    #[test]
    fn one_key_of_every_type_hashes_as_partout_does(
        seed in any::<u64>(),
        type_index in 0..every_type().len(),
        rows in 0usize..150,
        nulls in prop_oneof![Just(0.0), Just(0.3), Just(1.0)],
        sliced in any::<bool>(),
        n in counts(),
    ) {
        let data_type = every_type()[type_index].clone();
        let mut rng = rng(seed);
        let column = if sliced {
            random_sliced_array(&data_type, rows, nulls, &mut rng)
        } else {
            random_array(&data_type, rows, nulls, &mut rng)
        };
        prop_assert_eq!(reference_hashes(&column), partout_hashes(&column), "{}", data_type);
        let batch = batch_of(vec![column]);
        prop_assert_eq!(reference_ids(&batch, &[0], n), partout_ids(&batch, &[0], n), "{}", data_type);
    }

    /// Keys of several columns of any types, in any order (a column may repeat): the same
    /// destinations.
    #[test]
    fn keys_of_several_columns_hash_as_partout_does(
        seed in any::<u64>(),
        type_indices in prop::collection::vec(0..every_type().len(), 2..5),
        key_picks in prop::collection::vec(any::<prop::sample::Index>(), 2..5),
        rows in 1usize..120,
        n in counts(),
    ) {
        let types = every_type();
        let mut rng = rng(seed);
        let columns: Vec<ArrayRef> = type_indices
            .iter()
            .map(|&t| random_sliced_array(&types[t], rows, 0.2, &mut rng))
            .collect();
        let keys: Vec<usize> = key_picks.iter().map(|k| k.index(columns.len())).collect();
        let names: Vec<String> = keys.iter().map(|&k| columns[k].data_type().to_string()).collect();
        let batch = batch_of(columns);
        prop_assert_eq!(reference_ids(&batch, &keys, n), partout_ids(&batch, &keys, n), "{:?}", names);
    }
}

/// The floats partout canonicalizes: -0.0 as 0.0, every NaN as one; infinities and the
/// smallest values as they are. Random bits seldom hit them.
#[test]
fn special_floats_hash_as_partout_does() {
    let f64s = [
        0.0,
        -0.0,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE,
        5e-324,
        1.5,
    ];
    let f32s: Vec<f32> = f64s.iter().map(|&v| v as f32).collect();
    let f16s: Vec<F16> = f32s.iter().map(|&v| F16::from_f32(v)).collect();
    let columns: [ArrayRef; 3] = [
        Arc::new(Float64Array::from(f64s.to_vec())),
        Arc::new(Float32Array::from(f32s)),
        Arc::new(Float16Array::from(f16s)),
    ];
    for column in &columns {
        let reference = reference_hashes(column);
        assert_eq!(reference, partout_hashes(column), "{}", column.data_type());
        // -0.0 hashes as 0.0, and both NaNs alike.
        assert_eq!(reference[0], reference[1], "{}", column.data_type());
        assert_eq!(reference[2], reference[3], "{}", column.data_type());
        assert_ne!(reference[0], reference[9], "{}", column.data_type());
    }
}

/// Strings on both sides of the 12-byte inline limit, as Utf8 and as Utf8View: the same
/// hashes in either layout, and partout's.
#[test]
fn strings_on_both_sides_of_the_inline_limit_hash_as_partout_does() {
    let strings: Vec<String> = (0..=40)
        .map(|len| "é".repeat(len / 2) + &"x".repeat(len % 2))
        .collect();
    let plain: ArrayRef = Arc::new(StringArray::from(strings.clone()));
    let views: ArrayRef = Arc::new(StringViewArray::from(strings));
    assert_eq!(reference_hashes(&plain), partout_hashes(&plain));
    assert_eq!(reference_hashes(&views), reference_hashes(&plain));
}

/// Arrow's half-precision float.
type F16 = <arrow_array::types::Float16Type as arrow_array::ArrowPrimitiveType>::Native;

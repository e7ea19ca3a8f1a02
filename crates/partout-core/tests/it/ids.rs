//! Properties of every partition-id scheme: ids in range; equal keys, equal ids, whatever the
//! batch boundaries, slicing or dictionary encoding; round-robin balance; given ids checked.

use arrow_array::types::{Int32Type, UInt16Type};
use arrow_array::*;
use arrow_schema::{DataType, Field, Schema};
use partout_core::PartoutError;
use partout_core::ids::{PartitionIds, Partitioning, Scheme};
use partout_testkit::{batch_of, random_array, random_sliced_array, rng};
use proptest::prelude::*;
use std::sync::Arc;

fn ids_of(partitioning: &Partitioning, batch: &RecordBatch) -> Vec<u32> {
    let mut ids = PartitionIds::try_new(partitioning.clone(), &batch.schema()).unwrap();
    let mut out = Vec::new();
    ids.compute(batch, &mut out).unwrap();
    out
}

/// Key types both hash schemes accept.
fn key_types() -> Vec<DataType> {
    vec![
        DataType::Int32,
        DataType::Int64,
        DataType::Float64,
        DataType::Date32,
        DataType::Decimal128(38, 4),
        DataType::Utf8,
        DataType::Utf8View,
        DataType::LargeBinary,
        DataType::Boolean,
        DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)),
    ]
}

/// A dictionary-encoded copy of `values` (a random dictionary, keys pointing into it) and the
/// same values decoded.
fn dictionary_pair(values: &ArrayRef, rows: usize, seed: u64) -> (ArrayRef, ArrayRef) {
    use rand::Rng;
    let mut rng = rng(seed);
    let keys = Int32Array::from_iter((0..rows).map(|_| {
        rng.random_bool(0.9)
            .then(|| rng.random_range(0..values.len() as i32))
    }));
    let decoded = arrow_select::take::take(values.as_ref(), &keys, None).unwrap();
    let encoded: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::new(keys, values.clone()));
    (encoded, decoded)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Ids are in range and depend only on the key values: splitting the batch anywhere,
    /// slicing it, or dictionary-encoding a key column changes nothing.
    #[test]
    fn hash_ids_depend_only_on_key_values(
        seed in any::<u64>(),
        type_indices in prop::collection::vec(0..key_types().len(), 1..3),
        rows in 1usize..300,
        split in 0usize..300,
        n in prop_oneof![Just(1u32), 2..=17u32, Just(200u32), Just(1000u32), Just(1024u32)],
        spark_scheme in any::<bool>(),
    ) {
        let mut rng = rng(seed);
        let types = key_types();
        let columns: Vec<ArrayRef> = type_indices
            .iter()
            .map(|&i| random_sliced_array(&types[i], rows, 0.2, &mut rng))
            .collect();
        let batch = batch_of(columns.clone());
        let keys: Vec<usize> = (0..columns.len()).collect();
        let partitioning = if spark_scheme { Partitioning::spark(keys, n) } else { Partitioning::hash(keys, n) };
        let whole = ids_of(&partitioning, &batch);
        prop_assert_eq!(whole.len(), rows);
        prop_assert!(whole.iter().all(|&id| id < n));

        let split = split.min(rows);
        let mut pieces = ids_of(&partitioning, &batch.slice(0, split));
        pieces.extend(ids_of(&partitioning, &batch.slice(split, rows - split)));
        prop_assert_eq!(&pieces, &whole);

        // Dictionary-encode the first key column (values taken from a random pool).
        let pool = random_array(&DataType::Utf8, 40, 0.1, &mut rng);
        let (encoded, decoded) = dictionary_pair(&pool, rows, seed);
        let plain = batch_of(vec![decoded]);
        let dict = batch_of(vec![encoded]);
        let p = if spark_scheme { Partitioning::spark([0], n) } else { Partitioning::hash([0], n) };
        prop_assert_eq!(ids_of(&p, &plain), ids_of(&p, &dict));
    }
}

#[test]
fn a_key_hashes_the_same_in_every_string_layout() {
    let strings: Vec<Option<&str>> = vec![
        Some(""),
        Some("short"),
        None,
        Some("a string longer than twelve bytes"),
    ];
    let layouts: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(strings.clone())),
        Arc::new(LargeStringArray::from(strings.clone())),
        Arc::new(StringViewArray::from(strings.clone())),
        Arc::new(DictionaryArray::<UInt16Type>::from_iter(strings.clone())),
    ];
    for scheme in [
        Partitioning::hash([0], 1000),
        Partitioning::spark([0], 1000),
    ] {
        let ids: Vec<Vec<u32>> = layouts
            .iter()
            .map(|l| ids_of(&scheme, &batch_of(vec![l.clone()])))
            .collect();
        assert!(
            ids.windows(2).all(|w| w[0] == w[1]),
            "{:?}: {ids:?}",
            scheme.scheme()
        );
    }
}

#[test]
fn the_fast_hash_spreads_keys_evenly() {
    // 100,000 consecutive integers over 64 destinations: each gets its share within 10%.
    let keys = Int64Array::from_iter_values(0..100_000);
    let ids = ids_of(
        &Partitioning::hash([0], 64),
        &batch_of(vec![Arc::new(keys)]),
    );
    let mut counts = [0usize; 64];
    ids.iter().for_each(|&id| counts[id as usize] += 1);
    let share = 100_000 / 64;
    assert!(
        counts.iter().all(|&c| c.abs_diff(share) < share / 10),
        "{counts:?}"
    );
}

/// A key of three columns: changing any one of them, the others kept, moves nearly every row
/// to another of 1Mi destinations, under both hash schemes (a scheme that dropped or
/// cancelled out a key column would leave that column's rows where they were).
#[test]
fn every_column_of_a_multi_column_key_changes_the_destination() {
    const ROWS: i64 = 20_000;
    let columns = |shift: [i64; 3]| -> Vec<ArrayRef> {
        vec![
            Arc::new(Int64Array::from_iter_values(
                (0..ROWS).map(|i| i % 100 + shift[0]),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..ROWS).map(|i| format!("name {}", i / 100 + shift[1])),
            )),
            Arc::new(Date32Array::from_iter_values(
                (0..ROWS).map(|i| (i % 7 + shift[2]) as i32),
            )),
        ]
    };
    for partitioning in [
        Partitioning::hash([0, 1, 2], 1 << 20),
        Partitioning::spark([0, 1, 2], 1 << 20),
    ] {
        let scheme = partitioning.scheme();
        let base = ids_of(&partitioning, &batch_of(columns([0, 0, 0])));
        for changed in 0..3 {
            let mut shift = [0; 3];
            shift[changed] = 1_000;
            let moved = ids_of(&partitioning, &batch_of(columns(shift)));
            let same = base.iter().zip(&moved).filter(|(a, b)| a == b).count();
            // By chance, about one row in 1Mi would stay.
            assert!(
                same <= 5,
                "{scheme}: changing key column {changed} left {same} of {ROWS} rows in place"
            );
        }
    }
}

#[test]
fn round_robin_deals_evenly_and_continues_across_batches() {
    let batch = batch_of(vec![Arc::new(Int32Array::from_iter_values(0..10))]);
    let mut ids = PartitionIds::try_new(Partitioning::round_robin(3), &batch.schema()).unwrap();
    let mut all = Vec::new();
    for _ in 0..4 {
        let mut out = Vec::new();
        ids.compute(&batch, &mut out).unwrap();
        all.extend(out);
    }
    let want: Vec<u32> = (0..40).map(|i| i % 3).collect();
    assert_eq!(all, want);
}

#[test]
fn given_ids_are_checked() {
    let good = batch_of(vec![Arc::new(Int64Array::from(vec![3, 0, 4]))]);
    assert_eq!(ids_of(&Partitioning::given(0, 5), &good), [3, 0, 4]);
    for (column, bad_row) in [
        (Arc::new(Int64Array::from(vec![0, -1])) as ArrayRef, 1),
        (Arc::new(UInt8Array::from(vec![Some(1), None])), 1),
        (Arc::new(Int32Array::from(vec![5, 0])), 0),
        (Arc::new(UInt64Array::from(vec![0, u64::MAX])), 1),
    ] {
        let batch = batch_of(vec![column]);
        let mut ids = PartitionIds::try_new(Partitioning::given(0, 5), &batch.schema()).unwrap();
        let err = ids.compute(&batch, &mut Vec::new()).unwrap_err();
        assert!(
            matches!(err, PartoutError::PartitionIdOutOfRange { row, .. } if row == bad_row),
            "{err}"
        );
    }
    let strings = batch_of(vec![Arc::new(StringArray::from(vec!["1"]))]);
    assert!(matches!(
        PartitionIds::try_new(Partitioning::given(0, 5), &strings.schema()),
        Err(PartoutError::UnsupportedType { .. })
    ));
}

#[test]
fn impossible_partitionings_are_refused() {
    let schema = Schema::new(vec![
        Field::new("i", DataType::Int32, true),
        Field::new(
            "l",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        ),
    ]);
    let refused = [
        Partitioning::hash([0], 0),
        Partitioning::hash([0], (1 << 20) + 1),
        Partitioning::hash([2], 4),
        Partitioning::hash(Vec::new(), 4),
        Partitioning::spark(Vec::new(), 4),
        Partitioning::round_robin(0),
    ];
    for p in refused {
        assert!(
            matches!(
                PartitionIds::try_new(p.clone(), &schema),
                Err(PartoutError::InvalidArgument(_))
            ),
            "{p:?}"
        );
    }
    // Both hashes take nested keys: the fast hash folds their children's hashes, Spark's
    // chains them.
    PartitionIds::try_new(Partitioning::hash([1], 4), &schema).unwrap();
    PartitionIds::try_new(Partitioning::spark([1], 4), &schema).unwrap();
    assert_eq!(Partitioning::single().scheme(), Scheme::Single);
}

#[test]
fn a_batch_of_another_shape_is_an_error() {
    let schema = Schema::new(vec![Field::new("i", DataType::Int32, true)]);
    let mut ids = PartitionIds::try_new(Partitioning::hash([0], 4), &schema).unwrap();
    let other = batch_of(vec![Arc::new(Int64Array::from(vec![1]))]);
    let err = ids.compute(&other, &mut Vec::new()).unwrap_err();
    assert!(
        err.to_string().contains("key column 0 should be Int32"),
        "{err}"
    );
}

mod range {
    use super::*;
    use arrow_schema::SortOptions;
    use partout_core::ids::RangeBounds;
    use std::cmp::Ordering;

    /// A key's ordering under `options`, written out by hand: the oracle.
    fn compare<T: Ord>(a: &Option<T>, b: &Option<T>, options: SortOptions) -> Ordering {
        match (a, b) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => {
                if options.nulls_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (Some(_), None) => {
                if options.nulls_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            (Some(a), Some(b)) => {
                if options.descending {
                    b.cmp(a)
                } else {
                    a.cmp(b)
                }
            }
        }
    }

    type Key = (Option<i64>, Option<String>);

    fn compare_keys(a: &Key, b: &Key, options: &[SortOptions]) -> Ordering {
        compare(&a.0, &b.0, options[0]).then_with(|| compare(&a.1, &b.1, options[1]))
    }

    fn random_keys(rows: usize, rng: &mut partout_testkit::TestRng) -> Vec<Key> {
        use rand::Rng;
        (0..rows)
            .map(|_| {
                let a = rng.random_bool(0.9).then(|| rng.random_range(-20..20i64));
                let b = rng
                    .random_bool(0.9)
                    .then(|| ["", "a", "ab", "b", "zz"][rng.random_range(0..5)].to_string());
                (a, b)
            })
            .collect()
    }

    fn batch_of_keys(keys: &[Key]) -> RecordBatch {
        batch_of(vec![
            Arc::new(Int64Array::from(
                keys.iter().map(|k| k.0).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                keys.iter().map(|k| k.1.clone()).collect::<Vec<_>>(),
            )),
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Every row goes to the number of split points below its key, under every sort
        /// order, and sorted keys get non-decreasing ids.
        #[test]
        fn range_ids_match_the_oracle(
            seed in any::<u64>(),
            rows in 0usize..200,
            splits in 0usize..12,
            descending in any::<(bool, bool)>(),
            nulls_first in any::<(bool, bool)>(),
        ) {
            let mut rng = rng(seed);
            let options = vec![
                SortOptions { descending: descending.0, nulls_first: nulls_first.0 },
                SortOptions { descending: descending.1, nulls_first: nulls_first.1 },
            ];
            let mut split_keys = random_keys(splits, &mut rng);
            split_keys.sort_by(|a, b| compare_keys(a, b, &options));
            let bounds = RangeBounds { splits: batch_of_keys(&split_keys), options: options.clone() };
            let mut keys = random_keys(rows, &mut rng);
            let partitioning = Partitioning::range([0, 1], bounds);
            prop_assert_eq!(partitioning.num_partitions() as usize, splits + 1);
            let ids = ids_of(&partitioning, &batch_of_keys(&keys));
            for (key, &id) in keys.iter().zip(&ids) {
                let below = split_keys.iter().filter(|s| compare_keys(s, key, &options) == Ordering::Less).count();
                prop_assert_eq!(id as usize, below, "{:?}", key);
            }
            keys.sort_by(|a, b| compare_keys(a, b, &options));
            let sorted_ids = ids_of(&partitioning, &batch_of_keys(&keys));
            prop_assert!(sorted_ids.windows(2).all(|w| w[0] <= w[1]));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Bounds drawn from a sample are accepted under every sort order, and split a sample
        /// of distinct keys into destinations of equal rows (within one).
        #[test]
        fn bounds_from_a_sample_split_it_evenly(
            seed in any::<u64>(),
            rows in 1usize..3000,
            n in 1u32..70,
            descending in any::<bool>(),
            nulls_first in any::<bool>(),
        ) {
            use rand::seq::SliceRandom;
            let mut rng = rng(seed);
            let mut keys: Vec<i64> = (0..rows as i64).map(|k| k * 3 - 100).collect();
            keys.shuffle(&mut rng);
            let sample = batch_of(vec![Arc::new(Int64Array::from(keys))]);
            let options = vec![SortOptions { descending, nulls_first }];
            let bounds = RangeBounds::from_sample(&sample, n, options).unwrap();
            prop_assert_eq!(bounds.splits.num_rows(), n as usize - 1);
            let ids = ids_of(&Partitioning::range([0], bounds), &sample);
            let mut counts = vec![0usize; n as usize];
            ids.iter().for_each(|&id| counts[id as usize] += 1);
            if rows >= n as usize {
                let (lo, hi) = (rows / n as usize, rows.div_ceil(n as usize));
                prop_assert!(counts.iter().all(|&c| c + 1 >= lo && c <= hi + 1), "{:?}", counts);
            }
            prop_assert_eq!(counts.iter().sum::<usize>(), rows);
        }
    }

    #[test]
    fn bounds_from_no_sample_or_an_unsortable_one_are_refused() {
        let asc = vec![SortOptions::default()];
        let empty = batch_of(vec![Arc::new(Int64Array::from(Vec::<i64>::new()))]);
        let err = RangeBounds::from_sample(&empty, 4, asc.clone()).unwrap_err();
        assert!(err.to_string().contains("empty sample"), "{err}");
        let one = batch_of(vec![Arc::new(Int64Array::from(vec![1]))]);
        assert!(RangeBounds::from_sample(&one, 0, asc.clone()).is_err());
        assert!(RangeBounds::from_sample(&one, 4, vec![]).is_err());
        // Repeated keys repeat split points; the bounds are still accepted.
        let same = batch_of(vec![Arc::new(Int64Array::from(vec![7; 100]))]);
        let bounds = RangeBounds::from_sample(&same, 5, asc).unwrap();
        assert_eq!(
            ids_of(&Partitioning::range([0], bounds), &same),
            vec![0; 100]
        );
    }

    #[test]
    fn bad_split_points_are_refused() {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, true)]);
        let asc = vec![SortOptions::default()];
        let unsorted = RangeBounds {
            splits: batch_of(vec![Arc::new(Int64Array::from(vec![5, 3]))]),
            options: asc.clone(),
        };
        let err = PartitionIds::try_new(Partitioning::range([0], unsorted), &schema).unwrap_err();
        assert!(err.to_string().contains("not sorted"), "{err}");
        let wrong_type = RangeBounds {
            splits: batch_of(vec![Arc::new(Int32Array::from(vec![1]))]),
            options: asc.clone(),
        };
        let err = PartitionIds::try_new(Partitioning::range([0], wrong_type), &schema).unwrap_err();
        assert!(err.to_string().contains("split column 0 is Int32"), "{err}");
        let no_options = RangeBounds {
            splits: batch_of(vec![Arc::new(Int64Array::from(vec![1]))]),
            options: vec![],
        };
        assert!(PartitionIds::try_new(Partitioning::range([0], no_options), &schema).is_err());
        // No split points: one destination.
        let none = RangeBounds {
            splits: batch_of(vec![Arc::new(Int64Array::from(Vec::<i64>::new()))]),
            options: asc,
        };
        let batch = batch_of(vec![Arc::new(Int64Array::from(vec![Some(7), None]))]);
        assert_eq!(ids_of(&Partitioning::range([0], none), &batch), [0, 0]);
    }
}

/// Ids of every scheme feed the scatter plan, with and without virtual fan-out.
#[test]
fn every_scheme_feeds_the_partitioner() {
    use partout_core::Partitioner;
    use partout_core::ids::RangeBounds;
    let mut rng = rng(31);
    let key = random_array(&DataType::Int64, 1000, 0.1, &mut rng);
    let payload = random_array(&DataType::Utf8View, 1000, 0.3, &mut rng);
    let batch = batch_of(vec![
        key,
        payload,
        Arc::new(UInt32Array::from_iter_values((0..1000).map(|i| i % 7))),
    ]);
    let bounds = RangeBounds {
        splits: batch_of(vec![Arc::new(Int64Array::from(vec![
            -(1 << 40),
            0,
            1 << 40,
        ]))]),
        options: vec![arrow_schema::SortOptions::default()],
    };
    for partitioning in [
        Partitioning::hash([0, 1], 7),
        Partitioning::spark([0], 7),
        Partitioning::round_robin(7),
        Partitioning::single(),
        Partitioning::given(2, 7),
        Partitioning::range([0], bounds),
    ] {
        let ids = ids_of(&partitioning, &batch);
        let n = partitioning.num_partitions();
        let reference = partout_testkit::reference_partition(&batch, &ids, n);
        for fanout in [None, Some(1), Some(8)] {
            let mut partitioner = Partitioner::try_new(n).unwrap();
            if let Some(f) = fanout {
                partitioner = partitioner.with_fanout(f).unwrap();
            }
            let out = partitioner.partition(&batch, &ids).unwrap();
            for (p, want) in reference.iter().enumerate() {
                assert_eq!(
                    &out.partition(p),
                    want,
                    "{:?} fan-out {fanout:?}",
                    partitioning.scheme()
                );
            }
        }
    }
}

/// A dictionary with no values (every key null) hashes like a column of nulls in both hashes,
/// alone and after another key.
#[test]
fn an_empty_dictionary_hashes_as_nulls() {
    let empty = DictionaryArray::<Int32Type>::try_new(
        Int32Array::from(vec![None; 4]),
        Arc::new(StringArray::from(Vec::<&str>::new())),
    )
    .unwrap();
    let nulls: ArrayRef = Arc::new(StringArray::from(vec![None::<&str>; 4]));
    let other: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3, 4]));
    let with_dictionary = batch_of(vec![other.clone(), Arc::new(empty)]);
    let with_nulls = batch_of(vec![other, nulls]);
    for keys in [vec![1], vec![0, 1]] {
        for partitioning in [
            Partitioning::hash(keys.clone(), 7),
            Partitioning::spark(keys.clone(), 7),
        ] {
            assert_eq!(
                ids_of(&partitioning, &with_dictionary),
                ids_of(&partitioning, &with_nulls),
                "{:?} on {keys:?}",
                partitioning.scheme()
            );
        }
    }
}

/// The fast hash of row `i` of a nested column, row by row through arrow's own accessors (each
/// list value, map entry, struct field and union child taken as arrow gives it): the oracle the
/// columnar hash is held to. Flat leaves hash through the flat kernel, tested on its own.
fn nested_oracle(array: &dyn Array, i: usize) -> u64 {
    use arrow_array::cast::AsArray;
    use partout_core::ids::hash;
    if array.logical_nulls().is_some_and(|n| n.is_null(i)) {
        return hash::NULL_HASH;
    }
    let list = |value: ArrayRef| {
        let mut h = hash::list_start(value.len());
        for j in 0..value.len() {
            h = hash::combine(h, nested_oracle(value.as_ref(), j));
        }
        h
    };
    match array.data_type() {
        DataType::List(_) => list(array.as_list::<i32>().value(i)),
        DataType::LargeList(_) => list(array.as_list::<i64>().value(i)),
        DataType::ListView(_) => list(array.as_list_view::<i32>().value(i)),
        DataType::LargeListView(_) => list(array.as_list_view::<i64>().value(i)),
        DataType::FixedSizeList(_, _) => list(array.as_fixed_size_list().value(i)),
        DataType::Map(_, _) => list(Arc::new(array.as_map().value(i))),
        DataType::Struct(_) => array
            .as_struct()
            .columns()
            .iter()
            .fold(hash::STRUCT_START, |h, c| {
                hash::combine(h, nested_oracle(c.as_ref(), i))
            }),
        DataType::Union(_, _) => {
            let union = array.as_union();
            let t = union.type_id(i);
            let child = union.child(t);
            hash::combine(
                hash::union_start(t),
                nested_oracle(child.as_ref(), union.value_offset(i)),
            )
        }
        DataType::RunEndEncoded(run_ends, _) => {
            let (values, physical) = match run_ends.data_type() {
                DataType::Int16 => {
                    let run = array.as_run::<arrow_array::types::Int16Type>();
                    (run.values(), run.run_ends().get_physical_index(i))
                }
                DataType::Int32 => {
                    let run = array.as_run::<Int32Type>();
                    (run.values(), run.run_ends().get_physical_index(i))
                }
                _ => {
                    let run = array.as_run::<arrow_array::types::Int64Type>();
                    (run.values(), run.run_ends().get_physical_index(i))
                }
            };
            nested_oracle(values.as_ref(), physical)
        }
        _ => {
            let mut out = Vec::new();
            hash::value_hashes(array.slice(i, 1).as_ref(), &mut out).unwrap();
            out[0]
        }
    }
}

/// `array` (any type) as a run-end encoded column of Int32 run ends, runs of equal
/// neighbours merged.
fn run_end_encoded(array: &ArrayRef) -> ArrayRef {
    let mut ends = Vec::new();
    let mut starts = Vec::new();
    for i in 0..array.len() {
        let same = i > 0 && array.slice(i, 1).to_data() == array.slice(i - 1, 1).to_data();
        if same {
            *ends.last_mut().unwrap() += 1;
        } else {
            starts.push(i as u32);
            ends.push(i as i32 + 1);
        }
    }
    let mut values =
        arrow_select::take::take(array.as_ref(), &UInt32Array::from(starts.clone()), None).unwrap();
    if values.len() != starts.len() {
        // arrow 59's take gives fixed-size lists of size 0 the length of their (empty)
        // values: the runs' first rows, sliced and concatenated, instead.
        let rows: Vec<ArrayRef> = starts.iter().map(|&s| array.slice(s as usize, 1)).collect();
        let rows: Vec<&dyn Array> = rows.iter().map(|r| r.as_ref()).collect();
        values = arrow_select::concat::concat(&rows).unwrap();
    }
    if values.len() != starts.len() {
        // Neither keeps their length: the column stays as it is.
        return array.clone();
    }
    Arc::new(RunArray::try_new(&Int32Array::from(ends), values.as_ref()).unwrap())
}

/// `list` as a list view of the same values.
fn list_view(list: &ListArray) -> ArrayRef {
    let offsets = list.value_offsets();
    let starts: Vec<i32> = offsets[..offsets.len() - 1].to_vec();
    let sizes: Vec<i32> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
    let DataType::List(field) = list.data_type() else {
        unreachable!()
    };
    Arc::new(
        ListViewArray::try_new(
            field.clone(),
            starts.into(),
            sizes.into(),
            list.values().clone(),
            list.nulls().cloned(),
        )
        .unwrap(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Nested keys of every kind: the columnar hash equals the row-by-row oracle, on sliced
    /// arrays too; the same values run-end encoded, or a list as a list view, hash the same;
    /// ids depend only on the values, wherever the batch is split.
    #[test]
    fn nested_keys_hash_as_the_oracle_says(
        seed in any::<u64>(),
        type_index in 0..partout_testkit::nested_types().len(),
        rows in 1usize..120,
        split in 0usize..120,
        n in prop_oneof![Just(1u32), 2..=17u32, Just(1000u32)],
    ) {
        use partout_core::ids::hash;
        let mut rng = rng(seed);
        let data_type = partout_testkit::nested_types()[type_index].clone();
        let column = random_sliced_array(&data_type, rows, 0.2, &mut rng);
        let mut got = Vec::new();
        hash::value_hashes(column.as_ref(), &mut got).unwrap();
        let want: Vec<u64> = (0..rows).map(|i| nested_oracle(column.as_ref(), i)).collect();
        prop_assert_eq!(&got, &want, "{}", data_type);

        let ree = run_end_encoded(&column);
        let mut runs = Vec::new();
        hash::value_hashes(ree.as_ref(), &mut runs).unwrap();
        prop_assert_eq!(&runs, &want, "run-end encoded {}", data_type);
        let sliced = ree.slice(rows / 3, rows - rows / 3);
        hash::value_hashes(sliced.as_ref(), &mut runs).unwrap();
        prop_assert_eq!(&runs[..], &want[rows / 3..], "a slice of run-end encoded {}", data_type);

        if let Some(list) = column.as_any().downcast_ref::<ListArray>() {
            let mut views = Vec::new();
            hash::value_hashes(list_view(list).as_ref(), &mut views).unwrap();
            prop_assert_eq!(&views, &want, "{} as a list view", data_type);
        }

        let batch = batch_of(vec![column]);
        let partitioning = Partitioning::hash([0], n);
        let whole = ids_of(&partitioning, &batch);
        let split = split.min(rows);
        let mut pieces = ids_of(&partitioning, &batch.slice(0, split));
        pieces.extend(ids_of(&partitioning, &batch.slice(split, rows - split)));
        prop_assert_eq!(pieces, whole);
    }
}

/// Dense unions hash as the oracle says, and as the sparse union of the same values.
#[test]
fn dense_unions_hash_by_value() {
    use arrow_buffer::ScalarBuffer;
    use partout_core::ids::hash;
    let fields = arrow_schema::UnionFields::try_new(
        vec![0, 5],
        vec![
            Field::new("i", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
        ],
    )
    .unwrap();
    let type_ids: ScalarBuffer<i8> = vec![0, 5, 5, 0, 0, 5].into();
    let dense = UnionArray::try_new(
        fields.clone(),
        type_ids.clone(),
        Some(vec![0, 0, 1, 1, 2, 2].into()),
        vec![
            Arc::new(Int32Array::from(vec![Some(7), None, Some(7)])),
            Arc::new(StringArray::from(vec!["a", "b", "a"])),
        ],
    )
    .unwrap();
    let sparse = UnionArray::try_new(
        fields,
        type_ids,
        None,
        vec![
            Arc::new(Int32Array::from(vec![
                Some(7),
                None,
                None,
                None,
                Some(7),
                None,
            ])),
            Arc::new(StringArray::from(vec![
                None,
                Some("a"),
                Some("b"),
                None,
                None,
                Some("a"),
            ])),
        ],
    )
    .unwrap();
    let (mut d, mut s) = (Vec::new(), Vec::new());
    hash::value_hashes(&dense, &mut d).unwrap();
    hash::value_hashes(&sparse, &mut s).unwrap();
    let oracle: Vec<u64> = (0..6).map(|i| nested_oracle(&dense, i)).collect();
    assert_eq!(d, oracle);
    assert_eq!(d, s);
    // Equal values, equal hashes; the null int is the null hash; 7 and "a" differ.
    assert_eq!(d[0], d[4]);
    assert_eq!(d[1], d[5]);
    assert_eq!(d[3], hash::NULL_HASH);
    assert_ne!(d[0], d[1]);
}

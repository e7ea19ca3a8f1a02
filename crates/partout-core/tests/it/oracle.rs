//! Differential tests: `Partitioner` against `reference_partition` (one `take` per
//! destination) for every type, null density, slicing, partition count and id pattern; and
//! `partition_each`, batches laid out on several threads, against the same reference batch by
//! batch.

use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use arrow_array::{Array, RecordBatch};
use partout_core::{Partitioner, PartoutError, partition_each};
use partout_testkit::{
    IdPattern, assert_same_rows, every_type, random_batch, random_ids, random_sliced_array,
    reference_partition, rng,
};
use proptest::prelude::*;

/// Partitions `batch` by `ids` and checks the result against the oracle: each destination
/// equals `take(rows with that id)` in input order, every row lands exactly once, outputs are
/// valid arrays, and no null buffer is invented.
fn check(batch: &RecordBatch, ids: &[u32], num_partitions: u32, fanout: Option<u32>) {
    let mut partitioner = Partitioner::try_new(num_partitions).unwrap();
    if let Some(fanout) = fanout {
        partitioner = partitioner.with_fanout(fanout).unwrap();
    }
    let out = partitioner.partition(batch, ids).unwrap();
    let rows = batch.num_rows();
    assert_eq!(out.num_partitions(), num_partitions as usize);
    assert_eq!(out.offsets()[0], 0);
    assert_eq!(*out.offsets().last().unwrap() as usize, rows);
    assert!(out.offsets().windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(out.batch().num_rows(), rows);
    assert_eq!(out.batch().schema(), batch.schema());

    for (input, output) in batch.columns().iter().zip(out.batch().columns()) {
        output.to_data().validate_full().unwrap();
        if input.null_count() == 0 {
            assert!(
                output.nulls().is_none(),
                "a null buffer was invented for {}",
                input.data_type()
            );
        }
    }

    // Every row exactly once: the `row` column of the output (when the batch has one) is a
    // permutation of 0..rows, and each row sits in the destination its id names.
    if batch.schema().field(0).name() == "row" {
        let row_column = out.batch().column(0).as_primitive::<UInt32Type>();
        let mut seen = vec![false; rows];
        for p in 0..out.num_partitions() {
            for slot in out.range(p) {
                let row = row_column.value(slot) as usize;
                assert!(!seen[row], "row {row} appears twice");
                seen[row] = true;
                assert_eq!(ids[row] as usize, p, "row {row} is in destination {p}");
            }
        }
        assert!(seen.iter().all(|&s| s), "a row was lost");
    }

    let reference = reference_partition(batch, ids, num_partitions);
    for (p, want) in reference.iter().enumerate() {
        let got = out.partition(p);
        assert_eq!(out.num_rows(p), want.num_rows());
        assert_same_rows(&got, want, p);
    }
}

const DENSITIES: [f64; 3] = [0.0, 0.5, 1.0];

#[test]
fn every_type_every_density_matches_the_reference() {
    let mut rng = rng(0x5eed);
    for data_type in every_type() {
        for density in DENSITIES {
            for sliced in [false, true] {
                for num_partitions in [1u32, 3, 64, 2048] {
                    let rows = 150;
                    let batch = random_batch(
                        std::slice::from_ref(&data_type),
                        rows,
                        density,
                        sliced,
                        &mut rng,
                    );
                    let ids = random_ids(rows, num_partitions, IdPattern::Uniform, &mut rng);
                    check(&batch, &ids, num_partitions, None);
                }
            }
        }
    }
}

#[test]
fn all_types_in_one_batch_share_one_plan() {
    let mut rng = rng(7);
    let types = every_type();
    for (rows, num_partitions) in [
        (0, 5),
        (1, 1),
        (1000, 4),
        (1000, 17),
        (3000, 256),
        (500, 1000),
    ] {
        for pattern in [
            IdPattern::Uniform,
            IdPattern::Runs(4),
            IdPattern::AllTo(num_partitions - 1),
        ] {
            let batch = random_batch(&types, rows, 0.5, true, &mut rng);
            let ids = random_ids(rows, num_partitions, pattern, &mut rng);
            check(&batch, &ids, num_partitions, None);
        }
    }
}

/// A batch of one fixed-width column is moved while the plan is built, without an order
/// when it has no nulls: hold that path to the reference too.
#[test]
fn lone_fixed_width_columns_match_the_reference() {
    let mut rng = rng(13);
    for data_type in every_type()
        .into_iter()
        .filter(|t| t.primitive_width().is_some())
    {
        for density in DENSITIES {
            for (rows, num_partitions) in [(0, 3), (1, 1), (257, 4), (1000, 64), (777, 1500)] {
                let column = random_sliced_array(&data_type, rows, density, &mut rng);
                let batch = RecordBatch::try_from_iter([("c", column)]).unwrap();
                for pattern in [IdPattern::Uniform, IdPattern::Runs(4)] {
                    let ids = random_ids(rows, num_partitions, pattern, &mut rng);
                    check(&batch, &ids, num_partitions, None);
                    check(&batch, &ids, num_partitions, Some(1));
                }
            }
        }
    }
}

#[test]
fn every_fanout_gives_the_reference_result() {
    let mut rng = rng(11);
    let types = [
        arrow_schema::DataType::Int32,
        arrow_schema::DataType::Utf8View,
    ];
    for fanout in [1, 2, 8, 64, 1024] {
        for rows in [0, 1, 63, 1000, 1025] {
            let batch = random_batch(&types, rows, 0.5, false, &mut rng);
            let ids = random_ids(rows, 5, IdPattern::Runs(4), &mut rng);
            check(&batch, &ids, 5, Some(fanout));
        }
    }
}

#[test]
fn ids_of_the_wrong_length_or_range_are_errors() {
    let mut rng = rng(5);
    let batch = random_batch(&[arrow_schema::DataType::Int64], 10, 0.0, false, &mut rng);
    let mut partitioner = Partitioner::try_new(4).unwrap();
    assert!(matches!(
        partitioner.partition(&batch, &[0; 9]),
        Err(PartoutError::InvalidArgument(_))
    ));
    let mut ids = vec![1; 10];
    ids[6] = 4;
    let err = partitioner.partition(&batch, &ids).unwrap_err();
    assert!(
        matches!(
            err,
            PartoutError::PartitionIdOutOfRange {
                row: 6,
                id: 4,
                num_partitions: 4
            }
        ),
        "{err}"
    );
    assert!(matches!(
        Partitioner::try_new(0),
        Err(PartoutError::InvalidArgument(_))
    ));
}

fn partition_counts() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(1u32),
        2..=8u32,
        9..=300u32,
        301..=2048u32,
        Just(2048u32)
    ]
}

fn patterns(num_partitions: u32) -> impl Strategy<Value = IdPattern> {
    prop_oneof![
        Just(IdPattern::Uniform),
        (1usize..9).prop_map(IdPattern::Runs),
        (0..num_partitions).prop_map(IdPattern::AllTo),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    /// One random type per case; the failing case prints its seed and parameters.
    #[test]
    fn any_type_matches_the_reference(
        type_index in 0..every_type().len(),
        seed in any::<u64>(),
        rows in 0usize..400,
        density in prop::sample::select(DENSITIES.to_vec()),
        sliced in any::<bool>(),
        (num_partitions, pattern) in partition_counts().prop_flat_map(|n| (Just(n), patterns(n))),
    ) {
        let mut rng = rng(seed);
        let data_type = every_type().swap_remove(type_index);
        let batch = random_batch(&[data_type], rows, density, sliced, &mut rng);
        let ids = random_ids(rows, num_partitions, pattern, &mut rng);
        check(&batch, &ids, num_partitions, None);
    }

    /// Several random types in one batch, moved by one plan.
    #[test]
    fn mixed_batches_match_the_reference(
        type_indices in prop::collection::vec(0..every_type().len(), 1..6),
        seed in any::<u64>(),
        rows in 0usize..600,
        density in 0.0f64..=1.0,
        (num_partitions, pattern) in partition_counts().prop_flat_map(|n| (Just(n), patterns(n))),
    ) {
        let mut rng = rng(seed);
        let all = every_type();
        let types: Vec<_> = type_indices.iter().map(|&i| all[i].clone()).collect();
        let batch = random_batch(&types, rows, density, true, &mut rng);
        let ids = random_ids(rows, num_partitions, pattern, &mut rng);
        check(&batch, &ids, num_partitions, None);
    }

    /// Batches laid out on one to four threads: each result is its own batch's, as the
    /// reference partitions it, in batch order.
    #[test]
    fn batches_laid_out_on_several_threads_match_the_reference_in_order(
        threads in 1usize..=4,
        seed in any::<u64>(),
        rows in prop::collection::vec(0usize..300, 0..7),
        num_partitions in partition_counts(),
    ) {
        let mut rng = rng(seed);
        let all = every_type();
        let types = [all[seed as usize % all.len()].clone(), arrow_schema::DataType::Int64];
        let batches: Vec<(RecordBatch, Vec<u32>)> = rows
            .iter()
            .map(|&r| {
                let batch = random_batch(&types, r, 0.3, true, &mut rng);
                (batch, random_ids(r, num_partitions, IdPattern::Uniform, &mut rng))
            })
            .collect();
        let mut partitioners: Vec<Partitioner> =
            (0..threads).map(|_| Partitioner::try_new(num_partitions).unwrap()).collect();
        let out = partition_each(&mut partitioners, &batches).unwrap();
        prop_assert_eq!(out.len(), batches.len());
        for ((batch, ids), out) in batches.iter().zip(&out) {
            let reference = reference_partition(batch, ids, num_partitions);
            for (p, want) in reference.iter().enumerate() {
                assert_same_rows(&out.partition(p), want, p);
            }
        }
    }
}

/// The first failing batch's error, in batch order, whichever thread laid it out; and no
/// partitioner, an error.
#[test]
fn laying_out_on_several_threads_gives_the_first_error_in_batch_order() {
    let mut rng = rng(9);
    let batch = random_batch(&[arrow_schema::DataType::Int64], 10, 0.0, false, &mut rng);
    let good = (batch.clone(), vec![0u32; 10]);
    let bad = |id: u32| {
        let mut ids = vec![0u32; 10];
        ids[3] = id;
        (batch.clone(), ids)
    };
    let batches = [good.clone(), bad(7), bad(9), good];
    let mut partitioners: Vec<Partitioner> =
        (0..3).map(|_| Partitioner::try_new(4).unwrap()).collect();
    let err = partition_each(&mut partitioners, &batches).unwrap_err();
    assert!(
        matches!(err, PartoutError::PartitionIdOutOfRange { id: 7, .. }),
        "{err}"
    );
    assert!(matches!(
        partition_each(&mut [], &batches),
        Err(PartoutError::InvalidArgument(_))
    ));
}

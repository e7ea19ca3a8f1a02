//! `DestinationBuffers` against the reference: rows appended batch after batch (by a plan's
//! order, or as ranges of a partitioned batch) and taken out at random points equal the
//! concatenation of each batch's reference partition, in input order.

use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use partout_core::{DestinationBuffers, Partitioner, PartoutError, ScatterPlan};
use partout_testkit::{IdPattern, every_type, random_batch, random_ids, reference_partition, rng};
use proptest::prelude::*;

/// What each destination should hold: the reference rows of every batch since its last take.
struct Expected {
    pending: Vec<Vec<RecordBatch>>,
}

impl Expected {
    fn push(&mut self, batch: &RecordBatch, ids: &[u32], n: u32) {
        for (p, part) in reference_partition(batch, ids, n).into_iter().enumerate() {
            if part.num_rows() > 0 {
                self.pending[p].push(part);
            }
        }
    }

    fn check_take(&mut self, buffers: &mut DestinationBuffers, p: usize) {
        let want = std::mem::take(&mut self.pending[p]);
        let rows: usize = want.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(buffers.rows(p), rows, "destination {p}'s row count");
        let got = buffers.take(p).unwrap();
        assert_eq!(buffers.rows(p), 0);
        assert_eq!(got.num_rows(), rows);
        let schema = got.schema();
        let want = arrow_select::concat::concat_batches(&schema, &want).unwrap();
        for (c, (g, w)) in got.columns().iter().zip(want.columns()).enumerate() {
            g.to_data().validate_full().unwrap();
            assert_eq!(
                g.as_ref(),
                w.as_ref(),
                "destination {p}, column {c} ({})",
                w.data_type()
            );
            // View columns come out compact: their data buffers hold just the out-of-line
            // bytes their rows reference (the writer's encoder relies on it, and skips its
            // check: `Flushed::Compact`).
            if matches!(g.data_type(), DataType::Utf8View | DataType::BinaryView) {
                let data = g.to_data();
                let views: &[u128] = data.buffers()[0].typed_data();
                let views = &views[data.offset()..data.offset() + data.len()];
                let referenced: usize = views
                    .iter()
                    .map(|&v| v as u32 as usize)
                    .filter(|&len| len > 12)
                    .sum();
                let held: usize = data.buffers()[1..].iter().map(|b| b.len()).sum();
                assert_eq!(held, referenced, "destination {p}, column {c}: not compact");
            }
            if w.null_count() == 0 && w.data_type() != &DataType::Null {
                assert!(
                    g.nulls().is_none(),
                    "a null buffer was invented for {}",
                    w.data_type()
                );
            }
        }
        buffers.recycle(p, got);
    }
}

/// Appends `batches` (alternating the two ways in) and takes destinations out at the points
/// `takes` names, checking each against the reference.
fn run(
    types: &[DataType],
    n: u32,
    batches: &[(usize, IdPattern, f64)],
    takes: &[usize],
    seed: u64,
) {
    let mut rng = rng(seed);
    let schema = random_batch(types, 0, 0.0, false, &mut rng).schema();
    let mut buffers = DestinationBuffers::try_new(schema, n as usize).unwrap();
    let mut expected = Expected {
        pending: vec![Vec::new(); n as usize],
    };
    let mut plan = ScatterPlan::new();
    let mut partitioner = Partitioner::try_new(n).unwrap();
    for (k, &(rows, pattern, density)) in batches.iter().enumerate() {
        let batch = random_batch(types, rows, density, k % 3 == 1, &mut rng);
        let ids = random_ids(rows, n, pattern, &mut rng);
        if k % 2 == 0 {
            plan.build(&ids, n).unwrap();
            buffers.append(&batch, &plan).unwrap();
        } else {
            let partitioned = partitioner.partition(&batch, &ids).unwrap();
            buffers.append_partitioned(&partitioned).unwrap();
        }
        expected.push(&batch, &ids, n);
        let total: usize = (0..n as usize).map(|p| buffers.bytes(p)).sum();
        assert_eq!(buffers.buffered_bytes(), total);
        assert!(buffers.held_bytes() >= buffers.buffered_bytes());
        if let Some(&p) = takes.get(k) {
            expected.check_take(&mut buffers, p % n as usize);
        }
    }
    for p in 0..n as usize {
        expected.check_take(&mut buffers, p);
    }
    assert_eq!(buffers.buffered_bytes(), 0);
}

#[test]
fn every_type_round_trips_through_the_buffers() {
    for (i, data_type) in every_type().into_iter().enumerate() {
        let batches = [
            (200, IdPattern::Uniform, 0.0),
            (1, IdPattern::Uniform, 1.0),
            (300, IdPattern::Runs(4), 0.5),
            (0, IdPattern::Uniform, 0.5),
            (150, IdPattern::AllTo(2), 0.5),
            (100, IdPattern::Uniform, 0.0),
        ];
        run(
            std::slice::from_ref(&data_type),
            5,
            &batches,
            &[1, 7, 2, 0],
            i as u64,
        );
    }
}

#[test]
fn all_types_together_with_many_destinations() {
    let types = every_type();
    for n in [1u32, 3, 64, 2000] {
        let batches = [
            (1000, IdPattern::Uniform, 0.5),
            (700, IdPattern::Runs(4), 0.0),
            (1000, IdPattern::Uniform, 1.0),
        ];
        run(&types, n, &batches, &[0, 5], u64::from(n));
    }
}

/// Batches of thousands of rows over a few destinations (long runs per destination), every
/// type together, with and without nulls.
#[test]
fn long_runs_per_destination_round_trip() {
    let types = every_type();
    for n in [2u32, 8] {
        let batches = [
            (4096, IdPattern::Uniform, 0.0),
            (4096, IdPattern::Runs(4), 0.5),
            (100, IdPattern::Uniform, 0.5),
            (4096, IdPattern::AllTo(1), 1.0),
            (3000, IdPattern::Uniform, 0.5),
        ];
        run(&types, n, &batches, &[1, 0, 3], 70 + u64::from(n));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_appends_and_takes(
        type_picks in prop::collection::vec(0usize..64, 1..4),
        n in 1u32..300,
        batches in prop::collection::vec((0usize..400, 0u8..3, 0u8..3), 1..6),
        takes in prop::collection::vec(0usize..300, 0..6),
        seed in any::<u64>(),
    ) {
        let all = every_type();
        let types: Vec<DataType> = type_picks.iter().map(|&i| all[i % all.len()].clone()).collect();
        let batches: Vec<(usize, IdPattern, f64)> = batches
            .into_iter()
            .map(|(rows, pattern, density)| {
                let pattern = match pattern {
                    0 => IdPattern::Uniform,
                    1 => IdPattern::Runs(4),
                    _ => IdPattern::AllTo(n - 1),
                };
                (rows, pattern, [0.0, 0.5, 1.0][density as usize])
            })
            .collect();
        run(&types, n, &batches, &takes, seed);
    }
}

#[test]
fn mismatched_batches_are_refused_and_change_nothing() {
    let mut rng = rng(9);
    let batch = random_batch(&[DataType::Int64, DataType::Utf8], 10, 0.5, false, &mut rng);
    let mut buffers = DestinationBuffers::try_new(batch.schema(), 3).unwrap();
    let mut plan = ScatterPlan::new();
    plan.build(&[0; 9], 3).unwrap();
    assert!(matches!(
        buffers.append(&batch, &plan),
        Err(PartoutError::InvalidArgument(_))
    ));
    plan.build(&[0; 10], 4).unwrap();
    assert!(matches!(
        buffers.append(&batch, &plan),
        Err(PartoutError::InvalidArgument(_))
    ));
    let other = random_batch(&[DataType::Int32, DataType::Utf8], 10, 0.5, false, &mut rng);
    plan.build(&[1; 10], 3).unwrap();
    let err = buffers.append(&other, &plan).unwrap_err();
    assert!(err.to_string().contains("schema"), "{err}");
    assert_eq!(buffers.rows(1), 0);
    assert_eq!(buffers.buffered_bytes(), 0);
    assert!(DestinationBuffers::try_new(batch.schema(), 0).is_err());
}

/// A nested column whose rows cannot be moved (a list child past `u32::MAX` values: a
/// `LargeList` of nulls costs no memory) is refused after the plan and room checks pass; the
/// columns before it must not have been appended either, and the buffers stay usable.
#[test]
fn a_batch_refused_while_moving_a_nested_column_changes_nothing() {
    use arrow_array::{Int64Array, LargeListArray, NullArray};
    use arrow_buffer::OffsetBuffer;
    use arrow_schema::Field;
    use std::sync::Arc;

    let child_len = u32::MAX as usize + 2;
    let lists = LargeListArray::new(
        Arc::new(Field::new_list_field(DataType::Null, true)),
        OffsetBuffer::new(vec![0i64, 1, child_len as i64].into()),
        Arc::new(NullArray::new(child_len)),
        None,
    );
    let numbers: Arc<dyn Array> = Arc::new(Int64Array::from(vec![7, 8]));
    let huge =
        RecordBatch::try_from_iter([("n", numbers.clone()), ("l", Arc::new(lists) as _)]).unwrap();
    let mut buffers = DestinationBuffers::try_new(huge.schema(), 2).unwrap();
    let mut plan = ScatterPlan::new();
    plan.build(&[0, 1], 2).unwrap();
    let err = buffers.append(&huge, &plan).unwrap_err();
    assert!(matches!(err, PartoutError::TooLarge(_)), "{err}");
    for p in 0..2 {
        assert_eq!(buffers.rows(p), 0, "destination {p}");
    }
    assert_eq!(buffers.buffered_bytes(), 0);

    // A batch that fits goes in whole afterwards, its columns of equal length.
    let small = huge.slice(0, 1);
    let small = RecordBatch::try_new(
        small.schema(),
        vec![
            small.column(0).clone(),
            Arc::new(LargeListArray::new(
                Arc::new(Field::new_list_field(DataType::Null, true)),
                OffsetBuffer::new(vec![0i64, 3].into()),
                Arc::new(NullArray::new(3)),
                None,
            )),
        ],
    )
    .unwrap();
    plan.build(&[1], 2).unwrap();
    buffers.append(&small, &plan).unwrap();
    assert_eq!(buffers.rows(1), 1);
    let taken = buffers.take(1).unwrap();
    assert_eq!(taken, small);
}

/// Buffers handed back by `recycle` are reused: a second round of the same appends holds no
/// more memory than the first.
#[test]
fn recycled_buffers_are_reused() {
    let mut rng = rng(21);
    let types = [
        DataType::Int64,
        DataType::Utf8,
        DataType::Boolean,
        DataType::Utf8View,
    ];
    let batch = random_batch(&types, 4096, 0.3, false, &mut rng);
    let ids = random_ids(4096, 8, IdPattern::Uniform, &mut rng);
    let mut plan = ScatterPlan::new();
    plan.build(&ids, 8).unwrap();
    let mut buffers = DestinationBuffers::try_new(batch.schema(), 8).unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        for _ in 0..4 {
            buffers.append(&batch, &plan).unwrap();
        }
        held.push(buffers.held_bytes());
        for p in 0..8 {
            let out = buffers.take(p).unwrap();
            assert_eq!(out.num_rows(), 4 * plan.range(p).len());
            buffers.recycle(p, out);
        }
    }
    assert!(held[1] <= held[0] && held[2] == held[1], "{held:?}");
    for p in 0..8 {
        buffers.release(p);
    }
    assert_eq!(buffers.held_bytes(), 0);
}

/// Batches merged into the buffers together (`append_many`, up to `MAX_MERGED` at once, empty
/// batches among them) leave every destination the rows a batch-by-batch append leaves it,
/// in input order, for every type; more than `MAX_MERGED` batches at once are refused, and
/// one refused batch refuses the whole call.
fn merge_and_check(types: &[DataType], n: u32, groups: &[Vec<usize>], seed: u64) {
    use partout_core::MAX_MERGED;
    let mut rng = rng(seed);
    let schema = random_batch(types, 0, 0.0, false, &mut rng).schema();
    let mut buffers = DestinationBuffers::try_new(schema, n as usize).unwrap();
    let mut expected = Expected {
        pending: vec![Vec::new(); n as usize],
    };
    for (g, group) in groups.iter().enumerate() {
        let batches: Vec<(RecordBatch, ScatterPlan)> = group
            .iter()
            .enumerate()
            .map(|(k, &rows)| {
                let batch = random_batch(types, rows, [0.0, 0.5, 1.0][k % 3], k % 2 == 1, &mut rng);
                let ids = random_ids(rows, n, IdPattern::Uniform, &mut rng);
                let mut plan = ScatterPlan::new();
                plan.build(&ids, n).unwrap();
                expected.push(&batch, &ids, n);
                (batch, plan)
            })
            .collect();
        let inputs: Vec<(&RecordBatch, &ScatterPlan)> =
            batches.iter().map(|(b, p)| (b, p)).collect();
        if inputs.len() > MAX_MERGED {
            let err = buffers.append_many(&inputs).unwrap_err();
            assert!(matches!(err, PartoutError::InvalidArgument(_)), "{err}");
            for chunk in inputs.chunks(MAX_MERGED) {
                buffers.append_many(chunk).unwrap();
            }
        } else {
            buffers.append_many(&inputs).unwrap();
        }
        let total: usize = (0..n as usize).map(|p| buffers.bytes(p)).sum();
        assert_eq!(buffers.buffered_bytes(), total);
        if g % 2 == 1 {
            expected.check_take(&mut buffers, g % n as usize);
        }
    }
    // A batch whose plan is for other destinations refuses the call it is in, whole.
    let held = buffers.buffered_bytes();
    let batch = random_batch(types, 10, 0.5, false, &mut rng);
    let mut good = ScatterPlan::new();
    good.build(&random_ids(10, n, IdPattern::Uniform, &mut rng), n)
        .unwrap();
    let mut bad = ScatterPlan::new();
    bad.build(&[0; 10], n + 1).unwrap();
    assert!(
        buffers
            .append_many(&[(&batch, &good), (&batch, &bad)])
            .is_err()
    );
    assert_eq!(buffers.buffered_bytes(), held);
    for p in 0..n as usize {
        expected.check_take(&mut buffers, p);
    }
}

#[test]
fn every_type_merges_batches_as_it_appends_them() {
    for (i, data_type) in every_type().into_iter().enumerate() {
        let groups = vec![
            vec![200, 0, 31],
            vec![1],
            vec![50; 8],
            vec![7; 9],
            vec![300, 300],
        ];
        merge_and_check(
            std::slice::from_ref(&data_type),
            [3, 700][i % 2],
            &groups,
            i as u64,
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn random_merges_equal_the_reference(
        type_picks in prop::collection::vec(0usize..64, 1..4),
        n in 1u32..1200,
        groups in prop::collection::vec(prop::collection::vec(0usize..300, 1..10), 1..5),
        seed in any::<u64>(),
    ) {
        let all = every_type();
        let types: Vec<DataType> = type_picks.iter().map(|&i| all[i % all.len()].clone()).collect();
        merge_and_check(&types, n, &groups, seed);
    }
}

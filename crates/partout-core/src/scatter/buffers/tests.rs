//! The destination buffers' unit tests, which also run under Miri: nested, dictionary and
//! every other layout appended and taken back, and renewed buffers taking the same rows
//! without growing.

use super::*;
use crate::Partitioner;
use crate::scatter::tests::{NESTED_ROWS, ids_leaving_one_empty, nested_columns};
use arrow_array::{
    ArrayRef, BooleanArray, Decimal128Array, FixedSizeBinaryArray, Int16Array, LargeStringArray,
    StringViewArray, UInt32Array,
};
use std::sync::Arc;

/// Dictionary and nested columns (kept as moved pieces, concatenated by `take`), small
/// enough for Miri: sliced inputs with nulls at every level, both ways in, a destination
/// that never receives a row, takes of one piece, of several and of none.
#[test]
fn nested_and_dictionary_columns_append_and_take() {
    let batch = RecordBatch::try_from_iter(
        nested_columns()
            .into_iter()
            .enumerate()
            .map(|(i, c)| (format!("c{i}"), c)),
    )
    .unwrap();
    let ids = ids_leaving_one_empty();
    let mut plan = ScatterPlan::new();
    plan.build(&ids, 4).unwrap();
    let mut partitioner = Partitioner::try_new(4).unwrap();
    let partitioned = partitioner.partition(&batch, &ids).unwrap();
    let mut buffers = DestinationBuffers::try_new(batch.schema(), 4).unwrap();
    let rows_of = |p: u32| -> Vec<u32> {
        (0..NESTED_ROWS as u32)
            .filter(|&r| ids[r as usize] == p)
            .collect()
    };
    let expect = |rows: &[u32], times: usize| -> Vec<ArrayRef> {
        let indices = UInt32Array::from(rows.repeat(times));
        batch
            .columns()
            .iter()
            .map(|c| arrow_select::take::take(c.as_ref(), &indices, None).unwrap())
            .collect()
    };
    let check = |got: &RecordBatch, want: &[ArrayRef], p: usize| {
        assert_eq!(got.num_rows(), want[0].len(), "destination {p}");
        for (g, w) in got.columns().iter().zip(want) {
            g.to_data().validate_full().unwrap();
            assert_eq!(g.as_ref(), w.as_ref(), "destination {p}, {}", w.data_type());
        }
    };

    // One piece per destination, then two.
    buffers.append(&batch, &plan).unwrap();
    let first = buffers.take(0).unwrap();
    check(&first, &expect(&rows_of(0), 1), 0);
    buffers.recycle(0, first);
    buffers.append_partitioned(&partitioned).unwrap();
    for p in 0..4 {
        let times = if p == 0 { 1 } else { 2 };
        let out = buffers.take(p).unwrap();
        check(&out, &expect(&rows_of(p as u32), times), p);
        buffers.recycle(p, out);
        assert_eq!(buffers.rows(p), 0);
    }
    assert_eq!(buffers.rows(2), 0);
    // Nothing appended since: every destination takes out empty.
    for p in 0..4 {
        let out = buffers.take(p).unwrap();
        check(&out, &expect(&[], 1), p);
        buffers.release(p);
    }
    assert_eq!(buffers.buffered_bytes(), 0);
    assert_eq!(buffers.held_bytes(), 0);
}

/// A batch of `columns`, named `c0`, `c1`, ….
fn numbered(columns: &[ArrayRef]) -> RecordBatch {
    RecordBatch::try_from_iter(
        columns
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("c{i}"), c.clone())),
    )
    .unwrap()
}

/// Rows of [`mixed_rows`]: fewer under Miri, still past two words of bits.
const MIXED_ROWS: usize = if cfg!(miri) { 130 } else { 300 };

/// [`MIXED_ROWS`] rows of a column of each layout the buffers keep apart: fixed-width with
/// nulls, offsets and bytes, views with out-of-line data, bits.
fn mixed_rows() -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int16Array::from_iter(
            (0..MIXED_ROWS as i16).map(|i| (i % 4 != 0).then_some(i)),
        )),
        Arc::new(LargeStringArray::from_iter_values(
            (0..MIXED_ROWS).map(|i| "xy".repeat(i % 9)),
        )),
        Arc::new(StringViewArray::from_iter_values(
            (0..MIXED_ROWS).map(|i| "a string longer than twelve bytes".repeat(i % 3)),
        )),
        Arc::new(BooleanArray::from_iter(
            (0..MIXED_ROWS).map(|i| Some(i % 3 == 0)),
        )),
    ];
    numbered(&columns)
}

/// A destination renewed after a take holds buffers of the taken batch's sizes: the same
/// rows again fit without growing them, and the batch handed on keeps its rows.
#[test]
fn renewed_or_recycled_buffers_take_the_same_rows_without_growing() {
    let batch = mixed_rows();
    let ids: Vec<u32> = (0..MIXED_ROWS as u32).map(|i| i % 2).collect();
    let mut plan = ScatterPlan::new();
    plan.build(&ids, 2).unwrap();
    // Each destination's rows, copied by arrow's take: what every batch must hold.
    let expected: Vec<RecordBatch> = (0..2u32)
        .map(|p| {
            let rows: Vec<u32> = (0..MIXED_ROWS as u32)
                .filter(|&r| ids[r as usize] == p)
                .collect();
            let indices = UInt32Array::from(rows);
            arrow_select::take::take_record_batch(&batch, &indices).unwrap()
        })
        .collect();
    // Renewed, or recycled while the batch taken is still held (its buffers cannot come
    // back): new buffers of the same size either way.
    for recycled in [false, true] {
        let mut buffers = DestinationBuffers::try_new(batch.schema(), 2).unwrap();
        buffers.append(&batch, &plan).unwrap();
        let first: Vec<RecordBatch> = (0..2).map(|p| buffers.take(p).unwrap()).collect();
        for (p, kept) in first.iter().enumerate() {
            match recycled {
                false => buffers.renew(p),
                true => buffers.recycle(p, kept.clone()),
            }
        }
        assert_eq!(buffers.rows(0) + buffers.rows(1), 0);
        let renewed = buffers.held_bytes();
        let sizes: usize = first.iter().map(|b| b.get_array_memory_size()).sum();
        assert!(
            renewed >= sizes / 2,
            "recycled {recycled}: {renewed} of {sizes}"
        );
        buffers.append(&batch, &plan).unwrap();
        assert_eq!(
            buffers.held_bytes(),
            renewed,
            "recycled {recycled}: a buffer grew"
        );
        for p in 0..2 {
            assert_eq!(buffers.take(p).unwrap(), expected[p], "destination {p}");
            assert_eq!(first[p], expected[p], "the batch handed on is untouched");
        }
    }
}

/// A destination whose taken batch is still held takes the buffers of a donor (an earlier
/// batch nothing holds any more) instead of new ones: the next batch taken lives in the
/// donor's memory and holds the right rows. A donor still shared elsewhere, or of another
/// schema, is let go and new buffers come instead; the batches handed on keep their rows.
#[test]
fn recycling_with_a_donor_reuses_its_buffers() {
    let batch = mixed_rows();
    let ids = vec![0u32; MIXED_ROWS];
    let mut plan = ScatterPlan::new();
    plan.build(&ids, 1).unwrap();
    let first_values = |b: &RecordBatch| -> Vec<*const u8> {
        b.columns()
            .iter()
            .map(|c| c.to_data().buffers()[0].as_ptr())
            .collect()
    };
    for case in ["free donor", "shared donor", "other schema"] {
        let mut buffers = DestinationBuffers::try_new(batch.schema(), 1).unwrap();
        buffers.append(&batch, &plan).unwrap();
        let donor = buffers.take(0).unwrap();
        buffers.renew(0);
        buffers.append(&batch, &plan).unwrap();
        let held = buffers.take(0).unwrap();
        let donor_memory = first_values(&donor);
        let (donor, kept) = match case {
            "free donor" => (donor, None),
            "shared donor" => (donor.clone(), Some(donor)),
            _ => (
                RecordBatch::try_from_iter([(
                    "other",
                    Arc::new(Int16Array::from(vec![1, 2])) as ArrayRef,
                )])
                .unwrap(),
                Some(donor),
            ),
        };
        buffers.recycle_with(0, held.clone(), Some(donor));
        buffers.append(&batch, &plan).unwrap();
        let next = buffers.take(0).unwrap();
        assert_eq!(next, batch, "{case}: the rows");
        assert_eq!(held, batch, "{case}: the batch handed on is untouched");
        let reused = first_values(&next) == donor_memory;
        assert_eq!(
            reused,
            case == "free donor",
            "{case}: the donor's memory reused"
        );
        if let Some(kept) = kept {
            assert_eq!(kept, batch, "{case}: the shared donor is untouched");
        }
    }
}

/// Every kernel of the buffers on a few rows (small enough for Miri): both ways in,
/// unaligned and sliced inputs, a take in the middle.
#[test]
fn every_layout_appends_and_takes() {
    let long = "a string longer than twelve bytes";
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int16Array::from_iter(
            (0..23).map(|i| (i % 4 != 0).then_some(i)),
        )),
        Arc::new(Decimal128Array::from_iter_values(
            (0..23).map(|i| i * 1_000_000_007),
        )),
        Arc::new(
            FixedSizeBinaryArray::try_from_iter((0..24u8).map(|i| [i, i + 1, i + 2]))
                .unwrap()
                .slice(1, 23),
        ),
        Arc::new(BooleanArray::from_iter(
            (0..23).map(|i| (i % 5 != 1).then_some(i % 3 == 0)),
        )),
        Arc::new(LargeStringArray::from_iter_values(
            (0..23).map(|i| "xy".repeat(i % 6)),
        )),
        Arc::new(StringViewArray::from_iter((0..23).map(|i| {
            (i % 7 != 3).then(|| {
                if i % 2 == 0 {
                    &long[i..]
                } else {
                    &long[..i % 12]
                }
            })
        }))),
    ];
    let batch = numbered(&columns);
    let ids: Vec<u32> = (0..23u32).map(|i| (i * 5 + i / 4) % 3).collect();
    let mut plan = ScatterPlan::new();
    plan.build(&ids, 3).unwrap();
    let mut partitioner = Partitioner::try_new(3).unwrap();
    let partitioned = partitioner.partition(&batch, &ids).unwrap();
    let mut buffers = DestinationBuffers::try_new(batch.schema(), 3).unwrap();
    buffers.append(&batch, &plan).unwrap();
    let first = buffers.take(2).unwrap();
    buffers.append_partitioned(&partitioned).unwrap();
    buffers.recycle(2, first.clone());
    buffers.append(&batch, &plan).unwrap();
    for p in 0..3 {
        let rows: Vec<u32> = (0..23u32)
            .filter(|&r| ids[r as usize] == p as u32)
            .collect();
        let times = if p == 2 { 2 } else { 3 };
        let out = buffers.take(p).unwrap();
        assert_eq!(out.num_rows(), rows.len() * times);
        for (c, column) in out.columns().iter().enumerate() {
            column.to_data().validate_full().unwrap();
            for (k, value) in (0..column.len())
                .map(|k| (k, column.slice(k, 1)))
                .collect::<Vec<_>>()
            {
                let row = rows[k % rows.len()] as usize;
                assert_eq!(
                    value.as_ref(),
                    batch.column(c).slice(row, 1).as_ref(),
                    "{p} {c} {k}"
                );
            }
        }
        if p == 2 {
            assert_eq!(first.num_rows(), rows.len());
        }
        buffers.recycle(p, out);
    }
}

/// A destination costs its column buffers only once met: of 1,000 destinations, the one that
/// receives rows has them; one released after its rows were taken costs what one never met
/// does, and takes rows again; one never met takes out empty, of the schema.
#[test]
fn destinations_have_column_buffers_only_once_met() {
    let batch = mixed_rows();
    let mut plan = ScatterPlan::new();
    plan.build(&vec![7u32; batch.num_rows()], 1000).unwrap();
    let mut buffers = DestinationBuffers::try_new(batch.schema(), 1000).unwrap();
    let met = |buffers: &DestinationBuffers| {
        buffers
            .destinations
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.columns.is_empty())
            .map(|(p, _)| p)
            .collect::<Vec<_>>()
    };
    assert_eq!(met(&buffers), Vec::<usize>::new());
    buffers.append(&batch, &plan).unwrap();
    assert_eq!(met(&buffers), [7]);
    let out = buffers.take(7).unwrap();
    assert_eq!(out, batch);
    buffers.renew(7);
    buffers.release(7);
    assert_eq!(met(&buffers), Vec::<usize>::new());
    assert_eq!(buffers.held_bytes(), 0);
    buffers.append(&batch, &plan).unwrap();
    assert_eq!(buffers.take(7).unwrap(), batch);
    let never = buffers.take(8).unwrap();
    assert_eq!(never.num_rows(), 0);
    assert_eq!(never.schema(), batch.schema());
    assert_eq!(
        met(&buffers),
        [7],
        "taking from one never met gives it no buffers"
    );
    assert_eq!(buffers.destinations_in_use(), 8);
}

/// Plans may cover the first destinations only (those met so far): merged with a plan over
/// all of them, each destination takes exactly its rows, in order, as arrow's take gives
/// them; a plan over more destinations than the buffers hold is refused.
#[test]
fn plans_over_the_first_destinations_append_their_rows_only() {
    let batch = mixed_rows();
    let n = batch.num_rows() as u32;
    let (few, all): (Vec<u32>, Vec<u32>) = (
        (0..n).map(|i| i % 3).collect(),
        (0..n).map(|i| i % 5 * 100).collect(),
    );
    let (mut over_few, mut over_all) = (ScatterPlan::new(), ScatterPlan::new());
    over_few.build(&few, 3).unwrap();
    over_all.build(&all, 512).unwrap();
    let mut buffers = DestinationBuffers::try_new(batch.schema(), 512).unwrap();
    buffers
        .append_many(&[
            (&batch, &over_few),
            (&batch, &over_all),
            (&batch, &over_few),
        ])
        .unwrap();
    assert_eq!(buffers.destinations_in_use(), 401);
    // Destinations without rows hold none; those with rows (and a few without, within the
    // plans and past them) are compared whole: taking each of 512 is minutes under Miri.
    let with_rows = [0, 1, 2, 100, 200, 300, 400];
    for p in 0..512 {
        assert_eq!(
            buffers.rows(p) > 0,
            with_rows.contains(&p),
            "destination {p}"
        );
    }
    for p in with_rows.into_iter().chain([3, 99, 401, 511]) {
        let p = p as u32;
        let mut rows: Vec<u32> = (0..n).filter(|&r| p < 3 && few[r as usize] == p).collect();
        rows.extend((0..n).filter(|&r| all[r as usize] == p));
        rows.extend((0..n).filter(|&r| p < 3 && few[r as usize] == p));
        let want = arrow_select::take::take_record_batch(&batch, &UInt32Array::from(rows)).unwrap();
        assert_eq!(buffers.take(p as usize).unwrap(), want, "destination {p}");
    }
    let mut beyond = ScatterPlan::new();
    beyond.build(&few, 513).unwrap();
    let small = DestinationBuffers::try_new(batch.schema(), 512)
        .unwrap()
        .append(&batch, &beyond);
    assert!(small.is_err());
}

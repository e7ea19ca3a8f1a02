//! The shared output builders' unit tests, which also run under Miri: every layout appended
//! whole and in parts from several gathered batches, renewed buffers taking as many rows again
//! without growing, and the refusals.

use super::*;
use crate::scatter::tests::{NESTED_ROWS, ids_leaving_one_empty, nested_columns};
use arrow_array::{
    BooleanArray, Int64Array, LargeStringArray, StringArray, StringViewArray, UInt32Array,
};

fn numbered(columns: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_from_iter(
        columns
            .into_iter()
            .enumerate()
            .map(|(i, c)| (format!("c{i}"), c)),
    )
    .unwrap()
}

/// Every flat layout (fixed width, bits, offsets of both widths, views with long and short
/// values), sliced, with nulls.
fn flat_columns() -> Vec<ArrayRef> {
    let n = NESTED_ROWS + 3;
    let long = |i: usize| format!("a value longer than twelve bytes {i}");
    let ints = Int64Array::from_iter((0..n as i64).map(|i| (i % 5 != 2).then_some(i * 7)));
    let bools = BooleanArray::from_iter((0..n).map(|i| (i % 4 != 1).then_some(i % 3 == 0)));
    let strings = StringArray::from_iter((0..n).map(|i| (i % 6 != 0).then(|| format!("s{i}"))));
    let large = LargeStringArray::from_iter_values((0..n).map(|i| "x".repeat(i % 4)));
    let views = StringViewArray::from_iter(
        (0..n).map(|i| (i % 7 != 4).then(|| if i % 2 == 0 { long(i) } else { format!("v{i}") })),
    );
    [
        Arc::new(ints) as ArrayRef,
        Arc::new(bools),
        Arc::new(strings),
        Arc::new(large),
        Arc::new(views),
    ]
    .into_iter()
    .map(|c| c.slice(2, NESTED_ROWS))
    .collect()
}

/// The reference: the rows of `batch` whose id is `p`, by arrow's `take`, for each batch in
/// turn.
fn reference(inputs: &[(&RecordBatch, &[u32])], p: u32) -> Vec<ArrayRef> {
    let schema = inputs[0].0.schema();
    let parts: Vec<RecordBatch> = inputs
        .iter()
        .map(|(batch, ids)| {
            let rows: Vec<u32> = (0..ids.len() as u32)
                .filter(|&r| ids[r as usize] == p)
                .collect();
            let indices = UInt32Array::from(rows);
            let columns = batch
                .columns()
                .iter()
                .map(|c| arrow_select::take::take(c.as_ref(), &indices, None).unwrap())
                .collect();
            RecordBatch::try_new_with_options(
                schema.clone(),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(indices.len())),
            )
            .unwrap()
        })
        .collect();
    arrow_select::concat::concat_batches(&schema, &parts)
        .unwrap()
        .columns()
        .to_vec()
}

fn check(got: &RecordBatch, want: &[ArrayRef], p: u32) {
    assert_eq!(got.num_rows(), want[0].len(), "destination {p}");
    for (g, w) in got.columns().iter().zip(want) {
        g.to_data().validate_full().unwrap();
        assert_eq!(g.as_ref(), w.as_ref(), "destination {p}, {}", w.data_type());
        if w.null_count() == 0 {
            assert!(
                g.nulls().is_none(),
                "a null buffer invented for {}",
                w.data_type()
            );
        }
    }
}

/// Two batches, as two producers would gather them, appended to the same builders: the first
/// whole, the second in two parts around a finish (an exact row count), for flat, dictionary
/// and nested columns alike.
#[test]
fn every_layout_appends_whole_and_in_parts() {
    for columns in [flat_columns(), nested_columns()] {
        let first = numbered(columns.clone());
        let second = numbered(columns.iter().map(|c| c.slice(1, c.len() - 1)).collect());
        let first_ids = ids_leaving_one_empty();
        let second_ids: Vec<u32> = (0..second.num_rows() as u32).map(|i| (i * 5) % 3).collect();
        let mut a = GatheredBatch::try_new(first.schema(), 4).unwrap();
        let mut b = GatheredBatch::try_new(first.schema(), 4).unwrap();
        a.gather(&first, &first_ids).unwrap();
        b.gather(&second, &second_ids).unwrap();
        assert_eq!(a.rows(2), 0);
        for p in 0..4u32 {
            let q = p as usize;
            let mut output = OutputBuilder::try_new(first.schema()).unwrap();
            output.append(&a, q, 0..a.rows(q)).unwrap();
            let half = b.rows(q) / 2;
            output.append(&b, q, 0..half).unwrap();
            assert_eq!(output.rows(), a.rows(q) + half);
            let head = output.finish(true).unwrap();
            output.append(&b, q, half..b.rows(q)).unwrap();
            let tail = output.finish(false).unwrap();
            assert_eq!(output.held_bytes(), 0);
            let got = arrow_select::concat::concat_batches(&first.schema(), &[head, tail]).unwrap();
            let want = reference(&[(&first, &first_ids), (&second, &second_ids)], p);
            check(&got, &want, p);
        }
    }
}

/// A renewed builder takes as many rows again without growing any buffer: its capacity after
/// the second fill is the capacity it gave itself.
#[test]
fn a_renewed_builder_takes_as_many_rows_without_growing() {
    let batch = numbered(flat_columns());
    let ids = vec![0u32; batch.num_rows()];
    let mut gathered = GatheredBatch::try_new(batch.schema(), 1).unwrap();
    gathered.gather(&batch, &ids).unwrap();
    let mut output = OutputBuilder::try_new(batch.schema()).unwrap();
    output.append(&gathered, 0, 0..batch.num_rows()).unwrap();
    let first = output.finish(true).unwrap();
    let renewed = output.held_bytes();
    assert!(renewed > 0);
    assert_eq!(output.bytes(), 0);
    output.append(&gathered, 0, 0..batch.num_rows()).unwrap();
    assert_eq!(output.held_bytes(), renewed, "a buffer grew");
    let second = output.finish(false).unwrap();
    assert_eq!(first, second);
}

#[test]
fn refusals_name_the_problem() {
    let batch = numbered(flat_columns());
    let mut gathered = GatheredBatch::try_new(batch.schema(), 3).unwrap();
    let err = gathered.gather(&batch, &[0, 1]).unwrap_err();
    assert!(
        err.to_string().contains("2 ids for a batch of 13 rows"),
        "{err}"
    );
    let ids = vec![3u32; batch.num_rows()];
    assert!(
        gathered.gather(&batch, &ids).is_err(),
        "an id past the destinations"
    );
    assert_eq!(
        gathered.rows(0),
        0,
        "a failed gather leaves nothing gathered"
    );
    let other = numbered(vec![Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef]);
    let err = gathered.gather(&other, &[0, 0]).unwrap_err();
    assert!(err.to_string().contains("gathered for outputs of"), "{err}");
    let ids: Vec<u32> = (0..batch.num_rows() as u32).map(|i| i % 3).collect();
    gathered.gather(&batch, &ids).unwrap();
    let mut output = OutputBuilder::try_new(other.schema()).unwrap();
    let err = output.append(&gathered, 0, 0..1).unwrap_err();
    assert!(
        err.to_string().contains("appended to an output of"),
        "{err}"
    );
    let mut output = OutputBuilder::try_new(batch.schema()).unwrap();
    let err = output
        .append(&gathered, 1, 0..gathered.rows(1) + 1)
        .unwrap_err();
    assert!(err.to_string().contains("of destination 1"), "{err}");
    assert_eq!(output.rows(), 0);
    assert!(GatheredBatch::try_new(batch.schema(), 0).is_err());
}

/// A batch of rows and no columns (DataFusion makes them, `count(*)` over a projection of
/// nothing) reaches its destinations with every row counted.
#[test]
fn rows_without_columns_are_counted() {
    let schema = Arc::new(arrow_schema::Schema::empty());
    let batch = RecordBatch::try_new_with_options(
        schema.clone(),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(5)),
    )
    .unwrap();
    let mut gathered = GatheredBatch::try_new(schema.clone(), 2).unwrap();
    gathered.gather(&batch, &[1, 0, 1, 1, 0]).unwrap();
    assert_eq!((gathered.rows(0), gathered.rows(1)), (2, 3));
    let mut output = OutputBuilder::try_new(schema).unwrap();
    output.append(&gathered, 1, 0..3).unwrap();
    assert_eq!(output.finish(false).unwrap().num_rows(), 3);
}

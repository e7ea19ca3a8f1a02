//! The oracle: a naive partition (one arrow `take` per destination) that is obviously right,
//! and the assertion that compares a kernel's output with it.

use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, RecordBatch, RecordBatchOptions, UInt32Array,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

/// The oracle: destination `p` gets `take(batch, rows whose id is p)`, in input order.
///
/// # Panics
/// If an id is not below `num_partitions`, or arrow's `take` fails.
pub fn reference_partition(
    batch: &RecordBatch,
    ids: &[u32],
    num_partitions: u32,
) -> Vec<RecordBatch> {
    assert_eq!(ids.len(), batch.num_rows());
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); num_partitions as usize];
    for (row, &id) in ids.iter().enumerate() {
        rows[id as usize].push(row as u32);
    }
    rows.into_iter()
        .map(|rows| {
            let indices = UInt32Array::from(rows);
            let columns = batch
                .columns()
                .iter()
                .map(|column| {
                    let taken = take_column(column, &indices);
                    assert_eq!(
                        taken.len(),
                        indices.len(),
                        "take of {} returned the wrong length",
                        column.data_type()
                    );
                    taken
                })
                .collect();
            RecordBatch::try_new_with_options(
                batch.schema(),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(indices.len())),
            )
            .expect("valid batch")
        })
        .collect()
}

/// arrow's `take`, except for no rows at all, and for zero-size fixed-size lists, where arrow 59's `take` derives the
/// length from the (empty) values and returns an empty array: there only validity moves.
fn take_column(column: &ArrayRef, indices: &UInt32Array) -> ArrayRef {
    // arrow 59's `take` of a run-end encoded array reads the last index: none is none.
    if indices.is_empty() {
        return arrow_array::new_empty_array(column.data_type());
    }
    if let DataType::FixedSizeList(item, 0) = column.data_type() {
        let nulls = column.nulls().map(|nulls| {
            NullBuffer::new(
                indices
                    .values()
                    .iter()
                    .map(|&i| nulls.is_valid(i as usize))
                    .collect(),
            )
        });
        let values = arrow_array::new_empty_array(item.data_type());
        return Arc::new(
            FixedSizeListArray::try_new_with_length(item.clone(), 0, values, nulls, indices.len())
                .expect("valid zero-size list"),
        );
    }
    arrow_select::take::take(column.as_ref(), indices, None).expect("take succeeds")
}

/// Asserts that destination `p`'s batch `got` holds the same rows as `want`, column by column,
/// naming the destination, column and type of the first difference.
///
/// # Panics
/// When they differ.
pub fn assert_same_rows(got: &RecordBatch, want: &RecordBatch, p: usize) {
    assert_eq!(got.num_rows(), want.num_rows(), "destination {p}'s rows");
    for (c, (g, w)) in got.columns().iter().zip(want.columns()).enumerate() {
        assert_eq!(
            g.as_ref(),
            w.as_ref(),
            "destination {p}, column {c} ({})",
            w.data_type()
        );
    }
}

/// `batch` with a trailing `pid` column holding `ids`.
pub fn with_ids(batch: &RecordBatch, ids: &[u32]) -> RecordBatch {
    with_id_column(batch, Arc::new(UInt32Array::from(ids.to_vec())))
}

/// `batch` with `ids` as a trailing `pid` column.
pub fn with_id_column(batch: &RecordBatch, ids: ArrayRef) -> RecordBatch {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("pid", ids.data_type().clone(), false));
    let rows = ids.len();
    let mut columns = batch.columns().to_vec();
    columns.push(ids);
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .unwrap()
}

/// Decodes every destination's Arrow IPC stream and checks it against the oracle:
/// destination `p` holds exactly the rows whose id is `p`, batch after batch, in input order,
/// in batches that are not empty.
///
/// # Panics
/// When a stream does not decode or does not hold what the oracle gives.
pub fn check_ipc_outputs(outputs: &[Vec<u8>], inputs: &[(RecordBatch, Vec<u32>)], n: u32) {
    assert_eq!(outputs.len(), n as usize);
    let schema = inputs[0].0.schema();
    let mut want: Vec<Vec<RecordBatch>> = vec![Vec::new(); n as usize];
    for (batch, ids) in inputs {
        for (p, part) in reference_partition(batch, ids, n).into_iter().enumerate() {
            want[p].push(part);
        }
    }
    for (p, bytes) in outputs.iter().enumerate() {
        let (got_schema, batches) = partout_format::ipc::decode_stream(bytes)
            .unwrap_or_else(|e| panic!("destination {p}: {e}"));
        assert_eq!(
            got_schema.fields(),
            schema.fields(),
            "destination {p}'s schema"
        );
        let got = arrow_select::concat::concat_batches(&schema, &batches).unwrap();
        let want = arrow_select::concat::concat_batches(&schema, &want[p]).unwrap();
        assert_same_rows(&got, &want, p);
        assert!(
            batches.iter().all(|b| b.num_rows() > 0),
            "an empty batch was written"
        );
    }
}

/// Batches of `types` with `rows[k]` rows each, every one with a trailing `pid` column of ids
/// over `n` destinations (uniform, in runs, or all to the last destination, in turn), and
/// those ids; nulls and slicing vary from batch to batch. Seeded by `seed`.
pub fn random_inputs(
    types: &[DataType],
    rows: &[usize],
    n: u32,
    seed: u64,
) -> Vec<(RecordBatch, Vec<u32>)> {
    let mut rng = crate::rng(seed);
    rows.iter()
        .enumerate()
        .map(|(k, &len)| {
            let batch =
                crate::random_batch(types, len, [0.0, 0.5, 1.0][k % 3], k % 2 == 1, &mut rng);
            let pattern = [
                crate::IdPattern::Uniform,
                crate::IdPattern::Runs(4),
                crate::IdPattern::AllTo(n - 1),
            ][k % 3];
            let ids = crate::random_ids(len, n, pattern, &mut rng);
            (with_ids(&batch, &ids), ids)
        })
        .collect()
}

/// The error and its causes, as one line.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(e) = cause {
        text = format!("{text}: {e}");
        cause = e.source();
    }
    text
}

//! The oracle: a naive partition (one arrow `take` per destination) that is obviously right,
//! and the assertion that compares a kernel's output with it.

use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, RecordBatch, RecordBatchOptions, UInt32Array,
};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
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

/// arrow's `take`, except for zero-size fixed-size lists, where arrow 59's `take` derives the
/// length from the (empty) values and returns an empty array: there only validity moves.
fn take_column(column: &ArrayRef, indices: &UInt32Array) -> ArrayRef {
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

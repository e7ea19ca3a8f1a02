//! The honest baselines partout's benchmarks run beside its own kernels: the ways DataFusion
//! moves rows to destinations, rebuilt on arrow-rs with the same inputs (a batch and one
//! partition id per row).

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow_schema::ArrowError;
use arrow_select::take::take_arrays;

/// DataFusion's current way (`partition_grouped_take`): push every row's index onto its
/// destination's list (lists reused across batches), concatenate the lists into one index
/// array, `take` every column once, and keep the destination offsets.
#[derive(Debug, Default)]
pub struct GroupedTake {
    indices: Vec<Vec<u32>>,
}

impl GroupedTake {
    /// A baseline with no lists yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The reordered batch and `num_partitions + 1` offsets, as `Partitioner::partition`
    /// returns them.
    ///
    /// # Errors
    /// What arrow's `take` returns.
    pub fn partition(
        &mut self,
        batch: &RecordBatch,
        ids: &[u32],
        num_partitions: usize,
    ) -> Result<(RecordBatch, Vec<usize>), ArrowError> {
        fill_index_lists(&mut self.indices, ids, num_partitions);
        let mut offsets = Vec::with_capacity(num_partitions + 1);
        let mut all = Vec::with_capacity(ids.len());
        offsets.push(0);
        for list in &self.indices {
            all.extend_from_slice(list);
            offsets.push(all.len());
        }
        let indices = UInt32Array::from(all);
        let columns = take_arrays(batch.columns(), &indices, None)?;
        Ok((with_columns(batch, columns, ids.len())?, offsets))
    }
}

/// DataFusion's older way: one `take` of every column per non-empty destination.
#[derive(Debug, Default)]
pub struct TakePerDestination {
    indices: Vec<Vec<u32>>,
}

impl TakePerDestination {
    /// A baseline with no lists yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One batch per non-empty destination, with its destination.
    ///
    /// # Errors
    /// What arrow's `take` returns.
    pub fn partition(
        &mut self,
        batch: &RecordBatch,
        ids: &[u32],
        num_partitions: usize,
    ) -> Result<Vec<(usize, RecordBatch)>, ArrowError> {
        fill_index_lists(&mut self.indices, ids, num_partitions);
        let mut out = Vec::new();
        for (p, list) in self.indices.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let indices = UInt32Array::from(list.clone());
            let columns = take_arrays(batch.columns(), &indices, None)?;
            out.push((p, with_columns(batch, columns, list.len())?));
        }
        Ok(out)
    }
}

/// DataFusion's index lists: the rows of each destination, lists reused across batches.
fn fill_index_lists(indices: &mut Vec<Vec<u32>>, ids: &[u32], num_partitions: usize) {
    indices.resize_with(num_partitions, Vec::new);
    indices.iter_mut().for_each(Vec::clear);
    for (row, &id) in ids.iter().enumerate() {
        indices[id as usize].push(row as u32);
    }
}

fn with_columns(
    batch: &RecordBatch,
    columns: Vec<ArrayRef>,
    rows: usize,
) -> Result<RecordBatch, ArrowError> {
    RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

//! The item the exchange's tests send: a batch of unique Int64 values, charged its memory.

use arrow_array::{Int64Array, RecordBatch};
use partout_exchange::{ExchangeError, Item, spill_batch, unspill_batch};
use std::sync::Arc;

/// A batch charged its memory.
#[derive(Debug, Clone)]
pub struct Rows(pub RecordBatch);

impl Item for Rows {
    fn bytes(&self) -> usize {
        self.0.get_array_memory_size()
    }
    fn rows(&self) -> u64 {
        self.0.num_rows() as u64
    }
    fn spill(&self, out: &mut Vec<u8>) -> Result<(), ExchangeError> {
        spill_batch(&self.0, out)
    }
    fn unspill(bytes: &[u8]) -> Result<Self, ExchangeError> {
        unspill_batch(bytes).map(Rows)
    }
}

/// Producer `producer`'s `k`th batch of `rows` rows: values unique over every producer and
/// batch.
pub fn numbered(producer: usize, k: usize, rows: i64) -> Rows {
    let start = ((producer as i64) << 32) + k as i64 * rows;
    let values = Int64Array::from_iter_values(start..start + rows);
    Rows(RecordBatch::try_from_iter([("v", Arc::new(values) as _)]).unwrap())
}

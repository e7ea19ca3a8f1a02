//! [`Ready`]: the writer's pull side. Flushed batches wait here for a caller that hands them
//! on at its own pace (an async operator forwarding them to a
//! [`BoundedExchange`](crate::BoundedExchange) between appends), as DataFusion's
//! `partition_iter` lets an operator keep partitioning apart from IO.
//!
//! ```
//! use arrow_array::{Int64Array, RecordBatch};
//! use partout_core::ids::Partitioning;
//! use partout_exchange::{PartitionedWriter, Ready, WriterOptions};
//! use std::sync::Arc;
//!
//! let batch = RecordBatch::try_from_iter([
//!     ("k", Arc::new(Int64Array::from_iter_values(0..1000)) as _),
//! ])
//! .unwrap();
//! let options = WriterOptions::default().with_target_rows(100);
//! let mut writer =
//!     PartitionedWriter::with_output(batch.schema(), Partitioning::hash(vec![0], 4), options, Ready::new(100))
//!         .unwrap();
//! writer.append(&batch).unwrap();
//! let mut rows = 0;
//! for piece in writer.drain_ready() {
//!     assert!(piece.batch.num_rows() <= 100 && piece.destination < 4);
//!     rows += piece.batch.num_rows();
//! }
//! let (mut ready, _) = writer.finish_output().unwrap();
//! rows += ready.drain().map(|piece| piece.batch.num_rows()).sum::<usize>();
//! assert_eq!(rows, 1000);
//! ```

use crate::error::Result;
use crate::spares::Spares;
use crate::writer::{BatchSink, PartitionedWriter, SinkCapabilities};
use arrow_array::RecordBatch;
use std::sync::Arc;

/// A flushed batch waiting to be handed on.
#[derive(Debug, Clone)]
pub struct ReadyBatch {
    /// Its destination.
    pub destination: usize,
    /// Its rows.
    pub batch: RecordBatch,
    /// The memory it is charged: its share of the flushed batch it was cut from (pieces of
    /// one flush share buffers, so each is charged its rows' part, and together the whole).
    pub bytes: usize,
}

/// A [`BatchSink`] keeping flushed batches, each cut into pieces of at most `max_rows` rows,
/// until [`drain`](Self::drain)ed.
#[derive(Debug)]
pub struct Ready {
    max_rows: usize,
    batches: Vec<ReadyBatch>,
    bytes: usize,
    spares: Option<Arc<Spares>>,
}

impl Ready {
    /// Batches cut into pieces of at most `max_rows` rows (at least 1).
    pub fn new(max_rows: usize) -> Self {
        Self {
            max_rows: max_rows.max(1),
            batches: Vec::new(),
            bytes: 0,
            spares: None,
        }
    }

    /// Batches handed on come back through `spares` once their readers are done with them,
    /// and the writer reuses their buffers (see [`Spares`]).
    pub fn with_spares(mut self, spares: Arc<Spares>) -> Self {
        self.spares = Some(spares);
        self
    }

    /// Takes the batches waiting, in the order they were flushed.
    pub fn drain(&mut self) -> std::vec::Drain<'_, ReadyBatch> {
        self.bytes = 0;
        self.batches.drain(..)
    }

    /// The memory the waiting batches are charged.
    pub fn held_bytes(&self) -> usize {
        self.bytes
    }
}

impl BatchSink for Ready {
    fn write_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64> {
        let rows = batch.num_rows();
        let bytes = batch.get_array_memory_size();
        self.bytes += bytes;
        if rows <= self.max_rows {
            // One piece: the batch itself (slicing would build every array anew).
            self.batches.push(ReadyBatch {
                destination,
                batch: batch.clone(),
                bytes,
            });
            return Ok(bytes as u64);
        }
        let mut charged = 0;
        for start in (0..rows.max(1)).step_by(self.max_rows) {
            let len = self.max_rows.min(rows - start);
            let share = match start + len >= rows {
                true => bytes - charged,
                false => bytes * len / rows,
            };
            charged += share;
            self.batches.push(ReadyBatch {
                destination,
                batch: batch.slice(start, len),
                bytes: share,
            });
        }
        Ok(bytes as u64)
    }

    fn finish(&mut self, _destination_bytes: &mut [u64]) -> Result<()> {
        Ok(())
    }

    /// The batches handed on come back through its [`Spares`], when it has them.
    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities {
            spares: self.spares.clone(),
            ..SinkCapabilities::default()
        }
    }
}

impl PartitionedWriter<Ready> {
    /// Takes the batches flushed so far (see [`Ready`]).
    pub fn drain_ready(&mut self) -> std::vec::Drain<'_, ReadyBatch> {
        self.output_mut().drain()
    }
}

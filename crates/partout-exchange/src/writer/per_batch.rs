//! [`PerBatch`]: the writer's mode below 512 destinations with [`Flush::AtTarget`]: each
//! batch's rows move from the input into the destination buffers by one plan, as the batch
//! comes.
//!
//! [`Flush::AtTarget`]: crate::Flush::AtTarget

use super::buffered::Buffered;
use super::{BatchSink, Shared};
use crate::error::Result;
use arrow_array::RecordBatch;
use partout_core::ScatterPlan;

/// Rows moved into the destination buffers batch by batch.
#[derive(Debug)]
pub(super) struct PerBatch {
    buffered: Buffered,
    /// The plan of the batch being appended (reused).
    plan: ScatterPlan,
}

impl PerBatch {
    /// Moves rows into `buffered`.
    pub(super) fn new(buffered: Buffered) -> Self {
        Self {
            buffered,
            plan: ScatterPlan::new(),
        }
    }

    /// Moves `batch`'s rows into their destinations' buffers by `ids` and flushes those due.
    ///
    /// # Errors
    /// [`WriterError::Partition`](crate::WriterError::Partition) for ids the plan refuses or
    /// rows the buffers cannot take (nothing of the batch is buffered then); the output's
    /// errors from a flush.
    pub(super) fn append<O: BatchSink>(
        &mut self,
        batch: &RecordBatch,
        ids: &[u32],
        shared: &mut Shared<O>,
    ) -> Result<()> {
        // The destinations met so far: a plan over them alone.
        let n = shared.in_use;
        let plan = &mut self.plan;
        self.buffered.append_timed(shared, |buffers| {
            plan.build(ids, n)?;
            Ok(buffers.append(batch, plan)?)
        })?;
        shared.metrics.rows_out += batch.num_rows() as u64;
        self.buffered.flush_due(shared, 0, 0)
    }

    /// Flushes every destination holding rows.
    pub(super) fn finish<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        self.buffered.flush_rest(shared)
    }

    /// Bytes of buffer capacity held.
    pub(super) fn held_bytes(&self) -> usize {
        self.buffered.held_bytes()
    }
}

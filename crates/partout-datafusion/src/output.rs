//! The output partitions of [`PartoutRepartitionExec`](crate::PartoutRepartitionExec): one
//! queue read, full batches passed on and remainders gathered ([`Output`]); or, preserving
//! order, one queue per input merged by DataFusion's streaming merge ([`Lane`]).

use crate::exchange::to_datafusion;
use crate::exec::Run;
use arrow_array::RecordBatch;
use datafusion::common::Result;
use datafusion::physical_plan::metrics::Count;
use partout_exchange::Gather;
use std::sync::Arc;

/// One output partition's stream state, reading the run's one exchange.
pub(crate) struct Output {
    pub(crate) gather: Gather,
    /// Whether the output keeps its one input's order.
    pub(crate) ordered: bool,
    pub(crate) run: Arc<Run>,
    pub(crate) partition: usize,
    pub(crate) operator: String,
    pub(crate) done: bool,
    pub(crate) output_rows: Count,
    pub(crate) output_batches: Count,
}

impl Output {
    pub(crate) async fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if let Some(batch) = self.gather.next_batch() {
                self.output_rows.add(batch.num_rows());
                self.output_batches.add(1);
                return Some(Ok(batch));
            }
            if self.done {
                return None;
            }
            match self.run.exchanges[0].take(self.partition).await {
                // Rows from one input keep their order (the plan's properties say so): a whole
                // batch then waits behind gathered remainders.
                Ok(Some(queued))
                    if queued.whole && (!self.ordered || self.gather.buffered_rows() == 0) =>
                {
                    self.output_rows.add(queued.rows.num_rows());
                    self.output_batches.add(1);
                    return Some(Ok(queued.rows));
                }
                Ok(Some(queued)) => {
                    if let Err(e) = self.gather.push(queued.rows) {
                        self.done = true;
                        return Some(Err(e.into()));
                    }
                }
                Ok(None) => {
                    self.done = true;
                    if let Err(e) = self.gather.finish() {
                        return Some(Err(e.into()));
                    }
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(to_datafusion(e, &self.operator)));
                }
            }
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // The partition is in range: execute checked it.
        let _ = self.run.exchanges[0].close(self.partition);
    }
}

/// One input's rows for one output partition, in the input's order: the run's exchange of
/// that input, read at the partition. An output that preserves order merges a lane per input.
pub(crate) struct Lane {
    pub(crate) run: Arc<Run>,
    pub(crate) input: usize,
    pub(crate) partition: usize,
    pub(crate) operator: String,
    pub(crate) done: bool,
}

impl Lane {
    pub(crate) async fn next(&mut self) -> Option<Result<RecordBatch>> {
        if self.done {
            return None;
        }
        match self.run.exchanges[self.input].take(self.partition).await {
            Ok(Some(queued)) => Some(Ok(queued.rows)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(to_datafusion(e, &self.operator)))
            }
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // The partition is in range: execute checked it.
        let _ = self.run.exchanges[self.input].close(self.partition);
    }
}

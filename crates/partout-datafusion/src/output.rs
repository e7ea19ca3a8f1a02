//! The output partitions of [`PartoutRepartitionExec`](crate::PartoutRepartitionExec): one
//! queue of the execution's exchange, its batches passed on as they were built ([`Lane`]); or,
//! preserving order, a lane per input merged by DataFusion's streaming merge.

use crate::exchange::to_datafusion;
use crate::execution::Execution;
use arrow_array::RecordBatch;
use datafusion::common::Result;
use datafusion::physical_plan::metrics::Count;
use std::sync::Arc;

/// One output partition's queue in one of the execution's exchanges (the execution's one exchange, or
/// one input's when order is preserved), read to its end; closed when dropped.
pub(crate) struct Lane {
    pub(crate) execution: Arc<Execution>,
    /// Which of the execution's exchanges.
    pub(crate) input: usize,
    pub(crate) partition: usize,
    pub(crate) operator: String,
    pub(crate) done: bool,
    /// The output's rows and batches, for a lane that is the output itself (a merge counts
    /// its own).
    pub(crate) counts: Option<(Count, Count)>,
}

impl Lane {
    pub(crate) async fn next(&mut self) -> Option<Result<RecordBatch>> {
        if self.done {
            return None;
        }
        match self.execution.exchanges[self.input]
            .take(self.partition)
            .await
        {
            Ok(Some(queued)) => {
                if let Some((rows, batches)) = &self.counts {
                    rows.add(queued.rows.num_rows());
                    batches.add(1);
                }
                Some(Ok(queued.rows))
            }
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
        let _ = self.execution.exchanges[self.input].close(self.partition);
    }
}

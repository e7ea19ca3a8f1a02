//! [`Execution`]: one execution of the operator, held by its outputs.

use crate::exchange::Queued;
use datafusion::common::runtime::SpawnedTask;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use partout_exchange::BoundedExchange;
use std::sync::Arc;

/// One execution: the exchange (one per input when order is preserved) and the producers'
/// tasks (aborted when the last output holding the execution is dropped), whose exchanges'
/// spilling is added to the operator's metrics then.
#[derive(Debug)]
pub(crate) struct Execution {
    pub(crate) exchanges: Vec<Arc<BoundedExchange<Queued>>>,
    _tasks: Vec<SpawnedTask<()>>,
    spill_count: Count,
    spilled_bytes: Count,
    spill_time: Time,
}

impl Execution {
    /// The execution of `exchanges` fed by the producers' `tasks`, its spilling counted in
    /// `metrics`.
    pub(crate) fn new(
        exchanges: Vec<Arc<BoundedExchange<Queued>>>,
        tasks: Vec<SpawnedTask<()>>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Self {
        Self {
            exchanges,
            _tasks: tasks,
            spill_count: MetricBuilder::new(metrics).spill_count(0),
            spilled_bytes: MetricBuilder::new(metrics).spilled_bytes(0),
            spill_time: MetricBuilder::new(metrics).subset_time("spill_time", 0),
        }
    }
}

impl Drop for Execution {
    fn drop(&mut self) {
        for exchange in &self.exchanges {
            let spill = exchange.metrics().spill;
            self.spill_count.add(spill.spill_count as usize);
            self.spilled_bytes.add(spill.spilled_bytes as usize);
            self.spill_time.add_duration(spill.spill_time);
        }
    }
}

//! [`PartoutRepartitionExec`]: DataFusion's hash repartitioning, done by partout.

use crate::exchange::{Exchange, Queued, Taken};
use crate::ids::DataFusionIds;
use arrow_array::RecordBatch;
use arrow_select::coalesce::BatchCoalescer;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result, Statistics, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_plan::execution_plan::{CardinalityEffect, apply_expression_roots};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, Time,
};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::statistics::{ChildStats, StatisticsArgs};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PhysicalExpr, PlanProperties, SendableRecordBatchStream,
};
use futures::StreamExt;
use partout_core::{DestinationBuffers, ScatterPlan};
use std::fmt::Formatter;
use std::sync::{Arc, Mutex};

/// Hash repartitioning of `input` into `n` partitions by `exprs`, as DataFusion's
/// `RepartitionExec` with `Partitioning::Hash` does and with the same plan properties, done
/// with partout's scatter: every row goes to the partition DataFusion's hash gives it
/// ([`DataFusionIds`]); each producer appends rows into a buffer per destination and hands a
/// destination's rows over as one batch of up to the session's `batch_size` (sooner when the
/// destination's buffer reaches its share of the budget, at least 64 KiB); the producers'
/// buffers are reserved from the memory pool too;
/// rows waiting for consumers are held within a byte budget reserved from the memory pool,
/// and producers wait while it is full.
#[derive(Debug)]
pub struct PartoutRepartitionExec {
    input: Arc<dyn ExecutionPlan>,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    partitions: usize,
    properties: Arc<PlanProperties>,
    /// The node replaced: its statistics are this node's.
    replaced: Arc<RepartitionExec>,
    buffer_bytes: usize,
    metrics: ExecutionPlanMetricsSet,
    /// The run whose outputs are being handed out, and which outputs it has handed out.
    pending: Mutex<Option<(Arc<Run>, Vec<bool>)>>,
}

/// One execution: the exchange and the producers' tasks (aborted when the last output
/// holding the run is dropped).
#[derive(Debug)]
struct Run {
    exchange: Arc<Exchange>,
    _tasks: Vec<SpawnedTask<()>>,
}

impl PartoutRepartitionExec {
    /// Replaces `repartition`, a hash `RepartitionExec` that does not preserve order, keeping
    /// its properties (equivalences, partitioning, emission, boundedness); `None` for any
    /// other.
    pub fn from_repartition(repartition: &RepartitionExec, buffer_bytes: usize) -> Option<Self> {
        let Partitioning::Hash(exprs, n) = repartition.partitioning() else {
            return None;
        };
        if repartition.preserve_order() || *n == 0 || u32::try_from(*n).is_err() {
            return None;
        }
        Some(Self {
            input: repartition.input().clone(),
            exprs: exprs.clone(),
            partitions: *n,
            properties: repartition.properties().clone(),
            replaced: Arc::new(repartition.clone()),
            buffer_bytes,
            metrics: ExecutionPlanMetricsSet::new(),
            pending: Mutex::new(None),
        })
    }

    /// Hash repartitioning of `input` into `n` partitions by `exprs`, holding up to
    /// `buffer_bytes` for consumers.
    ///
    /// # Errors
    /// When DataFusion's `RepartitionExec` refuses the same (its properties are derived the
    /// same way), or `n` is 0.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        exprs: Vec<Arc<dyn PhysicalExpr>>,
        n: usize,
        buffer_bytes: usize,
    ) -> Result<Self> {
        let repartition = RepartitionExec::try_new(input, Partitioning::Hash(exprs, n))?;
        match Self::from_repartition(&repartition, buffer_bytes) {
            Some(exec) => Ok(exec),
            None => internal_err!("partout repartitions into 1 to 2^32 - 1 partitions, not {n}"),
        }
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The bytes held for consumers before producers wait.
    pub fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    /// Starts a run: the exchange, and a producer task per input partition.
    fn start(&self, context: &Arc<TaskContext>) -> Result<Arc<Run>> {
        let inputs = self.input.output_partitioning().partition_count();
        let reservation =
            MemoryConsumer::new(format!("PartoutRepartitionExec[{}]", self.partitions))
                .register(context.memory_pool());
        let exchange = Arc::new(Exchange::new(
            inputs,
            self.partitions,
            self.buffer_bytes,
            reservation,
        ));
        let mut tasks = Vec::with_capacity(inputs);
        for i in 0..inputs {
            let producer = Producer {
                input: self.input.clone(),
                partition: i,
                context: context.clone(),
                ids: DataFusionIds::new(self.exprs.clone(), self.partitions),
                partitions: self.partitions,
                // Half the budget shared by every producer's buffers, at least 64 KiB each.
                target_bytes: (self.buffer_bytes / (2 * inputs.max(1) * self.partitions))
                    .max(64 << 10),
                exchange: exchange.clone(),
                fetch_time: MetricBuilder::new(&self.metrics).subset_time("fetch_time", i),
                repartition_time: MetricBuilder::new(&self.metrics)
                    .subset_time("repartition_time", i),
                send_time: MetricBuilder::new(&self.metrics).subset_time("send_time", i),
            };
            tasks.push(SpawnedTask::spawn(async move {
                let exchange = producer.exchange.clone();
                let result = producer.run().await;
                exchange.producer_done(result);
            }));
        }
        Ok(Arc::new(Run {
            exchange,
            _tasks: tasks,
        }))
    }
}

/// One input partition's producer: rows appended into a buffer per destination (partout's
/// scatter, one copy), a destination's rows handed over as one batch once they reach the
/// session's batch size or the destination's share of the budget, the rest at the end.
struct Producer {
    input: Arc<dyn ExecutionPlan>,
    partition: usize,
    context: Arc<TaskContext>,
    ids: DataFusionIds,
    partitions: usize,
    /// Bytes at which a destination's buffer is handed over before it holds a full batch.
    target_bytes: usize,
    exchange: Arc<Exchange>,
    fetch_time: Time,
    repartition_time: Time,
    send_time: Time,
}

impl Producer {
    async fn run(mut self) -> Result<()> {
        let mut stream = self.input.execute(self.partition, self.context.clone())?;
        let n = u32::try_from(self.partitions)
            .map_err(|_| DataFusionError::Internal("too many partitions".into()))?;
        let batch_size = self.context.session_config().batch_size().max(1);
        let mut buffers =
            DestinationBuffers::try_new(self.input.schema(), self.partitions).map_err(external)?;
        // The buffers' memory, reserved as it grows.
        let reservation = MemoryConsumer::new(format!(
            "PartoutRepartitionExec[{}] producer {}",
            self.partitions, self.partition
        ))
        .register(self.context.memory_pool());
        let mut plan = ScatterPlan::new();
        let mut ids = Vec::new();
        let mut ready = Vec::new();
        loop {
            let fetched = {
                let _timer = self.fetch_time.timer();
                stream.next().await
            };
            let last = fetched.is_none();
            {
                let _timer = self.repartition_time.timer();
                if let Some(batch) = fetched {
                    let batch = batch?;
                    self.ids.compute(&batch, &mut ids)?;
                    plan.build(&ids, n).map_err(external)?;
                    buffers.append(&batch, &plan).map_err(external)?;
                }
                for p in 0..self.partitions {
                    let rows = buffers.rows(p);
                    let full = rows >= batch_size || buffers.bytes(p) >= self.target_bytes;
                    if rows > 0 && (last || full) {
                        let batch = buffers.take(p).map_err(external)?;
                        // The batch goes on; the destination gets new buffers of its size
                        // (as many rows come next), or none after the last rows.
                        match last {
                            true => buffers.release(p),
                            false => buffers.renew(p),
                        }
                        // Batches of at most `batch_size` rows (slices sharing the buffers),
                        // each charged its rows' share of the memory. Full ones are whole:
                        // outputs pass them on as they are; the rest (a split's tail, the
                        // last rows) are remainders, gathered at the output.
                        let bytes = batch.get_array_memory_size();
                        let mut charged = 0;
                        for start in (0..rows).step_by(batch_size) {
                            let len = batch_size.min(rows - start);
                            let share = match start + len == rows {
                                true => bytes - charged,
                                false => bytes * len / rows,
                            };
                            charged += share;
                            ready.push(Queued {
                                output: p,
                                rows: batch.slice(start, len),
                                bytes: share,
                                whole: len == batch_size || (full && rows < batch_size),
                            });
                        }
                    }
                }
                reservation.try_resize(buffers.held_bytes())?;
            }
            if !self.exchange.push(&mut ready, &self.send_time).await? || last {
                return Ok(());
            }
        }
    }
}

fn external(e: partout_core::PartoutError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

impl DisplayAs for PartoutRepartitionExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut Formatter) -> std::fmt::Result {
        let inputs = self.input.output_partitioning().partition_count();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "PartoutRepartitionExec: partitioning={}, input_partitions={inputs}",
                self.properties.output_partitioning()
            ),
            DisplayFormatType::TreeRender => {
                writeln!(f, "partitioning={}", self.properties.output_partitioning())?;
                write!(f, "input_partitions={inputs}")
            }
        }
    }
}

impl ExecutionPlan for PartoutRepartitionExec {
    fn name(&self) -> &str {
        "PartoutRepartitionExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        apply_expression_roots(self.exprs.iter(), f)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!(
                "PartoutRepartitionExec takes one child, not {}",
                children.len()
            );
        }
        Ok(Arc::new(Self::try_new(
            children.swap_remove(0),
            self.exprs.clone(),
            self.partitions,
            self.buffer_bytes,
        )?))
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![true]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        // One input partition's rows keep their order in each output (the scatter is
        // stable); several inputs interleave.
        vec![self.input.output_partitioning().partition_count() <= 1]
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition >= self.partitions {
            return internal_err!(
                "PartoutRepartitionExec has {} partitions, not {partition}",
                self.partitions
            );
        }
        let run = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            // A partition asked for again starts a new run (a re-execution).
            let fresh = !matches!(&*pending, Some((_, handed)) if !handed[partition]);
            if fresh {
                *pending = Some((self.start(&context)?, vec![false; self.partitions]));
            }
            let (run, handed) = pending.as_mut().expect("a run just made or pending");
            handed[partition] = true;
            let run = run.clone();
            if handed.iter().all(|&h| h) {
                // Every output is handed out: the run lives as long as they do.
                *pending = None;
            }
            run
        };
        let schema = self.input.schema();
        let batch_size = context.session_config().batch_size().max(1);
        let output = Output {
            // Remainders (a producer's last rows, the tail of a split) are gathered here into
            // batches of `batch_size`; whole batches pass by.
            coalescer: BatchCoalescer::new(schema.clone(), batch_size),
            ordered: self.input.output_partitioning().partition_count() <= 1,
            run,
            partition,
            done: false,
            output_rows: MetricBuilder::new(&self.metrics).output_rows(partition),
            output_batches: MetricBuilder::new(&self.metrics).output_batches(partition),
        };
        let stream = futures::stream::unfold(output, |mut output| async move {
            let next = output.next().await;
            next.map(|item| (item, output))
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        self.replaced.child_stats_requests(partition)
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        self.replaced.statistics_from_inputs(input_stats, args)
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        CardinalityEffect::Equal
    }
}

/// One output partition's stream state.
struct Output {
    coalescer: BatchCoalescer,
    /// Whether the output keeps its one input's order.
    ordered: bool,
    run: Arc<Run>,
    partition: usize,
    done: bool,
    output_rows: Count,
    output_batches: Count,
}

impl Output {
    async fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if let Some(batch) = self.coalescer.next_completed_batch() {
                self.output_rows.add(batch.num_rows());
                self.output_batches.add(1);
                return Some(Ok(batch));
            }
            if self.done {
                return None;
            }
            match self.run.exchange.take(self.partition) {
                // Rows from one input keep their order (the plan's properties say so): a whole
                // batch then waits behind gathered remainders.
                Taken::Rows(rows, true)
                    if !self.ordered || self.coalescer.get_buffered_rows() == 0 =>
                {
                    self.output_rows.add(rows.num_rows());
                    self.output_batches.add(1);
                    return Some(Ok(rows));
                }
                Taken::Rows(rows, _) => {
                    if let Err(e) = self.coalescer.push_batch(rows) {
                        self.done = true;
                        return Some(Err(e.into()));
                    }
                }
                Taken::Failed(e) => {
                    self.done = true;
                    return Some(Err(DataFusionError::Shared(e)));
                }
                Taken::End => {
                    self.done = true;
                    if let Err(e) = self.coalescer.finish_buffered_batch() {
                        return Some(Err(e.into()));
                    }
                }
                Taken::Empty => self.run.exchange.wait(self.partition).await,
            }
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        self.run.exchange.close(self.partition);
    }
}

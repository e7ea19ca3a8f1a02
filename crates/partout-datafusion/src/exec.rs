//! [`PartoutRepartitionExec`]: DataFusion's hash repartitioning, done by partout.

use crate::builders::OutputBuilders;
use crate::config::Budget;
use crate::exchange::{Pool, from_datafusion, spill_target, to_datafusion};
use crate::execution::Execution;
use crate::ids::DataFusionIds;
use crate::output::Lane;
use crate::producer::Producer;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, Statistics, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_plan::execution_plan::{CardinalityEffect, apply_expression_roots};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::streaming_merge::StreamingMergeBuilder;
use datafusion::physical_plan::statistics::{ChildStats, StatisticsArgs};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PhysicalExpr, PlanProperties, SendableRecordBatchStream,
};
use partout_exchange::{BoundedExchange, BoundedOptions};
use std::fmt::Formatter;
use std::sync::{Arc, Mutex};

/// Hash repartitioning of `input` into `n` partitions by `exprs`, as DataFusion's
/// `RepartitionExec` with `Partitioning::Hash` does and with the same plan properties, done
/// with partout's kernels and exchange: every row goes to the partition DataFusion's hash
/// gives it ([`DataFusionIds`]). Each producer (one per input partition) lays its input batch
/// out in output order in reused scratch ([`GatheredBatch`](partout_core::GatheredBatch)),
/// then appends each output's rows to that output's one batch under construction
/// ([`OutputBuilder`](partout_core::OutputBuilder)), shared by the producers behind a lock of
/// its own: a row is copied once, from hot scratch into the batch its consumer reads. A batch
/// that reaches the session's `batch_size` rows (or its share of the budget) is handed over
/// whole and waits for its consumer in a [`BoundedExchange`]; what the builders hold when the
/// input ends is handed over then.
///
/// **Order**: a repartition that preserves order (`preserve_order`, over an ordered input of
/// several partitions) keeps a builder and a queue per input and output: each input's rows
/// reach an output in the input's order, and the output merges its queues with DataFusion's
/// streaming merge by the input's ordering, as `RepartitionExec` does. Otherwise one input's
/// rows keep their order in every output, and several inputs interleave.
///
/// **Unbounded inputs**: every row is handed over with the input batch it came in, never held
/// back for a full batch (the next may never come), as `RepartitionExec` does.
///
/// **What `buffer_bytes` covers**: everything the operator holds between its input and its
/// outputs, reserved from the session's memory pool as it is held: half for the output batches
/// under construction, a quarter for the batches waiting for consumers, a quarter for the
/// producers' scratch ([`PartoutConfig::buffer_bytes`](crate::PartoutConfig) says how).
/// Preserving order, the builders' and the queues' shares are divided evenly among the
/// inputs. Not covered: the batches a merge holds (reserved apart, as DataFusion's merge
/// reserves them), and a spilled batch while it is read back. When the queues' quarter is
/// full and a consumer waits for an output with nothing for it, batches are spilled to the
/// session's disk manager instead of waiting. This happens at once when rows are held for
/// outputs not read yet (outputs read one after another), and after the exchange's patience
/// (100 ms) without room otherwise (a consumer that stopped reading). Any order of reading
/// the outputs completes. Without a disk manager, or past its limit, that is DataFusion's
/// resources-exhausted error naming the operator.
#[derive(Debug)]
pub struct PartoutRepartitionExec {
    input: Arc<dyn ExecutionPlan>,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    partitions: usize,
    properties: Arc<PlanProperties>,
    /// The node replaced: its statistics are this node's.
    replaced: Arc<RepartitionExec>,
    buffer_bytes: usize,
    /// Whether each output keeps the order of every input (merging them).
    preserve_order: bool,
    metrics: ExecutionPlanMetricsSet,
    /// The execution whose outputs are being handed out, and which outputs it has handed out.
    pending: Mutex<Option<(Arc<Execution>, Vec<bool>)>>,
}

impl PartoutRepartitionExec {
    /// Replaces `repartition`, a hash `RepartitionExec` (preserving order or not), keeping its
    /// properties (equivalences, ordering, partitioning, emission, boundedness); `None` for
    /// any other, and for partition counts partout's scatter refuses (above 2^20).
    pub fn from_repartition(repartition: &RepartitionExec, buffer_bytes: usize) -> Option<Self> {
        let Partitioning::Hash(exprs, n) = repartition.partitioning() else {
            return None;
        };
        let fits = u32::try_from(*n)
            .ok()
            .is_some_and(|n| partout_core::plan::check_partition_count(n).is_ok());
        if !fits {
            return None;
        }
        Some(Self {
            input: repartition.input().clone(),
            exprs: exprs.clone(),
            partitions: *n,
            properties: repartition.properties().clone(),
            replaced: Arc::new(repartition.clone()),
            buffer_bytes: buffer_bytes.max(1),
            preserve_order: repartition.preserve_order(),
            metrics: ExecutionPlanMetricsSet::new(),
            pending: Mutex::new(None),
        })
    }

    /// Hash repartitioning of `input` into `n` partitions by `exprs`, holding up to
    /// `buffer_bytes` between its input and its outputs.
    ///
    /// # Errors
    /// When DataFusion's `RepartitionExec` refuses the same (its properties are derived the
    /// same way), or `n` is 0 or above 2^20.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        exprs: Vec<Arc<dyn PhysicalExpr>>,
        n: usize,
        buffer_bytes: usize,
    ) -> Result<Self> {
        let repartition = RepartitionExec::try_new(input, Partitioning::Hash(exprs, n))?;
        match Self::from_repartition(&repartition, buffer_bytes) {
            Some(exec) => Ok(exec),
            None => internal_err!("partout repartitions into 1 to 2^20 partitions, not {n}"),
        }
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// Whether each output keeps the order of every input, merging them (the replaced
    /// node's `preserve_order`).
    pub fn preserve_order(&self) -> bool {
        self.preserve_order
    }

    /// The bytes the operator holds between its input and its outputs (see the type's
    /// docs).
    pub fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    fn operator(&self) -> String {
        format!("PartoutRepartitionExec[{}]", self.partitions)
    }

    /// Starts a run: the exchange, the output builders, and a producer task per input
    /// partition.
    fn start(&self, context: &Arc<TaskContext>) -> Result<Arc<Execution>> {
        let input_partitions = self.input.output_partitioning().partition_count();
        // An input of no partitions counts as one producer that finishes at once.
        let inputs = input_partitions.max(1);
        let operator = self.operator();
        let budget = Budget::of(self.buffer_bytes);
        // Preserving order, a queue per input and output, and a builder per input and output:
        // an exchange and a group of builders per input, each with its share.
        let groups = if self.preserve_order { inputs } else { 1 };
        let batch_size = context.session_config().batch_size().max(1);
        let schema = self.input.schema();
        let mut exchanges = Vec::with_capacity(groups);
        let mut builders = Vec::with_capacity(groups);
        for g in 0..groups {
            let name = match self.preserve_order {
                true => format!("{operator} input {g}"),
                false => operator.clone(),
            };
            let producers = inputs / groups;
            let reservation = MemoryConsumer::new(name.clone()).register(context.memory_pool());
            let mut options =
                BoundedOptions::new(self.partitions, producers, (budget.queued / groups).max(1))
                    .with_account(Arc::new(Pool(reservation)));
            if let Some(target) = spill_target(context, &operator) {
                options = options.with_spill(target);
            }
            let exchange =
                BoundedExchange::try_new(options).map_err(|e| to_datafusion(e, &operator))?;
            if input_partitions == 0 {
                exchange.producer_finished();
            }
            exchanges.push(Arc::new(exchange));
            let reservation = MemoryConsumer::new(format!("{name} output builders"))
                .register(context.memory_pool());
            // A builder's share: the builders, and the batch each producer may hold finished
            // while it queues it, within the builders' half.
            let share = (budget.builders / groups / (self.partitions + producers)).max(1);
            builders.push(Arc::new(OutputBuilders::try_new(
                schema.clone(),
                self.partitions,
                producers,
                batch_size,
                share,
                reservation,
            )?));
        }
        let unbounded = self.input.boundedness().is_unbounded();
        let mut tasks = Vec::with_capacity(inputs);
        for i in 0..input_partitions {
            let producer = Producer {
                input: self.input.clone(),
                partition: i,
                context: context.clone(),
                ids: DataFusionIds::new(self.exprs.clone(), self.partitions),
                partitions: self.partitions,
                scratch_limit: (budget.scratch / inputs).max(1),
                unbounded,
                builders: builders[i % groups].clone(),
                // Producers start their passes over the outputs apart.
                first: i * self.partitions / inputs,
                exchange: exchanges[i % groups].clone(),
                operator: operator.clone(),
                fetch_time: MetricBuilder::new(&self.metrics).subset_time("fetch_time", i),
                repartition_time: MetricBuilder::new(&self.metrics)
                    .subset_time("repartition_time", i),
                send_time: MetricBuilder::new(&self.metrics).subset_time("send_time", i),
            };
            tasks.push(SpawnedTask::spawn(async move {
                let exchange = producer.exchange.clone();
                match producer.run().await {
                    Ok(()) => exchange.producer_finished(),
                    Err(e) => exchange.fail(from_datafusion(e)),
                }
            }));
        }
        Ok(Arc::new(Execution::new(exchanges, tasks, &self.metrics)))
    }

    /// Output `partition` of `execution` in order: a lane per input, merged by the input's
    /// ordering with DataFusion's streaming merge into batches of the session's size.
    fn merged(
        &self,
        execution: Arc<Execution>,
        partition: usize,
        context: &Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let Some(ordering) = self.input.output_ordering() else {
            return internal_err!(
                "{} preserves an order its input does not have",
                self.operator()
            );
        };
        let schema = self.input.schema();
        let lanes = (0..execution.exchanges.len())
            .map(|input| {
                let lane = Lane {
                    execution: execution.clone(),
                    input,
                    partition,
                    operator: self.operator(),
                    done: false,
                    counts: None,
                };
                let stream = futures::stream::unfold(lane, |mut lane| async move {
                    let next = lane.next().await;
                    next.map(|item| (item, lane))
                });
                Box::pin(RecordBatchStreamAdapter::new(schema.clone(), stream))
                    as SendableRecordBatchStream
            })
            .collect();
        let reservation = MemoryConsumer::new(format!("{}[Merge {partition}]", self.operator()))
            .register(context.memory_pool());
        StreamingMergeBuilder::new()
            .with_streams(lanes)
            .with_schema(schema)
            .with_expressions(ordering)
            .with_metrics(BaselineMetrics::new(&self.metrics, partition))
            .with_batch_size(context.session_config().batch_size().max(1))
            .with_reservation(reservation)
            .build()
    }
}

impl DisplayAs for PartoutRepartitionExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut Formatter) -> std::fmt::Result {
        let inputs = self.input.output_partitioning().partition_count();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "PartoutRepartitionExec: partitioning={}, input_partitions={inputs}",
                    self.properties.output_partitioning()
                )?;
                if self.preserve_order {
                    write!(f, ", preserve_order=true")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "partitioning={}", self.properties.output_partitioning())?;
                write!(f, "input_partitions={inputs}")?;
                if self.preserve_order {
                    write!(f, "\npreserve_order=true")?;
                }
                Ok(())
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
        let partitioning = Partitioning::Hash(self.exprs.clone(), self.partitions);
        let mut repartition = RepartitionExec::try_new(children.swap_remove(0), partitioning)?;
        if self.preserve_order {
            repartition = repartition.with_preserve_order();
        }
        match Self::from_repartition(&repartition, self.buffer_bytes) {
            Some(exec) => Ok(Arc::new(exec)),
            None => internal_err!("PartoutRepartitionExec lost its partitioning"),
        }
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![true]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        // One input partition's rows keep their order in each output (the scatter is
        // stable); several inputs interleave, unless merged by their order.
        vec![self.preserve_order || self.input.output_partitioning().partition_count() <= 1]
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
        let execution = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            // A partition asked for again starts a new execution (a re-execution).
            let fresh = !matches!(&*pending, Some((_, handed)) if !handed[partition]);
            if fresh {
                *pending = Some((self.start(&context)?, vec![false; self.partitions]));
            }
            let (execution, handed) = pending.as_mut().expect("an execution just made or pending");
            handed[partition] = true;
            let execution = execution.clone();
            if handed.iter().all(|&h| h) {
                // Every output is handed out: the execution lives as long as they do.
                *pending = None;
            }
            execution
        };
        if self.preserve_order {
            return self.merged(execution, partition, &context);
        }
        let output = Lane {
            execution,
            input: 0,
            partition,
            operator: self.operator(),
            done: false,
            counts: Some((
                MetricBuilder::new(&self.metrics).output_rows(partition),
                MetricBuilder::new(&self.metrics).output_batches(partition),
            )),
        };
        let schema = self.input.schema();
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

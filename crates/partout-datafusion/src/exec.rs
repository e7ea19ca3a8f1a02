//! [`PartoutRepartitionExec`]: DataFusion's hash repartitioning, done by partout.

use crate::exchange::{Pool, Queued, from_datafusion, spill_target, to_datafusion};
use crate::ids::DataFusionIds;
use arrow_array::RecordBatch;
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
use partout_exchange::{
    BoundedExchange, BoundedOptions, Gather, PartitionedWriter, Ready, Spares, WriterError,
    WriterOptions,
};
use std::fmt::Formatter;
use std::sync::{Arc, Mutex};

/// Hash repartitioning of `input` into `n` partitions by `exprs`, as DataFusion's
/// `RepartitionExec` with `Partitioning::Hash` does and with the same plan properties, done
/// with partout's writer and exchange: every row goes to the partition DataFusion's hash
/// gives it ([`DataFusionIds`]); each producer (one per input partition) appends rows to a
/// [`PartitionedWriter`] that hands a destination's rows over as a batch of the session's
/// `batch_size` rows (sooner at its share of the budget); the batches wait for consumers in
/// a [`BoundedExchange`].
///
/// **What `buffer_bytes` covers**: everything the operator holds between its input and its
/// outputs, reserved from the session's memory pool: up to 3/4 of it for the producers'
/// writers (each input's share holds its destination buffers and the batches it flushed but
/// has not yet handed over), an eighth for the batches waiting for consumers, and an eighth
/// for batches whose rows the outputs have gathered, on their way back to the producers,
/// whose next flushes reuse their buffers ([`Spares`]): in steady state the operator
/// allocates only what it hands downstream. Not covered: the batch each output is gathering to `batch_size` rows, and a spilled batch while it is read back. When
/// the exchange's eighth is full and a consumer waits for an output with nothing for it,
/// batches are spilled to the session's disk manager instead of waiting. This happens at once
/// when rows are held for outputs not read yet (outputs read one after another), and after
/// the exchange's patience (100 ms) without room otherwise (a consumer that stopped reading).
/// Any order of reading the outputs completes. Without a disk manager, or past its limit,
/// that is DataFusion's resources-exhausted error naming the operator.
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
    exchange: Arc<BoundedExchange<Queued>>,
    /// Batches the outputs gathered rows from, back to the producers for their buffers.
    spares: Arc<Spares>,
    _tasks: Vec<SpawnedTask<()>>,
    spill_count: Count,
    spilled_bytes: Count,
    spill_time: Time,
}

impl Drop for Run {
    fn drop(&mut self) {
        let spill = self.exchange.metrics().spill;
        self.spill_count.add(spill.spill_count as usize);
        self.spilled_bytes.add(spill.spilled_bytes as usize);
        self.spill_time.add_duration(spill.spill_time);
    }
}

impl PartoutRepartitionExec {
    /// Replaces `repartition`, a hash `RepartitionExec` that does not preserve order, keeping
    /// its properties (equivalences, partitioning, emission, boundedness); `None` for any
    /// other, and for partition counts partout's scatter refuses (above 2^20).
    pub fn from_repartition(repartition: &RepartitionExec, buffer_bytes: usize) -> Option<Self> {
        let Partitioning::Hash(exprs, n) = repartition.partitioning() else {
            return None;
        };
        let fits = u32::try_from(*n)
            .ok()
            .is_some_and(|n| partout_core::plan::check_partition_count(n).is_ok());
        if repartition.preserve_order() || !fits {
            return None;
        }
        Some(Self {
            input: repartition.input().clone(),
            exprs: exprs.clone(),
            partitions: *n,
            properties: repartition.properties().clone(),
            replaced: Arc::new(repartition.clone()),
            buffer_bytes: buffer_bytes.max(1),
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

    /// The bytes the operator holds between its input and its outputs (see the type's
    /// docs).
    pub fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    fn operator(&self) -> String {
        format!("PartoutRepartitionExec[{}]", self.partitions)
    }

    /// Starts a run: the exchange, and a producer task per input partition.
    fn start(&self, context: &Arc<TaskContext>) -> Result<Arc<Run>> {
        let input_partitions = self.input.output_partitioning().partition_count();
        // An input of no partitions counts as one producer that finishes at once.
        let inputs = input_partitions.max(1);
        let operator = self.operator();
        let reservation = MemoryConsumer::new(operator.clone()).register(context.memory_pool());
        let mut options =
            BoundedOptions::new(self.partitions, inputs, (self.buffer_bytes / 8).max(1))
                .with_account(Arc::new(Pool(reservation)));
        if let Some(target) = spill_target(context, &operator) {
            options = options.with_spill(target);
        }
        let exchange =
            Arc::new(BoundedExchange::try_new(options).map_err(|e| to_datafusion(e, &operator))?);
        if input_partitions == 0 {
            exchange.producer_finished();
        }
        // An eighth of the budget: batches whose rows the outputs have gathered, on
        // their way back to the producers, whose next flushes reuse their buffers.
        let spares = Arc::new(
            Spares::new(self.buffer_bytes / 8).with_account(Arc::new(Pool(
                MemoryConsumer::new(format!("{operator} spares")).register(context.memory_pool()),
            ))),
        );
        // Each producer's writer holds at most 3/8 of the budget / inputs in its buffers (new
        // ones of a flushed destination's size included), and up to as much again in what it
        // flushed and has not handed over: the producers together stay within 3/4 of the
        // budget, the exchange within an eighth, the spares within the last eighth. The
        // writers' share sets the flush size at high output counts, so it is the largest.
        let writer_limit = (self.buffer_bytes / 8 * 3 / inputs).max(1);
        let mut tasks = Vec::with_capacity(inputs);
        for i in 0..input_partitions {
            let producer = Producer {
                input: self.input.clone(),
                partition: i,
                context: context.clone(),
                ids: DataFusionIds::new(self.exprs.clone(), self.partitions),
                partitions: self.partitions,
                writer_limit,
                exchange: exchange.clone(),
                spares: spares.clone(),
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
        Ok(Arc::new(Run {
            exchange,
            spares,
            _tasks: tasks,
            spill_count: MetricBuilder::new(&self.metrics).spill_count(0),
            spilled_bytes: MetricBuilder::new(&self.metrics).spilled_bytes(0),
            spill_time: MetricBuilder::new(&self.metrics).subset_time("spill_time", 0),
        }))
    }
}

/// One input partition's producer: rows appended to partout's writer by DataFusion's ids, a
/// destination's rows handed to the exchange as a batch once they reach the session's batch
/// size or the destination's share of the writer's memory, the rest at the end.
struct Producer {
    input: Arc<dyn ExecutionPlan>,
    partition: usize,
    context: Arc<TaskContext>,
    ids: DataFusionIds,
    partitions: usize,
    /// The memory the writer's buffers may hold.
    writer_limit: usize,
    exchange: Arc<BoundedExchange<Queued>>,
    spares: Arc<Spares>,
    operator: String,
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
        // Each destination flushes at `batch_size` rows or its even share of the writer's
        // memory, whichever comes first: with room for whole batches, they pass the outputs'
        // gathering by, uncopied (a fixed 256 KiB target before cut every flush to ~1,300
        // lineitem rows, each copied again at the output).
        let options = WriterOptions::default()
            .with_target_bytes((self.writer_limit / self.partitions.max(1)).max(1))
            .with_memory_limit(self.writer_limit)
            .with_target_rows(batch_size);
        // The ids are DataFusion's (append_with_ids).
        let mut writer = PartitionedWriter::with_given_ids(
            self.input.schema(),
            n,
            options,
            Ready::new(batch_size).with_spares(self.spares.clone()),
        )
        .map_err(external)?;
        // The writer's buffers and the batches it flushed, reserved as they change.
        let reservation =
            MemoryConsumer::new(format!("{} producer {}", self.operator, self.partition))
                .register(self.context.memory_pool());
        let mut ids = Vec::new();
        let mut ready = Vec::new();
        loop {
            let fetched = {
                let _timer = self.fetch_time.timer();
                stream.next().await
            };
            {
                // Stopped around every send: the time spent handing batches over (waiting for
                // room included) is send_time's alone, as in DataFusion's RepartitionExec,
                // never counted twice.
                let mut timer = self.repartition_time.timer();
                match fetched {
                    Some(batch) => {
                        let batch = batch?;
                        self.ids.compute(&batch, &mut ids)?;
                        // In pieces of an eighth of the writer's memory, each handed over
                        // before the next is appended: what the writer flushed and what it
                        // holds stay within its share, whatever the input's batch size; and
                        // one piece brings a destination a small part of its flush target,
                        // so fills stay within the buffers their last fill left (a larger
                        // fill would grow them, copying).
                        let rows = batch.num_rows();
                        let row_bytes = batch.get_array_memory_size() / rows.max(1);
                        let piece =
                            (self.writer_limit / 8 / row_bytes.max(1)).clamp(1, rows.max(1));
                        for start in (0..rows).step_by(piece) {
                            let len = piece.min(rows - start);
                            writer
                                .append_with_ids(&batch.slice(start, len), &ids[start..start + len])
                                .map_err(external)?;
                            reservation
                                .try_resize(writer.held_bytes() + writer.output().held_bytes())?;
                            ready.extend(writer.drain_ready());
                            if start + len < rows {
                                timer.stop();
                                let send = self.send_time.timer();
                                for ready in ready.drain(..) {
                                    self.push(ready, batch_size).await?;
                                }
                                send.done();
                                timer.restart();
                            }
                        }
                    }
                    None => {
                        let (mut rest, _) = writer.finish_output().map_err(external)?;
                        ready.extend(rest.drain());
                        timer.done();
                        let _send = self.send_time.timer();
                        for piece in ready.drain(..) {
                            self.push(piece, batch_size).await?;
                        }
                        return Ok(());
                    }
                }
            }
            let _timer = self.send_time.timer();
            for piece in ready.drain(..) {
                self.push(piece, batch_size).await?;
            }
            reservation.try_resize(writer.held_bytes())?;
            if self.exchange.all_closed() {
                return Ok(());
            }
        }
    }

    async fn push(&self, piece: partout_exchange::ReadyBatch, batch_size: usize) -> Result<()> {
        let queued = Queued {
            whole: piece.batch.num_rows() == batch_size,
            rows: piece.batch,
            bytes: piece.bytes,
        };
        self.exchange
            .push_async(piece.destination, queued)
            .await
            .map_err(|e| to_datafusion(e, &self.operator))
    }
}

fn external(e: WriterError) -> DataFusionError {
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
            gather: Gather::new(schema.clone(), batch_size).with_spares(run.spares.clone()),
            ordered: self.input.output_partitioning().partition_count() <= 1,
            run,
            partition,
            operator: self.operator(),
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
    gather: Gather,
    /// Whether the output keeps its one input's order.
    ordered: bool,
    run: Arc<Run>,
    partition: usize,
    operator: String,
    done: bool,
    output_rows: Count,
    output_batches: Count,
}

impl Output {
    async fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if let Some(batch) = self.gather.next_batch() {
                self.output_rows.add(batch.num_rows());
                self.output_batches.add(1);
                return Some(Ok(batch));
            }
            if self.done {
                return None;
            }
            match self.run.exchange.take(self.partition).await {
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
        let _ = self.run.exchange.close(self.partition);
    }
}

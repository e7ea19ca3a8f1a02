//! [`PartoutEngine`]: the execution engine of a Ballista executor whose hash shuffles partout
//! writes.

use crate::file::{EncodedPartitions, PartitionStats, StagedFiles, write_task_files};
use crate::pool::SharedClientPool;
use ballista_core::JobId;
use ballista_core::client_pool::BallistaClientPool;
use ballista_core::config::{BALLISTA_SHUFFLE_COMPRESSION_CODEC, BallistaConfig};
use ballista_core::execution_plans::sort_shuffle::SortShuffleWriterExec;
use ballista_core::execution_plans::{RangeShuffleReaderExec, ShuffleReaderExec};
use ballista_core::extension::SessionConfigExt;
use ballista_core::serde::protobuf::ShuffleWritePartition;
use ballista_core::utils::collect_plan_metrics;
use ballista_executor::execution_engine::{
    DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor,
};
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, Time,
};
use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, Partitioning, PhysicalExpr,
};
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use partout_datafusion::DataFusionIds;
use partout_exchange::{PartitionedWriter, WriterOptions};
use partout_format::Encoding;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Memory a task's shuffle write holds when Ballista's plan sets no limit
/// (`ballista.shuffle.sort_based.memory_limit_per_task_bytes = 0`).
pub const DEFAULT_TASK_MEMORY: usize = 256 << 20;

/// The metric of a hash shuffle task partout wrote: its shuffle files' bytes. The scheduler
/// sums it per stage (its stage metrics), so a stage that has it was written by partout.
pub const FILE_BYTES_METRIC: &str = "partout_file_bytes";

/// The least memory one input partition's writer is given, however many share the limit.
const MIN_INPUT_MEMORY: usize = 1 << 20;

/// What a [`PartoutEngine`] has done, for tests and monitoring: a silent fallback to
/// Ballista's own writer shows as shuffle tasks that partout did not write.
#[derive(Debug, Default)]
pub struct EngineCounters {
    /// Hash shuffle-write tasks partout wrote.
    pub shuffle_tasks: AtomicU64,
    /// Rows they wrote.
    pub shuffle_rows: AtomicU64,
    /// Bytes of shuffle files they wrote.
    pub shuffle_file_bytes: AtomicU64,
    /// Tasks handed to Ballista's default engine (stages that are not hash shuffles).
    pub delegated_tasks: AtomicU64,
}

/// The execution engine of a Ballista executor that writes every hash shuffle stage with
/// partout, into Ballista's own sort-shuffle files (which Ballista's readers and Flight
/// service serve unchanged); every other stage goes to Ballista's `DefaultExecutionEngine`.
///
/// Rows go to exactly the partitions Ballista's own writer gives them: DataFusion's hash
/// (`create_hashes` with the repartition seed) modulo the partition count
/// ([`DataFusionIds`]). Compression is the session's `ballista.shuffle.compression.codec`;
/// memory is bounded by the plan's `ballista.shuffle.sort_based.memory_limit_per_task_bytes`
/// (or [`with_task_memory`](Self::with_task_memory)) for the whole task, shared by its input
/// partitions, and reserved from the executor's memory pool: past it, encoded partitions
/// are spilled.
///
/// ```no_run
/// use ballista_executor::executor_process::ExecutorProcessConfig;
/// use partout_ballista::PartoutEngine;
/// use std::sync::Arc;
///
/// let mut config = ExecutorProcessConfig::default();
/// config.override_execution_engine = Some(Arc::new(PartoutEngine::new()));
/// ```
pub struct PartoutEngine {
    default: DefaultExecutionEngine,
    pool: Arc<dyn BallistaClientPool>,
    counters: Arc<EngineCounters>,
    task_memory: Option<usize>,
    task_dirs: Arc<TaskDirs>,
}

/// The newest execution of each task directory on this executor. Ballista names a task's
/// files by its stage and task id, and a stage rolled back after a lost executor runs again
/// with the same task ids: a task of the earlier attempt still running here (its cancel not
/// yet arrived, or lost) writes where the new attempt's task does. Only the newest execution
/// of a directory moves its files into place; an earlier one finishing later is refused, so
/// the files a reader is pointed to are never replaced by a rolled-back attempt's.
#[derive(Debug, Default)]
struct TaskDirs {
    next: AtomicU64,
    newest: Mutex<HashMap<PathBuf, u64>>,
}

impl TaskDirs {
    /// A new execution of `dir`: from now on the newest.
    fn claim(&self, dir: &Path) -> u64 {
        let generation = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(dir.to_path_buf(), generation);
        generation
    }

    /// Moves `files` into place if `generation` is still the newest execution of `dir`.
    fn commit(&self, dir: &Path, generation: u64, files: StagedFiles) -> Result<()> {
        let mut newest = self.lock();
        if newest.get(dir) != Some(&generation) {
            return Err(DataFusionError::Execution(format!(
                "{} was written by a newer attempt of this task (its stage was rolled back \
                 and run again): this attempt's output is left out",
                dir.display()
            )));
        }
        files.commit().map_err(|e| {
            DataFusionError::Execution(format!(
                "moving the shuffle files into place in {}: {e}",
                dir.display()
            ))
        })?;
        newest.remove(dir);
        Ok(())
    }

    /// Forgets `generation` of `dir` if it is still the newest (its task is gone).
    fn release(&self, dir: &Path, generation: u64) {
        let mut newest = self.lock();
        if newest.get(dir) == Some(&generation) {
            newest.remove(dir);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, u64>> {
        // The map stays whole whatever panicked while it was held (one insert or remove).
        self.newest.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for PartoutEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartoutEngine")
            .field("counters", &self.counters)
            .field("task_memory", &self.task_memory)
            .finish_non_exhaustive()
    }
}

impl Default for PartoutEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl PartoutEngine {
    /// An engine with its own client pool for shuffle reads.
    pub fn new() -> Self {
        let pool: Arc<dyn BallistaClientPool> = Arc::new(SharedClientPool::new());
        Self {
            default: DefaultExecutionEngine::with_client_pool(pool.clone()),
            pool,
            counters: Arc::default(),
            task_memory: None,
            task_dirs: Arc::default(),
        }
    }

    /// Bounds each shuffle-write task's memory by `bytes`, whatever the plan says.
    pub fn with_task_memory(mut self, bytes: usize) -> Self {
        self.task_memory = Some(bytes);
        self
    }

    /// What the engine has done.
    pub fn counters(&self) -> Arc<EngineCounters> {
        self.counters.clone()
    }
}

impl ExecutionEngine for PartoutEngine {
    fn create_query_stage_exec(
        &self,
        job_id: JobId,
        stage_id: usize,
        task_id: usize,
        global_output_partition_ids: Vec<usize>,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
        config: &SessionConfig,
    ) -> Result<Arc<dyn QueryStageExecutor>> {
        let hash = plan.downcast_ref::<SortShuffleWriterExec>().and_then(|w| {
            match w.shuffle_output_partitioning() {
                Partitioning::Hash(exprs, k) if *k > 0 => {
                    Some((exprs.clone(), *k, w.config().memory_limit_per_task_bytes))
                }
                _ => None,
            }
        });
        let Some((exprs, partitions, plan_memory)) = hash else {
            self.counters
                .delegated_tasks
                .fetch_add(1, Ordering::Relaxed);
            let delegated = self.default.create_query_stage_exec(
                job_id,
                stage_id,
                task_id,
                global_output_partition_ids,
                plan,
                work_dir,
                config,
            )?;
            return Ok(Arc::new(CodecForBallista(delegated)));
        };
        let Some(input) = plan.children().first().map(|c| (*c).clone()) else {
            return Err(DataFusionError::Internal(format!(
                "the shuffle writer of stage {stage_id} has no input"
            )));
        };
        // The shuffle readers in the input read from this executor's work dir, and fetch
        // from others through the pool, as Ballista's own engine sets them up.
        let input = input
            .transform(|node| {
                Ok(
                    if let Some(reader) = node.downcast_ref::<ShuffleReaderExec>() {
                        Transformed::yes(Arc::new(
                            reader
                                .with_work_dir(work_dir.to_string())
                                .with_client_pool(self.pool.clone()),
                        ) as Arc<dyn ExecutionPlan>)
                    } else if let Some(reader) = node.downcast_ref::<RangeShuffleReaderExec>() {
                        Transformed::yes(Arc::new(
                            reader
                                .with_work_dir(work_dir.to_string())
                                .with_client_pool(self.pool.clone()),
                        ) as Arc<dyn ExecutionPlan>)
                    } else {
                        Transformed::no(node)
                    },
                )
            })?
            .data;
        let task_memory = self.task_memory.unwrap_or(match plan_memory {
            0 => DEFAULT_TASK_MEMORY,
            bytes => bytes,
        });
        let dir = PathBuf::from(work_dir)
            .join(job_id.to_string())
            .join(stage_id.to_string())
            .join(task_id.to_string());
        let generation = self.task_dirs.claim(&dir);
        Ok(Arc::new(PartoutShuffleStage(Arc::new(Stage {
            job_id,
            stage_id,
            task_id,
            input,
            exprs,
            partitions,
            task_memory,
            dir,
            generation,
            task_dirs: self.task_dirs.clone(),
            metrics: ExecutionPlanMetricsSet::new(),
            counters: self.counters.clone(),
        }))))
    }
}

/// One task of a hash shuffle stage, written by partout.
#[derive(Debug)]
struct PartoutShuffleStage(Arc<Stage>);

/// What a task writes, and how.
#[derive(Debug)]
struct Stage {
    job_id: JobId,
    stage_id: usize,
    task_id: usize,
    input: Arc<dyn ExecutionPlan>,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    partitions: usize,
    task_memory: usize,
    dir: PathBuf,
    /// This execution of `dir` (see [`TaskDirs`]).
    generation: u64,
    task_dirs: Arc<TaskDirs>,
    metrics: ExecutionPlanMetricsSet,
    counters: Arc<EngineCounters>,
}

impl Drop for Stage {
    fn drop(&mut self) {
        self.task_dirs.release(&self.dir, self.generation);
    }
}

impl fmt::Display for PartoutShuffleStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = &self.0;
        let metrics: Vec<String> = stage
            .metrics
            .clone_inner()
            .aggregate_by_name()
            .iter()
            .map(|m| m.to_string())
            .collect();
        write!(
            f,
            "PartoutShuffleStage: job {} stage {} task {}, {} partitions: ({})",
            stage.job_id,
            stage.stage_id,
            stage.task_id,
            stage.partitions,
            metrics.join(", ")
        )
    }
}

/// The metrics Ballista's sort-shuffle writer keeps, under its names, for one input.
struct InputMetrics {
    write_time: Time,
    repart_time: Time,
    spill_time: Time,
    input_rows: Count,
    output_rows: Count,
    spill_count: Count,
    spill_bytes: Count,
}

impl InputMetrics {
    fn new(metrics: &ExecutionPlanMetricsSet, input: usize) -> Self {
        Self {
            write_time: MetricBuilder::new(metrics).subset_time("write_time", input),
            repart_time: MetricBuilder::new(metrics).subset_time("repart_time", input),
            spill_time: MetricBuilder::new(metrics).subset_time("spill_time", input),
            input_rows: MetricBuilder::new(metrics).counter("input_rows", input),
            output_rows: MetricBuilder::new(metrics).output_rows(input),
            spill_count: MetricBuilder::new(metrics).counter("spill_count", input),
            spill_bytes: MetricBuilder::new(metrics).counter("spill_bytes", input),
        }
    }
}

/// The shuffle files' encoding: Arrow IPC, compressed as the session's
/// `ballista.shuffle.compression.codec` names it (`none`, `lz4`, `zstd` or, partout's only,
/// `zstd:LEVEL`, read by [`Encoding::parse`]; Ballista's default when unset), trimmed and in lower case as Ballista
/// reads it.
fn encoding(config: &BallistaConfig) -> Result<Encoding> {
    let key = BALLISTA_SHUFFLE_COMPRESSION_CODEC;
    let codec = match config.settings().get(key) {
        Some(codec) => codec.as_str(),
        None => BallistaConfig::valid_entries()
            .get(key)
            .and_then(|entry| entry.default_value())
            .unwrap_or_default(),
    };
    Encoding::parse("ipc", Some(&codec.trim().to_lowercase()))
        .map_err(|e| DataFusionError::Configuration(format!("{key}: {e}")))
}

/// A stage Ballista's own engine runs. Its writers read the same codec setting but take only
/// `none`, `lz4` and `zstd`: when the session names a ZSTD level (`zstd:1`), they are told
/// `zstd` and write zstd's default level, so that a level partout takes never fails a stage
/// partout does not write.
#[derive(Debug)]
struct CodecForBallista(Arc<dyn QueryStageExecutor>);

impl fmt::Display for CodecForBallista {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[async_trait::async_trait]
impl QueryStageExecutor for CodecForBallista {
    async fn execute_query_stage(
        &self,
        task_id: usize,
        context: Arc<TaskContext>,
    ) -> Result<Vec<ShuffleWritePartition>> {
        let key = BALLISTA_SHUFFLE_COMPRESSION_CODEC;
        let config = context.session_config();
        let leveled = config
            .ballista_config()
            .settings()
            .get(key)
            .is_some_and(|codec| codec.trim().to_lowercase().starts_with("zstd:"));
        let context = if leveled {
            // Checked as partout reads it: a wrong level is the session's error either way.
            encoding(&config.ballista_config())?;
            Arc::new(TaskContext::new(
                context.task_id(),
                context.session_id(),
                config.clone().set_str(key, "zstd"),
                context.scalar_functions().clone(),
                context.higher_order_functions().clone(),
                context.aggregate_functions().clone(),
                context.window_functions().clone(),
                context.runtime_env(),
            ))
        } else {
            context
        };
        self.0.execute_query_stage(task_id, context).await
    }

    fn collect_plan_metrics(&self) -> Vec<MetricsSet> {
        self.0.collect_plan_metrics()
    }

    fn collect_runtime_stats_reports(
        &self,
    ) -> Vec<ballista_core::serde::protobuf::RuntimeStatsReport> {
        self.0.collect_runtime_stats_reports()
    }

    fn collect_window_state_reports(
        &self,
    ) -> Result<Vec<ballista_core::serde::protobuf::WindowStateReport>> {
        self.0.collect_window_state_reports()
    }

    fn collect_column_stats(&self) -> Vec<ballista_core::serde::protobuf::TaskColumnStats> {
        self.0.collect_column_stats()
    }
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

impl Stage {
    /// Writes input partition `i`: DataFusion's partition ids, partout's writer, the
    /// destinations' streams held encoded (or spilled).
    async fn write_input(
        self: Arc<Self>,
        i: usize,
        context: Arc<TaskContext>,
        encoding: Encoding,
        memory: usize,
    ) -> Result<EncodedPartitions> {
        let metrics = InputMetrics::new(&self.metrics, i);
        let mut stream = self.input.execute(i, context.clone())?;
        let schema = stream.schema();
        let reservation = MemoryConsumer::new(format!("PartoutShuffleWriter[{i}]"))
            .with_can_spill(true)
            .register(context.memory_pool());
        // Half the memory for the writer's per-destination buffers, half for encoded
        // streams waiting for the end of the task.
        let output = EncodedPartitions::try_new(
            schema.clone(),
            self.partitions,
            encoding,
            memory / 2,
            reservation,
            self.dir.join(format!("partout-spill-{i}.arrows")),
        )
        .map_err(external)?;
        let n = u32::try_from(self.partitions)
            .map_err(|_| DataFusionError::Plan("more than 2^32 - 1 partitions".into()))?;
        let options = WriterOptions::default()
            .with_memory_limit(memory / 2)
            .with_target_bytes((256 << 10).min(memory / 2));
        // The ids are DataFusion's (append_with_ids).
        let mut writer =
            PartitionedWriter::with_given_ids(schema, n, options, output).map_err(external)?;
        let mut ids = DataFusionIds::new(self.exprs.clone(), self.partitions);
        let mut buffer = Vec::new();
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            metrics.input_rows.add(batch.num_rows());
            {
                let _timer = metrics.repart_time.timer();
                ids.compute(&batch, &mut buffer)?;
            }
            let _timer = metrics.write_time.timer();
            writer.append_with_ids(&batch, &buffer).map_err(external)?;
        }
        let timer = metrics.write_time.timer();
        let (output, written) = writer.finish_output().map_err(external)?;
        timer.done();
        metrics.output_rows.add(written.rows_out as usize);
        let (spills, spill_time) = output.spills();
        metrics.spill_count.add(spills);
        metrics.spill_bytes.add(output.spilled_bytes() as usize);
        metrics.spill_time.add_duration(spill_time);
        Ok(output)
    }
}

#[async_trait::async_trait]
impl QueryStageExecutor for PartoutShuffleStage {
    async fn execute_query_stage(
        &self,
        task_id: usize,
        context: Arc<TaskContext>,
    ) -> Result<Vec<ShuffleWritePartition>> {
        let stage = &self.0;
        let inputs = stage.input.output_partitioning().partition_count();
        let encoding = encoding(&context.session_config().ballista_config())?;
        let memory = (stage.task_memory / inputs.max(1)).max(MIN_INPUT_MEMORY);
        std::fs::create_dir_all(&stage.dir).map_err(|e| {
            DataFusionError::Execution(format!("cannot create {}: {e}", stage.dir.display()))
        })?;
        // One task per input partition; dropping this future (a cancelled task) aborts them.
        let tasks: Vec<SpawnedTask<Result<EncodedPartitions>>> = (0..inputs)
            .map(|i| {
                SpawnedTask::spawn(
                    stage
                        .clone()
                        .write_input(i, context.clone(), encoding, memory),
                )
            })
            .collect();
        let mut outputs = Vec::with_capacity(inputs);
        for task in tasks {
            outputs.push(task.join_unwind().await.map_err(external)??);
        }
        let schema = stage.input.schema();
        let partitions = stage.partitions;
        let dir = stage.dir.clone();
        let generation = stage.generation;
        let write_time = MetricBuilder::new(&stage.metrics).subset_time("write_time", inputs);
        let (outputs, written) = SpawnedTask::spawn_blocking(move || {
            let _timer = write_time.timer();
            let mut outputs = outputs;
            let written = write_task_files(&dir, generation, &schema, &mut outputs, partitions);
            (outputs, written)
        })
        .join_unwind()
        .await
        .map_err(external)?;
        let (offsets, files) = written.map_err(|e| {
            DataFusionError::Execution(format!(
                "writing the shuffle files in {}: {e}",
                stage.dir.display()
            ))
        })?;
        stage.task_dirs.commit(&stage.dir, generation, files)?;
        let mut totals = vec![PartitionStats::default(); partitions];
        for output in &outputs {
            for (total, stats) in totals.iter_mut().zip(output.stats()) {
                total.rows += stats.rows;
                total.batches += stats.batches;
                total.bytes += stats.bytes;
            }
        }
        let rows: u64 = totals.iter().map(|t| t.rows).sum();
        stage.counters.shuffle_tasks.fetch_add(1, Ordering::Relaxed);
        stage
            .counters
            .shuffle_rows
            .fetch_add(rows, Ordering::Relaxed);
        let file_bytes = offsets.last().copied().unwrap_or(0).max(0) as u64;
        // Reported with the task's status, summed per stage by the scheduler: the stage's
        // shuffle file bytes, and the mark that partout wrote it.
        MetricBuilder::new(&stage.metrics)
            .global_counter(FILE_BYTES_METRIC)
            .add(file_bytes as usize);
        stage
            .counters
            .shuffle_file_bytes
            .fetch_add(file_bytes, Ordering::Relaxed);
        // As Ballista's writer reports them: partitions with rows, their Arrow bytes.
        Ok(totals
            .iter()
            .enumerate()
            .filter(|(_, t)| t.rows > 0)
            .map(|(p, t)| ShuffleWritePartition {
                partition_id: p as u64,
                num_batches: t.batches,
                num_rows: t.rows,
                num_bytes: t.bytes.max(1),
                file_id: Some(task_id as u64),
                is_sort_shuffle: true,
            })
            .collect())
    }

    fn collect_plan_metrics(&self) -> Vec<MetricsSet> {
        // Shaped as Ballista's own: the writer's metrics, then its input's, node by node.
        let mut metrics = vec![self.0.metrics.clone_inner()];
        metrics.extend(collect_plan_metrics(self.0.input.as_ref()));
        metrics
    }
}

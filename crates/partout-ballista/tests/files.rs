//! partout's shuffle-write tasks against Ballista's own sort-shuffle writer on the same stage:
//! read back with Ballista's own reader, every partition holds exactly the rows Ballista's
//! writer puts there, every column, with statistics of the same kinds (the same partitions and
//! rows, the batches each file holds, bytes within 2x); under every compression Ballista offers,
//! with spills (a small memory limit, a memory pool that refuses), and from several input
//! partitions.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{
    ArrayRef, Decimal128Array, Int64Array, RecordBatch, StringArray, StringViewArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use ballista_core::JobId;
use ballista_core::execution_plans::sort_shuffle::{
    ShuffleIndex, SortShuffleConfig, get_index_path, stream_sort_shuffle_partition,
};
use ballista_core::execution_plans::{ShuffleWriterExec, SortShuffleWriterExec};
use ballista_core::extension::SessionConfigExt;
use ballista_core::serde::protobuf::ShuffleWritePartition;
use ballista_executor::execution_engine::{
    DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor,
};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{GreedyMemoryPool, MemoryPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::{ExecutionPlan, Partitioning, PhysicalExpr};
use datafusion::prelude::SessionConfig;
use futures::TryStreamExt;
use partout_ballista::PartoutEngine;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("key", DataType::Int64, true),
        Field::new("name", DataType::Utf8, false),
        Field::new("view", DataType::Utf8View, true),
        Field::new("price", DataType::Decimal128(15, 2), false),
    ]))
}

/// Rows `start..start + len`: a unique id, a key with repeats and nulls, strings, a decimal.
fn rows(start: i64, len: i64) -> RecordBatch {
    let ids = start..start + len;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(ids.clone())),
        Arc::new(Int64Array::from_iter(
            ids.clone()
                .map(|i| (i % 13 != 5).then_some((i * 7919) % 4099)),
        )),
        Arc::new(StringArray::from_iter_values(
            ids.clone().map(|i| format!("name-{i}")),
        )),
        Arc::new(StringViewArray::from_iter(ids.clone().map(|i| {
            (i % 7 != 0).then(|| format!("a value long enough to live out of line {i}"))
        }))),
        Arc::new(
            Decimal128Array::from_iter_values(ids.map(|i| i128::from(i) * 101))
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

/// `inputs` input partitions of `batches` batches of `len` rows each.
fn input(inputs: usize, batches: usize, len: i64) -> Arc<dyn ExecutionPlan> {
    let mut partitions = vec![Vec::new(); inputs];
    let mut start = 0;
    for k in 0..inputs * batches {
        partitions[k % inputs].push(rows(start, len + (k as i64 % 3)));
        start += len + (k as i64 % 3);
    }
    MemorySourceConfig::try_new_exec(&partitions, schema(), None).unwrap()
}

fn keys() -> Vec<Arc<dyn PhysicalExpr>> {
    vec![
        Arc::new(Column::new("key", 1)) as Arc<dyn PhysicalExpr>,
        Arc::new(Column::new("name", 2)),
    ]
}

/// Task 7 of stage 3 of job `job-1`: a hash shuffle write of `input` into `k` partitions, as
/// `engine` sets it up in `work_dir`.
fn task(
    engine: &dyn ExecutionEngine,
    input: Arc<dyn ExecutionPlan>,
    k: usize,
    work_dir: &str,
    config: &SessionConfig,
) -> Arc<dyn QueryStageExecutor> {
    let job = JobId::from("job-1");
    let writer = SortShuffleWriterExec::try_new(
        job.clone(),
        3,
        input,
        String::new(),
        Partitioning::Hash(keys(), k),
        SortShuffleConfig::new(true, 8192),
    )
    .unwrap();
    engine
        .create_query_stage_exec(
            job,
            3,
            7,
            (0..k).collect(),
            Arc::new(writer),
            work_dir,
            config,
        )
        .unwrap()
}

/// Runs one shuffle-write task of `input` into `k` partitions with `engine`; its statistics
/// and data file.
async fn write(
    engine: &dyn ExecutionEngine,
    input: Arc<dyn ExecutionPlan>,
    k: usize,
    work_dir: &Path,
    codec: &str,
    pool: Arc<dyn MemoryPool>,
) -> (Vec<ShuffleWritePartition>, PathBuf, usize) {
    let config =
        SessionConfig::new_with_ballista().set_str("ballista.shuffle.compression.codec", codec);
    let work_dir = work_dir.to_str().unwrap();
    let exec = task(engine, input, k, work_dir, &config);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(pool)
        .build_arc()
        .unwrap();
    let context = Arc::new(
        TaskContext::default()
            .with_session_config(config)
            .with_runtime(runtime),
    );
    let mut stats = exec.execute_query_stage(7, context).await.unwrap();
    stats.sort_by_key(|s| s.partition_id);
    let data = Path::new(work_dir).join("job-1/3/7/data.arrow");
    assert!(data.exists(), "{}", data.display());
    // The writer's metrics come first, as Ballista's engine reports them.
    let spills = exec.collect_plan_metrics()[0]
        .sum_by_name("spill_count")
        .map_or(0, |v| v.as_usize());
    (stats, data, spills)
}

/// Partition `p` of a sort-shuffle data file, read with Ballista's own reader: its rows, every
/// column, in id order (one batch).
async fn rows_in(data: &Path, p: usize) -> RecordBatch {
    let stream = stream_sort_shuffle_partition(data, &get_index_path(data), p).unwrap();
    let batches: Vec<RecordBatch> = stream.try_collect().await.unwrap();
    for b in &batches {
        assert_eq!(b.schema(), schema());
    }
    let all = datafusion::arrow::compute::concat_batches(&schema(), &batches).unwrap();
    let order = datafusion::arrow::compute::sort_to_indices(all.column(0), None, None).unwrap();
    datafusion::arrow::compute::take_record_batch(&all, &order).unwrap()
}

/// The batches partition `p` of a sort-shuffle data file holds.
async fn batches_in(data: &Path, p: usize) -> u64 {
    let stream = stream_sort_shuffle_partition(data, &get_index_path(data), p).unwrap();
    let batches: Vec<RecordBatch> = stream.try_collect().await.unwrap();
    batches.len() as u64
}

/// The ids of `rows` (sorted already).
fn ids(rows: &RecordBatch) -> Vec<i64> {
    rows.column(0).as_primitive::<Int64Type>().values().to_vec()
}

fn big_pool() -> Arc<dyn MemoryPool> {
    Arc::new(GreedyMemoryPool::new(1 << 30))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partout_writes_what_ballistas_writer_writes() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // (inputs, batches per input, rows per batch, partitions, codec, task memory, pool)
        (1, 3, 2000, 1, "lz4", None, big_pool()),
        (3, 4, 1500, 7, "zstd", None, big_pool()),
        (2, 5, 3000, 64, "none", None, big_pool()),
        // Spilled: a task memory of 1 MiB (each input's encoded streams spill past 512 KiB).
        (2, 40, 4000, 16, "lz4", Some(1 << 20), big_pool()),
        // Spilled: a pool that refuses whatever is asked of it.
        (
            2,
            6,
            2000,
            5,
            "lz4",
            None,
            Arc::new(GreedyMemoryPool::new(0)) as Arc<dyn MemoryPool>,
        ),
        // Held runs (from 200 partitions): each partition's rows written from held batches.
        (2, 6, 4000, 256, "lz4", None, big_pool()),
        (1, 3, 3000, 300, "zstd", Some(1 << 20), big_pool()),
    ];
    for (case, (inputs, batches, len, k, codec, memory, pool)) in cases.into_iter().enumerate() {
        let input = input(inputs, batches, len);
        let ours = PartoutEngine::new();
        let ours = match memory {
            Some(bytes) => ours.with_task_memory(bytes),
            None => ours,
        };
        let counters = ours.counters();
        let (our_stats, our_data, spills) = write(
            &ours,
            input.clone(),
            k,
            &dir.path().join(format!("ours-{case}")),
            codec,
            pool,
        )
        .await;
        assert_eq!(counters.shuffle_tasks.load(Ordering::Relaxed), 1);
        let (their_stats, their_data, _) = write(
            &DefaultExecutionEngine::new(),
            input,
            k,
            &dir.path().join(format!("theirs-{case}")),
            codec,
            big_pool(),
        )
        .await;
        // The same partitions reported, with the same rows.
        let rows = |stats: &[ShuffleWritePartition]| -> Vec<(u64, u64)> {
            stats.iter().map(|s| (s.partition_id, s.num_rows)).collect()
        };
        // The statistics in full: the same partitions and rows; batches as each file holds
        // them; bytes measured as Ballista measures them (the Arrow size of the batches
        // written), which differ with the batches' boundaries but stay comparable for the
        // planner (within 2x).
        assert_eq!(rows(&our_stats), rows(&their_stats), "case {case}");
        for (ours, theirs) in our_stats.iter().zip(&their_stats) {
            let p = ours.partition_id as usize;
            assert_eq!(
                ours.num_batches,
                batches_in(&our_data, p).await,
                "case {case} {p}"
            );
            assert_eq!(
                theirs.num_batches,
                batches_in(&their_data, p).await,
                "case {case} {p}"
            );
            let ratio = ours.num_bytes as f64 / theirs.num_bytes as f64;
            assert!(
                (0.5..=2.0).contains(&ratio),
                "case {case}, partition {p}: {} bytes reported, Ballista's writer {}",
                ours.num_bytes,
                theirs.num_bytes
            );
        }
        for s in &our_stats {
            assert_eq!(s.file_id, Some(7));
            assert!(s.is_sort_shuffle);
            assert!(s.num_bytes > 0 && s.num_batches > 0, "case {case}: {s:?}");
        }
        let index = ShuffleIndex::read_from_file(&get_index_path(&our_data)).unwrap();
        assert_eq!(index.partition_count(), k);
        let mut all = Vec::new();
        for p in 0..k {
            // Every column of every row, against what Ballista's writer put there.
            let got = rows_in(&our_data, p).await;
            assert_eq!(
                got,
                rows_in(&their_data, p).await,
                "case {case}, partition {p}"
            );
            assert_eq!(index.partition_has_data(p), got.num_rows() > 0);
            all.extend(ids(&got));
        }
        all.sort_unstable();
        let total: u64 = their_stats.iter().map(|s| s.num_rows).sum();
        assert_eq!(
            all,
            (0..total as i64).collect::<Vec<_>>(),
            "case {case}: every row once"
        );
        let spilled = memory.is_some() || case == 4;
        assert_eq!(spills > 0, spilled, "case {case}: {spills} spills");
        if spilled {
            // The spill files are gone; only Ballista's two files remain.
            let mut names: Vec<String> = std::fs::read_dir(our_data.parent().unwrap())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(names, ["data.arrow", "data.arrow.index"], "case {case}");
        }
    }
}

/// `ballista.shuffle.compression.codec = zstd:LEVEL`, partout's own: the level reaches
/// partout's files (the same rows as Ballista's writer puts at plain `zstd`, fewer bytes at a
/// higher level), and a stage partout leaves to Ballista's engine still runs, where Ballista's
/// engine alone refuses the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zstd_level_reaches_partouts_files_and_ballistas_own_stages_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(2, 4, 3000);
    let k = 8;
    let (_, theirs, _) = write(
        &DefaultExecutionEngine::new(),
        input.clone(),
        k,
        &dir.path().join("theirs"),
        "zstd",
        big_pool(),
    )
    .await;
    let mut sizes = Vec::new();
    for codec in ["zstd:-50", "zstd:19"] {
        let (_, ours, _) = write(
            &PartoutEngine::new(),
            input.clone(),
            k,
            &dir.path().join(codec),
            codec,
            big_pool(),
        )
        .await;
        for p in 0..k {
            assert_eq!(
                rows_in(&ours, p).await,
                rows_in(&theirs, p).await,
                "{codec} {p}"
            );
        }
        sizes.push(std::fs::metadata(&ours).unwrap().len());
    }
    assert!(
        sizes[1] < sizes[0],
        "file bytes at levels -50 and 19: {sizes:?}"
    );

    // A pass-through stage (Ballista's ShuffleWriterExec): Ballista's engine runs it.
    let run = |engine: &dyn ExecutionEngine, name: &str| {
        let config = SessionConfig::new_with_ballista()
            .set_str("ballista.shuffle.compression.codec", "zstd:1");
        let work_dir = dir.path().join(name);
        let writer = ShuffleWriterExec::try_new(
            JobId::from("job-2"),
            4,
            input.clone(),
            work_dir.to_str().unwrap().to_string(),
        )
        .unwrap();
        let exec = engine
            .create_query_stage_exec(
                JobId::from("job-2"),
                4,
                9,
                vec![0, 1],
                Arc::new(writer),
                work_dir.to_str().unwrap(),
                &config,
            )
            .unwrap();
        let context = Arc::new(TaskContext::default().with_session_config(config));
        async move { exec.execute_query_stage(9, context).await }
    };
    let engine = PartoutEngine::new();
    let written = run(&engine, "pass-ours").await.unwrap();
    assert_eq!(engine.counters().delegated_tasks.load(Ordering::Relaxed), 1);
    let rows: u64 = written.iter().map(|w| w.num_rows).sum();
    // The input's rows: 8 batches of 3000 rows and k % 3 more.
    assert_eq!(rows, (0..8).map(|k| 3000 + k % 3).sum::<u64>());
    let err = run(&DefaultExecutionEngine::new(), "pass-theirs")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("zstd:1"), "{err}");
}

/// A stage rolled back after a lost executor runs again with the same task ids, so two
/// executions of one task can meet on one executor: the earlier attempt's (its cancel not yet
/// arrived) and the new one's, writing the same files. Whichever finishes last, the files in
/// place are the newer execution's, and the earlier one is refused with an error saying why,
/// whether it finishes after the newer one or before it. Nothing else is left in the task's
/// directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_attempt_of_a_task_never_replaces_the_newer_ones_files() {
    rolled_back_attempt(true).await;
}

/// The other order (see above): a guard that keeps whichever files came first fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_attempt_finishing_first_is_refused_and_the_newer_ones_files_stay() {
    rolled_back_attempt(false).await;
}

/// Two attempts of one task, the newer finishing first when `newer_first`, else last.
async fn rolled_back_attempt(newer_first: bool) {
    let engine = PartoutEngine::new();
    let work = tempfile::tempdir().unwrap();
    let work_dir = work.path().to_str().unwrap();
    let config = SessionConfig::new_with_ballista();
    let k = 4;
    // The earlier attempt's task reads ids from 0, the newer's from 1,000,000.
    let attempt = |first_id: i64| {
        let input =
            MemorySourceConfig::try_new_exec(&[vec![rows(first_id, 500)]], schema(), None).unwrap();
        task(&engine, input, k, work_dir, &config)
    };
    let context = || {
        Arc::new(
            TaskContext::default()
                .with_session_config(config.clone())
                .with_runtime(
                    RuntimeEnvBuilder::new()
                        .with_memory_pool(big_pool())
                        .build_arc()
                        .unwrap(),
                ),
        )
    };
    let earlier = attempt(0);
    let newer = attempt(1_000_000);
    // The earlier attempt is refused whenever it finishes: the newer one was planned on this
    // executor after it. Finishing first, it must not leave its files for the newer one to
    // be refused over (as a guard keeping whichever files came first would).
    let refused = if newer_first {
        newer.execute_query_stage(7, context()).await.unwrap();
        earlier.execute_query_stage(7, context()).await.unwrap_err()
    } else {
        let refused = earlier.execute_query_stage(7, context()).await.unwrap_err();
        newer.execute_query_stage(7, context()).await.unwrap();
        refused
    };
    assert!(
        refused.to_string().contains("newer attempt of this task"),
        "{refused}"
    );
    let data = work.path().join("job-1/3/7/data.arrow");
    let mut read = Vec::new();
    for p in 0..k {
        read.extend(ids(&rows_in(&data, p).await));
    }
    read.sort_unstable();
    assert_eq!(
        read,
        (1_000_000..1_000_500).collect::<Vec<i64>>(),
        "the task's files hold rows of the rolled-back attempt"
    );
    let mut left: Vec<String> = std::fs::read_dir(work.path().join("job-1/3/7"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["data.arrow", "data.arrow.index"]);
}

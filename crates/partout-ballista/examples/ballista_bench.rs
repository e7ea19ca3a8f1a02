//! The benchmark of partout inside Ballista, against Ballista's own engine in the same run
//! (its real sort-shuffle writer, not a re-creation), alternating, medians:
//!
//! 1. the shuffle write alone: one task of a hash shuffle stage over TPC-H lineitem held in
//!    memory (2 input partitions, by `l_orderkey`) into 16, 64 and 200 partitions, LZ4, by
//!    each engine: rows per second and the bytes of the files;
//! 2. the 22 TPC-H queries (Parquet files) on two clusters on 127.0.0.1, each a scheduler and
//!    two executors, one with partout's engine and one with Ballista's: per query and total,
//!    and per hash shuffle stage the time its metrics give (`repart_time` + `write_time`, plus
//!    Ballista's `spill_time`, which partout counts inside `write_time`), summed over the
//!    stage's tasks, with the rows and file bytes written. These are not the two writers'
//!    times side by side: Ballista 55's metrics cover computing partition indices and
//!    concatenating encoded partitions into the data file, not buffering, encoding or
//!    compressing them; partout's cover all of its writer. Part 1 compares the writers.
//!
//! ```text
//! cargo run --release -p partout-ballista --example ballista_bench -- --sf 1 --rounds 3
//! ```

#[path = "../../partout-datafusion/tests/common/tpch.rs"]
mod tpch;

use ballista::prelude::SessionContextExt;
use ballista_core::JobId;
use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::execution_plans::SortShuffleWriterExec;
use ballista_core::execution_plans::sort_shuffle::SortShuffleConfig;
use ballista_core::execution_plans::sort_shuffle::{get_index_path, stream_sort_shuffle_partition};
use ballista_core::extension::SessionConfigExt;
use ballista_core::serde::protobuf::ShuffleWritePartition;
use ballista_executor::execution_engine::{
    DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor,
};
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use clap::Parser;
use datafusion::arrow::array::RecordBatch;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::execution::{SessionStateBuilder, TaskContext};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{ExecutionPlan, Partitioning, PhysicalExpr};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use futures::TryStreamExt;
use partout_ballista::PartoutEngine;
use partout_ballista_scheduler::cluster::BallistaCluster;
use partout_ballista_scheduler::config::SchedulerConfig;
use partout_ballista_scheduler::scheduler_process::{
    create_scheduler, start_grpc_service_with_listener,
};
use partout_ballista_scheduler::scheduler_server::SchedulerServer;
use partout_testkit::baseline::DataFusionHash;
use partout_testkit::fingerprint::{self, Fingerprint};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// TPC-H scale factor.
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    /// Alternating rounds of each measurement.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Partition counts of the shuffle write alone.
    #[arg(long, value_delimiter = ',', default_value = "16,64,200")]
    partitions: Vec<usize>,
    /// Skip the queries.
    #[arg(long)]
    no_queries: bool,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("an address")
        .port()
}

/// One shuffle-write task of `input` into `k` partitions by `engine`: seconds, file bytes.
/// With `expected`, every partition of the file is first read back with Ballista's own reader
/// and must hold those rows and values (untimed).
async fn write_once(
    engine: &dyn ExecutionEngine,
    input: Arc<dyn ExecutionPlan>,
    key: Arc<dyn PhysicalExpr>,
    k: usize,
    work_dir: &Path,
    expected: Option<(&str, &[Fingerprint])>,
) -> (f64, u64) {
    let config =
        SessionConfig::new_with_ballista().set_str("ballista.shuffle.compression.codec", "lz4");
    let writer = SortShuffleWriterExec::try_new(
        JobId::from("bench"),
        1,
        input,
        String::new(),
        Partitioning::Hash(vec![key], k),
        SortShuffleConfig::new(true, 8192),
    )
    .expect("a shuffle writer");
    let started = Instant::now();
    let exec = engine
        .create_query_stage_exec(
            JobId::from("bench"),
            1,
            1,
            (0..k).collect(),
            Arc::new(writer),
            work_dir.to_str().expect("a UTF-8 path"),
            &config,
        )
        .expect("a stage");
    let context = Arc::new(TaskContext::default().with_session_config(config));
    exec.execute_query_stage(1, context).await.expect("written");
    let seconds = started.elapsed().as_secs_f64();
    let data = work_dir.join("bench/1/1/data.arrow");
    let bytes = std::fs::metadata(&data)
        .expect("the task's data file")
        .len();
    if let Some((who, expected)) = expected {
        let index = get_index_path(&data);
        let mut got = Vec::with_capacity(k);
        for p in 0..k {
            let stream = stream_sort_shuffle_partition(&data, &index, p).expect("a partition");
            let batches: Vec<RecordBatch> = stream.try_collect().await.expect("read back");
            got.push(fingerprint::of_batches(&batches).expect("a fingerprint"));
        }
        if let Err(e) = fingerprint::check(who, expected, &got) {
            panic!("{e}");
        }
    }
    std::fs::remove_dir_all(work_dir.join("bench")).expect("cleaned");
    (seconds, bytes)
}

/// One hash shuffle-write task, as its stage's metrics and files tell it.
#[derive(Debug, Clone, Copy, Default)]
struct TaskWrite {
    stage: usize,
    writer_ns: u64,
    rows: u64,
    file_bytes: u64,
}

/// The shuffle-write tasks an engine ran, in the order they ended.
type Ledger = Arc<Mutex<Vec<TaskWrite>>>;

/// An engine that records every hash shuffle-write task another engine runs.
struct Metered {
    inner: Arc<dyn ExecutionEngine>,
    /// Whether the engine's `write_time` already includes its `spill_time` (partout's does).
    spill_in_write: bool,
    ledger: Ledger,
}

impl ExecutionEngine for Metered {
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
        let hash = plan
            .downcast_ref::<SortShuffleWriterExec>()
            .is_some_and(|w| matches!(w.shuffle_output_partitioning(), Partitioning::Hash(..)));
        let dir = Path::new(work_dir)
            .join(job_id.as_str())
            .join(stage_id.to_string());
        let exec = self.inner.create_query_stage_exec(
            job_id,
            stage_id,
            task_id,
            global_output_partition_ids,
            plan,
            work_dir,
            config,
        )?;
        if !hash {
            return Ok(exec);
        }
        Ok(Arc::new(MeteredStage {
            inner: exec,
            stage: stage_id,
            dir,
            spill_in_write: self.spill_in_write,
            ledger: self.ledger.clone(),
        }))
    }
}

#[derive(Debug)]
struct MeteredStage {
    inner: Arc<dyn QueryStageExecutor>,
    stage: usize,
    dir: PathBuf,
    spill_in_write: bool,
    ledger: Ledger,
}

impl std::fmt::Display for MeteredStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

#[async_trait::async_trait]
impl QueryStageExecutor for MeteredStage {
    async fn execute_query_stage(
        &self,
        task_id: usize,
        context: Arc<TaskContext>,
    ) -> Result<Vec<ShuffleWritePartition>> {
        let written = self.inner.execute_query_stage(task_id, context).await?;
        let metrics = self.inner.collect_plan_metrics();
        let time = |name: &str| {
            metrics
                .first()
                .and_then(|m| m.sum_by_name(name))
                .map_or(0, |v| v.as_usize() as u64)
        };
        let mut writer_ns = time("repart_time") + time("write_time");
        if !self.spill_in_write {
            writer_ns += time("spill_time");
        }
        let mut files: Vec<u64> = written.iter().filter_map(|w| w.file_id).collect();
        files.sort_unstable();
        files.dedup();
        let file_bytes = files
            .iter()
            .filter_map(|id| {
                std::fs::metadata(self.dir.join(id.to_string()).join("data.arrow")).ok()
            })
            .map(|m| m.len())
            .sum();
        self.ledger.lock().expect("a ledger").push(TaskWrite {
            stage: self.stage,
            writer_ns,
            rows: written.iter().map(|w| w.num_rows).sum(),
            file_bytes,
        });
        Ok(written)
    }

    fn collect_plan_metrics(&self) -> Vec<MetricsSet> {
        self.inner.collect_plan_metrics()
    }
}

/// One engine's view of a stage over the rounds: writer ms per round, rows, file bytes.
type StageRuns = (Vec<f64>, u64, u64);

/// Per stage id, Ballista's runs and partout's.
type QueryStages = BTreeMap<usize, [StageRuns; 2]>;

/// The ledger's tasks summed by stage: writer ms, rows, file bytes.
fn by_stage(tasks: &[TaskWrite]) -> BTreeMap<usize, (f64, u64, u64)> {
    let mut stages = BTreeMap::new();
    for task in tasks {
        let entry = stages.entry(task.stage).or_insert((0.0, 0, 0));
        entry.0 += task.writer_ns as f64 / 1e6;
        entry.1 += task.rows;
        entry.2 += task.file_bytes;
    }
    stages
}

/// A scheduler and two executors on 127.0.0.1, with partout's engine or Ballista's; the
/// scheduler's port and the ledger of its shuffle writes.
async fn cluster(partout: bool, work_dir: &Path) -> (u16, Ledger) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let port = listener.local_addr().expect("an address").port();
    let mut config = SchedulerConfig::default()
        .with_scheduler_policy(TaskSchedulingPolicy::PullStaged)
        .with_hostname("127.0.0.1")
        .with_port(port);
    config.bind_host = "127.0.0.1".into();
    let state = BallistaCluster::new_from_config(&config)
        .await
        .expect("a cluster");
    let scheduler: SchedulerServer<LogicalPlanNode, PhysicalPlanNode> =
        create_scheduler(state, Arc::new(config))
            .await
            .expect("a scheduler");
    tokio::spawn(start_grpc_service_with_listener(listener, scheduler));
    let ledger = Ledger::default();
    for i in 0..2 {
        let dir = work_dir.join(format!(
            "{}-{i}",
            if partout { "partout" } else { "ballista" }
        ));
        std::fs::create_dir_all(&dir).expect("a work dir");
        let mut executor = ExecutorProcessConfig {
            bind_host: "127.0.0.1".into(),
            external_host: Some("127.0.0.1".into()),
            port: free_port(),
            grpc_port: free_port(),
            scheduler_host: "127.0.0.1".into(),
            scheduler_port: port,
            task_scheduling_policy: TaskSchedulingPolicy::PullStaged,
            work_dir: Some(dir.to_str().expect("a UTF-8 path").into()),
            vcores: 2,
            ..ExecutorProcessConfig::default()
        };
        let inner: Arc<dyn ExecutionEngine> = match partout {
            true => Arc::new(PartoutEngine::new()),
            false => Arc::new(DefaultExecutionEngine::new()),
        };
        executor.override_execution_engine = Some(Arc::new(Metered {
            inner,
            spill_in_write: partout,
            ledger: ledger.clone(),
        }));
        tokio::spawn(start_executor_process(Arc::new(executor)));
    }
    (port, ledger)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = Args::parse();
    println!(
        "partout inside Ballista: {}, TPC-H SF {}",
        partout_testkit::machine(),
        args.sf
    );
    let work = tempfile::tempdir().expect("a scratch directory");
    let tables = tpch::tables(args.sf, 8192).expect("TPC-H generated");

    let lineitem = tables
        .iter()
        .find(|t| t.name == "lineitem")
        .expect("lineitem");
    let rows: usize = lineitem.batches.iter().map(|b| b.num_rows()).sum();
    let mut inputs = vec![Vec::new(); 2];
    for (i, batch) in lineitem.batches.iter().enumerate() {
        inputs[i % 2].push(batch.clone());
    }
    let input =
        MemorySourceConfig::try_new_exec(&inputs, lineitem.schema.clone(), None).expect("an input");
    let key: Arc<dyn PhysicalExpr> = Arc::new(Column::new("l_orderkey", 0));
    println!(
        "\n1. The shuffle write alone: {rows} lineitem rows, 2 input partitions, by l_orderkey, LZ4; medians of {} alternating rounds",
        args.rounds
    );
    println!(
        "{:>10} {:>18} {:>16} {:>7} {:>14} {:>14}",
        "partitions", "Ballista Mrows/s", "partout Mrows/s", "ratio", "Ballista MiB", "partout MiB"
    );
    let ours = PartoutEngine::new();
    let theirs = DefaultExecutionEngine::new();
    for &k in &args.partitions {
        let (mut our_times, mut their_times) = (Vec::new(), Vec::new());
        let (mut our_bytes, mut their_bytes) = (0, 0);
        // Both writers' files checked partition by partition against DataFusion's ids (the
        // test kit's re-creation), untimed; then alternating rounds.
        let mut hash = DataFusionHash::new();
        let expected = fingerprint::expected(&lineitem.batches, k as u32, |batch, ids| {
            hash.ids(batch, &[0], k as u32, ids);
            Ok::<(), datafusion::arrow::error::ArrowError>(())
        })
        .expect("the expected fingerprints");
        for (engine, who) in [
            (&ours as &dyn ExecutionEngine, "partout"),
            (&theirs, "Ballista"),
        ] {
            write_once(
                engine,
                input.clone(),
                key.clone(),
                k,
                work.path(),
                Some((who, &expected)),
            )
            .await;
        }
        for round in 0..args.rounds {
            for partout in [round % 2 == 0, round % 2 != 0] {
                let engine: &dyn ExecutionEngine = match partout {
                    true => &ours,
                    false => &theirs,
                };
                let (seconds, bytes) =
                    write_once(engine, input.clone(), key.clone(), k, work.path(), None).await;
                match partout {
                    true => (our_times.push(seconds), our_bytes = bytes),
                    false => (their_times.push(seconds), their_bytes = bytes),
                };
            }
        }
        let (ours_s, theirs_s) = (median(our_times), median(their_times));
        println!(
            "{k:>10} {:>18.1} {:>16.1} {:>6.2}x {:>14.1} {:>14.1}",
            rows as f64 / theirs_s / 1e6,
            rows as f64 / ours_s / 1e6,
            theirs_s / ours_s,
            their_bytes as f64 / (1 << 20) as f64,
            our_bytes as f64 / (1 << 20) as f64,
        );
    }
    if args.no_queries {
        return;
    }

    let data = work.path().join("tables");
    std::fs::create_dir_all(&data).expect("a tables directory");
    for table in &tables {
        let file = std::fs::File::create(data.join(format!("{}.parquet", table.name)))
            .expect("a Parquet file");
        let mut writer = parquet::arrow::ArrowWriter::try_new(file, table.schema.clone(), None)
            .expect("a Parquet writer");
        for batch in &table.batches {
            writer.write(batch).expect("written");
        }
        writer.close().expect("closed");
    }
    drop(tables);
    let mut clients = Vec::new();
    let mut ledgers = Vec::new();
    for partout in [false, true] {
        let (port, ledger) = cluster(partout, work.path()).await;
        ledgers.push(ledger);
        let state = SessionStateBuilder::new()
            .with_config(SessionConfig::new_with_ballista())
            .with_default_features()
            .build();
        let ctx = SessionContext::remote_with_state(&format!("df://127.0.0.1:{port}"), state)
            .await
            .expect("a client");
        for table in [
            "nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem",
        ] {
            let path = data.join(format!("{table}.parquet"));
            ctx.register_parquet(
                table,
                path.to_str().expect("UTF-8"),
                ParquetReadOptions::default(),
            )
            .await
            .expect("registered");
        }
        clients.push(ctx);
    }
    println!(
        "\n2. TPC-H on two clusters of a scheduler and two executors (2 vcores each), Ballista's engine / partout's; medians of {} alternating rounds (ms)",
        args.rounds
    );
    println!(
        "{:>5} {:>10} {:>10} {:>7}",
        "query", "Ballista", "partout", "ratio"
    );
    let (mut total_theirs, mut total_ours) = (0.0, 0.0);
    // Per query and stage, each engine's writer ms per round, and its rows and bytes.
    let mut stages: Vec<QueryStages> = Vec::new();
    for (n, sql) in tpch::QUERIES.iter().enumerate() {
        let mut times = [Vec::new(), Vec::new()];
        let mut query_stages = QueryStages::new();
        let mut answers: [Option<tpch::Answer>; 2] = [None, None];
        for round in 0..args.rounds + 1 {
            for which in [round % 2, 1 - round % 2] {
                ledgers[which].lock().expect("a ledger").clear();
                let started = Instant::now();
                let df = clients[which].sql(sql).await.expect("planned");
                let schema = df.schema().inner().clone();
                let batches = df.collect().await.expect("answered");
                // The first round warms both clusters up, and gives their answers, which must
                // be the same.
                if round == 0 {
                    answers[which] = Some(tpch::Answer::new(&schema, &batches).expect("an answer"));
                }
                if round > 0 {
                    times[which].push(started.elapsed().as_secs_f64() * 1e3);
                    let tasks = std::mem::take(&mut *ledgers[which].lock().expect("a ledger"));
                    for (stage, (ms, rows, bytes)) in by_stage(&tasks) {
                        let entry = &mut query_stages.entry(stage).or_default()[which];
                        entry.0.push(ms);
                        (entry.1, entry.2) = (rows, bytes);
                    }
                }
            }
        }
        if let [Some(theirs), Some(ours)] = &answers
            && let Err(problem) = tpch::compare_answers(n + 1, theirs, ours)
        {
            panic!("q{}: the two clusters' answers differ: {problem}", n + 1);
        }
        let [theirs, ours] = times.map(median);
        total_theirs += theirs;
        total_ours += ours;
        println!(
            "{:>5} {theirs:>10.1} {ours:>10.1} {:>6.2}x",
            format!("q{}", n + 1),
            theirs / ours
        );
        stages.push(query_stages);
    }
    println!(
        "{:>5} {total_theirs:>10.1} {total_ours:>10.1} {:>6.2}x",
        "total",
        total_theirs / total_ours
    );

    println!(
        "\n3. The same runs' hash shuffle stages: the time the stage metrics give (repart + write + spill, summed over the stage's tasks; medians), rows and file bytes.\n   Not comparable as writer times: Ballista's metrics leave out its buffering, encoding and compression, partout's include them (part 1 compares the writers)"
    );
    println!(
        "{:>5} {:>5} {:>10} {:>12} {:>12} {:>7} {:>12} {:>12}",
        "query",
        "stage",
        "rows",
        "Ballista ms",
        "partout ms",
        "ratio",
        "Ballista MiB",
        "partout MiB"
    );
    let (mut write_theirs, mut write_ours) = (0.0, 0.0);
    let mut unmatched = 0;
    for (n, query_stages) in stages.into_iter().enumerate() {
        for (stage, [theirs, ours]) in query_stages {
            if theirs.0.is_empty() || ours.0.is_empty() {
                // Ballista's planner made different stages in the two clusters.
                unmatched += 1;
                continue;
            }
            let (theirs_ms, ours_ms) = (median(theirs.0), median(ours.0));
            write_theirs += theirs_ms;
            write_ours += ours_ms;
            let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
            println!(
                "{:>5} {stage:>5} {:>10} {theirs_ms:>12.1} {ours_ms:>12.1} {:>6.2}x {:>12.2} {:>12.2}",
                format!("q{}", n + 1),
                ours.1,
                theirs_ms / ours_ms.max(1e-3),
                mib(theirs.2),
                mib(ours.2),
            );
        }
    }
    println!(
        "total             {write_theirs:>12.1} {write_ours:>12.1} {:>6.2}x   ({unmatched} stages ran in one cluster only)",
        write_theirs / write_ours.max(1e-3)
    );
}

//! Any order of reading the outputs completes, within the budget: TPC-H lineitem (SF 0.1)
//! hash-repartitioned by `l_orderkey` from 2 inputs, with a 1 MiB `buffer_bytes`, its outputs
//! read one after another to their ends, or all but one read while that one is never polled
//! until the others finish. Every row arrives once, in the partition DataFusion's own
//! `RepartitionExec` gives it (the oracle, run beside it); the memory pool's peak, seen by a
//! pool that records every reservation, stays within the budget; the spill metrics show the
//! rows that could not wait went to disk.

#[path = "common/tpch.rs"]
mod tpch;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{GreedyMemoryPool, MemoryPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning, PhysicalExpr};
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use partout_datafusion::PartoutRepartitionExec;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tpch::PeakPool;

const BUDGET: usize = 1 << 20;

/// lineitem at SF 0.1 in batches of 8192 rows, dealt over 2 input partitions.
fn lineitem() -> &'static [Vec<RecordBatch>] {
    static INPUTS: OnceLock<Vec<Vec<RecordBatch>>> = OnceLock::new();
    INPUTS.get_or_init(|| {
        let tables = tpch::tables(0.1, 8192).unwrap();
        let table = tables.into_iter().find(|t| t.name == "lineitem").unwrap();
        let mut parts = vec![Vec::new(), Vec::new()];
        for (i, batch) in table.batches.into_iter().enumerate() {
            parts[i % 2].push(batch);
        }
        parts
    })
}

fn input() -> Arc<dyn ExecutionPlan> {
    let inputs = lineitem();
    MemorySourceConfig::try_new_exec(inputs, inputs[0][0].schema(), None).unwrap()
}

fn keys() -> Vec<Arc<dyn PhysicalExpr>> {
    vec![Arc::new(Column::new("l_orderkey", 0))]
}

fn context(pool: Arc<dyn MemoryPool>) -> Arc<TaskContext> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(pool)
        .build_arc()
        .unwrap();
    Arc::new(
        TaskContext::default()
            .with_session_config(SessionConfig::new().with_batch_size(8192))
            .with_runtime(runtime),
    )
}

/// Each row as (orderkey, linenumber), sorted: what identifies a lineitem row.
fn rows(batches: &[RecordBatch]) -> Vec<(i64, i32)> {
    let mut rows: Vec<(i64, i32)> = batches
        .iter()
        .flat_map(|b| {
            let keys = b.column(0).as_primitive::<Int64Type>();
            let lines = b.column(3).as_primitive::<arrow_array::types::Int32Type>();
            keys.values()
                .iter()
                .copied()
                .zip(lines.values().iter().copied())
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort_unstable();
    rows
}

/// DataFusion's own answer: each output's rows.
async fn oracle(n: usize) -> Vec<Vec<(i64, i32)>> {
    let plan = RepartitionExec::try_new(input(), Partitioning::Hash(keys(), n)).unwrap();
    let context = context(Arc::new(GreedyMemoryPool::new(1 << 34)));
    let mut out = Vec::new();
    for p in 0..n {
        let stream = plan.execute(p, context.clone()).unwrap();
        let batches: Vec<RecordBatch> = stream.map(|b| b.unwrap()).collect().await;
        out.push(rows(&batches));
    }
    out
}

/// `f`, failed if it has not finished in two minutes.
async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(120), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no progress for 120 s"))
}

fn metric(plan: &dyn ExecutionPlan, name: &str) -> usize {
    plan.metrics()
        .unwrap()
        .iter()
        .filter(|m| m.value().name() == name)
        .map(|m| m.value().as_usize())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_read_one_after_another_complete_within_the_budget() {
    for n in [4, 64] {
        let pool = PeakPool::new(1 << 34);
        let exec = PartoutRepartitionExec::try_new(input(), keys(), n, BUDGET).unwrap();
        let context = context(pool.clone());
        let streams: Vec<_> = (0..n)
            .map(|p| exec.execute(p, context.clone()).unwrap())
            .collect();
        let got = bounded(&format!("{n} outputs read in order"), async {
            let mut got = Vec::new();
            for stream in streams {
                let batches: Vec<RecordBatch> = stream.map(|b| b.unwrap()).collect().await;
                got.push(rows(&batches));
            }
            got
        })
        .await;
        assert_eq!(got, oracle(n).await, "{n} outputs");
        let peak = pool.peak();
        assert!(
            peak <= BUDGET,
            "{n} outputs: {peak} bytes reserved at the peak"
        );
        assert!(peak > 0);
        assert_eq!(pool.reserved(), 0, "bytes left reserved");
        assert!(
            metric(&exec, "spill_count") > 0,
            "{n} outputs: nothing spilled"
        );
        assert!(metric(&exec, "spilled_bytes") > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_output_lets_the_others_finish_and_then_reads_every_row() {
    let n = 4;
    let pool = PeakPool::new(1 << 34);
    let exec = PartoutRepartitionExec::try_new(input(), keys(), n, BUDGET).unwrap();
    let context = context(pool.clone());
    let mut streams: Vec<_> = (0..n)
        .map(|p| exec.execute(p, context.clone()).unwrap())
        .collect();
    let stalled = streams.remove(0);
    let others: Vec<_> = streams
        .into_iter()
        .map(|s| tokio::spawn(async move { s.map(|b| b.unwrap()).collect::<Vec<_>>().await }))
        .collect();
    let mut got = vec![Vec::new()];
    for task in others {
        got.push(rows(&bounded("the outputs read", task).await.unwrap()));
    }
    let peak_while_stalled = pool.peak();
    let batches: Vec<RecordBatch> = stalled.map(|b| b.unwrap()).collect().await;
    got[0] = rows(&batches);
    assert_eq!(got, oracle(n).await);
    assert!(
        peak_while_stalled <= BUDGET,
        "{peak_while_stalled} bytes reserved while an output stalled"
    );
    assert!(pool.peak() <= BUDGET);
    assert!(metric(&exec, "spilled_bytes") > 0);
}

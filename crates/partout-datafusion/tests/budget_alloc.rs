//! The operator's `buffer_bytes`, measured from outside it: under a global counting
//! allocator (this test binary holds this one test, so nothing else allocates beside it),
//! TPC-H lineitem (SF 0.1, 2 inputs in memory) is hash-repartitioned into 8 outputs with a
//! 2 MiB budget, read three ways: all at once, one after another to their ends, and all but
//! one while that one stalls. The bytes the whole process holds beyond the input stay within
//! the budget plus what the budget says it does not cover (the batch each output's reader
//! holds, a spilled batch read back) and a stated constant; DataFusion's own operator, read one output after another, holds the input over
//! again in the same measurement. Every output's rows are those DataFusion's `RepartitionExec` gives it.

#[path = "../../partout-exchange/tests/counting/mod.rs"]
mod counting;
#[path = "common/tpch.rs"]
mod tpch;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning, PhysicalExpr};
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use partout_datafusion::PartoutRepartitionExec;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const BUDGET: usize = 2 << 20;
const OUTPUTS: usize = 8;
const BATCH_SIZE: usize = 1024;
/// What the process may hold beyond the budget and the uncovered batches: the runtime's
/// tasks and channels, the spill files' writers, the plan's metrics.
const CONSTANT: i64 = 1 << 20;

/// An output's rows as a count and an order-free sum of each row's (orderkey, linenumber)
/// mixed: taken without allocating, so the measurement sees only the operator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Print {
    rows: u64,
    sum: u64,
}

impl Print {
    fn add(&mut self, batch: &RecordBatch) {
        let keys = batch.column(0).as_primitive::<Int64Type>();
        let lines = batch.column(3).as_primitive::<Int32Type>();
        for (k, l) in keys.values().iter().zip(lines.values().iter()) {
            let x = (*k as u64) << 8 ^ (*l as u64);
            // splitmix64's finaliser: every bit of the row moves the sum.
            let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            self.sum = self.sum.wrapping_add(z ^ (z >> 31));
        }
        self.rows += batch.num_rows() as u64;
    }
}

fn keys() -> Vec<Arc<dyn PhysicalExpr>> {
    vec![Arc::new(Column::new("l_orderkey", 0))]
}

fn context() -> Arc<TaskContext> {
    Arc::new(
        TaskContext::default()
            .with_session_config(SessionConfig::new().with_batch_size(BATCH_SIZE)),
    )
}

/// `f`, failed if it has not finished in two minutes.
async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(120), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no progress for 120 s"))
}

async fn print_of(plan: Arc<dyn ExecutionPlan>, p: usize, context: Arc<TaskContext>) -> Print {
    let mut stream = plan.execute(p, context).unwrap();
    let mut print = Print::default();
    while let Some(batch) = stream.next().await {
        print.add(&batch.unwrap());
    }
    print
}

#[derive(Clone, Copy, Debug)]
enum Reading {
    AllAtOnce,
    OneAfterAnother,
    OneStalled,
}

/// Runs `plan` read as `reading`: each output's print, and the most bytes the process held
/// beyond what it held before.
async fn measure(plan: Arc<dyn ExecutionPlan>, reading: Reading) -> (Vec<Print>, i64) {
    let context = context();
    let base = counting::start();
    let prints = bounded(&format!("{reading:?}"), async {
        match reading {
            Reading::AllAtOnce => {
                let tasks: Vec<_> = (0..OUTPUTS)
                    .map(|p| tokio::spawn(print_of(plan.clone(), p, context.clone())))
                    .collect();
                let mut prints = Vec::new();
                for task in tasks {
                    prints.push(task.await.unwrap());
                }
                prints
            }
            Reading::OneAfterAnother => {
                let mut prints = Vec::new();
                for p in 0..OUTPUTS {
                    prints.push(print_of(plan.clone(), p, context.clone()).await);
                }
                prints
            }
            Reading::OneStalled => {
                // Output 0 is opened first and not polled until the others have finished.
                let mut stalled = plan.execute(0, context.clone()).unwrap();
                let tasks: Vec<_> = (1..OUTPUTS)
                    .map(|p| tokio::spawn(print_of(plan.clone(), p, context.clone())))
                    .collect();
                let mut prints = vec![Print::default()];
                for task in tasks {
                    prints.push(task.await.unwrap());
                }
                while let Some(batch) = stalled.next().await {
                    prints[0].add(&batch.unwrap());
                }
                prints
            }
        }
    })
    .await;
    (prints, counting::peak_since(base))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_holds_the_budget_and_the_batches_it_does_not_cover() {
    let inputs = {
        let tables = tpch::tables(0.1, 8192).unwrap();
        let table = tables.into_iter().find(|t| t.name == "lineitem").unwrap();
        let mut parts = vec![Vec::new(), Vec::new()];
        for (i, batch) in table.batches.into_iter().enumerate() {
            parts[i % 2].push(batch);
        }
        parts
    };
    let schema = inputs[0][0].schema();
    let input_bytes: usize = inputs
        .iter()
        .flatten()
        .map(RecordBatch::get_array_memory_size)
        .sum();
    let input_rows: usize = inputs.iter().flatten().map(RecordBatch::num_rows).sum();
    let input = || MemorySourceConfig::try_new_exec(&inputs, schema.clone(), None).unwrap();
    // A gathered batch of `BATCH_SIZE` rows, at the input's bytes a row.
    let batch_bytes = (input_bytes / input_rows * BATCH_SIZE) as i64;
    // Not covered: the batch each output's reader holds, and one spilled batch being read
    // back (the batches under construction are the budget's).
    let allowed = BUDGET as i64 + (OUTPUTS as i64 + 1) * batch_bytes + CONSTANT;

    let oracle = RepartitionExec::try_new(input(), Partitioning::Hash(keys(), OUTPUTS)).unwrap();
    let (want, datafusion_peak) = measure(Arc::new(oracle), Reading::OneAfterAnother).await;
    assert_eq!(
        want.iter().map(|p| p.rows).sum::<u64>(),
        input_rows as u64,
        "the oracle's rows"
    );
    println!(
        "input {input_bytes} bytes; DataFusion's RepartitionExec read one output after \
         another: {datafusion_peak} bytes held at the peak"
    );
    // The measurement sees an operator that holds rows: DataFusion's, whose outputs' queues
    // are unbounded, holds at least the input's rows over again.
    assert!(
        datafusion_peak > input_bytes as i64 / 2,
        "the allocator saw {datafusion_peak} bytes held by DataFusion's RepartitionExec"
    );
    for reading in [
        Reading::AllAtOnce,
        Reading::OneAfterAnother,
        Reading::OneStalled,
    ] {
        let plan =
            Arc::new(PartoutRepartitionExec::try_new(input(), keys(), OUTPUTS, BUDGET).unwrap());
        let (got, peak) = measure(plan, reading).await;
        assert_eq!(
            got, want,
            "{reading:?}: each output's rows against DataFusion's"
        );
        println!(
            "{reading:?}: {peak} bytes held at the peak (allowed {allowed}: budget {BUDGET}, \
             {} batches of {batch_bytes} bytes, constant {CONSTANT})",
            OUTPUTS + 1
        );
        assert!(
            peak <= allowed,
            "{reading:?}: the process held {peak} bytes beyond the input, past the {allowed} \
             allowed"
        );
    }
}

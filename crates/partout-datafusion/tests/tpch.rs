//! TPC-H q1..q22 at SF 0.1 with and without partout: the same answers, and every hash
//! `RepartitionExec` of DataFusion's plan replaced by a `PartoutRepartitionExec`.
//!
//! The data is generated in process once (`partout_datafusion::tpch`), held in `MemTable`s
//! whose batches are dealt round-robin over `target_partitions` partitions. Each query runs for
//! `target_partitions` 2, 4 and 8 in a plain DataFusion session and in a session built with
//! `with_partout()`. All failures are gathered and reported together; each names the query and
//! `target_partitions`.

#[path = "common/tpch.rs"]
mod tpch;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::physical_plan::{collect, displayable};
use datafusion::prelude::SessionContext;

/// Scale factor of the generated data.
const SCALE_FACTOR: f64 = 0.1;
/// Rows per generated batch.
const BATCH_SIZE: usize = 8192;
/// The `target_partitions` every query runs with.
const TARGET_PARTITIONS: [usize; 3] = [2, 4, 8];
/// Bound on the whole run, so that a hang fails instead of blocking CI.
const TIMEOUT: Duration = Duration::from_secs(600);
/// The eight TPC-H tables at [`SCALE_FACTOR`], generated once.
fn tables() -> &'static [tpch::Table] {
    static TABLES: OnceLock<Vec<tpch::Table>> = OnceLock::new();
    TABLES.get_or_init(|| tpch::tables(SCALE_FACTOR, BATCH_SIZE).expect("TPC-H generated"))
}

/// A session of `target_partitions` partitions with the tables, with partout or without.
fn context(target_partitions: usize, partout: bool) -> SessionContext {
    let ctx = tpch::session(target_partitions, partout);
    tpch::register(&ctx, tables(), target_partitions).expect("tables registered");
    ctx
}

/// A DataFusion session without partout.
fn plain_context(target_partitions: usize) -> SessionContext {
    context(target_partitions, false)
}

/// A DataFusion session with partout.
fn partout_context(target_partitions: usize) -> SessionContext {
    context(target_partitions, true)
}

/// The text of query `n`.
fn query(n: usize) -> String {
    tpch::QUERIES[n - 1].to_string()
}

/// The physical plan of `sql` as indented text, and its answer (from that very plan).
async fn run(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<(String, tpch::Answer)> {
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    let schema = plan.schema();
    let batches = collect(plan, ctx.task_ctx()).await?;
    Ok((text, tpch::Answer::new(&schema, &batches)?))
}

/// Whether a line of an indented plan is DataFusion's hash `RepartitionExec`.
fn is_hash_repartition(line: &str) -> bool {
    line.trim_start()
        .starts_with("RepartitionExec: partitioning=Hash")
}

/// Whether a line of an indented plan is partout's repartition.
fn is_partout_repartition(line: &str) -> bool {
    line.trim_start().starts_with("PartoutRepartitionExec")
}

/// The operator names of an indented plan, partout's repartition read as DataFusion's.
fn plan_shape(plan: &str) -> Vec<String> {
    plan.lines()
        .map(|line| {
            let line = line.trim_start();
            let name = line.split(':').next().unwrap_or(line);
            if name == "PartoutRepartitionExec" {
                "RepartitionExec".to_owned()
            } else {
                name.to_owned()
            }
        })
        .collect()
}

/// Checks partout's plan against the plain one; returns what is wrong.
fn compare_plans(plain: &str, partout: &str) -> Result<(), String> {
    let plain_hash = plain.lines().filter(|l| is_hash_repartition(l)).count();
    let partout_hash = partout.lines().filter(|l| is_hash_repartition(l)).count();
    let partout_ours = partout
        .lines()
        .filter(|l| is_partout_repartition(l))
        .count();
    let mut problems = Vec::new();
    if partout_hash != 0 {
        problems.push(format!(
            "the partout plan still has {partout_hash} hash RepartitionExec"
        ));
    }
    if plain_hash > 0 && partout_ours == 0 {
        problems.push(format!(
            "the plain plan has {plain_hash} hash RepartitionExec but the partout plan no \
             PartoutRepartitionExec"
        ));
    } else if partout_ours != plain_hash {
        problems.push(format!(
            "the plain plan has {plain_hash} hash RepartitionExec, the partout plan \
             {partout_ours} PartoutRepartitionExec"
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    let shape = if plan_shape(plain) == plan_shape(partout) {
        "the plans have the same shape"
    } else {
        "the plans differ in shape"
    };
    Err(format!(
        "{}; {shape}\n--- plain plan:\n{plain}--- partout plan:\n{partout}",
        problems.join("; ")
    ))
}

/// Runs every query in both sessions for `target_partitions`; appends failures to `failures`.
/// `current` names the query being run, for the timeout's message.
async fn check_target_partitions(
    target_partitions: usize,
    failures: &mut Vec<String>,
    current: &mut String,
) {
    let plain = plain_context(target_partitions);
    let partout = partout_context(target_partitions);
    for n in 1..=22 {
        let what = format!("q{n} with target_partitions={target_partitions}");
        current.clone_from(&what);
        let sql = query(n);
        let started = Instant::now();
        let expected = match run(&plain, &sql).await {
            Ok(result) => result,
            Err(e) => {
                failures.push(format!("{what}: the plain session failed: {e}"));
                continue;
            }
        };
        let plain_time = started.elapsed();
        let started = Instant::now();
        let actual = match run(&partout, &sql).await {
            Ok(result) => result,
            Err(e) => {
                failures.push(format!("{what}: the partout session failed: {e}"));
                continue;
            }
        };
        let partout_time = started.elapsed();
        println!(
            "{what}: {} rows, plain {plain_time:.2?}, partout {partout_time:.2?}",
            expected.1.num_rows()
        );
        if let Err(problem) = tpch::compare_answers(n, &expected.1, &actual.1) {
            failures.push(format!("{what}: answers differ: {problem}"));
        }
        if let Err(problem) = compare_plans(&expected.0, &actual.0) {
            failures.push(format!("{what}: plans: {problem}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_answers_and_plans_match_datafusion() {
    let started = Instant::now();
    let rows: usize = tables()
        .iter()
        .map(|t| t.batches.iter().map(RecordBatch::num_rows).sum::<usize>())
        .sum();
    println!(
        "generated TPC-H SF {SCALE_FACTOR}: {rows} rows in {:.2?}",
        started.elapsed()
    );
    let mut failures = Vec::new();
    let mut current = String::new();
    let run = async {
        for target_partitions in TARGET_PARTITIONS {
            check_target_partitions(target_partitions, &mut failures, &mut current).await;
        }
    };
    if tokio::time::timeout(TIMEOUT, run).await.is_err() {
        failures.push(format!(
            "{current}: timed out: the whole run took more than {TIMEOUT:?}"
        ));
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Spills recorded by every `PartoutRepartitionExec` in `plan`.
fn spills(plan: &dyn datafusion::physical_plan::ExecutionPlan) -> usize {
    let own = match plan.name() {
        "PartoutRepartitionExec" => plan.metrics().map_or(0, |metrics| {
            metrics
                .iter()
                .filter(|m| m.value().name() == "spill_count")
                .map(|m| m.value().as_usize())
                .sum()
        }),
        _ => 0,
    };
    own + plan
        .children()
        .iter()
        .map(|c| spills(c.as_ref()))
        .sum::<usize>()
}

/// With `partout.buffer_bytes` at 1 MiB and 8 partitions, rows that cannot wait for their
/// consumers are spilled: the answers stay DataFusion's, and the spills show it was so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_answers_match_datafusion_with_a_1_mib_budget() {
    let plain = plain_context(8);
    let partout = partout_context(8);
    partout
        .sql("SET partout.buffer_bytes = 1048576")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut failures = Vec::new();
    let mut spilled = 0;
    let run_all = async {
        for n in 1..=22 {
            let sql = query(n);
            let expected = run(&plain, &sql).await.expect("the plain session");
            let plan = partout
                .sql(&sql)
                .await
                .unwrap()
                .create_physical_plan()
                .await;
            let result = match plan {
                Ok(plan) => {
                    let schema = plan.schema();
                    match collect(plan.clone(), partout.task_ctx()).await {
                        Ok(batches) => {
                            spilled += spills(plan.as_ref());
                            tpch::Answer::new(&schema, &batches)
                        }
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(answer) => {
                    if let Err(problem) = tpch::compare_answers(n, &expected.1, &answer) {
                        failures.push(format!("q{n}: answers differ: {problem}"));
                    }
                }
                Err(e) => failures.push(format!("q{n}: the partout session failed: {e}")),
            }
        }
    };
    if tokio::time::timeout(TIMEOUT, run_all).await.is_err() {
        failures.push(format!("timed out after {TIMEOUT:?}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!("{spilled} batches spilled over the 22 queries");
    assert!(spilled > 0, "no query spilled with a 1 MiB budget");
}

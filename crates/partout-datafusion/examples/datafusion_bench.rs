//! The benchmark of partout inside DataFusion, against DataFusion's own `RepartitionExec` in
//! the same run (not a re-creation), alternating, medians:
//!
//! 1. the operator alone: TPC-H lineitem batches from 2 input partitions hash-repartitioned
//!    by `l_orderkey` into 16, 64 and 200 partitions, every output drained concurrently,
//!    alternating in this process: rates, each contender's page faults and CPU time per run
//!    (`getrusage`), the memory pool's peak, the process's peak heap above its input (a
//!    counting allocator over mimalloc, counting only in a round of its own so that the timed
//!    rounds pay nothing for it) and what partout spilled; then each contender alone in a
//!    process of its own (`--alone`), and the whole section again in a process whose
//!    allocator is kept warm (`MIMALLOC_PURGE_DELAY=-1`: freed pages are kept rather than
//!    returned and faulted in again; `--warm-rerun`); and the same preserving order
//!    (`preserve_order`: the inputs declared sorted by `l_orderkey`, each output merged), into
//!    16 and 64 partitions, every output's order checked;
//!    Other shapes of section 1: `--table` (any TPC-H table), `--keys` (Int64, Utf8 or Utf8View
//!    columns, several for a multi-column key), `--inputs` (input partitions); preserving order
//!    needs lineitem by `l_orderkey`, and is skipped otherwise;
//! 2. the operator alone with its outputs read one after another to their ends (a consumer
//!    that reads partitions in order), into 4 and 64 partitions: time, the memory pool's peak
//!    (a pool that records every reservation), and what partout spilled,  at the default
//!    64 MiB `buffer_bytes` (`--buffer-bytes`); each output's rows counted against DataFusion's;
//! 3. the 22 TPC-H queries with the rule on and off, per query and in total, with the
//!    repartition operators' `repartition_time` and `send_time` (each summed over their
//!    metrics); the first round's answers with the rule on checked against those without.
//!
//! Both contenders run in this one process under mimalloc, datafusion-cli's allocator.
//!
//! ```text
//! cargo run --release -p partout-datafusion --example datafusion_bench -- --sf 1 --rounds 5
//! ```

#[path = "../tests/common/tpch.rs"]
mod tpch;

use clap::Parser;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{Int64Type, SchemaRef};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::memory::{DataSourceExec, MemorySourceConfig};
use datafusion::execution::TaskContext;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_expr::PhysicalSortExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, Partitioning, PhysicalExpr, collect,
};
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use partout_datafusion::PartoutRepartitionExec;
use partout_testkit::baseline::DataFusionHash;
use partout_testkit::fingerprint::{self, Fingerprint};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::Instant;
use tpch::PeakPool;

// datafusion-cli's allocator; both contenders run in this one process under it, counted
// only while `COUNTING` is set.
#[global_allocator]
static GLOBAL: Counting = Counting;

/// mimalloc, and while `COUNTING` is set, the bytes allocated and not yet freed (`HELD`) and
/// the most of them at once (`PEAK`).
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static HELD: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn note(delta: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        let now = HELD.fetch_add(delta, Ordering::Relaxed) + delta;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to mimalloc unchanged; the counters are static atomics,
// which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// The most the process held at once above what it held when counting began, while `f` ran
/// (bytes allocated before and freed during it count as negative).
async fn peak_heap<T>(f: impl std::future::Future<Output = T>) -> (T, usize) {
    HELD.store(0, Ordering::SeqCst);
    PEAK.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let out = f.await;
    COUNTING.store(false, Ordering::SeqCst);
    (out, PEAK.load(Ordering::SeqCst).max(0) as usize)
}

/// The process's minor and major page faults and its CPU seconds (user and system) so far.
fn usage() -> (u64, f64) {
    // SAFETY: getrusage writes the struct it is given, which is zeroed and of its type.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        (usage.ru_minflt + usage.ru_majflt) as u64,
        seconds(usage.ru_utime) + seconds(usage.ru_stime),
    )
}

/// Whether this process's mimalloc keeps freed pages (`MIMALLOC_PURGE_DELAY=-1`).
fn allocator_warm() -> bool {
    std::env::var("MIMALLOC_PURGE_DELAY").is_ok_and(|v| v == "-1")
}

#[derive(Parser)]
struct Args {
    /// TPC-H scale factor.
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    /// The TPC-H table of the operator-alone sections.
    #[arg(long, default_value = "lineitem")]
    table: String,
    /// The key columns of the operator-alone sections (Int64, Utf8 or Utf8View columns).
    #[arg(long, value_delimiter = ',', default_value = "l_orderkey")]
    keys: Vec<String>,
    /// Input partitions of the operator-alone sections.
    #[arg(long, default_value_t = 2)]
    inputs: usize,
    /// Alternating rounds of the operator alone.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Output partition counts of the operator alone (`--partitions` alone: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "16,64,200")]
    partitions: Vec<usize>,
    /// Output partition counts of the order-preserving repartitions (`--ordered` alone: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "16,64")]
    ordered: Vec<usize>,
    /// Output partition counts of the outputs read one after another (`--sequential` alone: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "4,64")]
    sequential: Vec<usize>,
    /// Alternating rounds of the 22 queries (0: skip them).
    #[arg(long, default_value_t = 3)]
    query_rounds: usize,
    /// `target_partitions` of the queries.
    #[arg(long, default_value_t = 2)]
    target_partitions: usize,
    /// partout's `buffer_bytes` in the operator-alone sections.
    #[arg(long, default_value_t = 64 << 20)]
    buffer_bytes: usize,
    /// Section 1 with each contender alone in a process of its own, too.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    alone: bool,
    /// Section 1 again in a process whose allocator is kept warm (`MIMALLOC_PURGE_DELAY=-1`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    warm_rerun: bool,
    /// Sections 1 and 1b alone, for one contender only (`datafusion` or `partout`), printing
    /// one line a partition count (the processes `--alone` starts; and a process to profile
    /// one contender's order-preserving repartition in).
    #[arg(long)]
    only: Option<String>,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Every output partition of `plan` drained concurrently, each one's batches folded by `fold`
/// into a value that starts at `start`: the values, by output.
async fn per_output<T: Clone + Send + 'static>(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
    start: T,
    fold: fn(&mut T, &RecordBatch) -> Result<()>,
) -> Result<Vec<T>> {
    let n = plan.output_partitioning().partition_count();
    let tasks: Vec<_> = (0..n)
        .map(|p| {
            let stream = plan.execute(p, context.clone());
            let mut value = start.clone();
            tokio::spawn(async move {
                let mut stream = stream?;
                while let Some(batch) = stream.next().await {
                    fold(&mut value, &batch?)?;
                }
                Ok::<T, datafusion::common::DataFusionError>(value)
            })
        })
        .collect();
    let mut values = Vec::with_capacity(n);
    for task in tasks {
        values.push(task.await.expect("an output's task")?);
    }
    Ok(values)
}

/// Drains every output partition of `plan` concurrently; the rows out.
async fn drain(plan: Arc<dyn ExecutionPlan>, context: Arc<TaskContext>) -> Result<usize> {
    let rows = per_output(plan, context, 0, |rows, batch| {
        *rows += batch.num_rows();
        Ok(())
    });
    Ok(rows.await?.into_iter().sum())
}

/// What each of `n` partitions must hold of `batches` repartitioned by DataFusion's hash of
/// the columns `keys`, by the test kit's re-creation of DataFusion's ids.
fn expected(batches: &[RecordBatch], keys: &[usize], n: usize) -> Result<Vec<Fingerprint>> {
    let mut hash = DataFusionHash::new();
    Ok(fingerprint::expected(batches, n as u32, |batch, ids| {
        hash.ids(batch, keys, n as u32, ids);
        Ok::<(), datafusion::arrow::error::ArrowError>(())
    })?)
}

/// Checks both contenders' outputs before any is timed: every partition's rows and values
/// (hashed by the columns `keys`), and when `ordered`, its `l_orderkey` (the first column)
/// never decreasing.
async fn check_outputs(
    plan: impl Fn(bool) -> Result<Arc<dyn ExecutionPlan>>,
    batches: &[RecordBatch],
    keys: &[usize],
    n: usize,
    context: &Arc<TaskContext>,
    ordered: bool,
) -> Result<()> {
    let expected = expected(batches, keys, n)?;
    for (ours, who) in [(false, "DataFusion's RepartitionExec"), (true, "partout")] {
        // Each output's fingerprint, its last l_orderkey, and whether they never decreased.
        let start: (Fingerprint, i64, bool) = (Fingerprint::default(), i64::MIN, true);
        let got = per_output(
            plan(ours)?,
            context.clone(),
            start,
            |(print, last, sorted), batch| {
                let first = batch.column(0).as_primitive_opt::<Int64Type>();
                for &key in first.map(|c| c.values().as_ref()).unwrap_or_default() {
                    *sorted &= key >= *last;
                    *last = key;
                }
                Ok(fingerprint::add_batch(print, batch)?)
            },
        )
        .await?;
        if ordered && got.iter().any(|(_, _, sorted)| !sorted) {
            return Err(DataFusionError::Execution(format!(
                "{who}: an output out of l_orderkey order"
            )));
        }
        let got: Vec<Fingerprint> = got.into_iter().map(|(print, _, _)| print).collect();
        fingerprint::check(who, &expected, &got).map_err(DataFusionError::Execution)?;
    }
    Ok(())
}

/// Reads every output partition of `plan` to its end, one after another; the rows of each.
async fn drain_in_order(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
) -> Result<Vec<usize>> {
    let n = plan.output_partitioning().partition_count();
    let streams = (0..n)
        .map(|p| plan.execute(p, context.clone()))
        .collect::<Result<Vec<_>>>()?;
    let mut rows = Vec::with_capacity(n);
    for mut stream in streams {
        let mut out = 0;
        while let Some(batch) = stream.next().await {
            out += batch?.num_rows();
        }
        rows.push(out);
    }
    Ok(rows)
}

/// `input` hash-repartitioned by `keys` into `n` partitions: by partout with `buffer_bytes`
/// when given, by DataFusion's `RepartitionExec` otherwise.
fn repartition(
    input: &Arc<dyn ExecutionPlan>,
    keys: &[Arc<dyn PhysicalExpr>],
    n: usize,
    buffer_bytes: Option<usize>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let keys = keys.to_vec();
    let mut theirs = RepartitionExec::try_new(input.clone(), Partitioning::Hash(keys, n))?;
    // An input declared sorted: the order is preserved (each output merged).
    if input.output_ordering().is_some() {
        theirs = theirs.with_preserve_order();
    }
    Ok(match buffer_bytes {
        Some(bytes) => Arc::new(
            PartoutRepartitionExec::from_repartition(&theirs, bytes)
                .ok_or_else(|| DataFusionError::Plan(format!("partout refuses {n} outputs")))?,
        ),
        None => Arc::new(theirs),
    })
}

/// `inputs` declared sorted by `key`. tpchgen writes lineitem in l_orderkey order, and each
/// input partition takes every other batch: both are sorted by it (check_outputs fails
/// otherwise).
fn sorted_input(
    inputs: &[Vec<RecordBatch>],
    schema: &SchemaRef,
    key: &Arc<dyn PhysicalExpr>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let sorted = MemorySourceConfig::try_new(inputs, schema.clone(), None)?
        .try_with_sort_information(vec![
            [PhysicalSortExpr::new(key.clone(), SortOptions::default())].into(),
        ])?;
    Ok(DataSourceExec::from_data_source(sorted))
}

/// A task context of 8192-row batches whose memory pool is `pool`.
fn peak_context(pool: &Arc<PeakPool>) -> Result<Arc<TaskContext>> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(pool.clone())
        .build_arc()?;
    Ok(Arc::new(
        TaskContext::default()
            .with_session_config(SessionConfig::new().with_batch_size(8192))
            .with_runtime(runtime),
    ))
}

/// A metric of `plan` summed over its partitions (0 when it has none).
fn metric(plan: &dyn ExecutionPlan, name: &str) -> usize {
    plan.metrics().map_or(0, |metrics| {
        metrics
            .iter()
            .filter(|m| m.value().name() == name)
            .map(|m| m.value().as_usize())
            .sum()
    })
}

/// The repartition operators' time in `plan` by the metric `name` (`repartition_time`: hashing
/// and laying rows out; `send_time`: handing batches over, waiting for room included), in
/// seconds.
fn repartition_seconds(plan: &Arc<dyn ExecutionPlan>, name: &str) -> f64 {
    let mut seconds = 0.0;
    if matches!(plan.name(), "RepartitionExec" | "PartoutRepartitionExec")
        && let Some(metrics) = plan.metrics()
        && let Some(value) = metrics.sum_by_name(name)
    {
        seconds += value.as_usize() as f64 / 1e9;
    }
    seconds
        + plan
            .children()
            .into_iter()
            .map(|child| repartition_seconds(child, name))
            .sum::<f64>()
}

/// One contender's figures in a section-1 run: median seconds, page faults and CPU seconds
/// per run, the memory pool's peak, the process's peak heap above its input, and the median
/// bytes spilled.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    seconds: f64,
    faults: f64,
    cpu: f64,
    pool: usize,
    heap: usize,
    spilled: f64,
}

/// One warm-up of each contender in `who` (false: DataFusion, true: partout), one round of
/// each with the heap counted, then `rounds` alternating rounds (the order flips every
/// round), every output drained concurrently: each contender's figures, in `who`'s order.
async fn timed_rounds(
    plan: impl Fn(bool) -> Result<Arc<dyn ExecutionPlan>>,
    rows: usize,
    rounds: usize,
    context: &Arc<TaskContext>,
    who: &[bool],
) -> Result<Vec<Figures>> {
    let mut figures = vec![Figures::default(); who.len()];
    for (&ours, figures) in who.iter().zip(&mut figures) {
        drain(plan(ours)?, context.clone()).await?;
        let plan = plan(ours)?;
        let (out, heap) = peak_heap(drain(plan, context.clone())).await;
        assert_eq!(out?, rows, "every row out");
        figures.heap = heap;
    }
    let mut runs = vec![[Vec::new(), Vec::new(), Vec::new(), Vec::new()]; who.len()];
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..who.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for k in order {
            let plan = plan(who[k])?;
            let pool = PeakPool::new(usize::MAX);
            let context = peak_context(&pool)?;
            let (faults, cpu) = usage();
            let started = Instant::now();
            let out = drain(plan.clone(), context).await?;
            let seconds = started.elapsed().as_secs_f64();
            let (faults_after, cpu_after) = usage();
            assert_eq!(out, rows, "every row out");
            figures[k].pool = figures[k].pool.max(pool.peak());
            let [times, fault_counts, cpus, spilled] = &mut runs[k];
            times.push(seconds);
            fault_counts.push((faults_after - faults) as f64);
            cpus.push(cpu_after - cpu);
            spilled.push(metric(plan.as_ref(), "spilled_bytes") as f64);
        }
    }
    for (figures, [times, faults, cpus, spilled]) in figures.iter_mut().zip(runs) {
        figures.seconds = median(times);
        figures.faults = median(faults);
        figures.cpu = median(cpus);
        figures.spilled = median(spilled);
    }
    Ok(figures)
}

/// The columns of sections 1 and 1b.
fn print_header() {
    println!(
        "{:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "partitions",
        "DF Mrows/s",
        "po Mrows/s",
        "ratio",
        "DF faults",
        "po faults",
        "DF cpu s",
        "po cpu s",
        "DF heap",
        "po heap",
        "DF pool",
        "po pool",
        "spilled"
    );
}

/// A row of sections 1 and 1b: DataFusion's figures, then partout's (memory in MiB).
fn print_row(n: usize, rows: usize, theirs: &Figures, ours: &Figures) {
    let mib = |bytes: f64| bytes / (1 << 20) as f64;
    println!(
        "{n:>10} {:>10.1} {:>10.1} {:>6.2}x {:>10.0} {:>10.0} {:>8.2} {:>8.2} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8.1}",
        rows as f64 / theirs.seconds / 1e6,
        rows as f64 / ours.seconds / 1e6,
        theirs.seconds / ours.seconds,
        theirs.faults,
        ours.faults,
        theirs.cpu,
        ours.cpu,
        mib(theirs.heap as f64),
        mib(ours.heap as f64),
        mib(theirs.pool as f64),
        mib(ours.pool as f64),
        mib(ours.spilled),
    );
}

/// A line of a contender alone, for the parent: `label`, the partition count, its figures.
fn print_alone(label: &str, n: usize, f: &Figures) {
    println!(
        "{label} {n} {} {} {} {} {} {}",
        f.seconds, f.faults, f.cpu, f.heap, f.pool, f.spilled
    );
}

/// The arguments of section 1 as `args` has them, for a child process.
fn section_one(args: &Args) -> Vec<String> {
    let partitions: Vec<String> = args.partitions.iter().map(|n| n.to_string()).collect();
    vec![
        format!("--sf={}", args.sf),
        format!("--table={}", args.table),
        format!("--keys={}", args.keys.join(",")),
        format!("--inputs={}", args.inputs),
        format!("--rounds={}", args.rounds),
        format!("--partitions={}", partitions.join(",")),
        format!("--buffer-bytes={}", args.buffer_bytes),
    ]
}

/// This bench once more as a child process with `args` (and the allocator kept warm, when
/// `warm`): its standard output.
fn child(args: &[String], warm: bool) -> Result<String> {
    let exe = std::env::current_exe()?;
    let mut command = std::process::Command::new(exe);
    command.args(args);
    if warm {
        command.env("MIMALLOC_PURGE_DELAY", "-1");
    }
    let out = command.stderr(std::process::Stdio::inherit()).output()?;
    if !out.status.success() {
        return Err(DataFusionError::Execution(format!(
            "the bench's child {args:?} failed: {}",
            out.status
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let args = Args::parse();
    println!(
        "partout inside DataFusion: {}, TPC-H SF {}",
        partout_testkit::machine(),
        args.sf
    );
    let tables = tpch::tables(args.sf, 8192)?;
    let lineitem = tables
        .iter()
        .find(|t| t.name == args.table)
        .ok_or_else(|| DataFusionError::Configuration(format!("no TPC-H table {}", args.table)))?;
    let rows: usize = lineitem.batches.iter().map(|b| b.num_rows()).sum();
    let mut inputs = vec![Vec::new(); args.inputs.max(1)];
    for (i, batch) in lineitem.batches.iter().enumerate() {
        inputs[i % args.inputs.max(1)].push(batch.clone());
    }
    let input: Arc<dyn ExecutionPlan> =
        MemorySourceConfig::try_new_exec(&inputs, lineitem.schema.clone(), None)?;
    let key_columns = args
        .keys
        .iter()
        .map(|name| lineitem.schema.index_of(name))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let keys: Vec<Arc<dyn PhysicalExpr>> = args
        .keys
        .iter()
        .zip(&key_columns)
        .map(|(name, &i)| Arc::new(Column::new(name, i)) as _)
        .collect();
    let key = keys[0].clone();
    // The order-preserving section needs lineitem by l_orderkey (sorted as generated).
    let sorted_by_key = args.table == "lineitem" && args.keys == ["l_orderkey"];
    let context = Arc::new(
        TaskContext::default().with_session_config(SessionConfig::new().with_batch_size(8192)),
    );
    // The order-preserving repartition of `sorted` into `n` outputs, by DataFusion or partout.
    let ordered = |sorted: &Arc<dyn ExecutionPlan>, n: usize, ours: bool| {
        repartition(
            sorted,
            std::slice::from_ref(&key),
            n,
            ours.then_some(args.buffer_bytes),
        )
    };
    if let Some(only) = &args.only {
        // One contender alone in this process: a line a partition count, for the parent.
        let ours = match only.as_str() {
            "datafusion" => false,
            "partout" => true,
            other => {
                return Err(DataFusionError::Configuration(format!(
                    "--only takes datafusion or partout, not {other}"
                )));
            }
        };
        for &n in &args.partitions {
            let plan =
                |ours: bool| repartition(&input, &keys, n, ours.then_some(args.buffer_bytes));
            let figures = timed_rounds(plan, rows, args.rounds, &context, &[ours]).await?;
            print_alone("alone", n, &figures[0]);
        }
        if sorted_by_key {
            let sorted = sorted_input(&inputs, &lineitem.schema, &key)?;
            for &n in &args.ordered {
                let plan = |ours: bool| ordered(&sorted, n, ours);
                let figures = timed_rounds(plan, rows, args.rounds, &context, &[ours]).await?;
                print_alone("ordered", n, &figures[0]);
            }
        }
        return Ok(());
    }
    println!(
        "\n1. The operator alone: {rows} {} rows, {} input partitions, by {}; medians of {} alternating rounds; allocator {}; faults and CPU seconds per run, heap MiB above the input (counted), pool MiB (reserved)",
        args.table,
        inputs.len(),
        args.keys.join(", "),
        args.rounds,
        if allocator_warm() {
            "kept warm (MIMALLOC_PURGE_DELAY=-1)"
        } else {
            "as it comes"
        }
    );
    print_header();
    for &n in &args.partitions {
        // A fresh plan for every run: a RepartitionExec executes each partition once.
        let plan = |ours: bool| repartition(&input, &keys, n, ours.then_some(args.buffer_bytes));
        check_outputs(plan, &lineitem.batches, &key_columns, n, &context, false).await?;
        let figures = timed_rounds(plan, rows, args.rounds, &context, &[false, true]).await?;
        print_row(n, rows, &figures[0], &figures[1]);
    }
    if args.alone {
        println!(
            "\n1, each contender alone in a process of its own (allocator {}); medians of {} rounds",
            if allocator_warm() {
                "kept warm"
            } else {
                "as it comes"
            },
            args.rounds
        );
        print_header();
        let alone = |who: &str| -> Result<Vec<Figures>> {
            let mut section = section_one(&args);
            section.push(format!("--only={who}"));
            let out = child(&section, allocator_warm())?;
            out.lines()
                .filter_map(|l| l.strip_prefix("alone "))
                .map(|l| {
                    let v: Vec<f64> = l.split(' ').filter_map(|v| v.parse().ok()).collect();
                    match v[..] {
                        [_, seconds, faults, cpu, heap, pool, spilled] => Ok(Figures {
                            seconds,
                            faults,
                            cpu,
                            heap: heap as usize,
                            pool: pool as usize,
                            spilled,
                        }),
                        _ => Err(DataFusionError::Execution(format!(
                            "the {who} child printed {l:?}, not 7 figures"
                        ))),
                    }
                })
                .collect()
        };
        let (theirs, ours) = (alone("datafusion")?, alone("partout")?);
        assert_eq!(
            theirs.len(),
            args.partitions.len(),
            "a line per partition count"
        );
        assert_eq!(
            ours.len(),
            args.partitions.len(),
            "a line per partition count"
        );
        for (&n, (theirs, ours)) in args.partitions.iter().zip(theirs.iter().zip(&ours)) {
            print_row(n, rows, theirs, ours);
        }
    }
    if args.warm_rerun && !allocator_warm() {
        let mut section = section_one(&args);
        section.extend([
            format!("--alone={}", args.alone),
            "--ordered".into(),
            "--sequential".into(),
            "--query-rounds=0".into(),
            "--warm-rerun=false".into(),
        ]);
        let out = child(&section, true)?;
        // The child's section 1 (its banner line is this run's).
        for line in out.lines().skip(1) {
            println!("{line}");
        }
    }
    if !args.ordered.is_empty() && sorted_by_key {
        let sorted = sorted_input(&inputs, &lineitem.schema, &key)?;
        println!(
            "\n1b. Preserving order (inputs sorted by l_orderkey, outputs merged); medians of {} alternating rounds",
            args.rounds
        );
        print_header();
        for &n in &args.ordered {
            let plan = |ours: bool| ordered(&sorted, n, ours);
            check_outputs(plan, &lineitem.batches, &key_columns, n, &context, true).await?;
            let figures = timed_rounds(plan, rows, args.rounds, &context, &[false, true]).await?;
            print_row(n, rows, &figures[0], &figures[1]);
        }
    }
    if !args.sequential.is_empty() {
        println!(
            "\n2. Outputs read one after another to their ends; medians of {} alternating rounds; peak memory reserved from the pool",
            args.rounds
        );
        println!(
            "{:>10} {:>14} {:>14} {:>9} {:>16} {:>16} {:>14}",
            "partitions",
            "DataFusion s",
            "partout s",
            "ratio",
            "DataFusion MiB",
            "partout MiB",
            "spilled MiB"
        );
    }
    for &n in &args.sequential {
        let plan = |ours: bool| repartition(&input, &keys, n, ours.then_some(args.buffer_bytes));
        let (mut times, mut peaks) = ([Vec::new(), Vec::new()], [0usize; 2]);
        let mut spilled = Vec::new();
        let mut expected: Option<Vec<usize>> = None;
        for round in 0..args.rounds {
            for ours in [round % 2 == 0, round % 2 != 0] {
                let pool = PeakPool::new(usize::MAX);
                let plan = plan(ours)?;
                let started = Instant::now();
                let out = drain_in_order(plan.clone(), peak_context(&pool)?).await?;
                times[usize::from(ours)].push(started.elapsed().as_secs_f64());
                // Each output holds what DataFusion's holds.
                match &expected {
                    None => expected = Some(out),
                    Some(want) => assert_eq!(&out, want, "rows per output"),
                }
                peaks[usize::from(ours)] = peaks[usize::from(ours)].max(pool.peak());
                if ours {
                    spilled.push(metric(plan.as_ref(), "spilled_bytes") as f64);
                }
            }
        }
        assert_eq!(
            expected.iter().flatten().sum::<usize>(),
            rows,
            "every row out"
        );
        let [theirs, ours] = times.map(median);
        let mib = |bytes: f64| bytes / (1 << 20) as f64;
        println!(
            "{n:>10} {theirs:>14.3} {ours:>14.3} {:>8.2}x {:>16.1} {:>16.1} {:>14.1}",
            theirs / ours,
            mib(peaks[0] as f64),
            mib(peaks[1] as f64),
            mib(median(spilled)),
        );
    }
    if args.query_rounds == 0 {
        return Ok(());
    }
    let t = args.target_partitions;
    println!(
        "\n3. TPC-H, {t} target partitions, rule off / on; medians of {} alternating rounds (ms); \
         the repartition operators' time (ms): repartition_time (hashing, laying out) and \
         send_time (handing over, waiting for room included)",
        args.query_rounds
    );
    println!(
        "{:>5} {:>10} {:>10} {:>7} {:>11} {:>11} {:>11} {:>11}",
        "query", "off", "on", "ratio", "off: repart", "off: send", "on: repart", "on: send"
    );
    let sessions = [tpch::session(t, false), tpch::session(t, true)];
    for ctx in &sessions {
        tpch::register(ctx, &tables, t)?;
    }
    let metrics = ["repartition_time", "send_time"];
    let (mut total_off, mut total_on) = (0.0, 0.0);
    let mut totals = [[0.0; 2]; 2];
    for (k, sql) in tpch::QUERIES.iter().enumerate() {
        let mut times = [Vec::new(), Vec::new()];
        let mut operator = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
        for round in 0..args.query_rounds {
            let mut answers = [None, None];
            for which in [round % 2, 1 - round % 2] {
                let ctx = &sessions[which];
                let started = Instant::now();
                let plan = ctx.sql(sql).await?.create_physical_plan().await?;
                let batches = collect(plan.clone(), ctx.task_ctx()).await?;
                times[which].push(started.elapsed().as_secs_f64() * 1e3);
                for (m, name) in metrics.iter().enumerate() {
                    operator[which][m].push(repartition_seconds(&plan, name) * 1e3);
                }
                if round == 0 {
                    answers[which] = Some(tpch::Answer::new(&plan.schema(), &batches)?);
                }
            }
            // The first round's answers, with the rule on, checked against DataFusion's own.
            if let [Some(off), Some(on)] = &answers {
                tpch::compare_answers(k + 1, off, on).map_err(|problem| {
                    DataFusionError::Execution(format!("q{}: {problem}", k + 1))
                })?;
            }
        }
        let [off, on] = times.map(median);
        let operator = operator.map(|side| side.map(median));
        total_off += off;
        total_on += on;
        for (total, side) in totals.iter_mut().zip(&operator) {
            total[0] += side[0];
            total[1] += side[1];
        }
        println!(
            "{:>5} {off:>10.1} {on:>10.1} {:>6.2}x {:>11.1} {:>11.1} {:>11.1} {:>11.1}",
            format!("q{}", k + 1),
            off / on,
            operator[0][0],
            operator[0][1],
            operator[1][0],
            operator[1][1]
        );
    }
    println!(
        "{:>5} {total_off:>10.1} {total_on:>10.1} {:>6.2}x {:>11.1} {:>11.1} {:>11.1} {:>11.1}",
        "total",
        total_off / total_on,
        totals[0][0],
        totals[0][1],
        totals[1][0],
        totals[1][1]
    );
    Ok(())
}

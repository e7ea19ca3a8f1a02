//! `PartoutRepartitionExec` end to end: every row once, in the partition DataFusion's hash
//! gives it, in batches of the session's size (only the last smaller); one input's order
//! kept; dropping every output stops the producers; an input error reaches every output; a
//! memory pool too small gives DataFusion's resources-exhausted error. (Reading outputs in
//! any order within the budget: `consumption.rs`.)

#[path = "common/tpch.rs"]
mod tpch;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{
    ArrayRef, Decimal128Array, Int64Array, RecordBatch, StringArray, StringViewArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{GreedyMemoryPool, MemoryPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
    SendableRecordBatchStream, displayable,
};
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use partout_datafusion::{DataFusionIds, PartoutRepartitionExec};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("key", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("view", DataType::Utf8View, true),
        Field::new("price", DataType::Decimal128(15, 2), true),
    ]))
}

/// Rows `start..start + len`: a unique id, a key with repeats and nulls, a string, a view
/// (out of line, with nulls) and a decimal.
fn rows(start: i64, len: i64) -> RecordBatch {
    let ids = start..start + len;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(ids.clone())),
        Arc::new(Int64Array::from_iter(
            ids.clone()
                .map(|i| (i % 11 != 3).then_some((i * 7919) % 1013)),
        )),
        Arc::new(StringArray::from_iter_values(
            ids.clone().map(|i| format!("name-{i}")),
        )),
        Arc::new(StringViewArray::from_iter(ids.clone().map(|i| {
            (i % 5 != 2).then(|| format!("a view long enough to live out of line {i}"))
        }))),
        Arc::new(
            Decimal128Array::from_iter(ids.map(|i| (i % 9 != 4).then_some(i128::from(i) * 101)))
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

fn keys() -> Vec<Arc<dyn PhysicalExpr>> {
    vec![
        Arc::new(Column::new("key", 1)) as Arc<dyn PhysicalExpr>,
        Arc::new(Column::new("name", 2)),
    ]
}

fn context(batch_size: usize, pool: Arc<dyn MemoryPool>) -> Arc<TaskContext> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(pool)
        .build_arc()
        .unwrap();
    Arc::new(
        TaskContext::default()
            .with_session_config(SessionConfig::new().with_batch_size(batch_size))
            .with_runtime(runtime),
    )
}

fn big_pool() -> Arc<dyn MemoryPool> {
    Arc::new(GreedyMemoryPool::new(1 << 30))
}

/// Every output partition of `plan`, drained concurrently.
async fn drain(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
) -> Vec<Result<Vec<RecordBatch>>> {
    let n = plan.properties().output_partitioning().partition_count();
    let tasks: Vec<_> = (0..n)
        .map(|p| {
            let stream = plan.execute(p, context.clone()).unwrap();
            tokio::spawn(async move {
                stream
                    .collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .collect::<Result<Vec<_>>>()
            })
        })
        .collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}

/// Every row of `batches`, every column, in id order (one batch).
fn rows_by_id(batches: &[RecordBatch]) -> RecordBatch {
    let all = datafusion::arrow::compute::concat_batches(&schema(), batches).unwrap();
    let order = datafusion::arrow::compute::sort_to_indices(all.column(0), None, None).unwrap();
    datafusion::arrow::compute::take_record_batch(&all, &order).unwrap()
}

fn ids_of(batches: &[RecordBatch]) -> Vec<i64> {
    let mut ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_reaches_datafusions_partition_once_in_full_batches() {
    // Three input partitions of batches of uneven sizes.
    let mut inputs = vec![Vec::new(); 3];
    let mut start = 0;
    for (k, len) in [500, 1, 3000, 0, 777, 2048, 10, 4096]
        .into_iter()
        .enumerate()
    {
        inputs[k % 3].push(rows(start, len));
        start += len;
    }
    let input = MemorySourceConfig::try_new_exec(&inputs, schema(), None).unwrap();
    for n in [1usize, 7, 64] {
        let partout: Arc<dyn ExecutionPlan> =
            Arc::new(PartoutRepartitionExec::try_new(input.clone(), keys(), n, 16 << 20).unwrap());
        let theirs: Arc<dyn ExecutionPlan> = Arc::new(
            RepartitionExec::try_new(input.clone(), Partitioning::Hash(keys(), n)).unwrap(),
        );
        assert_eq!(
            format!("{:?}", partout.properties()),
            format!("{:?}", theirs.properties())
        );
        let ours = drain(partout.clone(), context(100, big_pool())).await;
        let expected = drain(theirs, context(100, big_pool())).await;
        let mut all = Vec::new();
        let mut ids = DataFusionIds::new(keys(), n);
        let mut buffer = Vec::new();
        for (p, (got, want)) in ours.into_iter().zip(expected).enumerate() {
            let got = got.unwrap();
            // Every column of every row, as DataFusion's RepartitionExec gives them.
            assert_eq!(
                rows_by_id(&got),
                rows_by_id(&want.unwrap()),
                "partition {p} of {n}"
            );
            for batch in &got {
                ids.compute(batch, &mut buffer).unwrap();
                assert!(buffer.iter().all(|&id| id as usize == p), "partition {p}");
            }
            // Coalesced: every batch but the last holds the session's batch size (the budget's
            // share of a destination is larger here), and none more.
            if let Some((_, full)) = got.split_last() {
                assert!(
                    full.iter().all(|b| b.num_rows() == 100),
                    "partition {p} of {n}: {:?}",
                    got.iter().map(|b| b.num_rows()).collect::<Vec<_>>()
                );
            }
            assert!(
                got.iter().all(|b| b.num_rows() <= 100),
                "partition {p} of {n}"
            );
            all.extend(ids_of(&got));
        }
        all.sort_unstable();
        assert_eq!(
            all,
            (0..start).collect::<Vec<_>>(),
            "every row once into {n}"
        );
        // Metrics as RepartitionExec's: rows out, time repartitioning.
        let metrics = partout.metrics().unwrap();
        assert_eq!(metrics.output_rows(), Some(start as usize));
        let repartition = metrics
            .sum_by_name("repartition_time")
            .map(|t| t.as_usize());
        assert!(
            // DataFusion's timers read 1 ns when never started; hashing is far above 10 µs.
            repartition.is_some_and(|ns| ns > 10_000),
            "repartition_time {repartition:?} after {start} rows"
        );
        let text = displayable(partout.as_ref()).indent(true).to_string();
        assert!(
            text.starts_with("PartoutRepartitionExec: partitioning=Hash("),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_inputs_order_is_kept_in_every_output() {
    // One input partition: DataFusion's plan properties promise its order in every output.
    // Uneven batches make destinations pass the batch size mid-batch, leaving split tails.
    let mut batches = Vec::new();
    let mut start = 0;
    for len in [500, 1, 3000, 0, 777, 2048, 10, 4096, 333] {
        batches.push(rows(start, len));
        start += len;
    }
    let input = MemorySourceConfig::try_new_exec(&[batches], schema(), None).unwrap();
    for n in [1usize, 3, 7] {
        let plan: Arc<dyn ExecutionPlan> =
            Arc::new(PartoutRepartitionExec::try_new(input.clone(), keys(), n, 64 << 10).unwrap());
        assert_eq!(plan.maintains_input_order(), vec![true]);
        let mut count = 0;
        for (p, out) in drain(plan, context(100, big_pool()))
            .await
            .into_iter()
            .enumerate()
        {
            let got: Vec<i64> = out
                .unwrap()
                .iter()
                .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
                .collect();
            assert!(
                got.windows(2).all(|w| w[0] < w[1]),
                "partition {p} of {n} out of input order"
            );
            count += got.len();
        }
        assert_eq!(count, start as usize, "every row once into {n}");
    }
}

/// An input of `partitions` partitions producing batches of 1,000 rows without end (or an
/// error after `fail_after` batches of partition 0), counting the batches made and the
/// streams dropped.
#[derive(Debug)]
struct Endless {
    properties: Arc<PlanProperties>,
    made: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    fail_after: Option<usize>,
}

impl Endless {
    fn new(partitions: usize, fail_after: Option<usize>) -> Self {
        Self {
            properties: Arc::new(PlanProperties::new(
                EquivalenceProperties::new(schema()),
                Partitioning::UnknownPartitioning(partitions),
                EmissionType::Incremental,
                Boundedness::Bounded,
            )),
            made: Arc::new(AtomicUsize::new(0)),
            dropped: Arc::new(AtomicUsize::new(0)),
            fail_after,
        }
    }
}

impl DisplayAs for Endless {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "Endless")
    }
}

/// Counts a dropped stream.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl ExecutionPlan for Endless {
    fn name(&self) -> &str {
        "Endless"
    }
    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }
    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }
    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }
    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }
    fn execute(&self, partition: usize, _: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let made = self.made.clone();
        let fail_after = self.fail_after.filter(|_| partition == 0);
        let guard = Dropped(self.dropped.clone());
        let stream = futures::stream::unfold((0i64, guard), move |(k, guard)| {
            let made = made.clone();
            async move {
                if fail_after == Some(k as usize) {
                    return Some((
                        Err(DataFusionError::Execution("the input broke".into())),
                        (k + 1, guard),
                    ));
                }
                if fail_after.is_some_and(|f| k as usize > f) {
                    return None;
                }
                made.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                Some((
                    Ok(rows(k * 1000 + partition as i64 * 1_000_000_000, 1000)),
                    (k + 1, guard),
                ))
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema(), stream)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_every_output_stops_the_producers() {
    let input = Arc::new(Endless::new(2, None));
    let exec: Arc<dyn ExecutionPlan> =
        Arc::new(PartoutRepartitionExec::try_new(input.clone(), keys(), 3, 64 << 10).unwrap());
    let context = context(1000, big_pool());
    let mut streams: Vec<_> = (0..3)
        .map(|p| exec.execute(p, context.clone()).unwrap())
        .collect();
    for stream in &mut streams {
        stream.next().await.unwrap().unwrap();
    }
    drop(streams);
    let stopped = tokio::time::timeout(Duration::from_secs(10), async {
        while input.dropped.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(stopped.is_ok(), "the input streams are still running");
    let made = input.made.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        input.made.load(Ordering::SeqCst),
        made,
        "batches made after the drop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_error_reaches_every_output() {
    let input = Arc::new(Endless::new(2, Some(3)));
    // Partition 1 never ends: the error must end every output anyway.
    let exec: Arc<dyn ExecutionPlan> =
        Arc::new(PartoutRepartitionExec::try_new(input.clone(), keys(), 5, 64 << 10).unwrap());
    let results = tokio::time::timeout(
        Duration::from_secs(30),
        drain(exec, context(1000, big_pool())),
    )
    .await
    .expect("every output ended");
    for (p, result) in results.into_iter().enumerate() {
        let err = result.expect_err("an output ended without the error");
        assert!(
            err.to_string().contains("the input broke"),
            "partition {p}: {err}"
        );
    }
    tokio::time::timeout(Duration::from_secs(10), async {
        while input.dropped.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the other input stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_of_no_partitions_gives_empty_outputs() {
    let input = MemorySourceConfig::try_new_exec(&[], schema(), None).unwrap();
    assert_eq!(
        input.properties().output_partitioning().partition_count(),
        0
    );
    let exec: Arc<dyn ExecutionPlan> =
        Arc::new(PartoutRepartitionExec::try_new(input, keys(), 3, 1 << 20).unwrap());
    let outputs = tokio::time::timeout(
        Duration::from_secs(30),
        drain(exec, context(8192, big_pool())),
    )
    .await
    .expect("outputs end");
    for output in outputs {
        assert!(output.unwrap().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_too_small_is_resources_exhausted() {
    let input = MemorySourceConfig::try_new_exec(&[vec![rows(0, 5000)]], schema(), None).unwrap();
    let exec: Arc<dyn ExecutionPlan> =
        Arc::new(PartoutRepartitionExec::try_new(input, keys(), 4, 64 << 10).unwrap());
    let results = tokio::time::timeout(
        Duration::from_secs(30),
        drain(exec, context(1000, Arc::new(GreedyMemoryPool::new(1024)))),
    )
    .await
    .expect("every output ended");
    let mut kinds = BTreeMap::new();
    for result in results {
        let err = result.expect_err("a pool of 1 KiB held 5,000 rows");
        let root = err.find_root();
        *kinds
            .entry(matches!(root, DataFusionError::ResourcesExhausted(_)))
            .or_insert(0) += 1;
        assert!(err.to_string().contains("PartoutRepartitionExec"), "{err}");
    }
    assert_eq!(kinds.get(&true), Some(&4), "{kinds:?}");
}

/// The physical plan of `sql` in `ctx`.
async fn plan_of(ctx: &datafusion::prelude::SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    ctx.sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap()
}

/// The plan of `sql` in `ctx`, as text.
async fn plan_text(ctx: &datafusion::prelude::SessionContext, sql: &str) -> String {
    let plan = plan_of(ctx, sql).await;
    displayable(plan.as_ref()).indent(true).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_is_on_with_partout_and_off_by_a_session_option() {
    let ctx = tpch::session(2, true);
    let table = datafusion::datasource::MemTable::try_new(
        schema(),
        vec![vec![rows(0, 5000)], vec![rows(5000, 5000)]],
    )
    .unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let sql = "select key, count(*) from t group by key";
    let on = plan_text(&ctx, sql).await;
    assert!(
        on.contains("PartoutRepartitionExec: partitioning=Hash"),
        "{on}"
    );
    let hash_repartition = |plan: &str| {
        plan.lines().any(|l| {
            l.trim_start()
                .starts_with("RepartitionExec: partitioning=Hash")
        })
    };
    assert!(!hash_repartition(&on), "{on}");
    let answer_on = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    ctx.sql("SET partout.enabled = false")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let off = plan_text(&ctx, sql).await;
    assert!(!off.contains("PartoutRepartitionExec"), "{off}");
    assert!(hash_repartition(&off), "{off}");
    let answer_off = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let rows = |batches: &[RecordBatch]| -> Vec<String> {
        let mut lines: Vec<String> =
            datafusion::arrow::util::pretty::pretty_format_batches(batches)
                .unwrap()
                .to_string()
                .lines()
                .map(str::to_string)
                .collect();
        lines.sort();
        lines
    };
    assert_eq!(rows(&answer_on), rows(&answer_off));
    // A budget set for the session reaches the operator.
    ctx.sql("SET partout.enabled = true")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    ctx.sql("SET partout.buffer_bytes = 12345")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let plan = plan_of(&ctx, sql).await;
    let mut budgets = Vec::new();
    datafusion::common::tree_node::TreeNode::apply(&plan, |node| {
        if let Some(exec) = node.downcast_ref::<PartoutRepartitionExec>() {
            budgets.push(exec.buffer_bytes());
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    assert!(
        !budgets.is_empty() && budgets.iter().all(|&b| b == 12345),
        "{budgets:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_analyze_shows_the_operators_metrics() {
    let ctx = tpch::session(2, true);
    let table = datafusion::datasource::MemTable::try_new(
        schema(),
        vec![vec![rows(0, 3000)], vec![rows(3000, 4000)]],
    )
    .unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let batches = ctx
        .sql("EXPLAIN ANALYZE select key, count(*) from t group by key")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    let line = text
        .lines()
        .find(|l| l.contains("PartoutRepartitionExec: partitioning=Hash"))
        .unwrap_or_else(|| panic!("no PartoutRepartitionExec in {text}"));
    // Below the operator, a partial aggregate per input partition passes on one row per key
    // it saw (a null key is one key too): the operator's rows out.
    // A count as EXPLAIN ANALYZE prints it: `2028`, or rounded, `2.03 K`.
    let metric = |name: &str| -> f64 {
        let at = line
            .find(&format!("{name}="))
            .unwrap_or_else(|| panic!("no {name} in {line}"));
        let text: String = line[at + name.len() + 1..]
            .chars()
            .take_while(|c| *c != ',' && *c != ']')
            .collect();
        let (number, scale) = match text.split_once(' ') {
            Some((number, "K")) => (number, 1e3),
            Some((number, "M")) => (number, 1e6),
            _ => (text.as_str(), 1.0),
        };
        number
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{name} in {line}"))
            * scale
    };
    let keys = |range: std::ops::Range<i64>| {
        range
            .map(|i| (i % 11 != 3).then_some((i * 7919) % 1013))
            .collect::<std::collections::HashSet<_>>()
            .len() as f64
    };
    let expected = keys(0..3000) + keys(3000..7000);
    let out = metric("output_rows");
    assert!(
        (out - expected).abs() <= expected * 0.005,
        "{out} of {expected}: {line}"
    );
    assert!(metric("output_batches") >= 1.0, "{line}");
    for name in ["fetch_time", "repartition_time", "send_time"] {
        assert!(line.contains(&format!("{name}=")), "no {name} in {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_sending_is_counted_once_and_apart_from_repartitioning() {
    // One producer (one input partition) whose outputs are read slowly, within a budget
    // that makes it wait for room: most of its life is spent handing batches over. Its
    // fetch, repartition and send times are spans of that life that must not overlap, so
    // together they fit in the time the whole run took, however loaded the machine; a send
    // timed inside the repartition timer counts the waiting twice and overshoots it (by 71%,
    // tried).
    let inputs = vec![(0..40).map(|k| rows(k * 2000, 2000)).collect::<Vec<_>>()];
    let input = MemorySourceConfig::try_new_exec(&inputs, schema(), None).unwrap();
    let plan: Arc<dyn ExecutionPlan> =
        Arc::new(PartoutRepartitionExec::try_new(input, keys(), 2, 256 << 10).unwrap());
    let context = context(1000, big_pool());
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..2)
        .map(|p| {
            let mut stream = plan.execute(p, context.clone()).unwrap();
            tokio::spawn(async move {
                let mut rows = 0;
                while let Some(batch) = stream.next().await {
                    rows += batch.unwrap().num_rows();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                rows
            })
        })
        .collect();
    let mut rows = 0;
    for task in tasks {
        rows += task.await.unwrap();
    }
    let wall = started.elapsed().as_nanos() as usize;
    assert_eq!(rows, 80_000);
    let metrics = plan.metrics().unwrap();
    let time = |name: &str| metrics.sum_by_name(name).unwrap().as_usize();
    let (fetch, repartition, send) = (
        time("fetch_time"),
        time("repartition_time"),
        time("send_time"),
    );
    assert!(
        fetch + repartition + send <= wall,
        "fetch {fetch} + repartition {repartition} + send {send} ns > the run's {wall} ns"
    );
    // And each is timed at all: the producer hashed and laid out 40 batches, and spent most
    // of the run waiting for room while the outputs slept 20 ms a batch (at least 0.8 s).
    // DataFusion's timers read 1 ns when never started: a real one is far above 100 µs.
    assert!(
        repartition > 100_000,
        "repartition_time {repartition} ns after 40 batches"
    );
    assert!(
        send >= wall / 4,
        "send {send} ns of a {wall} ns run spent mostly waiting for room"
    );
}

//! Order and latency, held to DataFusion's own `RepartitionExec`: a repartition that preserves
//! order gives every output the very rows, in the very order, DataFusion's gives (merged from
//! each input by the input's ordering), read at once or one after another within a budget
//! that makes it spill; the rule takes such repartitions too; and rows of an unbounded input
//! reach their outputs without waiting for a full batch.

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, SortOptions};
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::memory::{DataSourceExec, MemorySourceConfig};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::GreedyMemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::expressions::Column;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{
    ExecutionPlan, Partitioning, PhysicalExpr, SendableRecordBatchStream, collect, displayable,
};
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use partout_datafusion::{PartoutRepartitionExec, PartoutRepartitionRule};
use std::sync::Arc;
use std::time::Duration;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("grp", DataType::Int64, true),
        Field::new("key", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]))
}

/// Rows with the given ids: a group with repeats and nulls, a hash key, a string.
fn rows(ids: &[i64]) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.to_vec())),
        Arc::new(Int64Array::from_iter(
            ids.iter().map(|i| (i % 13 != 5).then_some(i / 97)),
        )),
        Arc::new(Int64Array::from_iter(
            ids.iter().map(|i| (i % 17 != 2).then_some(i * 7919 % 101)),
        )),
        Arc::new(StringArray::from_iter(
            ids.iter().map(|i| (i % 5 != 1).then(|| format!("n{i}"))),
        )),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

fn column(name: &str) -> Arc<dyn PhysicalExpr> {
    Arc::new(Column::new_with_schema(name, &schema()).unwrap())
}

/// By id ascending, or by group (nulls first) then id descending.
fn orderings() -> [LexOrdering; 2] {
    let asc = SortOptions::default();
    let desc = SortOptions::new(true, false);
    [
        [PhysicalSortExpr::new(column("id"), asc)].into(),
        [
            PhysicalSortExpr::new(column("grp"), asc),
            PhysicalSortExpr::new(column("id"), desc),
        ]
        .into(),
    ]
}

/// `inputs` partitions of 9,000 rows in all, each sorted by `ordering`, in batches of uneven
/// sizes, declared sorted.
fn sorted_input(inputs: usize, ordering: &LexOrdering) -> Arc<dyn ExecutionPlan> {
    let partitions: Vec<Vec<RecordBatch>> = (0..inputs)
        .map(|i| {
            let ids: Vec<i64> = (0..9000i64)
                .filter(|id| id % inputs as i64 == i as i64)
                .collect();
            let all = rows(&ids);
            let sort =
                datafusion::physical_plan::sorts::sort::sort_batch(&all, ordering, None).unwrap();
            let mut batches = Vec::new();
            let mut at = 0;
            for len in [1, 700, 33, 1500].into_iter().cycle() {
                if at >= sort.num_rows() {
                    break;
                }
                let len = len.min(sort.num_rows() - at);
                batches.push(sort.slice(at, len));
                at += len;
            }
            batches
        })
        .collect();
    let source = MemorySourceConfig::try_new(&partitions, schema(), None)
        .unwrap()
        .try_with_sort_information(vec![ordering.clone()])
        .unwrap();
    DataSourceExec::from_data_source(source)
}

fn context(batch_size: usize) -> Arc<TaskContext> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(GreedyMemoryPool::new(1 << 30)))
        .build_arc()
        .unwrap();
    Arc::new(
        TaskContext::default()
            .with_session_config(SessionConfig::new().with_batch_size(batch_size))
            .with_runtime(runtime),
    )
}

/// DataFusion's repartition of `input` by `key` into `n`, preserving order.
fn datafusions(input: Arc<dyn ExecutionPlan>, n: usize) -> RepartitionExec {
    let repartition =
        RepartitionExec::try_new(input, Partitioning::Hash(vec![column("key")], n)).unwrap();
    let repartition = repartition.with_preserve_order();
    assert!(
        repartition.preserve_order(),
        "an ordered input of several partitions"
    );
    repartition
}

/// Each output of `plan`, read at once (`together`) or one after another.
async fn outputs(
    plan: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
    together: bool,
) -> Vec<Vec<RecordBatch>> {
    let n = plan.properties().output_partitioning().partition_count();
    let read = |p: usize| {
        let stream = plan.execute(p, context.clone()).unwrap();
        async move {
            stream
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<Vec<_>>>()
                .unwrap()
        }
    };
    if together {
        let tasks: Vec<_> = (0..n).map(|p| tokio::spawn(read(p))).collect();
        let mut out = Vec::new();
        for task in tasks {
            out.push(task.await.unwrap());
        }
        out
    } else {
        let mut out = Vec::new();
        for p in 0..n {
            out.push(read(p).await);
        }
        out
    }
}

fn concat(batches: &[RecordBatch]) -> RecordBatch {
    datafusion::arrow::compute::concat_batches(&schema(), batches).unwrap()
}

/// Every output holds DataFusion's rows for it, in DataFusion's order (each ordering makes
/// the order of the rows one), in batches of at most the session's size: read at once with
/// room to spare, and one after another within a budget that makes the inputs' queues spill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_outputs_match_datafusions_row_for_row() {
    for ordering in orderings() {
        for (inputs, n, budget, together) in [
            (3, 4, 64 << 20, true),
            (2, 7, 64 << 20, true),
            (3, 4, 96 << 10, false),
        ] {
            let input = sorted_input(inputs, &ordering);
            let theirs = datafusions(input, n);
            let ours = PartoutRepartitionExec::from_repartition(&theirs, budget).unwrap();
            assert!(ours.preserve_order());
            assert!(ours.maintains_input_order()[0]);
            assert_eq!(ours.properties().output_ordering(), Some(&ordering));
            let ours = Arc::new(ours);
            let expected = outputs(Arc::new(theirs), context(64), true).await;
            let got = outputs(ours.clone(), context(64), together).await;
            let case = format!("{ordering} from {inputs} into {n}, budget {budget}");
            for (p, (got, expected)) in got.iter().zip(&expected).enumerate() {
                assert!(got.iter().all(|b| b.num_rows() <= 64), "{case}");
                assert_eq!(concat(got), concat(expected), "{case}: output {p}");
            }
            let rows: usize = got.iter().flatten().map(RecordBatch::num_rows).sum();
            assert_eq!(rows, 9000, "{case}");
            if !together {
                let spilled = ours.metrics().unwrap().spill_count().unwrap_or(0);
                assert!(
                    spilled > 0,
                    "{case}: read one after another, nothing spilled"
                );
            }
        }
    }
}

/// The rule replaces an order-preserving repartition too, keeping its order through a new
/// child; a sort-preserving merge over it gives every row in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_takes_order_preserving_repartitions() {
    let [ordering, _] = orderings();
    let input = sorted_input(3, &ordering);
    let repartition = Arc::new(datafusions(input.clone(), 5));
    let plan: Arc<dyn ExecutionPlan> =
        Arc::new(SortPreservingMergeExec::new(ordering.clone(), repartition));
    let plan = PartoutRepartitionRule
        .optimize(plan, &ConfigOptions::default())
        .unwrap();
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(text.contains("PartoutRepartitionExec"), "{text}");
    assert!(text.contains("preserve_order=true"), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("RepartitionExec")),
        "{text}"
    );
    let mut found = Vec::new();
    plan.apply(|node| {
        if let Some(exec) = node.downcast_ref::<PartoutRepartitionExec>() {
            let recompute = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
            let renewed = node
                .clone()
                .replace_children(vec![input.clone()], recompute)
                .unwrap();
            let renewed = renewed.downcast_ref::<PartoutRepartitionExec>().unwrap();
            found.push((exec.preserve_order(), renewed.preserve_order()));
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    assert_eq!(found, [(true, true)]);
    let all = concat(&collect(plan, context(100)).await.unwrap());
    let ids = all.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(ids.values().to_vec(), (0..9000).collect::<Vec<i64>>());
}

/// An input that yields one batch and then nothing, never ending.
#[derive(Debug)]
struct OneThenNothing(RecordBatch);

impl PartitionStream for OneThenNothing {
    fn schema(&self) -> &SchemaRef {
        self.0.schema_ref()
    }

    fn execute(&self, _: Arc<TaskContext>) -> SendableRecordBatchStream {
        let stream = futures::stream::iter([Ok(self.0.clone())]).chain(futures::stream::pending());
        Box::pin(RecordBatchStreamAdapter::new(self.0.schema(), stream))
    }
}

/// The first batch of each output of `plan`, waiting at most 5 s for each; `None` for an
/// output with nothing within that time.
async fn first_batches(plan: Arc<dyn ExecutionPlan>, n: usize) -> Vec<Option<RecordBatch>> {
    let tasks: Vec<_> = (0..n)
        .map(|p| {
            let mut stream = plan.execute(p, context(8192)).unwrap();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(5), stream.next())
                    .await
                    .ok()
                    .flatten()
                    .map(Result::unwrap)
            })
        })
        .collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}

/// From an input that gives 500 rows and then waits forever, each output gets its rows
/// without waiting for a full batch of 8,192: the batch DataFusion's operator gives it,
/// within 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_an_unbounded_input_are_not_held_for_a_full_batch() {
    let batch = rows(&(0..500).collect::<Vec<i64>>());
    let source = || -> Arc<dyn ExecutionPlan> {
        let partition = Arc::new(OneThenNothing(batch.clone())) as Arc<dyn PartitionStream>;
        Arc::new(
            StreamingTableExec::try_new(schema(), vec![partition], None, vec![], true, None)
                .unwrap(),
        )
    };
    for n in [1, 3] {
        let keys = vec![column("key")];
        let theirs =
            RepartitionExec::try_new(source(), Partitioning::Hash(keys.clone(), n)).unwrap();
        let ours = PartoutRepartitionExec::try_new(source(), keys, n, 64 << 20).unwrap();
        assert!(ours.properties().boundedness.is_unbounded());
        let expected = first_batches(Arc::new(theirs), n).await;
        let rows: usize = expected.iter().flatten().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 500, "DataFusion's operator holds rows back");
        let got = first_batches(Arc::new(ours), n).await;
        for (p, (got, expected)) in got.iter().zip(&expected).enumerate() {
            if let Some(expected) = expected {
                assert_eq!(got.as_ref(), Some(expected), "output {p} of {n}");
            }
        }
    }
}

// The scenario of `tests/rollback.rs`, included into a module that names the scheduler crate
// under test `scheduler` (the patched one, or stock `ballista-scheduler` 55.0.0).
//
// Planner off (`StaticExecutionGraph`). A plan of two aggregations makes three stages joined
// by hash shuffles: a leaf stage, the map stage (it reads the leaf stage) and its consumer
// (the final stage). Three fake executors, "executor-0/1/2", run the leaf stage, so
// executor-0 holds some of its output. The map stage then starts: a task on executor-1 and
// one on executor-2 succeed (their outputs go to the consumer at once) and one stays running
// on executor-0. Executor-0 is lost: the map stage reads output that was on it, so Ballista
// rolls the map stage back to UnResolved (its next attempt runs every partition again) and
// runs the leaf stage's lost tasks again. Everything then runs to the end on executors 1 and
// 2 until the consumer is resolved, and the test reads the consumer's resolved plan.
//
// Task ids restart at 0 with each attempt of a stage, so each successful task is given its
// own shuffle file id (a serial number), which tells the consumer's locations apart by
// attempt.

use std::collections::BTreeMap;
use std::sync::Arc;

use ballista_core::execution_plans::{ShuffleReaderExec, SortShuffleWriterExec};
use ballista_core::extension::SessionConfigExt;
use ballista_core::serde::protobuf::{
    ShuffleWritePartition, SuccessfulTask, TaskStatus, task_status,
};
use ballista_core::serde::scheduler::{
    ExecutorMetadata, ExecutorOperatingSystemSpecification, ExecutorSpecification,
    PartitionLocation,
};
use datafusion::arrow::array::{StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use scheduler::planner::DefaultDistributedPlanner;
use scheduler::state::execution_graph::{ExecutionGraph, StaticExecutionGraph, create_task_info};
use scheduler::state::execution_stage::ExecutionStage;

use super::{Outcome, Report};

/// Partitions of the table and of each shuffle.
const PARTITIONS: usize = 4;

/// Runs the scenario described at the top of this file.
async fn rolled_back_map_stage() -> Outcome {
    let mut graph = two_aggregations_graph().await;
    let (map_stage, consumer_stage) = map_stage_and_consumer(&graph);
    let executors: Vec<ExecutorMetadata> = (0..3).map(executor).collect();
    let mut ledger = Ledger::default();

    assert!(graph.revive(), "the leaf stage does not start");
    // The stages below the map stage, round robin over all three executors, until the map
    // stage can run.
    let mut turn = 0;
    while matches!(graph.stages()[&map_stage], ExecutionStage::UnResolved(_)) {
        let executor = &executors[turn % 3];
        turn += 1;
        let task = pop_task(&mut graph, &executor.id)
            .unwrap_or_else(|| panic!("no task before map stage {map_stage} runs:\n{graph:?}"));
        assert_ne!(
            task.stage_id, map_stage,
            "a task of the unresolved map stage"
        );
        ledger.succeed(&mut graph, executor, &task);
    }

    // The map stage's first attempt: two tasks succeed on executors 1 and 2, one runs on
    // executor-0, and one partition waits for an executor.
    for executor in [&executors[1], &executors[2], &executors[0]] {
        let task = pop_task(&mut graph, &executor.id).expect("a task of the map stage");
        assert_eq!(
            (task.stage_id, task.stage_attempt),
            (map_stage, 0),
            "not a task of the map stage's first attempt"
        );
        if executor.id != "executor-0" {
            ledger.succeed(&mut graph, executor, &task);
        }
    }
    let handed = match &graph.stages()[&consumer_stage] {
        ExecutionStage::UnResolved(stage) => stage.inputs.get(&map_stage).map_or(0, |input| {
            input.partition_locations.values().map(Vec::len).sum()
        }),
        other => panic!(
            "consumer stage {consumer_stage} is {}",
            other.variant_name()
        ),
    };
    assert!(
        handed > 0,
        "the map stage's first attempt handed its consumer nothing before the loss"
    );

    graph
        .reset_stages_on_lost_executor("executor-0")
        .expect("reset the stages on executor-0");
    let last_attempt = match &graph.stages()[&map_stage] {
        ExecutionStage::UnResolved(stage) => stage.stage_attempt_num,
        other => panic!(
            "map stage {map_stage} was not rolled back to UnResolved when executor-0 was lost: it is {}",
            other.variant_name()
        ),
    };

    // The next attempts, on executors 1 and 2, until the consumer can run.
    let survivors = [&executors[1], &executors[2]];
    let mut turn = 0;
    while matches!(
        graph.stages()[&consumer_stage],
        ExecutionStage::UnResolved(_)
    ) {
        let executor = survivors[turn % 2];
        turn += 1;
        let task = pop_task(&mut graph, &executor.id).unwrap_or_else(|| {
            panic!(
                "no task to run, and consumer stage {consumer_stage} is not resolved:\n{graph:?}"
            )
        });
        assert!(
            task.stage_id != map_stage || task.stage_attempt == last_attempt,
            "map stage {map_stage} ran attempt {} after its rollback to attempt {last_attempt}",
            task.stage_attempt
        );
        ledger.succeed(&mut graph, executor, &task);
    }

    Outcome {
        map_stage,
        consumer_stage,
        last_attempt,
        reports: ledger.reports,
        consumer_reads: reads_of(graph.stages()[&consumer_stage].plan(), map_stage),
    }
}

/// `SELECT id, count(*) FROM (SELECT id, name, sum(gmv) FROM sales GROUP BY id, name) GROUP BY
/// id` over a table of `PARTITIONS` partitions, as a graph of stages.
async fn two_aggregations_graph() -> StaticExecutionGraph {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("gmv", DataType::UInt64, false),
    ]));
    let partitions = (0..PARTITIONS as u64)
        .map(|p| {
            let ids: Vec<String> = (0..8).map(|i| format!("id-{}", (i + p) % 5)).collect();
            let names: Vec<String> = (0..8).map(|i| format!("name-{}", i % 3)).collect();
            let gmv: Vec<u64> = (0..8).map(|i| i * 10 + p).collect();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from(ids)),
                    Arc::new(StringArray::from(names)),
                    Arc::new(UInt64Array::from(gmv)),
                ],
            )
            .expect("a batch");
            vec![batch]
        })
        .collect();
    let ctx =
        SessionContext::new_with_config(SessionConfig::new().with_target_partitions(PARTITIONS));
    let table = MemTable::try_new(schema, partitions).expect("a table");
    ctx.register_table("sales", Arc::new(table))
        .expect("register the table");
    let plan = ctx
        .sql(
            "SELECT id, count(*) AS names FROM \
             (SELECT id, name, sum(gmv) AS gmv FROM sales GROUP BY id, name) GROUP BY id",
        )
        .await
        .expect("plan the query")
        .create_physical_plan()
        .await
        .expect("a physical plan");
    StaticExecutionGraph::new(
        "scheduler",
        &"job".into(),
        "rollback",
        "session",
        plan,
        0,
        Arc::new(SessionConfig::new_with_ballista()),
        &mut DefaultDistributedPlanner::new(),
        None,
    )
    .expect("a graph of stages")
}

/// The final stage (the consumer) and the stage it reads (the map stage), which must itself
/// read another stage.
fn map_stage_and_consumer(graph: &StaticExecutionGraph) -> (usize, usize) {
    let stages = graph.stages();
    let shape = || format!("{graph:?}");
    let consumer = stages
        .iter()
        .find(|(_, stage)| stage.output_links().is_empty())
        .map(|(id, _)| *id)
        .unwrap_or_else(|| panic!("no final stage:\n{}", shape()));
    let inputs_of = |id: usize| -> Vec<usize> {
        stages
            .iter()
            .filter(|(_, stage)| stage.output_links().contains(&id))
            .map(|(input, _)| *input)
            .collect()
    };
    let [map] = inputs_of(consumer)[..] else {
        panic!(
            "the final stage does not read exactly one stage:\n{}",
            shape()
        )
    };
    assert!(
        !inputs_of(map).is_empty(),
        "map stage {map} reads no stage (an executor's loss would not roll it back):\n{}",
        shape()
    );
    (map, consumer)
}

fn executor(n: usize) -> ExecutorMetadata {
    ExecutorMetadata {
        id: format!("executor-{n}"),
        host: format!("executor-{n}.invalid"),
        port: 50051,
        grpc_port: 50052,
        specification: ExecutorSpecification::default().with_vcores(1),
        os_info: ExecutorOperatingSystemSpecification::default(),
    }
}

/// A task handed to a fake executor.
struct Task {
    stage_id: usize,
    stage_attempt: usize,
    task_id: usize,
    output_partitions: usize,
}

/// Hands the next partition of a running stage to `executor_id`, as the scheduler's binding
/// does (one partition a task).
fn pop_task(graph: &mut StaticExecutionGraph, executor_id: &str) -> Option<Task> {
    let stage = graph.fetch_running_stage(&[])?;
    let partitions = stage.pending.next_slice(1);
    assert!(
        !partitions.is_empty(),
        "stage {} has no pending partition",
        stage.stage_id
    );
    let task_id = stage.task_infos.len();
    let mut info = create_task_info(executor_id.to_owned(), task_id);
    info.vcores_consumed = partitions.len() as u32;
    info.global_input_partition_ids = partitions;
    stage.task_infos.push(info);
    let output_partitions = stage
        .plan
        .downcast_ref::<SortShuffleWriterExec>()
        .map(|writer| writer.shuffle_output_partitioning().partition_count())
        .unwrap_or_else(|| panic!("stage {} does not end in a hash shuffle", stage.stage_id));
    Some(Task {
        stage_id: stage.stage_id,
        stage_attempt: stage.stage_attempt_num,
        task_id,
        output_partitions,
    })
}

/// The successful tasks reported, by shuffle file id.
#[derive(Default)]
struct Ledger {
    reports: BTreeMap<u64, Report>,
}

impl Ledger {
    /// Reports `task` successful on `executor`, with rows in every output partition, all in
    /// one sort-shuffle file of a new id.
    fn succeed(
        &mut self,
        graph: &mut StaticExecutionGraph,
        executor: &ExecutorMetadata,
        task: &Task,
    ) {
        let file_id = self.reports.len() as u64 + 1;
        let partitions: Vec<ShuffleWritePartition> = (0..task.output_partitions)
            .map(|p| ShuffleWritePartition {
                partition_id: p as u64,
                num_batches: 1,
                num_rows: 10,
                num_bytes: 100,
                file_id: Some(file_id),
                is_sort_shuffle: true,
            })
            .collect();
        let status = TaskStatus {
            task_id: task.task_id as u32,
            job_id: "job".to_owned(),
            stage_id: task.stage_id as u32,
            stage_attempt_num: task.stage_attempt as u32,
            status: Some(task_status::Status::Successful(SuccessfulTask {
                executor_id: executor.id.clone(),
                partitions,
                ..Default::default()
            })),
            ..Default::default()
        };
        graph
            .update_task_status(executor, vec![status], 4, 4)
            .expect("update the task's status");
        self.reports.insert(
            file_id,
            Report {
                stage_id: task.stage_id,
                stage_attempt: task.stage_attempt,
                task_id: task.task_id,
                executor_id: executor.id.clone(),
                partitions_with_rows: (0..task.output_partitions).collect(),
            },
        );
    }
}

/// The locations of `map_stage`'s output that `plan`'s shuffle readers read, by output
/// partition of `map_stage`.
fn reads_of(plan: &dyn ExecutionPlan, map_stage: usize) -> BTreeMap<usize, Vec<PartitionLocation>> {
    let mut reads: BTreeMap<usize, Vec<PartitionLocation>> = BTreeMap::new();
    let mut readers = 0;
    let mut todo = vec![plan];
    while let Some(node) = todo.pop() {
        if let Some(reader) = node.downcast_ref::<ShuffleReaderExec>()
            && reader.stage_id == map_stage
        {
            readers += 1;
            for location in reader.partition.iter().flatten() {
                reads
                    .entry(location.partition_id.partition_id)
                    .or_default()
                    .push(location.clone());
            }
        }
        todo.extend(node.children().into_iter().map(|child| child.as_ref()));
    }
    assert!(
        readers > 0,
        "the consumer's plan has no shuffle reader of stage {map_stage}"
    );
    reads
}

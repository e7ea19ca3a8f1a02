//! A stage that reads a map stage must never be handed the outputs of two attempts of it.
//!
//! With the adaptive planner off (`StaticExecutionGraph`), a running map stage hands each
//! finished task's shuffle output to the stage that reads it at once. When an executor is
//! lost while the map stage is still running, the map stage is rolled back and its next
//! attempt runs every partition again. Ballista 55.0.0 leaves the first attempt's outputs
//! (those on executors still alive) with the consumer, which then reads rows twice;
//! `patches/ballista-scheduler-55-executor-loss.patch` takes them back.
//!
//! The scenario (`rollback/scenario.rs`) is written once and compiled twice: against this
//! crate (the patched scheduler) and against the stock `ballista-scheduler` 55.0.0.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use ballista_core::serde::scheduler::PartitionLocation;

mod patched {
    use partout_ballista_scheduler as scheduler;
    include!("rollback/scenario.rs");

    #[tokio::test]
    async fn a_consumer_reads_one_attempt_of_a_rolled_back_stage() {
        rolled_back_map_stage()
            .await
            .assert_reads_only_the_last_attempt();
    }
}

mod stock {
    use ballista_scheduler as scheduler;
    include!("rollback/scenario.rs");

    /// Shows that the scenario reaches the bug the patch fixes: stock Ballista 55.0.0 hands
    /// the consumer the outputs of both attempts of the rolled-back map stage.
    ///
    /// If this fails after a Ballista upgrade, the upgraded scheduler may take the outputs
    /// back itself, and the patch's `output_links` hunk may no longer be needed.
    #[tokio::test]
    async fn stock_ballista_55_hands_a_consumer_both_attempts() {
        rolled_back_map_stage().await.assert_reads_two_attempts();
    }
}

/// A successful task as a fake executor reported it.
#[derive(Clone, Debug)]
struct Report {
    stage_id: usize,
    stage_attempt: usize,
    task_id: usize,
    executor_id: String,
    /// The output partitions it wrote rows to.
    partitions_with_rows: Vec<usize>,
}

/// Where the scenario leaves the consumer of the rolled-back map stage.
struct Outcome {
    map_stage: usize,
    consumer_stage: usize,
    /// The map stage's attempt that ran last (the consumer was resolved after it).
    last_attempt: usize,
    /// Every successful task reported, of every stage and attempt, by the file id it gave
    /// its outputs (unique over the whole scenario).
    reports: BTreeMap<u64, Report>,
    /// The map stage's outputs the consumer's resolved plan reads, by output partition.
    consumer_reads: BTreeMap<usize, Vec<PartitionLocation>>,
}

impl Outcome {
    /// The report a location was handed on from.
    fn origin(&self, location: &PartitionLocation) -> Option<&Report> {
        location.file_id.and_then(|id| self.reports.get(&id))
    }

    fn describe(&self, location: &PartitionLocation) -> String {
        let file = location
            .file_id
            .map_or_else(|| "no file id".to_owned(), |id| format!("file {id}"));
        match self.origin(location) {
            Some(r) => format!(
                "{file}: stage {}, attempt {}, task {} on {}",
                r.stage_id, r.stage_attempt, r.task_id, r.executor_id
            ),
            None => format!(
                "{file}: reported by no task (map task {} on {})",
                location.map_partition_id, location.executor_meta.id
            ),
        }
    }

    /// Every location the consumer reads, one line each.
    fn listing(&self) -> String {
        let mut text = String::new();
        for (partition, locations) in &self.consumer_reads {
            for location in locations {
                let _ = writeln!(
                    text,
                    "  output partition {partition}: {}",
                    self.describe(location)
                );
            }
        }
        text
    }

    /// The file ids of the last attempt's tasks that wrote rows to `partition`.
    fn expected(&self, partition: usize) -> BTreeSet<u64> {
        self.reports
            .iter()
            .filter(|(_, r)| {
                r.stage_id == self.map_stage
                    && r.stage_attempt == self.last_attempt
                    && r.partitions_with_rows.contains(&partition)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// The consumer reads, for each output partition, exactly one location per successful
    /// task of the map stage's last attempt that wrote rows to it, and nothing else.
    fn assert_reads_only_the_last_attempt(&self) {
        assert!(
            self.last_attempt > 0,
            "map stage {} was never rolled back: the scenario did not reach a second attempt",
            self.map_stage
        );
        let partitions: BTreeSet<usize> = self
            .consumer_reads
            .keys()
            .copied()
            .chain(
                self.reports
                    .values()
                    .filter(|r| r.stage_id == self.map_stage)
                    .flat_map(|r| r.partitions_with_rows.iter().copied()),
            )
            .collect();
        let mut problems = String::new();
        for partition in partitions {
            let expected = self.expected(partition);
            let read = self
                .consumer_reads
                .get(&partition)
                .map_or(&[][..], Vec::as_slice);
            let mut seen = BTreeSet::new();
            for location in read {
                let wrong = match self.origin(location) {
                    None => "of no reported task",
                    Some(r) if r.stage_id != self.map_stage => "of another stage",
                    Some(r) if r.stage_attempt != self.last_attempt => "of an earlier attempt",
                    Some(_) => {
                        // A location with a known origin has a file id.
                        let id = location.file_id.unwrap_or_default();
                        if !seen.insert(id) {
                            "read twice"
                        } else if !expected.contains(&id) {
                            "for a partition its task wrote no rows to"
                        } else {
                            continue;
                        }
                    }
                };
                let _ = writeln!(
                    problems,
                    "  output partition {partition}: {} ({wrong})",
                    self.describe(location)
                );
            }
            for missing in expected.iter().filter(|id| !seen.contains(id)) {
                let r = &self.reports[missing];
                let _ = writeln!(
                    problems,
                    "  output partition {partition}: file {missing} of attempt {}, task {} on {} is not read",
                    r.stage_attempt, r.task_id, r.executor_id
                );
            }
        }
        assert!(
            problems.is_empty(),
            "consumer stage {} is not handed exactly the outputs of attempt {} of map stage {} \
             (the attempt after the rollback); wrong locations:\n{problems}everything it reads:\n{}",
            self.consumer_stage,
            self.last_attempt,
            self.map_stage,
            self.listing()
        );
    }

    /// Some output partition of the map stage is read from both its first attempt (the one
    /// rolled back) and its last one.
    fn assert_reads_two_attempts(&self) {
        let both: Vec<usize> = self
            .consumer_reads
            .iter()
            .filter(|(_, locations)| {
                let attempts: BTreeSet<usize> = locations
                    .iter()
                    .filter_map(|l| self.origin(l))
                    .filter(|r| r.stage_id == self.map_stage)
                    .map(|r| r.stage_attempt)
                    .collect();
                attempts.contains(&0) && attempts.contains(&self.last_attempt)
            })
            .map(|(partition, _)| *partition)
            .collect();
        assert!(
            self.last_attempt > 0 && !both.is_empty(),
            "stock ballista-scheduler 55.0.0 no longer hands consumer stage {} the outputs of \
             both attempts (0 and {}) of the rolled-back map stage {}; if Ballista was upgraded, \
             the patch's output_links hunk may no longer be needed. It reads:\n{}",
            self.consumer_stage,
            self.last_attempt,
            self.map_stage,
            self.listing()
        );
    }
}

//! `partout bench scatter`: the scatter kernels on Velox's PartitionedVectorBenchmark matrix,
//! beside DataFusion's grouped take and its older take per destination, in the same run.

use crate::harness::{Budget, alternate, compare, keep, median};
use crate::report::{Comparison, outln};
use anyhow::Result;
use arrow_array::RecordBatch;
use partout_core::Partitioner;
use partout_testkit::baseline::{GroupedTake, TakePerDestination};
use partout_testkit::workload::{ColumnKind, data_bytes, matrix_batch};
use partout_testkit::{IdPattern, random_ids, rng};
use std::convert::Infallible;

/// Options of `partout bench scatter`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScatterOptions {
    /// One JSON object per case and baseline instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fewer, shorter samples.
    #[arg(long)]
    pub quick: bool,
    /// A fixed virtual fan-out (a power of two) instead of the automatic one.
    #[arg(long)]
    pub fanout: Option<u32>,
    /// Partition ids in runs of this mean length (real keys) instead of uniform.
    #[arg(long)]
    pub runs: Option<usize>,
    /// Partition counts to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [4u32, 16, 64, 256, 1024],
        value_parser = clap::value_parser!(u32).range(1..=i64::from(partout_core::plan::MAX_PARTITIONS)),
    )]
    pub partitions: Vec<u32>,
    /// Column kinds to run (BOOLEAN, INTEGER, BIGINT, HUGEINT, VARCHAR, VARCHAR_VIEW, RUN_END,
    /// Mixed).
    #[arg(long, value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// Rounds over the whole matrix; each figure is the median of the rounds' medians
    /// (default 3, or 1 with --quick).
    #[arg(long)]
    pub rounds: Option<usize>,
}

/// Rows of every batch of the matrix.
const ROWS: usize = 10_000;

/// One case of the matrix, built before anything is timed.
struct Case {
    name: String,
    columns: usize,
    batch: RecordBatch,
    ids: Vec<u32>,
    ours: Partitioner,
    grouped: GroupedTake,
    per_destination: TakePerDestination,
}

/// Velox's PartitionedVectorBenchmark matrix: ours against DataFusion's grouped take and its
/// older take per destination.
///
/// # Errors
/// An unknown column kind or fan-out, a disagreement between partout and the grouped take, or
/// a closed stdout.
pub fn run(options: &ScatterOptions) -> Result<()> {
    let budget = Budget::new(options.quick);
    let rounds = options
        .rounds
        .unwrap_or(if options.quick { 1 } else { 3 })
        .max(1);
    let kinds = column_kinds(&options.kinds)?;
    let pattern = options.runs.map_or(IdPattern::Uniform, IdPattern::Runs);
    if !options.json {
        outln!(
            "scatter: {ROWS} rows per batch, ids {}, fan-out {}; median of {rounds} rounds of {} samples; ratio = baseline time / ours",
            options
                .runs
                .map_or("uniform".to_string(), |r| format!("in runs of ~{r}")),
            options.fanout.map_or("auto".to_string(), |f| f.to_string()),
            budget.samples,
        );
        outln!(
            "{:<34} {:>9} {:>11} {:>12} {:>7} {:>12} {:>7}",
            "case",
            "ours µs",
            "ns/row/col",
            "grouped µs",
            "ratio",
            "per-dest µs",
            "ratio"
        );
    }
    let mut cases = build_cases(&kinds, &options.partitions, pattern, options.fanout)?;
    // Every case once per round, in turn: a burst of noise on the machine then hits one round
    // of a case, not all of its samples.
    let Ok(samples) = alternate::<_, Infallible>(rounds, cases.len(), |c| {
        let Case {
            batch,
            ids,
            ours,
            grouped,
            per_destination,
            ..
        } = &mut cases[c];
        let n = ours.num_partitions() as usize;
        Ok(compare(
            budget,
            &mut [
                &mut || keep(ours.partition(batch, ids).expect("partition")),
                &mut || keep(grouped.partition(batch, ids, n).expect("take")),
                &mut || keep(per_destination.partition(batch, ids, n).expect("take")),
            ],
        ))
    });
    for (case, times) in cases.iter().zip(samples) {
        let [ours, grouped, per_destination]: [f64; 3] =
            std::array::from_fn(|k| median(times.iter().map(|t| t[k]).collect()));
        let bytes = data_bytes(&case.batch);
        let comparisons = [
            ("grouped_take", grouped),
            ("take_per_destination", per_destination),
        ]
        .map(|(baseline, baseline_ns)| Comparison {
            suite: "scatter",
            case: &case.name,
            ours_ns: ours,
            baseline,
            baseline_ns,
            rows: ROWS,
            bytes,
        });
        if options.json {
            for comparison in &comparisons {
                comparison.print_json()?;
            }
        } else {
            let [grouped, per_destination] = &comparisons;
            outln!(
                "{:<34} {:>9.1} {:>11.3} {:>12.1} {:>6.2}x {:>12.1} {:>6.2}x",
                case.name,
                ours / 1e3,
                ours / (ROWS * case.columns) as f64,
                grouped.baseline_ns / 1e3,
                grouped.ratio(),
                per_destination.baseline_ns / 1e3,
                per_destination.ratio(),
            );
        }
    }
    Ok(())
}

/// The kinds `names` names (case-insensitive), in the matrix's order; every kind for none.
fn column_kinds(names: &[String]) -> Result<Vec<ColumnKind>> {
    for name in names {
        anyhow::ensure!(
            ColumnKind::ALL
                .iter()
                .any(|k| k.to_string().eq_ignore_ascii_case(name)),
            "unknown column kind {name:?} (known: {})",
            ColumnKind::ALL.map(|k| k.to_string()).join(", ")
        );
    }
    Ok(ColumnKind::ALL
        .into_iter()
        .filter(|k| {
            names.is_empty() || names.iter().any(|n| n.eq_ignore_ascii_case(&k.to_string()))
        })
        .collect())
}

/// Every case of the matrix (kinds x 1 or 10 columns x no or half nulls x partition counts),
/// each checked against the grouped take before anything is timed.
fn build_cases(
    kinds: &[ColumnKind],
    partitions: &[u32],
    pattern: IdPattern,
    fanout: Option<u32>,
) -> Result<Vec<Case>> {
    let mut rng = rng(42);
    let mut cases = Vec::new();
    for &kind in kinds {
        for columns in [1usize, 10] {
            for null_density in [0.0, 0.5] {
                let batch = matrix_batch(kind, columns, ROWS, null_density, &mut rng);
                for &n in partitions {
                    let ids = random_ids(ROWS, n, pattern, &mut rng);
                    let mut ours = Partitioner::try_new(n)?;
                    if let Some(f) = fanout {
                        ours = ours.with_fanout(f)?;
                    }
                    let mut grouped = GroupedTake::new();
                    // Same answer before timing anything.
                    let check = ours.partition(&batch, &ids)?;
                    let (want, offsets) = grouped.partition(&batch, &ids, n as usize)?;
                    anyhow::ensure!(
                        check.batch() == &want
                            && check.offsets().iter().map(|&o| o as usize).eq(offsets),
                        "partout and the grouped take disagree on {kind}"
                    );
                    let nulls = if null_density > 0.0 {
                        "halfNulls"
                    } else {
                        "noNulls"
                    };
                    cases.push(Case {
                        name: format!("{kind}_{columns}Cols_P{n}_{nulls}"),
                        columns,
                        batch: batch.clone(),
                        ids,
                        ours,
                        grouped,
                        per_destination: TakePerDestination::new(),
                    });
                }
            }
        }
    }
    Ok(cases)
}

//! `partout bench <suite>`: partout's kernels beside the honest baseline, in the same run.

use crate::measure::{Budget, compare, keep, median};
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use partout_core::Partitioner;
use partout_testkit::baseline::{GroupedTake, TakePerDestination};
use partout_testkit::workload::{ColumnKind, data_bytes, matrix_batch};
use partout_testkit::{IdPattern, random_ids, rng};
use serde_json::json;

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
    /// Column kinds to run (BOOLEAN, INTEGER, BIGINT, HUGEINT, VARCHAR, VARCHAR_VIEW, Mixed).
    #[arg(long, value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// Rounds over the whole matrix; each figure is the median of the rounds' medians
    /// (default 3, or 1 with --quick).
    #[arg(long)]
    pub rounds: Option<usize>,
}

struct Row {
    case: String,
    rows: usize,
    columns: usize,
    bytes: usize,
    ours: f64,
    grouped: f64,
    per_destination: f64,
}

/// Velox's PartitionedVectorBenchmark matrix: ours against DataFusion's grouped take and its
/// older take per destination.
pub fn scatter(options: &ScatterOptions) -> Result<()> {
    const ROWS: usize = 10_000;
    let budget = if options.quick {
        Budget::QUICK
    } else {
        Budget::FULL
    };
    let mut rng = rng(42);
    for name in &options.kinds {
        anyhow::ensure!(
            ColumnKind::ALL
                .iter()
                .any(|k| k.to_string().eq_ignore_ascii_case(name)),
            "unknown column kind {name:?} (known: {})",
            ColumnKind::ALL.map(|k| k.to_string()).join(", ")
        );
    }
    let kinds: Vec<ColumnKind> = ColumnKind::ALL
        .into_iter()
        .filter(|k| {
            options.kinds.is_empty()
                || options
                    .kinds
                    .iter()
                    .any(|n| n.eq_ignore_ascii_case(&k.to_string()))
        })
        .collect();
    let pattern = options.runs.map_or(IdPattern::Uniform, IdPattern::Runs);
    if !options.json {
        outln!(
            "scatter: {ROWS} rows per batch, ids {}, fan-out {}; median of {} rounds of {} samples; ratio = baseline time / ours",
            options
                .runs
                .map_or("uniform".to_string(), |r| format!("in runs of ~{r}")),
            options.fanout.map_or("auto".to_string(), |f| f.to_string()),
            options
                .rounds
                .unwrap_or(if options.quick { 1 } else { 3 })
                .max(1),
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
    // Build every case first, then time them round after round: a burst of noise on the
    // machine then hits one round of a case, not all of its samples.
    struct Case {
        name: String,
        columns: usize,
        batch: RecordBatch,
        ids: Vec<u32>,
        ours: Partitioner,
        grouped: GroupedTake,
        per_destination: TakePerDestination,
        times: [Vec<f64>; 3],
    }
    let mut cases = Vec::new();
    for kind in kinds {
        for columns in [1usize, 10] {
            for null_density in [0.0, 0.5] {
                let batch = matrix_batch(kind, columns, ROWS, null_density, &mut rng);
                for &n in &options.partitions {
                    let ids = random_ids(ROWS, n, pattern, &mut rng);
                    let mut ours = Partitioner::try_new(n)?;
                    if let Some(f) = options.fanout {
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
                        times: Default::default(),
                    });
                }
            }
        }
    }
    let rounds = options
        .rounds
        .unwrap_or(if options.quick { 1 } else { 3 })
        .max(1);
    for _ in 0..rounds {
        for case in &mut cases {
            let Case {
                batch,
                ids,
                ours,
                grouped,
                per_destination,
                ..
            } = case;
            let n = ours.num_partitions() as usize;
            let times = compare(
                budget,
                &mut [
                    &mut || keep(ours.partition(batch, ids).expect("partition")),
                    &mut || keep(grouped.partition(batch, ids, n).expect("take")),
                    &mut || keep(per_destination.partition(batch, ids, n).expect("take")),
                ],
            );
            for (all, t) in case.times.iter_mut().zip(times) {
                all.push(t);
            }
        }
    }
    for case in cases {
        let [ours, grouped, per_destination] = case.times.map(median);
        let row = Row {
            case: case.name,
            rows: ROWS,
            columns: case.columns,
            bytes: data_bytes(&case.batch),
            ours,
            grouped,
            per_destination,
        };
        print_row(&row, options.json)?;
    }
    Ok(())
}

fn print_row(row: &Row, as_json: bool) -> Result<()> {
    if as_json {
        for (baseline, ns) in [
            ("grouped_take", row.grouped),
            ("take_per_destination", row.per_destination),
        ] {
            let object = json!({
                "suite": "scatter",
                "case": row.case,
                "ours_ns": row.ours.round(),
                "baseline": baseline,
                "baseline_ns": ns.round(),
                "ratio": (ns / row.ours * 100.0).round() / 100.0,
                "rows": row.rows,
                "bytes": row.bytes,
            });
            outln!(
                "{}",
                serde_json::to_string(&object).context("encoding JSON")?
            );
        }
    } else {
        outln!(
            "{:<34} {:>9.1} {:>11.3} {:>12.1} {:>6.2}x {:>12.1} {:>6.2}x",
            row.case,
            row.ours / 1e3,
            row.ours / (row.rows * row.columns) as f64,
            row.grouped / 1e3,
            row.grouped / row.ours,
            row.per_destination / 1e3,
            row.per_destination / row.ours,
        );
    }
    Ok(())
}

/// `partout bench plan`: the plan alone (validate, count, place) for every fan-out, with
/// uniform ids and ids in runs, to choose the automatic fan-out by measurement.
pub fn plan(quick: bool, fanouts: &[u32], partitions: &[u32]) -> Result<()> {
    const ROWS: usize = 10_000;
    let budget = if quick { Budget::QUICK } else { Budget::FULL };
    let mut rng = rng(7);
    outln!(
        "plan: {ROWS} rows; ns per row for each fan-out (median of {} samples)",
        budget.samples
    );
    out!("{:<22}", "ids / partitions");
    for f in fanouts {
        out!(" {:>7}", format!("f={f}"));
    }
    outln!();
    for pattern in [IdPattern::Uniform, IdPattern::Runs(4)] {
        for &n in partitions {
            let ids = random_ids(ROWS, n, pattern, &mut rng);
            let mut plans: Vec<partout_core::ScatterPlan> =
                fanouts.iter().map(|_| Default::default()).collect();
            // Bad options fail here, before anything is timed.
            for (plan, &f) in plans.iter_mut().zip(fanouts) {
                plan.build_with_fanout(&ids, n, f)?;
            }
            let mut closures: Vec<Box<dyn FnMut()>> = plans
                .iter_mut()
                .zip(fanouts)
                .map(|(plan, &f)| {
                    let ids = &ids;
                    Box::new(move || plan.build_with_fanout(ids, n, f).expect("plan"))
                        as Box<dyn FnMut()>
                })
                .collect();
            let mut refs: Vec<&mut dyn FnMut()> = closures
                .iter_mut()
                .map(|c| c.as_mut() as &mut dyn FnMut())
                .collect();
            let times = compare(budget, &mut refs);
            out!("{:<22}", format!("{pattern:?} / {n}"));
            for t in times {
                out!(" {:>7.3}", t / ROWS as f64);
            }
            outln!();
        }
    }
    Ok(())
}

/// Options of `partout bench ids`.
#[derive(Debug, Clone, clap::Args)]
pub struct IdsOptions {
    /// One JSON object per case instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fewer, shorter samples.
    #[arg(long)]
    pub quick: bool,
    /// Partition counts to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [16u32, 200, 1000],
        value_parser = clap::value_parser!(u32).range(1..=i64::from(partout_core::plan::MAX_PARTITIONS)),
    )]
    pub partitions: Vec<u32>,
}

/// `partout bench ids`: partition ids of 8,192-row batches: the fast hash beside DataFusion's
/// ahash way, the Spark hash beside a plain per-row Murmur3 with `%`.
pub fn ids(options: &IdsOptions) -> Result<()> {
    use arrow_array::{ArrayRef, Int64Array, StringArray, StringViewArray};
    use arrow_schema::{Field, Schema};
    use partout_core::ids::{PartitionIds, Partitioning};
    use partout_testkit::baseline::{DataFusionHash, NaiveSparkHash};
    use rand::Rng;
    use std::sync::Arc;

    const ROWS: usize = 8192;
    let budget = if options.quick {
        Budget::QUICK
    } else {
        Budget::FULL
    };
    let mut rng = rng(11);
    // lineitem-like keys: order keys up to 6 million, 4 rows per key on average, and strings
    // of 5 to 25 letters (Utf8View: a third of them inline).
    let orderkeys: Vec<i64> = (0..ROWS).map(|_| rng.random_range(1..6_000_000)).collect();
    let words: Vec<String> = (0..ROWS)
        .map(|_| {
            let len = rng.random_range(5..=25);
            (0..len)
                .map(|_| rng.random_range(b'a'..=b'z') as char)
                .collect()
        })
        .collect();
    let int64: ArrayRef = Arc::new(Int64Array::from(orderkeys));
    let view: ArrayRef = Arc::new(StringViewArray::from_iter_values(&words));
    let utf8: ArrayRef = Arc::new(StringArray::from_iter_values(&words));
    let schema = Arc::new(Schema::new(vec![
        Field::new("orderkey", int64.data_type().clone(), false),
        Field::new("comment_view", view.data_type().clone(), false),
        Field::new("comment", utf8.data_type().clone(), false),
    ]));
    let batch = RecordBatch::try_new(schema.clone(), vec![int64, view, utf8])?;
    let key_sets: [(&str, Vec<usize>); 3] = [
        ("Int64", vec![0]),
        ("Utf8View", vec![1]),
        ("Int64+Utf8", vec![0, 2]),
    ];
    if !options.json {
        outln!(
            "ids: {ROWS}-row batches; median of {} samples; ratio = baseline time / ours",
            budget.samples
        );
        outln!(
            "{:<26} {:>10} {:>12} {:>22} {:>12} {:>7}",
            "case",
            "ours µs",
            "M rows/s",
            "baseline",
            "baseline µs",
            "ratio"
        );
    }
    let mut out = Vec::new();
    let mut baseline_out = Vec::new();
    for (name, keys) in &key_sets {
        for &n in &options.partitions {
            for spark in [false, true] {
                let partitioning = if spark {
                    Partitioning::spark(keys.clone(), n)
                } else {
                    Partitioning::hash(keys.clone(), n)
                };
                let mut ours = PartitionIds::try_new(partitioning, &schema)?;
                let mut datafusion = DataFusionHash::new();
                let (baseline, times) = if spark {
                    (
                        "naive_murmur3_mod",
                        compare(
                            budget,
                            &mut [
                                &mut || ours.compute(&batch, &mut out).expect("ids"),
                                &mut || NaiveSparkHash.ids(&batch, keys, n, &mut baseline_out),
                            ],
                        ),
                    )
                } else {
                    (
                        "datafusion_ahash",
                        compare(
                            budget,
                            &mut [
                                &mut || ours.compute(&batch, &mut out).expect("ids"),
                                &mut || datafusion.ids(&batch, keys, n, &mut baseline_out),
                            ],
                        ),
                    )
                };
                let scheme = if spark { "spark" } else { "hash" };
                let case = format!("{scheme}/{name}/P{n}");
                if options.json {
                    let object = json!({
                        "suite": "ids",
                        "case": case,
                        "ours_ns": times[0].round(),
                        "baseline": baseline,
                        "baseline_ns": times[1].round(),
                        "ratio": (times[1] / times[0] * 100.0).round() / 100.0,
                        "rows": ROWS,
                        "bytes": keys.iter().map(|&k| data_bytes(&batch.project(&[k]).expect("key"))).sum::<usize>(),
                    });
                    outln!(
                        "{}",
                        serde_json::to_string(&object).context("encoding JSON")?
                    );
                } else {
                    outln!(
                        "{:<26} {:>10.2} {:>12.0} {:>22} {:>12.2} {:>6.2}x",
                        case,
                        times[0] / 1e3,
                        ROWS as f64 / times[0] * 1e3,
                        baseline,
                        times[1] / 1e3,
                        times[1] / times[0]
                    );
                }
            }
        }
    }
    Ok(())
}

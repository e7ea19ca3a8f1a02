//! `partout bench ids`: partition ids of 8,192-row batches of lineitem-like keys: the fast hash
//! beside DataFusion 55's foldhash ids (re-created; held equal to DataFusion's own by partout-datafusion's tests), the Spark hash beside a plain per-row Murmur3 with `%`.

use crate::harness::{Budget, compare};
use crate::report::{Comparison, outln};
use anyhow::Result;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, StringViewArray};
use arrow_schema::{Field, Schema};
use partout_core::ids::{PartitionIds, Partitioning};
use partout_testkit::baseline::{DataFusionHash, NaiveSparkHash};
use partout_testkit::rng;
use partout_testkit::workload::data_bytes;
use rand::Rng;
use std::sync::Arc;

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

/// Rows of the batch.
const ROWS: usize = 8192;

/// `partout bench ids`: each key set at each partition count, with each scheme.
///
/// # Errors
/// A partitioning partout refuses, or a closed stdout.
pub fn run(options: &IdsOptions) -> Result<()> {
    let budget = Budget::new(options.quick);
    let batch = keys_batch()?;
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
                let mut ours = PartitionIds::try_new(partitioning, &batch.schema())?;
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
                        "datafusion_foldhash",
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
                let comparison = Comparison {
                    suite: "ids",
                    case: &case,
                    ours_ns: times[0],
                    baseline,
                    baseline_ns: times[1],
                    rows: ROWS,
                    bytes: keys
                        .iter()
                        .map(|&k| data_bytes(&batch.project(&[k]).expect("key")))
                        .sum(),
                };
                if options.json {
                    comparison.print_json()?;
                } else {
                    outln!(
                        "{:<26} {:>10.2} {:>12.0} {:>22} {:>12.2} {:>6.2}x",
                        case,
                        times[0] / 1e3,
                        ROWS as f64 / times[0] * 1e3,
                        baseline,
                        times[1] / 1e3,
                        comparison.ratio()
                    );
                }
            }
        }
    }
    Ok(())
}

/// lineitem-like keys: order keys up to 6 million, 4 rows per key on average, and strings of
/// 5 to 25 letters (as Utf8View, a third of them inline, and as Utf8).
fn keys_batch() -> Result<RecordBatch> {
    let mut rng = rng(11);
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
    Ok(RecordBatch::try_new(schema, vec![int64, view, utf8])?)
}

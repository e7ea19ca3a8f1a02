//! `partout demo`: the main job on built-in data. Generates batches, hash-partitions them in
//! memory by their BIGINT column (partition ids, then the rows laid out destination by
//! destination) with partout and with DataFusion's way (ahash ids, then one grouped take per
//! batch), checks partout's output against the reference partitioner, and prints the
//! throughput of each.

use crate::measure::{Budget, compare, keep};
use anyhow::{Result, ensure};
use arrow_array::RecordBatch;
use partout_core::Partitioner;
use partout_core::ids::{PartitionIds, Partitioning};
use partout_testkit::baseline::{DataFusionHash, GroupedTake};
use partout_testkit::workload::{ColumnKind, data_bytes, matrix_batch};
use partout_testkit::{reference_partition, rng};
use std::time::Duration;

const ROWS: usize = 8192;
/// The BIGINT column of the mixed batch: the key.
const KEY: usize = 1;

pub fn run(batches: usize) -> Result<()> {
    ensure!(batches > 0, "--batches must be at least 1");
    let mut rng = rng(2024);
    let input: Vec<RecordBatch> = (0..batches)
        .map(|_| matrix_batch(ColumnKind::Mixed, 10, ROWS, 0.1, &mut rng))
        .collect();
    let rows = batches * ROWS;
    let bytes: usize = input.iter().map(data_bytes).sum();
    outln!(
        "partout demo: {batches} batches x {ROWS} rows, 10 mixed columns (int, bigint, decimal, strings, bool), {:.1} MiB, hash-partitioned on the bigint column",
        bytes as f64 / (1 << 20) as f64
    );
    outln!(
        "{:>10} {:>14} {:>14} {:>16} {:>8}",
        "partitions",
        "partout Mrow/s",
        "partout MiB/s",
        "baseline Mrow/s",
        "speedup"
    );
    let schema = input[0].schema();
    for n in [4u32, 64, 256, 1000] {
        let mut ids = PartitionIds::try_new(Partitioning::hash([KEY], n), &schema)?;
        let mut partitioner = Partitioner::try_new(n)?;
        let mut id_buffer = Vec::new();
        // Every destination of the first batches checked against the reference partitioner.
        for batch in input.iter().take(4) {
            ids.compute(batch, &mut id_buffer)?;
            let got = partitioner.partition(batch, &id_buffer)?;
            let want = reference_partition(batch, &id_buffer, n);
            ensure!(
                want.iter().enumerate().all(|(p, w)| &got.partition(p) == w),
                "partout's output differs from the reference partitioner"
            );
        }
        let mut datafusion_ids = DataFusionHash::new();
        let mut grouped = GroupedTake::new();
        let mut baseline_ids = Vec::new();
        let budget = Budget {
            samples: 5,
            min_sample: Duration::from_millis(1),
        };
        let times = compare(
            budget,
            &mut [
                &mut || {
                    for batch in &input {
                        ids.compute(batch, &mut id_buffer).expect("ids");
                        keep(partitioner.partition(batch, &id_buffer).expect("partition"));
                    }
                },
                &mut || {
                    for batch in &input {
                        datafusion_ids.ids(batch, &[KEY], n, &mut baseline_ids);
                        keep(
                            grouped
                                .partition(batch, &baseline_ids, n as usize)
                                .expect("take"),
                        );
                    }
                },
            ],
        );
        let per_s = |ns: f64| rows as f64 / ns * 1e3;
        outln!(
            "{n:>10} {:>14.1} {:>14.0} {:>16.1} {:>7.2}x",
            per_s(times[0]),
            bytes as f64 / (1 << 20) as f64 / (times[0] / 1e9),
            per_s(times[1]),
            times[1] / times[0]
        );
    }
    outln!(
        "(baseline: DataFusion's way: ahash ids, per-destination index lists, one arrow take per batch; partout's output checked against the reference partitioner)"
    );
    Ok(())
}

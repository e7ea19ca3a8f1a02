//! `partout demo`: the main job on built-in data. Generates batches, partitions them in memory
//! with partout and with DataFusion's grouped-take approach, checks that both agree, and prints
//! the throughput of each.

use crate::measure::{Budget, compare, keep};
use anyhow::{Result, ensure};
use arrow_array::RecordBatch;
use partout_core::Partitioner;
use partout_testkit::baseline::GroupedTake;
use partout_testkit::workload::{ColumnKind, data_bytes, matrix_batch};
use partout_testkit::{IdPattern, random_ids, rng};
use std::time::Duration;

const ROWS: usize = 8192;

pub fn run(batches: usize) -> Result<()> {
    ensure!(batches > 0, "--batches must be at least 1");
    let mut rng = rng(2024);
    let input: Vec<RecordBatch> = (0..batches)
        .map(|_| matrix_batch(ColumnKind::Mixed, 10, ROWS, 0.1, &mut rng))
        .collect();
    let rows = batches * ROWS;
    let bytes: usize = input.iter().map(data_bytes).sum();
    outln!(
        "partout demo: {batches} batches x {ROWS} rows, 10 mixed columns (int, bigint, decimal, strings, bool), {:.1} MiB",
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
    for n in [4u32, 64, 256, 1000] {
        let ids: Vec<Vec<u32>> = input
            .iter()
            .map(|b| random_ids(b.num_rows(), n, IdPattern::Runs(4), &mut rng))
            .collect();
        let mut ours = Partitioner::try_new(n)?;
        let mut baseline = GroupedTake::new();
        for (batch, ids) in input.iter().zip(&ids) {
            let got = ours.partition(batch, ids)?;
            let (want, _) = baseline.partition(batch, ids, n as usize)?;
            ensure!(got.batch() == &want, "partout and the baseline disagree");
        }
        let budget = Budget {
            samples: 5,
            min_sample: Duration::from_millis(1),
        };
        let times = compare(
            budget,
            &mut [
                &mut || {
                    for (batch, ids) in input.iter().zip(&ids) {
                        keep(ours.partition(batch, ids).expect("partition"));
                    }
                },
                &mut || {
                    for (batch, ids) in input.iter().zip(&ids) {
                        keep(baseline.partition(batch, ids, n as usize).expect("take"));
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
        "(baseline: DataFusion's grouped take: per-destination index lists, one arrow take per batch; outputs checked identical)"
    );
    Ok(())
}

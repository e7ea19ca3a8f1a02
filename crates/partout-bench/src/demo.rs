//! `partout demo`: the main job on built-in data. Generates TPC-H lineitem in-process,
//! partitions it in memory by `l_orderkey` into Arrow IPC streams with partout and with
//! DataFusion's way (ahash ids, a grouped take per batch, an IPC writer per destination),
//! checks that every row arrived, then repartitions it on disk (a Parquet file in, one Parquet
//! file per destination out) with one thread and with every core, and prints the throughput of
//! each beside its baseline.

use crate::harness::{alternate, medians, time};
use crate::lineitem;
use crate::report::outln;
use crate::writer::{Contender, decoded_rows, run_once};
use anyhow::{Context, Result, ensure};
use arrow_array::RecordBatch;
use partout_job::{Compression, JobOptions, repartition};

/// Options of `partout demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoOptions {
    /// TPC-H scale factor of the generated lineitem table.
    #[arg(long, default_value_t = 0.1)]
    pub sf: f64,
    /// Destinations.
    #[arg(short = 'n', long, default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(partout_core::plan::MAX_PARTITIONS)))]
    pub partitions: u32,
    /// Rounds of each in-memory contender (alternating); figures are medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
}

/// `partout demo`.
///
/// # Errors
/// A bad scale factor, a contender that failed or lost rows, or a closed stdout.
pub fn run(options: &DemoOptions) -> Result<()> {
    let n = options.partitions;
    let rounds = options.rounds as usize;
    let (seconds, batches) = time(|| lineitem::generate(options.sf, 8192))?;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let bytes: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
    outln!(
        "partout demo: TPC-H lineitem SF {} ({rows} rows, 16 columns, {:.0} MiB, generated in {seconds:.1} s), hash-partitioned by l_orderkey into {n} destinations",
        options.sf,
        bytes as f64 / (1 << 20) as f64,
    );

    // In memory: one Arrow IPC stream per destination. Every row decoded back first.
    let memory_limit = 64 << 20;
    let contenders = [Contender::Partout, Contender::DataFusion];
    for contender in contenders {
        let run = run_once(contender, false, &batches, n, memory_limit, true)?;
        let decoded = decoded_rows(&run.outputs)?;
        ensure!(
            decoded == rows,
            "{contender:?} wrote {decoded} rows of {rows}"
        );
    }
    let samples = alternate(rounds, contenders.len(), |i| {
        time(|| run_once(contenders[i], false, &batches, n, memory_limit, false))
            .map(|(seconds, _)| seconds)
    })?;
    let [ours, theirs]: [f64; 2] = medians(&samples, |&s| s)
        .try_into()
        .expect("two contenders");

    // On disk: lineitem as one Parquet file, repartitioned into one Parquet file per
    // destination, with one thread and with every core.
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let input = dir.path().join("lineitem.parquet");
    lineitem::write_parquet(&input, &batches)?;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut counts = vec![1, cores];
    counts.dedup();
    let samples = alternate(rounds, counts.len(), |i| {
        let threads = counts[i];
        let report = repartition(
            JobOptions::new([&input], dir.path().join(format!("out-{threads}")), n)
                .with_keys(["l_orderkey"])
                .with_threads(threads)
                .with_compression(Compression::Snappy)
                .with_overwrite(true),
        )?;
        ensure!(
            report.manifest.output_rows == rows as u64,
            "the repartitioned files hold {} rows of {rows}",
            report.manifest.output_rows
        );
        Ok(report.seconds)
    })?;
    let disk: Vec<(usize, f64)> = counts.into_iter().zip(medians(&samples, |&s| s)).collect();

    let rate = |seconds: f64| rows as f64 / seconds / 1e6;
    outln!();
    outln!(
        "{:<52} {:>14} {:>16} {:>8}",
        "job",
        "partout Mrow/s",
        "baseline Mrow/s",
        "speedup"
    );
    outln!(
        "{:<52} {:>14.1} {:>16.1} {:>7.2}x",
        format!("in memory: {n} Arrow IPC streams"),
        rate(ours),
        rate(theirs),
        theirs / ours
    );
    let one = disk[0].1;
    for &(threads, seconds) in &disk[1..] {
        outln!(
            "{:<52} {:>14.1} {:>16.1} {:>7.2}x",
            format!("on disk: Parquet -> {n} Parquet files, {threads} threads"),
            rate(seconds),
            rate(one),
            one / seconds
        );
    }
    if disk.len() == 1 {
        outln!(
            "{:<52} {:>14.1} {:>16} {:>8}",
            format!("on disk: Parquet -> {n} Parquet files, 1 thread"),
            rate(one),
            "-",
            "-"
        );
    }
    outln!(
        "(in memory, baseline: DataFusion's way - ahash ids, a grouped take per batch, an IPC writer per destination; every row of both decoded back. On disk, baseline: partout on one thread; Snappy, every row counted. Medians of {} rounds.)",
        options.rounds
    );
    Ok(())
}

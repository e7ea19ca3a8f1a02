//! `partout bench e2e`: TPC-H lineitem as a Parquet file, repartitioned into N Parquet files by
//! `partout repartition`'s own code, at each thread count, beside the floor: the same file
//! read and written into one destination by one thread (no partitioning: what decoding and
//! encoding the Parquet alone costs).
//!
//! Every run's files are read back, untimed, and checked destination by destination (schema,
//! rows and values) against what the test kit's reference of partout's hash puts in each,
//! computed once from the input.

use crate::fingerprint::{self, Fingerprint, Reference};
use crate::harness::{alternate, medians};
use crate::lineitem;
use crate::report::{outln, print_json};
use anyhow::{Context, Result, ensure};
use arrow_array::RecordBatch;
use partout_job::{Compression, JobOptions, repartition};
use std::path::PathBuf;

/// The memory limit each timed run holds to.
pub const MEMORY_LIMIT: u64 = 512 << 20;

/// Options of `partout bench e2e`.
#[derive(Debug, Clone, clap::Args)]
pub struct E2eBenchOptions {
    /// TPC-H scale factor of the generated lineitem table.
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    /// Destinations.
    #[arg(short = 'n', long, default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(partout_core::plan::MAX_PARTITIONS)))]
    pub partitions: u32,
    /// Thread counts to run.
    #[arg(long, value_delimiter = ',', default_values_t = [1u16, 2])]
    pub threads: Vec<u16>,
    /// Output compression.
    #[arg(long, default_value_t = Compression::Snappy)]
    pub compression: Compression,
    /// Rounds: every contender once per round, in alternation; figures are medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Read this Parquet file instead of generating lineitem.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// The key column (with --input).
    #[arg(long, default_value = "l_orderkey")]
    pub by: String,
    /// One JSON object per contender instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// What one run of a contender measured, from its report.
struct Sample {
    seconds: f64,
    rows: u64,
    output_bytes: u64,
    /// The process's peak memory so far, when the platform tells.
    peak_rss_bytes: Option<u64>,
    /// Destinations read back and found as the reference says (all of them, or the run fails).
    checked: usize,
}

/// What the destinations of a run must hold.
struct Expected {
    /// At the N destinations of partout's runs.
    spread: Vec<Fingerprint>,
    /// At the floor's one destination: the whole input.
    floor: Vec<Fingerprint>,
}

impl Expected {
    /// Nothing yet, for `n` destinations.
    fn new(n: u32) -> Self {
        Self {
            spread: vec![Fingerprint::default(); n as usize],
            floor: vec![Fingerprint::default()],
        }
    }

    /// Adds what `batches` (keyed on column `key`) put in each destination.
    fn add(&mut self, batches: &[RecordBatch], key: usize) -> Result<()> {
        let n = self.spread.len() as u32;
        let spread = fingerprint::expected_on(batches, Reference::PartoutHash, &[key], n)?;
        fingerprint::add_all(&mut self.spread, &spread)?;
        let floor = fingerprint::expected_on(batches, Reference::PartoutHash, &[key], 1)?;
        fingerprint::add_all(&mut self.floor, &floor)
    }
}

/// The index of the key column `by` in `schema`.
fn key_index(schema: &arrow_schema::Schema, by: &str) -> Result<usize> {
    schema
        .index_of(by)
        .with_context(|| format!("the input has no column {by:?}"))
}

/// What each of `n` destinations (and the floor's one) must hold of `batches` keyed on `by`.
fn expected_of(batches: &[RecordBatch], by: &str, n: u32) -> Result<Expected> {
    let mut expected = Expected::new(n);
    if let Some(first) = batches.first() {
        expected.add(batches, key_index(&first.schema(), by)?)?;
    }
    Ok(expected)
}

/// As [`expected_of`], for the batches of the Parquet file at `path`, read one at a time.
fn expected_of_file(path: &std::path::Path, by: &str, n: u32) -> Result<Expected> {
    let file = std::fs::File::open(path)?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)?;
    let key = key_index(reader.schema(), by)?;
    let mut expected = Expected::new(n);
    for batch in reader.build()? {
        expected.add(&[batch?], key)?;
    }
    Ok(expected)
}

/// `partout bench e2e`: partout at each thread count and the floor, in alternation.
///
/// # Errors
/// Bad options, a job that failed or lost rows, or a closed stdout.
pub fn run(options: &E2eBenchOptions) -> Result<()> {
    ensure!(
        !options.threads.is_empty(),
        "--threads names no thread count"
    );
    ensure!(
        options.threads.iter().all(|&t| t > 0),
        "thread counts must be at least 1"
    );
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let n = options.partitions;
    // What each destination must hold, at N destinations and at the floor's one.
    let (input, expected) = match &options.input {
        Some(path) => {
            let expected = expected_of_file(path, &options.by, n)
                .with_context(|| format!("reading {}", path.display()))?;
            (path.clone(), expected)
        }
        None => {
            let batches = lineitem::generate(options.sf, 8192)?;
            let path = dir.path().join("lineitem.parquet");
            lineitem::write_parquet(&path, &batches)?;
            let expected = expected_of(&batches, &options.by, n)?;
            drop::<Vec<RecordBatch>>(batches);
            (path, expected)
        }
    };
    let input_bytes = std::fs::metadata(&input)
        .with_context(|| format!("reading {}", input.display()))?
        .len();
    // Contenders: (label, destinations, threads).
    let mut contenders: Vec<(String, u32, u16)> = options
        .threads
        .iter()
        .map(|&t| {
            (
                format!("partout, {} files, {t} thr", options.partitions),
                options.partitions,
                t,
            )
        })
        .collect();
    contenders.push(("floor: 1 file, 1 thr".into(), 1, 1));
    let samples = alternate(options.rounds as usize, contenders.len(), |i| {
        let (label, n, threads) = &contenders[i];
        let out = dir.path().join("out");
        let report = repartition(
            JobOptions::new([&input], &out, *n)
                .with_keys([&options.by])
                .with_threads(usize::from(*threads))
                .with_compression(options.compression)
                .with_memory_limit(MEMORY_LIMIT)
                .with_overwrite(true),
        )?;
        let manifest = &report.manifest;
        ensure!(
            manifest.output_rows == manifest.input_rows,
            "{} rows read, {} written",
            manifest.input_rows,
            manifest.output_rows
        );
        // Every destination read back, untimed: its schema, rows and values.
        let got = fingerprint::of_job_output(&out, manifest)?;
        let want = if *n == 1 {
            &expected.floor
        } else {
            &expected.spread
        };
        let checked = fingerprint::check(label, want, &got)?;
        Ok(Sample {
            seconds: report.seconds,
            rows: manifest.input_rows,
            output_bytes: manifest.output_bytes,
            peak_rss_bytes: manifest.peak_rss_bytes,
            checked,
        })
    })?;
    let medians = medians(&samples, |s| s.seconds);
    // Rows and bytes written: the last run's (every run reads the same input; with several
    // threads, the bytes written may differ a little from run to run).
    let last = |i: usize| samples[i].last().expect("at least one round");
    let rows = last(0).rows;
    let one = options
        .threads
        .iter()
        .position(|&t| t == 1)
        .map(|i| medians[i]);
    if !options.json {
        outln!(
            "bench e2e: {} ({rows} rows, {:.0} MiB Parquet) -> Parquet by {}, {:?} compression; medians of {} rounds",
            input.display(),
            input_bytes as f64 / (1 << 20) as f64,
            options.by,
            options.compression,
            options.rounds
        );
        outln!(
            "{:<28} {:>9} {:>10} {:>10} {:>10} {:>12}",
            "contender",
            "seconds",
            "Mrow/s",
            "out MiB",
            "vs 1 thr",
            "vs floor"
        );
    }
    let floor = *medians.last().expect("the floor");
    for (i, (label, n, threads)) in contenders.iter().enumerate() {
        let seconds = medians[i];
        let out_bytes = last(i).output_bytes;
        // A peak is the process's high-water mark: it only grows across runs in one process.
        let peak = samples[i]
            .iter()
            .filter_map(|s| s.peak_rss_bytes)
            .map(|p| p as f64)
            .fold(0.0, f64::max)
            / (1 << 20) as f64;
        if options.json {
            print_json(&serde_json::json!({
                "contender": label, "destinations": n, "threads": threads, "rows": rows,
                "seconds": seconds, "rows_per_s": rows as f64 / seconds,
                "output_bytes": out_bytes, "speedup_over_1_thread": one.map(|o| o / seconds),
                "ratio_to_floor": seconds / floor, "peak_rss_mib_so_far": peak,
                "destinations_checked": samples[i].iter().map(|s| s.checked).min(),
            }))?;
        } else {
            outln!(
                "{label:<28} {seconds:>9.3} {:>10.2} {:>10.1} {:>10} {:>11.2}x",
                rows as f64 / seconds / 1e6,
                out_bytes as f64 / (1 << 20) as f64,
                one.map_or("-".into(), |o| format!("{:.2}x", o / seconds)),
                seconds / floor
            );
        }
    }
    Ok(())
}

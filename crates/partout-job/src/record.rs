//! The [`Manifest`] of a run: built from what the job wrote (`from_run`). The manifest
//! itself, its file and the options it names are partout-output's ([`partout_output::manifest`]).

use crate::plan::Job;
use partout_exchange::WriterMetrics;
use partout_output as output;
use partout_output::manifest::{
    DestinationEntry, Manifest, RowGroupSizes, ShuffleFiles, WorkerTimings,
};

/// What a run wrote: its workers' metrics, what the output's writer made, and the time
/// ending the files took.
pub(crate) struct Outcome {
    pub(crate) metrics: Vec<WriterMetrics>,
    pub(crate) written: output::Written,
    pub(crate) finish_seconds: f64,
}

/// The manifest of a run of `job` with `destinations` destinations (partitioning by value:
/// the values' buckets met), split at `range_bounds` (range partitioning), that wrote
/// `written`; its workers' timings `workers`.
pub(crate) fn from_run(
    job: &Job,
    destinations: usize,
    range_bounds: Option<Vec<Vec<String>>>,
    written: Outcome,
    workers: Vec<WorkerTimings>,
) -> Manifest {
    let (options, spec) = (job.options(), job.output());
    let n = destinations;
    let metrics = &written.metrics;
    let sum = |f: &dyn Fn(&WriterMetrics) -> u64| metrics.iter().map(f).sum::<u64>();
    let rows = |p: usize| metrics.iter().map(|m| m.destination_rows[p]).sum();
    // Each file's name and row groups are moved, not copied: at 100,000 destinations a copy
    // is megabytes.
    let (files, shuffle_files) = match written.written {
        output::Written::Files(files) => (Some(files), None),
        output::Written::Shuffle(workers) => {
            let workers = workers
                .into_iter()
                .map(|name| ShuffleFiles {
                    data: format!("{name}.data"),
                    index: format!("{name}.index"),
                })
                .collect();
            (None, Some(workers))
        }
    };
    let destinations: Vec<DestinationEntry> = match files {
        Some(files) => files
            .into_iter()
            .take(n)
            .enumerate()
            .map(|(p, files)| DestinationEntry {
                destination: p as u32,
                rows: rows(p),
                bytes: files.iter().map(|f| f.bytes).sum(),
                files: Some(files),
            })
            .collect(),
        None => (0..n)
            .map(|p| DestinationEntry {
                destination: p as u32,
                rows: rows(p),
                bytes: metrics.iter().map(|m| m.destination_bytes[p]).sum(),
                files: None,
            })
            .collect(),
    };
    Manifest {
        scheme: options.scheme,
        keys: options.keys.clone(),
        partition_by: options.partition_by.clone(),
        partitions: n as u32,
        format: spec.format(),
        compression: spec.compression(),
        layout: spec.layout(),
        sort_by: spec.sort_order().clone(),
        file_name: None,
        max_rows_per_file: spec.rollover().max_rows(),
        max_bytes_per_file: spec.rollover().max_bytes(),
        parquet_options: spec.parquet_settings().pairs(),
        threads: job.threads(),
        input_rows: sum(&|m| m.rows_in),
        input_arrow_bytes: sum(&|m| m.bytes_in),
        output_rows: sum(&|m| m.rows_out),
        output_bytes: destinations.iter().map(|d| d.bytes).sum(),
        flushes: sum(&|m| m.flushes),
        memory_flushes: sum(&|m| m.memory_flushes),
        memory_limit: options.memory_limit,
        memory_budget: job.budget(),
        peak_rss_bytes: peak_rss(),
        workers,
        files_finish_seconds: written.finish_seconds,
        row_groups: RowGroupSizes::of_files(&destinations),
        destinations,
        range_bounds,
        shuffle_files,
    }
}

/// The process's peak resident memory, where the system tells it (Linux).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

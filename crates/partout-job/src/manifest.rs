//! The [`Manifest`] of a run: built from what the job wrote (`from_run`). The manifest
//! itself, its file and the options it names are partout-io's ([`partout_io::manifest`]).

use crate::options::JobOptions;
use partout_exchange::WriterMetrics;
use partout_io::DestinationFile;
use partout_io::manifest::{
    Budget, DestinationEntry, FileName, Manifest, RowGroupSizes, ShuffleFiles, WorkerTimings,
};

/// What the workers of one layout wrote: their metrics, each destination's file (files
/// layout) or each worker's shuffle files (shuffle layout), and the time ending the files took.
pub(crate) struct Written {
    pub(crate) metrics: Vec<WriterMetrics>,
    pub(crate) files: Option<Vec<DestinationFile>>,
    pub(crate) shuffle_files: Option<Vec<ShuffleFiles>>,
    pub(crate) finish_seconds: f64,
}

impl Written {
    /// Each destination's file, ended after the workers finished at `finishing`.
    pub(crate) fn files(
        metrics: Vec<WriterMetrics>,
        files: Vec<DestinationFile>,
        finishing: std::time::Instant,
    ) -> Self {
        Self {
            metrics,
            files: Some(files),
            shuffle_files: None,
            finish_seconds: finishing.elapsed().as_secs_f64(),
        }
    }
}

/// The manifest of a run of `options` with `destinations` destinations (partitioning by
/// value: the values' buckets met) on `threads` workers within `budget`, split at
/// `range_bounds` (range partitioning), that wrote `written`; its workers' timings `workers`.
pub(crate) fn from_run(
    options: &JobOptions,
    destinations: usize,
    threads: usize,
    budget: Budget,
    range_bounds: Option<Vec<Vec<String>>>,
    written: Written,
    workers: Vec<WorkerTimings>,
) -> Manifest {
    let n = destinations;
    let metrics = &written.metrics;
    let sum = |f: &dyn Fn(&WriterMetrics) -> u64| metrics.iter().map(f).sum::<u64>();
    let rows = |p: usize| metrics.iter().map(|m| m.destination_rows[p]).sum();
    // Each file's name and row groups are moved, not copied: at 100,000 destinations a copy
    // is megabytes.
    let destinations: Vec<DestinationEntry> = match written.files {
        Some(files) => files
            .into_iter()
            .take(n)
            .enumerate()
            .map(|(p, file)| DestinationEntry {
                destination: p as u32,
                file: file.name.map_or(FileName::None(()), FileName::Name),
                rows: rows(p),
                bytes: file.bytes,
                row_groups: file.row_groups,
            })
            .collect(),
        None => (0..n)
            .map(|p| DestinationEntry {
                destination: p as u32,
                file: FileName::Absent,
                rows: rows(p),
                bytes: metrics.iter().map(|m| m.destination_bytes[p]).sum(),
                row_groups: None,
            })
            .collect(),
    };
    Manifest {
        scheme: options.scheme,
        keys: options.keys.clone(),
        partitions: n as u32,
        format: options.format,
        compression: options.output_compression(),
        layout: options.layout,
        threads,
        input_rows: sum(&|m| m.rows_in),
        input_arrow_bytes: sum(&|m| m.bytes_in),
        output_rows: sum(&|m| m.rows_out),
        output_bytes: destinations.iter().map(|d| d.bytes).sum(),
        flushes: sum(&|m| m.flushes),
        memory_flushes: sum(&|m| m.memory_flushes),
        memory_limit: options.memory_limit,
        memory_budget: budget,
        peak_rss_bytes: peak_rss(),
        workers,
        files_finish_seconds: written.finish_seconds,
        row_groups: RowGroupSizes::of(
            destinations
                .iter()
                .flat_map(|d| d.row_groups.iter().flatten().copied()),
        ),
        destinations,
        range_bounds,
        shuffle_files: written.shuffle_files,
    }
}

/// The process's peak resident memory, where the system tells it (Linux).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

//! [`Manifest`]: what a run wrote, as `_manifest.json` beside its outputs.

use crate::budget::Budget;
use crate::error::{Result, io};
use crate::options::{Compression, Format, JobOptions, Layout, Scheme};
use partout_exchange::WriterMetrics;
use partout_io::DestinationFile;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The manifest's file name in the output directory.
pub const MANIFEST_FILE: &str = "_manifest.json";

/// What a run wrote: its options, row and byte counts, memory, timings, and each
/// destination's output. Serialized as `_manifest.json` in the output directory;
/// [`Manifest::read`] reads it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// How rows found their destination.
    pub scheme: Scheme,
    /// The key columns.
    pub keys: Vec<String>,
    /// Destinations.
    pub partitions: u32,
    /// What each destination's output holds.
    pub format: Format,
    /// Their compression.
    pub compression: Compression,
    /// Files per destination, or shuffle files per worker.
    pub layout: Layout,
    /// Worker threads.
    pub threads: usize,
    /// Rows read.
    pub input_rows: u64,
    /// Bytes of Arrow data partitioned (in memory, as read).
    pub input_arrow_bytes: u64,
    /// Rows written (every row once).
    pub output_rows: u64,
    /// Bytes written, all destinations together (the manifest aside).
    pub output_bytes: u64,
    /// Flushes of destination buffers.
    pub flushes: u64,
    /// Flushes forced by the memory limit.
    pub memory_flushes: u64,
    /// The memory limit, in bytes.
    pub memory_limit: u64,
    /// How the memory limit was shared.
    pub memory_budget: Budget,
    /// The process's peak resident memory, where the system tells it (Linux).
    pub peak_rss_bytes: Option<u64>,
    /// Each worker's timings.
    pub workers: Vec<WorkerTimings>,
    /// Seconds spent ending the destination files (files layout; for Parquet, writing the
    /// files from the staged rows).
    pub files_finish_seconds: f64,
    /// How large the Parquet files' row groups came out (Parquet files; each destination's
    /// are in its entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_groups: Option<RowGroupSizes>,
    /// Each destination's rows and bytes, and its file (files layout).
    pub destinations: Vec<DestinationEntry>,
    /// Range partitioning's split points, each as its key values' text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_bounds: Option<Vec<Vec<String>>>,
    /// Each worker's data and index file (shuffle layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_files: Option<Vec<ShuffleFiles>>,
}

/// One worker's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerTimings {
    /// The worker's index.
    pub worker: usize,
    /// From its start to its writer's end.
    pub seconds: f64,
    /// Computing partition ids.
    pub ids_seconds: f64,
    /// Moving rows into destination buffers.
    pub scatter_seconds: f64,
    /// Encoding and writing flushes.
    pub output_seconds: f64,
}

/// One destination's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DestinationEntry {
    /// The destination.
    pub destination: u32,
    /// Its file's name in the output directory (files layout; `null` for a destination of
    /// Presto pages that received no rows, which gets no file). Absent in the shuffle layout.
    #[serde(default, skip_serializing_if = "FileName::is_absent")]
    pub file: FileName,
    /// Rows it received.
    pub rows: u64,
    /// Bytes it received.
    pub bytes: u64,
    /// Rows of each row group of its file, in order (Parquet files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_groups: Option<Vec<u64>>,
}

/// The row groups of a run's Parquet files, all files together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowGroupSizes {
    /// Row groups in all.
    pub count: u64,
    /// Rows of the smallest.
    pub min_rows: u64,
    /// Rows of the largest.
    pub max_rows: u64,
    /// Rows per row group on average.
    pub mean_rows: f64,
}

impl RowGroupSizes {
    /// The sizes of row groups of `rows` rows each; `None` when there are none.
    pub fn of(rows: impl IntoIterator<Item = u64>) -> Option<Self> {
        let (mut count, mut min_rows, mut max_rows, mut sum) = (0u64, u64::MAX, 0u64, 0u64);
        for r in rows {
            count += 1;
            min_rows = min_rows.min(r);
            max_rows = max_rows.max(r);
            sum += r;
        }
        (count > 0).then(|| Self {
            count,
            min_rows,
            max_rows,
            mean_rows: sum as f64 / count as f64,
        })
    }
}

/// A destination's file: absent (shuffle layout), none (no rows, no file), or its name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FileName {
    /// Not a files layout: the key is left out.
    #[default]
    #[serde(skip)]
    Absent,
    /// Its file's name.
    Name(String),
    /// No file (`null`).
    None(()),
}

impl FileName {
    /// Whether the layout has no files per destination.
    pub fn is_absent(&self) -> bool {
        matches!(self, Self::Absent)
    }

    /// The name, if there is a file.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Name(name) => Some(name),
            _ => None,
        }
    }
}

/// One worker's shuffle files, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleFiles {
    /// The data file.
    pub data: String,
    /// The index of byte ranges.
    pub index: String,
}

impl Manifest {
    /// Reads `_manifest.json` of the output directory `dir`.
    ///
    /// # Errors
    /// [`JobError::Io`](crate::JobError::Io) when it cannot be read or is not a manifest.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let context = || format!("reading {}", path.display());
        let text = std::fs::read_to_string(&path).map_err(io(context()))?;
        serde_json::from_str(&text).map_err(|e| io(context())(std::io::Error::other(e)))
    }

    /// Writes it as `_manifest.json` into the directory `dir`.
    ///
    /// # Errors
    /// [`JobError::Io`](crate::JobError::Io).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(MANIFEST_FILE);
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other);
        text.and_then(|text| std::fs::write(&path, text))
            .map_err(io(format!("writing {}", path.display())))
    }
}

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

impl Manifest {
    /// The manifest of a run of `options` on `threads` workers within `budget`, split at
    /// `range_bounds` (range partitioning), that wrote `written`; its workers' timings
    /// `workers`.
    pub(crate) fn from_run(
        options: &JobOptions,
        threads: usize,
        budget: Budget,
        range_bounds: Option<Vec<Vec<String>>>,
        written: Written,
        workers: Vec<WorkerTimings>,
    ) -> Manifest {
        let n = options.partitions as usize;
        let metrics = &written.metrics;
        let sum = |f: &dyn Fn(&WriterMetrics) -> u64| metrics.iter().map(f).sum::<u64>();
        let destinations: Vec<DestinationEntry> = (0..n)
            .map(|p| {
                let rows = metrics.iter().map(|m| m.destination_rows[p]).sum();
                match &written.files {
                    Some(files) => DestinationEntry {
                        destination: p as u32,
                        file: files[p]
                            .name
                            .clone()
                            .map_or(FileName::None(()), FileName::Name),
                        rows,
                        bytes: files[p].bytes,
                        row_groups: files[p].row_groups.clone(),
                    },
                    None => DestinationEntry {
                        destination: p as u32,
                        file: FileName::Absent,
                        rows,
                        bytes: metrics.iter().map(|m| m.destination_bytes[p]).sum(),
                        row_groups: None,
                    },
                }
            })
            .collect();
        Manifest {
            scheme: options.scheme,
            keys: options.keys.clone(),
            partitions: options.partitions,
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
}

/// The process's peak resident memory, where the system tells it (Linux).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

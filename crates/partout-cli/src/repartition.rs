//! `partout repartition`: input files in, each destination's output out, in parallel.
//!
//! ```text
//!  inputs ─► frames (row groups, batch ranges, whole files) ─► workers pull frames in turn
//!  worker w: its own PartitionedWriter (ids, plan, destination buffers, flush policy)
//!            └─ flush ─► files layout:   the destination's shared file, behind its own lock
//!                        shuffle layout: the worker's own data file + index of byte ranges
//! ```
//!
//! Memory: the writers' buffers share most of `--memory-limit`, after what the open files
//! hold; each flush is encoded and written at once. The output directory is written under a
//! temporary sibling name and renamed into place only when everything succeeded: a failed or
//! interrupted run never leaves output that looks complete.

use anyhow::{Context, Result, anyhow, bail, ensure};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use parquet::basic::{Compression as ParquetCompression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use partout_core::ids::{Partitioning, RangeBounds};
use partout_exchange::{BatchSink, PartitionedWriter, WriterMetrics, WriterOptions};
use partout_format::ipc::Compression;
use partout_io::{DestinationFiles, FileFormat, Frames, ShuffleFile, discover, plan_frames_by};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// How rows find their destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemeArg {
    /// partout's fast hash of the key columns.
    Hash,
    /// Spark's Murmur3 hash, `pmod(hash, n)`: Spark's bucket ids (files named `bucket-…`).
    Spark,
    /// Rows dealt to destinations in turn (no key).
    RoundRobin,
    /// Key ranges, ascending: split points drawn from a sample of the input (the first batch
    /// of up to 64 frames spread over it), recorded in the manifest.
    Range,
}

/// What each destination's output holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Parquet (`.parquet`), row groups as large as the memory limit allows.
    Parquet,
    /// An Arrow IPC stream (`.arrows`).
    Ipc,
    /// Presto SerializedPages, back to back (`.presto`).
    Presto,
}

/// Compression of the outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompressionArg {
    /// None.
    None,
    /// Snappy (Parquet only).
    Snappy,
    /// LZ4 (Parquet: LZ4_RAW pages; IPC: LZ4_FRAME buffers; Presto: raw LZ4 page bodies).
    Lz4,
    /// ZSTD (Parquet and IPC).
    Zstd,
}

/// Where the outputs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LayoutArg {
    /// One file per destination, written by all workers.
    Files,
    /// One data file and an index of byte ranges per worker (IPC or Presto pages).
    Shuffle,
}

/// Options of `partout repartition`.
#[derive(Debug, Clone, clap::Args)]
pub struct RepartitionOptions {
    /// Input files or directories of them (Parquet, Arrow IPC file or stream, CSV).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Key columns, by name, comma-separated (not for round-robin).
    #[arg(long, value_delimiter = ',')]
    pub by: Vec<String>,
    /// Number of destinations.
    #[arg(short = 'n', long = "partitions")]
    pub partitions: u32,
    /// How rows find their destination.
    #[arg(long, value_enum, default_value_t = SchemeArg::Hash)]
    pub scheme: SchemeArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Parquet)]
    pub format: FormatArg,
    /// Output compression.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,
    /// One file per destination, or a data file and an index per worker.
    #[arg(long, value_enum, default_value_t = LayoutArg::Files)]
    pub layout: LayoutArg,
    /// Worker threads (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Memory for buffered rows and open outputs, in bytes or with a unit (64MiB, 1G).
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes)]
    pub memory_limit: u64,
    /// Replace an existing, non-empty output directory.
    #[arg(long)]
    pub overwrite: bool,
    /// No progress bar and no summary on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// The output directory.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
}

impl RepartitionOptions {
    /// `input` by `by` into `partitions` Parquet files under `output`, on `threads` threads,
    /// quietly, replacing what is there; the command line's defaults otherwise.
    pub fn parquet(
        input: PathBuf,
        by: &str,
        partitions: u32,
        threads: u16,
        compression: CompressionArg,
        output: PathBuf,
    ) -> Self {
        Self {
            inputs: vec![input],
            by: vec![by.to_string()],
            partitions,
            scheme: SchemeArg::Hash,
            format: FormatArg::Parquet,
            compression,
            layout: LayoutArg::Files,
            threads: Some(threads),
            memory_limit: 256 << 20,
            overwrite: true,
            quiet: true,
            output,
        }
    }
}

/// `1000`, `64k`, `64KiB`, `256M`, `256MiB`, `1G`, `1GiB` (units of 1024).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (bytes, or a number with K, M or G)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (K, M or G)")),
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The manifest written beside the outputs.
    pub manifest: serde_json::Value,
    /// Rows read.
    pub rows: u64,
    /// Bytes of Arrow data partitioned.
    pub bytes_in: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// Wall time.
    pub seconds: f64,
    /// Worker threads.
    pub threads: usize,
}

/// `partout repartition`: the run, then its summary on stderr.
pub fn run(options: &RepartitionOptions) -> Result<()> {
    let report = repartition(options)?;
    if !options.quiet {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let peak = report.manifest["peak_rss_bytes"]
            .as_u64()
            .map(|b| format!(", peak memory {:.0} MiB", mib(b)))
            .unwrap_or_default();
        eprintln!(
            "partout: {} rows, {:.1} MiB in, {:.1} MiB out, into {} destinations in {}: {:.2} s, {:.1} M rows/s, {} thread{}{peak}",
            report.rows,
            mib(report.bytes_in),
            mib(report.bytes_out),
            options.partitions,
            options.output.display(),
            report.seconds,
            report.rows as f64 / report.seconds / 1e6,
            report.threads,
            if report.threads == 1 { "" } else { "s" },
        );
    }
    Ok(())
}

/// Frames sampled for range bounds.
const SAMPLE_FRAMES: usize = 64;

/// Range bounds for `n` destinations over key columns `keys`, from the first batch of up to
/// [`SAMPLE_FRAMES`] frames spread over the input.
fn sample_bounds(frames: &Frames, keys: &[usize], n: u32) -> Result<RangeBounds> {
    let count = frames.frames.len();
    let picks = count.min(SAMPLE_FRAMES);
    let mut samples = Vec::with_capacity(picks);
    for i in 0..picks {
        let frame = &frames.frames[i * count / picks];
        if let Some(batch) = frame.read(&frames.schema)?.next() {
            samples.push(batch?.project(keys)?);
        }
    }
    let schema = Arc::new(frames.schema.project(keys)?);
    let sample = arrow_select::concat::concat_batches(&schema, &samples)?;
    ensure!(
        sample.num_rows() > 0,
        "range partitioning of an input without rows"
    );
    let options = vec![arrow_schema::SortOptions::default(); keys.len()];
    Ok(RangeBounds::from_sample(&sample, n, options)?)
}

/// The split points of range partitioning, each as its key values' text.
fn describe_bounds(partitioning: &Partitioning) -> Option<serde_json::Value> {
    let splits = &partitioning.bounds()?.splits;
    let options = arrow_cast::display::FormatOptions::default().with_null("null");
    let formatters: Vec<_> = splits
        .columns()
        .iter()
        .map(|c| arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<_, _>>()
        .ok()?;
    let rows: Vec<serde_json::Value> = (0..splits.num_rows())
        .map(|r| {
            json!(
                formatters
                    .iter()
                    .map(|f| f.value(r).to_string())
                    .collect::<Vec<_>>()
            )
        })
        .collect();
    Some(json!(rows))
}

/// The partitioning the options ask for, with the key columns' names checked.
fn partitioning(options: &RepartitionOptions, frames: &Frames) -> Result<Partitioning> {
    let schema = &frames.schema;
    let keys: Vec<usize> = options
        .by
        .iter()
        .map(|name| {
            schema.index_of(name).map_err(|_| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                anyhow!(
                    "no key column {name:?} in the input (columns: {})",
                    names.join(", ")
                )
            })
        })
        .collect::<Result<_>>()?;
    let n = options.partitions;
    Ok(match options.scheme {
        SchemeArg::RoundRobin => {
            ensure!(keys.is_empty(), "round-robin takes no --by keys");
            Partitioning::round_robin(n)
        }
        scheme => {
            ensure!(
                !keys.is_empty(),
                "--by names the key columns of the {} scheme",
                format!("{scheme:?}").to_lowercase()
            );
            match scheme {
                SchemeArg::Hash => Partitioning::hash(keys, n),
                SchemeArg::Spark => Partitioning::spark(keys, n),
                _ => {
                    let bounds = sample_bounds(frames, &keys, n).with_context(|| {
                        format!("sampling range bounds of {}", options.by.join(","))
                    })?;
                    Partitioning::range(keys, bounds)
                }
            }
        }
    })
}

/// The output format the options ask for.
fn file_format(options: &RepartitionOptions, budget: Budget) -> Result<FileFormat> {
    use CompressionArg as C;
    Ok(match (options.format, options.compression) {
        (FormatArg::Parquet, compression) => {
            let codec = match compression {
                C::None => ParquetCompression::UNCOMPRESSED,
                C::Snappy => ParquetCompression::SNAPPY,
                C::Lz4 => ParquetCompression::LZ4_RAW,
                C::Zstd => ParquetCompression::ZSTD(ZstdLevel::default()),
            };
            let row_group_bytes = parquet_row_group_bytes(options, budget);
            // Dictionaries pay off in large row groups only, and their tables cost memory the
            // writer's estimate leaves out.
            let properties = WriterProperties::builder()
                .set_compression(codec)
                .set_dictionary_enabled(row_group_bytes >= 1 << 20)
                .build();
            FileFormat::Parquet {
                properties: Box::new(properties),
                row_group_bytes,
            }
        }
        (FormatArg::Ipc, C::None) => FileFormat::Ipc(Compression::None),
        (FormatArg::Ipc, C::Lz4) => FileFormat::Ipc(Compression::Lz4Frame),
        (FormatArg::Ipc, C::Zstd) => FileFormat::Ipc(Compression::Zstd),
        (FormatArg::Presto, C::None) => FileFormat::Presto { lz4: false },
        (FormatArg::Presto, C::Lz4) => FileFormat::Presto { lz4: true },
        (format, compression) => bail!(
            "{} output takes no {} compression",
            format!("{format:?}").to_lowercase(),
            format!("{compression:?}").to_lowercase()
        ),
    })
}

/// Bytes each destination costs each worker whatever its rows: its buffers' bookkeeping, its
/// stream encoder (measured: about 2 KiB with two workers, 10,000 destinations).
const DESTINATION_BYTES: u64 = 2 << 10;

/// Bytes an open Parquet destination file holds outside its row group: a buffered writer and
/// the metadata of the row groups written.
const PARQUET_FILE_BYTES: u64 = 24 << 10;

/// The least memory a Parquet destination's open row group is given: smaller row groups make
/// files of mostly metadata, and metadata that the writer holds until the end.
const MIN_ROW_GROUP_BYTES: u64 = 64 << 10;

/// A Parquet writer's memory over its own estimate of its open row group (encoder buffers'
/// spare capacity, the copy made while a row group is written out).
const ROW_GROUP_OVERHEAD: u64 = 3;

/// How the memory limit is shared.
#[derive(Debug, Clone, Copy)]
struct Budget {
    /// What destinations cost whatever their rows.
    fixed: u64,
    /// Open Parquet row groups, all destinations together (zero for other formats).
    row_groups: u64,
    /// Each worker's buffered rows.
    per_worker: u64,
}

/// Shares `--memory-limit`: first what destinations cost whatever their rows; for Parquet
/// files, half of the rest for open row groups (rows are encoded as they are flushed, and a
/// row group is written when it holds its share); of what is left, three fifths for the
/// workers' buffered rows, the rest for flushes being encoded and the allocator's slack.
fn budget(options: &RepartitionOptions, threads: usize) -> Result<Budget> {
    let n = u64::from(options.partitions);
    let workers = threads as u64;
    let parquet_files = options.layout == LayoutArg::Files && options.format == FormatArg::Parquet;
    let fixed = n * workers * DESTINATION_BYTES
        + if parquet_files {
            n * PARQUET_FILE_BYTES
        } else {
            0
        };
    let least_row_groups = if parquet_files {
        n * MIN_ROW_GROUP_BYTES * ROW_GROUP_OVERHEAD
    } else {
        0
    };
    let minimum = fixed + least_row_groups + workers * (256 << 10);
    ensure!(
        options.memory_limit >= minimum,
        "--memory-limit {} is too small for {n} destinations and {threads} threads: it takes at least {minimum} bytes{}",
        options.memory_limit,
        if parquet_files {
            " (Parquet files need room for a row group each; the shuffle layout does not)"
        } else {
            ""
        }
    );
    let rest = options.memory_limit - fixed;
    let row_groups = if parquet_files {
        (rest / 2).max(least_row_groups)
    } else {
        0
    };
    let per_worker = (rest - row_groups) * 3 / 5 / workers;
    Ok(Budget {
        fixed,
        row_groups,
        per_worker,
    })
}

/// Memory each Parquet destination's open row group may hold, by the writer's own estimate
/// (at most 128 MiB).
fn parquet_row_group_bytes(options: &RepartitionOptions, budget: Budget) -> usize {
    let n = u64::from(options.partitions);
    (budget.row_groups / n / ROW_GROUP_OVERHEAD).clamp(MIN_ROW_GROUP_BYTES, 128 << 20) as usize
}

/// The writers' options: each worker's share of the budget.
fn writer_options(budget: Budget) -> WriterOptions {
    let per_worker = budget.per_worker as usize;
    WriterOptions::default()
        .with_memory_limit(per_worker)
        .with_target_bytes((1 << 20).min(per_worker))
}

/// The shared state of one run's workers.
struct Job<'a> {
    frames: &'a Frames,
    partitioning: Partitioning,
    writer: WriterOptions,
    next: AtomicUsize,
    stop: AtomicBool,
    progress: ProgressBar,
    bytes_read: Arc<AtomicU64>,
    /// Each worker's time from its start to its writer's end, and its ids/scatter/output time.
    timings: std::sync::Mutex<Vec<serde_json::Value>>,
}

impl Job<'_> {
    /// One worker: frames pulled in turn until none is left (or another worker failed), rows
    /// through its own writer into `output`.
    fn work<O: BatchSink>(&self, worker: usize, output: O) -> Result<WriterMetrics> {
        let started = Instant::now();
        let schema = self.frames.schema.clone();
        let options = self.writer.clone().with_seed(worker as u64);
        let mut writer = PartitionedWriter::with_output(
            schema.clone(),
            self.partitioning.clone(),
            options,
            output,
        )?;
        while !self.stop.load(Ordering::Relaxed) {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(frame) = self.frames.frames.get(i) else {
                break;
            };
            for batch in frame.read(&schema)? {
                let batch = batch?;
                writer.append(&batch)?;
                self.bytes_read
                    .fetch_add(batch.get_array_memory_size() as u64, Ordering::Relaxed);
                self.progress.inc(batch.num_rows() as u64);
                if self.stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        if self.stop.load(Ordering::Relaxed) {
            return Err(Stopped.into());
        }
        let metrics = writer.finish_output()?.1;
        let timing = json!({
            "worker": worker,
            "seconds": started.elapsed().as_secs_f64(),
            "ids_seconds": metrics.ids_time.as_secs_f64(),
            "scatter_seconds": metrics.scatter_time.as_secs_f64(),
            "output_seconds": (metrics.encode_time + metrics.sink_time).as_secs_f64(),
        });
        if let Ok(mut timings) = self.timings.lock() {
            timings.push(timing);
        }
        Ok(metrics)
    }

    /// Runs a worker, stopping the others when it fails. A panic (a bug, or a library
    /// meeting input it did not expect) becomes this worker's error, not the process's end.
    fn guard(&self, work: impl FnOnce() -> Result<WriterMetrics>) -> Result<WriterMetrics> {
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("no message");
                Err(anyhow!("a worker failed unexpectedly: {what}"))
            });
        if result.is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
        result
    }
}

/// A worker stopped because another failed: the echo, not the cause, of a failed run.
#[derive(Debug)]
struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped: another worker failed")
    }
}

impl std::error::Error for Stopped {}

/// The error that explains a failed run: the first that is not another worker's echo.
fn first_error(results: Vec<Result<WriterMetrics>>) -> Result<Vec<WriterMetrics>> {
    let (ok, errors): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    if errors.is_empty() {
        return Ok(ok.into_iter().map(|r| r.expect("ok")).collect());
    }
    let mut errors: Vec<anyhow::Error> = errors.into_iter().map(|r| r.unwrap_err()).collect();
    let i = errors.iter().position(|e| !e.is::<Stopped>()).unwrap_or(0);
    Err(errors.swap_remove(i))
}

/// Repartitions the inputs as `options` say, into `options.output`.
pub fn repartition(options: &RepartitionOptions) -> Result<Report> {
    let started = Instant::now();
    ensure!(
        (1..=partout_core::plan::MAX_PARTITIONS).contains(&options.partitions),
        "the partition count must be between 1 and {}, got {}",
        partout_core::plan::MAX_PARTITIONS,
        options.partitions
    );
    let out = &options.output;
    let non_empty = out.is_dir()
        && std::fs::read_dir(out)
            .with_context(|| format!("reading {}", out.display()))?
            .next()
            .is_some();
    ensure!(
        !non_empty || options.overwrite,
        "{} exists and is not empty (use --overwrite to replace it)",
        out.display()
    );
    ensure!(
        !out.exists() || out.is_dir(),
        "{} exists and is not a directory",
        out.display()
    );
    let threads = match options.threads {
        Some(t) => usize::from(t),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let budget = budget(options, threads)?;
    let writer = writer_options(budget);
    let format = file_format(options, budget)?;
    ensure!(
        !(options.layout == LayoutArg::Shuffle && options.format == FormatArg::Parquet),
        "the shuffle layout writes ipc or presto, not parquet (its files cannot be cut into byte ranges)"
    );

    // Frames: about sixteen per worker, of 64K rows at least: the workers' last frames end
    // within a small frame of each other, and frames do not shrink to nothing.
    let files = inputs_outside(discover(&options.inputs)?, out)?;
    let frames = plan_frames_by(&files, |rows| {
        rows.map_or(1 << 20, |rows| {
            (rows as usize / (threads * 16)).max(64 << 10)
        })
    })?;
    let partitioning = partitioning(options, &frames)?;
    // The key columns and the output format checked before anything is written.
    PartitionedWriter::with_output(
        frames.schema.clone(),
        partitioning.clone(),
        writer.clone(),
        NoOutput,
    )
    .with_context(|| format!("partitioning by {}", options.by.join(",")))?;

    let bytes_read = Arc::new(AtomicU64::new(0));
    let progress = if options.quiet {
        ProgressBar::hidden()
    } else {
        // Drawn only when stderr is a terminal.
        let bar = ProgressBar::with_draw_target(frames.rows(), ProgressDrawTarget::stderr());
        let template = if frames.rows().is_some() {
            "{elapsed_precise} [{bar:30}] {human_pos}/{human_len} rows, {data}, {rate}, ETA {eta}"
        } else {
            "{elapsed_precise} {spinner} {human_pos} rows, {data}, {rate}"
        };
        let bytes = bytes_read.clone();
        let style = ProgressStyle::with_template(template)
            .expect("a valid template")
            .progress_chars("=> ")
            .with_key(
                "rate",
                |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.1} M rows/s", state.per_sec() / 1e6);
                },
            )
            .with_key(
                "data",
                move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let mib = bytes.load(Ordering::Relaxed) as f64 / (1 << 20) as f64;
                    let _ = write!(w, "{mib:.0} MiB");
                },
            );
        bar.set_style(style);
        bar
    };

    let staging = staging_dir(out)?;
    let result = write_all(
        budget,
        options,
        &frames,
        partitioning,
        writer,
        format,
        threads,
        (progress.clone(), bytes_read),
        &staging,
    );
    progress.finish_and_clear();
    let manifest = match result {
        Ok(manifest) => manifest,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("replacing {}", out.display()))?;
    }
    std::fs::rename(&staging, out)
        .with_context(|| format!("moving the output into {}", out.display()))?;
    let number = |key: &str| manifest[key].as_u64().unwrap_or(0);
    Ok(Report {
        rows: number("input_rows"),
        bytes_in: number("input_arrow_bytes"),
        bytes_out: number("output_bytes"),
        seconds: started.elapsed().as_secs_f64(),
        threads,
        manifest,
    })
}

/// The input files but those under the output directory (an earlier run's output, when the
/// output directory lies in an input directory: it is about to be replaced, and reading it
/// would duplicate rows).
fn inputs_outside(
    files: Vec<partout_io::InputFile>,
    out: &Path,
) -> Result<Vec<partout_io::InputFile>> {
    let Ok(out) = out.canonicalize() else {
        return Ok(files);
    };
    let kept: Vec<_> = files
        .into_iter()
        .filter(|f| !f.path.canonicalize().is_ok_and(|p| p.starts_with(&out)))
        .collect();
    ensure!(
        !kept.is_empty(),
        "every input file is inside the output directory {}",
        out.display()
    );
    Ok(kept)
}

/// An output that takes nothing: for checking a writer's options before the run.
struct NoOutput;

impl BatchSink for NoOutput {
    fn write_batch(
        &mut self,
        _: usize,
        _: &arrow_array::RecordBatch,
    ) -> partout_exchange::Result<u64> {
        Ok(0)
    }

    fn finish(&mut self, _: &mut [u64]) -> partout_exchange::Result<()> {
        Ok(())
    }
}

/// Runs the workers into `staging` and writes the manifest.
#[allow(clippy::too_many_arguments)]
fn write_all(
    budget: Budget,
    options: &RepartitionOptions,
    frames: &Frames,
    partitioning: Partitioning,
    writer: WriterOptions,
    format: FileFormat,
    threads: usize,
    (progress, bytes_read): (ProgressBar, Arc<AtomicU64>),
    staging: &Path,
) -> Result<serde_json::Value> {
    let n = options.partitions as usize;
    let job = Job {
        frames,
        partitioning,
        writer,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        progress,
        bytes_read,
        timings: std::sync::Mutex::new(Vec::new()),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("partout-worker-{i}"))
        .build()?;
    let schema = &frames.schema;
    let prefix = if options.scheme == SchemeArg::Spark {
        "bucket"
    } else {
        "part"
    };
    let mut finish_seconds = 0.0;
    let (metrics, files, shuffle) = match options.layout {
        LayoutArg::Files => {
            let files = DestinationFiles::try_new(staging, prefix, schema.clone(), n, format)?;
            let results = pool.broadcast(|ctx| job.guard(|| job.work(ctx.index(), files.handle())));
            let metrics = first_error(results)?;
            let finishing = Instant::now();
            let files = files.finish(threads)?;
            finish_seconds = finishing.elapsed().as_secs_f64();
            (metrics, Some(files), None)
        }
        LayoutArg::Shuffle => {
            let results = pool.broadcast(|ctx| {
                let name = format!("shuffle-{:03}", ctx.index());
                job.guard(|| {
                    let output = ShuffleFile::try_new(staging, &name, schema.clone(), n, &format)?;
                    job.work(ctx.index(), output)
                })
            });
            let metrics = first_error(results)?;
            let workers: Vec<serde_json::Value> = (0..threads)
                .map(|w| json!({"data": format!("shuffle-{w:03}.data"), "index": format!("shuffle-{w:03}.index")}))
                .collect();
            (metrics, None, Some(workers))
        }
    };
    let sum = |f: &dyn Fn(&WriterMetrics) -> u64| metrics.iter().map(f).sum::<u64>();
    let destination_rows: Vec<u64> = (0..n)
        .map(|p| metrics.iter().map(|m| m.destination_rows[p]).sum())
        .collect();
    let destinations: Vec<serde_json::Value> = (0..n)
        .map(|p| match &files {
            Some(files) => json!({
                "destination": p,
                "file": files[p].name,
                "rows": destination_rows[p],
                "bytes": files[p].bytes,
            }),
            None => json!({
                "destination": p,
                "rows": destination_rows[p],
                "bytes": metrics.iter().map(|m| m.destination_bytes[p]).sum::<u64>(),
            }),
        })
        .collect();
    let output_bytes: u64 = destinations
        .iter()
        .map(|d| d["bytes"].as_u64().unwrap_or(0))
        .sum();
    let mut manifest = json!({
        "scheme": format!("{:?}", options.scheme).to_lowercase(),
        "keys": options.by,
        "partitions": n,
        "format": format!("{:?}", options.format).to_lowercase(),
        "compression": format!("{:?}", options.compression).to_lowercase(),
        "layout": format!("{:?}", options.layout).to_lowercase(),
        "threads": threads,
        "input_rows": sum(&|m| m.rows_in),
        "input_arrow_bytes": sum(&|m| m.bytes_in),
        "output_rows": sum(&|m| m.rows_out),
        "output_bytes": output_bytes,
        "flushes": sum(&|m| m.flushes),
        "memory_flushes": sum(&|m| m.memory_flushes),
        "memory_limit": options.memory_limit,
        "memory_budget": {
            "destinations_fixed": budget.fixed,
            "parquet_row_groups": budget.row_groups,
            "per_worker_buffers": budget.per_worker,
        },
        "peak_rss_bytes": peak_rss(),
        "workers": job.timings.lock().map(|t| json!(*t)).unwrap_or_default(),
        "files_finish_seconds": finish_seconds,
        "destinations": destinations,
    });
    if let Some(bounds) = describe_bounds(&job.partitioning) {
        manifest["range_bounds"] = bounds;
    }
    if let Some(workers) = shuffle {
        manifest["shuffle_files"] = json!(workers);
    }
    std::fs::write(
        staging.join("_manifest.json"),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    Ok(manifest)
}

/// The process's peak resident memory, where the system tells it (Linux).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

/// A fresh temporary directory next to `out` (same file system, so the final rename is
/// atomic), named `.NAME.partout-PID`. Those of earlier runs whose process is gone (killed
/// mid-run) are removed.
fn staging_dir(out: &Path) -> Result<PathBuf> {
    let name = out
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty() && *n != "." && *n != "..");
    let Some(name) = name else {
        bail!("the output must name a directory, got {}", out.display());
    };
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let stale = format!(".{name}.partout-");
    if let Ok(entries) = std::fs::read_dir(parent) {
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let pid = file_name
                .to_str()
                .and_then(|n| n.strip_prefix(&stale))
                .and_then(|pid| pid.parse::<u32>().ok());
            if let Some(pid) = pid {
                let alive = Path::new("/proc").join(pid.to_string()).exists();
                if !alive && Path::new("/proc/self").exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
    let staging = parent.join(format!("{stale}{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    std::fs::create_dir(&staging).with_context(|| format!("creating {}", staging.display()))?;
    Ok(staging)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("64k"), Ok(64 << 10));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert!(parse_bytes("12 parsecs").unwrap_err().contains("unit"));
        assert!(parse_bytes("lots").is_err());
        assert!(
            parse_bytes("99999999999G")
                .unwrap_err()
                .contains("too large")
        );
    }
}

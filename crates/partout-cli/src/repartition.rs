//! `partout repartition`: the command line's arguments, turned once into
//! [`partout_job::JobOptions`]; a progress bar; the summary line.

use anyhow::Result;
use clap::builder::TypedValueParser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use partout_job::{
    Compression, FileNamePattern, Format, Job, JobError, JobOptions, Layout, ParquetSettings,
    Progress, Rollover, Scheme, SortOrder, StorageOption, WriteMode,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

/// The names of the output's format and layout, read by the library's one vocabulary
/// (`partout_format::Format`, `partout_output::Layout`), listed for `--help`.
fn names<T, E>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = E> + Clone + Send + Sync + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    clap::builder::PossibleValuesParser::new(names).try_map(|name| name.parse::<T>())
}

/// Arguments of `partout repartition`.
#[derive(Debug, Clone, clap::Args)]
pub struct RepartitionArgs {
    /// Input files or directories of them (Parquet, Arrow IPC file or stream, CSV).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Key columns, by name, comma-separated (not for round-robin).
    #[arg(long, value_delimiter = ',')]
    pub by: Vec<String>,
    /// Number of destinations; with --partition-by, buckets per value (by the --by columns;
    /// default 1).
    #[arg(
        short = 'n',
        long = "partitions",
        required_unless_present = "partition_by"
    )]
    pub partitions: Option<u32>,
    /// Partition by value: a directory per distinct value of these columns, comma-separated,
    /// in the Hive layout (`OUT/col=value/part-00000.parquet`, or `.arrow` with --format
    /// ipc); nulls in `col=__HIVE_DEFAULT_PARTITION__`.
    #[arg(long, value_delimiter = ',')]
    pub partition_by: Vec<String>,
    /// Most distinct values --partition-by takes: past it the job fails and writes nothing.
    #[arg(long, default_value_t = partout_job::DEFAULT_MAX_PARTITIONS)]
    pub max_partitions: u32,
    /// Keep the --partition-by columns in the files (by default their values are only in the
    /// directory names).
    #[arg(long)]
    pub keep_partition_columns: bool,
    /// How rows find their destination.
    #[arg(long, value_enum, default_value_t = SchemeArg::Hash)]
    pub scheme: SchemeArg,
    /// Output format: parquet (`.parquet`: written as flushed while every file's writer fits
    /// the memory limit, else rows staged and each file written whole; row groups of up to
    /// 1Mi rows either way, as the memory limit allows), ipc (an Arrow IPC
    /// stream, `.arrows`; an IPC file, `.arrow`, with --partition-by), presto (Presto
    /// SerializedPages back to back, `.presto`).
    #[arg(long, default_value = "parquet", value_parser = names::<Format, _>(&["parquet", "ipc", "presto"]))]
    pub format: Format,
    /// Output compression: none, snappy (Parquet), lz4, zstd (level 3) or zstd:LEVEL (Parquet:
    /// 1 to 22; IPC: negative levels too) [default: snappy for parquet, none for ipc and
    /// presto].
    #[arg(long, value_parser = clap::builder::ValueParser::new(str::parse::<Compression>))]
    pub compression: Option<Compression>,
    /// files: one file per destination, written by all workers; shuffle: one data file and an
    /// index of byte ranges per worker (ipc or presto).
    #[arg(long, default_value = "files", value_parser = names::<Layout, _>(&["files", "shuffle"]))]
    pub layout: Layout,
    /// Worker threads (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Memory for buffered rows and open outputs, in bytes or with a unit (64MiB, 1G).
    #[arg(long, default_value = "256MiB", value_parser = partout_job::parse_bytes)]
    pub memory_limit: u64,
    /// Replace an existing, non-empty output (the same as --mode overwrite).
    #[arg(long, conflicts_with = "mode")]
    pub overwrite: bool,
    /// What becomes of an output already there: error (refused), overwrite (replaced once
    /// the run has committed), append (the run's files added beside those of the partout
    /// output there, the manifests merged), overwrite-partitions (with --partition-by: the
    /// value directories the run writes replace the old ones, the others are kept).
    #[arg(long, value_name = "MODE", default_value = "error")]
    pub mode: WriteMode,
    /// No progress bar and no summary on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// The output: a directory, or an object store's prefix (s3://bucket/prefix, gs://…,
    /// az://…, abfss://…), its client configured by the environment (AWS_ACCESS_KEY_ID,
    /// AWS_REGION, AWS_ENDPOINT_URL, GOOGLE_*, AZURE_*, …) and --storage-option.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// An option of the output's object store client, KEY=VALUE by object_store's key names
    /// (aws_endpoint, aws_region, aws_allow_http, aws_access_key_id, …); repeatable.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_options: Vec<StorageOption>,
    /// Most rows a file holds: a destination's rows past it go on in its next file
    /// (part-00003-00001.parquet), for every layout that writes a file per destination.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_rows_per_file: Option<u64>,
    /// About the most bytes a file holds (64MiB, 1G): a file ends at the first row group
    /// (or flushed batch) that takes it past this size, and its destination goes on in the
    /// next file.
    #[arg(long, value_name = "SIZE", value_parser = partout_job::parse_bytes)]
    pub max_bytes_per_file: Option<u64>,
    /// The order of rows within each file: COL [ASC|DESC] [NULLS FIRST|NULLS LAST], comma
    /// separated (default ascending, nulls last). Sorted within --memory-limit, spilling sorted
    /// runs; Parquet and Arrow IPC files (IPC output is then written as IPC files, .arrow).
    #[arg(long, value_name = "COL [ASC|DESC],…", value_parser = sort_order)]
    pub sort_by: Option<SortOrder>,
    /// Each file's name, from a pattern: {dest} (the destination, or its bucket in a Hive
    /// directory), {part} (its number among the destination's files), {uuid} (random, one a
    /// file), {run} (the run's id); the extension is added. Refused when two files could share
    /// a name.
    #[arg(long, value_name = "PATTERN", value_parser = file_name)]
    pub file_name: Option<FileNamePattern>,
    /// Most rows a Parquet row group holds (default 1Mi; the memory limit may end one sooner).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub row_group_rows: Option<u64>,
    /// A setting of the Parquet writer, KEY=VALUE; repeatable: row_group_rows=N,
    /// data_page_size=SIZE, dictionary=true|false, dictionary.COL=true|false,
    /// statistics=none|chunk|page, statistics.COL=…, bloom_filter=COL[,COL…],
    /// bloom_filter_fpp=P, bloom_filter_ndv=N, writer_version=1.0|2.0.
    #[arg(long = "parquet-option", value_name = "KEY=VALUE", value_parser = parquet_option)]
    pub parquet_options: Vec<(String, String)>,
    /// Record each file's column statistics (min, max, nulls) in the manifest: read from the
    /// footers of Parquet files, computed as Arrow IPC files are written (IPC output is then
    /// written whole as IPC files, .arrow): memory by the file, outside --memory-limit.
    #[arg(long)]
    pub file_statistics: bool,
}

/// A `--file-name`, read alone (checked against the run's layout by the job).
fn file_name(text: &str) -> Result<FileNamePattern, String> {
    text.parse()
}

/// A `--sort-by`, read alone (its columns are checked against the input by the job).
fn sort_order(text: &str) -> Result<SortOrder, String> {
    text.parse()
}

/// A `--parquet-option`, checked alone: `KEY=VALUE` with a key and value the writer takes.
fn parquet_option(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))?;
    ParquetSettings::default()
        .set(key.trim(), value)
        .map_err(|e| e.to_string())?;
    Ok((key.trim().to_string(), value.to_string()))
}

impl RepartitionArgs {
    /// The job's options: the one place where arguments become the library's values.
    ///
    /// # Errors
    /// [`JobError::InvalidOption`] for Parquet options the writer does not take.
    pub fn to_options(&self) -> partout_job::Result<JobOptions> {
        let rows = self
            .row_group_rows
            .map(|n| ("row_group_rows".into(), n.to_string()));
        let parquet = ParquetSettings::parse(self.parquet_options.iter().cloned().chain(rows))?
            .with_file_statistics(self.file_statistics);
        let rollover = Rollover::new(self.max_rows_per_file, self.max_bytes_per_file)?;
        Ok(JobOptions {
            inputs: self.inputs.clone(),
            keys: self.by.clone(),
            partitions: self.partitions.unwrap_or(1),
            scheme: match self.scheme {
                SchemeArg::Hash => Scheme::Hash,
                SchemeArg::Spark => Scheme::Spark,
                SchemeArg::RoundRobin => Scheme::RoundRobin,
                SchemeArg::Range => Scheme::Range,
            },
            format: self.format,
            compression: self.compression,
            layout: self.layout,
            threads: self.threads.map(usize::from),
            memory_limit: self.memory_limit,
            mode: match self.overwrite {
                true => WriteMode::Overwrite,
                false => self.mode,
            },
            partition_by: self.partition_by.clone(),
            max_partitions: self.max_partitions,
            keep_partition_columns: self.keep_partition_columns,
            output: self.output.clone(),
            storage_options: self.storage_options.iter().cloned().collect(),
            parquet,
            rollover,
            sort_by: self.sort_by.clone().unwrap_or_default(),
            file_name: self.file_name.clone(),
        })
    }
}

/// Set by the first Ctrl-C (or SIGTERM, SIGHUP): the run stops and undoes what it wrote.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The run was interrupted, and left nothing: exit code 130, as a shell reports SIGINT.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted: nothing was written")
    }
}

impl std::error::Error for Interrupted {}

/// The first signal asks the run to stop (it then aborts its uploads and removes what it
/// wrote); a second one ends the process at once.
fn on_interrupt() {
    // (Refused only where another handler is installed: the run is then not cancellable.)
    let _ = ctrlc::set_handler(|| {
        if quit_at_once(&INTERRUPTED) {
            std::process::exit(130);
        }
        eprintln!("partout: interrupted, undoing what was written (again to quit at once)");
    });
}

/// A signal's decision, `interrupted` holding whether one came before: the first asks the run
/// to stop and undo (`false`), every later one quits at once (`true`).
fn quit_at_once(interrupted: &AtomicBool) -> bool {
    interrupted.swap(true, Ordering::SeqCst)
}

/// `partout repartition`: the run, then its summary on stderr.
pub fn run(args: &RepartitionArgs) -> Result<()> {
    on_interrupt();
    let job = args
        .to_options()
        .and_then(Job::try_new)
        .map_err(with_flags)?;
    let bar = Bar::new(args.quiet, job.input_rows());
    let result = job.run(&bar);
    bar.bar.finish_and_clear();
    let report = match result {
        Err(JobError::Cancelled) if INTERRUPTED.load(Ordering::SeqCst) => {
            return Err(Interrupted.into());
        }
        result => result.map_err(with_flags)?,
    };
    if !args.quiet {
        let manifest = &report.manifest;
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let peak = manifest
            .peak_rss_bytes
            .map(|b| format!(", peak memory {:.0} MiB", mib(b)))
            .unwrap_or_default();
        eprintln!(
            "partout: {} rows, {:.1} MiB in, {:.1} MiB out, into {} destinations in {}: {:.2} s, {:.1} M rows/s, {} thread{}{peak}",
            manifest.input_rows,
            mib(manifest.input_arrow_bytes),
            mib(manifest.output_bytes),
            manifest.partitions,
            args.output.display(),
            report.seconds,
            manifest.input_rows as f64 / report.seconds / 1e6,
            manifest.threads,
            if manifest.threads == 1 { "" } else { "s" },
        );
    }
    Ok(())
}

/// The job's error, with the command line's flag where the library names an option.
fn with_flags(e: JobError) -> anyhow::Error {
    match e {
        JobError::OutputNotEmpty(path) => anyhow::anyhow!(
            "{} exists and is not empty (use --overwrite to replace it, --mode append to add to it)",
            path.display()
        ),
        e => e.into(),
    }
}

/// The progress bar, drawn only when stderr is a terminal and not `--quiet`.
struct Bar {
    bar: ProgressBar,
    bytes: Arc<AtomicU64>,
}

impl Bar {
    fn new(quiet: bool, rows: Option<u64>) -> Self {
        let bytes = Arc::new(AtomicU64::new(0));
        if quiet {
            return Self {
                bar: ProgressBar::hidden(),
                bytes,
            };
        }
        let bar = ProgressBar::with_draw_target(rows, ProgressDrawTarget::stderr());
        let template = if rows.is_some() {
            "{elapsed_precise} [{bar:30}] {human_pos}/{human_len} rows, {data}, {rate}, ETA {eta}"
        } else {
            "{elapsed_precise} {spinner} {human_pos} rows, {data}, {rate}"
        };
        let read = bytes.clone();
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
                    let mib = read.load(Ordering::Relaxed) as f64 / (1 << 20) as f64;
                    let _ = write!(w, "{mib:.0} MiB");
                },
            );
        bar.set_style(style);
        Self { bar, bytes }
    }
}

impl Progress for Bar {
    fn advance(&self, rows: u64, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.bar.inc(rows);
    }

    fn cancelled(&self) -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_undoes_and_every_later_one_quits_at_once() {
        let interrupted = AtomicBool::new(false);
        assert!(!quit_at_once(&interrupted), "the first signal quit");
        assert!(
            interrupted.load(Ordering::SeqCst),
            "the run was not asked to stop"
        );
        assert!(quit_at_once(&interrupted) && quit_at_once(&interrupted));
    }
}

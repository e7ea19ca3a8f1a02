//! `partout repartition`: input files in, one output file per destination out.
//!
//! The output directory is written under a temporary sibling name and renamed into place only
//! when everything succeeded: a failed or interrupted run never leaves output that looks
//! complete.

use anyhow::{Context, Result, bail, ensure};
use partout_core::ids::Partitioning;
use partout_exchange::{FileSink, OutputFormat, PartitionedWriter, WriterOptions};
use partout_format::ipc::Compression;
use partout_io::{InputReader, discover};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How rows find their destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemeArg {
    /// partout's fast hash of the key columns.
    Hash,
    /// Spark's Murmur3 hash, `pmod(hash, n)`: Spark's bucket ids.
    Spark,
    /// Rows dealt to destinations in turn (no key).
    RoundRobin,
}

/// What each destination's file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// An Arrow IPC stream (`.arrows`).
    Ipc,
    /// Presto SerializedPages, back to back (`.presto`).
    Presto,
}

/// Body compression of the outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompressionArg {
    /// None.
    None,
    /// LZ4 (IPC: LZ4_FRAME buffers; Presto: raw LZ4 page bodies).
    Lz4,
    /// ZSTD (IPC only).
    Zstd,
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
    #[arg(long, value_enum, default_value_t = FormatArg::Ipc)]
    pub format: FormatArg,
    /// Output compression.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,
    /// Bytes of buffered rows the writer may hold.
    #[arg(long, default_value_t = 256 << 20)]
    pub memory_limit: usize,
    /// Replace an existing, non-empty output directory.
    #[arg(long)]
    pub overwrite: bool,
    /// No summary on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// The output directory.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
}

/// `partout repartition`.
pub fn run(options: &RepartitionOptions) -> Result<()> {
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

    let files = discover(&options.inputs)?;
    let mut reader = InputReader::try_new(files)?;
    let schema = reader.schema().clone();
    let keys: Vec<usize> = options
        .by
        .iter()
        .map(|name| {
            schema.index_of(name).map_err(|_| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                anyhow::anyhow!(
                    "no key column {name:?} in the input (columns: {})",
                    names.join(", ")
                )
            })
        })
        .collect::<Result<_>>()?;
    let n = options.partitions;
    let partitioning = match options.scheme {
        SchemeArg::RoundRobin => {
            ensure!(keys.is_empty(), "round-robin takes no --by keys");
            Partitioning::round_robin(n)
        }
        scheme => {
            ensure!(
                !keys.is_empty(),
                "--by names the key columns of the {scheme:?} scheme"
            );
            if scheme == SchemeArg::Hash {
                Partitioning::hash(keys.clone(), n)
            } else {
                Partitioning::spark(keys.clone(), n)
            }
        }
    };
    let (format, extension) = match options.format {
        FormatArg::Ipc => (OutputFormat::ArrowIpc, "arrows"),
        FormatArg::Presto => (OutputFormat::Presto, "presto"),
    };
    let compression = match options.compression {
        CompressionArg::None => Compression::None,
        CompressionArg::Lz4 => Compression::Lz4Frame,
        CompressionArg::Zstd => Compression::Zstd,
    };
    let writer_options = WriterOptions::default()
        .with_format(format)
        .with_compression(compression)
        .with_memory_limit(options.memory_limit)
        .with_target_bytes((1 << 20).min(options.memory_limit));

    // Everything goes into a temporary sibling first.
    let staging = staging_dir(out)?;
    let result = (|| -> Result<serde_json::Value> {
        let sink = FileSink::try_new(&staging, extension, n as usize)?;
        let mut writer =
            PartitionedWriter::try_new(schema.clone(), partitioning, writer_options, sink)?;
        for batch in &mut reader {
            writer.append(&batch?)?;
        }
        let (_, metrics) = writer.finish()?;
        let destinations: Vec<serde_json::Value> = (0..n as usize)
            .map(|p| {
                json!({
                    "destination": p,
                    "file": (metrics.destination_bytes[p] > 0).then(|| format!("part-{p:05}.{extension}")),
                    "rows": metrics.destination_rows[p],
                    "bytes": metrics.destination_bytes[p],
                })
            })
            .collect();
        let manifest = json!({
            "scheme": format!("{:?}", options.scheme).to_lowercase(),
            "keys": options.by,
            "partitions": n,
            "format": format!("{:?}", options.format).to_lowercase(),
            "compression": format!("{:?}", options.compression).to_lowercase(),
            "input_rows": metrics.rows_in,
            "output_rows": metrics.rows_out,
            "output_bytes": metrics.bytes_out,
            "destinations": destinations,
        });
        std::fs::write(
            staging.join("_manifest.json"),
            serde_json::to_string_pretty(&manifest)?,
        )?;
        Ok(manifest)
    })();
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
    if !options.quiet {
        let seconds = started.elapsed().as_secs_f64();
        let rows = manifest["input_rows"].as_u64().unwrap_or(0);
        eprintln!(
            "partout: {rows} rows into {n} destinations in {}, {} bytes, {seconds:.2} s, {:.1} M rows/s",
            out.display(),
            manifest["output_bytes"],
            rows as f64 / seconds / 1e6
        );
    }
    Ok(())
}

/// A fresh temporary directory next to `out` (same file system, so the final rename is atomic).
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
    let staging = parent.join(format!(".{name}.partout-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    std::fs::create_dir(&staging).with_context(|| format!("creating {}", staging.display()))?;
    Ok(staging)
}

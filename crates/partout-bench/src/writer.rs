//! `partout bench writer`: TPC-H lineitem, generated in process, hash-partitioned on
//! l_orderkey into per-destination Arrow IPC streams, beside DataFusion's way and Comet's way
//! of doing the same, and beside LZ4 alone on the same bytes. Timed runs count the bytes each
//! contender produces and drop them (keeping gigabytes in memory would time page faults); an
//! untimed first run of each keeps its streams and decodes them to check every row arrived.
//!
//! This file is the suite: its options, the contenders it runs per codec, their checked first
//! runs and timed rounds, and the table or JSON lines it prints. `contender` runs one
//! contender once; `scatter_copy` is the scatter+copy contender.

use crate::fingerprint::{self, Reference};
use crate::harness::{alternate, median, medians, time};
use crate::lineitem;
use crate::report::{outln, print_json};
use anyhow::{Result, ensure};
use arrow_array::RecordBatch;
use partout_core::ids::{PartitionIds, Partitioning};
use partout_format::Encoding;
use partout_format::ipc::{Compression, decode_stream};
use partout_testkit::baseline::DataFusionHash;
use serde_json::json;

mod contender;
mod scatter_copy;

pub(crate) use contender::{Contender, Setup, run_once};

/// Options of `partout bench writer`.
#[derive(Debug, Clone, clap::Args)]
pub struct WriterBenchOptions {
    /// One JSON object per contender instead of a table.
    #[arg(long)]
    pub json: bool,
    /// TPC-H scale factor of the generated lineitem table.
    #[arg(long, default_value_t = 0.1)]
    pub sf: f64,
    /// Destinations.
    #[arg(long, default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(partout_core::plan::MAX_PARTITIONS)))]
    pub partitions: u32,
    /// Rounds: every contender runs once per round, in alternation; figures are medians.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Contenders to run (partout, copy, datafusion, per-slice, comet, partition, alone (the
    /// codec alone), and the slow
    /// per-slice-raw and comet-raw); all but the raw ones by default.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Times the generated table streams through each contender in one run (a longer input
    /// without a longer generation).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub passes: u32,
    /// Bytes partout may buffer (and Comet's way, before it flushes).
    #[arg(long, default_value_t = MEMORY_LIMIT)]
    pub memory_limit: usize,
    /// Rows per generated batch.
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: u32,
    /// The hash partout's contenders compute destinations with: its own fast hash, or
    /// DataFusion 55's (the baselines' hash, computed outside the writer and handed to it, as
    /// a DataFusion consumer needs).
    #[arg(long, value_enum, default_value_t = Hash::Partout)]
    pub hash: Hash,
    /// The codecs to run, in turn (`none` and `lz4` by default; `zstd`, `zstd:LEVEL` too).
    #[arg(long, value_delimiter = ',', default_values_t = [Codec::NONE, Codec::LZ4])]
    pub codecs: Vec<Codec>,
}

/// The IPC body compression of every contender's streams, by the names partout's front ends
/// take: `none`, `lz4`, `zstd` (level 3, arrow-ipc's when told no level) or `zstd:LEVEL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Codec(pub Compression);

impl Codec {
    /// Uncompressed.
    pub const NONE: Self = Self(Compression::None);
    /// LZ4 frames.
    pub const LZ4: Self = Self(Compression::Lz4);

    /// Its name in the results.
    fn key(self) -> String {
        self.0.to_string()
    }

    /// arrow-ipc's writing options, for the baselines.
    fn arrow(self) -> Result<arrow_ipc::writer::IpcWriteOptions> {
        Ok(partout_format::ipc::ipc_options(self.0)?)
    }
}

impl std::str::FromStr for Codec {
    type Err = partout_format::FormatError;

    fn from_str(name: &str) -> std::result::Result<Self, Self::Err> {
        name.parse().map(Self)
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The hash partout's contenders place rows with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Hash {
    /// partout's fast hash, computed by the writer (`Partitioning::hash`).
    Partout,
    /// DataFusion 55's hash of the first column, `% n`, computed outside the writer and given
    /// to it (`append_with_ids`): the same ids, at the same cost, as the baselines.
    Datafusion,
}

impl Hash {
    /// The reference partitioner whose destinations partout's output must match.
    fn reference(self) -> Reference {
        match self {
            Hash::Partout => Reference::PartoutHash,
            Hash::Datafusion => Reference::DataFusionHash,
        }
    }
}

/// Computes the destinations of a batch's rows by a [`Hash`], on the first column.
pub(crate) enum Ids {
    /// partout's ids.
    Partout(Box<PartitionIds>),
    /// DataFusion's ids.
    DataFusion(DataFusionHash, u32),
}

impl Ids {
    pub(crate) fn try_new(hash: Hash, schema: &arrow_schema::SchemaRef, n: u32) -> Result<Self> {
        Ok(match hash {
            Hash::Partout => Ids::Partout(Box::new(PartitionIds::try_new(
                Partitioning::hash(vec![0], n),
                schema,
            )?)),
            Hash::Datafusion => Ids::DataFusion(DataFusionHash::new(), n),
        })
    }

    pub(crate) fn compute(&mut self, batch: &RecordBatch, out: &mut Vec<u32>) -> Result<()> {
        match self {
            Ids::Partout(ids) => ids.compute(batch, out)?,
            Ids::DataFusion(hash, n) => hash.ids(batch, &[0], *n, out),
        }
        Ok(())
    }
}

/// Memory all three shuffles may buffer (partout's limit, Comet's spill threshold).
const MEMORY_LIMIT: usize = 64 << 20;

/// The IPC encoding of every contender's streams.
fn ipc(codec: Codec) -> Encoding {
    Encoding::ipc(codec.0)
}

/// The contenders run without compression, partout first: the others' times are reported
/// as ratios to its.
const UNCOMPRESSED: &[Contender] = &[
    Contender::Partout,
    Contender::PartoutScatterThenCopy,
    Contender::PartoutSlices,
    Contender::PartoutBuffers,
    Contender::DataFusion,
    Contender::PerSlice,
    Contender::Comet,
    Contender::DataFusionRaw,
    Contender::CometRaw,
    Contender::PartitionOnly,
];

/// The contenders run with a codec, partout first; the codec alone in place of partition
/// only.
const COMPRESSED: &[Contender] = &[
    Contender::Partout,
    Contender::PartoutSlices,
    Contender::PartoutBuffers,
    Contender::DataFusion,
    Contender::PerSlice,
    Contender::Comet,
    Contender::DataFusionRaw,
    Contender::CometRaw,
    Contender::CodecAlone,
];

/// The table every contender partitions: lineitem, streamed through `passes` times.
struct Input {
    batches: Vec<RecordBatch>,
    /// Its rows, over every pass.
    rows: usize,
    /// Its batches' buffers' bytes, over every pass.
    bytes: usize,
}

impl Input {
    /// Its bytes in MiB.
    fn mib(&self) -> f64 {
        self.bytes as f64 / f64::from(1 << 20)
    }
}

/// What each contender partitions: the input, or for the codec alone the batches partout
/// flushes.
struct Inputs<'a> {
    batches: &'a [RecordBatch],
    /// The batches partout flushes (empty when the codec alone does not run).
    flushed: Vec<RecordBatch>,
}

impl Inputs<'_> {
    /// The batches `contender` runs over.
    fn of(&self, contender: Contender) -> &[RecordBatch] {
        if contender == Contender::CodecAlone {
            &self.flushed
        } else {
            self.batches
        }
    }
}

/// What one timed run of a contender measured.
struct Sample {
    seconds: f64,
    /// Bytes the contender produced.
    bytes: usize,
    /// partout's phases, in seconds: ids, scatter, encode, sink.
    phases: Option<[f64; 4]>,
}

/// What a contender's timed runs measured, as reported.
struct Measured {
    contender: Contender,
    /// The median seconds of its runs.
    seconds: f64,
    /// Its median time over partout's (the first contender's).
    ratio: f64,
    /// The bytes it produced: every run produces the same, the last one's.
    bytes_out: usize,
    /// The median time of each phase of partout's runs, in seconds: ids, scatter, encode,
    /// sink.
    phases: Option<[f64; 4]>,
}

/// `partout bench writer`: every contender without compression, then with LZ4, each checked
/// once (every row decoded back) and then timed in alternation.
///
/// # Errors
/// A bad scale factor or memory limit, a contender that failed or lost rows, or a closed
/// stdout.
pub fn run(options: &WriterBenchOptions) -> Result<()> {
    let input = generate(options)?;
    let n = options.partitions;
    for &codec in &options.codecs {
        let setup = Setup {
            codec,
            memory_limit: options.memory_limit,
            hash: options.hash,
        };
        let contenders = contenders(options, codec);
        if contenders.is_empty() {
            continue;
        }
        let inputs = Inputs {
            batches: &input.batches,
            flushed: flushed(&contenders, setup, &input.batches, n)?,
        };
        check_first_runs(&contenders, setup, &inputs, n, input.rows)?;
        let samples = time_rounds(options.rounds, &contenders, setup, &inputs, n)?;
        let measured = measure(&contenders, &samples);
        if options.json {
            print_json_lines(options, &input, codec, &measured)?;
        } else {
            print_table(&input, codec, &measured)?;
        }
    }
    Ok(())
}

/// Generates lineitem and repeats it `passes` times; unless the results are JSON, prints
/// what the run will do.
fn generate(options: &WriterBenchOptions) -> Result<Input> {
    let (seconds, generated) =
        time(|| lineitem::generate(options.sf, options.batch_size as usize))?;
    let batches: Vec<RecordBatch> = generated
        .iter()
        .cycle()
        .take(generated.len() * options.passes as usize)
        .cloned()
        .collect();
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let bytes = lineitem::buffer_bytes(&batches);
    let input = Input {
        batches,
        rows,
        bytes,
    };
    if !options.json {
        let n = options.partitions;
        let mib = input.mib();
        outln!(
            "writer: lineitem SF {} x {} passes ({rows} rows, {mib:.0} MiB in {} batches, generated in {seconds:.1} s), \
             hash on l_orderkey into {n} IPC streams (counted, not kept); median of {} rounds",
            options.sf,
            options.passes,
            input.batches.len(),
            options.rounds
        );
    }
    Ok(input)
}

/// The contenders run with `codec`: those `--only` names (all but the raw ones when it names
/// none), without partout's mode that is its default at this count (plain partout runs it).
fn contenders(options: &WriterBenchOptions, codec: Codec) -> Vec<Contender> {
    let contenders = if codec == Codec::NONE {
        UNCOMPRESSED
    } else {
        COMPRESSED
    };
    contenders
        .iter()
        .copied()
        .filter(|c| {
            let raw = matches!(c, Contender::DataFusionRaw | Contender::CometRaw);
            // partout's other mode than its default at this count: the one it did not pick.
            let slices_by_default = options.partitions as usize >= partout_exchange::SLICES_FROM;
            let default_mode = match c {
                Contender::PartoutSlices => slices_by_default,
                Contender::PartoutBuffers => !slices_by_default,
                _ => false,
            };
            if default_mode {
                false
            } else if options.only.is_empty() {
                !raw
            } else {
                options.only.iter().any(|o| o == c.key())
            }
        })
        .collect()
}

/// The codec alone works on the batches partout flushes: decoded from an uncompressed run of
/// partout over `batches` (none when the codec alone is not among `contenders`).
fn flushed(
    contenders: &[Contender],
    setup: Setup,
    batches: &[RecordBatch],
    n: u32,
) -> Result<Vec<RecordBatch>> {
    if !contenders.contains(&Contender::CodecAlone) {
        return Ok(Vec::new());
    }
    let run = run_once(
        Contender::Partout,
        Setup {
            codec: Codec::NONE,
            ..setup
        },
        batches,
        n,
        true,
    )?;
    let mut flushed = Vec::new();
    for bytes in &run.outputs {
        flushed.extend(decode_stream(bytes)?.1);
    }
    Ok(flushed)
}

/// A first pass of each contender, untimed (page faults of fresh memory would otherwise fall
/// on whoever runs first), its streams kept and checked: every destination's rows and values,
/// against the contender's reference partitioner.
fn check_first_runs(
    contenders: &[Contender],
    setup: Setup,
    inputs: &Inputs<'_>,
    n: u32,
    rows: usize,
) -> Result<()> {
    for &contender in contenders {
        let run = run_once(contender, setup, inputs.of(contender), n, true)?;
        if let Some(reference) = contender.reference(setup.hash) {
            let expected = fingerprint::expected(inputs.of(contender), reference, n)?;
            let got = fingerprint::of_streams(&run.outputs)?;
            fingerprint::check(contender.name(), &expected, &got)?;
            ensure!(
                expected.iter().map(|p| p.rows).sum::<u64>() == rows as u64,
                "the reference lost rows"
            );
        }
    }
    Ok(())
}

/// `rounds` timed runs of every contender, in alternation, their outputs counted and
/// dropped: per contender, its samples.
fn time_rounds(
    rounds: u32,
    contenders: &[Contender],
    setup: Setup,
    inputs: &Inputs<'_>,
    n: u32,
) -> Result<Vec<Vec<Sample>>> {
    alternate(rounds as usize, contenders.len(), |i| {
        let contender = contenders[i];
        let (seconds, run) = time(|| run_once(contender, setup, inputs.of(contender), n, false))?;
        anyhow::Ok(Sample {
            seconds,
            bytes: run.bytes,
            phases: run.metrics.map(|m| {
                [m.ids_time, m.scatter_time, m.encode_time, m.sink_time].map(|t| t.as_secs_f64())
            }),
        })
    })
}

/// The medians of every contender's samples, its time against partout's (the first
/// contender's) and the bytes it produced.
fn measure(contenders: &[Contender], samples: &[Vec<Sample>]) -> Vec<Measured> {
    let medians = medians(samples, |s| s.seconds);
    // Median time of each phase of partout's runs: ids, scatter, encode, sink.
    let phase = |i: usize| -> Option<[f64; 4]> {
        let phases: Vec<[f64; 4]> = samples[i].iter().filter_map(|s| s.phases).collect();
        (!phases.is_empty())
            .then(|| std::array::from_fn(|k| median(phases.iter().map(|p| p[k]).collect())))
    };
    // Every run of a contender produces the same bytes: the last one's.
    let produced = |i: usize| samples[i].last().map_or(0, |s| s.bytes);
    let ours = medians[0];
    contenders
        .iter()
        .enumerate()
        .map(|(i, &contender)| Measured {
            contender,
            seconds: medians[i],
            ratio: medians[i] / ours,
            bytes_out: produced(i),
            phases: phase(i),
        })
        .collect()
}

/// One JSON object per contender run with `codec`.
fn print_json_lines(
    options: &WriterBenchOptions,
    input: &Input,
    codec: Codec,
    measured: &[Measured],
) -> Result<()> {
    let (rows, mib) = (input.rows, input.mib());
    for m in measured {
        let seconds = m.seconds;
        print_json(&json!({
            "suite": "writer",
            "contender": m.contender.name(),
            "codec": codec.key(),
            "sf": options.sf,
            "partitions": options.partitions,
            "hash": format!("{:?}", options.hash).to_lowercase(),
            "cpu": partout_testkit::machine(),
            "rows": rows,
            "bytes_in": input.bytes,
            "bytes_out": m.bytes_out,
            "seconds": (seconds * 1e4).round() / 1e4,
            "rows_per_s": (rows as f64 / seconds).round(),
            "mib_per_s": (mib / seconds * 10.0).round() / 10.0,
            "time_vs_partout": (m.ratio * 100.0).round() / 100.0,
            "phases_ms": m.phases.map(|p| json!({
                "ids": p[0] * 1e3, "scatter": p[1] * 1e3, "encode": p[2] * 1e3, "sink": p[3] * 1e3,
            })),
        }))?;
    }
    Ok(())
}

/// A table of the contenders run with `codec`: a row each, and under partout's, its phases.
fn print_table(input: &Input, codec: Codec, measured: &[Measured]) -> Result<()> {
    let (rows, mib) = (input.rows, input.mib());
    let codec_name = codec.key();
    outln!();
    outln!(
        "{:<22} {:>6} {:>9} {:>10} {:>9} {:>10} {:>12}",
        "contender",
        "codec",
        "time ms",
        "M rows/s",
        "MiB/s",
        "out MiB",
        "vs partout"
    );
    for m in measured {
        let seconds = m.seconds;
        outln!(
            "{:<22} {:>6} {:>9.1} {:>10.2} {:>9.0} {:>10.1} {:>11.2}x",
            m.contender.name(),
            codec_name,
            seconds * 1e3,
            rows as f64 / seconds / 1e6,
            mib / seconds,
            m.bytes_out as f64 / f64::from(1 << 20),
            m.ratio
        );
        if let Some(p) = m.phases {
            outln!(
                "{:<22} ids {:.1} ms, scatter {:.1} ms, encode {:.1} ms, sink {:.1} ms",
                "",
                p[0] * 1e3,
                p[1] * 1e3,
                p[2] * 1e3,
                p[3] * 1e3
            );
        }
    }
    Ok(())
}

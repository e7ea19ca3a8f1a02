//! `partout bench writer`: TPC-H lineitem, generated in process, hash-partitioned on
//! l_orderkey into per-destination Arrow IPC streams, beside DataFusion's way and Comet's way
//! of doing the same, and beside LZ4 alone on the same bytes. Timed runs count the bytes each
//! contender produces and drop them (keeping gigabytes in memory would time page faults); an
//! untimed first run of each keeps its streams and decodes them to check every row arrived.

use crate::fingerprint::{self, Reference};
use crate::harness::{alternate, median, medians, time};
use crate::lineitem;
use crate::report::{outln, print_json};
use anyhow::{Context, Result, ensure};
use arrow_array::{Array, RecordBatch};
use partout_core::ids::{PartitionIds, Partitioning};
use partout_exchange::{MemorySink, PartitionedWriter, Sink, WriterMetrics, WriterOptions};
use partout_format::Encoding;
use partout_format::ipc::{Compression, decode_stream};
use partout_testkit::baseline::{CometShuffle, DataFusionHash, DataFusionShuffle};
use serde_json::json;
use std::io::Write;

mod scatter_copy;

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

/// A way of hash-partitioning lineitem into per-destination streams, or a part of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Contender {
    /// partout's writer, direct: rows move from each batch into the destinations' buffers.
    Partout,
    /// partout's kernels in the other order: each batch first laid out as a
    /// `PartitionedBatch` (`Partitioner`), then each destination's rows copied into its
    /// buffers (`DestinationBuffers::append_partitioned`), flushed as partout's writer flushes.
    PartoutScatterThenCopy,
    /// partout's writer with held runs at every destination count
    /// (`WriterOptions::with_runs_from(1)`): each batch laid out once and held, each
    /// destination's runs across the held batches written as one message straight from them.
    /// Run where partout's default is its buffers (below `RUNS_FROM` destinations).
    PartoutRuns,
    /// partout's writer with per-destination buffers at every destination count
    /// (`with_runs_from(usize::MAX)`). Run where partout's default is held runs.
    PartoutBuffers,
    /// DataFusion's way, re-created: DataFusion 55's foldhash ids, a grouped take per batch,
    /// each destination's rows coalesced to 8192-row batches (arrow's `BatchCoalescer`, as
    /// `RepartitionExec` outputs them), an IPC writer per destination.
    DataFusion,
    /// The per-slice writer (Ballista's legacy hash shuffle writer's way): as DataFusion's way,
    /// but each destination's slice of each batch written at once as its own IPC message.
    PerSlice,
    /// Comet's way: batches kept whole up to the memory limit, then each destination's rows
    /// interleaved and written.
    Comet,
    /// The per-slice writer without compacting view columns: each slice's stream carries its
    /// whole batch's string data.
    DataFusionRaw,
    /// Comet's way without compacting view columns.
    CometRaw,
    /// The in-memory part alone: ids and one `PartitionedBatch` per input batch, no output.
    PartitionOnly,
    /// The codec alone on the buffers partout flushes: the compression work, nothing else.
    CodecAlone,
}

impl Contender {
    fn key(self) -> &'static str {
        match self {
            Contender::Partout => "partout",
            Contender::PartoutScatterThenCopy => "copy",
            Contender::PartoutRuns => "runs",
            Contender::PartoutBuffers => "buffers",
            Contender::DataFusion => "datafusion",
            Contender::PerSlice => "per-slice",
            Contender::Comet => "comet",
            Contender::DataFusionRaw => "per-slice-raw",
            Contender::CometRaw => "comet-raw",
            Contender::PartitionOnly => "partition",
            Contender::CodecAlone => "alone",
        }
    }

    /// The partitioner whose destinations its output must match when partout's contenders
    /// hash with `hash` (none: it writes no destinations).
    pub(crate) fn reference(self, hash: Hash) -> Option<Reference> {
        match self {
            Contender::Partout
            | Contender::PartoutScatterThenCopy
            | Contender::PartoutRuns
            | Contender::PartoutBuffers => Some(hash.reference()),
            Contender::DataFusion
            | Contender::PerSlice
            | Contender::Comet
            | Contender::DataFusionRaw
            | Contender::CometRaw => Some(Reference::DataFusionHash),
            Contender::PartitionOnly | Contender::CodecAlone => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Contender::Partout => "partout",
            Contender::PartoutScatterThenCopy => "partout scatter+copy",
            Contender::PartoutRuns => "partout held runs",
            Contender::PartoutBuffers => "partout buffers",
            Contender::DataFusion => "datafusion way",
            Contender::PerSlice => "per-slice writer",
            Contender::Comet => "comet way",
            Contender::DataFusionRaw => "per-slice writer, raw",
            Contender::CometRaw => "comet way, raw",
            Contender::PartitionOnly => "partition only",
            Contender::CodecAlone => "codec alone",
        }
    }
}

/// What one run of a contender produced.
pub(crate) struct Run {
    /// One IPC stream per destination (none for LZ4 alone and partition only).
    pub outputs: Vec<Vec<u8>>,
    /// Bytes produced: the streams', LZ4 alone's frames', or partition only's partitioned
    /// batches' buffers.
    pub bytes: usize,
    /// partout's own account of where the time went.
    metrics: Option<WriterMetrics>,
}

/// Counts the bytes written to it and keeps none: where the timed runs write, so that no
/// contender pays for keeping its output in memory (the checked run keeps it).
#[derive(Debug, Default)]
struct Discard {
    bytes: usize,
}

impl Write for Discard {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.bytes += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Sink for Discard {
    fn write(&mut self, _destination: usize, bytes: &[u8]) -> std::io::Result<()> {
        self.bytes += bytes.len();
        Ok(())
    }

    fn write_parts(
        &mut self,
        _destination: usize,
        parts: &[arrow_buffer::Buffer],
    ) -> std::io::Result<()> {
        self.bytes += parts.iter().map(|part| part.len()).sum::<usize>();
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// DataFusion's default `batch_size`: the rows of the batches its `RepartitionExec` outputs.
const DATAFUSION_BATCH_SIZE: usize = 8192;

/// The IPC encoding of every contender's streams.
fn ipc(codec: Codec) -> Encoding {
    Encoding::ipc(codec.0)
}

/// partout's writer, or its scatter+copy counterpart, over every batch into `sink`.
fn run_partout<S: Sink>(
    sink: S,
    contender: Contender,
    setup: Setup,
    batches: &[RecordBatch],
    n: u32,
) -> Result<(S, WriterMetrics)> {
    let options = WriterOptions::default().with_memory_limit(setup.memory_limit);
    if contender == Contender::PartoutScatterThenCopy {
        let ids = Ids::try_new(setup.hash, &batches[0].schema(), n)?;
        return scatter_copy::ScatterThenCopy::run(sink, options, setup.codec, ids, batches, n);
    }
    let options = match contender {
        Contender::PartoutRuns => options.with_runs_from(1),
        Contender::PartoutBuffers => options.with_runs_from(usize::MAX),
        _ => options,
    };
    let mut writer = PartitionedWriter::try_new(
        batches[0].schema(),
        Partitioning::hash(vec![0], n),
        options,
        ipc(setup.codec),
        sink,
    )?;
    if setup.hash == Hash::Partout {
        // partout's own hash: the writer computes it (and times it).
        for batch in batches {
            writer.append(batch)?;
        }
        return Ok(writer.finish()?);
    }
    let mut ids = Ids::try_new(setup.hash, &batches[0].schema(), n)?;
    let (mut out, mut ids_time) = (Vec::new(), std::time::Duration::ZERO);
    for batch in batches {
        let started = std::time::Instant::now();
        ids.compute(batch, &mut out)?;
        ids_time += started.elapsed();
        writer.append_with_ids(batch, &out)?;
    }
    let (sink, mut metrics) = writer.finish()?;
    metrics.ids_time += ids_time;
    Ok((sink, metrics))
}

/// How every contender of a run is set up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setup {
    /// The streams' compression.
    pub codec: Codec,
    /// Bytes partout (and Comet's way) may buffer.
    pub memory_limit: usize,
    /// The hash of partout's contenders.
    pub hash: Hash,
}

/// A baseline shuffle over every batch into `outputs`.
fn run_baseline<W: Write>(
    contender: Contender,
    outputs: Vec<W>,
    codec: Codec,
    batches: &[RecordBatch],
    memory_limit: usize,
) -> Result<Vec<W>> {
    let codec = &codec.arrow()?;
    let schema = batches[0].schema();
    let n = outputs.len() as u32;
    let mut ids = Vec::new();
    let mut hash = DataFusionHash::new();
    let gc = matches!(
        contender,
        Contender::DataFusion | Contender::PerSlice | Contender::Comet
    );
    if matches!(
        contender,
        Contender::DataFusion | Contender::PerSlice | Contender::DataFusionRaw
    ) {
        let mut shuffle = DataFusionShuffle::try_new(&schema, outputs, codec, gc)?;
        if contender == Contender::DataFusion {
            shuffle = shuffle.with_batch_size(&schema, DATAFUSION_BATCH_SIZE);
        }
        for batch in batches {
            hash.ids(batch, &[0], n, &mut ids);
            shuffle.append(batch, &ids)?;
        }
        Ok(shuffle.finish()?)
    } else {
        let batch_size = batches[0].num_rows().max(1);
        let mut shuffle =
            CometShuffle::try_new(&schema, outputs, memory_limit, batch_size, codec, gc)?;
        for batch in batches {
            hash.ids(batch, &[0], n, &mut ids);
            shuffle.append(batch, &ids)?;
        }
        Ok(shuffle.finish()?)
    }
}

/// Runs one contender over every batch. With `check`, the outputs are kept (to be decoded);
/// without, they are counted and dropped as they come.
pub(crate) fn run_once(
    contender: Contender,
    setup: Setup,
    batches: &[RecordBatch],
    n: u32,
    check: bool,
) -> Result<Run> {
    let Setup {
        codec,
        memory_limit,
        ..
    } = setup;
    let mut run = Run {
        outputs: Vec::new(),
        bytes: 0,
        metrics: None,
    };
    match contender {
        Contender::Partout
        | Contender::PartoutScatterThenCopy
        | Contender::PartoutRuns
        | Contender::PartoutBuffers => {
            let copy = contender;
            if check {
                let sink = MemorySink::new(n as usize);
                let (sink, metrics) = run_partout(sink, copy, setup, batches, n)?;
                run.bytes = sink.len();
                run.outputs = sink.into_outputs();
                run.metrics = Some(metrics);
            } else {
                let sink = Discard::default();
                let (sink, metrics) = run_partout(sink, copy, setup, batches, n)?;
                run.bytes = sink.bytes;
                run.metrics = Some(metrics);
            }
        }
        Contender::DataFusion
        | Contender::PerSlice
        | Contender::DataFusionRaw
        | Contender::Comet
        | Contender::CometRaw => {
            if check {
                let outputs = vec![Vec::new(); n as usize];
                run.outputs = run_baseline(contender, outputs, codec, batches, memory_limit)?;
                run.bytes = run.outputs.iter().map(Vec::len).sum();
            } else {
                let outputs = (0..n).map(|_| Discard::default()).collect();
                let outputs = run_baseline(contender, outputs, codec, batches, memory_limit)?;
                run.bytes = outputs.iter().map(|o| o.bytes).sum();
            }
        }
        Contender::PartitionOnly => {
            let schema = batches[0].schema();
            let mut ids = Vec::new();
            let mut ids_of = Ids::try_new(setup.hash, &schema, n)?;
            let mut partitioner = partout_core::Partitioner::try_new(n)?;
            for batch in batches {
                ids_of.compute(batch, &mut ids)?;
                let partitioned = partitioner.partition(batch, &ids)?;
                run.bytes += partout_testkit::workload::data_bytes(partitioned.batch());
            }
        }
        Contender::CodecAlone => {
            // Every buffer of every column of the batches partout flushes, compressed one by
            // one as the IPC writer compresses them (an LZ4 frame each, or ZSTD at arrow's
            // level): the compression work alone, on the same bytes.
            let mut out = Vec::new();
            let level = match codec.0 {
                Compression::Zstd(level) => level.get(),
                _ => 0,
            };
            let mut zstd = zstd::bulk::Compressor::new(level).context("zstd")?;
            for batch in batches {
                for column in batch.columns() {
                    run.bytes += compress_buffers(codec, &column.to_data(), &mut out, &mut zstd)?;
                }
            }
        }
    }
    Ok(run)
}

/// The bytes `codec` compresses every buffer of `data` (and its children) into.
fn compress_buffers(
    codec: Codec,
    data: &arrow_data::ArrayData,
    out: &mut Vec<u8>,
    zstd: &mut zstd::bulk::Compressor<'_>,
) -> Result<usize> {
    let mut total = 0;
    let buffers = data.buffers().iter().map(|b| b.as_slice());
    let nulls = data.nulls().map(|n| n.buffer().as_slice());
    for bytes in buffers.chain(nulls) {
        out.clear();
        match codec.0 {
            Compression::None => out.extend_from_slice(bytes),
            Compression::Lz4 => {
                let mut encoder = lz4_flex::frame::FrameEncoder::new(&mut *out);
                encoder.write_all(bytes)?;
                encoder.finish().context("lz4")?;
            }
            Compression::Zstd(_) => *out = zstd.compress(bytes).context("zstd")?,
            Compression::Snappy => anyhow::bail!("the benchmark's codecs are none, LZ4 and ZSTD"),
        }
        total += out.len();
    }
    for child in data.child_data() {
        total += compress_buffers(codec, child, out, zstd)?;
    }
    Ok(total)
}

/// What one timed run of a contender measured.
struct Sample {
    seconds: f64,
    /// Bytes the contender produced.
    bytes: usize,
    /// partout's phases, in seconds: ids, scatter, encode, sink.
    phases: Option<[f64; 4]>,
}

/// `partout bench writer`: every contender without compression, then with LZ4, each checked
/// once (every row decoded back) and then timed in alternation.
///
/// # Errors
/// A bad scale factor or memory limit, a contender that failed or lost rows, or a closed
/// stdout.
pub fn run(options: &WriterBenchOptions) -> Result<()> {
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
    let n = options.partitions;
    let mib = bytes as f64 / f64::from(1 << 20);
    if !options.json {
        outln!(
            "writer: lineitem SF {} x {} passes ({rows} rows, {mib:.0} MiB in {} batches, generated in {seconds:.1} s), \
             hash on l_orderkey into {n} IPC streams (counted, not kept); median of {} rounds",
            options.sf,
            options.passes,
            batches.len(),
            options.rounds
        );
    }
    let uncompressed: &[Contender] = &[
        Contender::Partout,
        Contender::PartoutScatterThenCopy,
        Contender::PartoutRuns,
        Contender::PartoutBuffers,
        Contender::DataFusion,
        Contender::PerSlice,
        Contender::Comet,
        Contender::DataFusionRaw,
        Contender::CometRaw,
        Contender::PartitionOnly,
    ];
    let compressed: &[Contender] = &[
        Contender::Partout,
        Contender::PartoutRuns,
        Contender::PartoutBuffers,
        Contender::DataFusion,
        Contender::PerSlice,
        Contender::Comet,
        Contender::DataFusionRaw,
        Contender::CometRaw,
        Contender::CodecAlone,
    ];
    for &codec in &options.codecs {
        let contenders = if codec == Codec::NONE {
            uncompressed
        } else {
            compressed
        };
        let setup = Setup {
            codec,
            memory_limit: options.memory_limit,
            hash: options.hash,
        };
        let contenders: Vec<Contender> = contenders
            .iter()
            .copied()
            .filter(|c| {
                let raw = matches!(c, Contender::DataFusionRaw | Contender::CometRaw);
                // partout's other mode than its default at this count: the one it did not pick.
                let runs_by_default = options.partitions as usize >= partout_exchange::RUNS_FROM;
                let default_mode = match c {
                    Contender::PartoutRuns => runs_by_default,
                    Contender::PartoutBuffers => !runs_by_default,
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
            .collect();
        if contenders.is_empty() {
            continue;
        }
        // The codec alone works on the batches partout flushes (decoded from an uncompressed
        // run).
        let flushed: Vec<RecordBatch> = if contenders.contains(&Contender::CodecAlone) {
            let run = run_once(
                Contender::Partout,
                Setup {
                    codec: Codec::NONE,
                    ..setup
                },
                &batches,
                n,
                true,
            )?;
            let mut flushed = Vec::new();
            for bytes in &run.outputs {
                flushed.extend(decode_stream(bytes)?.1);
            }
            flushed
        } else {
            Vec::new()
        };
        let input = |contender: Contender| {
            if contender == Contender::CodecAlone {
                &flushed
            } else {
                &batches
            }
        };
        // A first pass of each, untimed: page faults of fresh memory would otherwise fall on
        // whoever runs first.
        for &contender in &contenders {
            let run = run_once(contender, setup, input(contender), n, true)?;
            // Every destination's rows and values, against the contender's reference
            // partitioner.
            if let Some(reference) = contender.reference(options.hash) {
                let expected = fingerprint::expected(input(contender), reference, n)?;
                let got = fingerprint::of_streams(&run.outputs)?;
                fingerprint::check(contender.name(), &expected, &got)?;
                ensure!(
                    expected.iter().map(|p| p.0).sum::<u64>() == rows as u64,
                    "the reference lost rows"
                );
            }
        }
        let samples = alternate(options.rounds as usize, contenders.len(), |i| {
            let contender = contenders[i];
            let (seconds, run) = time(|| run_once(contender, setup, input(contender), n, false))?;
            anyhow::Ok(Sample {
                seconds,
                bytes: run.bytes,
                phases: run.metrics.map(|m| {
                    [m.ids_time, m.scatter_time, m.encode_time, m.sink_time]
                        .map(|t| t.as_secs_f64())
                }),
            })
        })?;
        let medians = medians(&samples, |s| s.seconds);
        // Median time of each phase of partout's runs: ids, scatter, encode, sink.
        let phase = |i: usize| -> Option<[f64; 4]> {
            let phases: Vec<[f64; 4]> = samples[i].iter().filter_map(|s| s.phases).collect();
            (!phases.is_empty())
                .then(|| std::array::from_fn(|k| median(phases.iter().map(|p| p[k]).collect())))
        };
        // Every run of a contender produces the same bytes: the last one's.
        let produced = |i: usize| samples[i].last().map_or(0, |s| s.bytes);
        let ours = medians[0];
        let codec_name = codec.key();
        if !options.json {
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
        }
        for (i, &contender) in contenders.iter().enumerate() {
            let seconds = medians[i];
            let ratio = seconds / ours;
            if options.json {
                print_json(&json!({
                    "suite": "writer",
                    "contender": contender.name(),
                    "codec": codec_name,
                    "sf": options.sf,
                    "partitions": n,
                    "hash": format!("{:?}", options.hash).to_lowercase(),
                    "cpu": partout_testkit::machine(),
                    "rows": rows,
                    "bytes_in": bytes,
                    "bytes_out": produced(i),
                    "seconds": (seconds * 1e4).round() / 1e4,
                    "rows_per_s": (rows as f64 / seconds).round(),
                    "mib_per_s": (mib / seconds * 10.0).round() / 10.0,
                    "time_vs_partout": (ratio * 100.0).round() / 100.0,
                    "phases_ms": phase(i).map(|p| json!({
                        "ids": p[0] * 1e3, "scatter": p[1] * 1e3, "encode": p[2] * 1e3, "sink": p[3] * 1e3,
                    })),
                }))?;
            } else {
                outln!(
                    "{:<22} {:>6} {:>9.1} {:>10.2} {:>9.0} {:>10.1} {:>11.2}x",
                    contender.name(),
                    codec_name,
                    seconds * 1e3,
                    rows as f64 / seconds / 1e6,
                    mib / seconds,
                    produced(i) as f64 / f64::from(1 << 20),
                    ratio
                );
                if let Some(p) = phase(i) {
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
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Contender, run_once};
    use crate::lineitem;
    use arrow_array::RecordBatch;

    #[test]
    fn partition_only_reports_its_bytes_not_its_rows() {
        let batches = lineitem::generate(0.001, 1024).unwrap();
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let setup = super::Setup {
            codec: super::Codec::NONE,
            memory_limit: 1 << 20,
            hash: super::Hash::Partout,
        };
        let run = run_once(Contender::PartitionOnly, setup, &batches, 8, false).unwrap();
        // Every row of lineitem's 16 columns is partitioned: at least a byte per column.
        assert!(
            run.bytes >= 16 * rows,
            "{} bytes for {rows} rows",
            run.bytes
        );
    }
}

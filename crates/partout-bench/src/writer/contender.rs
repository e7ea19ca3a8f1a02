//! The contenders of `partout bench writer`, and one run of any of them: partout's writer in
//! its modes, the baselines' shuffles (DataFusion's way, the per-slice writer, Comet's way)
//! and the floors (partition only, the codec alone), their outputs kept (the checked run) or
//! counted and dropped as they come (the timed runs).

use super::{Codec, Hash, Ids, ipc, scatter_copy};
use crate::fingerprint::Reference;
use anyhow::{Context, Result};
use arrow_array::{Array, RecordBatch};
use partout_core::ids::Partitioning;
use partout_exchange::{MemorySink, PartitionedWriter, Sink, WriterMetrics, WriterOptions};
use partout_format::ipc::Compression;
use partout_testkit::baseline::{CometShuffle, DataFusionHash, DataFusionShuffle};
use std::io::Write;

/// A way of hash-partitioning lineitem into per-destination streams, or a part of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Contender {
    /// partout's writer, direct: rows move from each batch into the destinations' buffers.
    Partout,
    /// partout's kernels in the other order: each batch first laid out as a
    /// `PartitionedBatch` (`Partitioner`), then each destination's rows copied into its
    /// buffers (`DestinationBuffers::append_partitioned`), flushed as partout's writer flushes.
    PartoutScatterThenCopy,
    /// partout's writer with held slices at every destination count
    /// (`WriterOptions::with_slices_from(1)`): each batch laid out once and held, each
    /// destination's runs across the held batches written as one message straight from them.
    /// Run where partout's default is its buffers (below `SLICES_FROM` destinations).
    PartoutSlices,
    /// partout's writer with per-destination buffers at every destination count
    /// (`with_slices_from(usize::MAX)`). Run where partout's default is held slices.
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
    /// Its name in `--only`.
    pub(super) fn key(self) -> &'static str {
        match self {
            Contender::Partout => "partout",
            Contender::PartoutScatterThenCopy => "copy",
            Contender::PartoutSlices => "slices",
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
            | Contender::PartoutSlices
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
            Contender::PartoutSlices => "partout held slices",
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
    pub(super) metrics: Option<WriterMetrics>,
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
        Contender::PartoutSlices => options.with_slices_from(1),
        Contender::PartoutBuffers => options.with_slices_from(usize::MAX),
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
        | Contender::PartoutSlices
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
            // one as partout's IPC writer compresses them (an LZ4 frame each through one
            // compressor kept for all, or ZSTD at arrow's level): the compression work alone,
            // on the same bytes.
            let mut out = Vec::new();
            let mut lz4 = partout_format::ipc::Lz4Frames::new();
            let level = match codec.0 {
                Compression::Zstd(level) => level.get(),
                _ => 0,
            };
            let mut zstd = zstd::bulk::Compressor::new(level).context("zstd")?;
            for batch in batches {
                for column in batch.columns() {
                    run.bytes +=
                        compress_buffers(codec, &column.to_data(), &mut out, &mut lz4, &mut zstd)?;
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
    lz4: &mut partout_format::ipc::Lz4Frames,
    zstd: &mut zstd::bulk::Compressor<'_>,
) -> Result<usize> {
    let mut total = 0;
    let buffers = data.buffers().iter().map(|b| b.as_slice());
    let nulls = data.nulls().map(|n| n.buffer().as_slice());
    for bytes in buffers.chain(nulls) {
        out.clear();
        match codec.0 {
            Compression::None => out.extend_from_slice(bytes),
            Compression::Lz4 => lz4.compress(bytes, out),
            Compression::Zstd(_) => *out = zstd.compress(bytes).context("zstd")?,
            Compression::Snappy => anyhow::bail!("the benchmark's codecs are none, LZ4 and ZSTD"),
        }
        total += out.len();
    }
    for child in data.child_data() {
        total += compress_buffers(codec, child, out, lz4, zstd)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::{Contender, Setup, run_once};
    use crate::lineitem;
    use crate::writer::{Codec, Hash};
    use arrow_array::RecordBatch;

    #[test]
    fn partition_only_reports_its_bytes_not_its_rows() {
        let batches = lineitem::generate(0.001, 1024).unwrap();
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let setup = Setup {
            codec: Codec::NONE,
            memory_limit: 1 << 20,
            hash: Hash::Partout,
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

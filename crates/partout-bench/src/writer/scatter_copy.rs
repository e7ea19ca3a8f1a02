//! The scatter+copy contender of `partout bench writer`: partout's kernels in the other order
//! from its writer's. Each batch is first laid out destination by destination
//! (`Partitioner`), then each destination's contiguous rows are copied into its buffers
//! (`DestinationBuffers::append_partitioned`); the buffers flush as the writer's do.

use super::{Codec, Ids, ipc};
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use partout_core::{DestinationBuffers, Partitioner};
use partout_exchange::{BatchSink, Encoded, Sink, WriterMetrics, WriterOptions};
use std::time::{Duration, Instant};

/// The scatter+copy contender: each batch laid out destination by destination by a
/// `Partitioner`, each destination's rows copied into `DestinationBuffers`, flushed as
/// partout's writer flushes at target (the same targets, jitter draws and memory limit, so
/// the same streams below 512 destinations, where the writer merges no batches), into the
/// writer's encoder.
pub(super) struct ScatterThenCopy<S: Sink> {
    buffers: DestinationBuffers,
    output: Encoded<S>,
    metrics: WriterMetrics,
    /// Each destination's target, 0 before it is met (holds rows), `usize::MAX` once met
    /// and not drawn yet.
    targets: Vec<usize>,
    target_bytes: usize,
    met: usize,
    jitter: f64,
    rng: u64,
    memory_limit: usize,
}

impl<S: Sink> ScatterThenCopy<S> {
    /// Partitions every batch by `ids_of` into `n` streams in `sink`.
    pub(super) fn run(
        sink: S,
        options: WriterOptions,
        codec: Codec,
        mut ids_of: Ids,
        batches: &[RecordBatch],
        n: u32,
    ) -> Result<(S, WriterMetrics)> {
        let schema = batches[0].schema();
        let d = n as usize;
        let mut partitioner = Partitioner::try_new(n)?;
        let mut this = Self {
            buffers: DestinationBuffers::try_new(schema.clone(), d)?,
            output: Encoded::try_new(schema, d, ipc(codec), sink)?,
            metrics: WriterMetrics {
                destination_rows: vec![0; d],
                destination_bytes: vec![0; d],
                ..WriterMetrics::default()
            },
            targets: vec![0; d],
            target_bytes: options.target_bytes,
            met: 0,
            jitter: options.jitter,
            rng: options.seed ^ 0x9e37_79b9_7f4a_7c15,
            memory_limit: options.memory_limit,
        };
        let mut ids = Vec::new();
        for batch in batches {
            let started = Instant::now();
            ids_of.compute(batch, &mut ids)?;
            this.metrics.ids_time += started.elapsed();
            let started = Instant::now();
            let partitioned = partitioner.partition(batch, &ids)?;
            this.buffers.append_partitioned(&partitioned)?;
            this.metrics.scatter_time += started.elapsed();
            this.metrics.batches += 1;
            this.metrics.rows_in += batch.num_rows() as u64;
            this.flush_due()?;
        }
        for p in 0..d {
            if this.buffers.rows(p) > 0 {
                this.flush(p, true)?;
            }
        }
        let started = Instant::now();
        let sink_before = this.output.sink_time();
        this.output.finish(&mut this.metrics.destination_bytes)?;
        this.time_flush(started, sink_before);
        this.metrics.bytes_out = this.metrics.destination_bytes.iter().sum();
        this.metrics.rows_out = this.metrics.rows_in;
        Ok((this.output.into_sink(), this.metrics))
    }

    /// The writer's flushes: destinations at their target, then the largest while the
    /// buffers pass the memory limit.
    fn flush_due(&mut self) -> Result<()> {
        let n = self.buffers.num_destinations();
        // Every destination holding rows is met before a target is drawn, and each met
        // destination's first target drawn in destination order, as the writer does.
        for p in 0..n {
            if self.buffers.rows(p) > 0 {
                self.meet(p);
            }
        }
        for p in 0..n {
            if self.buffers.rows(p) == 0 {
                continue;
            }
            if self.targets[p] == usize::MAX {
                self.targets[p] = self.draw_target();
            }
            if self.buffers.bytes(p) >= self.targets[p] {
                self.flush(p, false)?;
            }
        }
        while self.buffers.held_bytes() > self.memory_limit {
            let (largest, bytes) = (0..n)
                .map(|p| (p, self.buffers.bytes(p)))
                .max_by_key(|&(_, bytes)| bytes)
                .context("no destination")?;
            if bytes == 0 {
                (0..n).for_each(|p| self.buffers.release(p));
                break;
            }
            self.metrics.memory_flushes += 1;
            self.flush(largest, true)?;
        }
        Ok(())
    }

    /// Destination `p`'s rows to the encoder; `release` gives its buffers up.
    fn flush(&mut self, p: usize, release: bool) -> Result<()> {
        let started = Instant::now();
        let sink_before = self.output.sink_time();
        let batch = self.buffers.take(p)?;
        self.metrics.destination_rows[p] += batch.num_rows() as u64;
        self.metrics.destination_bytes[p] += self.output.write_batch(p, &batch)?;
        if release {
            drop(batch);
            self.buffers.release(p);
        } else {
            self.buffers.recycle(p, batch);
        }
        self.time_flush(started, sink_before);
        self.metrics.flushes += 1;
        self.meet(p);
        self.targets[p] = self.draw_target();
        Ok(())
    }

    /// Counts destination `p` as met, if it was not: the writer's targets are shares of the
    /// memory limit among the destinations met.
    fn meet(&mut self, p: usize) {
        if self.targets[p] == 0 {
            self.met += 1;
            self.targets[p] = usize::MAX;
        }
    }

    /// Splits the time since `started` into the sink's and the encoder's.
    fn time_flush(&mut self, started: Instant, sink_before: Duration) {
        let sink = self.output.sink_time() - sink_before;
        self.metrics.sink_time += sink;
        self.metrics.encode_time += started.elapsed().saturating_sub(sink);
    }

    /// The writer's next target: xorshift, within ±jitter of the base target (the smaller of
    /// the target bytes and half the memory limit's share of each destination met).
    fn draw_target(&mut self) -> usize {
        let base = self
            .target_bytes
            .min(self.memory_limit / (2 * self.met.max(1)))
            .max(1);
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let unit = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        let factor = 1.0 + self.jitter * (2.0 * unit - 1.0);
        ((base as f64 * factor) as usize).clamp(1, usize::MAX - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Codec, Contender, Hash, Setup, run_once};
    use crate::lineitem;
    use arrow_array::RecordBatch;
    use partout_format::ipc::decode_stream;

    /// Each destination's rows, one batch of one row each.
    fn rows(outputs: &[Vec<u8>]) -> Vec<Vec<RecordBatch>> {
        outputs
            .iter()
            .map(|bytes| {
                let batches = decode_stream(bytes).unwrap().1;
                batches
                    .iter()
                    .flat_map(|b| (0..b.num_rows()).map(|row| b.slice(row, 1)))
                    .collect()
            })
            .collect()
    }

    /// Below 512 destinations the contender writes the very streams of the writer with
    /// per-destination buffers; above, where the writer merges batches and so flushes
    /// elsewhere, the same rows in the same order. The writer with held slices writes the same
    /// rows in the same order too.
    #[test]
    fn scatter_then_copy_writes_what_the_writer_writes() {
        let batches = lineitem::generate(0.002, 1000).unwrap();
        for (n, memory_limit, codec, hash) in [
            (8, 64 << 20, Codec::NONE, Hash::Partout),
            (200, 1 << 20, Codec::LZ4, Hash::Datafusion),
            (
                100,
                1 << 20,
                Codec(partout_format::ipc::Compression::ZSTD),
                Hash::Partout,
            ),
            (600, 1 << 20, Codec::NONE, Hash::Datafusion),
        ] {
            let setup = Setup {
                codec,
                memory_limit,
                hash,
            };
            let run = |contender| run_once(contender, setup, &batches, n, true).unwrap();
            let (copy, writer) = (
                run(Contender::PartoutScatterThenCopy),
                run(Contender::PartoutBuffers),
            );
            let runs = run(Contender::PartoutSlices);
            assert_eq!(
                rows(&runs.outputs),
                rows(&writer.outputs),
                "{n} destinations"
            );
            assert_eq!(copy.bytes, copy.outputs.iter().map(Vec::len).sum::<usize>());
            if n < 512 {
                assert!(copy.outputs == writer.outputs, "{n} destinations");
            } else {
                assert_eq!(
                    rows(&copy.outputs),
                    rows(&writer.outputs),
                    "{n} destinations"
                );
            }
        }
    }
}

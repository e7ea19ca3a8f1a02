//! [`HeldSlices`]: the writer's mode from [`SLICES_FROM`](crate::SLICES_FROM) destinations with
//! [`Flush::AtTarget`], for an output that [takes slices](super::SinkCapabilities::slices) (Arrow IPC
//! streams of flat columns). Each batch is laid out destination by destination once, its view
//! columns' values copied in that order, and held; when the held batches reach every
//! destination's flush target together, each destination's slices across them go to the output
//! as one message, written straight from the held batches.
//!
//! ```text
//!  append(batch) ─► Partitioner ─► held: [b0: d0 d0 | d1 | d2 ...] [b1: d0 | d1 d1 | ...] ...
//!  held ≥ n × target (or the memory limit) ─► for each d: Slices { d, [(b0, d's rows), (b1, ...)] }
//! ```
//!
//! Batches are laid out for the destinations met so far, not all there may be (the highest id
//! seen, rounded up to a power of two): partitioning by value allows far more values than a
//! dataset usually holds, and a layout for 100,000 destinations costs each held batch 400 KB
//! of offsets, gathers 400,000 rows before one is laid out and walks every destination at each
//! flush.
//!
//! Below that many destinations a batch gives each destination many rows, and moving them
//! into its buffers while the batch is in cache costs less than holding the batch; from it, the
//! per-destination work of every append (a few rows per destination and column) costs more.
//! Measured on lineitem (`partout bench writer`, BENCHMARKS.md): 5% faster at 200
//! destinations, 27% at 1000, slower at 16 and 64.
//!
//! [`Flush::AtTarget`]: crate::Flush::AtTarget

use super::{BatchSink, Flushed, Shared};
use crate::error::Result;
use crate::options::WriterOptions;
use arrow_array::RecordBatch;
use partout_core::{PartitionedBatch, Partitioner};
use partout_format::ipc::slices::SliceSource;
use std::time::Instant;

/// A batch is laid out once it has at least this many rows per destination; smaller input
/// batches are gathered (concatenated) until they do, so that a held batch brings each
/// destination a slice, not mostly empty ones.
const ROWS_PER_DESTINATION: usize = 4;

/// Batches held laid out by destination, each destination's slices written together.
#[derive(Debug)]
pub(super) struct HeldSlices {
    partitioner: Partitioner,
    held: Vec<(PartitionedBatch, SliceSource)>,
    /// Input batches smaller than a laid-out batch should be, gathered, and their rows' ids.
    small: Vec<RecordBatch>,
    small_ids: Vec<u32>,
    /// Memory of the batches held.
    bytes: usize,
    /// The held batches flush when they hold this much: every destination's flush target.
    flush_at: usize,
    memory_limit: usize,
    /// The most memory one held batch took.
    largest_batch: usize,
    /// The destinations there may be (batches are laid out for the partitioner's), and the
    /// highest id seen.
    destinations: usize,
    highest: usize,
    /// About the most bytes of rows one message holds ([`WriterOptions::target_bytes`]): a
    /// destination holding more of the held rows is written as several, so that encoding
    /// one never takes as much again as all the rows held.
    message_bytes: usize,
}

impl HeldSlices {
    /// Holds batches for `destinations` destinations, each flushing about `target` bytes.
    pub(super) fn try_new(
        destinations: usize,
        target: usize,
        options: &WriterOptions,
    ) -> Result<Self> {
        Ok(Self {
            partitioner: Partitioner::try_new(1)?.with_compact_views(),
            held: Vec::new(),
            small: Vec::new(),
            small_ids: Vec::new(),
            bytes: 0,
            flush_at: target
                .saturating_mul(destinations)
                .min(options.memory_limit / 2),
            memory_limit: options.memory_limit,
            largest_batch: 0,
            destinations,
            highest: 0,
            message_bytes: options.target_bytes.max(1),
        })
    }

    /// Lays `batch` out by `ids` and holds it; flushes every destination once the held
    /// batches reach the flush size, or would pass the memory limit with one more.
    ///
    /// # Errors
    /// [`WriterError::Partition`](crate::WriterError::Partition) for ids the partitioner
    /// refuses (the batch is not held then); the output's errors from a flush, after which
    /// the writer has failed.
    pub(super) fn append<O: BatchSink>(
        &mut self,
        batch: &RecordBatch,
        ids: &[u32],
        shared: &mut Shared<O>,
    ) -> Result<()> {
        let started = Instant::now();
        // Checked now, so that a bad id refuses this batch, not a later one.
        partout_core::plan::check_ids(ids, self.destinations as u32)?;
        if ids.len() != batch.num_rows() {
            return Err(partout_core::PartoutError::InvalidArgument(format!(
                "{} partition ids for a batch of {} rows",
                ids.len(),
                batch.num_rows()
            ))
            .into());
        }
        let highest = ids.iter().copied().max().unwrap_or(0) as usize;
        self.highest = self.highest.max(highest);
        let rows_wanted = ROWS_PER_DESTINATION * self.layout();
        if self.small.is_empty() && batch.num_rows() >= rows_wanted {
            self.hold(batch, ids, shared)?;
        } else {
            self.small.push(batch.clone());
            self.small_ids.extend_from_slice(ids);
            self.bytes += batch.get_array_memory_size();
            if self.small_ids.len() >= rows_wanted {
                // The batches gathered were accepted by earlier calls: losing them fails the
                // writer.
                if let Err(e) = self.hold_small(shared) {
                    shared.failed = true;
                    return Err(e);
                }
            }
        }
        shared.metrics.rows_out += batch.num_rows() as u64;
        shared.metrics.scatter_time += started.elapsed();
        shared.note_held(self.bytes);
        if self.bytes >= self.flush_at || self.bytes + self.largest_batch > self.memory_limit {
            if self.bytes < self.flush_at {
                shared.metrics.memory_flushes += 1;
            }
            self.flush(shared)?;
        }
        Ok(())
    }

    /// The destinations a batch is laid out for: up to the highest id seen, rounded up to a
    /// power of two, at most every destination.
    fn layout(&self) -> usize {
        (self.highest + 1)
            .next_power_of_two()
            .min(self.destinations)
    }

    /// The destinations batches are laid out for now.
    fn laid_out(&self) -> usize {
        self.partitioner.num_partitions() as usize
    }

    /// Lays `batch` out by `ids` and holds it.
    fn hold<O>(&mut self, batch: &RecordBatch, ids: &[u32], shared: &mut Shared<O>) -> Result<()> {
        let layout = self.layout();
        if layout > self.laid_out() {
            self.partitioner = Partitioner::try_new(layout as u32)?.with_compact_views();
        }
        let partitioned = self.partitioner.partition(batch, ids)?;
        let source = SliceSource::new(partitioned.batch());
        // The batch's arrays and its destinations' offsets.
        let bytes = partitioned.batch().get_array_memory_size() + 4 * (self.laid_out() + 1);
        self.bytes += bytes;
        self.largest_batch = self.largest_batch.max(bytes);
        shared.metrics.bytes_in += source.bytes() as u64;
        self.held.push((partitioned, source));
        Ok(())
    }

    /// Lays the small batches gathered out as one, and holds it.
    fn hold_small<O>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        if self.small.is_empty() {
            return Ok(());
        }
        let gathered = arrow_select::concat::concat_batches(&self.small[0].schema(), &self.small)
            .map_err(partout_core::PartoutError::from)?;
        let ids = std::mem::take(&mut self.small_ids);
        self.bytes -= self
            .small
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum::<usize>();
        self.small.clear();
        let held = self.hold(&gathered, &ids, shared);
        self.small_ids = ids;
        self.small_ids.clear();
        held
    }

    /// Flushes every destination holding rows.
    pub(super) fn finish<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        self.flush(shared)
    }

    /// Bytes of the batches held.
    pub(super) fn held_bytes(&self) -> usize {
        self.bytes
    }

    /// Hands each destination its slices across the held batches, then lets them go. Any error
    /// leaves the writer failed: the rows were accepted by earlier calls.
    fn flush<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        let result = self
            .hold_small(shared)
            .and_then(|()| self.write_held(shared));
        self.held.clear();
        self.bytes = 0;
        if result.is_err() {
            shared.failed = true;
        }
        result
    }

    fn write_held<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let mut slices = Vec::with_capacity(self.held.len());
        // Batches held before the layout grew have fewer destinations: none of them past.
        for p in 0..self.laid_out() {
            slices.clear();
            slices.extend(
                self.held
                    .iter()
                    .filter(|(batch, _)| p < batch.num_partitions())
                    .map(|(batch, source)| (source, batch.range(p)))
                    .filter(|(_, rows)| !rows.is_empty()),
            );
            // Messages of about `message_bytes` each, a slice whole in one.
            let mut start = 0;
            let mut bytes = 0;
            for (i, (source, rows)) in slices.iter().enumerate() {
                let slice = source.bytes() * rows.len() / source.num_rows().max(1);
                if i > start && bytes + slice > self.message_bytes {
                    write_slices(shared, p, &slices[start..i])?;
                    (start, bytes) = (i, 0);
                }
                bytes += slice;
            }
            if start < slices.len() {
                write_slices(shared, p, &slices[start..])?;
            }
        }
        Ok(())
    }
}

/// Writes destination `p`'s `slices` as one message.
fn write_slices<O: BatchSink>(
    shared: &mut Shared<O>,
    p: usize,
    slices: &[(&SliceSource, std::ops::Range<usize>)],
) -> Result<()> {
    let started = Instant::now();
    let sink_before = shared.sink_time();
    let bytes = shared.output.write_flushed(Flushed::Slices {
        destination: p,
        slices,
    })?;
    let rows: usize = slices.iter().map(|(_, r)| r.len()).sum();
    shared.metrics.destination_rows[p] += rows as u64;
    shared.account_flush(p, bytes, started, sink_before);
    Ok(())
}

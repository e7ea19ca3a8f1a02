//! [`Merged`]: the writer's mode from 512 destinations with [`Flush::AtTarget`]: batches are
//! held, with their plans, until a few are, then moved into the destination buffers together
//! (see [`DestinationBuffers::append_columns`]).
//!
//! [`Flush::AtTarget`]: crate::Flush::AtTarget

use super::buffered::Buffered;
use super::{BatchSink, Shared};
use crate::error::{Result, WriterError};
use crate::options::WriterOptions;
use arrow_array::{ArrayRef, RecordBatch};
use partout_core::{DestinationBuffers, MAX_MERGED, ScatterPlan};
use std::time::Instant;

/// How many batches the writer merges into its destination buffers at once for
/// `destinations` destinations: [`MAX_MERGED`] from 512 destinations, where a batch brings
/// each destination's column a few rows and reaching its buffer costs more than moving them
/// (lineitem into 1000 destinations: 12% faster); one below, where merging measured no gain
/// (64 and 200 destinations).
pub(super) fn merged_batches(destinations: usize) -> usize {
    if destinations >= 512 { MAX_MERGED } else { 1 }
}

/// A batch held until a few are moved into the destination buffers together: its columns and
/// its rows' plan.
#[derive(Debug, Default)]
struct Pending {
    columns: Vec<ArrayRef>,
    plan: ScatterPlan,
}

/// Batches held a few at a time, then moved into the destination buffers together.
#[derive(Debug)]
pub(super) struct Merged {
    buffered: Buffered,
    /// Batches merged into the buffers at once.
    merge: usize,
    memory_limit: usize,
    /// Slots for the batches held, with their plans (reused); the first `len` are held.
    pending: Vec<Pending>,
    len: usize,
    /// Memory of the batches held.
    bytes: usize,
    /// The most memory one appended batch took.
    largest_batch: usize,
}

impl Merged {
    /// Moves `merge` batches at a time (at most [`MAX_MERGED`]) into `buffered`.
    pub(super) fn new(buffered: Buffered, merge: usize, options: &WriterOptions) -> Self {
        debug_assert!((2..=MAX_MERGED).contains(&merge));
        Self {
            buffered,
            merge,
            memory_limit: options.memory_limit,
            pending: Vec::new(),
            len: 0,
            bytes: 0,
            largest_batch: 0,
        }
    }

    /// Holds `batch` (its columns, and the plan of its rows by `ids`) until `merge` batches
    /// are held, then moves them into the buffers together and flushes.
    ///
    /// # Errors
    /// [`WriterError::Partition`] for ids the plan refuses (the batch is not held then);
    /// any error of the merge, after which the writer has failed.
    pub(super) fn append<O: BatchSink>(
        &mut self,
        batch: &RecordBatch,
        ids: &[u32],
        shared: &mut Shared<O>,
    ) -> Result<()> {
        let started = Instant::now();
        if self.pending.len() == self.len {
            self.pending.push(Pending::default());
        }
        // The destinations met so far: a plan over them alone.
        let n = shared.in_use;
        let slot = &mut self.pending[self.len];
        // Bad ids refuse the batch here, before it is held.
        slot.plan.build(ids, n)?;
        slot.columns.clear();
        slot.columns.extend(batch.columns().iter().cloned());
        let bytes = batch.get_array_memory_size();
        self.bytes += bytes;
        self.largest_batch = self.largest_batch.max(bytes);
        self.len += 1;
        shared.metrics.rows_out += batch.num_rows() as u64;
        shared.metrics.scatter_time += started.elapsed();
        shared.note_held(self.held_bytes());
        // Batches held count against the memory limit: a small limit merges fewer.
        let fits = 1 + self.memory_limit / (8 * self.largest_batch.max(1));
        if self.len < self.merge.min(fits) {
            return Ok(());
        }
        self.merge_pending(shared)
    }

    /// Moves the batches still held into the buffers, then flushes every destination holding
    /// rows.
    pub(super) fn finish<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        self.merge_pending(shared)?;
        self.buffered.flush_rest(shared)
    }

    /// Bytes of buffer capacity, and of the batches held.
    pub(super) fn held_bytes(&self) -> usize {
        self.buffered.held_bytes() + self.bytes
    }

    /// Moves the held batches into the buffers, together, and flushes. Any error leaves the
    /// writer failed: the batches were accepted by earlier calls.
    fn merge_pending<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let result = self.merge_held(shared);
        for pending in &mut self.pending[..self.len] {
            pending.columns.clear();
        }
        self.len = 0;
        self.bytes = 0;
        if result.is_err() {
            shared.failed = true;
        }
        result
    }

    fn merge_held<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        let held = &self.pending[..self.len];
        let merged = self
            .buffered
            .append_timed(shared, |buffers| Ok(append_together(buffers, held)?));
        // Room for the batches held before the next merge.
        let room = (self.merge - 1) * self.largest_batch;
        match merged {
            // Together they pass what a destination's offsets address: one at a time, with
            // the flushes between them.
            Err(WriterError::Partition(partout_core::PartoutError::TooLarge(_)))
                if held.len() > 1 =>
            {
                for held in held {
                    self.buffered.append_timed(shared, |buffers| {
                        Ok(buffers.append_columns(&[(held.columns.as_slice(), &held.plan)])?)
                    })?;
                    self.buffered.flush_due(shared, self.bytes, room)?;
                }
                Ok(())
            }
            merged => {
                merged?;
                self.buffered.flush_due(shared, self.bytes, room)
            }
        }
    }
}

/// Appends the rows of every batch `held`, each by its plan, in one call.
fn append_together(buffers: &mut DestinationBuffers, held: &[Pending]) -> partout_core::Result<()> {
    let Some(first) = held.first() else {
        return Ok(());
    };
    let mut inputs = [(first.columns.as_slice(), &first.plan); MAX_MERGED];
    for (input, pending) in inputs.iter_mut().zip(held) {
        *input = (pending.columns.as_slice(), &pending.plan);
    }
    buffers.append_columns(&inputs[..held.len()])
}

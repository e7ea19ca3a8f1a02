//! [`Buffered`]: the destination buffers of a writer that flushes at target, and their
//! flushes: each destination when it reaches its target (or the row target), then the
//! largest while the memory limit is passed. The per-batch and merged modes both move rows into
//! these buffers.

use super::{BatchSink, Flushed, Shared};
use crate::error::Result;
use crate::options::WriterOptions;
use arrow_schema::SchemaRef;
use partout_core::DestinationBuffers;
use std::time::Instant;

/// Each destination's buffered rows, flushed at its target.
#[derive(Debug)]
pub(super) struct Buffered {
    /// One set of column buffers per destination.
    pub(super) buffers: DestinationBuffers,
    memory_limit: usize,
    /// [`WriterOptions::target_rows`], `usize::MAX` for none.
    target_rows: usize,
}

impl Buffered {
    /// Buffers for `destinations` destinations of batches of `schema`.
    ///
    /// # Errors
    /// [`WriterError::Partition`](crate::WriterError::Partition) for a column type the
    /// buffers cannot hold.
    pub(super) fn try_new(
        schema: SchemaRef,
        destinations: usize,
        options: &WriterOptions,
    ) -> Result<Self> {
        Ok(Self {
            buffers: DestinationBuffers::try_new(schema, destinations)?,
            memory_limit: options.memory_limit,
            target_rows: options.target_rows.unwrap_or(usize::MAX),
        })
    }

    /// Runs `append` on the buffers, counting its time as scatter time and the bytes it
    /// buffered as bytes in.
    pub(super) fn append_timed<O>(
        &mut self,
        shared: &mut Shared<O>,
        append: impl FnOnce(&mut DestinationBuffers) -> Result<()>,
    ) -> Result<()> {
        let started = Instant::now();
        let before = self.buffers.buffered_bytes();
        let result = append(&mut self.buffers);
        shared.metrics.scatter_time += started.elapsed();
        shared.metrics.bytes_in += (self.buffers.buffered_bytes() - before) as u64;
        result
    }

    /// Flushes the destinations that reached their target, then the largest while the
    /// buffers, with `room` bytes kept for batches held elsewhere, pass the memory limit.
    /// `held_elsewhere` bytes held beside the buffers count in the peak.
    pub(super) fn flush_due<O: BatchSink>(
        &mut self,
        shared: &mut Shared<O>,
        held_elsewhere: usize,
        room: usize,
    ) -> Result<()> {
        shared.note_held(self.buffers.held_bytes() + held_elsewhere);
        // No destination from `n` on has ever held rows.
        let n = self.buffers.destinations_in_use();
        // Every destination holding rows is met before any target is drawn: the first batch
        // of a hash partitioning meets them all, and all draw the same share.
        for p in 0..n {
            if self.buffers.rows(p) > 0 {
                shared.targets.meet(p);
            }
        }
        for p in 0..n {
            let rows = self.buffers.rows(p);
            if rows > 0
                && (self.buffers.bytes(p) >= shared.targets.of(p) || rows >= self.target_rows)
            {
                self.flush(shared, p, false)?;
            }
        }
        while self.buffers.held_bytes() + room > self.memory_limit {
            let (largest, bytes) = (0..n)
                .map(|p| (p, self.buffers.bytes(p)))
                .max_by_key(|&(_, bytes)| bytes)
                .unwrap_or((0, 0));
            if bytes == 0 {
                // Nothing buffered: what is held is empty capacity. Let it go.
                for p in 0..n {
                    self.buffers.release(p);
                }
                break;
            }
            shared.metrics.memory_flushes += 1;
            self.flush(shared, largest, true)?;
        }
        Ok(())
    }

    /// Flushes every destination holding rows and gives its buffers up.
    pub(super) fn flush_rest<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        for p in 0..self.buffers.destinations_in_use() {
            if self.buffers.rows(p) > 0 {
                self.flush(shared, p, true)?;
            }
        }
        Ok(())
    }

    /// Bytes of buffer capacity held.
    pub(super) fn held_bytes(&self) -> usize {
        self.buffers.held_bytes()
    }

    /// Hands destination `p`'s buffered rows to the output as its next batch; `release`
    /// gives up the destination's buffers afterwards.
    fn flush<O: BatchSink>(
        &mut self,
        shared: &mut Shared<O>,
        p: usize,
        release: bool,
    ) -> Result<()> {
        let started = Instant::now();
        let sink_before = shared.sink_time();
        let batch = self.buffers.take(p)?;
        shared.metrics.destination_rows[p] += batch.num_rows() as u64;
        // The buffers hold view columns' strings compactly: no check for more.
        let bytes = shared.output.write_flushed(Flushed::Compact {
            destination: p,
            batch: &batch,
        })?;
        if release {
            drop(batch);
            self.buffers.release(p);
        } else {
            let donor = shared.spare();
            self.buffers.recycle_with(p, batch, donor);
        }
        shared.account_flush(p, bytes, started, sink_before);
        shared.targets.redraw(p);
        Ok(())
    }
}

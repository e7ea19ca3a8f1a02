//! [`BatchSink`]: where a [`PartitionedWriter`](super::PartitionedWriter) hands its flushed
//! batches, destination by destination.

use crate::error::{Result, WriterError};
use arrow_array::RecordBatch;
use partout_format::ipc::runs::Run;
use std::time::Duration;

/// Receives flushed batches, destination by destination.
pub trait BatchSink {
    /// Writes `batch` as the next piece of destination `destination`'s output and returns the
    /// bytes it added there.
    ///
    /// # Errors
    /// Encoding or IO errors, naming the destination.
    fn write_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64>;

    /// Writes `batch` as [`write_batch`](Self::write_batch) does; its view columns hold only
    /// the bytes their rows reference (the writer's destination buffers build them so), so
    /// an output that would compact them need not read them to check. By default,
    /// [`write_batch`](Self::write_batch).
    ///
    /// # Errors
    /// As [`write_batch`](Self::write_batch).
    fn write_compact_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64> {
        self.write_batch(destination, batch)
    }

    /// No more batches come: end every destination's output, adding the bytes that ends each
    /// to `destination_bytes` (one entry per destination).
    ///
    /// # Errors
    /// Encoding or IO errors.
    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<()>;

    /// Writes `batch`, rows of several destinations in destination order: `runs` gives each
    /// destination and its rows, in the batch's order. Adds the bytes each destination's
    /// output grew by to `destination_bytes` and returns their sum. By default each
    /// destination's slice is written with [`write_batch`](Self::write_batch); a writer with
    /// [`Flush::AllAtLimit`](crate::Flush::AllAtLimit) hands its rows over this way.
    ///
    /// # Errors
    /// Encoding or IO errors, naming the destination.
    fn write_sorted(
        &mut self,
        batch: &RecordBatch,
        runs: &[(usize, usize)],
        destination_bytes: &mut [u64],
    ) -> Result<u64> {
        let mut offset = 0;
        let mut total = 0;
        for &(p, rows) in runs {
            let bytes = self.write_batch(p, &batch.slice(offset, rows))?;
            destination_bytes[p] += bytes;
            total += bytes;
            offset += rows;
        }
        Ok(total)
    }

    /// Every row held was just written, in destination order: a writer with
    /// [`Flush::AllAtLimit`](crate::Flush::AllAtLimit) calls this after each such round (the
    /// last one included, before [`finish`](Self::finish)), so that an output spilling sorted
    /// runs can end one.
    ///
    /// # Errors
    /// Encoding or IO errors.
    fn end_run(&mut self) -> Result<()> {
        Ok(())
    }

    /// A batch this writer flushed earlier that its holder is done with, whose buffers the
    /// writer may reuse for a destination whose flushed batch is still held (see
    /// [`Spares`](crate::Spares)). None by default: a sink that writes a batch out and drops it
    /// leaves the writer its own buffers back.
    fn spare(&mut self) -> Option<RecordBatch> {
        None
    }

    /// Whether the output takes a destination's rows as runs of held batches
    /// ([`write_runs`](Self::write_runs)): then, from [`RUNS_FROM`](crate::RUNS_FROM)
    /// destinations, the writer holds each batch laid out by destination and hands every
    /// destination its runs at once, instead of moving rows into per-destination buffers.
    fn takes_runs(&self) -> bool {
        false
    }

    /// Writes destination `destination`'s rows, `runs` of held batches in order, as the next
    /// piece of its output, and returns the bytes it added there. Only called when
    /// [`takes_runs`](Self::takes_runs).
    ///
    /// # Errors
    /// Encoding or IO errors, naming the destination.
    fn write_runs(&mut self, destination: usize, runs: &[Run<'_>]) -> Result<u64> {
        let _ = runs;
        Err(WriterError::InvalidOption(format!(
            "this output takes no runs of rows (destination {destination})"
        )))
    }

    /// Time spent handing bytes on (in [`write_batch`](Self::write_batch) and
    /// [`finish`](Self::finish)), where the sink can tell it from encoding; zero otherwise.
    fn sink_time(&self) -> Duration {
        Duration::ZERO
    }
}

/// A boxed sink is the sink it holds: an output whose sinks differ by layout hands them over
/// boxed, every capability passed through.
impl<S: BatchSink + ?Sized> BatchSink for Box<S> {
    fn write_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64> {
        (**self).write_batch(destination, batch)
    }

    fn write_compact_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64> {
        (**self).write_compact_batch(destination, batch)
    }

    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<()> {
        (**self).finish(destination_bytes)
    }

    fn write_sorted(
        &mut self,
        batch: &RecordBatch,
        runs: &[(usize, usize)],
        destination_bytes: &mut [u64],
    ) -> Result<u64> {
        (**self).write_sorted(batch, runs, destination_bytes)
    }

    fn end_run(&mut self) -> Result<()> {
        (**self).end_run()
    }

    fn spare(&mut self) -> Option<RecordBatch> {
        (**self).spare()
    }

    fn takes_runs(&self) -> bool {
        (**self).takes_runs()
    }

    fn write_runs(&mut self, destination: usize, runs: &[Run<'_>]) -> Result<u64> {
        (**self).write_runs(destination, runs)
    }

    fn sink_time(&self) -> Duration {
        (**self).sink_time()
    }
}

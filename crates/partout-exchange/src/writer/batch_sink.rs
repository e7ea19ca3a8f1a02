//! [`BatchSink`]: where a [`PartitionedWriter`](super::PartitionedWriter) hands its flushed
//! batches, destination by destination; [`SinkCapabilities`], what a sink offers its writer
//! besides, asked once; [`Flushed`], the shapes of rows only a writer makes, which a sink may
//! take faster than as plain batches.

use crate::error::{Result, WriterError};
use crate::spares::Spares;
use arrow_array::RecordBatch;
use partout_format::ipc::slices::Slice;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Receives flushed batches, destination by destination.
///
/// Two methods are required: a sink writes a batch as a destination's next piece
/// ([`write_batch`](Self::write_batch)) and ends every destination's output
/// ([`finish`](Self::finish)). That is all a sink that writes batches out one by one (files,
/// a network exchange, a collection in memory) implements.
///
/// What a writer may ask beyond that is of two kinds, and each is one defaulted method:
///
/// * **What the sink is**, known before the first row: whether it takes a destination's rows
///   as slices of held batches, where the batches it hands on come back to be reused, and the
///   clock of the time it spends handing bytes on. [`capabilities`](Self::capabilities)
///   answers with one value, [`SinkCapabilities`], which the writer asks for once when it is
///   built and keeps: its modes read the value, never the sink. The two things that change as
///   rows go through (the batches given back, the time spent) are shared handles in it
///   ([`Spares`], [`SinkClock`]), so that reading them is no call on the sink.
/// * **Rows in a shape only a writer makes**: a batch of its buffers whose view columns are
///   known compact, a destination's slices of held batches, a batch of several destinations'
///   rows in destination order, and the end of such a round.
///   [`write_flushed`](Self::write_flushed) takes them as one [`Flushed`] value. Each shape
///   has a meaning as plain batches ([`Flushed::write_as_batches`], the default), so a sink
///   with a faster way for some shapes matches those and hands the rest to the default; a
///   new shape is a new variant every sink takes by default, not another method here.
///
/// A method per shape and per capability would spell the same defaults one by one, leave
/// every sink nine methods to read through, and let a writer ask its sink what it is at any
/// time, from any of its modes.
pub trait BatchSink {
    /// Writes `batch` as the next piece of destination `destination`'s output and returns the
    /// bytes it added there.
    ///
    /// # Errors
    /// Encoding or IO errors, naming the destination.
    fn write_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64>;

    /// No more batches come: end every destination's output, adding the bytes that ends each
    /// to `destination_bytes` (one entry per destination).
    ///
    /// # Errors
    /// Encoding or IO errors.
    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<()>;

    /// What the sink offers its writer besides [`write_batch`](Self::write_batch): asked once,
    /// when the writer is built. None of it by default.
    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities::default()
    }

    /// Writes rows a writer hands over in one of its own shapes and returns the bytes they
    /// added to the output (for [`Flushed::Sorted`], also added to its `destination_bytes`).
    /// By default, [`Flushed::write_as_batches`].
    ///
    /// # Errors
    /// Encoding or IO errors, naming the destination; for [`Flushed::Slices`], which only a
    /// sink whose [capabilities](SinkCapabilities::slices) say so takes,
    /// [`WriterError::InvalidOption`] by default.
    fn write_flushed(&mut self, flushed: Flushed<'_>) -> Result<u64> {
        flushed.write_as_batches(self)
    }
}

/// What a sink offers its writer besides plain batches ([`BatchSink::capabilities`]): none of
/// it by default.
#[derive(Debug, Clone, Default)]
pub struct SinkCapabilities {
    /// The sink takes a destination's rows as slices of held batches ([`Flushed::Slices`]): then,
    /// from [`WriterOptions::slices_from`](crate::WriterOptions::slices_from) destinations, a
    /// writer with [`Flush::AtTarget`](crate::Flush::AtTarget) holds each batch laid out by
    /// destination and hands every destination its slices at once, instead of moving rows into
    /// per-destination buffers.
    pub slices: bool,
    /// Where the batches the sink hands on come back once their holders are done with them:
    /// the writer reuses their buffers for a destination whose flushed batch is still held
    /// (see [`Spares`]). A sink that writes a batch out and drops it leaves the writer its own
    /// buffers back, and needs none.
    pub spares: Option<Arc<Spares>>,
    /// The time the sink spends handing bytes on, where it can tell it from encoding: the
    /// writer splits its flushes' time by it. Zero without one.
    pub clock: Option<SinkClock>,
}

/// Time spent handing bytes on, kept by a sink and read by its writer (a shared handle:
/// clones count the same time).
///
/// ```
/// use partout_exchange::SinkClock;
/// use std::time::Duration;
///
/// let clock = SinkClock::default();
/// let writer_side = clock.clone();
/// clock.add(Duration::from_millis(3));
/// assert_eq!(writer_side.elapsed(), Duration::from_millis(3));
/// ```
#[derive(Debug, Clone, Default)]
pub struct SinkClock(Arc<AtomicU64>);

impl SinkClock {
    /// Counts `time` more.
    pub fn add(&self, time: Duration) {
        let nanos = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The time counted so far.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// Rows in a shape only a writer makes, for [`BatchSink::write_flushed`].
#[derive(Debug)]
pub enum Flushed<'a> {
    /// A batch of destination `destination`'s rows from the writer's buffers: its view columns
    /// hold only the bytes their rows reference (the buffers build them so), so an output that
    /// would compact them need not read them to check. As a plain batch: itself.
    Compact {
        /// The destination.
        destination: usize,
        /// Its rows.
        batch: &'a RecordBatch,
    },
    /// Destination `destination`'s rows as `slices` of held batches, in order, the next
    /// piece of its output. Only handed to a sink whose
    /// [capabilities](SinkCapabilities::slices) say it takes slices; it has no meaning as plain
    /// batches.
    Slices {
        /// The destination.
        destination: usize,
        /// Its rows: each a held batch and a range of its rows.
        slices: &'a [Slice<'a>],
    },
    /// Rows of several destinations in destination order, from a writer with
    /// [`Flush::AllAtLimit`](crate::Flush::AllAtLimit): `runs` gives each destination and its
    /// rows, in the batch's order. The bytes each destination's output grew by are added to
    /// `destination_bytes`. As plain batches: each destination's slice.
    Sorted {
        /// The rows.
        batch: &'a RecordBatch,
        /// Each destination and how many rows of the batch are its, in the batch's order.
        runs: &'a [(usize, usize)],
        /// The bytes each destination's output holds (one entry per destination).
        destination_bytes: &'a mut [u64],
    },
    /// Every row a writer with [`Flush::AllAtLimit`](crate::Flush::AllAtLimit) held was just
    /// handed over as [`Sorted`](Self::Sorted) batches (sent after each such round, the last
    /// one included, before [`BatchSink::finish`]), so that an output spilling sorted runs can
    /// end one. As plain batches: nothing.
    EndOfRound,
}

impl Flushed<'_> {
    /// Writes these rows to `sink` as plain batches ([`BatchSink::write_batch`]): what every
    /// shape means to a sink without a faster way for it. Returns the bytes added.
    ///
    /// # Errors
    /// The sink's errors; [`WriterError::InvalidOption`] for [`Flushed::Slices`], which has no
    /// meaning as plain batches.
    pub fn write_as_batches<S: BatchSink + ?Sized>(self, sink: &mut S) -> Result<u64> {
        match self {
            Self::Compact { destination, batch } => sink.write_batch(destination, batch),
            Self::Slices { destination, .. } => Err(WriterError::InvalidOption(format!(
                "this output takes no slices of held batches (destination {destination})"
            ))),
            Self::Sorted {
                batch,
                runs,
                destination_bytes,
            } => {
                let mut offset = 0;
                let mut total = 0;
                for &(p, rows) in runs {
                    let bytes = sink.write_batch(p, &batch.slice(offset, rows))?;
                    destination_bytes[p] += bytes;
                    total += bytes;
                    offset += rows;
                }
                Ok(total)
            }
            Self::EndOfRound => Ok(0),
        }
    }
}

/// A boxed sink is the sink it holds: an output whose sinks differ by layout hands them over
/// boxed, every capability passed through.
impl<S: BatchSink + ?Sized> BatchSink for Box<S> {
    fn write_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64> {
        (**self).write_batch(destination, batch)
    }

    fn finish(&mut self, destination_bytes: &mut [u64]) -> Result<()> {
        (**self).finish(destination_bytes)
    }

    fn capabilities(&self) -> SinkCapabilities {
        (**self).capabilities()
    }

    fn write_flushed(&mut self, flushed: Flushed<'_>) -> Result<u64> {
        (**self).write_flushed(flushed)
    }
}

//! [`OutputBuilders`]: the output batch under construction of every output, shared by the
//! producers that fill them.
//!
//! ```text
//!  producer i: batch ─ids─► GatheredBatch ─► for each output p (from a start of its own):
//!                                              lock p's builder (try first; busy ones last)
//!                                              append p's rows, up to batch_size rows
//!                                              full (rows or bytes)? finish it ─► ready
//!              ready batches ─► the exchange (no lock held), one push per output batch
//! ```
//!
//! Each row is copied once into the batch a consumer reads: from the producer's gathered
//! scratch, still hot, into its output's builder. An output batch is handed over whole when
//! it holds `batch_size` rows or its share of the builders' memory; the outputs never gather.
//! Every byte the builders hold is reserved from the session's memory pool.

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryReservation;
use partout_core::{GatheredBatch, OutputBuilder, PartoutError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// One output's builder and the bytes of it reserved.
#[derive(Debug)]
struct Slot {
    builder: OutputBuilder,
    reserved: usize,
    /// The rows the builder's buffers were sized for when it began filling: it is finished
    /// at them, before any of its buffers would grow.
    capacity: usize,
}

/// The builders of a group of outputs (every output, or one input's outputs when order is
/// preserved), the rows and bytes at which a builder is handed over, and the producers still
/// filling them.
#[derive(Debug)]
pub(crate) struct OutputBuilders {
    slots: Vec<Mutex<Slot>>,
    /// Rows of a full output batch (the session's batch size).
    rows: usize,
    /// Bytes at which a builder is handed over before it has `rows` rows: its share of the
    /// builders' memory.
    bytes: usize,
    /// The builders' capacity, and the finished batches not yet queued.
    reservation: MemoryReservation,
    /// Producers still appending; the last one hands over what the builders hold.
    live: AtomicUsize,
}

/// Where a producer's pass over the outputs for one gathered batch is: the outputs in turn
/// from `first` (steps `0..n`), then those that were busy (steps `n..`), and the row of the
/// current output's rows it has reached.
#[derive(Debug, Default)]
pub(crate) struct Pass {
    first: usize,
    step: usize,
    at: usize,
    busy: Vec<usize>,
}

impl Pass {
    /// A new pass, from output `first` on.
    pub(crate) fn begin(&mut self, first: usize) {
        self.first = first;
        self.step = 0;
        self.at = 0;
        self.busy.clear();
    }
}

/// A finished output batch on its way to the exchange, with the bytes reserved for it.
pub(crate) struct Finished {
    pub(crate) output: usize,
    pub(crate) batch: arrow_array::RecordBatch,
    pub(crate) bytes: usize,
}

impl OutputBuilders {
    /// Builders for `outputs` outputs of `schema`, filled by `producers` producers, handed over
    /// at `rows` rows or `bytes` bytes.
    pub(crate) fn try_new(
        schema: arrow_schema::SchemaRef,
        outputs: usize,
        producers: usize,
        rows: usize,
        bytes: usize,
        reservation: MemoryReservation,
    ) -> Result<Self> {
        let slots = (0..outputs)
            .map(|_| {
                Ok(Mutex::new(Slot {
                    builder: OutputBuilder::try_new(schema.clone()).map_err(external)?,
                    reserved: 0,
                    capacity: 0,
                }))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            slots,
            rows: rows.max(1),
            bytes: bytes.max(1),
            reservation,
            live: AtomicUsize::new(producers),
        })
    }

    fn lock(&self, p: usize) -> MutexGuard<'_, Slot> {
        self.slots[p].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends the outputs' rows of `from` to their builders, as `pass` left off, until a
    /// builder is full: that batch, finished, for the caller to queue before it calls again
    /// (so that a producer holds one finished batch at a time); `None` once every row of
    /// `from` is appended. A pass visits the outputs from the producer's own start (producers
    /// start apart, so that they seldom meet at one lock); a builder another producer holds is
    /// filled after the others. With `flush`, every builder this batch reached is finished
    /// (an unbounded input's rows are never held back for a next batch that may never come).
    pub(crate) fn next(
        &self,
        from: &GatheredBatch,
        pass: &mut Pass,
        flush: bool,
    ) -> Result<Option<Finished>> {
        let n = self.slots.len();
        loop {
            let p = match pass.step.checked_sub(n) {
                None => (pass.first + pass.step) % n,
                Some(b) => match pass.busy.get(b) {
                    Some(&p) => p,
                    None => return Ok(None),
                },
            };
            if pass.at >= from.rows(p) {
                pass.step += 1;
                pass.at = 0;
                continue;
            }
            // A builder is tried first, unless this pass is in the middle of its rows.
            let mut slot = if pass.step < n && pass.at == 0 {
                match self.slots[p].try_lock() {
                    Ok(slot) => slot,
                    Err(TryLockError::WouldBlock) => {
                        pass.busy.push(p);
                        pass.step += 1;
                        continue;
                    }
                    Err(TryLockError::Poisoned(e)) => e.into_inner(),
                }
            } else {
                self.lock(p)
            };
            let finished = self.fill(&mut slot, from, p, &mut pass.at, flush)?;
            if pass.at >= from.rows(p) {
                pass.step += 1;
                pass.at = 0;
            }
            if finished.is_some() {
                return Ok(finished);
            }
        }
    }

    /// Appends output `p`'s rows of `from` from row `at` on to its builder, until it is full:
    /// then that batch, finished.
    fn fill(
        &self,
        slot: &mut Slot,
        from: &GatheredBatch,
        p: usize,
        at: &mut usize,
        flush: bool,
    ) -> Result<Option<Finished>> {
        let received = from.rows(p);
        // What a row of this batch takes in a builder, on average: the rows a builder's share
        // of bytes has room for.
        let row_bytes = from.row_bytes();
        while *at < received {
            if slot.builder.held_bytes() == 0 {
                // A builder filling from nothing: room for a full batch of rows shaped as
                // these, at once (growing would double its buffers, and copy).
                slot.capacity = self.rows.min((self.bytes / row_bytes).max(1));
                if flush {
                    // Flushed with this batch: room for its rows only.
                    slot.capacity = slot.capacity.min(received - *at);
                }
                slot.builder.reserve(from, slot.capacity);
            }
            let room = (self.bytes.saturating_sub(slot.builder.bytes()) / row_bytes).max(1);
            let take = (slot.capacity - slot.builder.rows())
                .min(received - *at)
                .min(room);
            slot.builder
                .append(from, p, *at..*at + take)
                .map_err(external)?;
            *at += take;
            let full = slot.builder.rows() >= slot.capacity
                || slot.builder.bytes() + row_bytes > self.bytes;
            if full || (flush && *at == received) {
                return self.finish(slot, p).map(Some);
            }
        }
        self.settle(slot)?;
        Ok(None)
    }

    /// Finishes `slot`'s batch, its bytes reserved until it is queued. The builder gives its
    /// buffers to the batch and takes new ones with its next rows: until then it holds
    /// nothing.
    fn finish(&self, slot: &mut Slot, p: usize) -> Result<Finished> {
        let batch = slot.builder.finish(false).map_err(external)?;
        // The batch's buffers were the builder's: their reservation moves with them.
        let bytes = batch.get_array_memory_size();
        self.reservation.grow(bytes);
        self.settle(slot)?;
        Ok(Finished {
            output: p,
            batch,
            bytes,
        })
    }

    /// Brings the reservation of `slot` to what its builder holds.
    fn settle(&self, slot: &mut Slot) -> Result<()> {
        let held = slot.builder.held_bytes();
        if held > slot.reserved {
            self.reservation.try_grow(held - slot.reserved)?;
        } else {
            self.reservation.shrink(slot.reserved - held);
        }
        slot.reserved = held;
        Ok(())
    }

    /// A finished batch was queued (the exchange charges it now), or dropped.
    pub(crate) fn queued(&self, bytes: usize) {
        self.reservation.shrink(bytes);
    }

    /// A producer appends no more. The last one finishes every builder holding rows into
    /// `ready`, and every builder gives up its buffers.
    pub(crate) fn producer_done(&self, ready: &mut Vec<Finished>) -> Result<()> {
        if self.live.fetch_sub(1, Ordering::AcqRel) != 1 {
            return Ok(());
        }
        for p in 0..self.slots.len() {
            let mut slot = self.lock(p);
            if slot.builder.rows() > 0 {
                ready.push(self.finish(&mut slot, p)?);
            }
            slot.builder.release();
            self.settle(&mut slot)?;
        }
        Ok(())
    }
}

fn external(e: PartoutError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

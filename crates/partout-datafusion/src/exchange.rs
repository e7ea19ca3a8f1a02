//! The exchange between a repartition's producers (one task per input partition) and its
//! consumers (one stream per output partition): a queue per output and one byte budget for
//! them all, reserved from DataFusion's memory pool. A producer that finds the budget full
//! waits until consumers take rows (back-pressure): memory does not grow with a slow
//! consumer. Dropping every output stream drops the producers' tasks (cancellation); a
//! producer's error reaches every output.

use arrow_array::RecordBatch;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::physical_plan::metrics::Time;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// What an output found in its queue.
pub(crate) enum Taken {
    /// A batch of rows, and whether it is whole (handed over full: passed on as it is)
    /// rather than a remainder to gather with others.
    Rows(RecordBatch, bool),
    /// A producer failed.
    Failed(Arc<DataFusionError>),
    /// Every producer is done and the queue is empty.
    End,
    /// Nothing yet.
    Empty,
}

/// A batch handed to an output: the rows, the bytes they are charged, whether it is whole.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) output: usize,
    pub(crate) rows: RecordBatch,
    pub(crate) bytes: usize,
    pub(crate) whole: bool,
}

#[derive(Debug)]
struct State {
    /// Each output's batches, each with the bytes it is charged and whether it is whole.
    queues: Vec<VecDeque<Queued>>,
    /// Outputs whose stream was dropped: what comes for them is let go.
    closed: Vec<bool>,
    open: usize,
    /// Bytes held in the queues.
    held: usize,
    producers: usize,
    error: Option<Arc<DataFusionError>>,
}

/// The queues, the budget and the signals between producers and outputs.
#[derive(Debug)]
pub(crate) struct Exchange {
    state: Mutex<State>,
    budget: usize,
    reservation: MemoryReservation,
    /// Producers waiting for room.
    room: Notify,
    /// Each output waiting for rows.
    ready: Vec<Notify>,
}

impl Exchange {
    /// An exchange for `producers` producers and `outputs` outputs holding up to `budget`
    /// bytes, reserved through `reservation`.
    pub(crate) fn new(
        producers: usize,
        outputs: usize,
        budget: usize,
        reservation: MemoryReservation,
    ) -> Self {
        Self {
            state: Mutex::new(State {
                queues: (0..outputs).map(|_| VecDeque::new()).collect(),
                closed: vec![false; outputs],
                open: outputs,
                held: 0,
                producers,
                error: None,
            }),
            budget,
            reservation,
            room: Notify::new(),
            ready: (0..outputs).map(|_| Notify::new()).collect(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves counters, not broken invariants: go on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `batches`, then waits
    /// (timed by `send_time`) while the budget is passed. Returns false when every output is
    /// gone and the producer should stop.
    ///
    /// # Errors
    /// DataFusion's resources-exhausted error when the memory pool refuses the bytes.
    pub(crate) async fn push(&self, batches: &mut Vec<Queued>, send_time: &Time) -> Result<bool> {
        if batches.is_empty() {
            return Ok(self.lock().open > 0);
        }
        let bytes: usize = batches.iter().map(|q| q.bytes).sum();
        self.reservation.try_grow(bytes)?;
        {
            let mut state = self.lock();
            for queued in batches.drain(..) {
                let p = queued.output;
                if state.closed[p] {
                    self.reservation.shrink(queued.bytes);
                    continue;
                }
                state.held += queued.bytes;
                state.queues[p].push_back(queued);
                self.ready[p].notify_one();
            }
        }
        let _timer = send_time.timer();
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let state = self.lock();
                if state.open == 0 {
                    return Ok(false);
                }
                if state.held <= self.budget || state.error.is_some() {
                    return Ok(true);
                }
            }
            room.await;
        }
    }

    /// Output `p`'s next batch, or why there is none.
    pub(crate) fn take(&self, p: usize) -> Taken {
        let mut state = self.lock();
        if let Some(queued) = state.queues[p].pop_front() {
            state.held -= queued.bytes;
            drop(state);
            self.reservation.shrink(queued.bytes);
            self.room.notify_waiters();
            return Taken::Rows(queued.rows, queued.whole);
        }
        match (&state.error, state.producers) {
            (Some(e), _) => Taken::Failed(e.clone()),
            (None, 0) => Taken::End,
            (None, _) => Taken::Empty,
        }
    }

    /// Waits until output `p` may find something new: call [`take`](Self::take) again.
    pub(crate) async fn wait(&self, p: usize) {
        self.ready[p].notified().await;
    }

    /// Output `p`'s stream is gone: its rows are let go, and producers stop once no output
    /// is left.
    pub(crate) fn close(&self, p: usize) {
        let mut state = self.lock();
        if state.closed[p] {
            return;
        }
        state.closed[p] = true;
        state.open -= 1;
        let freed: usize = state.queues[p].drain(..).map(|q| q.bytes).sum();
        state.held -= freed;
        drop(state);
        self.reservation.shrink(freed);
        self.room.notify_waiters();
    }

    /// A producer ended, with `result`: the first error reaches every output.
    pub(crate) fn producer_done(&self, result: Result<()>) {
        let mut state = self.lock();
        state.producers = state.producers.saturating_sub(1);
        if let Err(e) = result
            && state.error.is_none()
        {
            state.error = Some(Arc::new(e));
        }
        drop(state);
        for ready in &self.ready {
            ready.notify_one();
        }
        self.room.notify_waiters();
    }
}

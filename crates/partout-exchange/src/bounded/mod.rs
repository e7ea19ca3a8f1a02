//! [`BoundedExchange`]: N producers to M outputs within one byte budget, never stuck.
//!
//! ```text
//!  producer ─ push(p, item) ─► budget has room ─────────────► output p's queue (memory)
//!                            └► full, a consumer waits on an
//!                               output with nothing for it ─► spill file ─► output p's queue
//!                               (p's own consumer waits: the newest item of the output
//!                               holding most memory goes to the spill file instead, and
//!                               the item is queued in memory)
//!                            └► full, every waiting consumer
//!                               has something to take ──────► wait for room
//!  consumer ◄─ next(p, from) / take(p): items in order, spilled ones read back; ack frees
//! ```
//!
//! The three promises, and how they are kept:
//! - **Memory stays within the budget.** Items in memory are charged what the producer says
//!   they hold ([`Item::bytes`]); an item that would pass the budget is queued only when
//!   nothing else is held. An optional [`Account`] (a memory pool) must grant every byte too;
//!   an item it refuses is spilled.
//! - **Every item arrives once, in order per output.** Sequences number each output's items;
//!   a consumer reads from any sequence not yet acknowledged, and an acknowledgement frees
//!   what is before it. A producer's failure ends the exchange in its error for everyone:
//!   never a short output that looks complete.
//! - **No consumer waits forever.** A producer waits for room only while every consumer
//!   waiting has something to take. When one waits on an output with nothing for it, the
//!   producer spills instead: after letting the other tasks run once when memory is held
//!   for an output no consumer has asked for yet (outputs read one after another, one never
//!   read), and after waiting
//!   [`BoundedOptions::patience`] for room otherwise (consumers that are only slow make room
//!   first, and nothing is spilled). Without a spill file, or past its limit, that is
//!   [`ExchangeError::ResourcesExhausted`]: an error, never a hang. Every order of reading
//!   the outputs completes (the interleaving test in `model.rs` walks every order of a small
//!   exchange's steps).
//!
//! The state and every decision are in `state.rs`, with no locks or IO; this file adds the
//! lock, the one push loop and the spill IO, which runs outside the lock. How that loop waits
//! for room, blocking the thread or as a task (both through `event-listener`), is `wait.rs`.

mod error;
mod item;
mod options;
mod spill;
mod state;
mod wait;

#[cfg(test)]
mod model;

pub use error::{Cause, ExchangeError};
pub use item::{Account, Item};
pub use options::{BoundedOptions, ExchangeMetrics, Fetched, OutputStatus};
pub use spill::{SpillMetrics, SpillTarget, spill_batch, unspill_batch};

use event_listener::{Event, EventListener};
use spill::SpillFile;
use state::{Found, Offer, Patience, State, Stored, Wake};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use wait::Waiter;

/// N producers to M outputs within one byte budget: see the [module](self) docs.
pub struct BoundedExchange<T> {
    state: Mutex<State<T>>,
    patience: Duration,
    spill: Option<SpillFile>,
    account: Option<Arc<dyn Account>>,
    /// Producers waiting for room (or for a consumer to starve).
    room: Event,
    /// Per output: an item arrived, the output closed or the exchange ended.
    arrivals: Vec<Event>,
}

impl<T> fmt::Debug for BoundedExchange<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundedExchange")
            .field("outputs", &self.arrivals.len())
            .field("spill", &self.spill)
            .finish_non_exhaustive()
    }
}

/// A consumer's wait on an output, counted while it lasts.
struct Waiting<'a, T: Item> {
    exchange: &'a BoundedExchange<T>,
    output: usize,
}

impl<T: Item> Drop for Waiting<'_, T> {
    fn drop(&mut self) {
        self.exchange.lock().wait_ends(self.output);
    }
}

/// What a push found under the lock.
enum Step<T> {
    Done,
    Spill,
    /// Write this queued item to the spill file to make room, then try again.
    Evict(usize, u64, T),
    /// Wait for room, as long as the patience says, on the listener (taken before the
    /// state was looked at: see [`BoundedExchange::attempt`]).
    Wait(Option<EventListener>, Patience),
}

impl<T: Item> BoundedExchange<T> {
    /// An exchange as `options` say.
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] for no outputs, no producers or a zero budget.
    pub fn try_new(options: BoundedOptions) -> Result<Self, ExchangeError> {
        if options.outputs == 0 || options.producers == 0 || options.budget_bytes == 0 {
            return Err(ExchangeError::InvalidArgument(format!(
                "an exchange needs outputs, producers and a budget (got {}, {} and {} bytes)",
                options.outputs, options.producers, options.budget_bytes
            )));
        }
        let can_spill = options.spill.is_some();
        Ok(Self {
            patience: options.patience,
            state: Mutex::new(State::new(
                options.outputs,
                options.producers,
                options.budget_bytes,
                can_spill,
            )),
            spill: options.spill.map(SpillFile::new),
            account: options.account,
            room: Event::new(),
            arrivals: (0..options.outputs).map(|_| Event::new()).collect(),
        })
    }

    /// Outputs.
    pub fn outputs(&self) -> usize {
        self.arrivals.len()
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // The state's methods leave it whole at every return: a panic elsewhere while the
        // lock was held breaks nothing.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check(&self, p: usize) -> Result<usize, ExchangeError> {
        match p < self.outputs() {
            true => Ok(p),
            false => Err(ExchangeError::NotFound(format!(
                "no output {p} of {} outputs",
                self.outputs()
            ))),
        }
    }

    fn wake(&self, wake: Wake) {
        if wake.freed > 0
            && let Some(account) = &self.account
        {
            account.shrink(wake.freed);
        }
        if wake.room {
            self.room.notify(usize::MAX);
        }
        if let Some(p) = wake.output {
            self.arrivals[p].notify(usize::MAX);
        }
        if wake.all_outputs {
            for arrival in &self.arrivals {
                arrival.notify(usize::MAX);
            }
        }
    }

    /// Ends the exchange in `error` and returns it.
    fn end_in(&self, error: ExchangeError) -> ExchangeError {
        let wake = self.lock().end(error.clone());
        self.wake(wake);
        error
    }

    /// One attempt to queue `item`: queued (or let go), to spill, or to wait.
    fn step(
        &self,
        p: usize,
        item: &mut Option<T>,
        patience_expired: bool,
    ) -> Result<Step<T>, ExchangeError> {
        let mut state = self.lock();
        let bytes = item.as_ref().map_or(0, Item::bytes);
        let offer = match state.offer(p, bytes, patience_expired) {
            Ok(offer) => offer,
            // Waiting could wait forever and nothing may spill: the exchange ends, for
            // every consumer too.
            Err(e @ ExchangeError::ResourcesExhausted(_)) => {
                drop(state);
                return Err(self.end_in(e));
            }
            Err(e) => return Err(e),
        };
        match offer {
            Offer::Dropped => {
                let rows = item.take().map_or(0, |i| i.rows());
                state.let_go(p, bytes, rows);
                Ok(Step::Done)
            }
            Offer::Memory => {
                if let Some(account) = &self.account
                    && let Err(why) = account.try_grow(bytes)
                {
                    drop(state);
                    return match self.spill.is_some() {
                        true => Ok(Step::Spill),
                        false => Err(self.end_in(ExchangeError::ResourcesExhausted(why))),
                    };
                }
                let item = item.take().expect("an item to queue");
                let rows = item.rows();
                let wake = state.enqueue(p, Stored::Memory(item), bytes, rows).1;
                drop(state);
                self.wake(wake);
                Ok(Step::Done)
            }
            Offer::Spill => Ok(Step::Spill),
            Offer::Evict {
                output,
                sequence,
                item,
            } => Ok(Step::Evict(output, sequence, item)),
            Offer::Wait(patience) => Ok(Step::Wait(None, patience)),
        }
    }

    /// [`step`](Self::step), and when it says wait, a listener for room taken and the step
    /// tried again before waiting on it (no wake-up between the two is lost; no listener is
    /// made while there is room).
    fn attempt(
        &self,
        p: usize,
        item: &mut Option<T>,
        patience_expired: bool,
    ) -> Result<Step<T>, ExchangeError> {
        match self.step(p, item, patience_expired)? {
            Step::Wait(None, _) => {
                let listener = self.room.listen();
                Ok(match self.step(p, item, patience_expired)? {
                    Step::Wait(None, patience) => Step::Wait(Some(listener), patience),
                    other => other,
                })
            }
            other => Ok(other),
        }
    }

    /// Writes `item` at the spill file's end (outside the lock); a failure ends the exchange.
    fn write_spilled(&self, item: &T) -> Result<state::Spilled, ExchangeError> {
        let spill = self
            .spill
            .as_ref()
            .expect("spilling only with a spill file");
        let mut bytes = Vec::new();
        item.spill(&mut bytes)
            .and_then(|()| spill.write(&bytes))
            .map_err(|e| self.end_in(e))
    }

    /// Writes `item` to the spill file and queues it there.
    fn spill_item(&self, p: usize, item: T) -> Result<(), ExchangeError> {
        let at = self.write_spilled(&item)?;
        let wake = self
            .lock()
            .enqueue(p, Stored::Spilled(at), item.bytes(), item.rows())
            .1;
        self.wake(wake);
        Ok(())
    }

    /// Writes `item`, queued at `sequence` of `output`, to the spill file and serves it from
    /// there, freeing its memory.
    fn evict(&self, output: usize, sequence: u64, item: &T) -> Result<(), ExchangeError> {
        let at = self.write_spilled(item)?;
        let wake = self.lock().evicted(output, sequence, at);
        self.wake(wake);
        Ok(())
    }

    /// Queues `item` at the end of output `p`, waiting (blocking the thread) while the budget
    /// is full and every waiting consumer has something to take. An item for a closed output
    /// is let go.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for no such output; the exchange's end; the spill file's.
    pub fn push(&self, p: usize, item: T) -> Result<(), ExchangeError> {
        // Each wait blocks the thread inside the poll: the push is done when first polled.
        wait::block_on(self.push_waiting(p, item, Waiter::Thread))
    }

    /// As [`push`](Self::push), waiting asynchronously.
    ///
    /// # Errors
    /// As [`push`](Self::push).
    pub async fn push_async(&self, p: usize, item: T) -> Result<(), ExchangeError> {
        self.push_waiting(p, item, Waiter::Task).await
    }

    /// The push, waiting for room as `waiter` does.
    async fn push_waiting(&self, p: usize, item: T, waiter: Waiter) -> Result<(), ExchangeError> {
        let p = self.check(p)?;
        let mut item = Some(item);
        let mut expired = false;
        loop {
            match self.attempt(p, &mut item, expired)? {
                Step::Done => return Ok(()),
                Step::Spill => return self.spill_item(p, item.take().expect("an item")),
                Step::Evict(output, sequence, victim) => self.evict(output, sequence, &victim)?,
                Step::Wait(_, Patience::Yield) => {
                    waiter.yield_now().await;
                    expired = true;
                }
                Step::Wait(None, _) => {}
                Step::Wait(Some(listener), Patience::Endless) => waiter.wait(listener).await,
                Step::Wait(Some(listener), Patience::Bounded) => {
                    expired = waiter.wait_at_most(listener, self.patience).await;
                }
            }
        }
    }

    fn load(&self, stored: Stored<T>) -> Result<T, ExchangeError> {
        match stored {
            Stored::Memory(item) => Ok(item),
            Stored::Spilled(at) => {
                let spill = self
                    .spill
                    .as_ref()
                    .expect("spilled items only with a spill file");
                T::unspill(&spill.read(at)?)
            }
        }
    }

    /// Output `p`'s items from sequence `from`, up to `max_bytes` of them (at least one when
    /// any is there), without waiting: none, not complete, when nothing is there yet.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`], [`ExchangeError::Freed`] for a sequence acknowledged
    /// already, the exchange's end, the spill file's.
    pub fn try_fetch(
        &self,
        p: usize,
        from: u64,
        max_bytes: usize,
    ) -> Result<Fetched<T>, ExchangeError> {
        let p = self.check(p)?;
        let (stored, next, complete) = {
            let mut state = self.lock();
            state.polled(p);
            let (stored, next) = state.find_many(p, from, max_bytes)?;
            let complete = matches!(state.find(p, next)?, Found::End);
            (stored, next, complete)
        };
        let items = stored
            .into_iter()
            .map(|s| self.load(s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Fetched {
            items,
            next,
            complete,
        })
    }

    /// As [`try_fetch`](Self::try_fetch), waiting until there is at least one item or nothing
    /// follows. While it waits, producers spill rather than wait for room. Dropping the
    /// future ends the wait.
    ///
    /// # Errors
    /// As [`try_fetch`](Self::try_fetch).
    pub async fn fetch(
        &self,
        p: usize,
        from: u64,
        max_bytes: usize,
    ) -> Result<Fetched<T>, ExchangeError> {
        let p = self.check(p)?;
        loop {
            if self.wait_for(p, from).await? {
                return self.try_fetch(p, from, max_bytes);
            }
        }
    }

    /// Whether output `p` has an item at `from` or nothing follows; when neither, waits until
    /// something may have changed (a listener is taken, and the state looked at again, before
    /// the wait: no wake-up is lost) and says false.
    async fn wait_for(&self, p: usize, from: u64) -> Result<bool, ExchangeError> {
        let ready = |state: &mut State<T>| -> Result<bool, ExchangeError> {
            state.polled(p);
            Ok(!matches!(state.find(p, from)?, Found::Empty))
        };
        if ready(&mut self.lock())? {
            return Ok(true);
        }
        let listener = self.arrivals[p].listen();
        let wake = {
            let mut state = self.lock();
            if ready(&mut state)? {
                return Ok(true);
            }
            state.wait_begins(p, from)
        };
        let _waiting = Waiting {
            exchange: self,
            output: p,
        };
        self.wake(wake);
        listener.await;
        Ok(false)
    }

    /// Output `p`'s next item, acknowledged as it is taken (one consumer per output); `None`
    /// when nothing follows.
    ///
    /// # Errors
    /// As [`fetch`](Self::fetch).
    pub async fn take(&self, p: usize) -> Result<Option<T>, ExchangeError> {
        let p = self.check(p)?;
        loop {
            let taken = {
                let mut state = self.lock();
                state.polled(p);
                let from = state.range(p).0;
                match state.find(p, from)? {
                    Found::Item(stored) => Some((stored, state.ack(p, from + 1)?)),
                    Found::End => return Ok(None),
                    Found::Empty => None,
                }
            };
            if let Some((stored, wake)) = taken {
                self.wake(wake);
                return self.load(stored).map(Some);
            }
            let from = self.lock().range(p).0;
            self.wait_for(p, from).await?;
        }
    }

    /// Frees output `p`'s items before sequence `next`.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`]; [`ExchangeError::InvalidArgument`] for a sequence not
    /// produced yet.
    pub fn ack(&self, p: usize, next: u64) -> Result<(), ExchangeError> {
        let p = self.check(p)?;
        let wake = self.lock().ack(p, next)?;
        self.wake(wake);
        Ok(())
    }

    /// Output `p`'s consumer is gone: its items are freed and what comes for it is let go.
    /// Returns whether every output is closed now (producers may stop).
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`].
    pub fn close(&self, p: usize) -> Result<bool, ExchangeError> {
        let p = self.check(p)?;
        let (wake, all) = {
            let mut state = self.lock();
            (state.close(p), state.all_closed())
        };
        self.wake(wake);
        Ok(all)
    }

    /// Whether every output is closed.
    pub fn all_closed(&self) -> bool {
        self.lock().all_closed()
    }

    /// A producer finished its part.
    pub fn producer_finished(&self) {
        let wake = self.lock().producer_finished();
        self.wake(wake);
    }

    /// A producer failed: the exchange ends in `error` for every consumer and producer (the
    /// first error counts), as [`ExchangeError::producer_failed`] says.
    pub fn fail(&self, error: Cause) {
        self.end_in(ExchangeError::producer_failed(error));
    }

    /// Cancels the exchange: its queues are freed, and everyone gets
    /// [`ExchangeError::Cancelled`] from now on.
    pub fn cancel(&self, why: impl Into<String>) {
        self.end_in(ExchangeError::Cancelled(why.into()));
    }

    /// The error the exchange ended in, if it failed or was cancelled.
    ///
    /// # Errors
    /// That error.
    pub fn check_open(&self) -> Result<(), ExchangeError> {
        self.lock().failed()
    }

    /// Whether the exchange is over: complete, failed or cancelled.
    pub fn is_over(&self) -> bool {
        self.lock().is_over()
    }

    /// Whether the exchange completed and every item of every output was acknowledged or let
    /// go: nothing is left to give.
    pub fn is_drained(&self) -> bool {
        self.lock().is_drained()
    }

    /// Output `p`'s totals.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`].
    pub fn status(&self, p: usize) -> Result<OutputStatus, ExchangeError> {
        let p = self.check(p)?;
        let (rows, bytes, complete) = self.lock().status(p);
        Ok(OutputStatus {
            rows,
            bytes,
            complete,
        })
    }

    /// Bytes output `p` holds from sequence `from` on (in memory or spilled).
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`].
    pub fn remaining_bytes(&self, p: usize, from: u64) -> Result<u64, ExchangeError> {
        let p = self.check(p)?;
        Ok(self.lock().remaining_bytes(p, from))
    }

    /// Memory and spilling so far.
    pub fn metrics(&self) -> ExchangeMetrics {
        let (held_bytes, peak_held_bytes) = {
            let state = self.lock();
            (state.held(), state.peak())
        };
        ExchangeMetrics {
            held_bytes,
            peak_held_bytes,
            spill: self
                .spill
                .as_ref()
                .map(SpillFile::metrics)
                .unwrap_or_default(),
        }
    }
}

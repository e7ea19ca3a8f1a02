//! The exchange's state, with no locks, waits or IO: every decision the exchange makes is a
//! method here, and each returns what it changed for whom ([`Wake`]), so that the waiting
//! layer (`mod.rs`) and the exhaustive interleaving test (`model.rs`) drive the same code.

use super::ExchangeError;
use std::collections::VecDeque;

/// Where a spilled item's bytes are in the spill file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spilled {
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

/// A queued item: in memory, or in the spill file.
#[derive(Debug, Clone)]
pub(crate) enum Stored<T> {
    Memory(T),
    Spilled(Spilled),
}

#[derive(Debug, Clone)]
struct Entry<T> {
    stored: Stored<T>,
    /// The memory it is charged while in memory (0 once spilled).
    memory: usize,
    /// What it is charged as a message, wherever it is (for `remaining_bytes`).
    bytes: usize,
    /// A producer is writing it to the spill file to make room.
    evicting: bool,
}

/// One output's queue: the items from sequence `first` on.
#[derive(Debug, Clone)]
struct Queue<T> {
    entries: VecDeque<Entry<T>>,
    first: u64,
    memory: usize,
    /// Its consumer is gone: what comes for it is let go.
    closed: bool,
    /// Consumers waiting on it for an item, and the furthest sequence one of them waits
    /// for: the output starves while no item is there for it.
    waiters: usize,
    wanted: u64,
    /// A consumer has asked it for items.
    polled: bool,
    rows_total: u64,
    bytes_total: u64,
}

impl<T> Queue<T> {
    fn end(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    fn starving(&self) -> bool {
        !self.closed && self.waiters > 0 && self.end() <= self.wanted
    }
}

/// How the exchange ended, if it has.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Open,
    /// Every producer finished.
    Complete,
    /// A producer failed, or spilling failed: every consumer and producer gets the error.
    Ended(ExchangeError),
}

/// What a push may do with an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Offer<T> {
    /// Queue it in memory: the budget has room.
    Memory,
    /// Write it to the spill file, then queue it there: the budget is full and a consumer
    /// waits on an output with nothing for it, so waiting could wait forever.
    Spill,
    /// Make room first: write `item`, queued at `sequence` of `output`, to the spill file
    /// (see [`State::evicted`]), then offer again. The budget is full and the consumer of
    /// the item's own output waits for it: it should get it from memory, and the newest
    /// item of the output holding most memory goes to disk instead.
    Evict {
        output: usize,
        sequence: u64,
        item: T,
    },
    /// Wait for room, then offer again.
    Wait(Patience),
    /// Its output is closed: let it go.
    Dropped,
}

/// How long a producer waits for room before it offers again with its patience run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Patience {
    /// Until room comes: every waiting consumer has something to take.
    Endless,
    /// Up to the exchange's patience: a consumer waits on an output with nothing for it,
    /// and the consumers holding the budget have asked for items before (they may be slow,
    /// or gone).
    Bounded,
    /// Only while the other tasks on its thread run once: a consumer waits on an output with
    /// nothing for it, and memory is held for outputs nobody has asked for yet. Their
    /// consumers may just not have run yet (a producer that never waits would keep them
    /// from running), or may come only after the waiting one is done.
    Yield,
}

/// What a consumer found at a sequence.
#[derive(Debug)]
pub(crate) enum Found<T> {
    Item(Stored<T>),
    /// Nothing follows: every producer finished, or the output was closed.
    End,
    /// Nothing yet.
    Empty,
}

/// Who should be woken after a change: producers waiting for room, consumers of one output
/// or of every output. Applied after the state's lock is let go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub(crate) struct Wake {
    pub(crate) room: bool,
    pub(crate) output: Option<usize>,
    pub(crate) all_outputs: bool,
    /// Memory the exchange no longer holds (to give back to a memory pool).
    pub(crate) freed: usize,
}

/// The exchange's queues, budget and outcome.
#[derive(Debug, Clone)]
pub(crate) struct State<T> {
    queues: Vec<Queue<T>>,
    budget: usize,
    held: usize,
    peak: usize,
    producers: usize,
    finished: usize,
    can_spill: bool,
    outcome: Outcome,
}

impl<T: Clone> State<T> {
    pub(crate) fn new(outputs: usize, producers: usize, budget: usize, can_spill: bool) -> Self {
        Self {
            queues: (0..outputs)
                .map(|_| Queue {
                    entries: VecDeque::new(),
                    first: 0,
                    memory: 0,
                    closed: false,
                    waiters: 0,
                    wanted: 0,
                    polled: false,
                    rows_total: 0,
                    bytes_total: 0,
                })
                .collect(),
            budget,
            held: 0,
            peak: 0,
            producers,
            finished: 0,
            can_spill,
            outcome: Outcome::Open,
        }
    }

    pub(crate) fn held(&self) -> usize {
        self.held
    }

    pub(crate) fn peak(&self) -> usize {
        self.peak
    }

    pub(crate) fn failed(&self) -> Result<(), ExchangeError> {
        match &self.outcome {
            Outcome::Ended(e) => Err(e.clone()),
            Outcome::Open | Outcome::Complete => Ok(()),
        }
    }

    /// What a producer may do with an item of `bytes` for output `p`: queue it while the
    /// budget has room (an item alone passes when nothing is held). Past the budget it waits
    /// for room while no consumer waits on an output with nothing for it. When one does, the
    /// consumers holding the budget may be slow or may never come back:
    /// - when memory is held for an output no consumer has asked for yet (outputs read one
    ///   after another, or one never read), it lets the other tasks run once
    ///   ([`Patience::Yield`]), then spills;
    /// - otherwise it waits for room up to the exchange's patience, then spills.
    ///
    /// `patience_expired` says the producer waited as the last offer said and no room came.
    ///
    /// # Errors
    /// The exchange's end; [`ExchangeError::ResourcesExhausted`] when it should spill and
    /// cannot (no spill file): an error, never a wait that may not end.
    pub(crate) fn offer(
        &mut self,
        p: usize,
        bytes: usize,
        patience_expired: bool,
    ) -> Result<Offer<T>, ExchangeError> {
        self.failed()?;
        if self.queues[p].closed {
            return Ok(Offer::Dropped);
        }
        if self.held == 0 || self.held + bytes <= self.budget {
            return Ok(Offer::Memory);
        }
        if !self.queues.iter().any(Queue::starving) {
            return Ok(Offer::Wait(Patience::Endless));
        }
        if !patience_expired {
            let unasked = self
                .queues
                .iter()
                .any(|q| !q.polled && !q.closed && q.memory > 0);
            return Ok(Offer::Wait(match unasked {
                true => Patience::Yield,
                false => Patience::Bounded,
            }));
        }
        if self.can_spill
            && self.queues[p].starving()
            && let Some(evict) = self.victim()
        {
            return Ok(evict);
        }
        match self.can_spill {
            true => Ok(Offer::Spill),
            false => Err(ExchangeError::ResourcesExhausted(format!(
                "{} bytes are held (the budget is {}), a consumer waits on an output with \
                 nothing for it, and there is no disk to spill to",
                self.held, self.budget
            ))),
        }
    }

    /// The newest item in memory, not being evicted already, of the output holding most
    /// memory among those not starving, marked as being evicted.
    fn victim(&mut self) -> Option<Offer<T>> {
        let output = (0..self.queues.len())
            .filter(|&q| !self.queues[q].starving() && self.queues[q].memory > 0)
            .max_by_key(|&q| self.queues[q].memory)?;
        let queue = &mut self.queues[output];
        let first = queue.first;
        let (at, entry) = queue
            .entries
            .iter_mut()
            .enumerate()
            .rev()
            .find(|(_, e)| matches!(e.stored, Stored::Memory(_)) && !e.evicting)?;
        let Stored::Memory(item) = &entry.stored else {
            return None;
        };
        entry.evicting = true;
        Some(Offer::Evict {
            output,
            sequence: first + at as u64,
            item: item.clone(),
        })
    }

    /// The item at `sequence` of `output` was written to the spill file at `at`: it is
    /// served from there now, and its memory is free (nothing changes when it was taken or
    /// let go meanwhile).
    pub(crate) fn evicted(&mut self, output: usize, sequence: u64, at: Spilled) -> Wake {
        let queue = &mut self.queues[output];
        if sequence < queue.first || sequence >= queue.end() {
            return Wake::default();
        }
        let entry = &mut queue.entries[(sequence - queue.first) as usize];
        if !matches!(entry.stored, Stored::Memory(_)) {
            return Wake::default();
        }
        let freed = entry.memory;
        entry.stored = Stored::Spilled(at);
        entry.memory = 0;
        entry.evicting = false;
        queue.memory -= freed;
        self.held -= freed;
        Wake {
            room: true,
            freed,
            ..Wake::default()
        }
    }

    /// Queues `stored` (charged `memory` while in memory, `bytes` as a message, `rows` rows)
    /// at the end of output `p`; let go when the output is closed or the exchange ended.
    /// Returns whether it was queued.
    pub(crate) fn enqueue(
        &mut self,
        p: usize,
        stored: Stored<T>,
        bytes: usize,
        rows: u64,
    ) -> (bool, Wake) {
        let memory = match stored {
            Stored::Memory(_) => bytes,
            Stored::Spilled(_) => 0,
        };
        let queue = &mut self.queues[p];
        queue.rows_total += rows;
        queue.bytes_total += bytes as u64;
        if queue.closed || matches!(self.outcome, Outcome::Ended(_)) {
            let wake = Wake {
                freed: memory,
                ..Wake::default()
            };
            return (false, wake);
        }
        queue.entries.push_back(Entry {
            stored,
            memory,
            bytes,
            evicting: false,
        });
        queue.memory += memory;
        self.held += memory;
        self.peak = self.peak.max(self.held);
        let wake = Wake {
            output: Some(p),
            ..Wake::default()
        };
        (true, wake)
    }

    /// An item of `bytes` and `rows` for closed output `p` was let go: counted in its
    /// totals only.
    pub(crate) fn let_go(&mut self, p: usize, bytes: usize, rows: u64) {
        let queue = &mut self.queues[p];
        queue.rows_total += rows;
        queue.bytes_total += bytes as u64;
    }

    /// A consumer asked output `p` for items.
    pub(crate) fn polled(&mut self, p: usize) {
        self.queues[p].polled = true;
    }

    /// Whether a consumer waits on an output with nothing for it.
    #[cfg(test)]
    pub(crate) fn any_starving(&self) -> bool {
        self.queues.iter().any(Queue::starving)
    }

    /// What output `p` holds at sequence `from`.
    ///
    /// # Errors
    /// The exchange's end; [`ExchangeError::Freed`] for a sequence acknowledged already.
    pub(crate) fn find(&self, p: usize, from: u64) -> Result<Found<T>, ExchangeError> {
        self.failed()?;
        let queue = &self.queues[p];
        if from < queue.first {
            return Err(ExchangeError::Freed(format!(
                "output {p} from sequence {from}: items before {} were acknowledged",
                queue.first
            )));
        }
        if from < queue.end() {
            let entry = &queue.entries[(from - queue.first) as usize];
            return Ok(Found::Item(entry.stored.clone()));
        }
        match queue.closed || matches!(self.outcome, Outcome::Complete) {
            true => Ok(Found::End),
            false => Ok(Found::Empty),
        }
    }

    /// Output `p`'s items from `from` on, up to `max_bytes` of them (at least one when any is
    /// there), with the sequence after the last.
    pub(crate) fn find_many(
        &self,
        p: usize,
        from: u64,
        max_bytes: usize,
    ) -> Result<(Vec<Stored<T>>, u64), ExchangeError> {
        let mut items = Vec::new();
        let mut next = from;
        let mut bytes = 0;
        while let Found::Item(stored) = self.find(p, next)? {
            let size = self.queues[p].entries[(next - self.queues[p].first) as usize].bytes;
            if !items.is_empty() && bytes + size > max_bytes {
                break;
            }
            bytes += size;
            items.push(stored);
            next += 1;
        }
        Ok((items, next))
    }

    /// A consumer starts waiting on output `p` for sequence `from`: producers are woken, as
    /// the output may now starve and a producer waiting for room should spill instead.
    pub(crate) fn wait_begins(&mut self, p: usize, from: u64) -> Wake {
        let queue = &mut self.queues[p];
        queue.waiters += 1;
        queue.wanted = match queue.waiters {
            1 => from,
            _ => queue.wanted.max(from),
        };
        Wake {
            room: queue.starving(),
            ..Wake::default()
        }
    }

    /// A consumer stopped waiting on output `p` (woken, or its wait was dropped): each
    /// [`wait_begins`](Self::wait_begins) is matched by one.
    pub(crate) fn wait_ends(&mut self, p: usize) {
        let queue = &mut self.queues[p];
        queue.waiters -= 1;
    }

    /// Frees output `p`'s items before sequence `next`.
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] for a sequence past what was produced.
    pub(crate) fn ack(&mut self, p: usize, next: u64) -> Result<Wake, ExchangeError> {
        let queue = &mut self.queues[p];
        if next > queue.end() && !queue.closed {
            return Err(ExchangeError::InvalidArgument(format!(
                "acknowledging output {p} up to sequence {next}, past the {} produced",
                queue.end()
            )));
        }
        let mut freed = 0;
        let mut popped = false;
        while queue.first < next {
            let Some(entry) = queue.entries.pop_front() else {
                break;
            };
            freed += entry.memory;
            queue.first += 1;
            popped = true;
        }
        queue.memory -= freed;
        self.held -= freed;
        Ok(Wake {
            room: popped,
            freed,
            ..Wake::default()
        })
    }

    /// Output `p`'s consumer is gone: its items are let go, and what comes for it later.
    pub(crate) fn close(&mut self, p: usize) -> Wake {
        let queue = &mut self.queues[p];
        queue.closed = true;
        let freed = queue.memory;
        queue.first = queue.end();
        queue.entries.clear();
        queue.memory = 0;
        self.held -= freed;
        Wake {
            room: true,
            output: Some(p),
            freed,
            ..Wake::default()
        }
    }

    /// Whether every output is closed (producers may stop).
    pub(crate) fn all_closed(&self) -> bool {
        self.queues.iter().all(|q| q.closed)
    }

    /// A producer finished its part.
    pub(crate) fn producer_finished(&mut self) -> Wake {
        self.finished += 1;
        if self.finished >= self.producers && matches!(self.outcome, Outcome::Open) {
            self.outcome = Outcome::Complete;
            return Wake {
                room: true,
                all_outputs: true,
                ..Wake::default()
            };
        }
        Wake::default()
    }

    /// The exchange ends in `error` (the first end counts): every queue is freed, and every
    /// consumer and producer gets the error from now on.
    pub(crate) fn end(&mut self, error: ExchangeError) -> Wake {
        if matches!(self.outcome, Outcome::Ended(_)) {
            return Wake::default();
        }
        self.outcome = Outcome::Ended(error);
        let mut freed = 0;
        for queue in &mut self.queues {
            freed += queue.memory;
            queue.first = queue.end();
            queue.entries.clear();
            queue.memory = 0;
        }
        self.held = 0;
        Wake {
            room: true,
            all_outputs: true,
            freed,
            ..Wake::default()
        }
    }

    /// Output `p`'s rows and bytes so far, and whether it is complete.
    pub(crate) fn status(&self, p: usize) -> (u64, u64, bool) {
        let queue = &self.queues[p];
        let complete = matches!(self.outcome, Outcome::Complete);
        (queue.rows_total, queue.bytes_total, complete)
    }

    /// Bytes output `p` holds from sequence `from` on, in memory or spilled.
    pub(crate) fn remaining_bytes(&self, p: usize, from: u64) -> u64 {
        let queue = &self.queues[p];
        let skip = from.saturating_sub(queue.first) as usize;
        queue
            .entries
            .iter()
            .skip(skip)
            .map(|e| e.bytes as u64)
            .sum()
    }

    /// The first sequence output `p` still holds and the one after its last.
    pub(crate) fn range(&self, p: usize) -> (u64, u64) {
        (self.queues[p].first, self.queues[p].end())
    }

    /// Panics unless the counts agree with the queues: each output's memory is the sum of
    /// its items in memory, the exchange's the sum of the outputs', and only items in memory
    /// are charged (the interleaving test checks this after every step).
    #[cfg(test)]
    pub(crate) fn check_counts(&self) {
        let mut held = 0;
        for (p, queue) in self.queues.iter().enumerate() {
            let mut memory = 0;
            for entry in &queue.entries {
                match entry.stored {
                    Stored::Memory(_) => assert_eq!(entry.memory, entry.bytes, "output {p}"),
                    Stored::Spilled(_) => assert_eq!(entry.memory, 0, "output {p}"),
                }
                memory += entry.memory;
            }
            assert_eq!(queue.memory, memory, "output {p}'s memory");
            held += memory;
        }
        assert_eq!(self.held, held, "memory held");
    }

    /// Whether the exchange ended (any way).
    pub(crate) fn is_over(&self) -> bool {
        !matches!(self.outcome, Outcome::Open)
    }

    /// Every producer finished and every output's items were acknowledged (or let go).
    pub(crate) fn is_drained(&self) -> bool {
        matches!(self.outcome, Outcome::Complete)
            && self.queues.iter().all(|q| q.entries.is_empty())
    }
}

//! [`LiveExchange`]: producers fill per-destination queues of encoded messages within one byte
//! budget while consumers read them.
//!
//! ```text
//!  Producer::push(p, message) ─► queue p: [first … end)   ─► consumers read from any sequence ≥ first
//!        │ blocks while the queues hold ≥ budget bytes         ack(p, s) frees every message < s
//!  all producers finished ─► complete; one failed ─► failed (consumers get its error); cancel ─► cancelled
//! ```
//!
//! A message stays queued until it is acknowledged, so a consumer that lost its connection
//! asks again from its last sequence and gets the rest. Memory never passes the budget: a
//! producer waits until acknowledgements make room (a single message larger than the budget
//! passes alone, when the queues are empty).

use crate::error::{ExchangeError, Result};
use crate::message::{Message, MessageEncoder};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_core::ids::Partitioning;
use partout_exchange::{BatchSink, PartitionedWriter, WriterError, WriterOptions};
use partout_format::Encoding;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// How a live exchange is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveOptions {
    /// Destinations.
    pub partitions: u32,
    /// Producers that will join; the exchange is complete when all of them have finished.
    pub producers: usize,
    /// The most bytes of messages the queues hold together (unacknowledged ones included).
    pub budget_bytes: usize,
    /// How messages are encoded.
    pub encoding: Encoding,
}

impl LiveOptions {
    /// `partitions` destinations fed by `producers` producers, within 64 MiB, as uncompressed
    /// Arrow IPC.
    pub fn new(partitions: u32, producers: usize) -> Self {
        Self {
            partitions,
            producers,
            budget_bytes: 64 << 20,
            encoding: Encoding::default(),
        }
    }

    /// With a budget of `bytes`.
    pub fn with_budget(mut self, bytes: usize) -> Self {
        self.budget_bytes = bytes;
        self
    }

    /// With messages encoded as `encoding`.
    pub fn with_encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = encoding;
        self
    }
}

/// How an exchange ended, if it has.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Open,
    Complete,
    Failed(String),
    Cancelled(String),
}

/// One destination's messages from `first` on.
#[derive(Debug, Default)]
struct Queue {
    messages: VecDeque<Message>,
    first: u64,
    bytes: usize,
    rows_total: u64,
    bytes_total: u64,
    /// Its consumer ended it (Presto's DELETE): what comes for it is dropped.
    closed: bool,
}

impl Queue {
    fn end(&self) -> u64 {
        self.first + self.messages.len() as u64
    }
}

#[derive(Debug)]
struct State {
    queues: Vec<Queue>,
    buffered: usize,
    peak_buffered: usize,
    joined: usize,
    finished: usize,
    outcome: Outcome,
    encoder: Option<MessageEncoder>,
}

/// What a destination holds for a consumer at a sequence.
#[derive(Debug)]
pub struct Fetched {
    /// Messages from the sequence asked for on.
    pub messages: Vec<Message>,
    /// The sequence after the last message given.
    pub next: u64,
    /// Whether nothing follows `next`.
    pub complete: bool,
}

/// Rows and bytes a destination received so far, and whether it is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DestinationStatus {
    /// Rows produced for it.
    pub rows: u64,
    /// Bytes of messages produced for it.
    pub bytes: u64,
    /// Whether every producer finished.
    pub complete: bool,
}

/// An exchange fed while it is read.
#[derive(Debug)]
pub struct LiveExchange {
    options: LiveOptions,
    state: Mutex<State>,
    /// Producers wait here for room.
    room: Condvar,
    /// Per destination: a message arrived or the exchange ended.
    arrivals: Vec<Notify>,
    /// The schema became known or the exchange ended.
    changed: Notify,
}

impl LiveExchange {
    /// An exchange of batches of `schema` (or of the schema its first producer brings, when
    /// `None`).
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] for no destinations, no producers, a zero budget,
    /// or a schema the encoding cannot carry.
    pub fn try_new(schema: Option<SchemaRef>, options: LiveOptions) -> Result<Arc<Self>> {
        if options.partitions == 0 || options.producers == 0 || options.budget_bytes == 0 {
            return Err(ExchangeError::InvalidArgument(format!(
                "a live exchange needs destinations, producers and a budget (got {}, {} and {} bytes)",
                options.partitions, options.producers, options.budget_bytes
            )));
        }
        let encoder = schema
            .map(|schema| MessageEncoder::try_new(schema, options.encoding))
            .transpose()?;
        Ok(Arc::new(Self {
            options,
            state: Mutex::new(State {
                queues: (0..options.partitions).map(|_| Queue::default()).collect(),
                buffered: 0,
                peak_buffered: 0,
                joined: 0,
                finished: 0,
                outcome: Outcome::Open,
                encoder,
            }),
            room: Condvar::new(),
            arrivals: (0..options.partitions).map(|_| Notify::new()).collect(),
            changed: Notify::new(),
        }))
    }

    /// The options it was made with.
    pub fn options(&self) -> LiveOptions {
        self.options
    }

    /// Destinations.
    pub fn partitions(&self) -> u32 {
        self.options.partitions
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves counters only; they stay usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wake_all(&self) {
        for arrival in &self.arrivals {
            arrival.notify_waiters();
        }
        self.changed.notify_waiters();
        self.room.notify_all();
    }

    fn check(&self, p: u32) -> Result<usize> {
        if p < self.options.partitions {
            Ok(p as usize)
        } else {
            Err(ExchangeError::NotFound(format!(
                "no destination {p} of {} destinations",
                self.options.partitions
            )))
        }
    }

    /// The encoder, once the schema is known.
    pub fn encoder(&self) -> Option<MessageEncoder> {
        self.lock().encoder.clone()
    }

    /// Waits until the schema is known (or the exchange ended without one).
    ///
    /// # Errors
    /// The exchange's failure or cancellation; [`ExchangeError::NotFound`] for an exchange
    /// complete without any batch's schema.
    pub async fn wait_encoder(&self) -> Result<MessageEncoder> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = self.lock();
                if let Some(encoder) = &state.encoder {
                    return Ok(encoder.clone());
                }
                ended(&state.outcome)?;
                if state.outcome == Outcome::Complete {
                    return Err(ExchangeError::NotFound(
                        "the exchange completed before any producer gave its schema".into(),
                    ));
                }
            }
            changed.await;
        }
    }

    /// Joins as one of the producers.
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] when every producer has joined already; the
    /// exchange's end.
    pub fn producer(self: &Arc<Self>) -> Result<Producer> {
        let mut state = self.lock();
        ended(&state.outcome)?;
        if state.joined == self.options.producers {
            return Err(ExchangeError::InvalidArgument(format!(
                "all {} producers have joined the exchange",
                self.options.producers
            )));
        }
        state.joined += 1;
        Ok(Producer {
            exchange: self.clone(),
            encoder: None,
            done: false,
        })
    }

    /// Sets the schema (the first producer's), or checks a later one against it: the same
    /// column names and types; a column may be non-nullable where the exchange's is nullable,
    /// not the other way round.
    fn set_schema(&self, schema: SchemaRef) -> Result<MessageEncoder> {
        let mut state = self.lock();
        match &state.encoder {
            Some(encoder) => {
                let ours = encoder.schema().fields();
                let theirs = schema.fields();
                let misfit = ours.len() != theirs.len()
                    || ours.iter().zip(theirs).any(|(a, b)| {
                        a.name() != b.name()
                            || a.data_type() != b.data_type()
                            || (b.is_nullable() && !a.is_nullable())
                    });
                if misfit {
                    return Err(ExchangeError::InvalidArgument(format!(
                        "a producer's columns ({}) do not fit the exchange's ({})",
                        crate::message::describe(theirs),
                        crate::message::describe(ours)
                    )));
                }
                Ok(encoder.clone())
            }
            None => {
                let encoder = MessageEncoder::try_new(schema, self.options.encoding)?;
                state.encoder = Some(encoder.clone());
                drop(state);
                self.changed.notify_waiters();
                Ok(encoder)
            }
        }
    }

    fn push(&self, p: u32, message: Message) -> Result<()> {
        let p = self.check(p)?;
        let size = message.size();
        let mut state = self.lock();
        loop {
            ended(&state.outcome)?;
            if state.buffered == 0 || state.buffered + size <= self.options.budget_bytes {
                break;
            }
            state = self.room.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        let queue = &mut state.queues[p];
        queue.rows_total += message.rows();
        queue.bytes_total += size as u64;
        if queue.closed {
            return Ok(());
        }
        queue.messages.push_back(message);
        queue.bytes += size;
        state.buffered += size;
        state.peak_buffered = state.peak_buffered.max(state.buffered);
        drop(state);
        self.arrivals[p].notify_waiters();
        Ok(())
    }

    fn finish_producer(&self) {
        let mut state = self.lock();
        state.finished += 1;
        if state.finished == self.options.producers && state.outcome == Outcome::Open {
            state.outcome = Outcome::Complete;
            drop(state);
            self.wake_all();
        }
    }

    /// Ends the exchange in `error`: consumers and producers get it from now on.
    pub fn fail(&self, error: impl Into<String>) {
        self.end(Outcome::Failed(error.into()));
    }

    /// Cancels the exchange: consumers and producers get an error from now on, and the queues
    /// are freed.
    pub fn cancel(&self, why: impl Into<String>) {
        self.end(Outcome::Cancelled(why.into()));
    }

    fn end(&self, outcome: Outcome) {
        let mut state = self.lock();
        if state.outcome != Outcome::Open {
            return;
        }
        state.outcome = outcome;
        for queue in &mut state.queues {
            queue.first = queue.end();
            queue.messages.clear();
            queue.bytes = 0;
        }
        state.buffered = 0;
        drop(state);
        self.wake_all();
    }

    /// Frees destination `p`'s messages before sequence `next`.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range;
    /// [`ExchangeError::InvalidArgument`] for a sequence not produced yet.
    pub fn ack(&self, p: u32, next: u64) -> Result<()> {
        let p = self.check(p)?;
        let mut state = self.lock();
        let queue = &mut state.queues[p];
        if next > queue.end() && !queue.closed {
            return Err(ExchangeError::InvalidArgument(format!(
                "acknowledging destination {p} up to sequence {next}, past the {} produced",
                queue.end()
            )));
        }
        let mut freed = 0;
        while queue.first < next {
            let Some(message) = queue.messages.pop_front() else {
                break;
            };
            freed += message.size();
            queue.first += 1;
        }
        queue.bytes -= freed;
        state.buffered -= freed;
        drop(state);
        if freed > 0 {
            self.room.notify_all();
        }
        Ok(())
    }

    /// Ends destination `p` for its consumer (Presto's DELETE): its messages are freed, and
    /// what is produced for it later is dropped.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range.
    pub fn close(&self, p: u32) -> Result<()> {
        let p = self.check(p)?;
        let mut state = self.lock();
        let queue = &mut state.queues[p];
        queue.closed = true;
        let freed = queue.bytes;
        queue.first = queue.end();
        queue.messages.clear();
        queue.bytes = 0;
        state.buffered -= freed;
        drop(state);
        self.room.notify_all();
        Ok(())
    }

    /// Up to `max_bytes` of destination `p`'s messages from sequence `from` (at least one
    /// when any is there), waiting up to `wait` for one (forever with `None`). Fewer come
    /// back (none, not complete) when the wait ends first.
    ///
    /// # Errors
    /// [`ExchangeError::Freed`] for a sequence acknowledged already; the exchange's failure or
    /// cancellation.
    pub async fn fetch(
        &self,
        p: u32,
        from: u64,
        max_bytes: usize,
        wait: Option<Duration>,
    ) -> Result<Fetched> {
        let index = self.check(p)?;
        let deadline = wait.map(|wait| tokio::time::Instant::now() + wait);
        loop {
            let arrived = self.arrivals[index].notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            {
                let state = self.lock();
                ended(&state.outcome)?;
                let queue = &state.queues[index];
                if from < queue.first {
                    return Err(ExchangeError::Freed(format!(
                        "destination {p} from sequence {from}: messages before {} were acknowledged",
                        queue.first
                    )));
                }
                let end = queue.end();
                let mut messages = Vec::new();
                let mut bytes = 0;
                let mut next = from;
                while next < end && (messages.is_empty() || bytes < max_bytes) {
                    let message = &queue.messages[(next - queue.first) as usize];
                    if !messages.is_empty() && bytes + message.size() > max_bytes {
                        break;
                    }
                    bytes += message.size();
                    messages.push(message.clone());
                    next += 1;
                }
                let complete = state.outcome == Outcome::Complete && next >= end;
                if !messages.is_empty() || complete {
                    return Ok(Fetched {
                        messages,
                        next,
                        complete,
                    });
                }
            }
            match deadline {
                None => arrived.await,
                Some(deadline) => {
                    if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                        return Ok(Fetched {
                            messages: Vec::new(),
                            next: from,
                            complete: false,
                        });
                    }
                }
            }
        }
    }

    /// Bytes destination `p` holds from sequence `from` on.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range.
    pub fn remaining_bytes(&self, p: u32, from: u64) -> Result<u64> {
        let p = self.check(p)?;
        let state = self.lock();
        let queue = &state.queues[p];
        let skip = from.saturating_sub(queue.first) as usize;
        Ok(queue
            .messages
            .iter()
            .skip(skip)
            .map(|m| m.size() as u64)
            .sum())
    }

    /// Destination `p`'s rows and bytes so far.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range.
    pub fn status(&self, p: u32) -> Result<DestinationStatus> {
        let p = self.check(p)?;
        let state = self.lock();
        Ok(DestinationStatus {
            rows: state.queues[p].rows_total,
            bytes: state.queues[p].bytes_total,
            complete: state.outcome == Outcome::Complete,
        })
    }

    /// Bytes the queues hold now.
    pub fn buffered_bytes(&self) -> usize {
        self.lock().buffered
    }

    /// The most bytes the queues ever held at once.
    pub fn peak_buffered_bytes(&self) -> usize {
        self.lock().peak_buffered
    }

    /// A [`PartitionedWriter`] feeding this exchange as one of its producers: its flushed
    /// batches go to their destinations' queues (waiting for room), and `finish` ends the
    /// producer's part. A writer dropped or failed before `finish` fails the exchange.
    ///
    /// # Errors
    /// As [`producer`](Self::producer); the writer's own (options, partitioning that does
    /// not fit the schema); a schema other than the exchange's.
    pub fn writer(
        self: &Arc<Self>,
        schema: SchemaRef,
        partitioning: Partitioning,
        options: WriterOptions,
    ) -> Result<PartitionedWriter<ExchangeOutput>> {
        if partitioning.num_partitions() != self.options.partitions {
            return Err(ExchangeError::InvalidArgument(format!(
                "a writer into {} destinations for an exchange of {}",
                partitioning.num_partitions(),
                self.options.partitions
            )));
        }
        options
            .validate()
            .map_err(|e| ExchangeError::InvalidArgument(e.to_string()))?;
        let encoder = self.set_schema(schema.clone())?;
        let output = ExchangeOutput {
            producer: self.producer()?,
            encoder,
        };
        PartitionedWriter::with_output(schema, partitioning, options, output)
            .map_err(|e| ExchangeError::InvalidArgument(e.to_string()))
    }
}

/// The error for an exchange that ended other than complete.
fn ended(outcome: &Outcome) -> Result<()> {
    match outcome {
        Outcome::Open | Outcome::Complete => Ok(()),
        Outcome::Failed(e) => Err(ExchangeError::Failed(e.clone())),
        Outcome::Cancelled(e) => Err(ExchangeError::Cancelled(e.clone())),
    }
}

/// One producer of a live exchange. Dropped before [`finish`](Self::finish), it fails the
/// exchange: consumers get an error, never a short stream that looks complete.
#[derive(Debug)]
pub struct Producer {
    exchange: Arc<LiveExchange>,
    /// Its own encoder (stream state is per producer), once the schema is known.
    encoder: Option<MessageEncoder>,
    done: bool,
}

impl Producer {
    /// The exchange.
    pub fn exchange(&self) -> &Arc<LiveExchange> {
        &self.exchange
    }

    /// Sets the exchange's schema, when it has none, or checks `schema` against it.
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] for another schema.
    pub fn set_schema(&self, schema: SchemaRef) -> Result<MessageEncoder> {
        self.exchange.set_schema(schema)
    }

    /// Appends `message` to destination `p`'s queue, waiting while the queues are full.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range; the exchange's failure or
    /// cancellation.
    pub fn push(&self, p: u32, message: Message) -> Result<()> {
        self.exchange.push(p, message)
    }

    /// Encodes `batch` and appends it to destination `p`'s queue.
    ///
    /// # Errors
    /// As [`push`](Self::push); the encoder's, for a batch of another schema.
    pub fn push_batch(&mut self, p: u32, batch: &RecordBatch) -> Result<()> {
        let encoder = match &mut self.encoder {
            Some(encoder) => encoder,
            slot => slot.insert(self.exchange.set_schema(batch.schema())?),
        };
        let message = encoder.encode(batch)?;
        self.push(p, message)
    }

    /// This producer's part is done.
    pub fn finish(mut self) {
        self.finish_in_place();
    }

    fn finish_in_place(&mut self) {
        if !self.done {
            self.done = true;
            self.exchange.finish_producer();
        }
    }

    /// This producer failed: the exchange ends in `error`.
    pub fn fail(mut self, error: impl Into<String>) {
        self.done = true;
        self.exchange.fail(error);
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if !self.done {
            self.exchange
                .fail("a producer stopped before finishing its output");
        }
    }
}

/// The output of a [`PartitionedWriter`] feeding a [`LiveExchange`]: see
/// [`LiveExchange::writer`].
#[derive(Debug)]
pub struct ExchangeOutput {
    producer: Producer,
    encoder: MessageEncoder,
}

impl BatchSink for ExchangeOutput {
    fn write_batch(
        &mut self,
        destination: usize,
        batch: &RecordBatch,
    ) -> partout_exchange::Result<u64> {
        let message = self
            .encoder
            .encode(batch)
            .map_err(|e| sink_error(destination, e))?;
        let bytes = message.size() as u64;
        self.producer
            .push(destination as u32, message)
            .map_err(|e| sink_error(destination, e))?;
        Ok(bytes)
    }

    fn finish(&mut self, _destination_bytes: &mut [u64]) -> partout_exchange::Result<()> {
        self.producer.finish_in_place();
        Ok(())
    }
}

fn sink_error(destination: usize, e: ExchangeError) -> WriterError {
    WriterError::Sink {
        destination: Some(destination),
        source: std::io::Error::other(e),
    }
}

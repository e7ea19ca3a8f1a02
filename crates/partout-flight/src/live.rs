//! [`LiveExchange`]: producers fill per-destination queues of encoded messages within one byte
//! budget while consumers read them: partout's [`BoundedExchange`] of [`Message`]s, with the
//! schema the first producer brings and the producers that join.
//!
//! ```text
//!  Producer::push(p, message) ─► queue p: [first … end)   ─► consumers read from any sequence ≥ first
//!        │ past the budget: waits, or spills to disk          ack(p, s) frees every message < s
//!        │ when a consumer waits with nothing to read
//!  all producers finished ─► complete; one failed ─► failed (consumers get its error); cancel ─► cancelled
//! ```
//!
//! A message stays queued until it is acknowledged, so a consumer that lost its connection
//! asks again from its last sequence and gets the rest. Memory never passes the budget: a
//! producer waits until acknowledgements make room, unless a consumer waits on a destination
//! with nothing for it while the budget holds messages of destinations nobody has asked for
//! yet (consumers reading destinations one after another), or while no room comes within
//! [`LiveOptions::patience`] (a consumer that stopped): then the message goes to a spill
//! file in the exchange's spill directory and is read back in its turn. A single message
//! larger than the budget passes alone, when the queues are empty.

use crate::error::{ExchangeError, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_core::ids::Partitioning;
use partout_exchange::{
    BatchSink, BoundedExchange, BoundedOptions, ExchangeMetrics, PartitionedWriter, SpillTarget,
    WriterError, WriterOptions,
};
use partout_format::Encoding;
use partout_format::message::{Message, MessageEncoder, describe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// How a live exchange is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveOptions {
    /// Destinations.
    pub partitions: u32,
    /// Producers that will join; the exchange is complete when all of them have finished.
    pub producers: usize,
    /// The most bytes of messages the queues hold together (unacknowledged ones included).
    pub budget_bytes: usize,
    /// How messages are encoded.
    pub encoding: Encoding,
    /// Where messages are spilled when waiting for room could wait forever (default: the
    /// system's temporary directory); the file is removed with the exchange.
    pub spill_dir: PathBuf,
    /// How long a producer waits for room while a consumer that asked before waits with
    /// nothing to read, before it spills (default 100 ms; a destination nobody asked for yet
    /// is spilled at once).
    pub patience: Duration,
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
            spill_dir: std::env::temp_dir(),
            patience: Duration::from_millis(100),
        }
    }

    /// Waiting up to `patience` for room before spilling.
    pub fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// Spilling into `dir`.
    pub fn with_spill_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spill_dir = dir.into();
        self
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

#[derive(Debug)]
struct State {
    joined: usize,
    encoder: Option<MessageEncoder>,
}

/// What a destination holds for a consumer at a sequence.
#[derive(Debug)]
pub struct FetchedMessages {
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

/// The queues' error as the exchange's clients get it. Their own failures (the budget full
/// with nothing to spill, the spill file) end the exchange: to a client that is the
/// exchange's failure, not a server's limit to wait out and retry.
fn client_error(e: ExchangeError) -> ExchangeError {
    match e {
        e @ (ExchangeError::ResourcesExhausted(_) | ExchangeError::Spill(_)) => {
            ExchangeError::failed("the exchange's queues", Some(Arc::new(e)))
        }
        other => other,
    }
}

/// An exchange fed while it is read.
#[derive(Debug)]
pub struct LiveExchange {
    options: LiveOptions,
    queues: BoundedExchange<Message>,
    state: Mutex<State>,
    /// The schema became known or the exchange ended.
    changed: Notify,
    /// Called once, when every producer finished and every message was acknowledged.
    on_drained: Mutex<Option<OnDrained>>,
}

/// What [`LiveExchange`] calls once it is drained.
struct OnDrained(Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for OnDrained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnDrained")
    }
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
        let queues = BoundedExchange::try_new(
            BoundedOptions::new(
                options.partitions as usize,
                options.producers,
                options.budget_bytes,
            )
            .with_spill(SpillTarget::in_dir(options.spill_dir.clone()))
            .with_patience(options.patience),
        )
        .map_err(client_error)?;
        Ok(Arc::new(Self {
            options,
            queues,
            state: Mutex::new(State { joined: 0, encoder }),
            changed: Notify::new(),
            on_drained: Mutex::new(None),
        }))
    }

    /// The options it was made with.
    pub fn options(&self) -> &LiveOptions {
        &self.options
    }

    /// Destinations.
    pub fn partitions(&self) -> u32 {
        self.options.partitions
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves counters only; they stay usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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

    /// The error for an exchange that ended other than complete.
    fn ended(&self) -> Result<()> {
        self.queues.check_open().map_err(client_error)
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
            if let Some(encoder) = &self.lock().encoder {
                return Ok(encoder.clone());
            }
            self.ended()?;
            if self.queues.is_over() {
                return Err(ExchangeError::NotFound(
                    "the exchange completed before any producer gave its schema".into(),
                ));
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
        self.ended()?;
        let mut state = self.lock();
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
                        describe(theirs),
                        describe(ours)
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
        self.queues.push(p, message).map_err(client_error)
    }

    async fn push_async(&self, p: u32, message: Message) -> Result<()> {
        let p = self.check(p)?;
        self.queues
            .push_async(p, message)
            .await
            .map_err(client_error)
    }

    fn finish_producer(&self) {
        self.queues.producer_finished();
        self.changed.notify_waiters();
        self.check_drained();
    }

    /// Calls `then` once every producer has finished and every message was acknowledged (or
    /// its destination closed): at once if that is so already.
    pub(crate) fn when_drained(&self, then: Box<dyn FnOnce() + Send>) {
        *self.on_drained.lock().unwrap_or_else(|e| e.into_inner()) = Some(OnDrained(then));
        self.check_drained();
    }

    fn check_drained(&self) {
        if !self.queues.is_drained() {
            return;
        }
        let then = self
            .on_drained
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(OnDrained(then)) = then {
            then();
        }
    }

    /// Ends the exchange in `error`: consumers and producers get it from now on.
    pub fn fail(&self, error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) {
        self.queues.fail(Arc::from(error.into()));
        self.changed.notify_waiters();
    }

    /// Cancels the exchange: consumers and producers get an error from now on, and the queues
    /// are freed.
    pub fn cancel(&self, why: impl Into<String>) {
        self.queues.cancel(why);
        self.changed.notify_waiters();
    }

    /// Frees destination `p`'s messages before sequence `next`.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range;
    /// [`ExchangeError::InvalidArgument`] for a sequence not produced yet.
    pub fn ack(&self, p: u32, next: u64) -> Result<()> {
        let p = self.check(p)?;
        self.queues.ack(p, next).map_err(|e| match e {
            ExchangeError::InvalidArgument(w) => {
                ExchangeError::InvalidArgument(w.replace("output", "destination"))
            }
            other => client_error(other),
        })?;
        self.check_drained();
        Ok(())
    }

    /// Ends destination `p` for its consumer (Presto's DELETE): its messages are freed, and
    /// what is produced for it later is dropped.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range.
    pub fn close(&self, p: u32) -> Result<()> {
        let p = self.check(p)?;
        self.queues.close(p).map_err(client_error)?;
        self.check_drained();
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
    ) -> Result<FetchedMessages> {
        let index = self.check(p)?;
        let fetch = self.queues.fetch(index, from, max_bytes);
        let fetched = match wait {
            None => fetch.await,
            Some(wait) => match tokio::time::timeout(wait, fetch).await {
                Ok(fetched) => fetched,
                Err(_) => {
                    return Ok(FetchedMessages {
                        messages: Vec::new(),
                        next: from,
                        complete: false,
                    });
                }
            },
        }
        .map_err(|e| match e {
            ExchangeError::Freed(_) => ExchangeError::Freed(format!(
                "destination {p} from sequence {from}: messages before it were acknowledged"
            )),
            other => client_error(other),
        })?;
        Ok(FetchedMessages {
            messages: fetched.items,
            next: fetched.next,
            complete: fetched.complete,
        })
    }

    /// Bytes destination `p` holds from sequence `from` on.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range.
    pub fn remaining_bytes(&self, p: u32, from: u64) -> Result<u64> {
        let p = self.check(p)?;
        self.queues.remaining_bytes(p, from).map_err(client_error)
    }

    /// Destination `p`'s rows and bytes so far.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] for a destination out of range.
    pub fn status(&self, p: u32) -> Result<DestinationStatus> {
        let p = self.check(p)?;
        let status = self.queues.status(p).map_err(client_error)?;
        Ok(DestinationStatus {
            rows: status.rows,
            bytes: status.bytes,
            complete: status.complete,
        })
    }

    /// Bytes the queues hold in memory now.
    pub fn buffered_bytes(&self) -> usize {
        self.queues.metrics().held_bytes
    }

    /// The most bytes the queues ever held in memory at once.
    pub fn peak_buffered_bytes(&self) -> usize {
        self.queues.metrics().peak_held_bytes
    }

    /// Memory and spilling so far.
    pub fn metrics(&self) -> ExchangeMetrics {
        self.queues.metrics()
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
        let message = self.encode(batch)?;
        self.push(p, message)
    }

    /// `batch` as a message of the exchange (its schema set by the first).
    fn encode(&mut self, batch: &RecordBatch) -> Result<Message> {
        let encoder = match &mut self.encoder {
            Some(encoder) => encoder,
            slot => slot.insert(self.exchange.set_schema(batch.schema())?),
        };
        Ok(encoder.encode(batch)?)
    }

    /// As [`push_batch`](Self::push_batch), waiting asynchronously for room: no thread is
    /// held while the queues are full.
    ///
    /// # Errors
    /// As [`push_batch`](Self::push_batch).
    pub async fn push_batch_async(&mut self, p: u32, batch: &RecordBatch) -> Result<()> {
        let message = self.encode(batch)?;
        self.exchange.push_async(p, message).await
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
    pub fn fail(mut self, error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) {
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
            .map_err(|e| sink_error(destination, e.into()))?;
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
    WriterError::sink(Some(destination), e)
}

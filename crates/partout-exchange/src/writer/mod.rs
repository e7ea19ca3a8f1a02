//! [`PartitionedWriter`]: batches in, each destination's batches out, to a [`BatchSink`].
//!
//! ```text
//!  append(batch) ─► ids ─► plan ─► rows appended to destination buffers
//!                                   └─ destination p ≥ its target ─► take ─► output.write_batch(p, batch)
//!                                   └─ all buffers > memory limit  ─► flush the largest first
//!  finish()      ─► flush the rest, output.finish() (ends every destination's output)
//! ```
//!
//! The output is any [`BatchSink`]: [`Encoded`](crate::Encoded) encodes Arrow IPC streams or
//! Presto pages into a byte [`Sink`](crate::Sink); `partout-output` has Parquet files and shuffle
//! files.
//!
//! Flush policy: each destination flushes when its buffered bytes reach its target, the
//! smaller of [`WriterOptions::target_bytes`] and an even share of the memory limit (half of
//! `memory_limit / destinations met`, leaving room for buffer growth: destinations that never
//! hold a row take no share), each drawn anew after every
//! flush within ±[`WriterOptions::jitter`] so that destinations filling at the same rate do not
//! all flush on the same batch. If the memory held by all buffers still passes
//! [`WriterOptions::memory_limit`], the destinations holding most flush first and give their
//! buffers up.
//!
//! The writer keeps what every mode needs (ids, flush targets, rows replicated by their keys,
//! metrics, checks); each way of buffering rows is a [`Buffering`] mode, in a file of its own:
//!
//! * `per_batch`: each batch's rows moved into the destination buffers as it comes;
//! * `merged`: from 512 destinations, a few batches held and moved into the buffers together;
//! * `held`: with [`Flush::AllAtLimit`], whole batches held and, at the memory limit, every
//!   held row handed over in destination order;
//! * `buffered`: the destination buffers and their flushes at target, for the first two;
//! * `targets`: when each destination flushes, its target a share of the memory limit among
//!   the destinations met;
//! * `batch_sink`: the [`BatchSink`] trait, the [`SinkCapabilities`] a writer asks of its
//!   sink once, and the [`Flushed`] shapes of rows it hands over besides plain batches.

mod batch_sink;
mod buffered;
mod held;
mod held_slices;
mod merged;
mod per_batch;
mod targets;

pub use batch_sink::{BatchSink, Flushed, SinkCapabilities, SinkClock};

use crate::error::{Result, WriterError};
use crate::metrics::WriterMetrics;
use crate::options::{Flush, WriterOptions};
use arrow_array::{RecordBatch, UInt32Array};
use arrow_buffer::NullBuffer;
use arrow_schema::SchemaRef;
use buffered::Buffered;
use held::HeldRows;
use held_slices::HeldSlices;
use merged::Merged;
use partout_core::DestinationBuffers;
use partout_core::ids::{PartitionIds, Partitioning};
use partout_core::plan::check_partition_count;
use per_batch::PerBatch;
use std::time::{Duration, Instant};
use targets::Targets;

/// Rows of at most this many (after replication) are moved per step, so that replicating
/// null-key rows to every destination never builds one huge batch.
const REPLICATION_CHUNK: usize = 1 << 16;

/// How the writer buffers rows until they reach the output.
#[derive(Debug)]
enum Buffering {
    /// [`Flush::AtTarget`] below 512 destinations: each batch's rows go into the destination
    /// buffers as it comes.
    PerBatch(PerBatch),
    /// [`Flush::AtTarget`] from 512 destinations: a few batches held, then moved into the
    /// destination buffers together.
    Merged(Merged),
    /// [`Flush::AllAtLimit`]: whole batches held, handed over in destination order at the
    /// memory limit.
    Held(HeldRows),
    /// [`Flush::AtTarget`] from [`WriterOptions::slices_from`] destinations, for an output that
    /// takes runs:
    /// batches held laid out by destination, each destination's runs written together.
    Runs(HeldSlices),
}

impl Buffering {
    /// The mode `options` ask for, over `num_partitions` destinations of batches of `schema`.
    ///
    /// # Errors
    /// [`WriterError::Partition`] for a column type the destination buffers cannot hold.
    fn try_new(
        schema: &SchemaRef,
        num_partitions: u32,
        options: &WriterOptions,
        takes_slices: bool,
    ) -> Result<Self> {
        let n = num_partitions as usize;
        Ok(match options.flush {
            Flush::AllAtLimit => {
                check_types(schema)?;
                Self::Held(HeldRows::new(schema.clone(), num_partitions, options))
            }
            Flush::AtTarget
                if takes_slices && n >= options.slices_from && options.target_rows.is_none() =>
            {
                check_types(schema)?;
                let target = Targets::share_of_all(n, options);
                Self::Runs(HeldSlices::try_new(n, target, options)?)
            }
            Flush::AtTarget => {
                let buffered = Buffered::try_new(schema.clone(), n, options)?;
                match merged::merged_batches(n) {
                    1 => Self::PerBatch(PerBatch::new(buffered)),
                    merge => Self::Merged(Merged::new(buffered, merge, options)),
                }
            }
        })
    }

    /// Takes `batch`, its rows bound for `ids` (one per row).
    fn append<O: BatchSink>(
        &mut self,
        batch: &RecordBatch,
        ids: &[u32],
        shared: &mut Shared<O>,
    ) -> Result<()> {
        match self {
            Self::PerBatch(per_batch) => per_batch.append(batch, ids, shared),
            Self::Merged(merged) => merged.append(batch, ids, shared),
            Self::Held(held) => held.hold(batch, ids, shared),
            Self::Runs(runs) => runs.append(batch, ids, shared),
        }
    }

    /// Hands every row still buffered or held to the output.
    fn finish<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        match self {
            Self::PerBatch(per_batch) => per_batch.finish(shared),
            Self::Merged(merged) => merged.finish(shared),
            Self::Held(held) => held.flush_all(shared),
            Self::Runs(runs) => runs.finish(shared),
        }
    }

    /// Bytes of buffer memory and of batches held.
    fn held_bytes(&self) -> usize {
        match self {
            Self::PerBatch(per_batch) => per_batch.held_bytes(),
            Self::Merged(merged) => merged.held_bytes(),
            Self::Held(held) => held.held_bytes(),
            Self::Runs(runs) => runs.held_bytes(),
        }
    }
}

/// An error unless every column of `schema` can be held by destination buffers.
fn check_types(schema: &SchemaRef) -> Result<()> {
    DestinationBuffers::try_new(schema.clone(), 1)?;
    Ok(())
}

/// What the writer's modes share: the output and what it offers, the metrics, each
/// destination's flush target, and whether a failure stopped the writer.
#[derive(Debug)]
struct Shared<O> {
    output: O,
    /// The output's capabilities, asked once.
    capabilities: SinkCapabilities,
    metrics: WriterMetrics,
    targets: Targets,
    /// One past the highest destination id seen: plans cover these destinations only, so
    /// that the destinations of given ids not met yet cost an append nothing.
    in_use: u32,
    /// A flush failed, or rows accepted earlier were lost: the writer takes no more input.
    failed: bool,
}

impl<O> Shared<O> {
    /// Notes `held` bytes held now in the metrics' peak.
    fn note_held(&mut self, held: usize) {
        self.metrics.peak_held_bytes = self.metrics.peak_held_bytes.max(held as u64);
    }

    /// The time the output has spent handing bytes on, by its clock (zero without one).
    fn sink_time(&self) -> Duration {
        self.capabilities
            .clock
            .as_ref()
            .map_or(Duration::ZERO, SinkClock::elapsed)
    }

    /// A batch the output handed on earlier and got back, whose buffers may be reused.
    fn spare(&self) -> Option<RecordBatch> {
        self.capabilities.spares.as_ref()?.take()
    }

    /// Counts a flush of destination `p` that wrote `bytes`, begun at `started` with the
    /// output's sink time at `sink_before`: its bytes, and its time, split into the sink's
    /// and the encoder's.
    fn account_flush(&mut self, p: usize, bytes: u64, started: Instant, sink_before: Duration) {
        let sink = self.sink_time() - sink_before;
        let metrics = &mut self.metrics;
        metrics.bytes_out += bytes;
        metrics.destination_bytes[p] += bytes;
        metrics.sink_time += sink;
        metrics.encode_time += started.elapsed().saturating_sub(sink);
        metrics.flushes += 1;
    }
}

/// Partitions batches by destination: each destination's rows are buffered and handed to the
/// output ([`BatchSink`]) as one batch whenever they reach the destination's flush target, in
/// input order.
///
/// ```
/// use arrow_array::{Int64Array, RecordBatch};
/// use partout_core::ids::Partitioning;
/// use partout_exchange::{MemorySink, PartitionedWriter, WriterOptions};
/// use partout_format::Encoding;
/// use partout_format::ipc::decode_stream;
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([
///     ("k", Arc::new(Int64Array::from_iter_values(0..1000)) as _),
/// ])
/// .unwrap();
/// // One Arrow IPC stream per destination, kept in memory.
/// let mut writer = PartitionedWriter::try_new(
///     batch.schema(),
///     Partitioning::hash(vec![0], 4),
///     WriterOptions::default(),
///     Encoding::default(),
///     MemorySink::new(4),
/// )
/// .unwrap();
/// writer.append(&batch).unwrap();
/// writer.append(&batch).unwrap();
/// let (sink, metrics) = writer.finish().unwrap();
/// assert_eq!(metrics.rows_out, 2000);
/// let rows: usize = sink
///     .into_outputs()
///     .iter()
///     .map(|bytes| decode_stream(bytes).unwrap().1.iter().map(|b| b.num_rows()).sum::<usize>())
///     .sum();
/// assert_eq!(rows, 2000);
/// ```
pub struct PartitionedWriter<O> {
    schema: SchemaRef,
    options: WriterOptions,
    num_partitions: u32,
    /// The ids of the writer's own partitioning; none when its caller gives them
    /// ([`with_given_ids`](Self::with_given_ids)).
    ids: Option<PartitionIds>,
    id_buffer: Vec<u32>,
    /// The first row ever was sent to every destination.
    replicated_any: bool,
    buffering: Buffering,
    shared: Shared<O>,
}

impl<O: BatchSink> std::fmt::Debug for PartitionedWriter<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionedWriter")
            .field("schema", &self.schema)
            .field("options", &self.options)
            .field("num_partitions", &self.num_partitions)
            .field("metrics", &self.shared.metrics)
            .finish_non_exhaustive()
    }
}

/// Checks made without a writer. They are on `PartitionedWriter<()>` so that
/// `PartitionedWriter::check` names no output type: no output is involved.
impl PartitionedWriter<()> {
    /// Checks what [`with_output`](PartitionedWriter::with_output) checks, without building
    /// a writer: that `options` can work, that `partitioning` fits `schema`, and that every
    /// column type of `schema` can be buffered. The output is not checked (an encoding's own
    /// check is [`Encoding::check_schema`](partout_format::Encoding::check_schema)).
    ///
    /// ```
    /// use arrow_schema::{DataType, Field, Schema};
    /// use partout_core::ids::Partitioning;
    /// use partout_exchange::{PartitionedWriter, WriterOptions};
    /// use std::sync::Arc;
    ///
    /// let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
    /// let options = WriterOptions::default();
    /// let on = |key| Partitioning::hash(vec![key], 8);
    /// assert!(PartitionedWriter::check(&schema, &on(0), &options).is_ok());
    /// // No column 1.
    /// assert!(PartitionedWriter::check(&schema, &on(1), &options).is_err());
    /// ```
    ///
    /// # Errors
    /// As [`with_output`](PartitionedWriter::with_output):
    /// [`WriterError::InvalidOption`] for options that cannot work;
    /// [`WriterError::Partition`] when the partitioning does not fit the schema (a missing key
    /// column, a key type the scheme cannot hash) or a column type cannot be buffered.
    pub fn check(
        schema: &SchemaRef,
        partitioning: &Partitioning,
        options: &WriterOptions,
    ) -> Result<()> {
        options.validate()?;
        PartitionIds::try_new(partitioning.clone(), schema)?;
        check_types(schema)
    }

    /// Checks, without building one, that a writer of `schema` over ids its caller gives
    /// ([`with_given_ids`](PartitionedWriter::with_given_ids)) with `options` can be made.
    ///
    /// # Errors
    /// As [`with_given_ids`](PartitionedWriter::with_given_ids), but for the destination count.
    pub fn check_given_ids(schema: &SchemaRef, options: &WriterOptions) -> Result<()> {
        options.validate()?;
        if options.replicate_nulls_and_any {
            return Err(WriterError::InvalidOption(
                "rows replicated by their keys need the writer's own partitioning, not ids \
                 given by its caller"
                    .into(),
            ));
        }
        check_types(schema)
    }
}

impl<O: BatchSink> PartitionedWriter<O> {
    /// A writer of batches of `schema`, partitioned by `partitioning`, whose flushed batches
    /// go to `output`.
    ///
    /// # Errors
    /// [`WriterError::InvalidOption`] for options that cannot work;
    /// [`WriterError::Partition`] when the partitioning does not fit the schema (a missing key
    /// column, a key type the scheme cannot hash) or a column type cannot be buffered.
    pub fn with_output(
        schema: SchemaRef,
        partitioning: Partitioning,
        options: WriterOptions,
        output: O,
    ) -> Result<Self> {
        options.validate()?;
        let num_partitions = partitioning.num_partitions();
        let ids = PartitionIds::try_new(partitioning, &schema)?;
        Self::build(schema, num_partitions, Some(ids), options, output)
    }

    /// A writer of batches of `schema` over `destinations` destinations, whose flushed batches
    /// go to `output`, for a caller that gives every row's destination itself (another
    /// engine's hash, a table of values): rows come in by
    /// [`append_with_ids`](Self::append_with_ids) only, and [`append`](Self::append), which
    /// has no partitioning to compute ids by, is refused.
    ///
    /// ```
    /// use arrow_array::{Int64Array, RecordBatch};
    /// use partout_exchange::{MemorySink, PartitionedWriter, WriterOptions};
    /// use partout_format::Encoding;
    /// use std::sync::Arc;
    ///
    /// let batch = RecordBatch::try_from_iter([
    ///     ("k", Arc::new(Int64Array::from_iter_values(0..4)) as _),
    /// ])
    /// .unwrap();
    /// let output = partout_exchange::Encoded::try_new(
    ///     batch.schema(),
    ///     3,
    ///     Encoding::default(),
    ///     MemorySink::new(3),
    /// )
    /// .unwrap();
    /// let mut writer =
    ///     PartitionedWriter::with_given_ids(batch.schema(), 3, WriterOptions::default(), output)
    ///         .unwrap();
    /// // No partitioning of its own: the caller says where each row goes.
    /// assert!(writer.append(&batch).is_err());
    /// writer.append_with_ids(&batch, &[2, 0, 2, 1]).unwrap();
    /// let (_, metrics) = writer.finish().unwrap();
    /// assert_eq!(metrics.destination_rows, [1, 1, 2]);
    /// ```
    ///
    /// # Errors
    /// [`WriterError::InvalidOption`] for options that cannot work, or that replicate rows
    /// by their keys (only a partitioning of the writer's own knows them);
    /// [`WriterError::Partition`] for a destination count of 0 or above
    /// [`MAX_PARTITIONS`](partout_core::plan::MAX_PARTITIONS), or a column type that cannot
    /// be buffered.
    pub fn with_given_ids(
        schema: SchemaRef,
        destinations: u32,
        options: WriterOptions,
        output: O,
    ) -> Result<Self> {
        PartitionedWriter::check_given_ids(&schema, &options)?;
        check_partition_count(destinations)?;
        Self::build(schema, destinations, None, options, output)
    }

    /// A writer over `num_partitions` destinations, its ids computed by `ids` or, without,
    /// given by its caller; `options` checked already.
    fn build(
        schema: SchemaRef,
        num_partitions: u32,
        ids: Option<PartitionIds>,
        options: WriterOptions,
        output: O,
    ) -> Result<Self> {
        let n = num_partitions as usize;
        let capabilities = output.capabilities();
        let buffering = Buffering::try_new(&schema, num_partitions, &options, capabilities.slices)?;
        let shared = Shared {
            output,
            capabilities,
            metrics: WriterMetrics {
                destination_rows: vec![0; n],
                destination_bytes: vec![0; n],
                ..WriterMetrics::default()
            },
            targets: Targets::new(n, &options),
            // Given ids may come destination after destination (partitioning by value);
            // the writer's own reach every destination from the first batch.
            in_use: match ids {
                Some(_) => num_partitions,
                None => 0,
            },
            failed: false,
        };
        Ok(Self {
            schema,
            options,
            num_partitions,
            ids,
            id_buffer: Vec::new(),
            replicated_any: false,
            buffering,
            shared,
        })
    }

    /// The output.
    pub fn output(&self) -> &O {
        &self.shared.output
    }

    /// The output, to take what it holds (see [`Ready`](crate::Ready)).
    pub fn output_mut(&mut self) -> &mut O {
        &mut self.shared.output
    }

    /// The schema of the batches the writer takes.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// What the writer has done so far.
    pub fn metrics(&self) -> &WriterMetrics {
        &self.shared.metrics
    }

    /// Bytes of buffer memory held now, and of the batches held (with [`Flush::AllAtLimit`],
    /// or until a few are merged into the buffers at once).
    pub fn held_bytes(&self) -> usize {
        self.buffering.held_bytes()
    }

    /// Appends the rows of `batch` to their destinations, flushing those that reach their
    /// target, and the largest while the memory limit is passed.
    ///
    /// # Errors
    /// [`WriterError::Partition`] for a batch of another schema or bad partition ids, and on
    /// a writer whose caller gives the ids ([`with_given_ids`](Self::with_given_ids))
    /// (nothing of the batch is written then); [`WriterError::Encode`] and
    /// [`WriterError::Sink`] from a flush, after which the writer refuses further calls with
    /// [`WriterError::Failed`].
    pub fn append(&mut self, batch: &RecordBatch) -> Result<()> {
        self.check_batch(batch)?;
        let Some(ids) = &mut self.ids else {
            return Err(WriterError::Partition(
                partout_core::PartoutError::InvalidArgument(
                    "this writer's caller gives its rows' destinations: append_with_ids, not \
                     append"
                        .into(),
                ),
            ));
        };
        let started = Instant::now();
        ids.compute(batch, &mut self.id_buffer)?;
        self.shared.metrics.ids_time += started.elapsed();
        self.append_by_ids(batch)
    }

    /// Appends the rows of `batch` to the destinations `ids` gives (one per row, each below
    /// the partition count), as [`append`](Self::append) does with the ids its partitioning
    /// computes: for partition ids a consumer decides (another engine's hash), the one way in
    /// of a writer built [`with_given_ids`](Self::with_given_ids).
    ///
    /// # Errors
    /// [`WriterError::Partition`] for a batch of another schema, ids not one per row or not
    /// below the partition count, or a writer that replicates rows with null keys (only
    /// its own partitioning knows the keys); otherwise as [`append`](Self::append).
    pub fn append_with_ids(&mut self, batch: &RecordBatch, ids: &[u32]) -> Result<()> {
        self.check_batch(batch)?;
        let invalid = |what: String| {
            Err(WriterError::Partition(
                partout_core::PartoutError::InvalidArgument(what),
            ))
        };
        if self.options.replicate_nulls_and_any {
            return invalid("rows replicated by their keys need the writer's own ids".into());
        }
        if ids.len() != batch.num_rows() {
            return invalid(format!(
                "{} partition ids for a batch of {} rows",
                ids.len(),
                batch.num_rows()
            ));
        }
        let highest = ids.iter().copied().max().unwrap_or(0);
        if highest >= self.num_partitions {
            return invalid(format!(
                "partition id {highest} of {} partitions",
                self.num_partitions
            ));
        }
        self.shared.in_use = self.shared.in_use.max(highest + 1);
        self.id_buffer.clear();
        self.id_buffer.extend_from_slice(ids);
        self.append_by_ids(batch)
    }

    fn check_batch(&self, batch: &RecordBatch) -> Result<()> {
        if self.shared.failed {
            return Err(WriterError::Failed);
        }
        if batch.schema_ref().fields() != self.schema.fields() {
            return Err(WriterError::Partition(
                partout_core::PartoutError::InvalidArgument(format!(
                    "a batch of schema {} for a writer of {}",
                    batch.schema(),
                    self.schema
                )),
            ));
        }
        Ok(())
    }

    /// Appends `batch` by the ids in the id buffer.
    fn append_by_ids(&mut self, batch: &RecordBatch) -> Result<()> {
        // Rows to replicate: the first row ever, and rows with a null key.
        let key_nulls = self
            .options
            .replicate_nulls_and_any
            .then(|| self.key_nulls(batch))
            .flatten();
        let any =
            self.options.replicate_nulls_and_any && !self.replicated_any && batch.num_rows() > 0;
        let result = if any || key_nulls.is_some() {
            self.append_replicated(batch, key_nulls)
        } else {
            self.buffering
                .append(batch, &self.id_buffer, &mut self.shared)
        };
        if let Err(e) = result {
            // Buffers are left consistent by a refused batch, but not by a failed flush.
            if !matches!(e, WriterError::Partition(_)) {
                self.shared.failed = true;
            }
            return Err(e);
        }
        self.shared.metrics.batches += 1;
        self.shared.metrics.rows_in += batch.num_rows() as u64;
        if self.options.replicate_nulls_and_any && batch.num_rows() > 0 {
            self.replicated_any = true;
        }
        Ok(())
    }

    /// The rows with a null in any key column, when there are any.
    fn key_nulls(&self, batch: &RecordBatch) -> Option<NullBuffer> {
        let keys = self
            .ids
            .as_ref()
            .map_or(&[][..], |ids| ids.partitioning().keys());
        keys.iter()
            .fold(None, |acc: Option<NullBuffer>, &k| {
                NullBuffer::union(acc.as_ref(), batch.column(k).nulls())
            })
            .filter(|nulls| nulls.null_count() > 0)
    }

    /// Appends `batch` with its replicated rows (the first row ever, and the rows `nulls`
    /// marks) sent to every destination, in input order, in steps of at most
    /// [`REPLICATION_CHUNK`] rows.
    fn append_replicated(&mut self, batch: &RecordBatch, nulls: Option<NullBuffer>) -> Result<()> {
        let any = (!self.replicated_any).then_some(0usize);
        let n = self.num_partitions;
        let mut rows: Vec<u32> = Vec::new();
        let mut chunk_ids: Vec<u32> = Vec::new();
        let last = self.id_buffer.len();
        for (row, &id) in self.id_buffer.iter().enumerate() {
            let replicate = Some(row) == any || nulls.as_ref().is_some_and(|m| m.is_null(row));
            if replicate {
                rows.extend(std::iter::repeat_n(row as u32, n as usize));
                chunk_ids.extend(0..n);
            } else {
                rows.push(row as u32);
                chunk_ids.push(id);
            }
            if rows.len() >= REPLICATION_CHUNK || row + 1 == last {
                let indices = UInt32Array::from(std::mem::take(&mut rows));
                let chunk = arrow_select::take::take_record_batch(batch, &indices)?;
                self.buffering
                    .append(&chunk, &chunk_ids, &mut self.shared)?;
                chunk_ids.clear();
            }
        }
        Ok(())
    }

    /// Hands every row buffered or held to the output now, and goes on writing: for an input
    /// whose rows must not wait for more (an unbounded stream, where more may never come).
    ///
    /// # Errors
    /// As [`into_output`](Self::into_output); a failed flush leaves the writer failed.
    pub fn flush(&mut self) -> Result<()> {
        if self.shared.failed {
            return Err(WriterError::Failed);
        }
        let result = self.buffering.finish(&mut self.shared);
        if result.is_err() {
            self.shared.failed = true;
        }
        result
    }

    /// Hands every row still buffered or held to the output without ending it, and returns
    /// the output with the metrics: its caller may go on writing to the output another way
    /// (through another writer, as a worker that turns to sorted runs does) and end it then.
    ///
    /// # Errors
    /// The output's errors from the last flushes, and [`WriterError::Failed`] after an
    /// earlier failure.
    pub fn into_output(mut self) -> Result<(O, WriterMetrics)> {
        if self.shared.failed {
            return Err(WriterError::Failed);
        }
        self.buffering.finish(&mut self.shared)?;
        Ok((self.shared.output, self.shared.metrics))
    }

    /// Flushes every destination, ends every destination's output (`BatchSink::finish`), and
    /// returns the output with the metrics.
    ///
    /// # Errors
    /// The output's errors from the last flushes, and [`WriterError::Failed`] after an
    /// earlier failure.
    pub fn finish_output(mut self) -> Result<(O, WriterMetrics)> {
        if self.shared.failed {
            return Err(WriterError::Failed);
        }
        self.buffering.finish(&mut self.shared)?;
        let shared = &mut self.shared;
        let started = Instant::now();
        let sink_before = shared.sink_time();
        let before: u64 = shared.metrics.destination_bytes.iter().sum();
        shared
            .output
            .finish(&mut shared.metrics.destination_bytes)?;
        shared.metrics.bytes_out += shared.metrics.destination_bytes.iter().sum::<u64>() - before;
        let sink = shared.sink_time() - sink_before;
        shared.metrics.sink_time += sink;
        shared.metrics.encode_time += started.elapsed().saturating_sub(sink);
        Ok((self.shared.output, self.shared.metrics))
    }
}

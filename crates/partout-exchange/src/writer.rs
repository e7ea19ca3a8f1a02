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
//! Presto pages into a byte [`Sink`](crate::Sink); `partout-io` has Parquet files and shuffle
//! files.
//!
//! Flush policy: each destination flushes when its buffered bytes reach its target, the
//! smaller of [`WriterOptions::target_bytes`] and an even share of the memory limit (half of
//! `memory_limit / destinations`, leaving room for buffer growth), each drawn anew after every
//! flush within ±[`WriterOptions::jitter`] so that destinations filling at the same rate do not
//! all flush on the same batch. If the memory held by all buffers still passes
//! [`WriterOptions::memory_limit`], the destinations holding most flush first and give their
//! buffers up.

use crate::error::{Result, WriterError};
use crate::metrics::WriterMetrics;
use crate::options::{Flush, Strategy, WriterOptions};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, RecordBatch, RecordBatchOptions, UInt32Array,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, SchemaRef};
use partout_core::ids::{PartitionIds, Partitioning};
use partout_core::{DestinationBuffers, MAX_MERGED, Partitioner, ScatterPlan};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Receives flushed batches, destination by destination.
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

    /// Writes `batch`, rows of several destinations in destination order: `runs` gives each
    /// destination and its rows, in the batch's order. Adds the bytes each destination's
    /// output grew by to `destination_bytes` and returns their sum. By default each
    /// destination's slice is written with [`write_batch`](Self::write_batch); a writer with
    /// [`Flush::AllAtLimit`] hands its rows over this way.
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
    /// [`Flush::AllAtLimit`] calls this after each such round (the last one included, before
    /// [`finish`](Self::finish)), so that an output spilling sorted runs can end one.
    ///
    /// # Errors
    /// Encoding or IO errors.
    fn end_run(&mut self) -> Result<()> {
        Ok(())
    }

    /// Time spent handing bytes on (in [`write_batch`](Self::write_batch) and
    /// [`finish`](Self::finish)), where the sink can tell it from encoding; zero otherwise.
    fn sink_time(&self) -> Duration {
        Duration::ZERO
    }
}

/// A batch held until a few are moved into the destination buffers together (see
/// [`DestinationBuffers::append_many`]): its columns and its rows' plan.
#[derive(Debug, Default)]
struct Pending {
    columns: Vec<ArrayRef>,
    plan: ScatterPlan,
    bytes: usize,
}

/// How many batches the writer merges into its destination buffers at once for
/// `destinations` destinations: [`MAX_MERGED`] from 512 destinations, where a batch brings
/// each destination's column a few rows and reaching its buffer costs more than moving them
/// (lineitem into 1000 destinations: 12% faster); one below, where merging measured no gain
/// (64 and 200 destinations).
fn merged_batches(destinations: usize) -> usize {
    if destinations >= 512 { MAX_MERGED } else { 1 }
}

/// Rows of at most this many (after replication) are moved per step, so that replicating
/// null-key rows to every destination never builds one huge batch.
const REPLICATION_CHUNK: usize = 1 << 16;

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
pub struct PartitionedWriter<O: BatchSink> {
    schema: SchemaRef,
    options: WriterOptions,
    num_partitions: u32,
    ids: PartitionIds,
    id_buffer: Vec<u32>,
    plan: ScatterPlan,
    partitioner: Option<Partitioner>,
    buffers: DestinationBuffers,
    targets: Vec<usize>,
    base_target: usize,
    rng: u64,
    output: O,
    metrics: WriterMetrics,
    replicated_any: bool,
    failed: bool,
    /// [`Flush::AllAtLimit`]: the batches held, with their rows' destinations.
    held: Vec<(RecordBatch, Vec<u32>)>,
    held_bytes: usize,
    /// Destination vectors of batches no longer held, for reuse.
    spare_ids: Vec<Vec<u32>>,
    /// The held rows in destination order, as (batch, row).
    sorted: Vec<(usize, usize)>,
    /// Rows held per destination, then where each destination's next row goes.
    cursors: Vec<usize>,
    /// Consecutive destinations of a batch handed over, with their rows.
    runs: Vec<(usize, usize)>,
    /// Batches merged into the buffers at once (1: each batch as it comes).
    merge: usize,
    /// Batches held until `merge` of them are, with their plans (reused).
    pending: Vec<Pending>,
    pending_len: usize,
    pending_bytes: usize,
    /// The most memory one appended batch took.
    largest_batch: usize,
}

impl<O: BatchSink> std::fmt::Debug for PartitionedWriter<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionedWriter")
            .field("schema", &self.schema)
            .field("options", &self.options)
            .field("num_partitions", &self.num_partitions)
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
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
        let n = num_partitions as usize;
        let ids = PartitionIds::try_new(partitioning, &schema)?;
        // Holding whole batches, the writer keeps no buffers per destination (the schema's
        // types are still checked by making one).
        let buffered = match options.flush {
            Flush::AtTarget => n,
            Flush::AllAtLimit => 1,
        };
        let buffers = DestinationBuffers::try_new(schema.clone(), buffered)?;
        let partitioner = match options.strategy {
            Strategy::Direct => None,
            Strategy::ScatterThenCopy => Some(Partitioner::try_new(num_partitions)?),
        };
        let base_target = options
            .target_bytes
            .min(options.memory_limit / (2 * n))
            .max(1);
        let mut writer = Self {
            schema,
            num_partitions,
            ids,
            id_buffer: Vec::new(),
            plan: ScatterPlan::new(),
            partitioner,
            buffers,
            targets: vec![0; n],
            base_target,
            rng: options.seed ^ 0x9e37_79b9_7f4a_7c15,
            output,
            metrics: WriterMetrics {
                destination_rows: vec![0; n],
                destination_bytes: vec![0; n],
                ..WriterMetrics::default()
            },
            replicated_any: false,
            failed: false,
            held: Vec::new(),
            held_bytes: 0,
            spare_ids: Vec::new(),
            sorted: Vec::new(),
            cursors: Vec::new(),
            runs: Vec::new(),
            merge: match (options.strategy, options.flush) {
                (Strategy::Direct, Flush::AtTarget) => merged_batches(n),
                _ => 1,
            },
            pending: Vec::new(),
            pending_len: 0,
            pending_bytes: 0,
            largest_batch: 0,
            options,
        };
        for p in 0..n {
            writer.targets[p] = writer.draw_target();
        }
        Ok(writer)
    }

    /// The output.
    pub fn output(&self) -> &O {
        &self.output
    }

    /// The output, to take what it holds (see [`Ready`](crate::Ready)).
    pub fn output_mut(&mut self) -> &mut O {
        &mut self.output
    }

    /// The schema of the batches the writer takes.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// What the writer has done so far.
    pub fn metrics(&self) -> &WriterMetrics {
        &self.metrics
    }

    /// Bytes of buffer memory held now, and of the batches held (with [`Flush::AllAtLimit`],
    /// or until a few are merged into the buffers at once).
    pub fn held_bytes(&self) -> usize {
        self.buffers.held_bytes() + self.held_bytes + self.pending_bytes
    }

    /// Appends the rows of `batch` to their destinations, flushing those that reach their
    /// target, and the largest while the memory limit is passed.
    ///
    /// # Errors
    /// [`WriterError::Partition`] for a batch of another schema or bad partition ids (nothing
    /// of the batch is written then); [`WriterError::Encode`] and [`WriterError::Sink`] from a
    /// flush, after which the writer refuses further calls with [`WriterError::Failed`].
    pub fn append(&mut self, batch: &RecordBatch) -> Result<()> {
        self.check_batch(batch)?;
        let started = Instant::now();
        self.ids.compute(batch, &mut self.id_buffer)?;
        self.metrics.ids_time += started.elapsed();
        self.append_by_ids(batch)
    }

    /// Appends the rows of `batch` to the destinations `ids` gives (one per row, each below
    /// the partition count), as [`append`](Self::append) does with the ids its partitioning
    /// computes: for partition ids a consumer decides (another engine's hash).
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
        if let Some(&id) = ids.iter().find(|&&id| id >= self.num_partitions) {
            return invalid(format!(
                "partition id {id} of {} partitions",
                self.num_partitions
            ));
        }
        self.id_buffer.clear();
        self.id_buffer.extend_from_slice(ids);
        self.append_by_ids(batch)
    }

    fn check_batch(&self, batch: &RecordBatch) -> Result<()> {
        if self.failed {
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
            self.append_rows(batch, None)
        };
        if let Err(e) = result {
            // Buffers are left consistent by a refused batch, but not by a failed flush.
            if !matches!(e, WriterError::Partition(_)) {
                self.failed = true;
            }
            return Err(e);
        }
        self.metrics.batches += 1;
        self.metrics.rows_in += batch.num_rows() as u64;
        if self.options.replicate_nulls_and_any && batch.num_rows() > 0 {
            self.replicated_any = true;
        }
        Ok(())
    }

    /// Moves `batch`'s rows by `ids` (the writer's id buffer when `None`) and flushes.
    fn append_rows(&mut self, batch: &RecordBatch, ids: Option<&[u32]>) -> Result<()> {
        if self.options.flush == Flush::AllAtLimit {
            return self.hold(batch, ids);
        }
        if self.merge > 1 {
            return self.append_merged(batch, ids);
        }
        let ids = ids.unwrap_or(&self.id_buffer);
        let started = Instant::now();
        let before = self.buffers.buffered_bytes();
        match &mut self.partitioner {
            None => {
                self.plan.build(ids, self.num_partitions)?;
                self.buffers.append(batch, &self.plan)?;
            }
            Some(partitioner) => {
                let partitioned = partitioner.partition(batch, ids)?;
                self.buffers.append_partitioned(&partitioned)?;
            }
        }
        self.metrics.scatter_time += started.elapsed();
        self.metrics.rows_out += batch.num_rows() as u64;
        self.metrics.bytes_in += (self.buffers.buffered_bytes() - before) as u64;
        self.flush_due()
    }

    /// Holds `batch` (its columns, and the plan of its rows by `ids`, the writer's id buffer
    /// when `None`) until `merge` batches
    /// are held, then moves them into the buffers together and flushes.
    fn append_merged(&mut self, batch: &RecordBatch, ids: Option<&[u32]>) -> Result<()> {
        let started = Instant::now();
        if self.pending.len() == self.pending_len {
            self.pending.push(Pending::default());
        }
        let slot = &mut self.pending[self.pending_len];
        // Bad ids refuse the batch here, before it is held.
        slot.plan
            .build(ids.unwrap_or(&self.id_buffer), self.num_partitions)?;
        slot.columns.clear();
        slot.columns.extend(batch.columns().iter().cloned());
        slot.bytes = batch.get_array_memory_size();
        self.pending_bytes += slot.bytes;
        self.largest_batch = self.largest_batch.max(slot.bytes);
        self.pending_len += 1;
        self.metrics.rows_out += batch.num_rows() as u64;
        self.metrics.scatter_time += started.elapsed();
        self.note_held();
        // Batches held count against the memory limit: a small limit merges fewer.
        let fits = 1 + self.options.memory_limit / (8 * self.largest_batch.max(1));
        if self.pending_len < self.merge.min(fits) {
            return Ok(());
        }
        self.merge_pending()
    }

    /// Moves the held batches into the buffers, together, and flushes. Any error leaves the
    /// writer failed: the batches were accepted by earlier calls.
    fn merge_pending(&mut self) -> Result<()> {
        if self.pending_len == 0 {
            return Ok(());
        }
        let result = self.merge_held();
        for pending in &mut self.pending[..self.pending_len] {
            pending.columns.clear();
        }
        self.pending_len = 0;
        self.pending_bytes = 0;
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    fn merge_held(&mut self) -> Result<()> {
        let started = Instant::now();
        let before = self.buffers.buffered_bytes();
        let held = &self.pending[..self.pending_len];
        let mut inputs = [(held[0].columns.as_slice(), &held[0].plan); MAX_MERGED];
        for (input, pending) in inputs.iter_mut().zip(held) {
            *input = (pending.columns.as_slice(), &pending.plan);
        }
        let merged = self.buffers.append_columns(&inputs[..held.len()]);
        self.metrics.scatter_time += started.elapsed();
        self.metrics.bytes_in += (self.buffers.buffered_bytes() - before) as u64;
        match merged {
            // Together they pass what a destination's offsets address: one at a time, with
            // the flushes between them.
            Err(partout_core::PartoutError::TooLarge(_)) if held.len() > 1 => {
                let pending = std::mem::take(&mut self.pending);
                let mut result = Ok(());
                for held in &pending[..self.pending_len] {
                    let before = self.buffers.buffered_bytes();
                    result = self
                        .buffers
                        .append_columns(&[(held.columns.as_slice(), &held.plan)])
                        .map_err(WriterError::from)
                        .and_then(|()| {
                            self.metrics.bytes_in +=
                                (self.buffers.buffered_bytes() - before) as u64;
                            self.flush_due()
                        });
                    if result.is_err() {
                        break;
                    }
                }
                self.pending = pending;
                result
            }
            merged => {
                merged?;
                self.flush_due()
            }
        }
    }

    /// Flushes the destinations that reached their target, then the largest while the
    /// buffers and the batches still to be merged pass the memory limit.
    fn flush_due(&mut self) -> Result<()> {
        self.note_held();
        let target_rows = self.options.target_rows.unwrap_or(usize::MAX);
        for p in 0..self.num_partitions as usize {
            let rows = self.buffers.rows(p);
            if rows > 0 && (self.buffers.bytes(p) >= self.targets[p] || rows >= target_rows) {
                self.flush(p, false)?;
            }
        }
        // Room for the batches held before the next merge.
        let pending = (self.merge - 1) * self.largest_batch;
        while self.buffers.held_bytes() + pending > self.options.memory_limit {
            let (largest, bytes) = (0..self.num_partitions as usize)
                .map(|p| (p, self.buffers.bytes(p)))
                .max_by_key(|&(_, bytes)| bytes)
                .expect("at least one destination");
            if bytes == 0 {
                // Nothing buffered: what is held is empty capacity. Let it go.
                for p in 0..self.num_partitions as usize {
                    self.buffers.release(p);
                }
                break;
            }
            self.metrics.memory_flushes += 1;
            self.flush(largest, true)?;
        }
        Ok(())
    }

    /// The rows with a null in any key column, when there are any.
    fn key_nulls(&self, batch: &RecordBatch) -> Option<NullBuffer> {
        self.ids
            .partitioning()
            .keys()
            .iter()
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
        let ids = std::mem::take(&mut self.id_buffer);
        let mut rows: Vec<u32> = Vec::new();
        let mut chunk_ids: Vec<u32> = Vec::new();
        let mut result = Ok(());
        for (row, &id) in ids.iter().enumerate() {
            let replicate = Some(row) == any || nulls.as_ref().is_some_and(|m| m.is_null(row));
            if replicate {
                rows.extend(std::iter::repeat_n(row as u32, n as usize));
                chunk_ids.extend(0..n);
            } else {
                rows.push(row as u32);
                chunk_ids.push(id);
            }
            if rows.len() >= REPLICATION_CHUNK || row + 1 == ids.len() {
                let indices = UInt32Array::from(std::mem::take(&mut rows));
                result = arrow_select::take::take_record_batch(batch, &indices)
                    .map_err(WriterError::from)
                    .and_then(|chunk| self.append_rows(&chunk, Some(&chunk_ids)));
                chunk_ids.clear();
                if result.is_err() {
                    break;
                }
            }
        }
        self.id_buffer = ids;
        result
    }

    fn note_held(&mut self) {
        let held = self.held_bytes() as u64;
        self.metrics.peak_held_bytes = self.metrics.peak_held_bytes.max(held);
    }

    /// A target within ±jitter of the base target (xorshift draws: no allocation, no
    /// dependency, reproducible from the seed).
    fn draw_target(&mut self) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let unit = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        let factor = 1.0 + self.options.jitter * (2.0 * unit - 1.0);
        ((self.base_target as f64 * factor) as usize).max(1)
    }

    /// Hands destination `p`'s buffered rows to the output as its next batch; `release`
    /// gives up the destination's buffers afterwards.
    fn flush(&mut self, p: usize, release: bool) -> Result<()> {
        let started = Instant::now();
        let sink_before = self.output.sink_time();
        let batch = self.buffers.take(p)?;
        self.metrics.destination_rows[p] += batch.num_rows() as u64;
        let bytes = self.output.write_batch(p, &batch)?;
        if release {
            drop(batch);
            self.buffers.release(p);
        } else {
            self.buffers.recycle(p, batch);
        }
        self.metrics.bytes_out += bytes;
        self.metrics.destination_bytes[p] += bytes;
        let sink = self.output.sink_time() - sink_before;
        self.metrics.sink_time += sink;
        self.metrics.encode_time += started.elapsed().saturating_sub(sink);
        self.metrics.flushes += 1;
        self.targets[p] = self.draw_target();
        Ok(())
    }

    /// [`Flush::AllAtLimit`]: holds `batch` with its rows' destinations (`ids`, the writer's
    /// id buffer when `None`), and hands every held row over once the limit is passed.
    fn hold(&mut self, batch: &RecordBatch, ids: Option<&[u32]>) -> Result<()> {
        let started = Instant::now();
        let mut held_ids = self.spare_ids.pop().unwrap_or_default();
        held_ids.clear();
        held_ids.extend_from_slice(ids.unwrap_or(&self.id_buffer));
        let n = self.num_partitions;
        if let Some(&id) = held_ids.iter().find(|&&id| id >= n) {
            self.spare_ids.push(held_ids);
            return Err(WriterError::Partition(
                partout_core::PartoutError::InvalidArgument(format!(
                    "partition id {id} out of range for {n} destinations"
                )),
            ));
        }
        self.held_bytes += batch.get_array_memory_size() + held_ids.capacity() * 4;
        self.held.push((batch.clone(), held_ids));
        self.metrics.scatter_time += started.elapsed();
        self.metrics.rows_out += batch.num_rows() as u64;
        // Bytes of Arrow data, as buffers count them (not the memory the batch spans).
        self.metrics.bytes_in += batch
            .columns()
            .iter()
            .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0) as u64)
            .sum::<u64>();
        self.note_held();
        if self.held_bytes > self.options.memory_limit {
            self.metrics.memory_flushes += 1;
            self.flush_all()?;
        }
        Ok(())
    }

    /// [`Flush::AllAtLimit`]: hands every held row to the output in destination order (a
    /// stable counting sort of the held rows, gathered a batch of about
    /// [`WriterOptions::target_bytes`] at a time), lets the held batches go, and tells the
    /// output a run ended.
    fn flush_all(&mut self) -> Result<()> {
        if self.held.is_empty() {
            return self.output.end_run();
        }
        let started = Instant::now();
        let sink_before = self.output.sink_time();
        let n = self.num_partitions as usize;
        self.cursors.clear();
        self.cursors.resize(n, 0);
        for (_, ids) in &self.held {
            for &id in ids {
                self.cursors[id as usize] += 1;
            }
        }
        for (p, rows) in self.metrics.destination_rows.iter_mut().enumerate() {
            *rows += self.cursors[p] as u64;
        }
        // The rows per destination become where each destination's rows start.
        let mut start = 0;
        for cursor in &mut self.cursors {
            let rows = *cursor;
            *cursor = start;
            start += rows;
        }
        let total = start;
        self.sorted.clear();
        self.sorted.resize(total, (0, 0));
        for (b, (_, ids)) in self.held.iter().enumerate() {
            for (row, &id) in ids.iter().enumerate() {
                let at = &mut self.cursors[id as usize];
                self.sorted[*at] = (b, row);
                *at += 1;
            }
        }
        // Now each cursor is where its destination's rows end.
        let row_bytes = (self.held_bytes / total.max(1)).max(1);
        let chunk = (self.options.target_bytes / row_bytes).max(1);
        let batches: Vec<&RecordBatch> = self.held.iter().map(|(batch, _)| batch).collect();
        let mut p = 0;
        let mut at = 0;
        while at < total {
            let end = (at + chunk).min(total);
            let batch = gather(&self.schema, &batches, &self.sorted[at..end])?;
            self.runs.clear();
            let mut row = at;
            while row < end {
                while self.cursors[p] <= row {
                    p += 1;
                }
                let rows = self.cursors[p].min(end) - row;
                self.runs.push((p, rows));
                row += rows;
            }
            let bytes = self.output.write_sorted(
                &batch,
                &self.runs,
                &mut self.metrics.destination_bytes,
            )?;
            self.metrics.bytes_out += bytes;
            self.metrics.flushes += 1;
            at = end;
        }
        drop(batches);
        for (_, ids) in self.held.drain(..) {
            self.spare_ids.push(ids);
        }
        self.held_bytes = 0;
        let result = self.output.end_run();
        let sink = self.output.sink_time() - sink_before;
        self.metrics.sink_time += sink;
        self.metrics.encode_time += started.elapsed().saturating_sub(sink);
        result
    }

    /// Flushes every destination, ends every destination's output (`BatchSink::finish`), and
    /// returns the output with the metrics.
    ///
    /// # Errors
    /// The output's errors from the last flushes, and [`WriterError::Failed`] after an
    /// earlier failure.
    pub fn finish_output(mut self) -> Result<(O, WriterMetrics)> {
        if self.failed {
            return Err(WriterError::Failed);
        }
        if self.options.flush == Flush::AllAtLimit {
            self.flush_all()?;
        } else {
            self.merge_pending()?;
            for p in 0..self.num_partitions as usize {
                if self.buffers.rows(p) > 0 {
                    self.flush(p, true)?;
                }
            }
        }
        let started = Instant::now();
        let sink_before = self.output.sink_time();
        let before: u64 = self.metrics.destination_bytes.iter().sum();
        self.output.finish(&mut self.metrics.destination_bytes)?;
        self.metrics.bytes_out += self.metrics.destination_bytes.iter().sum::<u64>() - before;
        let sink = self.output.sink_time() - sink_before;
        self.metrics.sink_time += sink;
        self.metrics.encode_time += started.elapsed().saturating_sub(sink);
        Ok((self.output, self.metrics))
    }
}

/// The rows `indices` ((batch, row) pairs) of `batches`, in that order: arrow's `interleave`,
/// column by column, except for fixed-size lists of size 0, whose length arrow 59's
/// `interleave` takes from their (empty) values: there only validity moves.
fn gather(
    schema: &SchemaRef,
    batches: &[&RecordBatch],
    indices: &[(usize, usize)],
) -> Result<RecordBatch> {
    let columns = (0..schema.fields().len())
        .map(|c| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            if let DataType::FixedSizeList(item, 0) = schema.field(c).data_type() {
                let any_nulls = arrays.iter().any(|a| a.null_count() > 0);
                let nulls = any_nulls.then(|| {
                    NullBuffer::from_iter(indices.iter().map(|&(b, row)| arrays[b].is_valid(row)))
                });
                let values = arrow_array::new_empty_array(item.data_type());
                let list = FixedSizeListArray::try_new_with_length(
                    item.clone(),
                    0,
                    values,
                    nulls,
                    indices.len(),
                )?;
                return Ok(Arc::new(list) as ArrayRef);
            }
            Ok(arrow_select::interleave::interleave(&arrays, indices)?)
        })
        .collect::<Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(indices.len()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &options,
    )?)
}

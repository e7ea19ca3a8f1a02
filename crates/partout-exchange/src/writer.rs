//! [`PartitionedWriter`]: batches in, each destination's output out.
//!
//! ```text
//!  append(batch) ─► ids ─► plan ─► rows appended to destination buffers
//!                                   └─ destination p ≥ its target ─► take ─► output.write_batch(p, batch)
//!                                   └─ all buffers > memory limit  ─► flush the largest first
//!  finish()      ─► flush the rest, output.finish() (ends every stream)
//! ```
//!
//! The output is a [`BatchSink`]; [`PartitionedWriter::try_new`] makes the usual one, an
//! [`Encoded`] sink that encodes Arrow IPC streams or Presto pages into a byte [`Sink`].
//!
//! Flush policy: each destination flushes when its buffered bytes reach its target, the
//! smaller of [`WriterOptions::target_bytes`] and an even share of the memory limit (half of
//! `memory_limit / destinations`, leaving room for buffer growth), each drawn anew after every
//! flush within ±[`WriterOptions::jitter`] so that destinations filling at the same rate do not
//! all flush on the same batch. If the memory held by all buffers still passes
//! [`WriterOptions::memory_limit`], the destinations holding most flush first and give their
//! buffers up.

use crate::error::{Result, WriterError};
use crate::output::{BatchSink, Encoded};
use crate::sink::Sink;
use arrow_array::{Array, RecordBatch, UInt32Array};
use arrow_buffer::NullBuffer;
use arrow_schema::SchemaRef;
use partout_core::ids::{PartitionIds, Partitioning};
use partout_core::{DestinationBuffers, Partitioner, ScatterPlan};
use partout_format::ipc::Compression;
use std::time::{Duration, Instant};

/// How rows reach the destination buffers. Both give the same output. On TPC-H lineitem
/// (`partout bench writer`) they run within a few percent of each other, the direct way ahead
/// or level; it is the default because it allocates nothing per batch, where the other builds
/// a whole reordered batch for every append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Rows move from the input into each destination's buffers by the plan's order, a column
    /// at a time (gathered into reused scratch, then copied to each destination as a run).
    #[default]
    Direct,
    /// The batch is first laid out destination by destination (a `PartitionedBatch`), then
    /// each destination's contiguous rows are copied into its buffers.
    ScatterThenCopy,
}

/// The bytes each destination receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// One Arrow IPC stream per destination: the schema, a record batch per flush, the
    /// end-of-stream marker.
    #[default]
    ArrowIpc,
    /// Presto SerializedPages, one per flush, concatenated (checksummed; with
    /// [`Compression::Lz4Frame`], bodies are raw LZ4 blocks as Presto's exchange sends them).
    Presto,
}

/// Options of a [`PartitionedWriter`], checked by [`WriterOptions::validate`].
///
/// ```
/// use partout_exchange::WriterOptions;
/// use partout_format::ipc::Compression;
///
/// let options = WriterOptions::default()
///     .with_target_bytes(256 << 10)
///     .with_compression(Compression::Lz4Frame);
/// assert!(options.validate().is_ok());
/// assert!(WriterOptions::default().with_jitter(1.5).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct WriterOptions {
    /// A destination flushes when it holds this many bytes (default 1 MiB), before jitter and
    /// the memory limit's share.
    pub target_bytes: usize,
    /// Each destination's target is drawn within `target × (1 ± jitter)` (default 0.25; from 0
    /// to 0.9).
    pub jitter: f64,
    /// Bytes of buffer memory all destinations together may hold (default 64 MiB; at least
    /// `target_bytes`).
    pub memory_limit: usize,
    /// What each destination receives (default Arrow IPC streams).
    pub format: OutputFormat,
    /// Body compression (default none). Presto pages take none or LZ4.
    pub compression: Compression,
    /// Rows with a null in any key column go to every destination, and one row (the first)
    /// goes to every destination once (default off).
    pub replicate_nulls_and_any: bool,
    /// Seeds the jitter, for reproducible flush points (default 0).
    pub seed: u64,
    /// How rows reach the buffers (default [`Strategy::Direct`]).
    pub strategy: Strategy,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            target_bytes: 1 << 20,
            jitter: 0.25,
            memory_limit: 64 << 20,
            format: OutputFormat::ArrowIpc,
            compression: Compression::None,
            replicate_nulls_and_any: false,
            seed: 0,
            strategy: Strategy::Direct,
        }
    }
}

impl WriterOptions {
    /// Sets [`target_bytes`](Self::target_bytes).
    pub fn with_target_bytes(mut self, bytes: usize) -> Self {
        self.target_bytes = bytes;
        self
    }

    /// Sets [`jitter`](Self::jitter).
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// Sets [`memory_limit`](Self::memory_limit).
    pub fn with_memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Sets [`format`](Self::format).
    pub fn with_format(mut self, format: OutputFormat) -> Self {
        self.format = format;
        self
    }

    /// Sets [`compression`](Self::compression).
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets [`replicate_nulls_and_any`](Self::replicate_nulls_and_any).
    pub fn with_replicate_nulls_and_any(mut self, on: bool) -> Self {
        self.replicate_nulls_and_any = on;
        self
    }

    /// Sets [`seed`](Self::seed).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`strategy`](Self::strategy).
    pub fn with_strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Checks that the options can work.
    ///
    /// # Errors
    /// [`WriterError::InvalidOption`] naming the option and its value: a zero target, a
    /// jitter outside 0..=0.9, a memory limit below the target.
    pub fn validate(&self) -> Result<()> {
        let invalid = |what: String| Err(WriterError::InvalidOption(what));
        if self.target_bytes == 0 {
            return invalid("target_bytes must be at least 1, got 0".into());
        }
        if !(0.0..=0.9).contains(&self.jitter) {
            return invalid(format!(
                "jitter must be between 0 and 0.9, got {}",
                self.jitter
            ));
        }
        if self.format == OutputFormat::Presto && self.compression == Compression::Zstd {
            return invalid("Presto pages are compressed with LZ4 or not at all, not ZSTD".into());
        }
        if self.memory_limit < self.target_bytes {
            return invalid(format!(
                "memory_limit ({} bytes) must be at least target_bytes ({} bytes)",
                self.memory_limit, self.target_bytes
            ));
        }
        Ok(())
    }
}

/// What a [`PartitionedWriter`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriterMetrics {
    /// Batches appended.
    pub batches: u64,
    /// Rows appended.
    pub rows_in: u64,
    /// Rows written to destinations (more than `rows_in` when rows are replicated).
    pub rows_out: u64,
    /// Bytes of row data taken into the buffers (values, offsets, validity).
    pub bytes_in: u64,
    /// Encoded bytes handed to the sink.
    pub bytes_out: u64,
    /// Record batches encoded (one per destination flush).
    pub flushes: u64,
    /// Flushes forced by the memory limit.
    pub memory_flushes: u64,
    /// The most buffer memory held at once.
    pub peak_held_bytes: u64,
    /// Time computing partition ids.
    pub ids_time: Duration,
    /// Time moving rows into the buffers.
    pub scatter_time: Duration,
    /// Time building and encoding flushed batches.
    pub encode_time: Duration,
    /// Time in the byte sink (part of the output's time, where the output can tell it apart).
    pub sink_time: Duration,
    /// Rows each destination received.
    pub destination_rows: Vec<u64>,
    /// Bytes each destination received.
    pub destination_bytes: Vec<u64>,
}

/// Rows of at most this many (after replication) are moved per step, so that replicating
/// null-key rows to every destination never builds one huge batch.
const REPLICATION_CHUNK: usize = 1 << 16;

/// Partitions batches into one Arrow IPC stream per destination.
///
/// ```
/// use arrow_array::{Int64Array, RecordBatch};
/// use partout_core::ids::Partitioning;
/// use partout_exchange::{MemorySink, PartitionedWriter, WriterOptions};
/// use partout_format::ipc::decode_stream;
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([
///     ("k", Arc::new(Int64Array::from_iter_values(0..1000)) as _),
/// ])
/// .unwrap();
/// let mut writer = PartitionedWriter::try_new(
///     batch.schema(),
///     Partitioning::hash(vec![0], 4),
///     WriterOptions::default(),
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

impl<S: Sink> PartitionedWriter<Encoded<S>> {
    /// A writer of batches of `schema`, partitioned by `partitioning`, encoded as
    /// [`WriterOptions::format`] into `sink`.
    ///
    /// # Errors
    /// [`WriterError::InvalidOption`] for options that cannot work;
    /// [`WriterError::Partition`] when the partitioning does not fit the schema (a missing key
    /// column, a key type the scheme cannot hash) or a column type cannot be buffered;
    /// [`WriterError::Encode`] for a schema the format cannot carry.
    pub fn try_new(
        schema: SchemaRef,
        partitioning: Partitioning,
        options: WriterOptions,
        sink: S,
    ) -> Result<Self> {
        options.validate()?;
        let output = Encoded::try_new(
            schema.clone(),
            partitioning.num_partitions() as usize,
            options.format,
            options.compression,
            sink,
        )?;
        Self::with_output(schema, partitioning, options, output)
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        self.output.sink()
    }

    /// Flushes every destination, ends every destination's IPC stream (a destination that
    /// received no rows gets a stream of the schema alone; Presto pages need no end, and such
    /// a destination gets no bytes), finishes the sink, and returns it with the metrics.
    ///
    /// # Errors
    /// [`WriterError::Encode`] and [`WriterError::Sink`] from the last flushes, and
    /// [`WriterError::Failed`] after an earlier failure.
    pub fn finish(self) -> Result<(S, WriterMetrics)> {
        let (output, metrics) = self.finish_output()?;
        Ok((output.into_sink(), metrics))
    }
}

impl<O: BatchSink> PartitionedWriter<O> {
    /// A writer of batches of `schema`, partitioned by `partitioning`, whose flushed batches
    /// go to `output` (`options.format` and `options.compression` are the output's business).
    ///
    /// # Errors
    /// As [`try_new`](PartitionedWriter::try_new), but for the format.
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
        let buffers = DestinationBuffers::try_new(schema.clone(), n)?;
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

    /// The schema of the batches the writer takes.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// What the writer has done so far.
    pub fn metrics(&self) -> &WriterMetrics {
        &self.metrics
    }

    /// Bytes of buffer memory held now.
    pub fn held_bytes(&self) -> usize {
        self.buffers.held_bytes()
    }

    /// Appends the rows of `batch` to their destinations, flushing those that reach their
    /// target, and the largest while the memory limit is passed.
    ///
    /// # Errors
    /// [`WriterError::Partition`] for a batch of another schema or bad partition ids (nothing
    /// of the batch is written then); [`WriterError::Encode`] and [`WriterError::Sink`] from a
    /// flush, after which the writer refuses further calls with [`WriterError::Failed`].
    pub fn append(&mut self, batch: &RecordBatch) -> Result<()> {
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
        let started = Instant::now();
        self.ids.compute(batch, &mut self.id_buffer)?;
        self.metrics.ids_time += started.elapsed();
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
        self.note_held();
        for p in 0..self.num_partitions as usize {
            if self.buffers.rows(p) > 0 && self.buffers.bytes(p) >= self.targets[p] {
                self.flush(p, false)?;
            }
        }
        while self.buffers.held_bytes() > self.options.memory_limit {
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
        let held = self.buffers.held_bytes() as u64;
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
        for p in 0..self.num_partitions as usize {
            if self.buffers.rows(p) > 0 {
                self.flush(p, true)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_options_are_named() {
        let cases = [
            (
                WriterOptions::default().with_target_bytes(0),
                "target_bytes",
            ),
            (WriterOptions::default().with_jitter(-0.1), "jitter"),
            (WriterOptions::default().with_jitter(f64::NAN), "jitter"),
            (
                WriterOptions::default()
                    .with_target_bytes(10 << 20)
                    .with_memory_limit(1 << 20),
                "memory_limit",
            ),
        ];
        for (options, name) in cases {
            let err = options.validate().unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
        }
        assert!(WriterOptions::default().validate().is_ok());
    }
}

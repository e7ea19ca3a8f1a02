//! The honest baselines partout's benchmarks run beside its own kernels: the ways DataFusion
//! moves rows to destinations, rebuilt on arrow-rs with the same inputs (a batch and one
//! partition id per row).

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow_schema::ArrowError;
use arrow_select::take::take_arrays;
use std::hash::BuildHasher;

/// DataFusion's current way (`partition_grouped_take`): push every row's index onto its
/// destination's list (lists reused across batches), concatenate the lists into one index
/// array, `take` every column once, and keep the destination offsets.
#[derive(Debug, Default)]
pub struct GroupedTake {
    indices: Vec<Vec<u32>>,
}

impl GroupedTake {
    /// A baseline with no lists yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The reordered batch and `num_partitions + 1` offsets, as `Partitioner::partition`
    /// returns them.
    ///
    /// # Errors
    /// What arrow's `take` returns.
    pub fn partition(
        &mut self,
        batch: &RecordBatch,
        ids: &[u32],
        num_partitions: usize,
    ) -> Result<(RecordBatch, Vec<usize>), ArrowError> {
        fill_index_lists(&mut self.indices, ids, num_partitions);
        let mut offsets = Vec::with_capacity(num_partitions + 1);
        let mut all = Vec::with_capacity(ids.len());
        offsets.push(0);
        for list in &self.indices {
            all.extend_from_slice(list);
            offsets.push(all.len());
        }
        let indices = UInt32Array::from(all);
        let columns = take_arrays(batch.columns(), &indices, None)?;
        Ok((with_columns(batch, columns, ids.len())?, offsets))
    }
}

/// DataFusion's older way: one `take` of every column per non-empty destination.
#[derive(Debug, Default)]
pub struct TakePerDestination {
    indices: Vec<Vec<u32>>,
}

impl TakePerDestination {
    /// A baseline with no lists yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One batch per non-empty destination, with its destination.
    ///
    /// # Errors
    /// What arrow's `take` returns.
    pub fn partition(
        &mut self,
        batch: &RecordBatch,
        ids: &[u32],
        num_partitions: usize,
    ) -> Result<Vec<(usize, RecordBatch)>, ArrowError> {
        fill_index_lists(&mut self.indices, ids, num_partitions);
        let mut out = Vec::new();
        for (p, list) in self.indices.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let indices = UInt32Array::from(list.clone());
            let columns = take_arrays(batch.columns(), &indices, None)?;
            out.push((p, with_columns(batch, columns, list.len())?));
        }
        Ok(out)
    }
}

/// DataFusion's index lists: the rows of each destination, lists reused across batches.
fn fill_index_lists(indices: &mut Vec<Vec<u32>>, ids: &[u32], num_partitions: usize) {
    indices.resize_with(num_partitions, Vec::new);
    indices.iter_mut().for_each(Vec::clear);
    for (row, &id) in ids.iter().enumerate() {
        indices[id as usize].push(row as u32);
    }
}

fn with_columns(
    batch: &RecordBatch,
    columns: Vec<ArrayRef>,
    rows: usize,
) -> Result<RecordBatch, ArrowError> {
    RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

/// DataFusion 55's hash partitioning ids, re-created (partout-datafusion's tests hold them
/// equal to DataFusion's own `create_hashes` with `REPARTITION_RANDOM_STATE`): foldhash's fast
/// hasher with seed 0 for the first key column; each further column hashed by a hasher seeded
/// with the hash so far (Int64) or combined with it by `combine_hashes` (Utf8, Utf8View); a null
/// leaves the hash as it was; Utf8View values of up to 12 bytes hashed from their 16-byte view,
/// longer ones as bytes; then `hash % n`.
#[derive(Debug)]
pub struct DataFusionHash {
    state: foldhash::fast::FixedState,
    hashes: Vec<u64>,
}

impl Default for DataFusionHash {
    fn default() -> Self {
        Self {
            state: foldhash::fast::FixedState::with_seed(0),
            hashes: Vec::new(),
        }
    }
}

/// DataFusion's `combine_hashes`.
fn combine_hashes(l: u64, r: u64) -> u64 {
    let hash = (17 * 37u64).wrapping_add(l);
    hash.wrapping_mul(37).wrapping_add(r)
}

/// A value hashed by a hasher seeded with the hash so far (DataFusion's rehash of primitives
/// and of views).
fn reseeded(seed: u64, value: impl std::hash::Hash) -> u64 {
    foldhash::fast::SeedableRandomState::with_seed(seed, foldhash::SharedSeed::global_fixed())
        .hash_one(value)
}

impl DataFusionHash {
    /// A baseline with DataFusion's fixed seeds.
    pub fn new() -> Self {
        Self::default()
    }

    /// One id per row of `batch` into `ids`.
    ///
    /// # Panics
    /// For a key type other than Int64, Utf8 and Utf8View (all the benchmark uses).
    pub fn ids(&mut self, batch: &RecordBatch, keys: &[usize], n: u32, ids: &mut Vec<u32>) {
        use arrow_array::cast::AsArray;
        use arrow_array::{Array, types::Int64Type};
        let rows = batch.num_rows();
        self.hashes.clear();
        self.hashes.resize(rows, 0);
        for (c, &k) in keys.iter().enumerate() {
            let column = batch.column(k);
            let state = &self.state;
            let first = c == 0;
            let hashes = &mut self.hashes;
            match column.data_type() {
                arrow_schema::DataType::Int64 => {
                    let values = column.as_primitive::<Int64Type>();
                    for (i, hash) in hashes.iter_mut().enumerate() {
                        if values.is_valid(i) {
                            let v = values.value(i);
                            *hash = match first {
                                true => state.hash_one(v),
                                false => reseeded(*hash, v),
                            };
                        }
                    }
                }
                arrow_schema::DataType::Utf8 => {
                    let values = column.as_string::<i32>();
                    for (i, hash) in hashes.iter_mut().enumerate() {
                        if values.is_valid(i) {
                            let h = state.hash_one(values.value(i));
                            *hash = match first {
                                true => h,
                                false => combine_hashes(h, *hash),
                            };
                        }
                    }
                }
                arrow_schema::DataType::Utf8View => {
                    let values = column.as_string_view();
                    let views = values.views();
                    for (i, hash) in hashes.iter_mut().enumerate() {
                        if values.is_valid(i) {
                            let view = views[i];
                            let bytes = values.value(i).as_bytes();
                            *hash = match (first, (view as u32) <= 12) {
                                (true, true) => state.hash_one(view),
                                (true, false) => state.hash_one(bytes),
                                (false, true) => reseeded(*hash, view),
                                (false, false) => reseeded(*hash, bytes),
                            };
                        }
                    }
                }
                other => panic!("the DataFusion baseline does not hash {other}"),
            }
        }
        let divisor = strength_reduce::StrengthReducedU64::new(u64::from(n));
        ids.clear();
        ids.extend(self.hashes.iter().map(|&h| (h % divisor) as u32));
    }
}

/// Spark's hash partitioning done plainly: per row and per key column, dispatch on the type,
/// Murmur3_x86_32 written out in Java's signed arithmetic, then `pmod` with `%`. Also an
/// independent check of partout's columnar implementation.
#[derive(Debug, Default)]
pub struct NaiveSparkHash;

impl NaiveSparkHash {
    fn mix_k1(k: i32) -> i32 {
        k.wrapping_mul(0xcc9e2d51u32 as i32)
            .rotate_left(15)
            .wrapping_mul(0x1b873593)
    }

    fn mix_h1(h: i32, k: i32) -> i32 {
        (h ^ k)
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe6546b64u32 as i32)
    }

    fn fmix(h: i32, len: i32) -> i32 {
        let mut h = (h ^ len) as u32;
        h ^= h >> 16;
        h = h.wrapping_mul(0x85ebca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2ae35);
        (h ^ (h >> 16)) as i32
    }

    fn long(v: i64, seed: i32) -> i32 {
        let h = Self::mix_h1(seed, Self::mix_k1(v as i32));
        Self::fmix(Self::mix_h1(h, Self::mix_k1((v >> 32) as i32)), 8)
    }

    fn bytes(b: &[u8], seed: i32) -> i32 {
        let aligned = b.len() - b.len() % 4;
        let mut h = seed;
        for i in (0..aligned).step_by(4) {
            h = Self::mix_h1(
                h,
                Self::mix_k1(i32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])),
            );
        }
        for &byte in &b[aligned..] {
            h = Self::mix_h1(h, Self::mix_k1(byte as i8 as i32));
        }
        Self::fmix(h, b.len() as i32)
    }

    /// One id per row of `batch` into `ids`.
    ///
    /// # Panics
    /// For a key type other than Int64, Utf8 and Utf8View.
    pub fn ids(&self, batch: &RecordBatch, keys: &[usize], n: u32, ids: &mut Vec<u32>) {
        use arrow_array::cast::AsArray;
        use arrow_array::{Array, types::Int64Type};
        ids.clear();
        for row in 0..batch.num_rows() {
            let mut h = 42i32;
            for &k in keys {
                let column = batch.column(k);
                if column.is_null(row) {
                    continue;
                }
                h = match column.data_type() {
                    arrow_schema::DataType::Int64 => {
                        Self::long(column.as_primitive::<Int64Type>().value(row), h)
                    }
                    arrow_schema::DataType::Utf8 => {
                        Self::bytes(column.as_string::<i32>().value(row).as_bytes(), h)
                    }
                    arrow_schema::DataType::Utf8View => {
                        Self::bytes(column.as_string_view().value(row).as_bytes(), h)
                    }
                    other => panic!("the naive Spark baseline does not hash {other}"),
                };
            }
            ids.push((((h % n as i32) + n as i32) % n as i32) as u32);
        }
    }
}

/// One Arrow IPC stream writer per destination, writing into memory, as both shuffle
/// baselines use them.
struct StreamWriters<W: std::io::Write> {
    writers: Vec<arrow_ipc::writer::StreamWriter<W>>,
    /// Compact view columns before writing (arrow's IPC writer writes a view column's data
    /// buffers whole, however few rows point into them).
    gc_views: bool,
}

impl<W: std::io::Write> StreamWriters<W> {
    fn try_new(
        schema: &arrow_schema::Schema,
        outputs: Vec<W>,
        options: &arrow_ipc::writer::IpcWriteOptions,
        gc_views: bool,
    ) -> Result<Self, ArrowError> {
        let writers = outputs
            .into_iter()
            .map(|output| {
                arrow_ipc::writer::StreamWriter::try_new_with_options(
                    output,
                    schema,
                    options.clone(),
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { writers, gc_views })
    }

    fn write(&mut self, p: usize, batch: &RecordBatch) -> Result<(), ArrowError> {
        if !self.gc_views {
            return self.writers[p].write(batch);
        }
        use arrow_array::cast::AsArray;
        use arrow_schema::DataType;
        let columns = batch
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                DataType::Utf8View => std::sync::Arc::new(c.as_string_view().gc()) as ArrayRef,
                DataType::BinaryView => std::sync::Arc::new(c.as_binary_view().gc()) as ArrayRef,
                _ => c.clone(),
            })
            .collect();
        self.writers[p].write(&with_columns(batch, columns, batch.num_rows())?)
    }

    fn finish(self) -> Result<Vec<W>, ArrowError> {
        self.writers
            .into_iter()
            .map(|mut w| {
                w.finish()?;
                w.into_inner()
            })
            .collect()
    }
}

/// A shuffle write on DataFusion's kernels: ids in, one grouped `take` per batch, then for
/// each destination's zero-copy slice either
/// - written straight away as a record batch of that destination's IPC stream (the per-slice
///   writer, as Ballista's legacy hash shuffle writer does), or
/// - with [`with_batch_size`](Self::with_batch_size), first coalesced to that many rows by
///   arrow's `BatchCoalescer`, as DataFusion 55's `RepartitionExec` outputs are, then encoded.
///
/// With `gc_views`, view columns are compacted first (without, each slice's stream carries the
/// whole batch's string data).
pub struct DataFusionShuffle<W: std::io::Write = Vec<u8>> {
    partitioner: GroupedTake,
    writers: StreamWriters<W>,
    num_partitions: usize,
    coalescers: Option<Vec<arrow_select::coalesce::BatchCoalescer>>,
}

impl<W: std::io::Write> DataFusionShuffle<W> {
    /// A shuffle of batches of `schema` into one IPC stream per output in `outputs`.
    ///
    /// # Errors
    /// What arrow's IPC writer returns.
    pub fn try_new(
        schema: &arrow_schema::Schema,
        outputs: Vec<W>,
        options: &arrow_ipc::writer::IpcWriteOptions,
        gc_views: bool,
    ) -> Result<Self, ArrowError> {
        let num_partitions = outputs.len();
        Ok(Self {
            partitioner: GroupedTake::new(),
            writers: StreamWriters::try_new(schema, outputs, options, gc_views)?,
            num_partitions,
            coalescers: None,
        })
    }

    /// Each destination's rows coalesced to `rows`-row batches before they are encoded, as
    /// DataFusion's `RepartitionExec` hands its outputs on.
    pub fn with_batch_size(mut self, schema: &arrow_schema::SchemaRef, rows: usize) -> Self {
        self.coalescers = Some(
            (0..self.num_partitions)
                .map(|_| arrow_select::coalesce::BatchCoalescer::new(schema.clone(), rows))
                .collect(),
        );
        self
    }

    /// Partitions `batch` by `ids` and writes every destination's rows (or coalesces them).
    ///
    /// # Errors
    /// What arrow's `take`, coalescer and IPC writer return.
    pub fn append(&mut self, batch: &RecordBatch, ids: &[u32]) -> Result<(), ArrowError> {
        let (moved, offsets) = self
            .partitioner
            .partition(batch, ids, self.num_partitions)?;
        for (p, range) in offsets.windows(2).enumerate() {
            if range[1] > range[0] {
                let slice = moved.slice(range[0], range[1] - range[0]);
                match &mut self.coalescers {
                    None => self.writers.write(p, &slice)?,
                    Some(coalescers) => {
                        coalescers[p].push_batch(slice)?;
                        while let Some(full) = coalescers[p].next_completed_batch() {
                            self.writers.write(p, &full)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes what the coalescers hold, ends every stream and returns the outputs.
    ///
    /// # Errors
    /// What arrow's coalescer and IPC writer return.
    pub fn finish(mut self) -> Result<Vec<W>, ArrowError> {
        if let Some(coalescers) = &mut self.coalescers {
            for (p, coalescer) in coalescers.iter_mut().enumerate() {
                coalescer.finish_buffered_batch()?;
                while let Some(rest) = coalescer.next_completed_batch() {
                    self.writers.write(p, &rest)?;
                }
            }
        }
        self.writers.finish()
    }
}

/// Comet's shuffle write (its buffered "multi-partition" writer): input batches kept whole,
/// each destination's `(batch, row)` indices collected, and at a flush (buffered input past
/// the memory limit, or the end) every destination's rows gathered with arrow's
/// `interleave`, `batch_size` rows at a time, and written to its IPC stream.
pub struct CometShuffle<W: std::io::Write = Vec<u8>> {
    batches: Vec<RecordBatch>,
    indices: Vec<Vec<(usize, usize)>>,
    buffered: usize,
    memory_limit: usize,
    batch_size: usize,
    writers: StreamWriters<W>,
}

impl<W: std::io::Write> CometShuffle<W> {
    /// A shuffle of batches of `schema` into one IPC stream per output in `outputs`.
    ///
    /// # Errors
    /// What arrow's IPC writer returns.
    pub fn try_new(
        schema: &arrow_schema::Schema,
        outputs: Vec<W>,
        memory_limit: usize,
        batch_size: usize,
        options: &arrow_ipc::writer::IpcWriteOptions,
        gc_views: bool,
    ) -> Result<Self, ArrowError> {
        Ok(Self {
            batches: Vec::new(),
            indices: vec![Vec::new(); outputs.len()],
            buffered: 0,
            memory_limit,
            batch_size,
            writers: StreamWriters::try_new(schema, outputs, options, gc_views)?,
        })
    }

    /// Buffers `batch` and its rows' destinations, flushing past the memory limit.
    ///
    /// # Errors
    /// What arrow's `interleave` and IPC writer return.
    pub fn append(&mut self, batch: &RecordBatch, ids: &[u32]) -> Result<(), ArrowError> {
        let b = self.batches.len();
        for (row, &id) in ids.iter().enumerate() {
            self.indices[id as usize].push((b, row));
        }
        self.buffered += batch.get_array_memory_size();
        self.batches.push(batch.clone());
        if self.buffered >= self.memory_limit {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ArrowError> {
        let batches: Vec<&RecordBatch> = self.batches.iter().collect();
        for (p, indices) in self.indices.iter_mut().enumerate() {
            for chunk in indices.chunks(self.batch_size) {
                let gathered = arrow_select::interleave::interleave_record_batch(&batches, chunk)?;
                self.writers.write(p, &gathered)?;
            }
            indices.clear();
        }
        self.batches.clear();
        self.buffered = 0;
        Ok(())
    }

    /// Flushes what is buffered, ends every stream and returns the outputs.
    ///
    /// # Errors
    /// What arrow's `interleave` and IPC writer return.
    pub fn finish(mut self) -> Result<Vec<W>, ArrowError> {
        self.flush()?;
        self.writers.finish()
    }
}

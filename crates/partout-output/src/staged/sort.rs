//! A destination's rows in a [`SortOrder`], within a bounded memory ([`Sorter`]): an external
//! merge sort.
//!
//! ```text
//!  rows ─► chunk (batches + their keys in arrow-row form) ── full ─► sorted ─► run file
//!          ...                                                       (hidden, in the dir)
//!  end ─► no run spilled: the chunk sorted, straight to the file
//!         else: runs merged 16 at a time into longer runs while more than 16 are left,
//!               then the last 16 or fewer merged into the file
//! ```
//!
//! A chunk holds at most the memory given; each run is written in batches of a
//! thirty-second of it, so a merge of sixteen runs holds half of it. Keys are compared as
//! arrow-row rows (bytes compared as bytes); rows whose keys are equal come out in no
//! particular order.

use super::WRITE_ROWS;
#[cfg(test)]
use crate::SortKey;
use crate::spill_file::{SpillFile, SpillReader, SpillWriter};
use crate::{OutputError, SortOrder, sink_error};
use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_row::{Row, RowConverter, Rows};
use arrow_schema::{DataType, SchemaRef};
use arrow_select::interleave::interleave_record_batch;
use partout_exchange::WriterError;
use std::path::Path;
use std::sync::Arc;

/// Runs merged at once, at most.
const FAN_IN: usize = 16;

/// Bytes each run being merged buffers as it is read (`BufReader`'s default).
const READ_BUFFER: usize = 8 << 10;

/// Bytes a row costs a chunk besides its values and its key: its place in the order.
const ORDER_BYTES: usize = 4;

/// What a sorted output's writer sorts by, and the memory each thread sorting has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sorting {
    /// The order within each file.
    pub order: SortOrder,
    /// The most each thread's rows being sorted may hold, in bytes.
    pub memory: usize,
}

/// Sorts one destination's rows: [`push`](Self::push) each batch, then
/// [`finish`](Self::finish) hands them on in order.
pub(super) struct Sorter<'a> {
    p: usize,
    schema: SchemaRef,
    /// The sort keys' columns.
    columns: Vec<usize>,
    converter: RowConverter,
    memory: usize,
    dir: &'a Path,
    /// The rows not yet in a run, with their keys.
    batches: Vec<RecordBatch>,
    keys: Rows,
    /// The first row of each batch among the chunk's rows.
    starts: Vec<usize>,
    values_bytes: usize,
    /// Runs spilled (removed when dropped).
    runs: Vec<SpillFile>,
    /// Rows in each batch of a run, once one is spilled.
    run_rows: usize,
}

impl<'a> Sorter<'a> {
    /// A sorter of destination `p`'s rows of `schema` in `sorting.order`, holding at most
    /// `sorting.memory` bytes of rows, spilling runs in `dir`.
    pub(super) fn try_new(
        p: usize,
        schema: SchemaRef,
        sorting: &Sorting,
        dir: &'a Path,
    ) -> Result<Self, WriterError> {
        let (columns, fields) = sorting
            .order
            .fields(&schema)
            .map_err(|e: OutputError| sink_error(Some(p), e.to_string()))?;
        let converter = RowConverter::new(fields).map_err(|e| sink_error(Some(p), e))?;
        let keys = converter.empty_rows(0, 0);
        Ok(Self {
            p,
            schema,
            columns,
            converter,
            memory: sorting.memory.max(1),
            dir,
            batches: Vec::new(),
            keys,
            starts: Vec::new(),
            values_bytes: 0,
            runs: Vec::new(),
            run_rows: WRITE_ROWS,
        })
    }

    /// Takes `batch`'s rows; spills the chunk as a sorted run once it holds the memory given.
    pub(super) fn push(&mut self, batch: RecordBatch) -> Result<(), WriterError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let keys: Vec<ArrayRef> = self
            .columns
            .iter()
            .map(|&c| batch.column(c).clone())
            .collect();
        self.converter
            .append(&mut self.keys, &keys)
            .map_err(|e| sink_error(Some(self.p), e))?;
        self.values_bytes += slice_bytes(&batch).map_err(|e| sink_error(Some(self.p), e))?;
        self.starts.push(self.keys.num_rows() - batch.num_rows());
        self.batches.push(batch);
        if self.chunk_bytes() >= self.memory {
            self.spill()?;
        }
        Ok(())
    }

    /// Hands every row pushed to `write` in order, in batches of up to [`WRITE_ROWS`] rows.
    pub(super) fn finish(
        mut self,
        write: &mut dyn FnMut(&RecordBatch) -> Result<(), WriterError>,
    ) -> Result<(), WriterError> {
        if self.runs.is_empty() {
            let order = self.order()?;
            return self.emit_chunk(&order, WRITE_ROWS, &mut |batch| write(&batch));
        }
        if !self.batches.is_empty() {
            self.spill()?;
        }
        let mut runs = std::mem::take(&mut self.runs);
        while runs.len() > FAN_IN {
            let merged: Vec<SpillFile> = runs.drain(..FAN_IN).collect();
            let mut writer = self.run_file()?;
            self.merge(&merged, self.run_rows, &mut |batch| writer.write(&batch))?;
            drop(merged);
            runs.push(writer.finish()?);
        }
        self.merge(&runs, WRITE_ROWS, &mut |batch| write(&batch))
    }

    /// What the chunk holds: its rows' values, keys and places in the order.
    fn chunk_bytes(&self) -> usize {
        self.values_bytes + self.keys.size() + self.keys.num_rows() * ORDER_BYTES
    }

    /// The chunk's rows in order, by their place among its rows.
    fn order(&self) -> Result<Vec<u32>, WriterError> {
        let rows = u32::try_from(self.keys.num_rows()).map_err(|_| {
            sink_error(
                Some(self.p),
                "more than 2^32 rows held to be sorted at once (the memory given is too large)",
            )
        })?;
        let mut order: Vec<u32> = (0..rows).collect();
        order.sort_unstable_by(|&a, &b| self.keys.row(a as usize).cmp(&self.keys.row(b as usize)));
        Ok(order)
    }

    /// Hands the chunk's rows, in `order`, to `out` in batches of `rows` rows.
    fn emit_chunk(
        &self,
        order: &[u32],
        rows: usize,
        out: &mut dyn FnMut(RecordBatch) -> Result<(), WriterError>,
    ) -> Result<(), WriterError> {
        let batches: Vec<&RecordBatch> = self.batches.iter().collect();
        let mut indices = Vec::with_capacity(rows.min(order.len()));
        for part in order.chunks(rows.max(1)) {
            indices.clear();
            indices.extend(part.iter().map(|&i| {
                let i = i as usize;
                let b = self.starts.partition_point(|&s| s <= i) - 1;
                (b, i - self.starts[b])
            }));
            let batch = interleave_record_batch(&batches, &indices)
                .map_err(|e| sink_error(Some(self.p), e))?;
            out(compact(batch).map_err(|e| sink_error(Some(self.p), e))?)?;
        }
        Ok(())
    }

    /// Writes the chunk, sorted, as a run; the chunk is empty after.
    fn spill(&mut self) -> Result<(), WriterError> {
        if self.runs.is_empty() {
            // A merge of sixteen runs holds half the memory: a batch of each.
            let row_bytes = self.chunk_bytes().div_ceil(self.keys.num_rows().max(1));
            self.run_rows = (self.memory / (2 * FAN_IN) / row_bytes.max(1)).clamp(1, WRITE_ROWS);
        }
        let order = self.order()?;
        let mut writer = self.run_file()?;
        self.emit_chunk(&order, self.run_rows, &mut |batch| writer.write(&batch))?;
        self.runs.push(writer.finish()?);
        self.batches.clear();
        self.starts.clear();
        self.keys = self.converter.empty_rows(0, 0);
        self.values_bytes = 0;
        Ok(())
    }

    /// A new hidden run file in the directory.
    fn run_file(&self) -> Result<SpillWriter, WriterError> {
        SpillWriter::create(self.dir, ".sorted-run-", &self.schema, Some(self.p))
    }

    /// Merges `runs` (each in order) into `out`, in batches of `rows` rows.
    fn merge(
        &self,
        runs: &[SpillFile],
        rows: usize,
        out: &mut dyn FnMut(RecordBatch) -> Result<(), WriterError>,
    ) -> Result<(), WriterError> {
        // Batches the rows being gathered come from: each cursor's, and those of cursors
        // that moved on since the last batch out.
        let mut held: Vec<RecordBatch> = Vec::new();
        let mut cursors = Vec::with_capacity(runs.len());
        for run in runs {
            let mut cursor = Cursor {
                reader: run.read(READ_BUFFER)?,
                keys: self.converter.empty_rows(0, 0),
                pos: 0,
                held: 0,
            };
            if self.advance(&mut cursor, &mut held)? {
                cursors.push(cursor);
            }
        }
        // The live cursors, by their next row.
        let mut queue: Vec<usize> = (0..cursors.len()).collect();
        queue.sort_by(|&a, &b| key(&cursors[a]).cmp(&key(&cursors[b])));
        let mut indices: Vec<(usize, usize)> = Vec::with_capacity(rows);
        while let Some(&c) = queue.first() {
            let cursor = &mut cursors[c];
            indices.push((cursor.held, cursor.pos));
            cursor.pos += 1;
            if indices.len() >= rows {
                self.emit(&mut held, &mut indices, &mut cursors, &queue, out)?;
            }
            let cursor = &mut cursors[c];
            if cursor.pos == cursor.keys.num_rows() && !self.advance(cursor, &mut held)? {
                queue.remove(0);
                continue;
            }
            // Still first: most rows of runs that interleave little.
            let next = key(&cursors[c]);
            if queue.get(1).is_none_or(|&o| next <= key(&cursors[o])) {
                continue;
            }
            queue.remove(0);
            let at = queue.partition_point(|&o| key(&cursors[o]) <= next);
            queue.insert(at, c);
        }
        if !indices.is_empty() {
            self.emit(&mut held, &mut indices, &mut cursors, &queue, out)?;
        }
        Ok(())
    }

    /// Hands the rows gathered to `out`, then keeps only the batches the live cursors read.
    fn emit(
        &self,
        held: &mut Vec<RecordBatch>,
        indices: &mut Vec<(usize, usize)>,
        cursors: &mut [Cursor],
        live: &[usize],
        out: &mut dyn FnMut(RecordBatch) -> Result<(), WriterError>,
    ) -> Result<(), WriterError> {
        let batches: Vec<&RecordBatch> = held.iter().collect();
        let batch = interleave_record_batch(&batches, indices)
            .and_then(compact)
            .map_err(|e| sink_error(Some(self.p), e))?;
        indices.clear();
        out(batch)?;
        let mut kept = Vec::with_capacity(live.len());
        for &c in live {
            kept.push(held[cursors[c].held].clone());
            cursors[c].held = kept.len() - 1;
        }
        *held = kept;
        Ok(())
    }

    /// Moves `cursor` to its run's next batch with rows, held in `held`; `false` at the end
    /// of the run.
    fn advance(
        &self,
        cursor: &mut Cursor,
        held: &mut Vec<RecordBatch>,
    ) -> Result<bool, WriterError> {
        for batch in cursor.reader.by_ref() {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            let keys: Vec<ArrayRef> = self
                .columns
                .iter()
                .map(|&c| batch.column(c).clone())
                .collect();
            cursor.keys = self
                .converter
                .convert_columns(&keys)
                .map_err(|e| sink_error(Some(self.p), e))?;
            cursor.pos = 0;
            cursor.held = held.len();
            held.push(batch);
            return Ok(true);
        }
        Ok(false)
    }
}

/// The key of `cursor`'s next row.
fn key(cursor: &Cursor) -> Row<'_> {
    cursor.keys.row(cursor.pos)
}

/// A run being merged: its batch being read, with its keys.
struct Cursor {
    reader: SpillReader,
    keys: Rows,
    pos: usize,
    /// Where its batch is among those held.
    held: usize,
}

/// `batch` with its string and binary views' values copied into buffers of their own.
/// Interleaved views keep every buffer of every batch they were taken from: a batch of a few
/// rows would hold, and spill, the values of a whole chunk.
fn compact(batch: RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
    if !batch
        .columns()
        .iter()
        .any(|c| matches!(c.data_type(), DataType::Utf8View | DataType::BinaryView))
    {
        return Ok(batch);
    }
    let columns = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Utf8View => Arc::new(c.as_string_view().gc()) as ArrayRef,
            DataType::BinaryView => Arc::new(c.as_binary_view().gc()) as ArrayRef,
            _ => c.clone(),
        })
        .collect();
    RecordBatch::try_new(batch.schema(), columns)
}

/// The bytes of `batch`'s values (its slices of buffers shared with other batches count once
/// per batch, as far as they reach).
fn slice_bytes(batch: &RecordBatch) -> Result<usize, arrow_schema::ArrowError> {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, Int32Array, Int64Array, StringArray};
    use arrow_ord::sort::{SortColumn, lexsort_to_indices};
    use arrow_schema::{DataType, Field, Schema, SortOptions};
    use arrow_select::concat::concat_batches;
    use arrow_select::take::take;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("id", DataType::Int64, false),
        ]))
    }

    type Row = (Option<i32>, Option<String>);

    fn batches(rows: &[Row], sizes: &[usize]) -> Vec<RecordBatch> {
        let mut out = Vec::new();
        let mut at = 0;
        for &size in sizes.iter().cycle() {
            if at >= rows.len() {
                break;
            }
            let part = &rows[at..(at + size).min(rows.len())];
            let k = Int32Array::from_iter(part.iter().map(|r| r.0));
            let s = StringArray::from_iter(part.iter().map(|r| r.1.clone()));
            let id = Int64Array::from_iter_values((at..at + part.len()).map(|i| i as i64));
            out.push(
                RecordBatch::try_new(schema(), vec![Arc::new(k), Arc::new(s), Arc::new(id)])
                    .unwrap(),
            );
            at += part.len();
        }
        out
    }

    /// Sorts `input` with a sorter of `memory` bytes; returns the rows out and the runs
    /// spilled.
    fn sorted(input: &[RecordBatch], order: &SortOrder, memory: usize) -> (RecordBatch, usize) {
        let dir = tempfile::tempdir().unwrap();
        let sorting = Sorting {
            order: order.clone(),
            memory,
        };
        let mut sorter = Sorter::try_new(0, schema(), &sorting, dir.path()).unwrap();
        for batch in input {
            sorter.push(batch.clone()).unwrap();
        }
        let runs = sorter.runs.len();
        let mut out = Vec::new();
        sorter
            .finish(&mut |batch| {
                assert!(batch.num_rows() <= WRITE_ROWS);
                out.push(batch.clone());
                Ok(())
            })
            .unwrap();
        // Every run file is gone once the sorter is.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        (concat_batches(&schema(), &out).unwrap(), runs)
    }

    /// Arrow's own sort of `input` by the same keys: the order's oracle.
    fn oracle(input: &[RecordBatch], order: &SortOrder) -> RecordBatch {
        let all = concat_batches(&schema(), input).unwrap();
        let columns: Vec<SortColumn> = order
            .keys()
            .iter()
            .map(|key| SortColumn {
                values: all.column_by_name(&key.column).unwrap().clone(),
                options: Some(SortOptions {
                    descending: key.descending,
                    nulls_first: key.nulls_first,
                }),
            })
            .collect();
        let indices = lexsort_to_indices(&columns, None).unwrap();
        let columns = all
            .columns()
            .iter()
            .map(|c| take(c, &indices, None).unwrap())
            .collect();
        RecordBatch::try_new(schema(), columns).unwrap()
    }

    fn check(input: &[RecordBatch], order: &SortOrder, memory: usize) -> usize {
        let (out, runs) = sorted(input, order, memory);
        let expected = oracle(input, order);
        assert_eq!(out.num_rows(), expected.num_rows());
        // The keys come out in the oracle's order; rows of equal keys in any order.
        for key in order.keys() {
            assert_eq!(
                out.column_by_name(&key.column).unwrap().as_ref(),
                expected.column_by_name(&key.column).unwrap().as_ref(),
                "{order} in {memory} bytes"
            );
        }
        // Every row once, with its own values.
        let ids = out.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
        let mut seen = vec![false; ids.len()];
        let all = concat_batches(&schema(), input).unwrap();
        for (i, id) in ids.values().iter().enumerate() {
            let id = *id as usize;
            assert!(!std::mem::replace(&mut seen[id], true), "row {id} twice");
            for c in 0..2 {
                assert_eq!(
                    out.column(c).slice(i, 1).to_data(),
                    all.column(c).slice(id, 1).to_data()
                );
            }
        }
        runs
    }

    fn rows(n: usize, seed: u64) -> Vec<Row> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = (!x.is_multiple_of(11)).then_some((x % 1000) as i32 - 500);
                let s = (!x.is_multiple_of(7)).then(|| format!("v{}", (x >> 20) % 50));
                (k, s)
            })
            .collect()
    }

    #[test]
    fn many_runs_merge_in_passes_and_leave_nothing_behind() {
        let input = batches(&rows(40_000, 7), &[1000, 3, 2500]);
        let order: SortOrder = "k DESC NULLS FIRST, s".parse().unwrap();
        // About 32 KiB a chunk: dozens of runs, more than one merge's fan-in.
        let runs = check(&input, &order, 32 << 10);
        assert!(runs > FAN_IN, "{runs} runs");
        // All in memory: no run.
        assert_eq!(check(&input, &order, 1 << 30), 0);
        // A memory smaller than a batch: a run a batch.
        assert_eq!(check(&input, &order, 1), input.len());
    }

    #[test]
    fn no_rows_and_empty_batches_give_nothing() {
        let order: SortOrder = "s".parse().unwrap();
        let empty = batches(&[], &[1]);
        assert_eq!(sorted(&empty, &order, 1).0.num_rows(), 0);
        let mut input = batches(&rows(10, 3), &[4]);
        input.insert(1, input[0].slice(0, 0));
        check(&input, &order, 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn rows_come_out_in_arrow_sorts_order(
            n in 0usize..3000,
            seed in any::<u64>(),
            sizes in prop::collection::vec(1usize..700, 1..4),
            memory in 1usize..200_000,
            keys in prop::sample::select(vec!["k", "s", "k, s", "s, k"]),
            descending in any::<[bool; 2]>(),
            nulls_first in any::<[bool; 2]>(),
        ) {
            let order = SortOrder::try_new(
                keys.split(", ")
                    .enumerate()
                    .map(|(i, column)| SortKey {
                        column: column.into(),
                        descending: descending[i],
                        nulls_first: nulls_first[i],
                    })
                    .collect(),
            )
            .unwrap();
            check(&batches(&rows(n, seed), &sizes), &order, memory);
        }
    }
}

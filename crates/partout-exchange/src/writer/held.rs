//! [`HeldRows`]: the writer's mode with [`Flush::AllAtLimit`]. Whole batches are held with
//! their rows' destinations; past the memory limit every held row is handed to the output in
//! destination order ([`Flushed::Sorted`]), and the output is told the round ended
//! ([`Flushed::EndOfRound`]).
//!
//! ```text
//!  held batches  b0 [r0 r1 r2]  b1 [r0 r1]      ids, concatenated: [2 0 2 | 1 0]
//!  plan          ScatterPlan over the ids         order [1 4 3 0 2], offsets [0 2 3 5]
//!  gathered      (b0,r1) (b1,r1) | (b1,r0) | (b0,r0) (b0,r2)
//!                ─► output: Sorted { batch, runs (0,2) (1,1) (2,2) }
//! ```
//!
//! The rows are ordered by partout-core's counting sort ([`ScatterPlan`]): grouped by
//! destination, in input order within each. They are gathered a batch of about
//! [`WriterOptions::target_bytes`] at a time.
//!
//! [`Flush::AllAtLimit`]: crate::Flush::AllAtLimit

use super::{BatchSink, Flushed, Shared};
use crate::error::{Result, WriterError};
use crate::options::WriterOptions;
use arrow_array::{Array, ArrayRef, FixedSizeListArray, RecordBatch, RecordBatchOptions};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, SchemaRef};
use partout_core::ScatterPlan;
use std::sync::Arc;
use std::time::Instant;

/// Whole batches held with their rows' destinations, handed over in destination order.
#[derive(Debug)]
pub(super) struct HeldRows {
    schema: SchemaRef,
    num_partitions: u32,
    memory_limit: usize,
    target_bytes: usize,
    /// The batches held.
    batches: Vec<RecordBatch>,
    /// Where each held batch's rows start among all held rows, and the count at the end
    /// (one more entry than batches).
    starts: Vec<usize>,
    /// The destination of every held row, batch after batch.
    ids: Vec<u32>,
    /// Memory of the batches held and of their ids.
    bytes: usize,
    /// The held rows' counting sort (reused).
    plan: ScatterPlan,
    /// The rows of one gathered batch, as (batch, row) (reused).
    indices: Vec<(usize, usize)>,
    /// Consecutive destinations of a gathered batch, with their rows (reused).
    runs: Vec<(usize, usize)>,
}

impl HeldRows {
    /// Holds batches of `schema` bound for `num_partitions` destinations.
    pub(super) fn new(schema: SchemaRef, num_partitions: u32, options: &WriterOptions) -> Self {
        Self {
            schema,
            num_partitions,
            memory_limit: options.memory_limit,
            target_bytes: options.target_bytes,
            batches: Vec::new(),
            starts: vec![0],
            ids: Vec::new(),
            bytes: 0,
            plan: ScatterPlan::new(),
            indices: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// Bytes of the batches held and of their ids.
    pub(super) fn held_bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `batch` with its rows' destinations `ids`, and hands every held row over once
    /// the memory limit is passed.
    ///
    /// # Errors
    /// [`WriterError::Partition`] for an id not below the partition count (the batch is not
    /// held then); the output's errors from a flush, after which the writer has failed.
    pub(super) fn hold<O: BatchSink>(
        &mut self,
        batch: &RecordBatch,
        ids: &[u32],
        shared: &mut Shared<O>,
    ) -> Result<()> {
        let started = Instant::now();
        let n = self.num_partitions;
        if let Some(&id) = ids.iter().find(|&&id| id >= n) {
            return Err(WriterError::Partition(
                partout_core::PartoutError::InvalidArgument(format!(
                    "partition id {id} out of range for {n} destinations"
                )),
            ));
        }
        // One plan orders every held row, and a plan addresses at most u32::MAX rows.
        if !self.batches.is_empty() && self.ids.len() + ids.len() > u32::MAX as usize {
            self.flush_all(shared)?;
        }
        self.batches.push(batch.clone());
        self.ids.extend_from_slice(ids);
        self.starts.push(self.ids.len());
        self.bytes += batch.get_array_memory_size() + 4 * ids.len();
        shared.metrics.scatter_time += started.elapsed();
        shared.metrics.rows_out += batch.num_rows() as u64;
        // Bytes of Arrow data, as buffers count them (not the memory the batch spans).
        shared.metrics.bytes_in += batch
            .columns()
            .iter()
            .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0) as u64)
            .sum::<u64>();
        shared.note_held(self.bytes);
        if self.bytes > self.memory_limit {
            shared.metrics.memory_flushes += 1;
            self.flush_all(shared)?;
        }
        Ok(())
    }

    /// Hands every held row to the output in destination order, lets the held batches go,
    /// and tells the output a run ended. Any error leaves the writer failed: the rows were
    /// accepted by earlier calls.
    pub(super) fn flush_all<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        if self.batches.is_empty() {
            return end_round(shared);
        }
        let started = Instant::now();
        let sink_before = shared.sink_time();
        let result = self.write_sorted(shared).and_then(|()| end_round(shared));
        self.batches.clear();
        self.ids.clear();
        self.starts.truncate(1);
        self.bytes = 0;
        let sink = shared.sink_time() - sink_before;
        shared.metrics.sink_time += sink;
        shared.metrics.encode_time += started.elapsed().saturating_sub(sink);
        if result.is_err() {
            shared.failed = true;
        }
        result
    }

    /// Orders the held rows by destination with one plan over their ids and writes them, a
    /// gathered batch of about [`WriterOptions::target_bytes`] at a time.
    fn write_sorted<O: BatchSink>(&mut self, shared: &mut Shared<O>) -> Result<()> {
        self.plan.build(&self.ids, self.num_partitions)?;
        let offsets = self.plan.offsets();
        let order = self.plan.order();
        for (rows, range) in shared
            .metrics
            .destination_rows
            .iter_mut()
            .zip(offsets.windows(2))
        {
            *rows += u64::from(range[1] - range[0]);
        }
        let total = self.ids.len();
        let row_bytes = (self.bytes / total.max(1)).max(1);
        let chunk = (self.target_bytes / row_bytes).max(1);
        let batches: Vec<&RecordBatch> = self.batches.iter().collect();
        let starts = &self.starts;
        // The batch of the row last placed: a destination's rows of one batch come together.
        let mut b = 0;
        let mut p = 0;
        let mut at = 0;
        while at < total {
            let end = (at + chunk).min(total);
            self.indices.clear();
            for &row in &order[at..end] {
                let row = row as usize;
                if !(starts[b]..starts[b + 1]).contains(&row) {
                    b = starts.partition_point(|&start| start <= row) - 1;
                }
                self.indices.push((b, row - starts[b]));
            }
            let batch = gather(&self.schema, &batches, &self.indices)?;
            self.runs.clear();
            let mut row = at;
            while row < end {
                while offsets[p + 1] as usize <= row {
                    p += 1;
                }
                let rows = (offsets[p + 1] as usize).min(end) - row;
                self.runs.push((p, rows));
                row += rows;
            }
            let metrics = &mut shared.metrics;
            let bytes = shared.output.write_flushed(Flushed::Sorted {
                batch: &batch,
                runs: &self.runs,
                destination_bytes: &mut metrics.destination_bytes,
            })?;
            metrics.bytes_out += bytes;
            metrics.flushes += 1;
            at = end;
        }
        Ok(())
    }
}

/// Tells the output a round ended: every row held was handed over.
fn end_round<O: BatchSink>(shared: &mut Shared<O>) -> Result<()> {
    shared.output.write_flushed(Flushed::EndOfRound).map(|_| ())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::WriterMetrics;
    use crate::writer::{SinkCapabilities, Targets};
    use arrow_array::Int64Array;

    /// Records what it is handed: each destination's values, in order, and the runs.
    #[derive(Default)]
    struct Recorded {
        values: Vec<Vec<i64>>,
        rounds: usize,
    }

    impl BatchSink for Recorded {
        fn write_batch(&mut self, p: usize, batch: &RecordBatch) -> Result<u64> {
            let values = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            self.values[p].extend(values.values());
            Ok(batch.num_rows() as u64)
        }

        fn finish(&mut self, _: &mut [u64]) -> Result<()> {
            Ok(())
        }

        fn write_flushed(&mut self, flushed: Flushed<'_>) -> Result<u64> {
            if let Flushed::EndOfRound = flushed {
                self.rounds += 1;
            }
            flushed.write_as_batches(self)
        }
    }

    /// Rows come out grouped by destination, in input order within each, across batches
    /// (empty ones included) and gathered pieces of a few rows.
    #[test]
    fn held_rows_come_out_by_destination_in_input_order() {
        let n = 5u32;
        let batch = |values: std::ops::Range<i64>| {
            RecordBatch::try_from_iter([("v", Arc::new(Int64Array::from_iter_values(values)) as _)])
                .unwrap()
        };
        let inputs = [batch(0..7), batch(7..7), batch(7..20), batch(20..23)];
        let options = WriterOptions::default().with_target_bytes(24);
        let mut held = HeldRows::new(inputs[0].schema(), n, &options);
        let mut shared = Shared {
            output: Recorded {
                values: vec![Vec::new(); n as usize],
                rounds: 0,
            },
            capabilities: SinkCapabilities::default(),
            metrics: WriterMetrics {
                destination_rows: vec![0; n as usize],
                destination_bytes: vec![0; n as usize],
                ..WriterMetrics::default()
            },
            targets: Targets::new(n as usize, &options),
            in_use: n,
            failed: false,
        };
        let id = |v: i64| ((v * 7 + v / 3) % i64::from(n)) as u32;
        let mut want = vec![Vec::new(); n as usize];
        for input in &inputs {
            let values = input
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let ids: Vec<u32> = values.values().iter().map(|&v| id(v)).collect();
            for &v in values.values() {
                want[id(v) as usize].push(v);
            }
            held.hold(input, &ids, &mut shared).unwrap();
        }
        held.flush_all(&mut shared).unwrap();
        assert_eq!(shared.output.values, want);
        assert_eq!(shared.output.rounds, 1);
        // A few rows per gathered batch: several of them.
        assert!(shared.metrics.flushes > 3, "{:?}", shared.metrics);
        let rows: Vec<u64> = want.iter().map(|w| w.len() as u64).collect();
        assert_eq!(shared.metrics.destination_rows, rows);
        assert_eq!(held.held_bytes(), 0);
    }
}

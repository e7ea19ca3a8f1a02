//! [`PartitionedBatch`], a batch laid out destination by destination, and [`Partitioner`],
//! which makes one from a batch and its partition ids with reusable scratch.

use crate::error::{PartoutError, Result};
use crate::plan::{ScatterPlan, auto_fanout, check_partition_count};
use crate::scatter::{ScatterScratch, plan_and_scatter};
use arrow_array::{RecordBatch, RecordBatchOptions};
use std::ops::Range;

/// A record batch whose rows are grouped by destination: destination `p` owns rows
/// `offsets[p]..offsets[p + 1]`, in input order.
///
/// ```
/// use arrow_array::{Int64Array, RecordBatch, cast::AsArray, types::Int64Type};
/// use partout_core::Partitioner;
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([("k", Arc::new(Int64Array::from(vec![5, 6, 7, 8])) as _)])
///     .unwrap();
/// let mut partitioner = Partitioner::try_new(3).unwrap();
/// let out = partitioner.partition(&batch, &[2, 0, 2, 0]).unwrap();
/// assert_eq!(out.offsets(), &[0, 2, 2, 4]);
/// let p2 = out.partition(2);
/// assert_eq!(p2.column(0).as_primitive::<Int64Type>().values(), &[5, 7]);
/// assert_eq!(out.non_empty().map(|(p, b)| (p, b.num_rows())).collect::<Vec<_>>(), [(0, 2), (2, 2)]);
/// ```
#[derive(Debug, Clone)]
pub struct PartitionedBatch {
    batch: RecordBatch,
    offsets: Vec<u32>,
}

impl PartitionedBatch {
    /// The reordered batch.
    pub fn batch(&self) -> &RecordBatch {
        &self.batch
    }

    /// `num_partitions + 1` offsets into [`batch`](Self::batch).
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The number of destinations.
    pub fn num_partitions(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The rows of destination `p` within [`batch`](Self::batch).
    ///
    /// # Panics
    /// If `p >= num_partitions()`.
    pub fn range(&self, p: usize) -> Range<usize> {
        self.offsets[p] as usize..self.offsets[p + 1] as usize
    }

    /// The number of rows bound for destination `p`.
    ///
    /// # Panics
    /// If `p >= num_partitions()`.
    pub fn num_rows(&self, p: usize) -> usize {
        self.range(p).len()
    }

    /// Destination `p`'s rows as a zero-copy slice of the batch.
    ///
    /// # Panics
    /// If `p >= num_partitions()`.
    pub fn partition(&self, p: usize) -> RecordBatch {
        let range = self.range(p);
        self.batch.slice(range.start, range.len())
    }

    /// `(destination, rows)` for every destination that received rows, in destination order.
    pub fn non_empty(&self) -> impl Iterator<Item = (usize, RecordBatch)> + '_ {
        (0..self.num_partitions())
            .filter(|&p| self.num_rows(p) > 0)
            .map(|p| (p, self.partition(p)))
    }

    /// The reordered batch and its offsets.
    pub fn into_parts(self) -> (RecordBatch, Vec<u32>) {
        (self.batch, self.offsets)
    }
}

/// Lays batches out destination by destination, reusing its plan and scratch from one batch to
/// the next: after the first batch of a given shape it allocates only the output arrays.
#[derive(Debug)]
pub struct Partitioner {
    num_partitions: u32,
    fanout: Option<u32>,
    compact_views: bool,
    plan: ScatterPlan,
    scratch: ScatterScratch,
}

impl Partitioner {
    /// A partitioner over `num_partitions` destinations, with the automatic fan-out.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] when `num_partitions` is 0 or above
    /// [`MAX_PARTITIONS`](crate::plan::MAX_PARTITIONS) ([`check_partition_count`]).
    pub fn try_new(num_partitions: u32) -> Result<Self> {
        Ok(Self {
            num_partitions: check_partition_count(num_partitions)?,
            fanout: None,
            compact_views: false,
            plan: ScatterPlan::new(),
            scratch: ScatterScratch::new(),
        })
    }

    /// Uses a fixed virtual fan-out (a power of two) instead of the automatic one; for
    /// measurement.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] when `fanout` is not a power of two.
    pub fn with_fanout(mut self, fanout: u32) -> Result<Self> {
        if !fanout.is_power_of_two() {
            return Err(PartoutError::InvalidArgument(format!(
                "the fan-out must be a power of two, got {fanout}"
            )));
        }
        self.fanout = Some(fanout);
        Ok(self)
    }

    /// Copies the out-of-line values of view columns (Utf8View, BinaryView) into one buffer
    /// per column, in destination order, instead of sharing the input's buffers: each
    /// destination's values then lie back to back, and the output holds no other rows' bytes.
    pub fn with_compact_views(mut self) -> Self {
        self.compact_views = true;
        self
    }

    /// The number of destinations.
    pub fn num_partitions(&self) -> u32 {
        self.num_partitions
    }

    /// Groups the rows of `batch` by their id in `ids` (one per row, each below
    /// `num_partitions`).
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] when `ids` and the batch differ in length,
    /// [`PartoutError::PartitionIdOutOfRange`] for an id not below the partition count,
    /// [`PartoutError::UnsupportedType`] for a column type the scatter does not support.
    pub fn partition(&mut self, batch: &RecordBatch, ids: &[u32]) -> Result<PartitionedBatch> {
        if ids.len() != batch.num_rows() {
            return Err(PartoutError::InvalidArgument(format!(
                "{} partition ids for a batch of {} rows",
                ids.len(),
                batch.num_rows()
            )));
        }
        let fanout = self
            .fanout
            .unwrap_or_else(|| auto_fanout(self.num_partitions));
        let mut columns = plan_and_scatter(
            &mut self.plan,
            ids,
            self.num_partitions,
            fanout,
            batch.columns(),
            &mut self.scratch,
        )?;
        if self.compact_views {
            for column in &mut columns {
                *column = crate::scatter::append::compact_views(column);
            }
        }
        let batch = RecordBatch::try_new_with_options(
            batch.schema(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )?;
        Ok(PartitionedBatch {
            batch,
            offsets: self.plan.offsets().to_vec(),
        })
    }

    /// The scratch buffers' capacity in `u32`s, plan included (for tests and metrics).
    pub fn scratch_capacity(&self) -> usize {
        self.scratch.capacity() + self.plan.capacity()
    }
}

/// Lays out each of `batches` by its rows' ids, as [`Partitioner::partition`] does, on one
/// thread per partitioner of `partitioners` (the first on the caller's): batch `i` goes to
/// partitioner `i % partitioners.len()`, and the `i`-th result is batch `i`'s.
///
/// # Errors
/// The first batch's error in batch order, as [`Partitioner::partition`] gives it;
/// [`PartoutError::InvalidArgument`] when `partitioners` is empty.
pub fn partition_each(
    partitioners: &mut [Partitioner],
    batches: &[(RecordBatch, Vec<u32>)],
) -> Result<Vec<PartitionedBatch>> {
    let threads = partitioners.len();
    if threads == 0 {
        return Err(PartoutError::InvalidArgument(
            "no partitioner to lay batches out with".into(),
        ));
    }
    let lay_out = |t: usize, partitioner: &mut Partitioner| {
        batches
            .iter()
            .skip(t)
            .step_by(threads)
            .map(|(batch, ids)| partitioner.partition(batch, ids))
            .collect::<Vec<_>>()
    };
    let each: Vec<Vec<Result<PartitionedBatch>>> = std::thread::scope(|scope| {
        let (first, rest) = partitioners.split_first_mut().expect("checked not empty");
        let handles: Vec<_> = rest
            .iter_mut()
            .enumerate()
            .filter(|(t, _)| t + 1 < batches.len())
            .map(|(t, partitioner)| scope.spawn(move || lay_out(t + 1, partitioner)))
            .collect();
        let mut each = vec![lay_out(0, first)];
        for handle in handles {
            // A panic in the scatter is a bug: raised on the caller's thread as it was.
            each.push(
                handle
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
            );
        }
        each
    });
    let mut results: Vec<_> = each.into_iter().map(Vec::into_iter).collect();
    (0..batches.len())
        .map(|i| results[i % threads].next().expect("one result a batch"))
        .collect()
}

//! [`DestinationBuffers`]: per-destination column buffers that rows are appended to, batch
//! after batch, straight from the input by a plan's order.
//!
//! ```text
//!  batch 1 ──plan──► order ─┬─► destination 0: [ values | offsets+bytes | validity ] …
//!  batch 2 ──plan──► order ─┤─► destination 1: [ …                                 ] …
//!                           └─► …           take(p) ─► RecordBatch ─► recycle(p, batch)
//! ```
//!
//! This module keeps the books: which destination receives which rows, how much each holds,
//! the checks made before anything is appended. Moving one column's rows into one
//! destination's buffers, and building an array back from them, is the `append` module's
//! (with the table of what is kept per layout). A destination's buffers are lent to the batch
//! [`DestinationBuffers::take`] builds and taken back by [`DestinationBuffers::recycle`]: in
//! steady state no buffer is allocated.

use super::append::{
    ColumnBuffer, Kind, Rows, Source, append_column, append_run, append_validity, donor_buffers,
    push_piece, take_column, var_offsets,
};
use super::{Order, ScatterScratch, bits, fixed, fixed_bytes, scatter_array, view_parts};
use crate::error::{PartoutError, Result};
use crate::plan::ScatterPlan;
use crate::scatter::batch::PartitionedBatch;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions, new_empty_array};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_schema::SchemaRef;
use std::ops::Range;

/// The most batches [`DestinationBuffers::append_many`] merges in one call.
pub const MAX_MERGED: usize = 8;

fn too_many(batches: usize) -> PartoutError {
    PartoutError::InvalidArgument(format!(
        "{batches} batches appended at once; at most {MAX_MERGED}"
    ))
}

/// One batch's values of a column that reach destinations as runs: its fixed-width values or
/// views in destination order, and for views the data buffers they point into.
type Run<'a> = (&'a [u8], Option<&'a [Buffer]>);

/// A batch being appended: its columns and rows, where its destinations' rows start, and
/// their order (none for a batch already laid out destination by destination).
#[derive(Clone, Copy)]
struct Input<'a> {
    columns: &'a [ArrayRef],
    rows: usize,
    offsets: &'a [u32],
    order: Option<Order<'a>>,
}

impl<'a> Input<'a> {
    /// A batch's `columns`, moved by `plan`.
    fn of_plan(columns: &'a [ArrayRef], plan: &'a ScatterPlan) -> Self {
        Input {
            columns,
            rows: plan.offsets().last().map_or(0, |&o| o as usize),
            offsets: plan.offsets(),
            order: Some(Order::of_plan(plan)),
        }
    }
}

/// The rows `range` of `input`: by its order, or, for a batch laid out destination by
/// destination, the range itself (with `identity`, `0, 1, 2, ...` for at least the batch's
/// rows, for the kernels that read by an order).
fn rows_of<'a>(input: &Input<'a>, identity: &'a [u32], range: Range<usize>) -> Rows<'a> {
    match input.order {
        Some(order) => Rows::Order(order.slice(range)),
        None => {
            let n = input.rows;
            let identity = &identity[..n];
            debug_assert!(identity.iter().enumerate().all(|(i, &r)| r as usize == i));
            // SAFETY: `identity` holds `0, 1, 2, ...` for at least `n` entries (the caller's
            // promise, checked in debug builds above), so each of its first `n` entries is
            // below `n`.
            let identity = unsafe { Order::new_unchecked(identity, n) };
            Rows::Range(range.clone(), identity.slice(range))
        }
    }
}

/// The destinations the plans of `inputs` cover: destination `p` of an input whose plan
/// covers fewer receives none of its rows.
fn planned(inputs: &[Input<'_>]) -> usize {
    inputs
        .iter()
        .map(|input| input.offsets.len() - 1)
        .max()
        .unwrap_or(0)
}

/// The rows of `input` bound for destination `p`: none past the destinations its plan
/// covers.
fn range(input: &Input<'_>, p: usize) -> Range<usize> {
    match input.offsets.get(p..p + 2) {
        Some(&[start, end]) => start as usize..end as usize,
        _ => 0..0,
    }
}

/// One destination's buffered rows: a buffer per column (none until its first rows arrive,
/// so that a destination never met costs only this struct), and its totals.
#[derive(Debug, Default)]
struct Destination {
    columns: Vec<ColumnBuffer>,
    rows: usize,
    bytes: usize,
    held: usize,
}

impl Destination {
    fn update(&mut self) {
        self.bytes = self.columns.iter().map(ColumnBuffer::bytes).sum();
        self.held = self.columns.iter().map(ColumnBuffer::capacity).sum();
    }
}

/// Column buffers for every destination of a partitioned output, appended to batch after
/// batch and taken out as record batches.
///
/// ```
/// use arrow_array::{Int32Array, RecordBatch, StringArray};
/// use partout_core::{DestinationBuffers, ScatterPlan};
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([
///     ("k", Arc::new(Int32Array::from(vec![1, 2, 3])) as _),
///     ("s", Arc::new(StringArray::from(vec!["a", "b", "c"])) as _),
/// ])
/// .unwrap();
/// let mut buffers = DestinationBuffers::try_new(batch.schema(), 2).unwrap();
/// let mut plan = ScatterPlan::new();
/// plan.build(&[1, 0, 1], 2).unwrap();
/// buffers.append(&batch, &plan).unwrap();
/// buffers.append(&batch, &plan).unwrap();
/// assert_eq!(buffers.rows(1), 4);
/// let out = buffers.take(1).unwrap();
/// assert_eq!(out.column(0).as_ref(), &Int32Array::from(vec![1, 3, 1, 3]));
/// assert_eq!(out.column(1).as_ref(), &StringArray::from(vec!["a", "c", "a", "c"]));
/// buffers.recycle(1, out);
/// assert_eq!(buffers.rows(1), 0);
/// ```
#[derive(Debug)]
pub struct DestinationBuffers {
    schema: SchemaRef,
    kinds: Vec<Kind>,
    destinations: Vec<Destination>,
    held: usize,
    buffered: usize,
    /// One past the highest destination that has received rows: the destinations an append
    /// or a flush need look at.
    in_use: usize,
    /// Per batch of an append: one column's unpacked validity and boolean values.
    unpacked_nulls: Vec<Vec<u8>>,
    unpacked_bits: Vec<Vec<u8>>,
    identity: Vec<u32>,
    /// Per batch of an append: one column's values gathered by its plan's order.
    gathered: Vec<MutableBuffer>,
    scratch: ScatterScratch,
}

impl DestinationBuffers {
    /// Buffers for `destinations` destinations of batches of `schema`.
    ///
    /// # Errors
    /// [`PartoutError::UnsupportedType`] for a column type the scatter kernels do not support,
    /// [`PartoutError::InvalidArgument`] for zero destinations.
    pub fn try_new(schema: SchemaRef, destinations: usize) -> Result<Self> {
        if destinations == 0 {
            return Err(PartoutError::InvalidArgument(
                "destination buffers need at least one destination".into(),
            ));
        }
        let mut scratch = ScatterScratch::new();
        for field in schema.fields() {
            // An empty column of the type goes through the kernels: what they refuse, refuse.
            let empty = new_empty_array(field.data_type());
            scatter_array(empty.as_ref(), Order::EMPTY, &mut scratch)?;
        }
        let kinds: Vec<Kind> = schema
            .fields()
            .iter()
            .map(|f| Kind::of(f.data_type()))
            .collect();
        let destinations = (0..destinations).map(|_| Destination::default()).collect();
        Ok(Self {
            schema,
            kinds,
            destinations,
            held: 0,
            buffered: 0,
            in_use: 0,
            unpacked_nulls: Vec::new(),
            unpacked_bits: Vec::new(),
            identity: Vec::new(),
            gathered: Vec::new(),
            scratch,
        })
    }

    /// The schema of the buffered rows.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The number of destinations.
    pub fn num_destinations(&self) -> usize {
        self.destinations.len()
    }

    /// Rows buffered for destination `p`.
    ///
    /// # Panics
    /// If there is no destination `p`.
    pub fn rows(&self, p: usize) -> usize {
        self.destinations[p].rows
    }

    /// Bytes buffered for destination `p`: values, offsets, validity and moved pieces.
    ///
    /// # Panics
    /// If there is no destination `p`.
    pub fn bytes(&self, p: usize) -> usize {
        self.destinations[p].bytes
    }

    /// One past the highest destination that has received rows (destinations met in order,
    /// as partitioning by value meets them, are `0..destinations_in_use()`): no destination
    /// from it on holds rows.
    pub fn destinations_in_use(&self) -> usize {
        self.in_use
    }

    /// Bytes buffered for all destinations.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    /// Bytes of buffer capacity held for all destinations: the memory the buffers occupy.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Appends the rows of `batch` to their destinations: destination `p` receives the rows
    /// `plan.order()[plan.range(p)]`, after the rows it holds. The plan may cover the first
    /// destinations only (those met so far, where ids come as destinations are met): the
    /// work of an append is then the plan's destinations', not all.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] when the batch does not match the schema or the plan
    /// (its row count), or the plan covers more destinations than the buffers hold;
    /// [`PartoutError::TooLarge`] when a
    /// destination's Utf8/Binary bytes would pass `i32::MAX`, or its view data `u32::MAX`, or
    /// when a list's child in the batch has more than `u32::MAX` values; [`PartoutError::Arrow`]
    /// when arrow refuses a moved dictionary or nested column. On error nothing is appended:
    /// the buffers are as they were.
    pub fn append(&mut self, batch: &RecordBatch, plan: &ScatterPlan) -> Result<()> {
        self.append_columns(&[(batch.columns(), plan)])
    }

    /// Appends the rows of several batches, each by its plan, as [`append`](Self::append)
    /// does for each in turn, but destination by destination: each destination's column
    /// receives the rows of every batch at once, so its buffer's end is reached once for all
    /// of them. At hundreds of destinations a batch brings each destination's column a few
    /// rows, and reaching a destination's buffers costs more than moving the rows; merging a
    /// few batches at a time divides that cost among them.
    ///
    /// # Errors
    /// As [`append`](Self::append) for any of the batches, and
    /// [`PartoutError::InvalidArgument`] for more than [`MAX_MERGED`] batches. On error
    /// nothing of any batch is appended.
    pub fn append_many(&mut self, inputs: &[(&RecordBatch, &ScatterPlan)]) -> Result<()> {
        let Some(&(first, plan)) = inputs.first() else {
            return Ok(());
        };
        let mut columns = [(first.columns(), plan); MAX_MERGED];
        if inputs.len() > MAX_MERGED {
            return Err(too_many(inputs.len()));
        }
        for (slot, &(batch, plan)) in columns.iter_mut().zip(inputs) {
            *slot = (batch.columns(), plan);
        }
        self.append_columns(&columns[..inputs.len()])
    }

    /// Appends the rows of batches given by their columns (a caller that keeps batches'
    /// columns, not the batches), each by its plan, as [`append_many`](Self::append_many)
    /// does.
    ///
    /// # Errors
    /// As [`append_many`](Self::append_many).
    pub fn append_columns(&mut self, inputs: &[(&[ArrayRef], &ScatterPlan)]) -> Result<()> {
        let Some(&(first, plan)) = inputs.first() else {
            return Ok(());
        };
        if inputs.len() > MAX_MERGED {
            return Err(too_many(inputs.len()));
        }
        let mut merged = [Input::of_plan(first, plan); MAX_MERGED];
        for (slot, &(columns, plan)) in merged.iter_mut().zip(inputs) {
            *slot = Input::of_plan(columns, plan);
            self.check(slot)?;
        }
        let merged = &merged[..inputs.len()];
        self.check_room(merged)?;
        self.append_with(merged)
    }

    /// Appends a batch already laid out destination by destination, copying each
    /// destination's contiguous rows.
    ///
    /// # Errors
    /// As [`append`](Self::append).
    pub fn append_partitioned(&mut self, partitioned: &PartitionedBatch) -> Result<()> {
        let batch = partitioned.batch();
        let input = [Input {
            columns: batch.columns(),
            rows: batch.num_rows(),
            offsets: partitioned.offsets(),
            order: None,
        }];
        self.check(&input[0])?;
        self.check_room(&input)?;
        self.append_with(&input)
    }

    fn check(&self, input: &Input<'_>) -> Result<()> {
        let offsets = input.offsets;
        if offsets.is_empty() || offsets.len() > self.destinations.len() + 1 {
            return Err(PartoutError::InvalidArgument(format!(
                "rows planned for {} destinations appended to buffers of {}",
                offsets.len().saturating_sub(1),
                self.destinations.len()
            )));
        }
        let fields = self.schema.fields();
        let matches = input.columns.len() == fields.len()
            && input
                .columns
                .iter()
                .zip(fields.iter())
                .all(|(c, f)| c.data_type() == f.data_type());
        if !matches {
            let types: Vec<String> = input
                .columns
                .iter()
                .map(|c| c.data_type().to_string())
                .collect();
            return Err(PartoutError::InvalidArgument(format!(
                "a batch of schema [{}] appended to buffers of {}",
                types.join(", "),
                self.schema
            )));
        }
        if let Some(column) = input.columns.iter().find(|c| c.len() != input.rows) {
            return Err(PartoutError::InvalidArgument(format!(
                "a batch of {} rows does not match a plan of {} rows",
                column.len(),
                input.rows
            )));
        }
        Ok(())
    }

    /// Errors unless every destination receiving rows of `inputs` has room for them in its
    /// 32-bit offsets and view offsets (checked against the whole batches' bytes: a
    /// destination cannot receive more than that).
    fn check_room(&self, inputs: &[Input<'_>]) -> Result<()> {
        for c in 0..self.kinds.len() {
            let limit = match self.kinds[c] {
                Kind::Bytes32 => i32::MAX as usize,
                Kind::Views => u32::MAX as usize,
                _ => continue,
            };
            let incoming: usize = inputs
                .iter()
                .map(|input| {
                    let column = input.columns[c].as_ref();
                    match self.kinds[c] {
                        Kind::Bytes32 => {
                            let o = var_offsets::<i32>(column);
                            (o[o.len() - 1] - o[0]) as usize
                        }
                        _ => view_parts(column).1.iter().map(|b| b.len()).sum(),
                    }
                })
                .sum();
            for (p, destination) in self.destinations[..planned(inputs)].iter().enumerate() {
                let receives = inputs.iter().any(|input| !range(input, p).is_empty());
                let held = destination.columns.get(c).map_or(0, ColumnBuffer::data_len);
                if receives && held + incoming > limit {
                    return Err(PartoutError::TooLarge(format!(
                        "destination {p}'s column {:?} would hold more than {limit} bytes; \
                         take its rows out first",
                        self.schema.field(c).name()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Appends every column of every input: by its order (destination `p` taking
    /// `order[offsets[p]..offsets[p + 1]]`), or, without one, the contiguous ranges `offsets`
    /// names. Each destination's column receives the inputs' rows one input after the other.
    fn append_with<'a>(&mut self, inputs: &[Input<'a>]) -> Result<()> {
        let longest = inputs.iter().map(|i| i.rows).max().unwrap_or(0);
        // Ranges read their validity and boolean values through the identity order.
        if inputs.iter().any(|i| i.order.is_none()) && self.identity.len() < longest {
            self.identity.clear();
            self.identity.extend(0..longest as u32);
        }
        let identity = self.identity.as_slice();
        let rows_of = |input: &Input<'a>, range: Range<usize>| rows_of(input, identity, range);
        let range_of = range;
        // The destinations the inputs' plans cover (a plan may cover the first destinations
        // only: those met so far).
        let destinations = planned(inputs);
        // A destination's column buffers from its first rows on.
        let columns = self.kinds.len();
        for (p, destination) in self.destinations[..destinations].iter_mut().enumerate() {
            if destination.columns.len() < columns
                && inputs.iter().any(|i| !range_of(i, p).is_empty())
            {
                destination
                    .columns
                    .resize_with(columns, ColumnBuffer::default);
            }
        }
        // Dictionary and nested columns first: moving their rows is the one step that can fail,
        // and nothing is appended until it has succeeded for every input and destination.
        let mut pieces = Vec::new();
        for input in inputs {
            for (c, column) in input.columns.iter().enumerate() {
                if self.kinds[c] != Kind::Pieces {
                    continue;
                }
                for p in 0..destinations {
                    let range = range_of(input, p);
                    if !range.is_empty() {
                        let order = rows_of(input, range).order();
                        pieces.push((
                            p,
                            c,
                            scatter_array(column.as_ref(), order, &mut self.scratch)?,
                        ));
                    }
                }
            }
        }
        for (p, c, piece) in pieces {
            push_piece(piece, &mut self.destinations[p].columns[c]);
        }
        // Per input: its unpacked validity and boolean values, and its gathered values.
        let k = inputs.len();
        if self.gathered.len() < k {
            self.unpacked_nulls.resize_with(k, Vec::new);
            self.unpacked_bits.resize_with(k, Vec::new);
            self.gathered.resize_with(k, || MutableBuffer::new(0));
        }
        for c in 0..self.kinds.len() {
            let kind = self.kinds[c];
            if kind == Kind::Pieces {
                continue;
            }
            // Stack arrays, not vectors: an append allocates nothing.
            let mut sources: [Option<Source<'_>>; MAX_MERGED] = [None; MAX_MERGED];
            let mut runs: [Option<Run<'_>>; MAX_MERGED] = [None; MAX_MERGED];
            for (i, ((input, (nulls_scratch, bits_scratch)), gathered)) in inputs
                .iter()
                .zip(self.unpacked_nulls.iter_mut().zip(&mut self.unpacked_bits))
                .zip(&mut self.gathered)
                .enumerate()
            {
                let n = input.rows;
                let array = input.columns[c].as_ref();
                let nulls = array.nulls().filter(|n| n.null_count() > 0).map(|nulls| {
                    bits::unpack_rows(nulls.validity(), nulls.offset(), n, nulls_scratch)
                });
                let values_bits = (kind == Kind::Bits).then(|| {
                    let values = array.as_boolean().values();
                    bits::unpack_rows(values.values(), values.offset(), n, bits_scratch)
                });
                sources[i] = Some(Source {
                    array,
                    nulls,
                    bits: values_bits,
                });
                // Fixed-width values and views by an order: gathered first, in one long loop
                // over the whole order into reused scratch (the random reads of the source
                // overlap there), then copied to each destination as a contiguous run.
                runs[i] = kind.run_width().map(|width| {
                    let values = fixed_bytes(array, width);
                    let values = match input.order {
                        Some(order) => {
                            gathered.clear();
                            fixed::gather_fixed_into(values, width, order, gathered);
                            gathered.as_slice()
                        }
                        None => values,
                    };
                    (values, (kind == Kind::Views).then(|| view_parts(array).1))
                });
            }
            for p in 0..destinations {
                let destination = &mut self.destinations[p];
                let mut before = destination.rows;
                for ((input, source), run) in inputs.iter().zip(&sources).zip(&runs) {
                    let range = range_of(input, p);
                    if range.is_empty() {
                        continue;
                    }
                    let source = source.as_ref().expect("a source for every input");
                    let received = range.len();
                    let column = &mut destination.columns[c];
                    match (kind.run_width(), run) {
                        (Some(width), Some((values, buffers))) => {
                            append_run(
                                &values[range.start * width..range.end * width],
                                *buffers,
                                column,
                            );
                            append_validity(source, rows_of(input, range), before, column);
                        }
                        _ => append_column(kind, source, rows_of(input, range), before, column),
                    }
                    before += received;
                }
            }
        }
        for (p, destination) in self.destinations[..destinations].iter_mut().enumerate() {
            let received: usize = inputs.iter().map(|input| range_of(input, p).len()).sum();
            if received > 0 {
                self.in_use = self.in_use.max(p + 1);
                let (bytes, held) = (destination.bytes, destination.held);
                destination.rows += received;
                destination.update();
                self.buffered = self.buffered + destination.bytes - bytes;
                self.held = self.held + destination.held - held;
            }
        }
        Ok(())
    }

    /// Destination `p`'s buffered rows as a batch of the schema; the destination is then
    /// empty. Its buffers are lent to the batch: give it back with
    /// [`recycle`](Self::recycle) to reuse them.
    ///
    /// # Errors
    /// [`PartoutError::Arrow`] if the rows of a dictionary or nested column cannot be
    /// concatenated.
    ///
    /// # Panics
    /// If there is no destination `p`.
    pub fn take(&mut self, p: usize) -> Result<RecordBatch> {
        let destination = &mut self.destinations[p];
        let rows = destination.rows;
        if destination.columns.len() < self.kinds.len() {
            // Never met (or released): no buffers to lend.
            debug_assert_eq!(rows, 0);
            return Ok(RecordBatch::new_empty(self.schema.clone()));
        }
        let columns = self
            .schema
            .fields()
            .iter()
            .zip(&self.kinds)
            .zip(destination.columns.iter_mut())
            .map(|((field, &kind), column)| take_column(field.data_type(), kind, rows, column))
            .collect::<Result<Vec<_>>>()?;
        self.buffered -= destination.bytes;
        self.held -= destination.held;
        destination.rows = 0;
        destination.update();
        self.held += destination.held;
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    /// Gives destination `p` back the buffers lent to `batch` (from [`take`](Self::take)),
    /// emptied, so that its next rows need no new allocation. Buffers still shared elsewhere
    /// are simply released.
    ///
    /// # Panics
    /// If there is no destination `p`.
    pub fn recycle(&mut self, p: usize, batch: RecordBatch) {
        self.recycle_with(p, batch, None);
    }

    /// [`recycle`](Self::recycle), and where a buffer lent to `batch` is still shared (the
    /// batch was handed on), the buffer in the same place of `donor` takes its place: `donor`
    /// is an earlier batch [`take`](Self::take) built, from any destination, that its holder is
    /// done with. A pull-side writer whose batches come back this way allocates nothing in
    /// steady state. Donor buffers still shared, or a donor of another schema, are simply
    /// released.
    ///
    /// # Panics
    /// If there is no destination `p`.
    pub fn recycle_with(&mut self, p: usize, batch: RecordBatch, donor: Option<RecordBatch>) {
        drop(batch);
        let donor = donor.filter(|donor| {
            let fields = donor.schema_ref().fields();
            fields.len() == self.kinds.len()
                && fields
                    .iter()
                    .zip(self.schema.fields())
                    .all(|(theirs, ours)| theirs.data_type() == ours.data_type())
        });
        let mut donors: Vec<[Option<Buffer>; 3]> = match donor {
            Some(donor) => {
                let (_, columns, _) = donor.into_parts();
                columns
                    .into_iter()
                    .zip(&self.kinds)
                    .map(|(column, &kind)| donor_buffers(kind, column))
                    .collect()
            }
            None => Vec::new(),
        };
        donors.resize_with(self.kinds.len(), Default::default);
        let destination = &mut self.destinations[p];
        for (column, donor) in destination.columns.iter_mut().zip(donors) {
            column.reclaim(donor);
        }
        self.held -= destination.held;
        destination.update();
        self.held += destination.held;
    }

    /// Gives destination `p` new buffers as large as those lent to the batch
    /// [`take`](Self::take) built, which is kept elsewhere: where the batch is handed on rather
    /// than recycled, the destination's next rows need not grow their buffers from nothing.
    ///
    /// # Panics
    /// If there is no destination `p`.
    pub fn renew(&mut self, p: usize) {
        self.rebuffer(p, ColumnBuffer::renew);
    }

    /// Applies `change` to each of destination `p`'s column buffers and updates the totals.
    fn rebuffer(&mut self, p: usize, change: fn(&mut ColumnBuffer)) {
        let destination = &mut self.destinations[p];
        destination.columns.iter_mut().for_each(change);
        self.held -= destination.held;
        destination.update();
        self.held += destination.held;
    }

    /// Releases destination `p`'s empty buffers (and any lent ones), freeing their memory; a
    /// destination holding no rows then costs no more than one never met.
    ///
    /// # Panics
    /// If there is no destination `p`.
    pub fn release(&mut self, p: usize) {
        self.rebuffer(p, ColumnBuffer::release);
        let destination = &mut self.destinations[p];
        if destination.rows == 0 {
            debug_assert_eq!(destination.held, 0);
            destination.columns = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests;

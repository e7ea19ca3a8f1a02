//! [`GatheredBatch`] and [`OutputBuilder`]: output batches under construction that several
//! producers append to, each row copied once from a producer's hot scratch.
//!
//! ```text
//!  producer 0: batch ─ids─► GatheredBatch (plan; fixed-width values and views in destination
//!                            │             order; validity and booleans unpacked; reused)
//!                            ├─► OutputBuilder 0 ─► finish ─► RecordBatch (R rows) ─► consumer 0
//!  producer 1: batch ─ids─► ─┼─► OutputBuilder 1 ─► …
//!                            └─► …  (one builder per output, behind the caller's lock)
//! ```
//!
//! [`DestinationBuffers`](super::DestinationBuffers) gives each producer private buffers for
//! every destination; here the buffers of one destination are one [`OutputBuilder`] that any
//! producer appends to, so an output batch fills with the rows of every producer and is
//! handed over whole when it is full, never gathered again. A producer prepares its batch once
//! ([`GatheredBatch::gather`]), then appends each destination's rows (or a part of them, to
//! stop a builder at an exact row count) with [`OutputBuilder::append`]: the same kernels as
//! the destination buffers, the same table of what is kept per layout (the `append` module).

use super::append::{
    ColumnBuffer, Kind, Rows, Source, append_column, append_fixed, append_run, append_validity,
    push_piece, take_column, var_offsets,
};
use super::{Order, ScatterScratch, bits, fixed, fixed_bytes, scatter_array, view_parts};
use crate::error::{PartoutError, Result};
use crate::plan::ScatterPlan;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions, new_empty_array};
use arrow_buffer::MutableBuffer;
use arrow_schema::SchemaRef;
use std::ops::Range;
use std::sync::Arc;

/// The kinds of `schema`'s columns, after checking that the scatter kernels take each.
fn kinds_of(schema: &SchemaRef) -> Result<Vec<Kind>> {
    let mut scratch = ScatterScratch::new();
    for field in schema.fields() {
        // An empty column of the type goes through the kernels: what they refuse, refuse.
        let empty = new_empty_array(field.data_type());
        scatter_array(empty.as_ref(), Order::EMPTY, &mut scratch)?;
    }
    Ok(schema
        .fields()
        .iter()
        .map(|f| Kind::of(f.data_type()))
        .collect())
}

/// One column of a gathered batch, as every destination's append reads it.
#[derive(Debug, Default)]
struct GatheredColumn {
    /// Views in destination order.
    values: MutableBuffer,
    /// The unpacked validity (a 0/1 byte per input row, from `nulls_at`), when the column has
    /// nulls.
    nulls: Vec<u8>,
    nulls_at: usize,
    has_nulls: bool,
    /// The unpacked boolean values (from `bits_at`).
    bits: Vec<u8>,
    bits_at: usize,
    /// The bytes of var-width values or view data in the whole batch: no destination can
    /// receive more (what the room check of 32-bit offsets reads).
    data_bytes: usize,
    /// The bytes of the view column's out-of-line values: what its rows copy.
    long_bytes: usize,
    /// Dictionary and nested columns: each destination's rows, moved by the scatter kernels.
    pieces: Vec<Option<ArrayRef>>,
}

/// One input batch laid out for [`OutputBuilder::append`]: its plan (each destination's rows),
/// its views gathered into destination order (fixed-width values are gathered by each append,
/// straight into its builder), its validity and boolean
/// values unpacked, its dictionary and nested columns moved per destination. A producer keeps
/// one and reuses it batch after batch: once it has served a batch of a given shape, it
/// allocates nothing more for batches of that shape.
///
/// ```
/// use arrow_array::{Int32Array, RecordBatch, StringArray};
/// use partout_core::{GatheredBatch, OutputBuilder};
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([
///     ("k", Arc::new(Int32Array::from(vec![1, 2, 3])) as _),
///     ("s", Arc::new(StringArray::from(vec!["a", "b", "c"])) as _),
/// ])
/// .unwrap();
/// let mut gathered = GatheredBatch::try_new(batch.schema(), 2).unwrap();
/// let mut output = OutputBuilder::try_new(batch.schema()).unwrap();
/// gathered.gather(&batch, &[1, 0, 1]).unwrap();
/// output.append(&gathered, 1, 0..gathered.rows(1)).unwrap();
/// gathered.gather(&batch, &[1, 1, 0]).unwrap();
/// output.append(&gathered, 1, 0..1).unwrap(); // the first of destination 1's two rows
/// let out = output.finish(false).unwrap();
/// assert_eq!(out.column(0).as_ref(), &Int32Array::from(vec![1, 3, 1]));
/// assert_eq!(out.column(1).as_ref(), &StringArray::from(vec!["a", "c", "a"]));
/// ```
#[derive(Debug)]
pub struct GatheredBatch {
    schema: SchemaRef,
    kinds: Vec<Kind>,
    destinations: u32,
    plan: ScatterPlan,
    /// The batch's columns (shared with the caller's batch: the appends read them).
    columns: Vec<ArrayRef>,
    /// Whether a batch is gathered (a batch may have rows and no columns).
    gathered_one: bool,
    gathered: Vec<GatheredColumn>,
    scratch: ScatterScratch,
}

impl GatheredBatch {
    /// Scratch for batches of `schema` bound for `destinations` destinations.
    ///
    /// # Errors
    /// [`PartoutError::UnsupportedType`] for a column type the scatter kernels do not support,
    /// [`PartoutError::InvalidArgument`] for zero destinations or more than 2^20.
    pub fn try_new(schema: SchemaRef, destinations: u32) -> Result<Self> {
        crate::plan::check_partition_count(destinations)?;
        let kinds = kinds_of(&schema)?;
        let gathered = kinds.iter().map(|_| GatheredColumn::default()).collect();
        Ok(Self {
            schema,
            kinds,
            destinations,
            plan: ScatterPlan::new(),
            columns: Vec::new(),
            gathered_one: false,
            gathered,
            scratch: ScatterScratch::new(),
        })
    }

    /// The schema of the batches gathered.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The number of destinations.
    pub fn num_destinations(&self) -> usize {
        self.destinations as usize
    }

    /// Rows of the batch gathered last.
    pub fn num_rows(&self) -> usize {
        self.plan.num_rows()
    }

    /// Rows of the batch gathered last bound for destination `p` (none past the
    /// destinations).
    pub fn rows(&self, p: usize) -> usize {
        if p < self.num_destinations() && self.gathered_one {
            self.plan.range(p).len()
        } else {
            0
        }
    }

    /// Lays `batch` out for its destinations: row `i` goes to destination `ids[i]`. What was
    /// gathered before is replaced.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] when the batch's column types are not the schema's,
    /// `ids` is not one per row, or an id is not below the destination count;
    /// [`PartoutError::TooLarge`] when a list's child has more than `u32::MAX` values;
    /// [`PartoutError::Arrow`] when arrow refuses a moved dictionary or nested column. On
    /// error the batch gathered is empty.
    pub fn gather(&mut self, batch: &RecordBatch, ids: &[u32]) -> Result<()> {
        self.columns.clear();
        self.gathered_one = false;
        let fields = self.schema.fields();
        let matches = batch.num_columns() == fields.len()
            && batch
                .columns()
                .iter()
                .zip(fields.iter())
                .all(|(c, f)| c.data_type() == f.data_type());
        if !matches {
            return Err(PartoutError::InvalidArgument(format!(
                "a batch of schema {} gathered for outputs of {}",
                batch.schema(),
                self.schema
            )));
        }
        if ids.len() != batch.num_rows() {
            return Err(PartoutError::InvalidArgument(format!(
                "{} ids for a batch of {} rows",
                ids.len(),
                batch.num_rows()
            )));
        }
        self.plan.build(ids, self.destinations)?;
        let n = batch.num_rows();
        let order = Order::of_plan(&self.plan);
        for ((column, &kind), gathered) in batch
            .columns()
            .iter()
            .zip(&self.kinds)
            .zip(&mut self.gathered)
        {
            let array = column.as_ref();
            gathered.has_nulls = false;
            if let Some(nulls) = array.nulls().filter(|n| n.null_count() > 0) {
                bits::unpack_rows(nulls.validity(), nulls.offset(), n, &mut gathered.nulls);
                gathered.nulls_at = nulls.offset() % 8;
                gathered.has_nulls = true;
            }
            match kind {
                Kind::Bits => {
                    let values = array.as_boolean().values();
                    bits::unpack_rows(values.values(), values.offset(), n, &mut gathered.bits);
                    gathered.bits_at = values.offset() % 8;
                }
                Kind::Bytes32 => {
                    let o = var_offsets::<i32>(array);
                    gathered.data_bytes = (o[o.len() - 1] - o[0]) as usize;
                }
                Kind::Bytes64 => {
                    let o = var_offsets::<i64>(array);
                    gathered.data_bytes = (o[o.len() - 1] - o[0]) as usize;
                }
                Kind::Pieces => {
                    gathered.pieces.clear();
                    for p in 0..self.destinations as usize {
                        let range = self.plan.range(p);
                        let piece = match range.is_empty() {
                            true => None,
                            false => {
                                Some(scatter_array(array, order.slice(range), &mut self.scratch)?)
                            }
                        };
                        gathered.pieces.push(piece);
                    }
                }
                Kind::Views => {
                    let (views, buffers) = view_parts(array);
                    gathered.data_bytes = buffers.iter().map(|b| b.len()).sum();
                    gathered.long_bytes = views
                        .iter()
                        .map(|&v| v as u32 as usize)
                        .filter(|&len| len > 12)
                        .sum();
                    // Views are gathered once here, in one long loop over the order, and read
                    // in runs by every destination's append, which copies their out-of-line
                    // bytes. Fixed-width values are gathered by each append straight into its
                    // builder.
                    gathered.values.clear();
                    let views = fixed_bytes(array, 16);
                    fixed::gather_fixed_into(views, 16, order, &mut gathered.values);
                }
                Kind::Null | Kind::Fixed(_) => {}
            }
        }
        self.columns.extend(batch.columns().iter().cloned());
        self.gathered_one = true;
        Ok(())
    }

    /// The bytes `rows` rows shaped as this batch's are on average take in an output's
    /// buffers for column `c`: values (or offsets, views, bits), var-width bytes (an eighth
    /// more: their total varies from batch to batch) and validity.
    fn column_bytes(&self, c: usize, rows: usize) -> (usize, usize, usize) {
        let gathered = &self.gathered[c];
        let n = self.num_rows().max(1);
        let per_rows = |bytes: usize| {
            let bytes = (bytes as u128 * rows as u128).div_ceil(n as u128) as usize;
            bytes + bytes / 8
        };
        let (values, data) = match self.kinds[c] {
            Kind::Null | Kind::Pieces => (0, 0),
            Kind::Fixed(width) => (rows * width, 0),
            Kind::Bits => (rows.div_ceil(8), 0),
            Kind::Bytes32 => ((rows + 1) * 4, per_rows(gathered.data_bytes)),
            Kind::Bytes64 => ((rows + 1) * 8, per_rows(gathered.data_bytes)),
            Kind::Views => (rows * 16, per_rows(gathered.long_bytes)),
        };
        let validity = if gathered.has_nulls {
            rows.div_ceil(8)
        } else {
            0
        };
        (values, data, validity)
    }

    /// The bytes a row of this batch takes in an output's buffers, on average (at least 1).
    pub fn row_bytes(&self) -> usize {
        const ROWS: usize = 1024;
        let bytes: usize = (0..self.kinds.len())
            .map(|c| {
                let (values, data, validity) = self.column_bytes(c, ROWS);
                values + data + validity
            })
            .sum();
        bytes.div_ceil(ROWS).max(1)
    }

    /// Bytes of scratch held: the plan, the gathered values, the unpacked bits and the moved
    /// pieces (the batch's own columns are the caller's).
    pub fn held_bytes(&self) -> usize {
        let columns: usize = self
            .gathered
            .iter()
            .map(|g| {
                g.values.capacity()
                    + g.nulls.capacity()
                    + g.bits.capacity()
                    + g.pieces
                        .iter()
                        .flatten()
                        .map(|p| p.get_array_memory_size())
                        .sum::<usize>()
            })
            .sum();
        columns + self.plan.capacity() * size_of::<u32>() + self.scratch.capacity() * 4
    }

    /// Forgets the batch gathered last (its columns are no longer held).
    pub fn clear(&mut self) {
        self.columns.clear();
        self.gathered_one = false;
        for gathered in &mut self.gathered {
            gathered.pieces.clear();
        }
    }
}

/// One output's batch under construction: rows of any number of gathered batches appended
/// (each its destination's rows, or a part of them), then taken out whole as a
/// [`RecordBatch`] by [`finish`](Self::finish). Several producers share one behind a lock;
/// each row is copied once, from the producer's [`GatheredBatch`] (or, for var-width values,
/// its input) into the builder's buffers, which the finished batch then owns.
#[derive(Debug)]
pub struct OutputBuilder {
    schema: SchemaRef,
    kinds: Vec<Kind>,
    columns: Vec<ColumnBuffer>,
    rows: usize,
}

impl OutputBuilder {
    /// An empty builder of batches of `schema` (no buffer until the first rows arrive).
    ///
    /// # Errors
    /// [`PartoutError::UnsupportedType`] for a column type the scatter kernels do not support.
    pub fn try_new(schema: SchemaRef) -> Result<Self> {
        let kinds = kinds_of(&schema)?;
        Ok(Self {
            columns: kinds.iter().map(|_| ColumnBuffer::default()).collect(),
            schema,
            kinds,
            rows: 0,
        })
    }

    /// The schema of the batches built.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Rows appended since the last [`finish`](Self::finish).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes appended: values, offsets, validity and moved pieces.
    pub fn bytes(&self) -> usize {
        self.columns.iter().map(ColumnBuffer::bytes).sum()
    }

    /// Bytes of buffer capacity held: the memory the builder occupies.
    pub fn held_bytes(&self) -> usize {
        self.columns.iter().map(ColumnBuffer::capacity).sum()
    }

    /// Reserves room for `rows` more rows shaped as the rows of `from` are on average (the
    /// same widths, as many var-width bytes a row, an eighth more), so that a builder filling
    /// from nothing takes them without growing a buffer (a growing buffer doubles, and copies).
    pub fn reserve(&mut self, from: &GatheredBatch, rows: usize) {
        for (c, column) in self.columns.iter_mut().enumerate() {
            let (values, data, validity) = from.column_bytes(c, rows);
            column.reserve(values, data, validity);
        }
    }

    /// Appends the rows `within` of destination `p`'s rows in `from` (`0..from.rows(p)` for
    /// all of them), after the rows the builder holds.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] when `from` gathers another schema, or `within`
    /// reaches past destination `p`'s rows; [`PartoutError::TooLarge`] when a Utf8/Binary
    /// column's bytes could pass `i32::MAX`, or a view column's data `u32::MAX` (finish the
    /// builder first). On error nothing is appended.
    pub fn append(&mut self, from: &GatheredBatch, p: usize, within: Range<usize>) -> Result<()> {
        if within.is_empty() {
            return Ok(());
        }
        if !Arc::ptr_eq(&self.schema, &from.schema) && self.schema != from.schema {
            return Err(PartoutError::InvalidArgument(format!(
                "rows gathered as {} appended to an output of {}",
                from.schema, self.schema
            )));
        }
        let received = from.rows(p);
        if within.end > received {
            return Err(PartoutError::InvalidArgument(format!(
                "rows {within:?} of destination {p}, which has {received} in the batch gathered"
            )));
        }
        for (c, (&kind, gathered)) in self.kinds.iter().zip(&from.gathered).enumerate() {
            let limit = match kind {
                Kind::Bytes32 => i32::MAX as usize,
                Kind::Views => u32::MAX as usize,
                _ => continue,
            };
            if self.columns[c].data_len() + gathered.data_bytes > limit {
                return Err(PartoutError::TooLarge(format!(
                    "an output's column {:?} could hold more than {limit} bytes; finish it first",
                    self.schema.field(c).name()
                )));
            }
        }
        let start = from.plan.range(p).start;
        let range = start + within.start..start + within.end;
        let order = Order::of_plan(&from.plan).slice(range.clone());
        let n = from.num_rows();
        let before = self.rows;
        for (((column, &kind), gathered), array) in self
            .columns
            .iter_mut()
            .zip(&self.kinds)
            .zip(&from.gathered)
            .zip(&from.columns)
        {
            let source = Source {
                array: array.as_ref(),
                nulls: gathered
                    .has_nulls
                    .then(|| &gathered.nulls[gathered.nulls_at..gathered.nulls_at + n]),
                bits: (kind == Kind::Bits)
                    .then(|| &gathered.bits[gathered.bits_at..gathered.bits_at + n]),
            };
            match kind {
                Kind::Pieces => {
                    let piece = gathered.pieces[p]
                        .as_ref()
                        .expect("a piece for a destination with rows");
                    let piece = match within.len() == received {
                        true => piece.clone(),
                        false => piece.slice(within.start, within.len()),
                    };
                    push_piece(piece, column);
                }
                Kind::Fixed(width) => {
                    // One copy: gathered from the input straight into the builder.
                    append_fixed(fixed_bytes(array.as_ref(), width), width, order, column);
                    append_validity(&source, Rows::Order(order), before, column);
                }
                Kind::Views => {
                    let views = &gathered.values.as_slice()[range.start * 16..range.end * 16];
                    append_run(views, Some(view_parts(array.as_ref()).1), column);
                    append_validity(&source, Rows::Order(order), before, column);
                }
                _ => append_column(kind, &source, Rows::Order(order), before, column),
            }
        }
        self.rows += within.len();
        Ok(())
    }

    /// Gives up the buffers of an empty builder (a renewed one whose output ended): it then
    /// holds no memory. A builder holding rows keeps them.
    pub fn release(&mut self) {
        if self.rows == 0 {
            self.columns.iter_mut().for_each(ColumnBuffer::release);
        }
    }

    /// The rows appended as a batch of the schema; the builder is then empty. With `renew`,
    /// it gives itself new buffers of the sizes the batch took (and an eighth more for the
    /// bytes of var-width values), so that a next batch as large is built without growing a
    /// buffer; without, it holds none until its next rows.
    ///
    /// # Errors
    /// [`PartoutError::Arrow`] if the rows of a dictionary or nested column cannot be
    /// concatenated.
    pub fn finish(&mut self, renew: bool) -> Result<RecordBatch> {
        let rows = self.rows;
        let columns = self
            .schema
            .fields()
            .iter()
            .zip(&self.kinds)
            .zip(self.columns.iter_mut())
            .map(|((field, &kind), column)| take_column(field.data_type(), kind, rows, column))
            .collect::<Result<Vec<_>>>()?;
        self.rows = 0;
        for column in &mut self.columns {
            match renew {
                true => column.renew_exact(),
                false => column.release(),
            }
        }
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }
}

#[cfg(test)]
mod tests;

//! [`DestinationBuffers`]: per-destination column buffers that rows are appended to, batch
//! after batch, straight from the input by a plan's order.
//!
//! ```text
//!  batch 1 ──plan──► order ─┬─► destination 0: [ values | offsets+bytes | validity ] …
//!  batch 2 ──plan──► order ─┤─► destination 1: [ …                                 ] …
//!                           └─► …           take(p) ─► RecordBatch ─► recycle(p, batch)
//! ```
//!
//! The same kernels as the batch scatter write into the end of each destination's buffers
//! instead of into one new batch, so a row is copied once on its way to its destination. A
//! destination's buffers are lent to the batch [`DestinationBuffers::take`] builds and taken
//! back by [`DestinationBuffers::recycle`]: in steady state no buffer is allocated.
//!
//! | layout | buffers kept per destination |
//! |---|---|
//! | fixed width (primitive, temporal, decimal, interval, FixedSizeBinary) | values |
//! | Boolean | value bits |
//! | Utf8, Binary, and their Large forms | offsets, bytes |
//! | Utf8View, BinaryView | views, one data buffer (out-of-line strings copied into it) |
//! | Null | the row count |
//! | dictionary, nested | the destination's rows of each batch, moved by the scatter kernels, concatenated by `take` |
//!
//! Validity is kept only once a null arrives; a destination that never received one gets no
//! null buffer.

use super::{Order, ScatterScratch, bits, bytes, fixed, fixed_bytes, scatter_array, view_parts};
use crate::batch::PartitionedBatch;
use crate::error::{PartoutError, Result};
use crate::plan::ScatterPlan;
use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, BooleanArray, NullArray, RecordBatch, RecordBatchOptions, make_array,
    new_empty_array,
};
use arrow_buffer::{BooleanBuffer, Buffer, MutableBuffer, NullBuffer};
use arrow_data::ArrayDataBuilder;
use arrow_schema::{DataType, SchemaRef};
use std::ops::Range;
use std::sync::Arc;

/// How a column is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Fixed(usize),
    Bits,
    Bytes32,
    Bytes64,
    Views,
    Pieces,
}

impl Kind {
    fn of(data_type: &DataType) -> Kind {
        if let Some(width) = data_type.primitive_width() {
            return Kind::Fixed(width);
        }
        match data_type {
            DataType::Null => Kind::Null,
            DataType::Boolean => Kind::Bits,
            DataType::FixedSizeBinary(width) => Kind::Fixed(*width as usize),
            DataType::Utf8 | DataType::Binary => Kind::Bytes32,
            DataType::LargeUtf8 | DataType::LargeBinary => Kind::Bytes64,
            DataType::Utf8View | DataType::BinaryView => Kind::Views,
            _ => Kind::Pieces,
        }
    }
}

/// One destination's buffers for one column.
#[derive(Debug, Default)]
struct ColumnBuffer {
    /// Fixed-width values, boolean bits, var-width offsets or views.
    values: MutableBuffer,
    /// Var-width bytes or out-of-line view data.
    data: MutableBuffer,
    /// Validity bits, once a null has arrived (`has_nulls`).
    validity: MutableBuffer,
    has_nulls: bool,
    /// Moved rows of dictionary and nested columns.
    pieces: Vec<ArrayRef>,
    pieces_bytes: usize,
    /// Buffers lent to the last batch `take` built, taken back by `recycle`.
    lent: [Option<Buffer>; 3],
}

impl ColumnBuffer {
    fn bytes(&self) -> usize {
        self.values.len() + self.data.len() + self.validity.len() + self.pieces_bytes
    }

    fn capacity(&self) -> usize {
        self.values.capacity() + self.data.capacity() + self.validity.capacity() + self.pieces_bytes
    }
}

/// One destination's buffered rows.
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

/// Which rows of a batch go to a destination.
#[derive(Debug, Clone)]
enum Rows<'a> {
    /// Rows by index, from a plan's order.
    Order(Order<'a>),
    /// A contiguous range (of an already partitioned batch).
    Range(Range<usize>),
}

impl Rows<'_> {
    fn len(&self) -> usize {
        match self {
            Rows::Order(order) => order.len(),
            Rows::Range(range) => range.len(),
        }
    }
}

/// What one input column offers every destination, prepared once per batch.
struct Source<'a> {
    array: &'a dyn Array,
    /// The unpacked validity (0/1 byte per row), when the column has nulls.
    nulls: Option<&'a [u8]>,
    /// The unpacked boolean values.
    bits: Option<&'a [u8]>,
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
    unpacked_nulls: Vec<u8>,
    unpacked_bits: Vec<u8>,
    identity: Vec<u32>,
    /// One column's values gathered by a plan's order.
    gathered: MutableBuffer,
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
            // SAFETY: an empty order is trivially below any bound.
            let none = unsafe { Order::new_unchecked(&[], 0) };
            scatter_array(empty.as_ref(), none, &mut scratch)?;
        }
        let kinds: Vec<Kind> = schema
            .fields()
            .iter()
            .map(|f| Kind::of(f.data_type()))
            .collect();
        let destinations = (0..destinations)
            .map(|_| Destination {
                columns: kinds.iter().map(|_| ColumnBuffer::default()).collect(),
                ..Destination::default()
            })
            .collect();
        Ok(Self {
            schema,
            kinds,
            destinations,
            held: 0,
            buffered: 0,
            unpacked_nulls: Vec::new(),
            unpacked_bits: Vec::new(),
            identity: Vec::new(),
            gathered: MutableBuffer::new(0),
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

    /// Bytes buffered for all destinations.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    /// Bytes of buffer capacity held for all destinations: the memory the buffers occupy.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Appends the rows of `batch` to their destinations: destination `p` receives the rows
    /// `plan.order()[plan.range(p)]`, after the rows it holds.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] when the batch does not match the schema, the plan
    /// (its row count) or the destination count; [`PartoutError::TooLarge`] when a
    /// destination's Utf8/Binary bytes would pass `i32::MAX`, or its view data `u32::MAX`.
    /// On error nothing is appended.
    pub fn append(&mut self, batch: &RecordBatch, plan: &ScatterPlan) -> Result<()> {
        self.check(batch, plan.offsets())?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.append_with(batch, plan.offsets(), Some(Order::of_plan(plan)))
    }

    /// Appends a batch already laid out destination by destination, copying each
    /// destination's contiguous rows.
    ///
    /// # Errors
    /// As [`append`](Self::append).
    pub fn append_partitioned(&mut self, partitioned: &PartitionedBatch) -> Result<()> {
        let batch = partitioned.batch();
        self.check(batch, partitioned.offsets())?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.append_with(batch, partitioned.offsets(), None)
    }

    fn check(&self, batch: &RecordBatch, offsets: &[u32]) -> Result<()> {
        if offsets.len() != self.destinations.len() + 1 {
            return Err(PartoutError::InvalidArgument(format!(
                "rows planned for {} destinations appended to buffers of {}",
                offsets.len().saturating_sub(1),
                self.destinations.len()
            )));
        }
        if offsets.last().map_or(0, |&o| o as usize) != batch.num_rows() {
            return Err(PartoutError::InvalidArgument(format!(
                "a batch of {} rows does not match a plan of {} rows",
                batch.num_rows(),
                offsets.last().copied().unwrap_or(0)
            )));
        }
        let fields = self.schema.fields();
        let matches = batch.num_columns() == fields.len()
            && batch
                .columns()
                .iter()
                .zip(fields.iter())
                .all(|(c, f)| c.data_type() == f.data_type());
        if !matches {
            return Err(PartoutError::InvalidArgument(format!(
                "a batch of schema {} appended to buffers of {}",
                batch.schema(),
                self.schema
            )));
        }
        self.check_room(batch, offsets)
    }

    /// Errors unless every destination receiving rows has room for them in its 32-bit offsets
    /// and view offsets (checked against the whole batch's bytes: a destination cannot receive
    /// more than that).
    fn check_room(&self, batch: &RecordBatch, offsets: &[u32]) -> Result<()> {
        for (c, column) in batch.columns().iter().enumerate() {
            let (limit, incoming) = match self.kinds[c] {
                Kind::Bytes32 => {
                    let o = var_offsets::<i32>(column.as_ref());
                    (i32::MAX as usize, (o[o.len() - 1] - o[0]) as usize)
                }
                Kind::Views => {
                    let buffers = view_parts(column.as_ref()).1;
                    (u32::MAX as usize, buffers.iter().map(|b| b.len()).sum())
                }
                _ => continue,
            };
            for (p, destination) in self.destinations.iter().enumerate() {
                let receives = offsets[p] != offsets[p + 1];
                let held = destination.columns[c].data.len();
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

    /// Appends every column: by `order` (destination `p` taking `order[offsets[p]..offsets[p +
    /// 1]]`), or, without one, the contiguous ranges `offsets` names.
    fn append_with(
        &mut self,
        batch: &RecordBatch,
        offsets: &[u32],
        order: Option<Order<'_>>,
    ) -> Result<()> {
        let rows_of = |range: Range<usize>| match order {
            Some(order) => Rows::Order(Order {
                rows: &order.rows()[range],
                bound: order.bound(),
            }),
            None => Rows::Range(range),
        };
        let n = batch.num_rows();
        for (c, column) in batch.columns().iter().enumerate() {
            let kind = self.kinds[c];
            let array = column.as_ref();
            let nulls = array.nulls().filter(|n| n.null_count() > 0).map(|nulls| {
                bits::unpack_rows(
                    nulls.validity(),
                    nulls.offset(),
                    n,
                    &mut self.unpacked_nulls,
                )
            });
            let values_bits = (kind == Kind::Bits).then(|| {
                let values = array.as_boolean().values();
                bits::unpack_rows(values.values(), values.offset(), n, &mut self.unpacked_bits)
            });
            let source = Source {
                array,
                nulls,
                bits: values_bits,
            };
            if self.identity.len() < n {
                self.identity.clear();
                self.identity.extend(0..n as u32);
            }
            // Fixed-width values and views by an order: gathered first, in one long loop over
            // the whole order into reused scratch (the random reads of the source overlap
            // there), then copied to each destination as a contiguous run.
            let width = match kind {
                Kind::Fixed(width) => Some(width),
                Kind::Views => Some(16),
                _ => None,
            };
            if let Some(width) = width {
                let values = fixed_bytes(array, width);
                let gathered = match order {
                    Some(order) => {
                        self.gathered.clear();
                        self.gathered.reserve(n * width);
                        // SAFETY: room for `n * width` bytes was reserved, and the plan's order
                        // has `n` rows.
                        unsafe {
                            fixed::gather_fixed_to(
                                values,
                                width,
                                order,
                                self.gathered.as_mut_ptr(),
                            );
                            self.gathered.set_len(n * width);
                        }
                        self.gathered.as_slice()
                    }
                    None => values,
                };
                let buffers = (kind == Kind::Views).then(|| view_parts(array).1);
                for p in 0..self.destinations.len() {
                    let range = offsets[p] as usize..offsets[p + 1] as usize;
                    if range.is_empty() {
                        continue;
                    }
                    let destination = &mut self.destinations[p];
                    let column = &mut destination.columns[c];
                    let run = &gathered[range.start * width..range.end * width];
                    match buffers {
                        Some(buffers) => append_views(run, buffers, column),
                        None => column.values.extend_from_slice(run),
                    }
                    let before = destination.rows;
                    append_validity(&source, rows_of(range), &self.identity[..n], before, column);
                }
                continue;
            }
            for (p, destination) in self.destinations.iter_mut().enumerate() {
                let range = offsets[p] as usize..offsets[p + 1] as usize;
                if range.is_empty() {
                    continue;
                }
                let rows = rows_of(range);
                let before = destination.rows;
                append_column(
                    kind,
                    &source,
                    rows,
                    &self.identity[..n],
                    before,
                    &mut destination.columns[c],
                    &mut self.scratch,
                )?;
            }
        }
        for (p, destination) in self.destinations.iter_mut().enumerate() {
            let received = (offsets[p + 1] - offsets[p]) as usize;
            if received > 0 {
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
        drop(batch);
        let destination = &mut self.destinations[p];
        for column in &mut destination.columns {
            let [values, data, validity] = &mut column.lent;
            for (lent, home) in [
                (values, &mut column.values),
                (data, &mut column.data),
                (validity, &mut column.validity),
            ] {
                if let Some(Ok(mut buffer)) = lent.take().map(Buffer::into_mutable)
                    && home.capacity() == 0
                {
                    buffer.clear();
                    *home = buffer;
                }
            }
        }
        self.held -= destination.held;
        destination.update();
        self.held += destination.held;
    }

    /// Releases destination `p`'s empty buffers (and any lent ones), freeing their memory.
    ///
    /// # Panics
    /// If there is no destination `p`.
    pub fn release(&mut self, p: usize) {
        let destination = &mut self.destinations[p];
        for column in &mut destination.columns {
            column.lent = Default::default();
            if column.bytes() == 0 {
                *column = ColumnBuffer::default();
            }
        }
        self.held -= destination.held;
        destination.update();
        self.held += destination.held;
    }
}

/// Appends `rows` of one source column to one destination's column, which holds `before`
/// rows.
fn append_column(
    kind: Kind,
    source: &Source<'_>,
    rows: Rows<'_>,
    identity: &[u32],
    before: usize,
    column: &mut ColumnBuffer,
    scratch: &mut ScatterScratch,
) -> Result<()> {
    let order = as_order(&rows, identity);
    match kind {
        Kind::Null => {}
        Kind::Fixed(_) | Kind::Views => unreachable!("moved by the caller"),
        Kind::Bits => {
            let unpacked = source.bits.expect("boolean values are unpacked");
            bits::append_gathered(unpacked, order, &mut column.values, before);
        }
        Kind::Bytes32 => append_bytes::<i32>(source.array, rows.clone(), column),
        Kind::Bytes64 => append_bytes::<i64>(source.array, rows.clone(), column),
        Kind::Pieces => {
            // Moving the rows makes the piece own exactly them (no slice of the whole batch is
            // kept alive); validity moves with it.
            let piece = scatter_array(source.array, order, scratch)?;
            column.pieces_bytes += piece_bytes(piece.as_ref());
            column.pieces.push(piece);
            return Ok(());
        }
    }
    append_validity(source, rows, identity, before, column);
    Ok(())
}

/// Appends the validity of `rows` of `source` to a destination's column holding `before`
/// rows: gathered bits once the column has nulls, nothing while it has none.
fn append_validity(
    source: &Source<'_>,
    rows: Rows<'_>,
    identity: &[u32],
    before: usize,
    column: &mut ColumnBuffer,
) {
    match (source.nulls, column.has_nulls) {
        (Some(unpacked), has) => {
            if !has {
                column.has_nulls = true;
                bits::append_ones(&mut column.validity, 0, before);
            }
            let order = as_order(&rows, identity);
            bits::append_gathered(unpacked, order, &mut column.validity, before);
        }
        (None, true) => bits::append_ones(&mut column.validity, before, rows.len()),
        (None, false) => {}
    }
}

/// `rows` as an order (a range as a piece of the identity order).
fn as_order<'a>(rows: &Rows<'a>, identity: &'a [u32]) -> Order<'a> {
    match rows {
        Rows::Order(order) => *order,
        Rows::Range(range) => Order {
            rows: &identity[range.clone()],
            bound: identity.len(),
        },
    }
}

/// The bytes a moved piece adds: a dictionary's keys only (its values are shared by every
/// piece of the batch), anything else its buffers.
fn piece_bytes(piece: &dyn Array) -> usize {
    match piece.data_type() {
        DataType::Dictionary(key, _) => {
            piece.len() * key.primitive_width().unwrap_or(8) + piece.len().div_ceil(8)
        }
        _ => piece.get_array_memory_size(),
    }
}

/// The logical offsets (`len + 1`) of a Utf8/Binary array of offset type `O`.
fn var_offsets<O: arrow_array::OffsetSizeTrait>(array: &dyn Array) -> &[O] {
    match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 => array.as_string::<O>().value_offsets(),
        _ => array.as_binary::<O>().value_offsets(),
    }
}

fn var_values<O: arrow_array::OffsetSizeTrait>(array: &dyn Array) -> &[u8] {
    match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 => array.as_string::<O>().values().as_slice(),
        _ => array.as_binary::<O>().values().as_slice(),
    }
}

fn append_bytes<O>(array: &dyn Array, rows: Rows<'_>, column: &mut ColumnBuffer)
where
    O: arrow_array::OffsetSizeTrait + std::ops::AddAssign + std::ops::Sub<Output = O>,
{
    let offsets = var_offsets::<O>(array);
    let values = var_values::<O>(array);
    let width = size_of::<O>();
    if column.values.is_empty() {
        column.values.push(O::usize_as(0));
    }
    let len = column.values.len();
    let base = column.values.typed_data::<O>()[len / width - 1];
    match rows {
        Rows::Range(range) => {
            let (first, last) = (offsets[range.start], offsets[range.end]);
            column.values.reserve(range.len() * width);
            for &o in &offsets[range.start + 1..=range.end] {
                column.values.push(base + (o - first));
            }
            column
                .data
                .extend_from_slice(&values[first.as_usize()..last.as_usize()]);
        }
        Rows::Order(order) => {
            let n = order.len();
            column.values.reserve(n * width);
            // SAFETY: room for `n` offsets past `len` was reserved; the offsets pass writes
            // `n + 1` from the last one held (`len - width`, rewriting `base` unchanged). The
            // buffer is 64-byte aligned and `len` a multiple of `width`, so the pointer is
            // aligned for `O`. `check_room` ensured the sum stays inside `O`.
            let total = unsafe {
                let dst = column.values.as_mut_ptr().add(len - width).cast::<O>();
                let end = bytes::offsets_to(offsets, order, base, dst);
                column.values.set_len(len + n * width);
                (end - base).as_usize()
            };
            let held = column.data.len();
            column.data.reserve(total + bytes::SHORT);
            // SAFETY: room for `total + SHORT` bytes past `held` was reserved, and `total` is
            // the sum of the lengths of the rows `order` takes (the offsets pass).
            unsafe {
                bytes::copy_values_to(
                    offsets,
                    values,
                    order,
                    total,
                    column.data.as_mut_ptr().add(held),
                );
                column.data.set_len(held + total);
            }
        }
    }
}

/// Out-of-line values up to this long are copied as one block of this size (a `memcpy` call
/// per short string costs more than the string).
const VIEW_BLOCK: usize = 32;

/// Appends views (`16 * k` bytes, the views themselves, native-endian), copying each
/// out-of-line value from `buffers` into the destination's one data buffer and pointing its
/// view there.
///
/// # Panics
/// If a view points outside `buffers` (it does not for views of a valid array).
fn append_views(views: &[u8], buffers: &[Buffer], column: &mut ColumnBuffer) {
    let views = views
        .chunks_exact(16)
        .map(|v| u128::from_ne_bytes(v.try_into().expect("16 bytes")));
    // First pass: the out-of-line bytes, to reserve once.
    let long: usize = views
        .clone()
        .map(|view| view as u32 as usize)
        .filter(|&len| len > 12)
        .sum();
    let n = views.len();
    column.values.reserve(n * 16);
    column.data.reserve(long + VIEW_BLOCK);
    let (views_len, data_len) = (column.values.len(), column.data.len());
    // SAFETY: room for `n` views past `views_len` was reserved; the buffer is 64-byte aligned
    // and `views_len` a multiple of 16, so the pointer is aligned for `u128`.
    let out = unsafe { column.values.as_mut_ptr().add(views_len).cast::<u128>() };
    let data = column.data.as_mut_ptr();
    let mut at = data_len;
    for (j, view) in views.enumerate() {
        let len = view as u32 as usize;
        let moved = if len <= 12 {
            view
        } else {
            let buffer = buffers[(view >> 64) as u32 as usize].as_slice();
            let offset = (view >> 96) as u32 as usize;
            assert!(
                offset + len <= buffer.len(),
                "a view past the end of its data buffer"
            );
            // Read through the whole buffer: a block copy reads past the value.
            let src = buffer.as_ptr();
            // SAFETY: `offset..offset + len` is inside `buffer` (checked above). The
            // destination has room for the `long` bytes the first pass summed plus
            // `VIEW_BLOCK`: `at - data_len` plus this value's length stays within `long`, and
            // a block copy writes at most `VIEW_BLOCK` bytes from `at`, reading them from
            // inside `buffer` (checked).
            unsafe {
                if len <= VIEW_BLOCK && offset + VIEW_BLOCK <= buffer.len() {
                    std::ptr::copy_nonoverlapping(src.add(offset), data.add(at), VIEW_BLOCK);
                } else {
                    std::ptr::copy_nonoverlapping(src.add(offset), data.add(at), len);
                }
            }
            // Length and prefix kept; buffer 0; the new offset.
            let moved = (view & u128::from(u64::MAX)) | (at as u128) << 96;
            at += len;
            moved
        };
        // SAFETY: `j < n`, within the room reserved above.
        unsafe { *out.add(j) = moved };
    }
    debug_assert_eq!(at - data_len, long);
    // SAFETY: all `n` views were written, and `long` data bytes (every value in full, back
    // to back; block copies past them are cut off here).
    unsafe {
        column.values.set_len(views_len + n * 16);
        column.data.set_len(at);
    }
}

/// Builds a destination's column from its buffers, lending them to the array.
fn take_column(
    data_type: &DataType,
    kind: Kind,
    rows: usize,
    column: &mut ColumnBuffer,
) -> Result<ArrayRef> {
    let nulls = if column.has_nulls {
        column.has_nulls = false;
        let bits: Buffer = std::mem::take(&mut column.validity).into();
        column.lent[2] = Some(bits.clone());
        // A destination whose rows happen to be all valid gets no null buffer either.
        Some(NullBuffer::new(BooleanBuffer::new(bits, 0, rows))).filter(|n| n.null_count() > 0)
    } else {
        None
    };
    let mut lend = |slot: usize, buffer: &mut MutableBuffer| -> Buffer {
        let buffer: Buffer = std::mem::take(buffer).into();
        column.lent[slot] = Some(buffer.clone());
        buffer
    };
    Ok(match kind {
        Kind::Null => Arc::new(NullArray::new(rows)),
        Kind::Fixed(_) => {
            let values = lend(0, &mut column.values);
            let builder = ArrayDataBuilder::new(data_type.clone())
                .len(rows)
                .add_buffer(values)
                .nulls(nulls);
            // Checking a fixed-width layout is O(1): keep the safe constructor.
            make_array(builder.build()?)
        }
        Kind::Bits => {
            let values = lend(0, &mut column.values);
            Arc::new(BooleanArray::new(
                BooleanBuffer::new(values, 0, rows),
                nulls,
            ))
        }
        Kind::Bytes32 | Kind::Bytes64 | Kind::Views => {
            match kind {
                Kind::Bytes32 if column.values.is_empty() => column.values.push(0i32),
                Kind::Bytes64 if column.values.is_empty() => column.values.push(0i64),
                _ => {}
            }
            let values = lend(0, &mut column.values);
            let data = lend(1, &mut column.data);
            let builder = ArrayDataBuilder::new(data_type.clone())
                .len(rows)
                .add_buffer(values)
                .add_buffer(data)
                .nulls(nulls);
            // SAFETY: offsets and bytes: whole values of valid arrays were appended between
            // monotone offsets starting at 0 and ending at the bytes' length; UTF-8 stays UTF-8
            // because every value is copied whole. Views: inline views are copied unchanged;
            // every out-of-line view keeps its length and prefix and points at buffer 0, at the
            // offset its whole value was copied to. Re-validating would read every byte.
            unsafe { super::finish(builder) }
        }
        Kind::Pieces => {
            column.pieces_bytes = 0;
            let pieces = std::mem::take(&mut column.pieces);
            let array = match pieces.as_slice() {
                [] => new_empty_array(data_type),
                [one] => one.clone(),
                many => {
                    let refs: Vec<&dyn Array> = many.iter().map(|a| a.as_ref()).collect();
                    arrow_select::concat::concat(&refs)?
                }
            };
            if array.nulls().is_some_and(|n| n.null_count() == 0) {
                make_array(array.to_data().into_builder().nulls(None).build()?)
            } else {
                array
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partitioner;
    use arrow_array::{
        BooleanArray, Decimal128Array, FixedSizeBinaryArray, Int16Array, LargeStringArray,
        StringViewArray,
    };

    /// Every kernel of the buffers on a few rows (small enough for Miri): both ways in,
    /// unaligned and sliced inputs, a take in the middle.
    #[test]
    fn every_layout_appends_and_takes() {
        let long = "a string longer than twelve bytes";
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int16Array::from_iter(
                (0..23).map(|i| (i % 4 != 0).then_some(i)),
            )),
            Arc::new(Decimal128Array::from_iter_values(
                (0..23).map(|i| i * 1_000_000_007),
            )),
            Arc::new(
                FixedSizeBinaryArray::try_from_iter((0..24u8).map(|i| [i, i + 1, i + 2]))
                    .unwrap()
                    .slice(1, 23),
            ),
            Arc::new(BooleanArray::from_iter(
                (0..23).map(|i| (i % 5 != 1).then_some(i % 3 == 0)),
            )),
            Arc::new(LargeStringArray::from_iter_values(
                (0..23).map(|i| "xy".repeat(i % 6)),
            )),
            Arc::new(StringViewArray::from_iter((0..23).map(|i| {
                (i % 7 != 3).then(|| {
                    if i % 2 == 0 {
                        &long[i..]
                    } else {
                        &long[..i % 12]
                    }
                })
            }))),
        ];
        let batch = RecordBatch::try_from_iter(
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("c{i}"), c.clone())),
        )
        .unwrap();
        let ids: Vec<u32> = (0..23u32).map(|i| (i * 5 + i / 4) % 3).collect();
        let mut plan = ScatterPlan::new();
        plan.build(&ids, 3).unwrap();
        let mut partitioner = Partitioner::try_new(3).unwrap();
        let partitioned = partitioner.partition(&batch, &ids).unwrap();
        let mut buffers = DestinationBuffers::try_new(batch.schema(), 3).unwrap();
        buffers.append(&batch, &plan).unwrap();
        let first = buffers.take(2).unwrap();
        buffers.append_partitioned(&partitioned).unwrap();
        buffers.recycle(2, first.clone());
        buffers.append(&batch, &plan).unwrap();
        for p in 0..3 {
            let rows: Vec<u32> = (0..23u32)
                .filter(|&r| ids[r as usize] == p as u32)
                .collect();
            let times = if p == 2 { 2 } else { 3 };
            let out = buffers.take(p).unwrap();
            assert_eq!(out.num_rows(), rows.len() * times);
            for (c, column) in out.columns().iter().enumerate() {
                column.to_data().validate_full().unwrap();
                for (k, value) in (0..column.len())
                    .map(|k| (k, column.slice(k, 1)))
                    .collect::<Vec<_>>()
                {
                    let row = rows[k % rows.len()] as usize;
                    assert_eq!(
                        value.as_ref(),
                        batch.column(c).slice(row, 1).as_ref(),
                        "{p} {c} {k}"
                    );
                }
            }
            if p == 2 {
                assert_eq!(first.num_rows(), rows.len());
            }
            buffers.recycle(p, out);
        }
    }
}

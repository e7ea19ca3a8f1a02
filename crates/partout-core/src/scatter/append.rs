//! One column of [`DestinationBuffers`](super::DestinationBuffers): appending a batch's rows
//! to one destination's buffers, and building an array back from them ([`take_column`]).
//!
//! ```text
//!  Source ──append_*(Rows)──► ColumnBuffer ──take_column──► ArrayRef (lent the buffers)
//!  (input column,             (values, data,                   │
//!   bits unpacked)             validity, pieces) ◄──reclaim────┘ (once the array is dropped)
//! ```
//!
//! The same kernels as the batch scatter write into the end of a destination's buffers instead
//! of into a new array, so a row is copied once on its way to its destination.
//!
//! | layout | buffers kept per destination |
//! |---|---|
//! | fixed width (primitive, temporal, decimal, interval, FixedSizeBinary) | values |
//! | Boolean | value bits |
//! | Utf8, Binary, and their Large forms | offsets, bytes |
//! | Utf8View, BinaryView | views, one data buffer (out-of-line strings copied into it) |
//! | Null | the row count |
//! | dictionary, nested, run-end encoded | the destination's rows of each batch, moved by the scatter kernels, concatenated by `take_column` |
//!
//! Validity is kept only once a null arrives; a destination that never received one gets no
//! null buffer.

use super::{Order, bits, bytes};
use crate::error::Result;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, NullArray, make_array, new_empty_array};
use arrow_buffer::{BooleanBuffer, Buffer, MutableBuffer, NullBuffer};
use arrow_data::ArrayDataBuilder;
use arrow_schema::DataType;
use std::ops::Range;
use std::sync::Arc;

/// How a column is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Null,
    Fixed(usize),
    Bits,
    Bytes32,
    Bytes64,
    Views,
    Pieces,
}

impl Kind {
    pub(super) fn of(data_type: &DataType) -> Kind {
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

    /// The width of the values that reach destinations as runs of bytes ([`append_run`]):
    /// fixed-width values and views.
    pub(super) fn run_width(self) -> Option<usize> {
        match self {
            Kind::Fixed(width) => Some(width),
            Kind::Views => Some(16),
            _ => None,
        }
    }
}

/// One destination's buffers for one column.
#[derive(Debug, Default)]
pub(super) struct ColumnBuffer {
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
    /// Buffers lent to the last array [`take_column`] built, taken back by
    /// [`reclaim`](Self::reclaim).
    lent: [Option<Buffer>; 3],
}

impl ColumnBuffer {
    /// Bytes buffered.
    pub(super) fn bytes(&self) -> usize {
        self.values.len() + self.data.len() + self.validity.len() + self.pieces_bytes
    }

    /// Bytes of capacity held.
    pub(super) fn capacity(&self) -> usize {
        self.values.capacity() + self.data.capacity() + self.validity.capacity() + self.pieces_bytes
    }

    /// Bytes of var-width values or out-of-line view data: what 32-bit offsets address.
    pub(super) fn data_len(&self) -> usize {
        self.data.len()
    }

    /// Takes back, emptied, the buffers lent to the last array [`take_column`] built, where
    /// that array is gone and no other array shares them. A buffer still shared (the batch
    /// was kept, as a pull-side writer's caller keeps it) is left to its holder; the same
    /// slot of `donor` (buffers of an earlier array of this column that nothing holds any
    /// more, see [`donor_buffers`]) takes its place, or else a new one of its size, as
    /// [`renew`](Self::renew) gives.
    pub(super) fn reclaim(&mut self, donor: [Option<Buffer>; 3]) {
        let [values, data, validity] = &mut self.lent;
        for ((lent, home), spare) in [
            (values, &mut self.values),
            (data, &mut self.data),
            (validity, &mut self.validity),
        ]
        .into_iter()
        .zip(donor)
        {
            let Some(lent) = lent.take() else {
                continue;
            };
            if home.capacity() != 0 {
                continue;
            }
            let last = lent.len();
            let reused = lent
                .into_mutable()
                .ok()
                .or_else(|| spare.and_then(|spare| spare.into_mutable().ok()));
            *home = match reused {
                Some(mut buffer) => {
                    buffer.clear();
                    buffer
                }
                None => MutableBuffer::with_capacity(next_capacity(last)),
            };
        }
    }

    /// Forgets lent buffers, giving itself new empty ones of their sizes in their place: the
    /// next rows, if they come as many, are appended without growing a buffer (each growth
    /// copies what the buffer holds).
    pub(super) fn renew(&mut self) {
        let [values, data, validity] = std::mem::take(&mut self.lent);
        for (lent, home) in [
            (values, &mut self.values),
            (data, &mut self.data),
            (validity, &mut self.validity),
        ] {
            if let Some(lent) = lent
                && home.capacity() == 0
            {
                *home = MutableBuffer::with_capacity(next_capacity(lent.len()));
            }
        }
    }

    /// Forgets lent buffers, giving itself new empty ones of their sizes, with an eighth more
    /// for var-width bytes (whose total varies from fill to fill) and a block for the kernels'
    /// block copies: a builder whose next fill takes as many rows appends without growing.
    pub(super) fn renew_exact(&mut self) {
        let [values, data, validity] = std::mem::take(&mut self.lent);
        for (lent, home, slack) in [
            (values, &mut self.values, 0),
            (data, &mut self.data, 8),
            (validity, &mut self.validity, 0),
        ] {
            if let Some(lent) = lent
                && home.capacity() == 0
            {
                let len = lent.len();
                let extra = len.checked_div(slack).unwrap_or(0);
                *home = MutableBuffer::with_capacity(len + extra + 64);
            }
        }
    }

    /// Reserves room for `values`, `data` and `validity` more bytes in its buffers, and a block
    /// past the data for the kernels' block copies.
    pub(super) fn reserve(&mut self, values: usize, data: usize, validity: usize) {
        self.values.reserve(values);
        if data > 0 {
            self.data.reserve(data + 64);
        }
        self.validity.reserve(validity);
    }

    /// Forgets lent buffers, and gives up its own if they hold nothing.
    pub(super) fn release(&mut self) {
        self.lent = Default::default();
        if self.bytes() == 0 {
            *self = ColumnBuffer::default();
        }
    }
}

/// The capacity of a new buffer for the next rows of a destination whose last rows took
/// `len` bytes: half as much again, as the next fill may be larger (flush targets are drawn
/// anew, within a jitter, after every flush) and a buffer that must grow copies what it
/// holds; and a little past that, as the kernels copy in whole blocks.
fn next_capacity(len: usize) -> usize {
    len + len / 2 + 64
}

/// Which rows of a batch go to a destination.
#[derive(Debug, Clone)]
pub(super) enum Rows<'a> {
    /// Rows by index, from a plan's order.
    Order(Order<'a>),
    /// A contiguous range (of an already partitioned batch), and the same rows as a piece of
    /// the identity order, for the kernels that only read by an order.
    Range(Range<usize>, Order<'a>),
}

impl<'a> Rows<'a> {
    fn len(&self) -> usize {
        match self {
            Rows::Order(order) => order.len(),
            Rows::Range(range, _) => range.len(),
        }
    }

    /// The rows as an order.
    pub(super) fn order(&self) -> Order<'a> {
        match self {
            Rows::Order(order) | Rows::Range(_, order) => *order,
        }
    }
}

/// What one input column offers every destination, prepared once per batch.
#[derive(Clone, Copy)]
pub(super) struct Source<'a> {
    pub(super) array: &'a dyn Array,
    /// The unpacked validity (0/1 byte per row), when the column has nulls.
    pub(super) nulls: Option<&'a [u8]>,
    /// The unpacked boolean values.
    pub(super) bits: Option<&'a [u8]>,
}

/// Appends `rows` of one source column to one destination's column, which holds `before`
/// rows, for every kind but those moved as runs ([`Kind::run_width`]) and as pieces
/// ([`push_piece`]). It cannot fail: the caller checked the room for the bytes.
pub(super) fn append_column(
    kind: Kind,
    source: &Source<'_>,
    rows: Rows<'_>,
    before: usize,
    column: &mut ColumnBuffer,
) {
    let order = rows.order();
    match kind {
        Kind::Null => {}
        Kind::Fixed(_) | Kind::Views => unreachable!("moved as runs by the caller"),
        Kind::Bits => {
            let unpacked = source.bits.expect("boolean values are unpacked");
            bits::append_gathered(unpacked, order, &mut column.values, before);
        }
        Kind::Bytes32 => append_bytes::<i32>(source.array, rows.clone(), column),
        Kind::Bytes64 => append_bytes::<i64>(source.array, rows.clone(), column),
        Kind::Pieces => unreachable!("moved by the caller, before the other kinds"),
    }
    append_validity(source, rows, before, column);
}

/// Adds the rows of a dictionary or nested column that a destination receives, moved by
/// [`scatter_array`](super::scatter_array) (so the piece owns exactly them: no slice of the whole batch is kept
/// alive; validity moves with it), to its column.
pub(super) fn push_piece(piece: ArrayRef, column: &mut ColumnBuffer) {
    column.pieces_bytes += piece_bytes(piece.as_ref());
    column.pieces.push(piece);
}

/// Appends a run of fixed-width values (`run`, already in destination order) to a
/// destination's column; for views, `buffers` are the source's data buffers, which
/// out-of-line values are copied from.
pub(super) fn append_run(run: &[u8], buffers: Option<&[Buffer]>, column: &mut ColumnBuffer) {
    match buffers {
        Some(buffers) => append_views(run, buffers, column),
        None => column.values.extend_from_slice(run),
    }
}

/// Appends the fixed-width values `values[order[j]]` (`width` bytes each) to a destination's
/// column, gathered straight into the end of its buffer.
pub(super) fn append_fixed(
    values: &[u8],
    width: usize,
    order: Order<'_>,
    column: &mut ColumnBuffer,
) {
    super::fixed::gather_fixed_into(values, width, order, &mut column.values);
}

/// Appends the validity of `rows` of `source` to a destination's column holding `before`
/// rows: gathered bits once the column has nulls, nothing while it has none.
pub(super) fn append_validity(
    source: &Source<'_>,
    rows: Rows<'_>,
    before: usize,
    column: &mut ColumnBuffer,
) {
    match (source.nulls, column.has_nulls) {
        (Some(unpacked), has) => {
            if !has {
                column.has_nulls = true;
                bits::append_ones(&mut column.validity, 0, before);
            }
            bits::append_gathered(unpacked, rows.order(), &mut column.validity, before);
        }
        (None, true) => bits::append_ones(&mut column.validity, before, rows.len()),
        (None, false) => {}
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
pub(super) fn var_offsets<O: arrow_array::OffsetSizeTrait>(array: &dyn Array) -> &[O] {
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
        Rows::Range(range, _) => {
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
            debug_assert!(len.is_multiple_of(width));
            debug_assert!(column.values.capacity() >= len + n * width);
            debug_assert_eq!(base.as_usize(), column.data.len());
            debug_assert!(
                O::from_usize(
                    base.as_usize() + (offsets[offsets.len() - 1] - offsets[0]).as_usize()
                )
                .is_some(),
                "the destination's offsets would overflow"
            );
            let dst = column
                .values
                .as_mut_ptr()
                .wrapping_add(len - width)
                .cast::<O>();
            debug_assert!(dst.is_aligned());
            // SAFETY: room for `n` offsets past `len` was reserved; the offsets pass writes
            // `n + 1` from the last one held (`len - width`, rewriting `base` unchanged). The
            // buffer is 64-byte aligned and `len` a multiple of `width`, so `dst` is aligned
            // for `O`. `check_room` ensured the sum stays inside `O`.
            let total = unsafe {
                let end = bytes::offsets_to(offsets, order, base, dst);
                column.values.set_len(len + n * width);
                (end - base).as_usize()
            };
            let held = column.data.len();
            column.data.reserve(total + bytes::SHORT);
            debug_assert!(column.data.capacity() >= held + total + bytes::SHORT);
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
    debug_assert!(column.values.capacity() >= views_len + n * 16);
    debug_assert!(column.data.capacity() >= data_len + long + VIEW_BLOCK);
    debug_assert!(views_len.is_multiple_of(16));
    // SAFETY: room for `n` views past `views_len` was reserved, so the pointer stays inside
    // the allocation; the buffer is 64-byte aligned and `views_len` a multiple of 16, so it is
    // aligned for `u128`.
    let out = unsafe { column.values.as_mut_ptr().add(views_len).cast::<u128>() };
    debug_assert!(out.is_aligned());
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
            debug_assert!(at - data_len + len <= long);
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
        debug_assert!(j < n);
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

/// `array`, a Utf8View or BinaryView array, with its out-of-line values copied in row order
/// into one data buffer holding just their bytes: a destination's run of rows then has its
/// values back to back. Other arrays are returned as they are.
pub(crate) fn compact_views(array: &ArrayRef) -> ArrayRef {
    if !matches!(array.data_type(), DataType::Utf8View | DataType::BinaryView) {
        return array.clone();
    }
    let (views, buffers) = super::view_parts(array.as_ref());
    let mut column = ColumnBuffer::default();
    append_views(
        arrow_buffer::ToByteSlice::to_byte_slice(views),
        buffers,
        &mut column,
    );
    let builder = ArrayDataBuilder::new(array.data_type().clone())
        .len(array.len())
        .add_buffer(column.values.into())
        .add_buffer(column.data.into())
        .nulls(array.nulls().cloned());
    // SAFETY: as `take_column`'s views: inline views are copied unchanged; every out-of-line
    // view keeps its length and prefix and points at buffer 0, at the offset its whole value
    // was copied to. The nulls are the array's own, for as many rows.
    unsafe { super::finish(builder) }
}

/// The buffers of `array`, an array [`take_column`] built for a column of `kind`, in the
/// slots [`ColumnBuffer::reclaim`] takes them by: values (views, offsets or bits), data
/// (var-width bytes or the one buffer of out-of-line view data) and validity. None for
/// dictionary and nested columns, whose rows are moved as pieces.
pub(super) fn donor_buffers(kind: Kind, array: ArrayRef) -> [Option<Buffer>; 3] {
    if matches!(kind, Kind::Null | Kind::Pieces) {
        return Default::default();
    }
    let data = array.to_data();
    drop(array);
    let buffers = data.buffers();
    let validity = data.nulls().map(|nulls| nulls.buffer().clone());
    match kind {
        Kind::Bytes32 | Kind::Bytes64 => {
            [buffers.first().cloned(), buffers.get(1).cloned(), validity]
        }
        // One buffer of out-of-line data, as the destination's own; more came from elsewhere.
        Kind::Views if buffers.len() == 2 => {
            [buffers.first().cloned(), buffers.get(1).cloned(), validity]
        }
        _ => [buffers.first().cloned(), None, validity],
    }
}

/// Builds a destination's column of `rows` rows from its buffers, lending them to the array
/// (see [`ColumnBuffer::reclaim`]).
///
/// # Errors
/// [`PartoutError::Arrow`](crate::PartoutError::Arrow) if the pieces of a dictionary or nested
/// column cannot be concatenated.
pub(super) fn take_column(
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

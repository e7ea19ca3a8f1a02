//! Scatter kernels: move every column of a batch into the order a [`ScatterPlan`] planned.
//!
//! ```text
//!            plan.order = [1, 4, 3, 0, 2]      (input row of each output slot)
//!  input  a b c d e  ──►  b e d a c  output, destination by destination
//! ```
//!
//! The counting sort itself (`order[cursor[id[i]]++] = i`) runs once per batch in the plan;
//! each column is then moved with loops that read `order` and the column in sequence and
//! carry no dependency from one row to the next. One entry point, [`scatter_column`],
//! dispatches on the data type once, into one kernel per physical layout:
//!
//! | layout | types | kernel |
//! |---|---|---|
//! | bits | Boolean values, every validity bitmap | `bits`: unpacked to bytes, gathered, packed 8 rows per multiply |
//! | fixed width | every primitive, temporal, interval and decimal type, FixedSizeBinary | `fixed`: one loop per byte width |
//! | variable width | Utf8, LargeUtf8, Binary, LargeBinary | `bytes`: offsets pass, then bytes pass |
//! | views | Utf8View, BinaryView | the 16-byte views as fixed width; data buffers shared |
//! | dictionary | any key type | the keys as fixed width; the dictionary shared |
//! | nested | Struct, List, LargeList, FixedSizeList, Map, ListView, LargeListView, sparse and dense Union | `nested`: children by a derived order |
//! | run-end encoded | RunEndEncoded with any run-end width | `runs`: runs kept whole, values by the run order |
//!
//! A column without nulls (no null buffer, or one with no null in it) comes out without a
//! null buffer. Sliced inputs (a non-zero offset) are read from their offset. Every Arrow
//! type is moved; what no kernel takes (none in arrow 59) is refused with
//! [`PartoutError::UnsupportedType`].

pub(crate) mod append;
pub mod batch;
mod bits;
mod buffers;
mod bytes;
mod fixed;
mod nested;
mod order;
mod runs;
mod shared;

use crate::error::{PartoutError, Result};
use crate::plan::ScatterPlan;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, NullArray, downcast_primitive_array, make_array};
use arrow_buffer::Buffer;
use arrow_buffer::NullBuffer;
use arrow_data::{ArrayData, ArrayDataBuilder};
use arrow_schema::{DataType, UnionMode};
use std::sync::Arc;

pub use buffers::{DestinationBuffers, MAX_MERGED};
pub(crate) use order::Order;
pub use shared::{GatheredBatch, OutputBuilder};

/// Reusable buffers for the orders that nested columns derive for their children.
///
/// Owned by the caller and passed to every [`scatter_column`] call; once it has served a batch
/// of a given shape it allocates nothing more for batches of that shape.
#[derive(Debug, Default)]
pub struct ScatterScratch {
    orders: Vec<Vec<u32>>,
    bits: Vec<u8>,
    lanes: Vec<u8>,
}

impl ScatterScratch {
    /// Empty scratch.
    pub fn new() -> Self {
        Self::default()
    }

    /// The total capacity of the buffers held, in `u32`s (for tests and metrics).
    pub fn capacity(&self) -> usize {
        self.orders.iter().map(Vec::capacity).sum::<usize>()
            + (self.bits.capacity() + self.lanes.capacity()).div_ceil(4)
    }

    fn take_order(&mut self) -> Vec<u32> {
        self.orders.pop().unwrap_or_default()
    }

    fn put_order(&mut self, mut order: Vec<u32>) {
        order.clear();
        self.orders.push(order);
    }
}

/// Moves `array` into the order of `plan`: row `plan.order()[j]` of the input becomes row `j`
/// of the output, so destination `p`'s rows are `plan.range(p)` of the result.
///
/// # Errors
/// [`PartoutError::InvalidArgument`] when the array's length is not the planned row count,
/// [`PartoutError::TooLarge`] when a list's, list view's, dense union's or run-end encoded
/// column's child has more than `u32::MAX` values, [`PartoutError::InvalidArgument`] for a
/// list view or dense union whose rows point past their children (a corrupt array).
///
/// ```
/// use arrow_array::{Array, Int32Array};
/// use partout_core::{ScatterPlan, ScatterScratch, scatter_column};
///
/// let column = Int32Array::from(vec![Some(10), None, Some(30), Some(40)]);
/// let mut plan = ScatterPlan::new();
/// plan.build(&[1, 0, 1, 0], 2).unwrap();
/// let out = scatter_column(&column, &plan, &mut ScatterScratch::new()).unwrap();
/// let want = Int32Array::from(vec![None, Some(40), Some(10), Some(30)]);
/// assert_eq!(out.as_ref(), &want as &dyn Array);
/// ```
pub fn scatter_column(
    array: &dyn Array,
    plan: &ScatterPlan,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    if array.len() != plan.num_rows() {
        return Err(PartoutError::InvalidArgument(format!(
            "a column of {} rows does not match a plan of {} rows",
            array.len(),
            plan.num_rows()
        )));
    }
    scatter_array(array, Order::of_plan(plan), scratch)
}

/// Moves every column of a batch by `plan`, like [`scatter_column`] on each, but with the
/// validity of all of them moved together (eight bitmaps per pass over the order, see
/// the bit kernels). Values still move one column at a time: measured, moving several fixed-width
/// columns in one pass over the order is slower once the order is random, because the
/// columns then compete for the L1 cache.
///
/// # Errors
/// As [`scatter_column`], for any of the columns.
///
/// ```
/// use arrow_array::{ArrayRef, Int64Array, StringArray};
/// use partout_core::{ScatterPlan, ScatterScratch, scatter_columns};
/// use std::sync::Arc;
///
/// let columns: Vec<ArrayRef> = vec![
///     Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])),
///     Arc::new(StringArray::from(vec![Some("a"), Some("b"), None])),
/// ];
/// let mut plan = ScatterPlan::new();
/// plan.build(&[1, 0, 1], 2).unwrap();
/// let out = scatter_columns(&columns, &plan, &mut ScatterScratch::new()).unwrap();
/// assert_eq!(out[0].as_ref(), &Int64Array::from(vec![None, Some(1), Some(3)]));
/// assert_eq!(out[1].as_ref(), &StringArray::from(vec![Some("b"), Some("a"), None]));
/// ```
pub fn scatter_columns(
    columns: &[ArrayRef],
    plan: &ScatterPlan,
    scratch: &mut ScatterScratch,
) -> Result<Vec<ArrayRef>> {
    check_lengths(columns, plan.num_rows(), "a plan of")?;
    scatter_columns_premoved(columns, plan, None, scratch)
}

/// [`scatter_columns`], except that the values of column `premoved.0` were already moved (to
/// `premoved.1`) while the plan was built; its nulls still move with the others'.
fn scatter_columns_premoved(
    columns: &[ArrayRef],
    plan: &ScatterPlan,
    premoved: Option<(usize, arrow_buffer::Buffer)>,
    scratch: &mut ScatterScratch,
) -> Result<Vec<ArrayRef>> {
    let order = Order::of_plan(plan);
    let mut premoved = premoved;
    let has_nulls = |i: usize| columns[i].nulls().is_some_and(|n| n.null_count() > 0);
    let with_nulls: Vec<&NullBuffer> = (0..columns.len())
        .filter(|&i| has_nulls(i))
        .filter_map(|i| columns[i].nulls())
        .collect();
    let mut moved_nulls =
        bits::scatter_nulls_many(&with_nulls, order, &mut scratch.bits, &mut scratch.lanes)
            .into_iter();
    (0..columns.len())
        .map(|i| {
            let nulls = if has_nulls(i) {
                moved_nulls.next()
            } else {
                None
            };
            match premoved.take_if(|(index, _)| *index == i) {
                Some((_, values)) => {
                    fixed_output(&columns[i].to_data(), order.len(), values, nulls)
                }
                None => scatter_values(columns[i].as_ref(), order, nulls, scratch),
            }
        })
        .collect()
}

/// Builds `plan` for `ids` and moves `columns` by it, moving the first fixed-width column
/// while the plan places its rows (one pass less over the order). A batch of one fixed-width
/// column without nulls never materialises the order at all: counting the ids and placing the
/// values is the whole kernel.
///
/// # Errors
/// As [`ScatterPlan::build_with_fanout`] and [`scatter_columns`].
pub(crate) fn plan_and_scatter(
    plan: &mut ScatterPlan,
    ids: &[u32],
    num_partitions: u32,
    fanout: u32,
    columns: &[ArrayRef],
    scratch: &mut ScatterScratch,
) -> Result<Vec<ArrayRef>> {
    check_lengths(columns, ids.len(), "partition ids for")?;
    let Some((index, width)) = columns.iter().enumerate().find_map(|(i, c)| {
        c.data_type()
            .primitive_width()
            .filter(|w| [1, 2, 4, 8, 16, 32].contains(w))
            .map(|w| (i, w))
    }) else {
        plan.build_with_fanout(ids, num_partitions, fanout)?;
        return scatter_columns(columns, plan, scratch);
    };
    let data = columns[index].to_data();
    let bytes = fixed_values(&data, width);
    let keep_order = columns.len() > 1 || columns[index].null_count() > 0;
    let moved = match width {
        1 => plan_moving::<u8>(plan, ids, num_partitions, fanout, bytes, keep_order),
        2 => plan_moving::<u16>(plan, ids, num_partitions, fanout, bytes, keep_order),
        4 => plan_moving::<u32>(plan, ids, num_partitions, fanout, bytes, keep_order),
        8 => plan_moving::<u64>(plan, ids, num_partitions, fanout, bytes, keep_order),
        16 => plan_moving::<[u64; 2]>(plan, ids, num_partitions, fanout, bytes, keep_order),
        _ => plan_moving::<[u64; 4]>(plan, ids, num_partitions, fanout, bytes, keep_order),
    }?;
    let Some(values) = moved else {
        plan.build_with_fanout(ids, num_partitions, fanout)?;
        return scatter_columns(columns, plan, scratch);
    };
    if !keep_order {
        return Ok(vec![fixed_output(&data, ids.len(), values, None)?]);
    }
    scatter_columns_premoved(columns, plan, Some((index, values)), scratch)
}

/// [`ScatterPlan::build_moving`] on `bytes` seen as `T`, or `None` (nothing built) when they
/// are not aligned for `T`.
fn plan_moving<T: fixed::Plain>(
    plan: &mut ScatterPlan,
    ids: &[u32],
    num_partitions: u32,
    fanout: u32,
    bytes: &[u8],
    keep_order: bool,
) -> Result<Option<arrow_buffer::Buffer>> {
    let Some(values) = fixed::typed::<T>(bytes) else {
        return Ok(None);
    };
    let (mut out, dst) = fixed::output::<T>(ids.len());
    debug_assert!(out.capacity() >= ids.len());
    debug_assert_eq!(out.as_ptr().cast::<T>(), dst.cast_const());
    // SAFETY: `dst` points at the start of `out`'s capacity of `ids.len()` values of `T`,
    // unused by anything else while the slice lives.
    let moved = unsafe {
        std::slice::from_raw_parts_mut(dst.cast::<std::mem::MaybeUninit<T>>(), ids.len())
    };
    plan.build_moving(ids, num_partitions, fanout, values, moved, keep_order)?;
    // SAFETY: `build_moving` succeeded, so it initialised all `ids.len()` values, as `T`,
    // which has `T::Storage`'s size and every bit pattern of which is a valid `T::Storage`.
    unsafe { out.set_len(ids.len()) };
    Ok(Some(arrow_buffer::Buffer::from_vec(out)))
}

/// An error unless every column has `rows` rows; `what` names what they must match.
fn check_lengths(columns: &[ArrayRef], rows: usize, what: &str) -> Result<()> {
    match columns.iter().find(|c| c.len() != rows) {
        Some(column) => Err(PartoutError::InvalidArgument(format!(
            "a column of {} rows does not match {what} {rows} rows",
            column.len()
        ))),
        None => Ok(()),
    }
}

/// Moves `array` and its nulls by `order`.
fn scatter_array(
    array: &dyn Array,
    order: Order<'_>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    let nulls = bits::scatter_nulls(array.nulls(), order, &mut scratch.bits);
    scatter_values(array, order, nulls, scratch)
}

/// Moves `array` by `order` and gives it `nulls`, its validity already moved. Dispatches on
/// the type once; every arm calls a monomorphic kernel.
fn scatter_values(
    array: &dyn Array,
    order: Order<'_>,
    nulls: Option<NullBuffer>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    debug_assert!(order.bound() <= array.len());
    let data_type = array.data_type();
    if let Some(width) = data_type.primitive_width() {
        return scatter_fixed_width(array, width, order, nulls);
    }
    match data_type {
        DataType::Null => Ok(Arc::new(NullArray::new(order.len()))),
        DataType::Boolean => {
            let array = array.as_boolean();
            Ok(Arc::new(BooleanArray::new(
                bits::scatter_boolean_values(array.values(), order, &mut scratch.bits),
                nulls,
            )))
        }
        DataType::FixedSizeBinary(width) => {
            scatter_fixed_width(array, *width as usize, order, nulls)
        }
        DataType::Utf8 | DataType::Binary => Ok(scatter_var_width::<i32>(array, order, nulls)),
        DataType::LargeUtf8 | DataType::LargeBinary => {
            Ok(scatter_var_width::<i64>(array, order, nulls))
        }
        DataType::Utf8View | DataType::BinaryView => Ok(scatter_views(array, order, nulls)),
        DataType::Dictionary(key_type, _) => {
            let width = key_type
                .primitive_width()
                .ok_or_else(|| unsupported(data_type))?;
            scatter_dictionary(array, width, order, nulls)
        }
        DataType::Struct(_) => nested::scatter_struct(array.as_struct(), order, nulls, scratch),
        DataType::List(_) => nested::scatter_list(array.as_list::<i32>(), order, nulls, scratch),
        DataType::LargeList(_) => {
            nested::scatter_list(array.as_list::<i64>(), order, nulls, scratch)
        }
        DataType::FixedSizeList(_, _) => {
            nested::scatter_fixed_size_list(array.as_fixed_size_list(), order, nulls, scratch)
        }
        DataType::Map(_, _) => nested::scatter_map(array.as_map(), order, nulls, scratch),
        DataType::Union(_, UnionMode::Sparse) => {
            debug_assert!(nulls.is_none(), "unions have no validity of their own");
            nested::scatter_sparse_union(array.as_union(), order, scratch)
        }
        DataType::Union(_, UnionMode::Dense) => {
            debug_assert!(nulls.is_none(), "unions have no validity of their own");
            nested::scatter_dense_union(array.as_union(), order, scratch)
        }
        DataType::ListView(_) => {
            nested::scatter_list_view(array.as_list_view::<i32>(), order, nulls, scratch)
        }
        DataType::LargeListView(_) => {
            nested::scatter_list_view(array.as_list_view::<i64>(), order, nulls, scratch)
        }
        DataType::RunEndEncoded(_, _) => {
            debug_assert!(nulls.is_none(), "run arrays have no validity of their own");
            runs::scatter_run_end_encoded(array, order, scratch)
        }
        _ => Err(unsupported(data_type)),
    }
}

/// An error unless a child of `len` values can be addressed by the kernels' `u32` orders;
/// `what` names the child.
fn check_child_len(len: usize, what: &str) -> Result<()> {
    match u32::try_from(len) {
        Ok(_) => Ok(()),
        Err(_) => Err(PartoutError::TooLarge(format!(
            "{what} of {len} values (at most u32::MAX)"
        ))),
    }
}

fn unsupported(data_type: &DataType) -> PartoutError {
    PartoutError::UnsupportedType {
        data_type: data_type.clone(),
        context: "scatter",
    }
}

/// The bytes of the logical values of a fixed-width layout's first buffer.
fn fixed_values(data: &ArrayData, width: usize) -> &[u8] {
    let start = data.offset() * width;
    &data.buffers()[0].as_slice()[start..start + data.len() * width]
}

/// The logical values of a fixed-width array, `len * width` bytes, read without building its
/// `ArrayData` (which would allocate).
pub(crate) fn fixed_bytes(array: &dyn Array, width: usize) -> &[u8] {
    let bytes = downcast_primitive_array!(
        array => array.values().inner().as_slice(),
        DataType::Utf8View => array.as_string_view().views().inner().as_slice(),
        DataType::BinaryView => array.as_binary_view().views().inner().as_slice(),
        DataType::FixedSizeBinary(_) => {
            let array = array.as_fixed_size_binary();
            &array.value_data()[..array.len() * width]
        }
        other => unreachable!("{other} is not fixed width"),
    );
    debug_assert_eq!(bytes.len(), array.len() * width);
    bytes
}

/// The views and data buffers of a Utf8View/BinaryView array, read without building its
/// `ArrayData`.
pub(crate) fn view_parts(array: &dyn Array) -> (&[u128], &[Buffer]) {
    match array.data_type() {
        DataType::Utf8View => {
            let a = array.as_string_view();
            (a.views(), a.data_buffers())
        }
        _ => {
            let a = array.as_binary_view();
            (a.views(), a.data_buffers())
        }
    }
}

/// # Safety
/// `builder` must describe a valid array of its data type.
unsafe fn finish(builder: ArrayDataBuilder) -> ArrayRef {
    // SAFETY: forwarded to the caller. In debug builds, check it.
    let data = unsafe { builder.build_unchecked() };
    #[cfg(debug_assertions)]
    data.validate_full()
        .expect("a scatter kernel built an invalid array");
    make_array(data)
}

fn scatter_fixed_width(
    array: &dyn Array,
    width: usize,
    order: Order<'_>,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef> {
    let data = array.to_data();
    let values = fixed::gather_fixed(fixed_values(&data, width), width, order);
    fixed_output(&data, order.len(), values, nulls)
}

/// A fixed-width column of `data`'s type and `len` rows from moved values and nulls.
fn fixed_output(
    data: &ArrayData,
    len: usize,
    values: arrow_buffer::Buffer,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef> {
    let builder = ArrayDataBuilder::new(data.data_type().clone())
        .len(len)
        .add_buffer(values)
        .nulls(nulls);
    // Checking a fixed-width layout is O(1): keep the safe constructor.
    Ok(make_array(builder.build()?))
}

fn scatter_var_width<O>(array: &dyn Array, order: Order<'_>, nulls: Option<NullBuffer>) -> ArrayRef
where
    O: arrow_buffer::ArrowNativeType + std::ops::AddAssign + std::ops::Sub<Output = O>,
{
    let data = array.to_data();
    let offsets = &data.buffers()[0].typed_data::<O>()[data.offset()..=data.offset() + data.len()];
    let (offsets, values) = bytes::gather_bytes(offsets, data.buffers()[1].as_slice(), order);
    let builder = ArrayDataBuilder::new(data.data_type().clone())
        .len(order.len())
        .add_buffer(offsets)
        .add_buffer(values)
        .nulls(nulls);
    // SAFETY: the output holds whole values of a valid input, each value's bytes copied
    // unchanged between monotone offsets starting at 0 that end at the values' length; UTF-8
    // stays UTF-8 because every value is copied whole. Re-validating would cost a pass over
    // every byte.
    unsafe { finish(builder) }
}

fn scatter_views(array: &dyn Array, order: Order<'_>, nulls: Option<NullBuffer>) -> ArrayRef {
    let data = array.to_data();
    let views = fixed::gather_fixed(fixed_values(&data, 16), 16, order);
    let builder = ArrayDataBuilder::new(data.data_type().clone())
        .len(order.len())
        .add_buffer(views)
        .add_buffers(data.buffers()[1..].iter().cloned())
        .nulls(nulls);
    // SAFETY: every output view is a view of the valid input, unchanged, and the data buffers
    // it points into are carried over with the same indices. Re-validating would read every
    // view and every out-of-line string.
    unsafe { finish(builder) }
}

fn scatter_dictionary(
    array: &dyn Array,
    key_width: usize,
    order: Order<'_>,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef> {
    let data = array.to_data();
    let keys = fixed::gather_fixed(fixed_values(&data, key_width), key_width, order);
    let builder = ArrayDataBuilder::new(data.data_type().clone())
        .len(order.len())
        .add_buffer(keys)
        .child_data(data.child_data().to_vec())
        .nulls(nulls);
    // SAFETY: the output keys are input keys, each of which (where valid) indexes the shared
    // dictionary, which is carried over unchanged. Re-validating would read every key.
    Ok(unsafe { finish(builder) })
}

#[cfg(test)]
pub(crate) mod tests;

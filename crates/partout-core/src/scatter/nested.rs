//! Moving nested columns: Struct, List, LargeList, FixedSizeList, Map and sparse Union.
//!
//! Children of a struct or sparse union line up row for row with their parent, so they move
//! by the parent's order. A list's child values move by a *derived* order: the child ranges of
//! the parent rows, concatenated in output order, while the output offsets are the running sum
//! of those ranges' lengths.
//!
//! ```text
//!  parent order [2, 0]     offsets [0, 2, 2, 5]     child order [2, 3, 4, 0, 1]
//! ```

use super::{Order, ScatterScratch, fixed, scatter_array};
use crate::error::{PartoutError, Result};
use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, GenericListArray, MapArray, OffsetSizeTrait, StructArray,
    UnionArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, FieldRef};
use std::sync::Arc;

pub(super) fn scatter_struct(
    array: &StructArray,
    order: Order<'_>,
    nulls: Option<NullBuffer>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    let columns = array
        .columns()
        .iter()
        .map(|column| scatter_array(column.as_ref(), order, scratch))
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(StructArray::try_new_with_length(
        array.fields().clone(),
        columns,
        nulls,
        order.len(),
    )?))
}

/// Output offsets and the child values' order for the parent rows of `order`.
fn derive_child_order<O: OffsetSizeTrait>(
    offsets: &[O],
    child_len: usize,
    order: Order<'_>,
    child_rows: &mut Vec<u32>,
) -> Result<OffsetBuffer<O>> {
    if u32::try_from(child_len).is_err() {
        return Err(PartoutError::TooLarge(format!(
            "a list child of {child_len} values (at most u32::MAX)"
        )));
    }
    let mut out_offsets = Vec::with_capacity(order.len() + 1);
    let mut total = O::usize_as(0);
    out_offsets.push(total);
    for &r in order.rows() {
        let (start, end) = (offsets[r as usize], offsets[r as usize + 1]);
        total += end - start;
        out_offsets.push(total);
        child_rows.extend(start.as_usize() as u32..end.as_usize() as u32);
    }
    // Monotone by construction: every step adds a non-negative length.
    Ok(OffsetBuffer::new(ScalarBuffer::from(out_offsets)))
}

/// Moves `values` by the child order of `order`, returning the output offsets and child.
fn scatter_list_parts<O: OffsetSizeTrait>(
    offsets: &[O],
    values: &dyn Array,
    order: Order<'_>,
    scratch: &mut ScatterScratch,
) -> Result<(OffsetBuffer<O>, ArrayRef)> {
    let mut child_rows = scratch.take_order();
    let moved =
        derive_child_order(offsets, values.len(), order, &mut child_rows).and_then(|offsets| {
            // SAFETY: every child row lies in `offsets[r]..offsets[r + 1]` of a valid list array,
            // hence below `offsets[len] <= values.len()`.
            let child_order = unsafe { Order::new_unchecked(&child_rows, values.len()) };
            Ok((offsets, scatter_array(values, child_order, scratch)?))
        });
    scratch.put_order(child_rows);
    moved
}

fn list_field(data_type: &DataType) -> FieldRef {
    match data_type {
        DataType::List(field)
        | DataType::LargeList(field)
        | DataType::FixedSizeList(field, _)
        | DataType::Map(field, _) => field.clone(),
        other => unreachable!("{other} is not a list type"),
    }
}

pub(super) fn scatter_list<O: OffsetSizeTrait>(
    array: &GenericListArray<O>,
    order: Order<'_>,
    nulls: Option<NullBuffer>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    let (offsets, values) = scatter_list_parts(
        array.value_offsets(),
        array.values().as_ref(),
        order,
        scratch,
    )?;
    Ok(Arc::new(GenericListArray::<O>::try_new(
        list_field(array.data_type()),
        offsets,
        values,
        nulls,
    )?))
}

pub(super) fn scatter_map(
    array: &MapArray,
    order: Order<'_>,
    nulls: Option<NullBuffer>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    let entries: &dyn Array = array.entries();
    let (offsets, entries) = scatter_list_parts(array.value_offsets(), entries, order, scratch)?;
    let ordered = matches!(array.data_type(), DataType::Map(_, true));
    Ok(Arc::new(MapArray::try_new(
        list_field(array.data_type()),
        offsets,
        entries.as_struct().clone(),
        nulls,
        ordered,
    )?))
}

pub(super) fn scatter_fixed_size_list(
    array: &FixedSizeListArray,
    order: Order<'_>,
    nulls: Option<NullBuffer>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    let size = array.value_length() as usize;
    let values = array.values();
    if u32::try_from(values.len()).is_err() {
        return Err(PartoutError::TooLarge(format!(
            "a fixed-size list child of {} values (at most u32::MAX)",
            values.len()
        )));
    }
    let mut child_rows = scratch.take_order();
    for &r in order.rows() {
        let start = r as usize * size;
        child_rows.extend(start as u32..(start + size) as u32);
    }
    // SAFETY: `r < array.len()`, so `r * size + k < array.len() * size == values.len()`.
    let child_order = unsafe { Order::new_unchecked(&child_rows, values.len()) };
    let moved = scatter_array(values.as_ref(), child_order, scratch);
    scratch.put_order(child_rows);
    Ok(Arc::new(FixedSizeListArray::try_new_with_length(
        list_field(array.data_type()),
        array.value_length(),
        moved?,
        nulls,
        order.len(),
    )?))
}

pub(super) fn scatter_sparse_union(
    array: &UnionArray,
    order: Order<'_>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    let DataType::Union(fields, _) = array.data_type() else {
        unreachable!("a UnionArray has a union type")
    };
    let type_ids = fixed::gather_values::<u8>(array.type_ids().inner().as_slice(), order);
    let children = fields
        .iter()
        .map(|(type_id, _)| scatter_array(array.child(type_id).as_ref(), order, scratch))
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(UnionArray::try_new(
        fields.clone(),
        ScalarBuffer::new(arrow_buffer::Buffer::from_vec(type_ids), 0, order.len()),
        None,
        children,
    )?))
}

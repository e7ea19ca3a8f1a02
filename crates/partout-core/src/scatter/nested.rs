//! Moving nested columns: Struct, List, LargeList, FixedSizeList, Map, ListView, LargeListView
//! and both kinds of Union.
//!
//! Children of a struct or sparse union line up row for row with their parent, so they move
//! by the parent's order. A list's child values move by a *derived* order: the child ranges of
//! the parent rows, concatenated in output order, while the output offsets are the running sum
//! of those ranges' lengths.
//!
//! ```text
//!  parent order [2, 0]     offsets [0, 2, 2, 5]     child order [2, 3, 4, 0, 1]
//! ```
//!
//! A list view's rows name their child ranges by offset and size; the output lays those ranges
//! out back to back in output order (shared or overlapping ranges are copied for each row that
//! names them), so its offsets are a running sum as a list's are. A dense union's rows each
//! point at one row of one child: each child moves by the rows pointed at in it, in output
//! order, and the output offsets count them.

use super::{Order, ScatterScratch, check_child_len, fixed, scatter_array};
use crate::error::{PartoutError, Result};
use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, GenericListArray, GenericListViewArray, MapArray,
    OffsetSizeTrait, StructArray, UnionArray,
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
    check_child_len(child_len, "a list child")?;
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
        | DataType::Map(field, _)
        | DataType::ListView(field)
        | DataType::LargeListView(field) => field.clone(),
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
    check_child_len(values.len(), "a fixed-size list child")?;
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

pub(super) fn scatter_list_view<O: OffsetSizeTrait>(
    array: &GenericListViewArray<O>,
    order: Order<'_>,
    nulls: Option<NullBuffer>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    let values = array.values();
    let child_len = values.len();
    check_child_len(child_len, "a list view child")?;
    let (offsets, sizes) = (array.offsets(), array.sizes());
    let mut out_offsets = Vec::with_capacity(order.len());
    let mut out_sizes = Vec::with_capacity(order.len());
    let mut child_rows = scratch.take_order();
    let mut total = O::usize_as(0);
    for &r in order.rows() {
        let (start, size) = (offsets[r as usize].as_usize(), sizes[r as usize]);
        let end = start + size.as_usize();
        // A valid list view never names values past its child; one compare keeps a corrupt
        // one from reaching the kernels' unchecked reads.
        if end > child_len {
            scratch.put_order(child_rows);
            return Err(PartoutError::InvalidArgument(format!(
                "a list view row names values {start}..{end} of a child of {child_len}"
            )));
        }
        out_offsets.push(total);
        out_sizes.push(size);
        total += size;
        child_rows.extend(start as u32..end as u32);
    }
    // SAFETY: every child row lies in `start..end` with `end <= child_len` (checked above).
    let child_order = unsafe { Order::new_unchecked(&child_rows, child_len) };
    let moved = scatter_array(values.as_ref(), child_order, scratch);
    scratch.put_order(child_rows);
    Ok(Arc::new(GenericListViewArray::<O>::try_new(
        list_field(array.data_type()),
        ScalarBuffer::from(out_offsets),
        ScalarBuffer::from(out_sizes),
        moved?,
        nulls,
    )?))
}

pub(super) fn scatter_dense_union(
    array: &UnionArray,
    order: Order<'_>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    let DataType::Union(fields, _) = array.data_type() else {
        unreachable!("a UnionArray has a union type")
    };
    let offsets = array.offsets().expect("a dense union has offsets");
    let type_ids = array.type_ids();
    // The child slot of each type id (ids are 0..=127).
    let mut slot = [usize::MAX; 128];
    let mut children = Vec::with_capacity(fields.len());
    for (i, (type_id, _)) in fields.iter().enumerate() {
        slot[type_id as u8 as usize & 127] = i;
        let child = array.child(type_id);
        check_child_len(child.len(), "a dense union child")?;
        children.push(child);
    }
    let mut child_rows: Vec<Vec<u32>> = (0..fields.len()).map(|_| scratch.take_order()).collect();
    let mut out_ids = Vec::with_capacity(order.len());
    let mut out_offsets = Vec::with_capacity(order.len());
    let mut bad = None;
    for &r in order.rows() {
        let type_id = type_ids[r as usize];
        let offset = offsets[r as usize];
        let c = slot[type_id as u8 as usize & 127];
        // A valid union names only its own type ids and offsets inside their children; the
        // checks keep a corrupt one from reaching the kernels' unchecked reads.
        match children.get(c) {
            Some(child) if (offset as u32 as usize) < child.len() && offset >= 0 => {
                out_offsets.push(child_rows[c].len() as i32);
                child_rows[c].push(offset as u32);
                out_ids.push(type_id);
            }
            _ => {
                bad = Some((r, type_id, offset));
                break;
            }
        }
    }
    let moved = match bad {
        Some((r, type_id, offset)) => Err(PartoutError::InvalidArgument(format!(
            "dense union row {r} (type id {type_id}, offset {offset}) names no value of its \
             children"
        ))),
        None => children
            .iter()
            .zip(&child_rows)
            .map(|(child, rows)| {
                // SAFETY: every row pushed for this child was checked to be below its length.
                let child_order = unsafe { Order::new_unchecked(rows, child.len()) };
                scatter_array(child.as_ref(), child_order, scratch)
            })
            .collect::<Result<Vec<_>>>(),
    };
    for rows in child_rows {
        scratch.put_order(rows);
    }
    Ok(Arc::new(UnionArray::try_new(
        fields.clone(),
        ScalarBuffer::from(out_ids),
        Some(ScalarBuffer::from(out_offsets)),
        moved?,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ScatterPlan;
    use arrow_array::{Int32Array, ListViewArray, make_array};
    use arrow_data::ArrayDataBuilder;
    use arrow_schema::{Field, UnionFields, UnionMode};

    fn plan_of(rows: usize) -> ScatterPlan {
        let mut plan = ScatterPlan::new();
        let ids: Vec<u32> = (0..rows as u32).map(|i| i % 2).collect();
        plan.build(&ids, 2).unwrap();
        plan
    }

    /// Arrays that break their own layout (as hostile bytes decoded without validation could)
    /// are errors naming the row, never reads past a child: a dense union offset one past its
    /// child, a negative one, a type id not among the fields, a list view range past its child.
    #[test]
    fn rows_pointing_past_their_children_are_errors() {
        let fields =
            UnionFields::try_new(vec![0], vec![Field::new("i", DataType::Int32, true)]).unwrap();
        let child = Int32Array::from(vec![1, 2, 3]);
        for (type_ids, offsets) in [
            (vec![0i8, 0, 0], vec![0i32, 1, 3]),
            (vec![0, 0, 0], vec![0, -1, 2]),
            (vec![0, 4, 0], vec![0, 1, 2]),
        ] {
            let builder = ArrayDataBuilder::new(DataType::Union(fields.clone(), UnionMode::Dense))
                .len(3)
                .add_buffer(arrow_buffer::Buffer::from_vec(type_ids))
                .add_buffer(arrow_buffer::Buffer::from_vec(offsets))
                .child_data(vec![child.to_data()]);
            // SAFETY: none: the array is invalid on purpose, and only the kernel, which checks
            // every row, reads it.
            let corrupt = make_array(unsafe { builder.build_unchecked() });
            let plan = plan_of(3);
            let err =
                super::super::scatter_column(corrupt.as_ref(), &plan, &mut ScatterScratch::new())
                    .unwrap_err();
            assert!(err.to_string().contains("names no value"), "{err}");
        }
        let item = Arc::new(Field::new("item", DataType::Int32, true));
        let builder = ArrayDataBuilder::new(DataType::ListView(item))
            .len(2)
            .add_buffer(arrow_buffer::Buffer::from_vec(vec![0i32, 2]))
            .add_buffer(arrow_buffer::Buffer::from_vec(vec![1i32, 2]))
            .child_data(vec![child.to_data()]);
        // SAFETY: as above: invalid on purpose, read only by the checking kernel.
        let corrupt = make_array(unsafe { builder.build_unchecked() });
        let err =
            super::super::scatter_column(corrupt.as_ref(), &plan_of(2), &mut ScatterScratch::new())
                .unwrap_err();
        assert!(
            err.to_string().contains("values 2..4 of a child of 3"),
            "{err}"
        );
        // The same list view, valid, moves.
        let valid = ListViewArray::try_new(
            Arc::new(Field::new("item", DataType::Int32, true)),
            vec![0, 1].into(),
            vec![1, 2].into(),
            Arc::new(child),
            None,
        )
        .unwrap();
        let moved =
            super::super::scatter_column(&valid, &plan_of(2), &mut ScatterScratch::new()).unwrap();
        assert_eq!(moved.as_ref(), &valid as &dyn Array);
    }
}

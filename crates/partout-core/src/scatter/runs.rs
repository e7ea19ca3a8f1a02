//! Moving run-end encoded columns run by run.
//!
//! Each output row reads one run of the input (its *physical* index). Output rows that read
//! the same run one after another stay one run: rows of a run that go to the same destination
//! leave it together, so a destination's rows keep their runs whole. The run values move by
//! the order of the runs the output reads, through the kernels of their own type.
//!
//! ```text
//!  run ends [2, 5, 6]  values [a, b, c]    logical rows  a a b b b c
//!  order [0, 1, 3, 5, 2, 4]   physical [0, 0, 1, 2, 1, 1]
//!  output run ends [2, 3, 4, 6]  values by the run order [0, 1, 2, 1]  ->  a a b c b b
//! ```
//!
//! Expanding instead (one run per row) would cost a value per row; keeping runs costs one
//! comparison per row and is never larger.

use super::{Order, ScatterScratch, check_child_len, scatter_array};
use crate::error::Result;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int64Type, RunEndIndexType};
use arrow_array::{Array, ArrayRef, RunArray, make_array};
use arrow_buffer::{ArrowNativeType, Buffer};
use arrow_data::ArrayDataBuilder;
use arrow_schema::DataType;

/// Moves a run-end encoded `array` by `order`.
pub(super) fn scatter_run_end_encoded(
    array: &dyn Array,
    order: Order<'_>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    match array.data_type() {
        DataType::RunEndEncoded(run_ends, _) => match run_ends.data_type() {
            DataType::Int16 => scatter_runs(array.as_run::<Int16Type>(), order, scratch),
            DataType::Int32 => scatter_runs(array.as_run::<Int32Type>(), order, scratch),
            DataType::Int64 => scatter_runs(array.as_run::<Int64Type>(), order, scratch),
            other => unreachable!("{other} run ends in a valid run array"),
        },
        other => unreachable!("{other} is not run-end encoded"),
    }
}

fn scatter_runs<R: RunEndIndexType>(
    array: &RunArray<R>,
    order: Order<'_>,
    scratch: &mut ScatterScratch,
) -> Result<ArrayRef> {
    let values = array.values();
    check_child_len(values.len(), "run-end encoded values")?;
    let mut physical = scratch.take_order();
    let mut runs = scratch.take_order();
    physical_indices(array, &mut physical);
    let mut ends = Vec::new();
    let mut last = None;
    for (j, &r) in order.rows().iter().enumerate() {
        let run = physical[r as usize];
        if last != Some(run) {
            if j > 0 {
                ends.push(R::Native::usize_as(j));
            }
            runs.push(run);
            last = Some(run);
        }
    }
    if !order.rows().is_empty() {
        ends.push(R::Native::usize_as(order.len()));
    }
    debug_assert!(runs.iter().all(|&run| (run as usize) < values.len()));
    // SAFETY: every entry of `physical` is a run index below the run array's physical length
    // (`physical_indices`), which a valid run array's values reach; `runs` holds entries of it.
    let run_order = unsafe { Order::new_unchecked(&runs, values.len()) };
    let moved = scatter_array(values.as_ref(), run_order, scratch);
    scratch.put_order(physical);
    scratch.put_order(runs);
    let run_ends = ArrayDataBuilder::new(R::DATA_TYPE)
        .len(ends.len())
        .add_buffer(Buffer::from_vec(ends));
    let builder = ArrayDataBuilder::new(array.data_type().clone())
        .len(order.len())
        .add_child_data(run_ends.build()?)
        .add_child_data(moved?.to_data());
    // The checks are O(runs): the run ends strictly increase from above 0 to the length, one
    // value per run. Keep them.
    Ok(make_array(builder.build()?))
}

/// The run index of each logical row of `array` (from its offset, `array.len()` of them).
fn physical_indices<R: RunEndIndexType>(array: &RunArray<R>, out: &mut Vec<u32>) {
    let len = array.len();
    if len == 0 {
        return;
    }
    let run_ends = array.run_ends();
    let offset = run_ends.offset();
    let ends = run_ends.values();
    let (first, last) = (
        run_ends.get_start_physical_index(),
        run_ends.get_end_physical_index(),
    );
    out.reserve(len);
    for (run, end) in ends.iter().enumerate().take(last + 1).skip(first) {
        let end = (end.as_usize() - offset).min(len);
        out.resize(end, run as u32);
    }
    debug_assert_eq!(out.len(), len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ScatterPlan;
    use arrow_array::{Int16Array, Int32Array, StringArray};
    use std::sync::Arc;

    fn runs(ends: &[i16], values: &[Option<&str>]) -> ArrayRef {
        Arc::new(
            RunArray::try_new(
                &Int16Array::from(ends.to_vec()),
                &StringArray::from(values.to_vec()),
            )
            .unwrap(),
        )
    }

    /// Rows reading one run one after another stay one run, across a destination boundary
    /// too; sliced inputs are read from their offset; an empty batch.
    #[test]
    fn rows_of_one_run_stay_one_run() {
        let array = runs(&[2, 5, 6], &[Some("a"), None, Some("c")]);
        let mut plan = ScatterPlan::new();
        plan.build(&[0, 0, 1, 0, 1, 1], 2).unwrap();
        let out = scatter_run_end_encoded(
            array.as_ref(),
            Order::of_plan(&plan),
            &mut ScatterScratch::new(),
        )
        .unwrap();
        let out = out.as_run::<Int16Type>();
        // Destination 0 gets a a N, destination 1 N N c: the null run is the last of the
        // first and the first of the second, so it stays one run across the boundary.
        assert_eq!(out.run_ends().values(), &[2, 5, 6]);
        assert_eq!(
            out.values().as_ref(),
            &StringArray::from(vec![Some("a"), None, Some("c")]) as &dyn Array
        );
        let sliced = array.slice(3, 3);
        let mut plan = ScatterPlan::new();
        plan.build(&[1, 0, 1], 2).unwrap();
        let out = scatter_run_end_encoded(
            sliced.as_ref(),
            Order::of_plan(&plan),
            &mut ScatterScratch::new(),
        )
        .unwrap();
        let indices = arrow_array::UInt32Array::from(plan.order().to_vec());
        let want = arrow_select::take::take(sliced.as_ref(), &indices, None).unwrap();
        assert_eq!(out.as_ref(), want.as_ref());
        assert_eq!(out.as_run::<Int16Type>().run_ends().values(), &[2, 3]);
        let mut empty = ScatterPlan::new();
        empty.build(&[], 2).unwrap();
        let none = scatter_run_end_encoded(
            array.slice(6, 0).as_ref(),
            Order::of_plan(&empty),
            &mut ScatterScratch::new(),
        )
        .unwrap();
        assert_eq!(none.len(), 0);
        none.to_data().validate_full().unwrap();
    }

    #[test]
    fn the_run_end_width_is_kept() {
        let array: ArrayRef = Arc::new(
            RunArray::try_new(
                &arrow_array::Int64Array::from(vec![3, 4]),
                &Int32Array::from(vec![7, 8]),
            )
            .unwrap(),
        );
        let mut plan = ScatterPlan::new();
        plan.build(&[1, 0, 1, 0], 2).unwrap();
        let out = scatter_run_end_encoded(
            array.as_ref(),
            Order::of_plan(&plan),
            &mut ScatterScratch::new(),
        )
        .unwrap();
        assert_eq!(out.data_type(), array.data_type());
        assert_eq!(out.as_run::<Int64Type>().run_ends().values(), &[1, 2, 4]);
    }
}

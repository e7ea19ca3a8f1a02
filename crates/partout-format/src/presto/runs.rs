//! Run-end encoded columns, carried by the blocks Presto has for repetition:
//!
//! ```text
//!  one run in the page        RLE of the run's value
//!  several runs               DICTIONARY of the runs' values, each row's id its run
//! ```
//!
//! Decoded as a run-end encoded type, an RLE block is one run, a DICTIONARY block one run per
//! stretch of equal ids (so what partout writes comes back with the same runs), and any other
//! block one run per row.

use super::block::{Block, Decode, Kind, mismatch};
use super::budget::{Budget, row_costs};
use super::corrupt;
use crate::Result;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int64Type, RunEndIndexType};
use arrow_array::{Array, ArrayRef, RunArray, UInt32Array, make_array};
use arrow_buffer::{ArrowNativeType, Buffer};
use arrow_data::ArrayDataBuilder;
use arrow_schema::DataType;

/// A run-end encoded `array`'s runs in the column: the values of its runs (sliced to them),
/// and each row's run among them.
pub(super) fn runs_of(array: &dyn Array) -> (ArrayRef, Vec<u32>) {
    fn of<R: RunEndIndexType>(run: &RunArray<R>) -> (ArrayRef, Vec<u32>) {
        if run.is_empty() {
            return (run.values().slice(0, 0), Vec::new());
        }
        let run_ends = run.run_ends();
        let (first, last) = (
            run_ends.get_start_physical_index(),
            run_ends.get_end_physical_index(),
        );
        let offset = run_ends.offset();
        let mut ids = Vec::with_capacity(run.len());
        for (i, end) in run_ends.values()[first..=last].iter().enumerate() {
            let end = (end.as_usize() - offset).min(run.len());
            ids.resize(end, i as u32);
        }
        (run.values().slice(first, last + 1 - first), ids)
    }
    match array.data_type() {
        DataType::RunEndEncoded(run_ends, _) => match run_ends.data_type() {
            DataType::Int16 => of(array.as_run::<Int16Type>()),
            DataType::Int32 => of(array.as_run::<Int32Type>()),
            _ => of(array.as_run::<Int64Type>()),
        },
        other => unreachable!("{other} is not run-end encoded"),
    }
}

/// The block as a run-end encoded array of `data_type`.
pub(super) fn to_array(
    block: Block<'_>,
    data_type: &DataType,
    budget: &mut Budget,
    decode: Decode,
) -> Result<ArrayRef> {
    let DataType::RunEndEncoded(run_end_field, values_field) = data_type else {
        unreachable!("called for run-end encoded types only")
    };
    let value_type = values_field.data_type();
    let Block { at, rows, kind, .. } = block;
    let (ends, values): (Vec<usize>, ArrayRef) = match kind {
        Kind::Rle(rle) => {
            let value = decode(*rle.value, value_type, budget)?;
            let runs = usize::from(rows > 0);
            (vec![rows; runs], value.slice(0, runs))
        }
        Kind::Dictionary(block) => {
            let ids: Vec<u32> = block.ids().collect();
            let entries = decode(*block.dictionary, value_type, budget)?;
            let mut ends = Vec::new();
            let mut run_ids = Vec::new();
            for (row, &id) in ids.iter().enumerate() {
                if run_ids.last() != Some(&id) {
                    if row > 0 {
                        ends.push(row);
                    }
                    run_ids.push(id);
                }
            }
            if rows > 0 {
                ends.push(rows);
            }
            let costs = row_costs(entries.as_ref());
            let bytes = run_ids.iter().fold(0usize, |sum, &id| {
                sum.saturating_add(costs[id as usize] + 4)
            });
            budget.spend(bytes, || {
                format!("the DICTIONARY block at byte {at} ({} runs)", run_ids.len())
            })?;
            let run_ids = UInt32Array::from(run_ids);
            let values = arrow_select::take::take(entries.as_ref(), &run_ids, None)?;
            (ends, values)
        }
        kind => {
            let values = decode(
                Block {
                    at,
                    rows,
                    kind,
                    bytes: 0,
                },
                value_type,
                budget,
            )?;
            ((1..=rows).collect(), values)
        }
    };
    let max = match run_end_field.data_type() {
        DataType::Int16 => i16::MAX as usize,
        DataType::Int32 => i32::MAX as usize,
        DataType::Int64 => i64::MAX as usize,
        _ => return Err(mismatch("run-end", data_type, at)),
    };
    if rows > max {
        return Err(corrupt(format!(
            "the block at byte {at} has {rows} rows, past what {data_type} can hold"
        )));
    }
    let run_ends = match run_end_field.data_type() {
        DataType::Int16 => ends_buffer(&ends, |e| e as i16),
        DataType::Int32 => ends_buffer(&ends, |e| e as i32),
        _ => ends_buffer(&ends, |e| e as i64),
    };
    let run_ends = ArrayDataBuilder::new(run_end_field.data_type().clone())
        .len(ends.len())
        .add_buffer(run_ends)
        .build()?;
    let array = ArrayDataBuilder::new(data_type.clone())
        .len(rows)
        .add_child_data(run_ends)
        .add_child_data(values.to_data())
        .build()?;
    Ok(make_array(array))
}

fn ends_buffer<T: ArrowNativeType>(ends: &[usize], to: impl Fn(usize) -> T) -> Buffer {
    Buffer::from_vec(ends.iter().map(|&e| to(e)).collect::<Vec<T>>())
}

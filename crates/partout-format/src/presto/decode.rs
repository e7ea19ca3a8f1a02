//! Presto pages to Arrow record batches.
//!
//! ```text
//!  Page::open (header, checksum, LZ4) ─► Page::blocks (the shared walk, nesting bounded by the
//!  schema) ─► array (per encoding, copies paid from the Budget) ─► RecordBatch
//! ```
//!
//! Every length, count, offset and id read is checked against the bytes that remain and
//! against what it indexes: malformed input is a [`FormatError::Corrupt`](crate::FormatError::Corrupt) naming what and
//! where, never a panic, a stack overflow or an allocation the input does not pay for.

use super::block::{Block, Kind, Nesting};
use super::budget::Budget;
use super::page::Page;
use super::{array, corrupt, dictionary, fixed, map, rle, row, variable};
use crate::Result;
use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Schema, SchemaRef};
use std::sync::Arc;

/// Decodes the page at the start of `bytes` into a batch of `schema`; returns it and the bytes
/// the page took.
///
/// Blocks may nest as deep as the schema's types, with an RLE and a DICTIONARY block around
/// each level.
///
/// # Errors
/// [`FormatError::Corrupt`](crate::FormatError::Corrupt) naming what is wrong and where: a truncated page, impossible sizes
/// or counts, a checksum mismatch, an unknown encoding, bad offsets or ids, blocks nested
/// deeper than the schema allows, a column count or an encoding that does not fit `schema`.
/// [`FormatError::TooLarge`](crate::FormatError::TooLarge) when RLE, DICTIONARY or ROW blocks would repeat more bytes than
/// the page's size allows (see [`decode_pages`]).
pub fn decode_page(bytes: &[u8], schema: &Schema) -> Result<(RecordBatch, usize)> {
    decode_at(bytes, 0, schema, &mut Budget::new())
}

/// Decodes every page of `bytes` (pages back to back).
///
/// Arrow has no run-length or dictionary form of the plain types a schema names, so RLE and
/// DICTIONARY blocks (and ROW blocks with nulls) are copied out row by row. What the whole call
/// copies that way is limited to 256 MiB plus 64 bytes per byte of input: real pages stay far
/// below it, while a crafted one could otherwise describe terabytes in a few bytes.
///
/// # Errors
/// As [`decode_page`], for any page.
pub fn decode_pages(bytes: &[u8], schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let mut at = 0;
    let mut batches = Vec::new();
    let mut budget = Budget::new();
    while at < bytes.len() {
        let (batch, used) = decode_at(bytes, at, schema, &mut budget)?;
        batches.push(batch);
        at += used;
    }
    Ok(batches)
}

fn decode_at(
    bytes: &[u8],
    at: usize,
    schema: &Schema,
    budget: &mut Budget,
) -> Result<(RecordBatch, usize)> {
    let page = Page::open(bytes, at)?;
    budget.earn(page.size);
    let fields = schema.fields();
    let blocks = page.blocks(Some(fields.len()), |i| Nesting::of_column(i, &fields[i]))?;
    let mut arrays = Vec::with_capacity(fields.len());
    for (i, (block, field)) in blocks.into_iter().zip(fields.iter()).enumerate() {
        let array = self::array(block, field.data_type(), budget)?;
        if !field.is_nullable() && array.null_count() > 0 {
            return Err(corrupt(format!(
                "column {i} ({}) of the page at byte {at} has nulls but is not nullable",
                field.name()
            )));
        }
        arrays.push(array);
    }
    let batch = RecordBatch::try_new_with_options(
        Arc::new(schema.clone()),
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(page.rows)),
    )?;
    Ok((batch, page.len()))
}

/// A block, read by the walk, as an array of `data_type` (the [`Decode`](super::block::Decode)
/// each encoding is given for the blocks nested in its own).
pub(super) fn array(
    block: Block<'_>,
    data_type: &DataType,
    budget: &mut Budget,
) -> Result<ArrayRef> {
    if let DataType::RunEndEncoded(..) = data_type {
        return super::runs::to_array(block, data_type, budget, array);
    }
    let Block { at, rows, kind, .. } = block;
    match kind {
        Kind::Fixed(b) => fixed::to_array(b, rows, at, data_type),
        Kind::Variable(b) => variable::to_array(b, at, data_type),
        Kind::Rle(b) => rle::to_array(b, rows, at, data_type, budget, array),
        Kind::Dictionary(b) => dictionary::to_array(b, rows, at, data_type, budget, array),
        Kind::Array(b) => array::to_array(b, at, data_type, budget, array),
        Kind::Map(b) => map::to_array(b, at, data_type, budget, array),
        Kind::Row(b) => row::to_array(b, rows, at, data_type, budget, array),
    }
}

//! Arrow record batches to Presto pages.

use super::{CHECKSUMMED, COMPRESSED, HEADER_SIZE, MIN_COMPRESSION_RATIO, PageOptions, checksum};
use crate::{FormatError, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, GenericListArray, GenericListViewArray, OffsetSizeTrait,
    RecordBatch,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, TimeUnit};

/// Appends `batch` to `out` as one Presto page.
///
/// # Errors
/// [`FormatError::InvalidArgument`] for a column type Presto cannot carry (unsigned integers,
/// Float16, times of day, intervals, durations, unions, ...), or more than `i32::MAX` rows,
/// bytes or values.
///
/// ```
/// use arrow_array::{Int64Array, RecordBatch, StringArray};
/// use partout_format::presto::{PageOptions, decode_page, encode_page};
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([
///     ("k", Arc::new(Int64Array::from(vec![1, -2, 3])) as _),
///     ("s", Arc::new(StringArray::from(vec!["a", "bc", ""])) as _),
/// ])
/// .unwrap();
/// let mut page = Vec::new();
/// encode_page(&batch, PageOptions::default(), &mut page).unwrap();
/// let (decoded, used) = decode_page(&page, &batch.schema()).unwrap();
/// assert_eq!(used, page.len());
/// assert_eq!(decoded, batch);
/// ```
pub fn encode_page(batch: &RecordBatch, options: PageOptions, out: &mut Vec<u8>) -> Result<()> {
    let rows = to_i32(batch.num_rows(), "rows in a page")?;
    let start = out.len();
    out.resize(start + HEADER_SIZE, 0);
    let body_start = out.len();
    put_i32(out, to_i32(batch.num_columns(), "columns in a page")?);
    for column in batch.columns() {
        write_block(column.as_ref(), out)?;
    }
    let uncompressed = to_i32(out.len() - body_start, "bytes in a page body")?;
    let mut markers = 0u8;
    if options.lz4 {
        let compressed = lz4_flex::block::compress(&out[body_start..]);
        if (compressed.len() as f64) <= f64::from(uncompressed) * MIN_COMPRESSION_RATIO {
            out.truncate(body_start);
            out.extend_from_slice(&compressed);
            markers |= COMPRESSED;
        }
    }
    let size = to_i32(out.len() - body_start, "bytes in a page body")?;
    let crc = if options.checksum {
        markers |= CHECKSUMMED;
        checksum(&out[body_start..], markers, rows, uncompressed)
    } else {
        0
    };
    let header = &mut out[start..body_start];
    header[0..4].copy_from_slice(&rows.to_le_bytes());
    header[4] = markers;
    header[5..9].copy_from_slice(&uncompressed.to_le_bytes());
    header[9..13].copy_from_slice(&size.to_le_bytes());
    header[13..21].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

fn to_i32(n: usize, what: &str) -> Result<i32> {
    i32::try_from(n).map_err(|_| {
        FormatError::InvalidArgument(format!(
            "{n} {what}: a Presto page holds at most {}",
            i32::MAX
        ))
    })
}

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_name(out: &mut Vec<u8>, name: &str) {
    put_i32(out, name.len() as i32);
    out.extend_from_slice(name.as_bytes());
}

/// The null section: a flag, then (if set) one bit per row, most significant first, 1 = null.
fn put_nulls(out: &mut Vec<u8>, nulls: Option<&NullBuffer>, len: usize) {
    let Some(nulls) = nulls.filter(|n| n.null_count() > 0) else {
        out.push(0);
        return;
    };
    out.push(1);
    for chunk in 0..len.div_ceil(8) {
        let mut byte = 0u8;
        for bit in 0..8 {
            let row = chunk * 8 + bit;
            if row < len && nulls.is_null(row) {
                byte |= 0x80 >> bit;
            }
        }
        out.push(byte);
    }
}

/// An all-null column of a fixed-width encoding, as Presto's block builders make it: RLE of a
/// one-row null block.
fn put_null_rle(out: &mut Vec<u8>, width: usize, len: usize) {
    put_name(out, "RLE");
    put_i32(out, len as i32);
    put_name(out, super::FIXED[width.trailing_zeros() as usize]);
    put_i32(out, 1);
    out.push(1);
    out.push(0x80);
}

/// A fixed-width block: the values of the non-null rows, each as `width` little-endian bytes
/// from `value(row)`.
fn put_fixed<const W: usize>(
    out: &mut Vec<u8>,
    array: &dyn Array,
    value: impl Fn(usize) -> [u8; W],
) {
    let len = array.len();
    let nulls = array.logical_nulls();
    // Presto's fixed-width block builders turn a block without a valid row (an empty one
    // too) into RLE of a null.
    if len == nulls.as_ref().map_or(0, |n| n.null_count()) {
        return put_null_rle(out, W, len);
    }
    put_name(out, super::FIXED[W.trailing_zeros() as usize]);
    put_i32(out, len as i32);
    put_nulls(out, nulls.as_ref(), len);
    let valid = len - nulls.as_ref().map_or(0, |n| n.null_count());
    let start = out.len();
    out.resize(start + valid * W, 0);
    let values = &mut out[start..];
    match &nulls {
        None => {
            for (row, slot) in values.chunks_exact_mut(W).enumerate() {
                slot.copy_from_slice(&value(row));
            }
        }
        Some(nulls) => {
            let mut slots = values.chunks_exact_mut(W);
            for row in nulls.valid_indices() {
                slots
                    .next()
                    .expect("a slot per valid row")
                    .copy_from_slice(&value(row));
            }
        }
    }
}

fn primitive<T: ArrowPrimitiveType>(array: &dyn Array) -> &[T::Native] {
    array.as_primitive::<T>().values()
}

/// Milliseconds since the epoch, as Presto's TIMESTAMP holds them (floor division).
fn millis(array: &dyn Array, unit: TimeUnit) -> impl Fn(usize) -> [u8; 8] + '_ {
    let values: &[i64] = match unit {
        TimeUnit::Second => primitive::<TimestampSecondType>(array),
        TimeUnit::Millisecond => primitive::<TimestampMillisecondType>(array),
        TimeUnit::Microsecond => primitive::<TimestampMicrosecondType>(array),
        TimeUnit::Nanosecond => primitive::<TimestampNanosecondType>(array),
    };
    move |row| {
        let v = values[row];
        let ms = match unit {
            TimeUnit::Second => v.saturating_mul(1000),
            TimeUnit::Millisecond => v,
            TimeUnit::Microsecond => v.div_euclid(1000),
            TimeUnit::Nanosecond => v.div_euclid(1_000_000),
        };
        ms.to_le_bytes()
    }
}

/// A long decimal as Presto's INT128 holds it: the magnitude's low and high words, the sign in
/// the top bit.
fn sign_magnitude(v: i128) -> [u8; 16] {
    let magnitude = v.unsigned_abs();
    let low = magnitude as u64;
    let mut high = (magnitude >> 64) as u64;
    if v < 0 {
        high |= 1 << 63;
    }
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&low.to_le_bytes());
    bytes[8..].copy_from_slice(&high.to_le_bytes());
    bytes
}

fn unsupported(data_type: &DataType) -> FormatError {
    FormatError::InvalidArgument(format!(
        "Presto pages cannot carry {data_type} (see the type table of partout_format::presto)"
    ))
}

/// Appends one block (its encoding name, then its payload) for `array`.
fn write_block(array: &dyn Array, out: &mut Vec<u8>) -> Result<()> {
    match array.data_type() {
        DataType::Null => put_null_rle(out, 1, array.len()),
        DataType::Boolean => {
            let values = array.as_boolean();
            put_fixed(out, array, |r| [u8::from(values.value(r))]);
        }
        DataType::Int8 => {
            let v = primitive::<Int8Type>(array);
            put_fixed(out, array, |r| v[r].to_le_bytes());
        }
        DataType::Int16 => {
            let v = primitive::<Int16Type>(array);
            put_fixed(out, array, |r| v[r].to_le_bytes());
        }
        DataType::Int32 => {
            let v = primitive::<Int32Type>(array);
            put_fixed(out, array, |r| v[r].to_le_bytes());
        }
        DataType::Date32 => {
            let v = primitive::<Date32Type>(array);
            put_fixed(out, array, |r| v[r].to_le_bytes());
        }
        DataType::Float32 => {
            let v = primitive::<Float32Type>(array);
            put_fixed(out, array, |r| v[r].to_bits().to_le_bytes());
        }
        DataType::Int64 => {
            let v = primitive::<Int64Type>(array);
            put_fixed(out, array, |r| v[r].to_le_bytes());
        }
        DataType::Float64 => {
            let v = primitive::<Float64Type>(array);
            put_fixed(out, array, |r| v[r].to_bits().to_le_bytes());
        }
        DataType::Timestamp(unit, _) => put_fixed(out, array, millis(array, *unit)),
        DataType::Decimal64(_, _) => {
            let v = primitive::<Decimal64Type>(array);
            put_fixed(out, array, |r| v[r].to_le_bytes());
        }
        DataType::Decimal128(precision, _) => {
            let v = primitive::<Decimal128Type>(array);
            if *precision <= 18 {
                put_fixed(out, array, |r| (v[r] as i64).to_le_bytes());
            } else {
                put_fixed(out, array, |r| sign_magnitude(v[r]));
            }
        }
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            put_variable(out, array, |r| a.value(r).as_bytes())?
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            put_variable(out, array, |r| a.value(r).as_bytes())?
        }
        DataType::Utf8View => {
            let a = array.as_string_view();
            put_variable(out, array, |r| a.value(r).as_bytes())?
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            put_variable(out, array, |r| a.value(r))?
        }
        DataType::LargeBinary => {
            let a = array.as_binary::<i64>();
            put_variable(out, array, |r| a.value(r))?
        }
        DataType::BinaryView => {
            let a = array.as_binary_view();
            put_variable(out, array, |r| a.value(r))?
        }
        DataType::FixedSizeBinary(_) => {
            let a = array.as_fixed_size_binary();
            put_variable(out, array, |r| a.value(r))?
        }
        DataType::List(_) => put_array(out, array.as_list::<i32>())?,
        DataType::LargeList(_) => put_array(out, array.as_list::<i64>())?,
        DataType::ListView(_) => put_list_view(out, array.as_list_view::<i32>())?,
        DataType::LargeListView(_) => put_list_view(out, array.as_list_view::<i64>())?,
        DataType::RunEndEncoded(_, _) => put_runs(out, array)?,
        DataType::Map(_, _) => put_map(out, array)?,
        // Presto's ROW needs at least one field.
        DataType::Struct(fields) if fields.is_empty() => {
            return Err(FormatError::InvalidArgument(
                "Presto pages cannot carry a struct without fields (a ROW needs one)".into(),
            ));
        }
        DataType::Struct(_) => put_row(out, array)?,
        DataType::Dictionary(_, _) => put_dictionary(out, array)?,
        other => return Err(unsupported(other)),
    }
    Ok(())
}

/// VARIABLE_WIDTH: end offsets (a null row adds nothing), the null section, the total length,
/// the bytes.
fn put_variable<'a>(
    out: &mut Vec<u8>,
    array: &'a dyn Array,
    value: impl Fn(usize) -> &'a [u8],
) -> Result<()> {
    let len = array.len();
    let nulls = array.logical_nulls();
    let valid = |r: usize| nulls.as_ref().is_none_or(|n| n.is_valid(r));
    put_name(out, "VARIABLE_WIDTH");
    put_i32(out, len as i32);
    let ends_at = out.len();
    out.resize(ends_at + len * 4, 0);
    put_nulls(out, nulls.as_ref(), len);
    let total_at = out.len();
    put_i32(out, 0);
    let data_at = out.len();
    for row in 0..len {
        if valid(row) {
            out.extend_from_slice(value(row));
        }
        let end = to_i32(out.len() - data_at, "bytes in a VARIABLE_WIDTH block")?;
        out[ends_at + row * 4..ends_at + row * 4 + 4].copy_from_slice(&end.to_le_bytes());
    }
    let total = (out.len() - data_at) as i32;
    out[total_at..total_at + 4].copy_from_slice(&total.to_le_bytes());
    Ok(())
}

/// Offsets rebased to start at 0, as `i32`.
fn put_offsets<O: OffsetSizeTrait>(out: &mut Vec<u8>, offsets: &[O]) -> Result<()> {
    let first = offsets.first().map_or(0, |o| o.as_usize());
    for o in offsets {
        put_i32(
            out,
            to_i32(o.as_usize() - first, "values in a nested block")?,
        );
    }
    Ok(())
}

/// ARRAY: the referenced elements as a block, the row count, rebased offsets, the null
/// section. A null row's list is empty in Presto.
fn put_array<O: OffsetSizeTrait>(out: &mut Vec<u8>, array: &GenericListArray<O>) -> Result<()> {
    let (elements, offsets) = nonnull_ranges(array.value_offsets(), array.values(), array.nulls())?;
    put_name(out, "ARRAY");
    write_block(elements.as_ref(), out)?;
    put_i32(out, array.len() as i32);
    put_offsets(out, &offsets)?;
    put_nulls(out, array.nulls(), array.len());
    Ok(())
}

/// ARRAY for a list view: its valid rows' ranges laid out in row order (uncopied when they
/// already are), the row count, offsets into them, the null section.
fn put_list_view<O: OffsetSizeTrait>(
    out: &mut Vec<u8>,
    array: &GenericListViewArray<O>,
) -> Result<()> {
    let nulls = array.nulls().filter(|n| n.null_count() > 0);
    let (offsets, sizes) = (array.offsets(), array.sizes());
    let mut rebased = Vec::with_capacity(array.len() + 1);
    rebased.push(0i64);
    let mut indices = Vec::new();
    for r in 0..array.len() {
        if nulls.is_none_or(|n| n.is_valid(r)) {
            let start = offsets[r].as_usize() as u64;
            indices.extend(start..start + sizes[r].as_usize() as u64);
        }
        rebased.push(indices.len() as i64);
    }
    let values = array.values();
    let in_order = indices.windows(2).all(|w| w[1] == w[0] + 1);
    let elements = match indices.first() {
        Some(&first) if in_order => values.slice(first as usize, indices.len()),
        None => values.slice(0, 0),
        Some(_) => {
            let indices = arrow_array::UInt64Array::from(indices);
            arrow_select::take::take(values.as_ref(), &indices, None)?
        }
    };
    put_name(out, "ARRAY");
    write_block(elements.as_ref(), out)?;
    put_i32(out, array.len() as i32);
    put_offsets(out, &rebased)?;
    put_nulls(out, nulls, array.len());
    Ok(())
}

/// A run-end encoded column: RLE of its value when the page holds one run of it, otherwise
/// DICTIONARY of its runs' values with each row's run as its id (see `runs`).
fn put_runs(out: &mut Vec<u8>, array: &dyn Array) -> Result<()> {
    let (values, ids) = super::runs::runs_of(array);
    if values.len() == 1 {
        put_name(out, "RLE");
        put_i32(out, array.len() as i32);
        return write_block(values.as_ref(), out);
    }
    put_name(out, "DICTIONARY");
    put_i32(out, array.len() as i32);
    write_block(values.as_ref(), out)?;
    for id in ids {
        put_i32(out, to_i32(id as usize, "dictionary entries")?);
    }
    out.extend_from_slice(&[0u8; 24]);
    Ok(())
}

/// The children of a list or map's valid rows, in order, with offsets into them (null rows
/// get empty ranges, as Presto requires).
fn nonnull_ranges<O: OffsetSizeTrait>(
    offsets: &[O],
    values: &ArrayRef,
    nulls: Option<&NullBuffer>,
) -> Result<(ArrayRef, Vec<i64>)> {
    let len = offsets.len() - 1;
    let has_nulls = nulls.is_some_and(|n| n.null_count() > 0);
    let (first, last) = (offsets[0].as_usize(), offsets[len].as_usize());
    let contiguous = !has_nulls
        || (0..len).all(|r| nulls.is_some_and(|n| n.is_valid(r)) || offsets[r] == offsets[r + 1]);
    if contiguous {
        let rebased = offsets
            .iter()
            .map(|o| (o.as_usize() - first) as i64)
            .collect();
        return Ok((values.slice(first, last - first), rebased));
    }
    // Null rows that still point at values: take the valid rows' values only.
    let mut indices = Vec::new();
    let mut rebased = vec![0i64];
    for r in 0..len {
        if nulls.is_none_or(|n| n.is_valid(r)) {
            indices.extend(offsets[r].as_usize() as u64..offsets[r + 1].as_usize() as u64);
        }
        rebased.push(indices.len() as i64);
    }
    let indices = arrow_array::UInt64Array::from(indices);
    Ok((
        arrow_select::take::take(values.as_ref(), &indices, None)?,
        rebased,
    ))
}

/// MAP: keys, values, no hash table (-1), the row count, rebased offsets, the null section.
fn put_map(out: &mut Vec<u8>, array: &dyn Array) -> Result<()> {
    let map = array.as_map();
    let entries: ArrayRef = std::sync::Arc::new(map.entries().clone());
    let (entries, offsets) = nonnull_ranges(map.value_offsets(), &entries, map.nulls())?;
    let entries = entries.as_struct();
    put_name(out, "MAP");
    write_block(entries.column(0).as_ref(), out)?;
    write_block(entries.column(1).as_ref(), out)?;
    put_i32(out, -1);
    put_i32(out, map.len() as i32);
    put_offsets(out, &offsets)?;
    put_nulls(out, map.nulls(), map.len());
    Ok(())
}

/// ROW: the field count, each field's block holding the valid rows only, the row count,
/// offsets counting the valid rows before each row, the null section.
fn put_row(out: &mut Vec<u8>, array: &dyn Array) -> Result<()> {
    let row = array.as_struct();
    let len = row.len();
    let nulls = row.nulls().filter(|n| n.null_count() > 0);
    put_name(out, "ROW");
    put_i32(out, row.num_columns() as i32);
    for field in row.columns() {
        match nulls {
            None => write_block(field.as_ref(), out)?,
            Some(nulls) => {
                let valid = arrow_array::BooleanArray::new(nulls.inner().clone(), None);
                let kept = arrow_select::filter::filter(field.as_ref(), &valid)?;
                write_block(kept.as_ref(), out)?;
            }
        }
    }
    put_i32(out, len as i32);
    let mut count = 0i32;
    put_i32(out, 0);
    for r in 0..len {
        if nulls.is_none_or(|n| n.is_valid(r)) {
            count += 1;
        }
        put_i32(out, count);
    }
    put_nulls(out, nulls, len);
    Ok(())
}

/// DICTIONARY: the row count, the dictionary, an `i32` id per row, a 24-byte dictionary id
/// (zeros, as Velox writes it). A null key points at a null entry appended to the dictionary.
fn put_dictionary(out: &mut Vec<u8>, array: &dyn Array) -> Result<()> {
    let dictionary = array.as_any_dictionary();
    // An empty dictionary has only null keys (they point at the null entry added below).
    let keys = if dictionary.values().is_empty() {
        vec![0; array.len()]
    } else {
        dictionary.normalized_keys()
    };
    let key_nulls = dictionary.keys().nulls().filter(|n| n.null_count() > 0);
    let values = dictionary.values();
    put_name(out, "DICTIONARY");
    put_i32(out, array.len() as i32);
    let null_id = values.len();
    match key_nulls {
        None => write_block(values.as_ref(), out)?,
        Some(_) => {
            let null = arrow_array::new_null_array(values.data_type(), 1);
            let with_null = arrow_select::concat::concat(&[values.as_ref(), null.as_ref()])?;
            write_block(with_null.as_ref(), out)?;
        }
    }
    for (r, &k) in keys.iter().enumerate() {
        let id = if key_nulls.is_some_and(|n| n.is_null(r)) {
            null_id
        } else {
            k
        };
        put_i32(out, to_i32(id, "dictionary entries")?);
    }
    out.extend_from_slice(&[0u8; 24]);
    Ok(())
}

/// Whether [`encode_page`] can write columns of `data_type`: the types of the mapping in the
/// module's table (a struct needs a field; lists, maps and dictionaries need their children
/// to be such types).
pub fn can_encode(data_type: &DataType) -> bool {
    match data_type {
        DataType::Null
        | DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Date32
        | DataType::Timestamp(_, _)
        | DataType::Decimal64(_, _)
        | DataType::Decimal128(_, _)
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => true,
        DataType::List(child)
        | DataType::LargeList(child)
        | DataType::ListView(child)
        | DataType::LargeListView(child)
        | DataType::Map(child, _) => can_encode(child.data_type()),
        DataType::RunEndEncoded(_, values) => can_encode(values.data_type()),
        DataType::Struct(fields) => {
            !fields.is_empty() && fields.iter().all(|f| can_encode(f.data_type()))
        }
        DataType::Dictionary(_, values) => can_encode(values),
        _ => false,
    }
}

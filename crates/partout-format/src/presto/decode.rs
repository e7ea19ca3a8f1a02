//! Presto pages to Arrow record batches, and a structural walk for `partout inspect`.
//!
//! Every length, count, offset and id read is checked against the bytes that remain and
//! against what it indexes: malformed input is a [`FormatError::Corrupt`] naming what and
//! where, never a panic or an allocation the input does not pay for.

use super::{CHECKSUMMED, COMPRESSED, ENCRYPTED, HEADER_SIZE, checksum, corrupt};
use crate::{FormatError, Result};
use arrow_array::types::*;
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeBinaryArray, GenericByteArray, GenericByteViewArray,
    MapArray, NullArray, PrimitiveArray, RecordBatch, RecordBatchOptions, StructArray, UInt32Array,
};
use arrow_buffer::{BooleanBuffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, FieldRef, Schema, SchemaRef, TimeUnit};
use std::sync::Arc;

/// Most rows a decoded page may hold: an RLE block claims its row count in four bytes, and a
/// corrupt one must not become a huge allocation.
const MAX_ROWS: usize = 1 << 22;

/// Reads little-endian values from a body, naming the byte of anything out of bounds.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Where `bytes` starts in the input (for messages).
    base: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(corrupt(format!(
                "{what} of {n} bytes at byte {} runs past the end of the body",
                self.base + self.pos
            )));
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }

    /// A count: non-negative, and at most `max`.
    fn count(&mut self, what: &str, max: usize) -> Result<usize> {
        let at = self.base + self.pos;
        let v = self.i32(what)?;
        match usize::try_from(v) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(corrupt(format!(
                "{what} {v} at byte {at} is impossible here"
            ))),
        }
    }

    fn name(&mut self) -> Result<&'a str> {
        let at = self.base + self.pos;
        let len = self.count("encoding name length", 64)?;
        std::str::from_utf8(self.take(len, "encoding name")?)
            .map_err(|_| corrupt(format!("encoding name at byte {at} is not text")))
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The null section of `len` rows: `None` when no row is null.
    fn nulls(&mut self, len: usize) -> Result<Option<NullBuffer>> {
        let at = self.base + self.pos;
        match self.take(1, "null flag")?[0] {
            0 => Ok(None),
            1 => {
                let bits = self.take(len.div_ceil(8), "null bits")?;
                let valid: BooleanBuffer = (0..len)
                    .map(|r| bits[r / 8] & (0x80 >> (r % 8)) == 0)
                    .collect();
                Ok(Some(NullBuffer::new(valid)).filter(|n| n.null_count() > 0))
            }
            flag => Err(corrupt(format!("null flag {flag} at byte {at} (0 or 1)"))),
        }
    }

    /// `len + 1` offsets starting at 0, never decreasing, ending at `end` (when known).
    fn offsets(&mut self, len: usize, end: Option<usize>, what: &str) -> Result<Vec<i32>> {
        let at = self.base + self.pos;
        let raw = self.take((len + 1) * 4, what)?;
        let offsets: Vec<i32> = raw
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        let ok = offsets[0] == 0
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && end.is_none_or(|end| offsets[len] as usize == end);
        if !ok {
            return Err(corrupt(format!(
                "{what} at byte {at} do not run from 0 up to {}",
                end.map_or("their end".to_string(), |e| e.to_string())
            )));
        }
        Ok(offsets)
    }
}

/// Parsed page header.
struct Header {
    rows: usize,
    markers: u8,
    uncompressed: usize,
    size: usize,
    checksum: u64,
}

fn header(bytes: &[u8], at: usize) -> Result<Header> {
    let Some(h) = bytes.get(at..at + HEADER_SIZE) else {
        return Err(corrupt(format!(
            "a page header at byte {at} needs {HEADER_SIZE} bytes, {} remain",
            bytes.len() - at
        )));
    };
    let i32_at = |o: usize| i32::from_le_bytes(h[o..o + 4].try_into().expect("4 bytes"));
    let count = |o: usize, what: &str| {
        usize::try_from(i32_at(o)).map_err(|_| {
            corrupt(format!(
                "negative {what} {} in the page at byte {at}",
                i32_at(o)
            ))
        })
    };
    Ok(Header {
        rows: count(0, "row count")?,
        markers: h[4],
        uncompressed: count(5, "uncompressed size")?,
        size: count(9, "size")?,
        checksum: u64::from_le_bytes(h[13..21].try_into().expect("8 bytes")),
    })
}

/// Checks the header against the body and returns the body, decompressed.
fn open_body<'a>(
    bytes: &'a [u8],
    at: usize,
    h: &Header,
) -> Result<(std::borrow::Cow<'a, [u8]>, bool)> {
    let start = at + HEADER_SIZE;
    let Some(body) = bytes.get(start..start + h.size) else {
        return Err(corrupt(format!(
            "the page at byte {at} claims {} body bytes, {} remain",
            h.size,
            bytes.len() - start
        )));
    };
    if h.markers & !(COMPRESSED | ENCRYPTED | CHECKSUMMED) != 0 {
        return Err(corrupt(format!(
            "unknown markers {:#04x} in the page at byte {at}",
            h.markers
        )));
    }
    if h.markers & ENCRYPTED != 0 {
        return Err(corrupt(format!(
            "the page at byte {at} is encrypted (spill pages only)"
        )));
    }
    let expected = if h.markers & CHECKSUMMED != 0 {
        checksum(body, h.markers, h.rows as i32, h.uncompressed as i32)
    } else {
        0
    };
    let checksum_ok = expected == h.checksum;
    if !checksum_ok {
        return Err(corrupt(format!(
            "checksum mismatch in the page at byte {at}: the header says {:#x}, the body gives {expected:#x}",
            h.checksum
        )));
    }
    if h.markers & COMPRESSED == 0 {
        if h.uncompressed != h.size {
            return Err(corrupt(format!(
                "the uncompressed page at byte {at} gives two sizes, {} and {}",
                h.uncompressed, h.size
            )));
        }
        return Ok((std::borrow::Cow::Borrowed(body), checksum_ok));
    }
    // LZ4 expands at most 255-fold.
    if h.uncompressed > h.size.saturating_mul(255) {
        return Err(corrupt(format!(
            "the page at byte {at} claims {} bytes from {} compressed",
            h.uncompressed, h.size
        )));
    }
    let body = lz4_flex::block::decompress(body, h.uncompressed)
        .map_err(|e| corrupt(format!("LZ4 body of the page at byte {at}: {e}")))?;
    if body.len() != h.uncompressed {
        return Err(corrupt(format!(
            "the page at byte {at} decompresses to {} bytes, not {}",
            body.len(),
            h.uncompressed
        )));
    }
    Ok((std::borrow::Cow::Owned(body), checksum_ok))
}

/// Decodes the page at the start of `bytes` into a batch of `schema`; returns it and the bytes
/// the page took.
///
/// # Errors
/// [`FormatError::Corrupt`] naming what is wrong and where: a truncated page, impossible sizes
/// or counts, a checksum mismatch, an unknown encoding, bad offsets or ids, a column count or an
/// encoding that does not fit `schema`.
pub fn decode_page(bytes: &[u8], schema: &Schema) -> Result<(RecordBatch, usize)> {
    decode_at(bytes, 0, schema)
}

fn decode_at(bytes: &[u8], at: usize, schema: &Schema) -> Result<(RecordBatch, usize)> {
    let h = header(bytes, at)?;
    if h.rows > MAX_ROWS {
        return Err(corrupt(format!(
            "the page at byte {at} claims {} rows",
            h.rows
        )));
    }
    let (body, _) = open_body(bytes, at, &h)?;
    let mut c = Cursor {
        bytes: &body,
        pos: 0,
        base: at + HEADER_SIZE,
    };
    let columns = c.count("column count", 1 << 16)?;
    if columns != schema.fields().len() {
        return Err(corrupt(format!(
            "the page at byte {at} has {columns} columns, the schema {}",
            schema.fields().len()
        )));
    }
    let mut arrays = Vec::with_capacity(columns);
    for (i, field) in schema.fields().iter().enumerate() {
        let array = read_block(&mut c, field.data_type(), h.rows)?;
        if array.len() != h.rows {
            return Err(corrupt(format!(
                "column {i} of the page at byte {at} has {} rows, the page {}",
                array.len(),
                h.rows
            )));
        }
        let array = if !field.is_nullable() && array.null_count() > 0 {
            return Err(corrupt(format!(
                "column {i} ({}) of the page at byte {at} has nulls but is not nullable",
                field.name()
            )));
        } else {
            array
        };
        arrays.push(array);
    }
    if c.remaining() != 0 {
        return Err(corrupt(format!(
            "{} bytes left over after the last column of the page at byte {at}",
            c.remaining()
        )));
    }
    let batch = RecordBatch::try_new_with_options(
        Arc::new(schema.clone()),
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(h.rows)),
    )?;
    Ok((batch, HEADER_SIZE + h.size))
}

/// Decodes every page of `bytes` (pages back to back).
///
/// # Errors
/// As [`decode_page`], for any page.
pub fn decode_pages(bytes: &[u8], schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let mut at = 0;
    let mut batches = Vec::new();
    while at < bytes.len() {
        let (batch, used) = decode_at(bytes, at, schema)?;
        batches.push(batch);
        at += used;
    }
    Ok(batches)
}

fn mismatch(name: &str, data_type: &DataType, at: usize) -> FormatError {
    corrupt(format!(
        "a {name} block at byte {at} cannot hold {data_type}"
    ))
}

/// Reads one block as an array of `data_type`; `limit` bounds its row count.
fn read_block(c: &mut Cursor<'_>, data_type: &DataType, limit: usize) -> Result<ArrayRef> {
    let at = c.base + c.pos;
    let name = c.name()?;
    match name {
        "RLE" => {
            let len = c.count("RLE row count", limit)?;
            let value = read_block(c, data_type, 1)?;
            if value.len() != 1 {
                return Err(corrupt(format!(
                    "the RLE block at byte {at} repeats {} rows",
                    value.len()
                )));
            }
            if let DataType::Null = data_type {
                return Ok(Arc::new(NullArray::new(len)));
            }
            let zeros = UInt32Array::from(vec![0u32; len]);
            Ok(arrow_select::take::take(value.as_ref(), &zeros, None)?)
        }
        "DICTIONARY" => {
            let len = c.count("dictionary row count", limit.min(c.remaining() / 4))?;
            let value_type = match data_type {
                DataType::Dictionary(_, value) => value.as_ref(),
                other => other,
            };
            let dictionary = read_block(c, value_type, MAX_ROWS)?;
            let raw = c.take(len * 4, "dictionary ids")?;
            let mut ids = Vec::with_capacity(len);
            for b in raw.chunks_exact(4) {
                let id = i32::from_le_bytes(b.try_into().expect("4 bytes"));
                match u32::try_from(id) {
                    Ok(id) if (id as usize) < dictionary.len() => ids.push(id),
                    _ => {
                        return Err(corrupt(format!(
                            "dictionary id {id} at byte {at} outside a dictionary of {}",
                            dictionary.len()
                        )));
                    }
                }
            }
            c.take(24, "dictionary id")?;
            let ids = UInt32Array::from(ids);
            match data_type {
                DataType::Dictionary(key, _) => {
                    // Presto has no null keys: a null row points at a null entry. Arrow's
                    // dictionaries mark the key null instead.
                    let key_nulls = dictionary.logical_nulls().map(|entries| {
                        NullBuffer::new(
                            ids.values()
                                .iter()
                                .map(|&id| entries.is_valid(id as usize))
                                .collect(),
                        )
                    });
                    let ids = UInt32Array::new(ids.values().clone(), key_nulls);
                    let keys = arrow_cast_keys(&ids, key, at)?;
                    Ok(arrow_array::make_array(
                        keys.into_data()
                            .into_builder()
                            .data_type(data_type.clone())
                            .child_data(vec![dictionary.to_data()])
                            .build()?,
                    ))
                }
                _ => Ok(arrow_select::take::take(dictionary.as_ref(), &ids, None)?),
            }
        }
        "BYTE_ARRAY" | "SHORT_ARRAY" | "INT_ARRAY" | "LONG_ARRAY" | "INT128_ARRAY" => {
            let width = super::fixed_width(name).expect("a fixed-width encoding");
            // At least one bit per row must be there.
            let len = c.count("row count", limit.min(c.remaining().saturating_mul(8)))?;
            let nulls = c.nulls(len)?;
            let valid = len - nulls.as_ref().map_or(0, |n| n.null_count());
            let packed = c.take(valid * width, "values")?;
            // Values at their rows, zeros under nulls.
            let mut values = vec![0u8; len * width];
            let mut next = packed.chunks_exact(width);
            for r in 0..len {
                if nulls.as_ref().is_none_or(|n| n.is_valid(r)) {
                    let v = next.next().expect("one value per valid row");
                    values[r * width..(r + 1) * width].copy_from_slice(v);
                }
            }
            fixed_array(&values, width, len, nulls, data_type)
                .ok_or_else(|| mismatch(name, data_type, at))
        }
        "VARIABLE_WIDTH" => {
            let len = c.count("row count", limit.min(c.remaining() / 4))?;
            let raw = c.take(len * 4, "end offsets")?;
            let ends: Vec<i32> = raw
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect();
            let nulls = c.nulls(len)?;
            let total = c.count("total length", c.remaining())?;
            let data = c.take(total, "values")?;
            let mut offsets = Vec::with_capacity(len + 1);
            offsets.push(0i32);
            offsets.extend_from_slice(&ends);
            if offsets.windows(2).any(|w| w[0] > w[1])
                || ends.last().map_or(0, |&e| e as usize) != total
            {
                return Err(corrupt(format!(
                    "the VARIABLE_WIDTH block at byte {at} has offsets that do not run up to {total}"
                )));
            }
            variable_array(data, offsets, nulls, data_type, at)
        }
        "ARRAY" => {
            let (DataType::List(item) | DataType::LargeList(item)) = data_type else {
                return Err(mismatch(name, data_type, at));
            };
            let elements = read_block(c, item.data_type(), MAX_ROWS)?;
            let len = c.count("row count", limit.min(c.remaining() / 4))?;
            let offsets = c.offsets(len, Some(elements.len()), "ARRAY offsets")?;
            let nulls = c.nulls(len)?;
            list_array(data_type, item.clone(), elements, offsets, nulls)
        }
        "MAP" => {
            let DataType::Map(entries, sorted) = data_type else {
                return Err(mismatch(name, data_type, at));
            };
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(mismatch(name, data_type, at));
            };
            if kv.len() != 2 {
                return Err(mismatch(name, data_type, at));
            }
            let keys = read_block(c, kv[0].data_type(), MAX_ROWS)?;
            let values = read_block(c, kv[1].data_type(), MAX_ROWS)?;
            if keys.len() != values.len() {
                return Err(corrupt(format!(
                    "the MAP block at byte {at} has {} keys and {} values",
                    keys.len(),
                    values.len()
                )));
            }
            let hash = c.i32("hash table length")?;
            if hash >= 0 {
                c.take(hash as usize * 4, "hash table")?;
            } else if hash != -1 {
                return Err(corrupt(format!(
                    "hash table length {hash} in the MAP block at byte {at}"
                )));
            }
            let len = c.count("row count", limit.min(c.remaining() / 4))?;
            let offsets = c.offsets(len, Some(keys.len()), "MAP offsets")?;
            let nulls = c.nulls(len)?;
            let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
            Ok(Arc::new(MapArray::try_new(
                entries.clone(),
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                entries_array,
                nulls,
                *sorted,
            )?))
        }
        "ROW" => {
            let DataType::Struct(fields) = data_type else {
                return Err(mismatch(name, data_type, at));
            };
            let count = c.count("field count", 1 << 16)?;
            if count != fields.len() {
                return Err(corrupt(format!(
                    "the ROW block at byte {at} has {count} fields, the type {}",
                    fields.len()
                )));
            }
            let children: Vec<ArrayRef> = fields
                .iter()
                .map(|f| read_block(c, f.data_type(), MAX_ROWS))
                .collect::<Result<_>>()?;
            let len = c.count("row count", limit.min(c.remaining() / 4))?;
            let valid_rows = children.first().map_or(0, |f| f.len());
            if children.iter().any(|f| f.len() != valid_rows) {
                return Err(corrupt(format!(
                    "the ROW block at byte {at} has fields of different lengths"
                )));
            }
            let known = (!children.is_empty()).then_some(valid_rows);
            let offsets = c.offsets(len, known, "ROW offsets")?;
            let nulls = c.nulls(len)?;
            // Each row's field values: the next field entry for a valid row, none for a null.
            let mut indices = Vec::with_capacity(len);
            for r in 0..len {
                let step = offsets[r + 1] - offsets[r];
                let null = nulls.as_ref().is_some_and(|n| n.is_null(r));
                match (null, step) {
                    (false, 1) => indices.push(Some(offsets[r] as u32)),
                    (true, 0) => indices.push(None),
                    _ => {
                        return Err(corrupt(format!(
                            "the ROW block at byte {at}: row {r}'s offsets do not match its null flag"
                        )));
                    }
                }
            }
            let indices = UInt32Array::from(indices);
            let expanded = children
                .iter()
                .map(|f| arrow_select::take::take(f.as_ref(), &indices, None))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(Arc::new(StructArray::try_new_with_length(
                fields.clone(),
                expanded,
                nulls,
                len,
            )?))
        }
        other => Err(corrupt(format!("unknown encoding {other:?} at byte {at}"))),
    }
}

fn arrow_cast_keys(ids: &UInt32Array, key: &DataType, at: usize) -> Result<ArrayRef> {
    let fits = |max: u64| ids.values().iter().all(|&v| u64::from(v) <= max);
    let keys: ArrayRef = match key {
        DataType::Int8 if fits(i8::MAX as u64) => Arc::new(
            PrimitiveArray::<Int8Type>::from_iter_values(ids.values().iter().map(|&v| v as i8)),
        ),
        DataType::Int16 if fits(i16::MAX as u64) => Arc::new(
            PrimitiveArray::<Int16Type>::from_iter_values(ids.values().iter().map(|&v| v as i16)),
        ),
        DataType::Int32 if fits(i32::MAX as u64) => Arc::new(
            PrimitiveArray::<Int32Type>::from_iter_values(ids.values().iter().map(|&v| v as i32)),
        ),
        DataType::Int64 => Arc::new(PrimitiveArray::<Int64Type>::from_iter_values(
            ids.values().iter().map(|&v| i64::from(v)),
        )),
        DataType::UInt8 if fits(u8::MAX as u64) => Arc::new(
            PrimitiveArray::<UInt8Type>::from_iter_values(ids.values().iter().map(|&v| v as u8)),
        ),
        DataType::UInt16 if fits(u16::MAX as u64) => Arc::new(
            PrimitiveArray::<UInt16Type>::from_iter_values(ids.values().iter().map(|&v| v as u16)),
        ),
        DataType::UInt32 => Arc::new(ids.clone()),
        DataType::UInt64 => Arc::new(PrimitiveArray::<UInt64Type>::from_iter_values(
            ids.values().iter().map(|&v| u64::from(v)),
        )),
        other => {
            return Err(corrupt(format!(
                "the DICTIONARY block at byte {at} has ids that do not fit {other} keys"
            )));
        }
    };
    let with_nulls = keys
        .into_data()
        .into_builder()
        .nulls(ids.nulls().cloned())
        .build()?;
    Ok(arrow_array::make_array(with_nulls))
}

/// A fixed-width array of `data_type` from `len` values of `width` bytes (zeros under nulls);
/// `None` when the type does not use that width.
fn fixed_array(
    values: &[u8],
    width: usize,
    len: usize,
    nulls: Option<NullBuffer>,
    data_type: &DataType,
) -> Option<ArrayRef> {
    fn each<const W: usize>(values: &[u8]) -> impl Iterator<Item = [u8; W]> + '_ {
        values
            .chunks_exact(W)
            .map(|c| c.try_into().expect("W bytes"))
    }
    fn prim<T: arrow_array::ArrowPrimitiveType>(
        values: impl Iterator<Item = T::Native>,
        nulls: Option<NullBuffer>,
        data_type: &DataType,
    ) -> ArrayRef {
        Arc::new(
            PrimitiveArray::<T>::new(values.collect(), nulls).with_data_type(data_type.clone()),
        )
    }
    let array: ArrayRef = match (width, data_type) {
        (1, DataType::Null) => {
            if nulls.as_ref().map_or(0, |n| n.null_count()) != len {
                return None;
            }
            Arc::new(NullArray::new(len))
        }
        (1, DataType::Boolean) => Arc::new(BooleanArray::new(
            values.iter().map(|&b| b != 0).collect(),
            nulls,
        )),
        (1, DataType::Int8) => {
            prim::<Int8Type>(each::<1>(values).map(i8::from_le_bytes), nulls, data_type)
        }
        (2, DataType::Int16) => {
            prim::<Int16Type>(each::<2>(values).map(i16::from_le_bytes), nulls, data_type)
        }
        (4, DataType::Int32) => {
            prim::<Int32Type>(each::<4>(values).map(i32::from_le_bytes), nulls, data_type)
        }
        (4, DataType::Date32) => {
            prim::<Date32Type>(each::<4>(values).map(i32::from_le_bytes), nulls, data_type)
        }
        (4, DataType::Float32) => prim::<Float32Type>(
            each::<4>(values).map(|b| f32::from_bits(u32::from_le_bytes(b))),
            nulls,
            data_type,
        ),
        (8, DataType::Int64) => {
            prim::<Int64Type>(each::<8>(values).map(i64::from_le_bytes), nulls, data_type)
        }
        (8, DataType::Float64) => prim::<Float64Type>(
            each::<8>(values).map(|b| f64::from_bits(u64::from_le_bytes(b))),
            nulls,
            data_type,
        ),
        (8, DataType::Timestamp(unit, _)) => {
            let ms = each::<8>(values).map(i64::from_le_bytes);
            let scaled = ms.map(|v| match unit {
                TimeUnit::Second => v.div_euclid(1000),
                TimeUnit::Millisecond => v,
                TimeUnit::Microsecond => v.saturating_mul(1000),
                TimeUnit::Nanosecond => v.saturating_mul(1_000_000),
            });
            match unit {
                TimeUnit::Second => prim::<TimestampSecondType>(scaled, nulls, data_type),
                TimeUnit::Millisecond => prim::<TimestampMillisecondType>(scaled, nulls, data_type),
                TimeUnit::Microsecond => prim::<TimestampMicrosecondType>(scaled, nulls, data_type),
                TimeUnit::Nanosecond => prim::<TimestampNanosecondType>(scaled, nulls, data_type),
            }
        }
        (8, DataType::Decimal64(_, _)) => {
            prim::<Decimal64Type>(each::<8>(values).map(i64::from_le_bytes), nulls, data_type)
        }
        (8, DataType::Decimal128(p, _)) if *p <= 18 => prim::<Decimal128Type>(
            each::<8>(values).map(|b| i128::from(i64::from_le_bytes(b))),
            nulls,
            data_type,
        ),
        (16, DataType::Decimal128(p, _)) if *p > 18 => prim::<Decimal128Type>(
            each::<16>(values).map(|b| {
                let low = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                let high = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
                let magnitude = (u128::from(high & !(1 << 63)) << 64 | u128::from(low)) as i128;
                if high >> 63 == 1 {
                    magnitude.wrapping_neg()
                } else {
                    magnitude
                }
            }),
            nulls,
            data_type,
        ),
        _ => return None,
    };
    Some(array)
}

fn variable_array(
    data: &[u8],
    offsets: Vec<i32>,
    nulls: Option<NullBuffer>,
    data_type: &DataType,
    at: usize,
) -> Result<ArrayRef> {
    let offsets32 = OffsetBuffer::new(ScalarBuffer::from(offsets.clone()));
    let offsets64 = || {
        OffsetBuffer::new(ScalarBuffer::from(
            offsets.iter().map(|&o| i64::from(o)).collect::<Vec<_>>(),
        ))
    };
    let buffer = arrow_buffer::Buffer::from_slice_ref(data);
    let array: ArrayRef = match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let s = std::str::from_utf8(data).map_err(|e| {
                corrupt(format!(
                    "the VARIABLE_WIDTH block at byte {at} is not UTF-8 for {data_type}: {e}"
                ))
            })?;
            // Whole values of valid UTF-8: each value boundary must be a char boundary too.
            if offsets.iter().any(|&o| !s.is_char_boundary(o as usize)) {
                return Err(corrupt(format!(
                    "the VARIABLE_WIDTH block at byte {at} splits a character between values"
                )));
            }
            match data_type {
                DataType::Utf8 => Arc::new(GenericByteArray::<Utf8Type>::try_new(
                    offsets32, buffer, nulls,
                )?),
                DataType::LargeUtf8 => Arc::new(GenericByteArray::<LargeUtf8Type>::try_new(
                    offsets64(),
                    buffer,
                    nulls,
                )?),
                _ => {
                    let array = GenericByteArray::<Utf8Type>::try_new(offsets32, buffer, nulls)?;
                    Arc::new(GenericByteViewArray::<StringViewType>::from(&array))
                }
            }
        }
        DataType::Binary => Arc::new(GenericByteArray::<BinaryType>::try_new(
            offsets32, buffer, nulls,
        )?),
        DataType::LargeBinary => Arc::new(GenericByteArray::<LargeBinaryType>::try_new(
            offsets64(),
            buffer,
            nulls,
        )?),
        DataType::BinaryView => {
            let array = GenericByteArray::<BinaryType>::try_new(offsets32, buffer, nulls)?;
            Arc::new(GenericByteViewArray::<BinaryViewType>::from(&array))
        }
        DataType::FixedSizeBinary(width) => {
            let width = *width;
            let valid = |r: usize| nulls.as_ref().is_none_or(|n| n.is_valid(r));
            let ok = offsets
                .windows(2)
                .enumerate()
                .all(|(r, w)| w[1] - w[0] == if valid(r) { width } else { 0 });
            if !ok {
                return Err(mismatch("VARIABLE_WIDTH", data_type, at));
            }
            let values = (0..offsets.len() - 1)
                .map(|r| valid(r).then(|| &data[offsets[r] as usize..offsets[r + 1] as usize]));
            Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                values, width,
            )?)
        }
        other => return Err(mismatch("VARIABLE_WIDTH", other, at)),
    };
    Ok(array)
}

fn list_array(
    data_type: &DataType,
    item: FieldRef,
    elements: ArrayRef,
    offsets: Vec<i32>,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef> {
    Ok(match data_type {
        DataType::List(_) => Arc::new(arrow_array::ListArray::try_new(
            item,
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            elements,
            nulls,
        )?),
        _ => Arc::new(arrow_array::LargeListArray::try_new(
            item,
            OffsetBuffer::new(ScalarBuffer::from(
                offsets.into_iter().map(i64::from).collect::<Vec<_>>(),
            )),
            elements,
            nulls,
        )?),
    })
}

/// One page, as `partout inspect` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PageInfo {
    /// Where the page starts in the input.
    pub offset: usize,
    /// Rows.
    pub rows: usize,
    /// Whether the body is LZ4-compressed.
    pub compressed: bool,
    /// Whether the header carries a checksum.
    pub checksummed: bool,
    /// Body bytes before compression.
    pub uncompressed_size: usize,
    /// Body bytes as sent.
    pub size: usize,
    /// The top-level blocks.
    pub columns: Vec<BlockInfo>,
}

/// One block, as `partout inspect` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockInfo {
    /// The encoding name.
    pub encoding: String,
    /// Rows (positions).
    pub rows: usize,
    /// Bytes of the block, name included.
    pub bytes: usize,
    /// Nested blocks.
    pub children: Vec<BlockInfo>,
}

/// Walks every page of `bytes` and every block in them, checking the framing, sizes and
/// checksums, without building arrays.
///
/// # Errors
/// As [`decode_page`], for anything wrong with the structure.
pub fn inspect_pages(bytes: &[u8]) -> Result<Vec<PageInfo>> {
    let mut at = 0;
    let mut pages = Vec::new();
    while at < bytes.len() {
        let h = header(bytes, at)?;
        let (body, _) = open_body(bytes, at, &h)?;
        let mut c = Cursor {
            bytes: &body,
            pos: 0,
            base: at + HEADER_SIZE,
        };
        let count = c.count("column count", 1 << 16)?;
        let columns = (0..count)
            .map(|_| skim_block(&mut c))
            .collect::<Result<Vec<_>>>()?;
        pages.push(PageInfo {
            offset: at,
            rows: h.rows,
            compressed: h.markers & COMPRESSED != 0,
            checksummed: h.markers & CHECKSUMMED != 0,
            uncompressed_size: h.uncompressed,
            size: h.size,
            columns,
        });
        at += HEADER_SIZE + h.size;
    }
    Ok(pages)
}

/// The structure of one block, its bytes skipped.
fn skim_block(c: &mut Cursor<'_>) -> Result<BlockInfo> {
    let start = c.pos;
    let at = c.base + c.pos;
    let name = c.name()?.to_string();
    let mut children = Vec::new();
    let rows = match name.as_str() {
        "RLE" => {
            let rows = c.count("RLE row count", MAX_ROWS)?;
            children.push(skim_block(c)?);
            rows
        }
        "DICTIONARY" => {
            let rows = c.count("dictionary row count", c.remaining() / 4)?;
            children.push(skim_block(c)?);
            c.take(rows * 4 + 24, "dictionary ids")?;
            rows
        }
        "BYTE_ARRAY" | "SHORT_ARRAY" | "INT_ARRAY" | "LONG_ARRAY" | "INT128_ARRAY" => {
            let width = super::fixed_width(&name).expect("a fixed-width encoding");
            let rows = c.count("row count", c.remaining().saturating_mul(8))?;
            let nulls = c.nulls(rows)?;
            let valid = rows - nulls.map_or(0, |n| n.null_count());
            c.take(valid * width, "values")?;
            rows
        }
        "VARIABLE_WIDTH" => {
            let rows = c.count("row count", c.remaining() / 4)?;
            c.take(rows * 4, "end offsets")?;
            c.nulls(rows)?;
            let total = c.count("total length", c.remaining())?;
            c.take(total, "values")?;
            rows
        }
        "ARRAY" => {
            let elements = skim_block(c)?;
            let rows = c.count("row count", c.remaining() / 4)?;
            c.offsets(rows, Some(elements.rows), "ARRAY offsets")?;
            c.nulls(rows)?;
            children.push(elements);
            rows
        }
        "MAP" => {
            children.push(skim_block(c)?);
            children.push(skim_block(c)?);
            let hash = c.i32("hash table length")?;
            if hash > 0 {
                c.take(hash as usize * 4, "hash table")?;
            }
            let rows = c.count("row count", c.remaining() / 4)?;
            c.offsets(rows, Some(children[0].rows), "MAP offsets")?;
            c.nulls(rows)?;
            rows
        }
        "ROW" => {
            let fields = c.count("field count", 1 << 16)?;
            for _ in 0..fields {
                children.push(skim_block(c)?);
            }
            let rows = c.count("row count", c.remaining() / 4)?;
            let valid = children.first().map(|f| f.rows);
            c.offsets(rows, valid, "ROW offsets")?;
            c.nulls(rows)?;
            rows
        }
        other => return Err(corrupt(format!("unknown encoding {other:?} at byte {at}"))),
    };
    Ok(BlockInfo {
        encoding: name,
        rows,
        bytes: c.pos - start,
        children,
    })
}

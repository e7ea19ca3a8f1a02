//! Reading back partout's own Arrow IPC (staged rows' scratch files, spill files) with one
//! pass over its strings' bytes instead of one per string.
//!
//! arrow-ipc validates every array it decodes in full, and for string views that means a
//! UTF-8 check per string: reading lineitem's staged rows back, UTF-8 was a third of what
//! staging costs over writing files as flushed (AMD EPYC Zen 4, 64 Parquet files: 1,600 of
//! 5,000 samples). So they are decoded with arrow's validation off and every batch is then
//! checked by [`check`]: the bounds as arrow checks them, with strings read as bytes, then
//! UTF-8 a buffer at a time with SIMD, each string's ends on a character's boundary. A file
//! damaged outside the run is an error, as it was with arrow's validation, never a read out
//! of bounds or a string that is not one.

#![allow(unsafe_code)]

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_buffer::Buffer;
use arrow_data::{ArrayData, UnsafeFlag};
use arrow_ipc::MessageHeader;
use arrow_ipc::convert::fb_to_schema;
use arrow_ipc::reader::{RecordBatchDecoder, StreamReader, read_dictionary_impl};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Fields, SchemaRef};
use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;

/// Arrow's validation off (for [`OwnStreamDecoder`]'s batches and dictionaries).
fn unvalidated() -> UnsafeFlag {
    let mut flag = UnsafeFlag::new();
    // SAFETY: arrow's validation of decoded arrays is off; what it would establish is
    // established by `check`, which every caller runs on each batch before reading it:
    // lengths, null counts, offsets and views within their buffers, dictionary keys within
    // their values, column lengths and types, and strings' UTF-8 (where the fast pass cannot
    // tell, by arrow's own validation). Mirrored by the debug assertion in `check`.
    unsafe { flag.set(true) };
    flag
}

/// Decodes an Arrow IPC stream this run wrote, held in memory as whole messages, without
/// arrow's validation: each batch it gives goes through [`check`] before it is used.
///
/// arrow-ipc's own `StreamDecoder` has the option (`with_skip_validation`) but, in 59 and 60,
/// passes it to the dictionaries it decodes and not to the record batches, so every batch
/// was validated whatever it was told. This one frames the messages itself (continuation,
/// length, flatbuffer, body) and decodes them with arrow's public decoders.
#[derive(Default)]
pub(crate) struct OwnStreamDecoder {
    schema: Option<SchemaRef>,
    dictionaries: HashMap<i64, ArrayRef>,
}

impl OwnStreamDecoder {
    /// Decodes the message at the start of `buffer` and moves `buffer` past it: the batch of a
    /// record batch message, `None` for the schema, a dictionary or the stream's end.
    ///
    /// # Errors
    /// A message cut short, not framed as a stream's, of a kind a stream does not hold, or
    /// that arrow cannot decode.
    pub(crate) fn decode(
        &mut self,
        buffer: &mut Buffer,
    ) -> Result<Option<RecordBatch>, ArrowError> {
        let whole = buffer.clone();
        let bytes = whole.as_slice();
        let damaged = |what: String| ArrowError::IpcError(what);
        let word = |at: usize| -> Result<u32, ArrowError> {
            bytes
                .get(at..at + 4)
                .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
                .ok_or_else(|| damaged(format!("a message cut short at {} bytes", bytes.len())))
        };
        if word(0)? != CONTINUATION {
            return Err(damaged("a message without its continuation marker".into()));
        }
        let meta_len = word(4)? as usize;
        let meta_end = 8 + meta_len;
        if meta_len == 0 {
            *buffer = whole.slice(8);
            return Ok(None);
        }
        let meta = bytes.get(8..meta_end).ok_or_else(|| {
            damaged(format!(
                "a message's {meta_len} bytes of metadata cut short"
            ))
        })?;
        let message = arrow_ipc::root_as_message(meta)
            .map_err(|e| damaged(format!("a message that is not one: {e}")))?;
        let body_len = usize::try_from(message.bodyLength())
            .map_err(|_| damaged("a message's body of a negative length".into()))?;
        if bytes.len() - meta_end < body_len {
            return Err(damaged(format!(
                "a message's body of {body_len} bytes cut short"
            )));
        }
        let body = whole.slice_with_length(meta_end, body_len);
        let version = message.version();
        let schema = || {
            self.schema
                .clone()
                .ok_or_else(|| damaged("a batch before the stream's schema".into()))
        };
        let batch = match message.header_type() {
            MessageHeader::Schema => {
                let schema = message
                    .header_as_schema()
                    .ok_or_else(|| damaged("a schema message without its schema".into()))?;
                self.schema = Some(Arc::new(fb_to_schema(schema)));
                None
            }
            MessageHeader::DictionaryBatch => {
                let schema = schema()?;
                let dictionary = message
                    .header_as_dictionary_batch()
                    .ok_or_else(|| damaged("a dictionary message without its batch".into()))?;
                read_dictionary_impl(
                    &body,
                    dictionary,
                    &schema,
                    &mut self.dictionaries,
                    &version,
                    false,
                    unvalidated(),
                )?;
                None
            }
            MessageHeader::RecordBatch => {
                let schema = schema()?;
                let batch = message
                    .header_as_record_batch()
                    .ok_or_else(|| damaged("a record batch message without its batch".into()))?;
                let decoded = RecordBatchDecoder::try_new(
                    &body,
                    batch,
                    schema,
                    &self.dictionaries,
                    &version,
                )?
                .with_require_alignment(false)
                .with_skip_validation(unvalidated())
                .read_record_batch()?;
                Some(decoded)
            }
            other => return Err(damaged(format!("a {other:?} message in a stream"))),
        };
        *buffer = whole.slice(meta_end + body_len);
        Ok(batch)
    }
}

/// The marker before each message's length.
const CONTINUATION: u32 = 0xFFFF_FFFF;

/// A reader of an IPC stream this run wrote (a spill file), without arrow's validation: each
/// batch it gives goes through [`check`] before it is used.
pub(crate) fn own_stream_reader<R: Read>(reader: StreamReader<R>) -> StreamReader<R> {
    // SAFETY: as in `unvalidated`: every batch read goes through `check` first.
    unsafe { reader.with_skip_validation(true) }
}

/// Checks `batch`, decoded without validation, as arrow would have: each column in full
/// (lengths, null counts, offsets, views and dictionary keys within bounds) with its strings
/// read as bytes, then its strings' UTF-8 ([`utf8`]), and the columns against the schema and
/// the row count.
///
/// # Errors
/// The first check that fails, as arrow words it.
pub(crate) fn check(batch: &RecordBatch) -> Result<(), ArrowError> {
    for column in batch.columns() {
        let data = column.to_data();
        as_bytes(&data)?;
        utf8(&data)?;
    }
    RecordBatch::try_new_with_options(
        batch.schema(),
        batch.columns().to_vec(),
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?;
    debug_assert!(
        batch
            .columns()
            .iter()
            .all(|c| c.to_data().validate_full().is_ok()),
        "a batch read back and checked is not valid Arrow: {:?}",
        batch
            .columns()
            .iter()
            .find_map(|c| c.to_data().validate_full().err())
    );
    Ok(())
}

/// `data` validated in full with its strings typed as bytes (its buffers shared), children
/// first.
fn as_bytes(data: &ArrayData) -> Result<ArrayData, ArrowError> {
    let children = data
        .child_data()
        .iter()
        .map(as_bytes)
        .collect::<Result<Vec<_>, _>>()?;
    data.clone()
        .into_builder()
        .data_type(bytes_type(data.data_type()))
        .child_data(children)
        .build()
}

/// Checks that the strings of `data` (its bounds checked by [`as_bytes`]) and of every array
/// within it are UTF-8: a buffer at a time with SIMD, and each string starting and ending on
/// a character's boundary, so that every string is UTF-8 when its whole buffer is. Where that
/// cannot tell (a view into a buffer holding bytes no string uses that are not UTF-8), arrow's
/// own validation decides.
fn utf8(data: &ArrayData) -> Result<(), ArrowError> {
    for child in data.child_data() {
        utf8(child)?;
    }
    let fast = match data.data_type() {
        DataType::Utf8 => offsets_utf8(data, data.buffer::<i32>(0)),
        DataType::LargeUtf8 => offsets_utf8(data, data.buffer::<i64>(0)),
        DataType::Utf8View => views_utf8(data),
        _ => return Ok(()),
    };
    if fast { Ok(()) } else { data.validate_full() }
}

/// A byte that continues a character: never a string's first byte, nor the one after it.
fn continues(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// Whether the strings of `data` (offsets and values) are UTF-8: the bytes they span as one,
/// and every offset on a boundary.
fn offsets_utf8<O: arrow_buffer::ArrowNativeType>(data: &ArrayData, offsets: &[O]) -> bool {
    let offsets = &offsets[..data.len() + 1];
    let (first, last) = (offsets[0].as_usize(), offsets[data.len()].as_usize());
    let values = &data.buffers()[1].as_slice()[first..last];
    simdutf8::basic::from_utf8(values).is_ok()
        && offsets.iter().all(|o| {
            values
                .get(o.as_usize() - first)
                .is_none_or(|&b| !continues(b))
        })
}

/// Whether the strings of a `Utf8View` `data` are UTF-8: each data buffer as one, each long
/// string's ends on a boundary, and short strings (held in their views) that are not ASCII
/// one by one.
fn views_utf8(data: &ArrayData) -> bool {
    let buffers = &data.buffers()[1..];
    let whole: Vec<bool> = buffers
        .iter()
        .map(|b| simdutf8::basic::from_utf8(b.as_slice()).is_ok())
        .collect();
    data.buffer::<u128>(0)[..data.len()].iter().all(|&view| {
        let len = view as u32 as usize;
        if len <= 12 {
            // The string's bytes are the view's 5th to (4 + len)th: ASCII when none has its
            // high bit set, tested in one step.
            let high_bits = (0x8080_8080_8080_8080_8080_8080u128 >> (8 * (12 - len))) << 32;
            view & high_bits == 0
                || simdutf8::basic::from_utf8(&view.to_le_bytes()[4..4 + len]).is_ok()
        } else {
            let (index, start) = ((view >> 64) as u32 as usize, (view >> 96) as u32 as usize);
            let bytes = buffers[index].as_slice();
            whole[index]
                && !continues(bytes[start])
                && bytes.get(start + len).is_none_or(|&b| !continues(b))
        }
    })
}

/// `t` with every string type (within lists, structs, maps, unions, dictionaries and runs
/// too) made its bytes type: the same layout, no UTF-8 to validate.
fn bytes_type(t: &DataType) -> DataType {
    let field = |f: &FieldRef| -> FieldRef {
        Arc::new(Field::clone(f).with_data_type(bytes_type(f.data_type())))
    };
    match t {
        DataType::Utf8 => DataType::Binary,
        DataType::LargeUtf8 => DataType::LargeBinary,
        DataType::Utf8View => DataType::BinaryView,
        DataType::List(f) => DataType::List(field(f)),
        DataType::LargeList(f) => DataType::LargeList(field(f)),
        DataType::ListView(f) => DataType::ListView(field(f)),
        DataType::LargeListView(f) => DataType::LargeListView(field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(field).collect::<Fields>()),
        DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
        DataType::Union(fields, mode) => {
            DataType::Union(fields.iter().map(|(id, f)| (id, field(f))).collect(), *mode)
        }
        DataType::Dictionary(key, value) => {
            DataType::Dictionary(key.clone(), Box::new(bytes_type(value)))
        }
        DataType::RunEndEncoded(ends, values) => {
            DataType::RunEndEncoded(ends.clone(), field(values))
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{ListBuilder, StringBuilder, StringDictionaryBuilder};
    use arrow_array::types::Int32Type;
    use arrow_array::{Array, ArrayRef, Int32Array, StringArray, StringViewArray, make_array};
    use arrow_buffer::{Buffer, ScalarBuffer};
    use arrow_schema::Schema;

    fn batch_of(column: ArrayRef) -> RecordBatch {
        RecordBatch::try_from_iter([("c", column)]).unwrap()
    }

    /// `array`'s data with buffer `i` replaced by `bytes`, built without validation.
    fn with_buffer(array: &dyn Array, i: usize, bytes: Buffer) -> ArrayRef {
        let mut buffers = array.to_data().buffers().to_vec();
        buffers[i] = bytes;
        let builder = array.to_data().into_builder().buffers(buffers);
        // SAFETY: not sound as an array: it is what a damaged file decodes to without
        // validation, made only to be refused by `check`, never read.
        make_array(unsafe { builder.build_unchecked() })
    }

    /// `batches` as an Arrow IPC stream written by arrow, LZ4-compressed or not.
    fn stream_of(batches: &[RecordBatch], lz4: bool) -> Result<Vec<u8>, ArrowError> {
        let options = arrow_ipc::writer::IpcWriteOptions::default()
            .try_with_compression(lz4.then_some(arrow_ipc::CompressionType::LZ4_FRAME))?;
        let mut writer = arrow_ipc::writer::StreamWriter::try_new_with_options(
            Vec::new(),
            &batches[0].schema(),
            options,
        )?;
        for batch in batches {
            writer.write(batch)?;
        }
        writer.into_inner()
    }

    /// Every batch of `bytes` by [`OwnStreamDecoder`], each passing [`check`].
    fn decode_all(bytes: Vec<u8>) -> Result<Vec<RecordBatch>, ArrowError> {
        let mut decoder = OwnStreamDecoder::default();
        let mut buffer = Buffer::from_vec(bytes);
        let mut batches = Vec::new();
        while !buffer.is_empty() {
            if let Some(batch) = decoder.decode(&mut buffer)? {
                check(&batch)?;
                batches.push(batch);
            }
        }
        Ok(batches)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Every type arrow's IPC writer writes, with nulls, sliced, in several batches,
        /// LZ4 or not: decoded as arrow's own reader decodes it.
        #[test]
        fn every_type_decodes_as_arrows_reader_decodes_it(
            seed in 0u64..u64::MAX,
            // Not 0: arrow 59 writes an empty run-end encoded column its own reader refuses
            // (a run end of 0), and this run writes no empty batches.
            len in 1usize..200,
            lz4 in proptest::bool::ANY,
        ) {
            let mut rng = partout_testkit::rng(seed);
            let mut written = 0;
            for data_type in partout_testkit::every_type() {
                let batches: Vec<RecordBatch> = (0..3)
                    .map(|_| partout_testkit::random_batch(std::slice::from_ref(&data_type), len, 0.2, true, &mut rng))
                    .collect();
                // Types arrow's IPC writer refuses are never in a file this run wrote.
                let Ok(bytes) = stream_of(&batches, lz4) else { continue };
                written += 1;
                let arrows: Vec<RecordBatch> =
                    StreamReader::try_new(std::io::Cursor::new(bytes.clone()), None)
                        .unwrap()
                        .collect::<Result<_, _>>()
                        .unwrap();
                let ours = decode_all(bytes).unwrap();
                proptest::prop_assert_eq!(&ours, &arrows, "{}", data_type);
                proptest::prop_assert_eq!(&ours, &batches, "{}", data_type);
            }
            proptest::prop_assert!(written * 10 >= partout_testkit::every_type().len() * 9, "{}", written);
        }
    }

    /// A stream cut anywhere is an error (or the batches before the cut), never a panic.
    #[test]
    fn a_stream_cut_anywhere_is_an_error_not_a_panic() {
        let mut dictionary = StringDictionaryBuilder::<Int32Type>::new();
        dictionary.append_value("x");
        dictionary.append_null();
        let batch = RecordBatch::try_from_iter([
            ("d", Arc::new(dictionary.finish()) as ArrayRef),
            (
                "s",
                Arc::new(StringViewArray::from(vec![
                    "a longer string than twelve",
                    "b",
                ])),
            ),
        ])
        .unwrap();
        let bytes = stream_of(&[batch.clone(), batch], false).unwrap();
        // Both batches only when nothing but (part of) the 8 bytes of the stream's end is cut.
        let end = bytes.len() - 8;
        for cut in 0..bytes.len() {
            if let Ok(batches) = decode_all(bytes[..cut].to_vec()) {
                assert!(batches.len() < 2 || cut == end, "cut at {cut}");
            }
        }
        assert_eq!(decode_all(bytes).unwrap().len(), 2);
    }

    #[test]
    fn bytes_that_are_not_a_stream_are_refused() {
        for (bytes, says) in [
            (vec![1u8; 16], "continuation"),
            (
                vec![0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
                "not one",
            ),
            (vec![0xff, 0xff, 0xff, 0xff, 200, 0, 0, 0], "cut short"),
        ] {
            let err = decode_all(bytes).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
        let batch = batch_of(Arc::new(Int32Array::from(vec![1])));
        let bytes = stream_of(&[batch], false).unwrap();
        // The schema message left out: its batch cannot be read.
        let schema_len = 8 + u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
        let err = decode_all(bytes[schema_len..].to_vec())
            .unwrap_err()
            .to_string();
        assert!(err.contains("before the stream's schema"), "{err}");
    }

    #[test]
    fn valid_batches_of_every_string_layout_pass() {
        let mut list = ListBuilder::new(StringBuilder::new());
        list.append_value([Some("a"), None, Some("a longer string than twelve")]);
        list.append_null();
        let mut dictionary = StringDictionaryBuilder::<Int32Type>::new();
        dictionary.append_value("x");
        dictionary.append_null();
        let columns: [ArrayRef; 4] = [
            Arc::new(StringArray::from(vec![Some("é"), None])),
            Arc::new(StringViewArray::from(vec![
                Some("short"),
                Some("a string longer than its view's twelve bytes"),
            ])),
            Arc::new(list.finish()),
            Arc::new(dictionary.finish()),
        ];
        for column in columns {
            check(&batch_of(column)).unwrap();
        }
    }

    #[test]
    fn an_offset_past_the_values_is_refused() {
        let strings = StringArray::from(vec!["ab", "cd"]);
        let offsets = ScalarBuffer::<i32>::from(vec![0, 2, 9]).into_inner();
        let damaged = with_buffer(&strings, 0, offsets);
        let err = check(&batch_of(damaged)).unwrap_err().to_string();
        assert!(err.contains("offset"), "{err}");
    }

    #[test]
    fn a_view_past_its_buffer_is_refused() {
        let long = "a string longer than its view's twelve bytes";
        let views = StringViewArray::from(vec![long]);
        // The view: length, prefix, buffer index, offset; the offset moved past the data.
        let mut view = views.views()[0];
        view += 1000u128 << 96;
        let damaged = with_buffer(&views, 0, Buffer::from_vec(vec![view]));
        let err = check(&batch_of(damaged)).unwrap_err().to_string();
        assert!(err.contains("Invalid buffer slice"), "{err}");
    }

    #[test]
    fn a_dictionary_key_past_its_values_is_refused() {
        let mut dictionary = StringDictionaryBuilder::<Int32Type>::new();
        dictionary.append_value("x");
        let keys = ScalarBuffer::<i32>::from(vec![7]).into_inner();
        let damaged = with_buffer(&dictionary.finish(), 0, keys);
        let err = check(&batch_of(damaged)).unwrap_err().to_string();
        assert!(err.contains("out of bounds: 7"), "{err}");
    }

    #[test]
    fn a_null_count_that_is_not_the_bitmaps_is_refused() {
        let ints = Int32Array::from(vec![Some(1), None, Some(3)]);
        let data = ints.to_data();
        let nulls = data.nulls().unwrap().inner().clone();
        // SAFETY: as in `with_buffer`: unsound on purpose, refused by `check`, never read.
        let wrong = unsafe { arrow_buffer::NullBuffer::new_unchecked(nulls, 2) };
        let builder = data.into_builder().nulls(Some(wrong));
        // SAFETY: the same: the wrong count is the damage `check` must name.
        let damaged = make_array(unsafe { builder.build_unchecked() });
        let err = check(&batch_of(damaged)).unwrap_err().to_string();
        assert!(err.contains("null_count"), "{err}");
    }

    #[test]
    fn a_column_shorter_than_the_batch_is_refused() {
        let schema = Arc::new(Schema::new(vec![Field::new("c", DataType::Int32, false)]));
        let column: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        // SAFETY: unsound on purpose (a column of 2 rows in a batch of 3), refused by `check`.
        let batch = unsafe { RecordBatch::new_unchecked(schema, vec![column], 3) };
        assert!(check(&batch).is_err());
    }

    #[test]
    fn strings_are_read_as_bytes_at_every_depth() {
        let utf8 = |t: DataType| Arc::new(Field::new("v", t, true));
        let nested = DataType::Struct(
            vec![
                Field::new("l", DataType::List(utf8(DataType::Utf8View)), true),
                Field::new(
                    "d",
                    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::LargeUtf8)),
                    true,
                ),
            ]
            .into(),
        );
        let expected = DataType::Struct(
            vec![
                Field::new("l", DataType::List(utf8(DataType::BinaryView)), true),
                Field::new(
                    "d",
                    DataType::Dictionary(
                        Box::new(DataType::Int32),
                        Box::new(DataType::LargeBinary),
                    ),
                    true,
                ),
            ]
            .into(),
        );
        assert_eq!(bytes_type(&nested), expected);
        assert_eq!(bytes_type(&DataType::Int64), DataType::Int64);
    }

    /// A column of `strings` with its values buffer (or, for views, its first data buffer)
    /// replaced by `bytes`, its offsets or views kept.
    fn damaged_values(strings: &dyn Array, bytes: Vec<u8>) -> RecordBatch {
        batch_of(with_buffer(strings, 1, Buffer::from_vec(bytes)))
    }

    #[test]
    fn strings_not_utf8_are_refused_in_every_layout() {
        let long = "a string of more than twelve bytes";
        let not_utf8 = |s: &str| {
            // Past a view's 4 bytes of prefix, which are checked as bounds are.
            let mut bytes = s.as_bytes().to_vec();
            bytes[5] = 0xFF;
            bytes
        };
        let cases = [
            damaged_values(
                &StringArray::from(vec!["abcd", "efgh"]),
                not_utf8("abcdefgh"),
            ),
            damaged_values(
                &arrow_array::LargeStringArray::from(vec!["abcd", "efgh"]),
                not_utf8("abcdefgh"),
            ),
            damaged_values(&StringViewArray::from(vec![long]), not_utf8(long)),
        ];
        for batch in cases {
            let err = check(&batch).unwrap_err().to_string();
            assert!(err.to_lowercase().contains("utf"), "{err}");
        }
        // A short string lives in its view: its second byte made 0xFF.
        let views = StringViewArray::from(vec!["abc"]);
        let damaged = views.views()[0] | (0xFFu128 << 40);
        let batch = batch_of(with_buffer(&views, 0, Buffer::from_vec(vec![damaged])));
        let err = check(&batch).unwrap_err().to_string();
        assert!(err.to_lowercase().contains("utf"), "{err}");
    }

    /// Every byte UTF-8 as one buffer, but a string starting or ending inside a character.
    #[test]
    fn a_string_split_inside_a_character_is_refused() {
        let strings = StringArray::from(vec!["é", "a"]);
        let offsets = ScalarBuffer::<i32>::from(vec![0, 1, 3]).into_inner();
        let batch = batch_of(with_buffer(&strings, 0, offsets));
        let err = check(&batch).unwrap_err().to_string();
        assert!(err.to_lowercase().contains("utf"), "{err}");

        // A view moved one byte on, into the é, or cut one byte short, inside the é at its
        // end: its prefix kept true, so only the boundary tells.
        let at_start = "é and more than twelve bytes";
        let at_end = "more than twelve bytes and é";
        for (long, skip, keep) in [
            (at_start, 1, at_start.len() - 1),
            (at_end, 0, at_end.len() - 1),
        ] {
            let views = StringViewArray::from(vec![long]);
            let view = views.views()[0];
            let bytes = &long.as_bytes()[skip..skip + keep];
            let prefix = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as u128;
            let moved = (view & !0xFFFF_FFFF_FFFF_FFFF)
                + ((skip as u128) << 96)
                + (prefix << 32)
                + (keep as u128);
            let batch = batch_of(with_buffer(&views, 0, Buffer::from_vec(vec![moved])));
            let err = check(&batch).unwrap_err().to_string();
            assert!(err.to_lowercase().contains("utf"), "{long}: {err}");
        }
    }

    /// A view's buffer may hold bytes no string uses: if they are not UTF-8 the fast pass
    /// cannot tell, and arrow's validation accepts the strings that are.
    #[test]
    fn bytes_no_view_uses_may_be_anything() {
        let long = "a string of more than twelve bytes";
        let mut bytes = long.as_bytes().to_vec();
        bytes.extend_from_slice(&[0xFF, 0xFE]);
        let views = StringViewArray::from(vec![long]);
        check(&damaged_values(&views, bytes)).unwrap();
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Strings of every width of character, a byte of their buffers made anything:
        /// `check` accepts exactly what arrow's own validation accepts, in every layout.
        #[test]
        fn utf8_is_judged_as_arrow_judges_it(
            strings in proptest::collection::vec("[a\u{e9}\u{4e2d}\u{1f600}]{0,20}", 1..8),
            at in 0usize..1000,
            byte in proptest::prelude::any::<u8>(),
        ) {
            let refs: Vec<&str> = strings.iter().map(String::as_str).collect();
            let arrays: [ArrayRef; 3] = [
                Arc::new(StringArray::from(refs.clone())),
                Arc::new(arrow_array::LargeStringArray::from(refs.clone())),
                Arc::new(StringViewArray::from(refs)),
            ];
            for array in arrays {
                let data = array.to_data();
                // Views of short strings only have no data buffer.
                let Some(values) = data.buffers().get(1) else { continue };
                let mut values = values.as_slice().to_vec();
                if !values.is_empty() {
                    let i = at % values.len();
                    values[i] = byte;
                }
                let damaged = with_buffer(array.as_ref(), 1, Buffer::from_vec(values));
                let arrows = damaged.to_data().validate_full().is_ok();
                let ours = check(&batch_of(damaged.clone())).is_ok();
                proptest::prop_assert_eq!(ours, arrows, "{:?}", damaged);
            }
        }
    }
}

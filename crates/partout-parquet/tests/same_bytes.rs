//! The patched writer writes the files stock parquet 59.3.2 writes, byte for byte, and stock
//! parquet's reader reads them back to the rows written: integer columns whose values fall in
//! a small range (keyed by offset), leave it part-way through a page or a batch (keyed by hash
//! from there), sit at the ends of `i64`, hold nulls, and fill dictionaries past their page
//! limit (the fallback to plain encoding); and string and binary views, whose statistics are
//! found by the 4 bytes each view holds inline, with values that tie there.

use std::sync::Arc;

use arrow_array::types::Int16Type;
use arrow_array::{
    ArrayRef, BinaryViewArray, Date32Array, Decimal128Array, DictionaryArray, Int8Array,
    Int32Array, Int64Array, RecordBatch, StringArray, StringViewArray, UInt16Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};
use arrow_select::concat::concat_batches;
use proptest::prelude::*;

/// One file's rows written by `write` (stock or patched), with small pages, dictionaries and
/// row groups so that every limit is crossed.
macro_rules! write_with {
    ($krate:ident, $batches:expr, $dictionary_limit:expr) => {{
        let properties = $krate::file::properties::WriterProperties::builder()
            .set_compression($krate::basic::Compression::SNAPPY)
            .set_dictionary_page_size_limit($dictionary_limit)
            .set_data_page_size_limit(4096)
            .set_max_row_group_row_count(Some(3_000))
            .set_statistics_enabled($krate::file::properties::EnabledStatistics::Page)
            .build();
        let batches: &[RecordBatch] = $batches;
        let mut out = Vec::new();
        let mut writer =
            $krate::arrow::ArrowWriter::try_new(&mut out, batches[0].schema(), Some(properties))
                .unwrap();
        for batch in batches {
            writer.write(batch).unwrap();
        }
        writer.close().unwrap();
        out
    }};
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("i32", DataType::Int32, true),
        Field::new("i64", DataType::Int64, true),
        Field::new("date", DataType::Date32, true),
        Field::new("dec", DataType::Decimal128(15, 2), true),
        Field::new("i8", DataType::Int8, true),
        Field::new("u16", DataType::UInt16, true),
        Field::new("u64", DataType::UInt64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("view", DataType::Utf8View, true),
        Field::new("bin_view", DataType::BinaryView, true),
        Field::new(
            "dict",
            DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8)),
            true,
        ),
    ]))
}

/// Values around `base`: most within `spread` of it, some (`far` of 256) anywhere.
fn values(base: i64, spread: i64, far: u8, n: usize) -> impl Strategy<Value = Vec<Option<i64>>> {
    prop::collection::vec(
        (any::<u8>(), 0..=spread, any::<i64>(), any::<u8>()).prop_map(
            move |(pick, near, anywhere, null)| {
                if null < 16 {
                    None
                } else if pick < far {
                    Some(anywhere)
                } else {
                    Some(base.wrapping_add(near))
                }
            },
        ),
        n,
    )
}

fn batch(v: &[Option<i64>]) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(
            v.iter()
                .map(|x| x.map(|x| x as i32))
                .collect::<Int32Array>(),
        ),
        Arc::new(v.iter().copied().collect::<Int64Array>()),
        Arc::new(
            v.iter()
                .map(|x| x.map(|x| x as i32))
                .collect::<Date32Array>(),
        ),
        Arc::new(
            v.iter()
                .map(|x| x.map(|x| i128::from(x % 1_000_000_000_000)))
                .collect::<Decimal128Array>()
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
        Arc::new(v.iter().map(|x| x.map(|x| x as i8)).collect::<Int8Array>()),
        Arc::new(
            v.iter()
                .map(|x| x.map(|x| x as u16))
                .collect::<UInt16Array>(),
        ),
        Arc::new(
            v.iter()
                .map(|x| x.map(|x| x as u64))
                .collect::<UInt64Array>(),
        ),
        Arc::new(
            v.iter()
                .map(|x| x.map(|x| format!("v{}", x % 97)))
                .collect::<StringArray>(),
        ),
        Arc::new(v.iter().map(|x| x.map(text)).collect::<StringViewArray>()),
        Arc::new(
            v.iter()
                .map(|x| x.map(bytes_of))
                .collect::<BinaryViewArray>(),
        ),
        Arc::new(
            v.iter()
                .map(|x| x.map(text))
                .collect::<Vec<_>>()
                .iter()
                .map(Option::as_deref)
                .collect::<DictionaryArray<Int16Type>>(),
        ),
    ];
    RecordBatch::try_new(schema(), cols).unwrap()
}

/// Strings whose first 4 bytes tie often (a shared prefix, values shorter than 4 bytes, a
/// zero byte inside the first 4), so that views are compared past their prefixes.
fn text(x: i64) -> String {
    let tail = x.unsigned_abs() % 50;
    match x.rem_euclid(5) {
        0 => String::new(),
        1 => format!("ab{}", tail % 3),
        2 => format!("abcd-{tail}"),
        3 => format!("ab\0{tail}"),
        _ => format!("a long value past twelve bytes {tail}"),
    }
}

/// Bytes that all tie in their first 4 (`abc` padded with a zero, `abc\0…`, or `abcd…`), with
/// a byte above 0x7f after them now and then: the min and the max are found past the prefix.
fn bytes_of(x: i64) -> Vec<u8> {
    let tail = (x.unsigned_abs() % 50).to_string().into_bytes();
    let mut b = match x.rem_euclid(4) {
        0 => b"abc".to_vec(),
        1 => [b"abc\0".as_slice(), &tail].concat(),
        2 => [b"abcd".as_slice(), &tail].concat(),
        _ => b"abcd".to_vec(),
    };
    if x.rem_euclid(7) == 0 && b.len() > 4 {
        b[4] = 0xff;
    }
    b
}

fn read_back(bytes: Vec<u8>) -> Vec<RecordBatch> {
    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(
        bytes,
    ))
    .unwrap()
    .build()
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn check(chunks: &[Vec<Option<i64>>], dictionary_limit: usize) {
    let batches: Vec<RecordBatch> = chunks.iter().map(|c| batch(c)).collect();
    let stock = write_with!(parquet, &batches, dictionary_limit);
    let patched = write_with!(partout_parquet, &batches, dictionary_limit);
    assert!(
        stock == patched,
        "the patched writer's bytes differ from stock parquet's"
    );
    let written = concat_batches(&schema(), &batches).unwrap();
    let read = concat_batches(&schema(), &read_back(patched)).unwrap();
    assert_eq!(read, written);
}

/// Chunks of values: small ranges, ranges near and past the direct table's 65,536, and a
/// value now and then from anywhere (the hand-over to hashing part-way through a batch).
fn chunks() -> impl Strategy<Value = Vec<Vec<Option<i64>>>> {
    (
        prop_oneof![
            Just(0i64),
            -5_000i64..5_000,
            Just(i64::MIN),
            Just(i64::MAX - 70_000),
            any::<i64>()
        ],
        prop_oneof![
            Just(0i64),
            1i64..64,
            1_000i64..70_000,
            Just(65_535i64),
            Just(65_536i64)
        ],
        prop_oneof![Just(0u8), 1u8..4],
        prop::collection::vec(1usize..2_500, 1..5),
    )
        .prop_flat_map(|(base, spread, far, sizes)| {
            sizes
                .into_iter()
                .map(|n| values(base, spread, far, n).boxed())
                .collect::<Vec<_>>()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_patched_writer_writes_stock_parquets_bytes(
        chunks in chunks(),
        dictionary_limit in prop_oneof![Just(1usize << 20), 256usize..8_192],
    ) {
        check(&chunks, dictionary_limit);
    }
}

/// The edges, each on its own: one value; all nulls; exactly the widest span (`low` and
/// `low + 65,535`), then one past it; a descending run that widens the table downwards to
/// `i64::MIN`; and the top of `i64`.
#[test]
fn the_direct_tables_edges_write_stock_parquets_bytes() {
    let span = 65_536i64;
    let cases: Vec<Vec<Option<i64>>> = vec![
        vec![Some(7)],
        vec![None; 100],
        (0..1_000)
            .map(|i| Some(if i % 2 == 0 { 10 } else { 10 + span - 1 }))
            .collect(),
        (0..1_000)
            .map(|i| Some(if i == 500 { 10 + span } else { 10 + i % 3 }))
            .collect(),
        (0..3_000).map(|i| Some(i64::MIN + 3_000 - i)).collect(),
        (0..3_000).map(|i| Some(i64::MAX - i % 70_000)).collect(),
        (0..3_000).rev().map(|i| Some(i * 30)).collect(),
    ];
    for case in cases {
        check(std::slice::from_ref(&case), 1 << 20);
        check(&[case.clone(), case], 1_024);
    }
}

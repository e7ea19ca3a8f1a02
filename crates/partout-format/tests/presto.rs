//! Presto pages: the vectors Presto 0.296's own serde wrote, byte for byte and value for value;
//! random round trips of every type Presto carries; malformed pages as errors.

use arrow_array::builder::{Int64Builder, ListBuilder, MapBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray,
    Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, RecordBatch,
    StringArray, StructArray, TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Fields};
use partout_format::presto::{
    PageOptions, check_page, decode_page, decode_pages, encode_page, inspect_pages,
};
use std::sync::Arc;

fn vectors() -> Vec<(String, Vec<u8>)> {
    include_str!("data/presto_vectors.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, hex) = l.split_once(' ').unwrap();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (name.to_string(), bytes)
        })
        .collect()
}

fn vector(prefix: &str) -> Vec<u8> {
    vectors()
        .into_iter()
        .find(|(name, _)| name.starts_with(&format!("{prefix}_")))
        .unwrap_or_else(|| panic!("no vector {prefix}"))
        .1
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, c)| (n, c, true)))
        .unwrap()
}

fn bigint_varchar(ints: Vec<Option<i64>>, strings: Vec<Option<&str>>) -> RecordBatch {
    batch(vec![
        ("b", Arc::new(Int64Array::from(ints))),
        ("v", Arc::new(StringArray::from(strings))),
    ])
}

/// What each vector holds, and whether it was written with a checksum.
fn expected(prefix: &str) -> (RecordBatch, bool) {
    match prefix {
        "v1" => (
            bigint_varchar(
                vec![Some(1), Some(-2), Some(3)],
                vec![Some("a"), Some("bc"), Some("")],
            ),
            false,
        ),
        "v2" | "v3" => (
            bigint_varchar(
                vec![Some(10), None, Some(30), None, Some(50)],
                vec![Some("x"), None, Some("yz"), Some(""), None],
            ),
            prefix == "v3",
        ),
        "v4" => {
            let ints = [
                Some(0),
                None,
                Some(2),
                Some(3),
                None,
                Some(5),
                None,
                None,
                Some(8),
                None,
            ];
            let names = [
                Some("Denali"),
                None,
                Some("Reinier"),
                Some("Whitney"),
                None,
                Some("Bona"),
                None,
                None,
                Some("Bear"),
                None,
            ];
            (
                batch(vec![
                    ("i", Arc::new(Int32Array::from(ints.to_vec()))),
                    ("v", Arc::new(StringArray::from(names.to_vec()))),
                ]),
                false,
            )
        }
        "v5" => (
            batch(vec![
                ("tinyint", Arc::new(Int8Array::from(vec![Some(-5), None]))),
                (
                    "smallint",
                    Arc::new(Int16Array::from(vec![Some(300), None])),
                ),
                (
                    "boolean",
                    Arc::new(BooleanArray::from(vec![Some(true), None])),
                ),
                ("real", Arc::new(Float32Array::from(vec![Some(1.5), None]))),
                (
                    "double",
                    Arc::new(Float64Array::from(vec![Some(2.25), None])),
                ),
                ("date", Arc::new(Date32Array::from(vec![Some(19000), None]))),
                (
                    "timestamp",
                    Arc::new(TimestampMillisecondArray::from(vec![
                        Some(1_700_000_000_123),
                        None,
                    ])),
                ),
                (
                    "dec10",
                    Arc::new(
                        Decimal128Array::from(vec![Some(-12345), None])
                            .with_precision_and_scale(10, 2)
                            .unwrap(),
                    ),
                ),
                (
                    "dec38",
                    Arc::new(
                        Decimal128Array::from(vec![Some(-12345), None])
                            .with_precision_and_scale(38, 2)
                            .unwrap(),
                    ),
                ),
                (
                    "varbinary",
                    Arc::new(BinaryArray::from(vec![Some(&[0xde, 0xad][..]), None])),
                ),
            ]),
            false,
        ),
        "v5b" => (
            batch(vec![(
                "dec38",
                Arc::new(
                    Decimal128Array::from(vec![12345678901234567890123i128])
                        .with_precision_and_scale(38, 2)
                        .unwrap(),
                ),
            )]),
            false,
        ),
        "v6" => {
            let mut list = ListBuilder::new(Int64Builder::new());
            list.append_value([Some(1), Some(2)]);
            list.append_null();
            list.append_value([]);
            list.append_value([Some(3)]);
            (batch(vec![("a", Arc::new(list.finish()))]), false)
        }
        "v7" => {
            let mut map = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
            map.keys().append_value("a");
            map.values().append_value(1);
            map.keys().append_value("b");
            map.values().append_value(2);
            map.append(true).unwrap();
            map.append(false).unwrap();
            map.keys().append_value("c");
            map.values().append_null();
            map.append(true).unwrap();
            (batch(vec![("m", Arc::new(map.finish()))]), false)
        }
        "v8" => {
            let fields = Fields::from(vec![
                Field::new("x", DataType::Int64, true),
                Field::new("y", DataType::Utf8, true),
            ]);
            let row = StructArray::try_new(
                fields,
                vec![
                    Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])),
                    Arc::new(StringArray::from(vec![Some("a"), None, None])),
                ],
                Some(vec![true, false, true].into()),
            )
            .unwrap();
            (batch(vec![("r", Arc::new(row))]), false)
        }
        "v9" => (
            batch(vec![("b", Arc::new(Int64Array::from(vec![7; 5])))]),
            false,
        ),
        "v10" => {
            let dict = DictionaryArray::<Int32Type>::try_new(
                Int32Array::from(vec![1, 0, 1]),
                Arc::new(StringArray::from(vec!["p", "q"])),
            )
            .unwrap();
            (batch(vec![("d", Arc::new(dict))]), false)
        }
        "v11" => (bigint_varchar(vec![], vec![]), true),
        "v12" => {
            let mut ints = vec![None];
            ints.extend((1..=7).map(Some));
            ints.push(None);
            (batch(vec![("b", Arc::new(Int64Array::from(ints)))]), true)
        }
        other => panic!("no vector {other}"),
    }
}

const ALL: [&str; 13] = [
    "v1", "v2", "v3", "v4", "v5", "v5b", "v6", "v7", "v8", "v9", "v10", "v11", "v12",
];

#[test]
fn every_vector_decodes_to_its_values() {
    for prefix in ALL {
        let bytes = vector(prefix);
        let (want, _) = expected(prefix);
        let (got, used) =
            decode_page(&bytes, &want.schema()).unwrap_or_else(|e| panic!("{prefix}: {e}"));
        assert_eq!(used, bytes.len(), "{prefix}");
        assert_eq!(got, want, "{prefix}");
    }
}

/// Byte for byte, except where Presto's writer chose what an Arrow batch cannot say: v9 is an
/// RLE block of a constant column (an Arrow column holds every value), and v10's dictionary id
/// is Presto's own random one (partout writes zeros, as Velox does), so v10 is compared with
/// those 24 bytes masked.
#[test]
fn every_vector_encodes_byte_for_byte() {
    for prefix in ALL.iter().filter(|&&p| p != "v9") {
        let want = vector(prefix);
        let (batch, checksum) = expected(prefix);
        let mut got = Vec::new();
        encode_page(
            &batch,
            PageOptions {
                checksum,
                lz4: false,
            },
            &mut got,
        )
        .unwrap();
        if *prefix == "v10" {
            assert_eq!(got.len(), want.len(), "v10");
            let id = want.len() - 24..want.len();
            assert_eq!(got[..id.start], want[..id.start], "v10");
            assert_eq!(&got[id], &[0u8; 24][..]);
            continue;
        }
        assert_eq!(hex(&got), hex(&want), "{prefix}");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn inspect_walks_every_vector() {
    for prefix in ALL {
        let bytes = vector(prefix);
        let pages = inspect_pages(&bytes).unwrap_or_else(|e| panic!("{prefix}: {e}"));
        assert_eq!(pages.len(), 1);
        let (want, checksum) = expected(prefix);
        assert_eq!(pages[0].rows, want.num_rows());
        assert_eq!(pages[0].checksummed, checksum);
        assert_eq!(pages[0].columns.len(), want.num_columns());
        assert!(
            pages[0].columns.iter().all(|c| c.rows == want.num_rows()),
            "{prefix}: {pages:?}"
        );
    }
    let pages = inspect_pages(&vector("v9")).unwrap();
    assert_eq!(pages[0].columns[0].encoding, "RLE");
    assert_eq!(pages[0].columns[0].children[0].encoding, "LONG_ARRAY");
}

#[test]
fn concatenated_pages_decode_in_order() {
    let mut bytes = vector("v1");
    bytes.extend(vector("v3"));
    bytes.extend(vector("v11"));
    let schema = expected("v1").0.schema();
    let batches = decode_pages(&bytes, &schema).unwrap();
    assert_eq!(
        batches.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
        [3, 5, 0]
    );
}

/// Whether Presto pages carry `data_type` exactly (sub-millisecond timestamps are rounded).
fn carried(data_type: &DataType) -> bool {
    partout_testkit::presto_carries(data_type, false)
}

fn has_dictionary(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, _) => true,
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::Map(f, _) => has_dictionary(f.data_type()),
        DataType::Struct(fields) => fields.iter().any(|f| has_dictionary(f.data_type())),
        DataType::RunEndEncoded(_, values) => has_dictionary(values.data_type()),
        _ => false,
    }
}

/// A random batch without the testkit's leading UInt32 `row` column (Presto has no unsigned
/// types).
fn without_row(batch: RecordBatch) -> RecordBatch {
    batch
        .project(&(1..batch.num_columns()).collect::<Vec<_>>())
        .unwrap()
}

fn round_trip(batch: &RecordBatch, options: PageOptions) {
    let mut bytes = Vec::new();
    encode_page(batch, options, &mut bytes).unwrap();
    let (got, used) = decode_page(&bytes, &batch.schema()).unwrap();
    assert_eq!(used, bytes.len());
    for (c, (g, w)) in got.columns().iter().zip(batch.columns()).enumerate() {
        if has_dictionary(w.data_type()) {
            // A valid key at a null entry comes back as a null key: compare what the rows
            // say (arrow-row encodes dictionaries by their values).
            let field = arrow_row::SortField::new(w.data_type().clone());
            let converter = arrow_row::RowConverter::new(vec![field]).unwrap();
            let (g, w) = (
                converter.convert_columns(std::slice::from_ref(g)).unwrap(),
                converter.convert_columns(std::slice::from_ref(w)).unwrap(),
            );
            assert!(g.iter().eq(w.iter()), "column {c}");
        } else {
            assert_eq!(g.as_ref(), w.as_ref(), "column {c} ({})", w.data_type());
        }
    }
    let info = inspect_pages(&bytes).unwrap();
    assert_eq!(info[0].rows, batch.num_rows());
}

#[test]
fn every_carried_type_round_trips() {
    let mut rng = partout_testkit::rng(42);
    let types: Vec<DataType> = partout_testkit::every_type()
        .into_iter()
        .filter(carried)
        .collect();
    assert!(types.len() >= 30, "{types:?}");
    for data_type in &types {
        for density in [0.0, 0.5, 1.0] {
            for rows in [0, 1, 9, 300] {
                let batch = without_row(partout_testkit::random_batch(
                    std::slice::from_ref(data_type),
                    rows,
                    density,
                    true,
                    &mut rng,
                ));
                for (checksum, lz4) in [(false, false), (true, false), (true, true)] {
                    round_trip(&batch, PageOptions { checksum, lz4 });
                }
            }
        }
    }
}

#[test]
fn types_presto_cannot_carry_are_named_errors() {
    let mut rng = partout_testkit::rng(7);
    for data_type in partout_testkit::every_type()
        .into_iter()
        .filter(|t| !carried(t))
    {
        if matches!(data_type, DataType::Timestamp(_, _)) {
            continue;
        }
        let batch = without_row(partout_testkit::random_batch(
            std::slice::from_ref(&data_type),
            5,
            0.5,
            false,
            &mut rng,
        ));
        let err = encode_page(&batch, PageOptions::default(), &mut Vec::new()).unwrap_err();
        assert!(
            err.to_string().contains("cannot carry"),
            "{data_type}: {err}"
        );
    }
}

#[test]
fn lz4_is_used_only_when_it_pays() {
    let repetitive = batch(vec![(
        "s",
        Arc::new(StringArray::from(vec!["the same words again"; 500])),
    )]);
    let mut bytes = Vec::new();
    encode_page(
        &repetitive,
        PageOptions {
            checksum: true,
            lz4: true,
        },
        &mut bytes,
    )
    .unwrap();
    let info = inspect_pages(&bytes).unwrap();
    assert!(
        info[0].compressed && info[0].size < info[0].uncompressed_size / 4,
        "{info:?}"
    );
    let tiny = bigint_varchar(vec![Some(1)], vec![Some("x")]);
    bytes.clear();
    encode_page(
        &tiny,
        PageOptions {
            checksum: true,
            lz4: true,
        },
        &mut bytes,
    )
    .unwrap();
    assert!(!inspect_pages(&bytes).unwrap()[0].compressed);
}

/// Every truncation, and every single-byte change, of real pages is an error or a valid
/// page; never a panic. A changed checksummed page is always an error.
#[test]
fn malformed_pages_are_errors_not_panics() {
    let mut rng = partout_testkit::rng(3);
    let types: Vec<DataType> = partout_testkit::every_type()
        .into_iter()
        .filter(carried)
        .collect();
    let mut pages = vec![];
    for prefix in ALL {
        pages.push((
            vector(prefix),
            expected(prefix).0.schema(),
            expected(prefix).1,
        ));
    }
    let sample = without_row(partout_testkit::random_batch(
        &types, 20, 0.3, false, &mut rng,
    ));
    for lz4 in [false, true] {
        let mut bytes = Vec::new();
        encode_page(
            &sample,
            PageOptions {
                checksum: true,
                lz4,
            },
            &mut bytes,
        )
        .unwrap();
        pages.push((bytes, sample.schema(), true));
    }
    for (bytes, schema, checksummed) in &pages {
        for cut in 0..bytes.len() {
            assert!(
                decode_page(&bytes[..cut], schema).is_err(),
                "a page cut at {cut} decoded"
            );
            assert!(inspect_pages(&bytes[..cut]).is_err() || cut == 0);
        }
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut changed = bytes.clone();
                changed[at] ^= flip;
                let decoded = decode_page(&changed, schema);
                let inspected = inspect_pages(&changed);
                // The walks are one: what decodes also inspects.
                assert!(
                    decoded.is_err() || inspected.is_ok(),
                    "a change at byte {at} decodes but does not inspect: {inspected:?}"
                );
                if *checksummed && at >= 21 {
                    assert!(decoded.is_err(), "a change at byte {at} went unnoticed");
                }
            }
        }
    }
}

/// `check_page` (what the exchange runs on pages it serves from files) takes a page as Presto
/// wrote it, and refuses a damaged header, a damaged checksummed body, a short page and bytes
/// after the page, without decoding the body.
#[test]
fn check_page_takes_presto_pages_and_refuses_damaged_ones() {
    let v1 = vector("v1");
    let v3 = vector("v3");
    assert_eq!(check_page(&v1).unwrap(), expected("v1").0.num_rows());
    assert_eq!(check_page(&v3).unwrap(), expected("v3").0.num_rows());
    let mut body = v3.clone();
    body[60] ^= 1;
    let mut negative = v1.clone();
    negative[12] = 0x80;
    let mut trailing = v1.clone();
    trailing.push(0);
    for (bytes, what) in [
        (body, "checksum mismatch"),
        (v1[..15].to_vec(), "needs 21 bytes"),
        (v1[..60].to_vec(), "claims 89 body bytes"),
        (negative, "negative size"),
        (trailing, "1 bytes after a page"),
    ] {
        let err = check_page(&bytes).unwrap_err().to_string();
        assert!(err.contains(what), "{what}: {err}");
    }
}

/// Each kind of damage gives an error that says what is wrong and where.
#[test]
fn malformed_pages_name_what_and_where() {
    let v1 = vector("v1");
    let schema = expected("v1").0.schema();
    let v3 = vector("v3");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (v1[..15].to_vec(), "needs 21 bytes"),
        (v1[..60].to_vec(), "claims 89 body bytes"),
        // "LONG_ARRAY" -> "LONG_ARRAX"
        (
            {
                let mut b = v1.clone();
                b[38] = b'X';
                b
            },
            "unknown encoding \"LONG_ARRAX\" at byte 25",
        ),
        // A body byte of the checksummed v3.
        (
            {
                let mut b = v3.clone();
                b[60] ^= 1;
                b
            },
            "checksum mismatch",
        ),
        // v1's VARIABLE_WIDTH end offsets [1, 3, 3] -> [1, 0, 3].
        (
            {
                let mut b = v1.clone();
                b[94] = 0;
                b
            },
            "do not run up to",
        ),
        // The column count.
        (
            {
                let mut b = v1.clone();
                b[21] = 3;
                b
            },
            "has 3 columns, the schema 2",
        ),
    ];
    for (bytes, want) in cases {
        let err = decode_page(&bytes, &schema).unwrap_err().to_string();
        assert!(err.contains(want), "{err:?} should say {want:?}");
        assert!(err.starts_with("corrupt input: Presto page"), "{err}");
    }
}

/// Little-endian Presto bytes, for pages partout's encoder would not write.
fn put_i32s(out: &mut Vec<u8>, values: &[i32]) {
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn put_name(out: &mut Vec<u8>, name: &str) {
    put_i32s(out, &[name.len() as i32]);
    out.extend_from_slice(name.as_bytes());
}

/// A LONG_ARRAY block of `values`, none null.
fn put_longs(out: &mut Vec<u8>, values: &[i64]) {
    put_name(out, "LONG_ARRAY");
    put_i32s(out, &[values.len() as i32]);
    out.push(0);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// An unchecksummed, uncompressed page of `rows` rows whose body holds `columns` (blocks).
fn page_of(rows: usize, columns: &[Vec<u8>]) -> Vec<u8> {
    let mut body = Vec::new();
    put_i32s(&mut body, &[columns.len() as i32]);
    for c in columns {
        body.extend_from_slice(c);
    }
    let mut page = Vec::new();
    put_i32s(&mut page, &[rows as i32]);
    page.push(0);
    put_i32s(&mut page, &[body.len() as i32, body.len() as i32]);
    page.extend_from_slice(&[0; 8]);
    page.extend(body);
    page
}

/// Where the first column's block starts in a page.
const FIRST_BLOCK: usize = 21 + 4;

/// One row nested `depth` blocks deep in a single column: `wrap(level)` gives the bytes before
/// and after the block nested at that level, around a one-row LONG_ARRAY. Returns the page and
/// where each level's block starts.
fn nested_page(depth: usize, wrap: impl Fn(usize) -> (Vec<u8>, Vec<u8>)) -> (Vec<u8>, Vec<usize>) {
    let mut column = Vec::new();
    let mut afters = Vec::new();
    let mut starts = Vec::new();
    for level in 0..depth {
        starts.push(FIRST_BLOCK + column.len());
        let (before, after) = wrap(level);
        column.extend(before);
        afters.push(after);
    }
    starts.push(FIRST_BLOCK + column.len());
    put_longs(&mut column, &[7]);
    for after in afters.into_iter().rev() {
        column.extend(after);
    }
    (page_of(1, &[column]), starts)
}

/// RLE blocks of one row, each around the next.
fn rle_in_rle(depth: usize) -> (Vec<u8>, Vec<usize>) {
    nested_page(depth, |_| {
        let mut before = Vec::new();
        put_name(&mut before, "RLE");
        put_i32s(&mut before, &[1]);
        (before, Vec::new())
    })
}

/// DICTIONARY blocks of one row, each the dictionary of the one around it.
fn dictionary_in_dictionary(depth: usize) -> (Vec<u8>, Vec<usize>) {
    nested_page(depth, |_| {
        let mut before = Vec::new();
        put_name(&mut before, "DICTIONARY");
        put_i32s(&mut before, &[1]);
        let mut after = vec![0; 4];
        after.extend([0; 24]);
        (before, after)
    })
}

/// ARRAY, MAP (the nested block as its keys) and ROW blocks of one row, in turn, each around
/// the next.
fn array_map_row_in_each_other(depth: usize) -> (Vec<u8>, Vec<usize>) {
    nested_page(depth, |level| {
        let (mut before, mut after) = (Vec::new(), Vec::new());
        match level % 3 {
            0 => {
                put_name(&mut before, "ARRAY");
                put_i32s(&mut after, &[1, 0, 1]);
                after.push(0);
            }
            1 => {
                put_name(&mut before, "MAP");
                put_longs(&mut after, &[1]);
                put_i32s(&mut after, &[-1, 1, 0, 1]);
                after.push(0);
            }
            _ => {
                put_name(&mut before, "ROW");
                put_i32s(&mut before, &[1]);
                put_i32s(&mut after, &[1, 0, 1]);
                after.push(0);
            }
        }
        (before, after)
    })
}

/// Runs `f` on a thread with a small stack (256 KiB; 1 MiB in debug builds, whose frames are
/// several times larger): a walk that recursed once per nested block of a 10,000-deep page
/// would overflow it and abort the test binary, while 64 levels fit.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let stack = if cfg!(debug_assertions) {
        1 << 20
    } else {
        256 << 10
    };
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn schema_of(data_type: DataType) -> Arc<arrow_schema::Schema> {
    Arc::new(arrow_schema::Schema::new(vec![Field::new(
        "c", data_type, true,
    )]))
}

fn list_of(data_type: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", data_type, true)))
}

/// Decoding (as `data_type`) and inspecting a page nested 10,000 blocks deep: each is an
/// error naming the first block past its limit (three blocks per level of the type; 64 without
/// a schema), found without recursing deeper.
fn assert_too_deep(
    nested: fn(usize) -> (Vec<u8>, Vec<usize>),
    data_type: DataType,
    allowed: usize,
) {
    let (page, starts) = nested(10_000);
    let schema = schema_of(data_type);
    let (decoded, inspected) = on_small_stack(move || {
        (
            decode_page(&page, &schema)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            inspect_pages(&page).map(|_| ()).map_err(|e| e.to_string()),
        )
    });
    let decoded = decoded.unwrap_err();
    let want = format!(
        "block at byte {} is nested {} blocks deep",
        starts[allowed],
        allowed + 1
    );
    assert!(decoded.contains(&want), "{decoded:?} should say {want:?}");
    assert!(
        decoded.starts_with("corrupt input: Presto page"),
        "{decoded}"
    );
    let inspected = inspected.unwrap_err();
    let want = format!("block at byte {} is nested 65 blocks deep", starts[64]);
    assert!(
        inspected.contains(&want),
        "{inspected:?} should say {want:?}"
    );
}

#[test]
fn rle_in_rle_ten_thousand_deep_overflowed_the_stack() {
    assert_too_deep(rle_in_rle, DataType::Int64, 3);
}

#[test]
fn dictionary_in_dictionary_ten_thousand_deep_overflowed_the_stack() {
    assert_too_deep(dictionary_in_dictionary, DataType::Int64, 3);
}

#[test]
fn array_map_row_in_each_other_ten_thousand_deep_overflowed_the_stack() {
    assert_too_deep(
        array_map_row_in_each_other,
        list_of(list_of(DataType::Int64)),
        9,
    );
}

/// What the nesting bound still lets through: an RLE and a DICTIONARY block around a level, in
/// either order, as Presto's Java blocks can nest them, and 64 blocks without a schema.
#[test]
fn nesting_within_the_bounds_decodes() {
    let one = |outer: &str, inner: &str| {
        let mut column = Vec::new();
        for name in [outer, inner] {
            put_name(&mut column, name);
            put_i32s(&mut column, &[1]);
        }
        put_longs(&mut column, &[7]);
        for name in [inner, outer] {
            if name == "DICTIONARY" {
                column.extend([0; 28]);
            }
        }
        page_of(1, &[column])
    };
    let schema = schema_of(DataType::Int64);
    for (outer, inner) in [("RLE", "DICTIONARY"), ("DICTIONARY", "RLE")] {
        let (batch, _) = decode_page(&one(outer, inner), &schema)
            .unwrap_or_else(|e| panic!("{outer}({inner}): {e}"));
        assert_eq!(batch.column(0).as_ref(), &Int64Array::from(vec![7]));
    }
    let (deepest, _) = rle_in_rle(63);
    on_small_stack(move || inspect_pages(&deepest).unwrap());
    // A dictionary of all-null values: DICTIONARY around an RLE of a null.
    let values = Arc::new(Int64Array::from(vec![None, None]));
    let dict =
        DictionaryArray::<Int32Type>::try_new(Int32Array::from(vec![0, 1, 0]), values).unwrap();
    round_trip(&batch(vec![("d", Arc::new(dict))]), PageOptions::default());
}

fn map_of_longs() -> DataType {
    let entries = Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![
            Field::new("keys", DataType::Int64, false),
            Field::new("values", DataType::Int64, true),
        ])),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

/// Checks the decoder made and the inspection walk, then a walk of its own, did not: a MAP's
/// hash table length, a column with fewer rows than its page, bytes after the last column.
/// Both now share one walk and refuse the same pages.
#[test]
fn inspection_skipped_checks_the_decoder_made() {
    // A MAP of one row {1: 2}, with the hash table `hash` (its length first).
    let map = |hash: &[i32]| {
        let mut column = Vec::new();
        put_name(&mut column, "MAP");
        put_longs(&mut column, &[1]);
        put_longs(&mut column, &[2]);
        put_i32s(&mut column, hash);
        put_i32s(&mut column, &[1, 0, 1]);
        column.push(0);
        page_of(1, &[column])
    };
    // A MAP block Java Presto wrote with a hash table ({1: 'AAA', 5: 'B'}; prestodb's
    // Base64Test.cpp): four slots for two entries.
    let java = "030000004d415009000000494e545f4152524159020000000001000000050000000e000000\
                5641524941424c455f574944544802000000030000000400000000040000004141414204000000\
                ffffffffffffffff00000000010000000100000000000000020000000100";
    let java: Vec<u8> = (0..java.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&java[i..i + 2], 16).unwrap())
        .collect();
    let entries = Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![
            Field::new("keys", DataType::Int32, false),
            Field::new("values", DataType::Utf8, true),
        ])),
        false,
    );
    let (batch, _) = decode_page(
        &page_of(1, &[java]),
        &schema_of(DataType::Map(Arc::new(entries), false)),
    )
    .unwrap();
    let keys = batch.column(0).as_map().value(0).column(0).clone();
    assert_eq!(keys.as_ref(), &Int32Array::from(vec![1, 5]));
    let schema = schema_of(map_of_longs());
    for hash in [&[-1][..], &[2, -1, 0]] {
        decode_page(&map(hash), &schema).unwrap_or_else(|e| panic!("{hash:?}: {e}"));
        inspect_pages(&map(hash)).unwrap_or_else(|e| panic!("{hash:?}: {e}"));
    }
    let mut longs = Vec::new();
    put_longs(&mut longs, &[1]);
    let mut trailing = longs.clone();
    trailing.extend([0; 3]);
    let cases = [
        (map(&[-2]), "hash table length -2"),
        (map(&[0]), "hash table length 0"),
        (map(&[4, 0, 0, 0, 0]), "hash table length 4"),
        (map(&[1 << 30]), "hash table length 1073741824"),
        (
            page_of(2, std::slice::from_ref(&longs)),
            "has 1 rows, the page 2",
        ),
        (page_of(1, &[trailing]), "3 bytes left over"),
    ];
    for (page, want) in cases {
        let schema = if want.starts_with("hash") {
            schema_of(map_of_longs())
        } else {
            schema_of(DataType::Int64)
        };
        for err in [
            decode_page(&page, &schema).map(|_| ()).unwrap_err(),
            inspect_pages(&page).map(|_| ()).unwrap_err(),
        ] {
            let err = err.to_string();
            assert!(err.contains(want), "{err:?} should say {want:?}");
        }
    }
}

fn assert_too_large(result: partout_format::Result<impl std::fmt::Debug>, want: &str) {
    match result {
        Err(partout_format::FormatError::TooLarge(what)) => {
            assert!(what.contains(want), "{what:?} should say {want:?}")
        }
        other => panic!("{other:?}: not refused as too large ({want})"),
    }
}

/// An RLE block of four million lists, each of four million RLE elements: 16 * 10^12 values
/// from 100 bytes, which the decoder copied out until memory ran out.
#[test]
fn rle_of_lists_of_rle_copied_terabytes() {
    let mut column = Vec::new();
    put_name(&mut column, "RLE");
    put_i32s(&mut column, &[1 << 22]);
    put_name(&mut column, "ARRAY");
    put_name(&mut column, "RLE");
    put_i32s(&mut column, &[1 << 22]);
    put_longs(&mut column, &[7]);
    put_i32s(&mut column, &[1, 0, 1 << 22]);
    column.push(0);
    let page = page_of(1 << 22, &[column]);
    assert_too_large(
        decode_page(&page, &schema_of(list_of(DataType::Int64))),
        &format!("the RLE block at byte {FIRST_BLOCK}"),
    );
    // Nothing is copied to inspect it.
    assert_eq!(inspect_pages(&page).unwrap()[0].rows, 1 << 22);
}

/// A ROW block of 2,000 empty fields and 16,384 null rows: 110 KB of offsets and null bits,
/// which gave each field 16,384 null rows, 786 MB in all.
#[test]
fn null_rows_of_a_wide_row_block_copied_gigabytes() {
    let fields = 2000;
    let rows = 16_384;
    let mut column = Vec::new();
    put_name(&mut column, "ROW");
    put_i32s(&mut column, &[fields]);
    for _ in 0..fields {
        put_name(&mut column, "INT128_ARRAY");
        put_i32s(&mut column, &[0]);
        column.push(0);
    }
    put_i32s(&mut column, &[rows]);
    put_i32s(&mut column, &vec![0; rows as usize + 1]);
    column.push(1);
    column.extend(vec![0xff; rows as usize / 8]);
    let page = page_of(rows as usize, &[column]);
    let row = Fields::from(
        (0..fields)
            .map(|i| Field::new(format!("f{i}"), DataType::Decimal128(38, 0), true))
            .collect::<Vec<_>>(),
    );
    assert_too_large(
        decode_page(&page, &schema_of(DataType::Struct(row))),
        &format!("the ROW block at byte {FIRST_BLOCK} ({rows} rows, {rows} null, 2000 fields)"),
    );
}

/// A DICTIONARY block whose 20,000 ids all point at one 60 KB value: 140 KB that copied out to
/// 1.2 GB. As an Arrow dictionary nothing is copied, and it decodes.
#[test]
fn dictionary_ids_repeating_a_long_value_copied_gigabytes() {
    let rows = 20_000;
    let long = vec![b'x'; 60_000];
    let mut column = Vec::new();
    put_name(&mut column, "DICTIONARY");
    put_i32s(&mut column, &[rows]);
    put_name(&mut column, "VARIABLE_WIDTH");
    put_i32s(&mut column, &[1, long.len() as i32]);
    column.push(0);
    put_i32s(&mut column, &[long.len() as i32]);
    column.extend(&long);
    put_i32s(&mut column, &vec![0; rows as usize]);
    column.extend([0; 24]);
    let page = page_of(rows as usize, &[column]);
    assert_too_large(
        decode_page(&page, &schema_of(DataType::Utf8)),
        &format!("the DICTIONARY block at byte {FIRST_BLOCK} ({rows} rows)"),
    );
    let keyed = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let (batch, _) = decode_page(&page, &schema_of(keyed)).unwrap();
    assert_eq!(batch.num_rows(), rows as usize);
}

/// Pages of four million rows of one repeated BIGINT each (84 MB of copies from 60 bytes):
/// one decodes, and so do three in one call, but what a call copies adds up over its pages.
#[test]
fn rle_pages_add_up_across_decode_pages() {
    let mut column = Vec::new();
    put_name(&mut column, "RLE");
    put_i32s(&mut column, &[1 << 22]);
    put_longs(&mut column, &[7]);
    let page = page_of(1 << 22, &[column]);
    let schema = schema_of(DataType::Int64);
    assert_eq!(decode_page(&page, &schema).unwrap().0.num_rows(), 1 << 22);
    assert_eq!(decode_pages(&page.repeat(3), &schema).unwrap().len(), 3);
    assert_too_large(
        decode_pages(&page.repeat(4), &schema),
        &format!("the RLE block at byte {}", 3 * page.len() + FIRST_BLOCK),
    );
}

/// Every single-bit flip of checksummed pages (flat, nested and dictionary columns, with and
/// without LZ4) is refused, by the decoder and by inspection. The CRC covers the body, the
/// markers, the row count and the uncompressed size; the size is outside it, and a flip there
/// leaves a body that does not fit the uncompressed size, the bytes that follow, or the CRC;
/// a flip in the checksum field is a mismatch (its high half must be zero).
#[test]
fn every_single_bit_flip_of_a_checksummed_page_is_refused() {
    let mut rng = partout_testkit::rng(11);
    let types: Vec<DataType> = partout_testkit::every_type()
        .into_iter()
        .filter(carried)
        .collect();
    let mixed = without_row(partout_testkit::random_batch(
        &types, 6, 0.3, false, &mut rng,
    ));
    // Repetitive, so that LZ4 pays.
    let rows = 200;
    let mut list = ListBuilder::new(Int64Builder::new());
    for r in 0..rows {
        list.append_value([Some(1), None, Some(r as i64 % 3)]);
    }
    let row = StructArray::try_new(
        Fields::from(vec![
            Field::new("x", DataType::Int64, true),
            Field::new("y", DataType::Utf8, true),
        ]),
        vec![
            Arc::new(Int64Array::from(vec![5; rows])),
            Arc::new(StringArray::from(vec!["row"; rows])),
        ],
        Some((0..rows).map(|r| r % 4 != 1).collect::<Vec<_>>().into()),
    )
    .unwrap();
    let dict = DictionaryArray::<Int32Type>::try_new(
        Int32Array::from((0..rows as i32).map(|r| r % 2).collect::<Vec<_>>()),
        Arc::new(StringArray::from(vec!["p", "q"])),
    )
    .unwrap();
    let repetitive = batch(vec![
        (
            "s",
            Arc::new(StringArray::from(vec!["the same words"; rows])),
        ),
        ("l", Arc::new(list.finish())),
        ("r", Arc::new(row)),
        ("d", Arc::new(dict)),
    ]);
    let mut compressed = 0;
    for batch in [&mixed, &repetitive] {
        for lz4 in [false, true] {
            let mut page = Vec::new();
            encode_page(
                batch,
                PageOptions {
                    checksum: true,
                    lz4,
                },
                &mut page,
            )
            .unwrap();
            compressed += usize::from(page[4] & 0x01 != 0);
            decode_page(&page, &batch.schema()).unwrap();
            for bit in 0..page.len() * 8 {
                let mut flipped = page.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                let decoded = decode_page(&flipped, &batch.schema());
                assert!(
                    decoded.is_err(),
                    "lz4 {lz4}: bit {bit} (byte {}) flipped went unnoticed",
                    bit / 8
                );
                assert!(inspect_pages(&flipped).is_err(), "lz4 {lz4}: bit {bit}");
            }
        }
    }
    assert!(compressed >= 1, "no page was compressed");
}

/// A run-end encoded column goes out as Presto's own repetition blocks: RLE where the page
/// holds one run, DICTIONARY of the runs' values otherwise (a sliced array's runs from its
/// offset); decoded as the same type, the runs come back as they were. A list view goes out as
/// an ARRAY of its ranges and comes back a list view of the same lists.
#[test]
fn runs_go_out_as_rle_or_dictionary_and_come_back_as_runs() {
    use arrow_array::{Array, RunArray, types::Int16Type};
    let runs: ArrayRef = Arc::new(
        RunArray::try_new(
            &arrow_array::Int16Array::from(vec![3, 5, 9, 10]),
            &StringArray::from(vec![Some("a"), None, Some("b"), Some("a")]),
        )
        .unwrap(),
    );
    for (array, encoding, ends) in [
        (runs.clone(), "DICTIONARY", vec![3i16, 5, 9, 10]),
        (runs.slice(4, 4), "DICTIONARY", vec![1, 4]),
        (runs.slice(5, 3), "RLE", vec![3]),
    ] {
        let batch = RecordBatch::try_from_iter([("r", array.clone())]).unwrap();
        let mut page = Vec::new();
        encode_page(&batch, PageOptions::default(), &mut page).unwrap();
        let info = inspect_pages(&page).unwrap();
        assert_eq!(info[0].columns[0].encoding, encoding);
        assert_eq!(info[0].columns[0].children[0].encoding, "VARIABLE_WIDTH");
        let (decoded, _) = decode_page(&page, &batch.schema()).unwrap();
        assert_eq!(decoded.column(0).as_ref(), array.as_ref());
        let decoded = decoded.column(0).as_run::<Int16Type>().clone();
        assert_eq!(decoded.run_ends().values(), &ends[..]);
    }
    // Flat blocks decoded as runs: a run per row.
    let flat = RecordBatch::try_from_iter([(
        "r",
        Arc::new(StringArray::from(vec!["x", "x"])) as ArrayRef,
    )])
    .unwrap();
    let mut page = Vec::new();
    encode_page(&flat, PageOptions::default(), &mut page).unwrap();
    let schema = arrow_schema::Schema::new(vec![Field::new(
        "r",
        partout_testkit::run_end_encoded(DataType::Int16, DataType::Utf8),
        true,
    )]);
    let (decoded, _) = decode_page(&page, &schema).unwrap();
    let decoded = decoded.column(0).as_run::<Int16Type>().clone();
    assert_eq!(decoded.run_ends().values(), &[1, 2]);
    assert_eq!(decoded.len(), 2);

    let views: ArrayRef = Arc::new(
        arrow_array::ListViewArray::try_new(
            Arc::new(Field::new("item", DataType::Int64, true)),
            vec![2, 0, 1].into(),
            vec![2, 3, 0].into(),
            Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
            Some(vec![true, true, false].into()),
        )
        .unwrap(),
    );
    let batch = RecordBatch::try_from_iter([("v", views.clone())]).unwrap();
    let mut page = Vec::new();
    encode_page(&batch, PageOptions::default(), &mut page).unwrap();
    assert_eq!(
        inspect_pages(&page).unwrap()[0].columns[0].encoding,
        "ARRAY"
    );
    let (decoded, _) = decode_page(&page, &batch.schema()).unwrap();
    assert_eq!(decoded.column(0).as_ref(), views.as_ref());
}

/// A run-end encoded column of 16-bit run ends cannot hold a page of more rows than they
/// count: an error naming the type, not a wrapped run end.
#[test]
fn a_page_too_long_for_its_run_ends_is_an_error() {
    let rows = i16::MAX as usize + 1;
    let flat =
        RecordBatch::try_from_iter([("r", Arc::new(Int64Array::from(vec![7; rows])) as ArrayRef)])
            .unwrap();
    let mut page = Vec::new();
    encode_page(&flat, PageOptions::default(), &mut page).unwrap();
    let schema = arrow_schema::Schema::new(vec![Field::new(
        "r",
        partout_testkit::run_end_encoded(DataType::Int16, DataType::Int64),
        true,
    )]);
    let err = decode_page(&page, &schema).unwrap_err().to_string();
    assert!(err.contains("32768 rows, past what RunEndEncoded"), "{err}");
}

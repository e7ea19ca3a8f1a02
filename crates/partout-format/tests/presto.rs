//! Presto pages: the vectors Presto 0.296's own serde wrote, byte for byte and value for value;
//! random round trips of every type Presto carries; malformed pages as errors.

use arrow_array::builder::{Int64Builder, ListBuilder, MapBuilder, StringBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray,
    Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, RecordBatch,
    StringArray, StructArray, TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Fields};
use partout_format::presto::{PageOptions, decode_page, decode_pages, encode_page, inspect_pages};
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
        DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) => {
            has_dictionary(f.data_type())
        }
        DataType::Struct(fields) => fields.iter().any(|f| has_dictionary(f.data_type())),
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
                let _ = inspect_pages(&changed);
                if *checksummed && at >= 21 {
                    assert!(decoded.is_err(), "a change at byte {at} went unnoticed");
                }
            }
        }
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

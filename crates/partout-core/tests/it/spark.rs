//! Spark's hash partitioning against vectors Spark 4.3 computed itself
//! (`tests/data/spark_hash_vectors.csv`), in every Arrow layout a key can arrive in.

use arrow_array::builder::StringDictionaryBuilder;
use arrow_array::types::Int32Type;
use arrow_array::*;
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use partout_core::ids::{PartitionIds, Partitioning, spark};
use std::sync::Arc;

/// A parsed vector: one value per key column (`None` for null), the hash and pmod 7.
struct Vector {
    types: Vec<String>,
    values: Vec<Option<String>>,
    hash: i32,
    pmod7: u32,
}

/// Splits a CSV line honouring double-quoted fields with doubled quotes.
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                fields.last_mut().unwrap().push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            c => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

fn vectors() -> Vec<Vector> {
    let text = include_str!("../data/spark_hash_vectors.csv");
    text.lines()
        .skip(1)
        .map(|line| {
            let f = csv_fields(line);
            assert_eq!(f.len(), 4, "{line}");
            let (types, values) = if let Some(inner) = f[0].strip_prefix("hash(") {
                let types = inner
                    .trim_end_matches(')')
                    .split(',')
                    .map(str::to_string)
                    .collect();
                let values = f[1].trim_start_matches('[').trim_end_matches(']');
                (
                    types,
                    values.split("; ").map(str::to_string).collect::<Vec<_>>(),
                )
            } else {
                (vec![f[0].clone()], vec![f[1].clone()])
            };
            Vector {
                types,
                values: values
                    .into_iter()
                    .map(|v| (v != "null").then_some(v))
                    .collect(),
                hash: f[2].parse().unwrap(),
                pmod7: f[3].parse().unwrap(),
            }
        })
        .collect()
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn parse_date(s: &str) -> i32 {
    let p: Vec<i64> = s.split('-').map(|x| x.parse().unwrap()).collect();
    days_from_civil(p[0], p[1], p[2]) as i32
}

fn parse_micros(s: &str) -> i64 {
    let s = s.trim_end_matches('Z');
    let (date, time) = s.split_once('T').unwrap();
    let (hms, frac) = time.split_once('.').unwrap();
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    i64::from(parse_date(date)) * 86_400_000_000
        + (t[0] * 3600 + t[1] * 60 + t[2]) * 1_000_000
        + frac.parse::<i64>().unwrap()
}

fn parse_decimal(s: &str) -> i128 {
    s.replace('.', "").parse().unwrap()
}

/// Every Arrow layout a Spark value of `spark_type` may arrive in.
fn layouts(spark_type: &str, value: &Option<String>) -> Vec<ArrayRef> {
    let v = value.as_deref();
    let mut out: Vec<ArrayRef> = Vec::new();
    match spark_type {
        "tinyint" => out.push(Arc::new(Int8Array::from(vec![
            v.map(|v| v.parse().unwrap()),
        ]))),
        "smallint" => out.push(Arc::new(Int16Array::from(vec![
            v.map(|v| v.parse().unwrap()),
        ]))),
        "int" => {
            let x: Option<i32> = v.map(|v| v.parse().unwrap());
            out.push(Arc::new(Int32Array::from(vec![x])));
            out.push(Arc::new(DictionaryArray::<Int32Type>::new(
                Int32Array::from(vec![x.map(|_| 1)]),
                Arc::new(Int32Array::from(vec![Some(99), x.or(Some(0))])),
            )));
        }
        "bigint" => out.push(Arc::new(Int64Array::from(vec![
            v.map(|v| v.parse::<i64>().unwrap()),
        ]))),
        "float" => out.push(Arc::new(Float32Array::from(vec![
            v.map(|v| v.parse::<f32>().unwrap()),
        ]))),
        "double" => out.push(Arc::new(Float64Array::from(vec![
            v.map(|v| v.parse::<f64>().unwrap()),
        ]))),
        "boolean" => out.push(Arc::new(BooleanArray::from(vec![v.map(|v| v == "true")]))),
        "string" => {
            let s: Option<String> = v.map(|v| serde_json::from_str(v).unwrap());
            out.push(Arc::new(StringArray::from(vec![s.clone()])));
            out.push(Arc::new(LargeStringArray::from(vec![s.clone()])));
            out.push(Arc::new(StringViewArray::from(vec![s.clone()])));
            let mut dict = StringDictionaryBuilder::<Int32Type>::new();
            dict.append_value("another value");
            dict.append_option(s.as_deref());
            out.push(Arc::new(dict.finish().slice(1, 1)));
        }
        "binary" => {
            let b: Option<Vec<u8>> = v.map(|v| {
                let hex = v.trim_start_matches("0x");
                (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect()
            });
            out.push(Arc::new(BinaryArray::from(vec![b.as_deref()])));
            out.push(Arc::new(LargeBinaryArray::from(vec![b.as_deref()])));
            out.push(Arc::new(BinaryViewArray::from(vec![b.as_deref()])));
        }
        "date" => {
            let d = v.map(parse_date);
            out.push(Arc::new(Date32Array::from(vec![d])));
            out.push(Arc::new(Date64Array::from(vec![
                d.map(|d| i64::from(d) * 86_400_000 + 1234),
            ])));
        }
        "timestamp" | "timestamp_ntz" => {
            let zone: Option<Arc<str>> = (spark_type == "timestamp").then(|| "UTC".into());
            let us = v.map(parse_micros);
            out.push(Arc::new(
                TimestampMicrosecondArray::from(vec![us]).with_timezone_opt(zone.clone()),
            ));
            out.push(Arc::new(
                TimestampNanosecondArray::from(vec![us.map(|u| u * 1000 + 999)])
                    .with_timezone_opt(zone.clone()),
            ));
            if us.is_none_or(|u| u % 1000 == 0) {
                out.push(Arc::new(
                    TimestampMillisecondArray::from(vec![us.map(|u| u / 1000)])
                        .with_timezone_opt(zone.clone()),
                ));
            }
            if us.is_none_or(|u| u % 1_000_000 == 0) {
                out.push(Arc::new(
                    TimestampSecondArray::from(vec![us.map(|u| u / 1_000_000)])
                        .with_timezone_opt(zone),
                ));
            }
        }
        t if t.starts_with("decimal(") => {
            let (p, s) = t["decimal(".len()..t.len() - 1].split_once(',').unwrap();
            let (p, s): (u8, i8) = (p.parse().unwrap(), s.parse().unwrap());
            let unscaled = v.map(parse_decimal);
            out.push(Arc::new(
                Decimal128Array::from(vec![unscaled])
                    .with_precision_and_scale(p, s)
                    .unwrap(),
            ));
            out.push(Arc::new(
                Decimal256Array::from(vec![unscaled.map(arrow_buffer::i256::from_i128)])
                    .with_precision_and_scale(p, s)
                    .unwrap(),
            ));
            if p <= 18 {
                out.push(Arc::new(
                    Decimal64Array::from(vec![unscaled.map(|u| u as i64)])
                        .with_precision_and_scale(p, s)
                        .unwrap(),
                ));
            }
        }
        other => panic!("no layout for Spark type {other}"),
    }
    out
}

#[test]
fn every_spark_vector_in_every_layout() {
    let vectors = vectors();
    assert_eq!(vectors.len(), 132, "the vector file is complete");
    let mut checked = 0;
    for vector in vectors {
        let per_column: Vec<Vec<ArrayRef>> = vector
            .types
            .iter()
            .zip(&vector.values)
            .map(|(t, v)| layouts(t, v))
            .collect();
        // Every combination of layouts for a two-column key would be many; pair the i-th
        // layouts, cycling the shorter list.
        let combos = per_column.iter().map(Vec::len).max().unwrap();
        for c in 0..combos {
            let columns: Vec<ArrayRef> =
                per_column.iter().map(|l| l[c % l.len()].clone()).collect();
            let fields: Vec<Field> = columns
                .iter()
                .enumerate()
                .map(|(i, a)| Field::new(format!("k{i}"), a.data_type().clone(), true))
                .collect();
            let batch =
                RecordBatch::try_new(Arc::new(Schema::new(fields)), columns.clone()).unwrap();
            let mut hashes = vec![spark::SEED];
            for column in &columns {
                spark::update(column.as_ref(), &mut hashes).unwrap();
            }
            let desc = format!(
                "{:?} {:?} as {:?}",
                vector.types,
                vector.values,
                columns
                    .iter()
                    .map(|c| c.data_type().to_string())
                    .collect::<Vec<_>>()
            );
            assert_eq!(hashes[0] as i32, vector.hash, "hash of {desc}");
            let keys: Vec<usize> = (0..columns.len()).collect();
            let mut ids =
                PartitionIds::try_new(Partitioning::spark(keys, 7), &batch.schema()).unwrap();
            let mut out = Vec::new();
            ids.compute(&batch, &mut out).unwrap();
            assert_eq!(out, [vector.pmod7], "pmod 7 of {desc}");
            checked += 1;
        }
    }
    // 132 vectors, most of them in several layouts.
    assert!(checked > 2 * 132, "only {checked} layouts checked");
}

/// The columnar loops and the one-value-at-a-time reference agree, with nulls, slices and
/// batches of many rows (the vectors above are one row each), for every type with a columnar
/// loop (the list types have none: their elements go through the reference, held instead to
/// the independent implementation below).
#[test]
fn columnar_paths_match_the_row_reference() {
    use partout_testkit::{random_sliced_array, rng};
    let mut rng = rng(17);
    let types = [
        DataType::Boolean,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::Float32,
        DataType::Float64,
        DataType::Date32,
        DataType::Date64,
        DataType::Timestamp(TimeUnit::Second, None),
        DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        DataType::Duration(TimeUnit::Millisecond),
        DataType::Decimal32(9, 2),
        DataType::Decimal64(18, 3),
        DataType::Decimal128(10, 2),
        DataType::Decimal128(38, 10),
        DataType::Decimal256(18, 0),
        DataType::Decimal256(40, 5),
        DataType::Utf8,
        DataType::LargeBinary,
        DataType::Utf8View,
        DataType::BinaryView,
        DataType::FixedSizeBinary(3),
        DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::Utf8)),
        DataType::Struct(
            vec![
                Field::new("a", DataType::Int64, true),
                Field::new("b", DataType::Utf8View, true),
                Field::new(
                    "c",
                    DataType::Struct(vec![Field::new("d", DataType::Date64, true)].into()),
                    true,
                ),
            ]
            .into(),
        ),
    ];
    for data_type in types {
        for density in [0.0, 0.5] {
            let column = random_sliced_array(&data_type, 300, density, &mut rng);
            let seeds: Vec<u32> = (0..300u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
            let mut columnar = seeds.clone();
            spark::update(column.as_ref(), &mut columnar).unwrap();
            for (i, (&got, &seed)) in columnar.iter().zip(&seeds).enumerate() {
                let want = if column.is_valid(i) {
                    spark::row_hash(column.as_ref(), i, seed)
                } else {
                    seed
                };
                assert_eq!(got, want, "{data_type} row {i}");
            }
        }
    }
}

/// Spark's Murmur3 (`Murmur3_x86_32` with Spark's `hashUnsafeBytes` tail), written from the
/// Java source's definition one step at a time, sharing no code with `spark.rs`.
mod murmur3 {
    fn mix(h: u32, k: u32) -> u32 {
        let k = k.wrapping_mul(0xcc9e_2d51);
        let k = k.rotate_left(15);
        let k = k.wrapping_mul(0x1b87_3593);
        let h = h ^ k;
        let h = h.rotate_left(13);
        h.wrapping_mul(5).wrapping_add(0xe654_6b64)
    }

    fn finish(h: u32, length: u32) -> u32 {
        let mut h = h ^ length;
        h ^= h >> 16;
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2_ae35);
        h ^ (h >> 16)
    }

    pub fn int(value: i32, seed: u32) -> u32 {
        finish(mix(seed, value as u32), 4)
    }

    pub fn long(value: i64, seed: u32) -> u32 {
        let low = (value & 0xffff_ffff) as u32;
        let high = ((value >> 32) & 0xffff_ffff) as u32;
        finish(mix(mix(seed, low), high), 8)
    }

    pub fn bytes(data: &[u8], seed: u32) -> u32 {
        let mut h = seed;
        let whole = data.len() / 4 * 4;
        let mut i = 0;
        while i < whole {
            let word = u32::from(data[i])
                | u32::from(data[i + 1]) << 8
                | u32::from(data[i + 2]) << 16
                | u32::from(data[i + 3]) << 24;
            h = mix(h, word);
            i += 4;
        }
        while i < data.len() {
            // Spark mixes each tail byte on its own, as a sign-extended int.
            h = mix(h, i32::from(data[i] as i8) as u32);
            i += 1;
        }
        finish(h, data.len() as u32)
    }

    /// Java's `BigInteger.toByteArray()` of a big-endian two's complement number: as many
    /// bytes as `bitLength() / 8 + 1`.
    pub fn java_big_integer_bytes(be: &[u8]) -> &[u8] {
        let negative = be[0] & 0x80 != 0;
        let mut leading = 0;
        for &b in be {
            let b = if negative { !b } else { b };
            if b == 0 {
                leading += 8;
            } else {
                leading += b.leading_zeros() as usize;
                break;
            }
        }
        let bit_length = be.len() * 8 - leading;
        &be[be.len() - (bit_length / 8 + 1)..]
    }
}

/// Spark's hash of row `row` of `column` over `seed`, independently of `spark.rs`: a null
/// leaves the seed; arrays and structs chain over their non-null elements and fields.
fn independent_hash(column: &dyn Array, row: usize, seed: u32) -> u32 {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    if column.is_null(row) {
        return seed;
    }
    let chain = |elements: ArrayRef, seed: u32| {
        (0..elements.len()).fold(seed, |h, j| independent_hash(elements.as_ref(), j, h))
    };
    match column.data_type() {
        DataType::Int16 => murmur3::int(
            i32::from(column.as_primitive::<Int16Type>().value(row)),
            seed,
        ),
        DataType::Int32 => murmur3::int(column.as_primitive::<Int32Type>().value(row), seed),
        DataType::Int64 => murmur3::long(column.as_primitive::<Int64Type>().value(row), seed),
        DataType::Date64 => {
            // Spark dates are whole days: milliseconds floored to days.
            let millis = column.as_primitive::<Date64Type>().value(row);
            let days = millis.div_euclid(86_400_000);
            murmur3::int(days as i32, seed)
        }
        DataType::Decimal128(p, _) => {
            let v = column.as_primitive::<Decimal128Type>().value(row);
            if *p <= 18 {
                murmur3::long(v as i64, seed)
            } else {
                murmur3::bytes(murmur3::java_big_integer_bytes(&v.to_be_bytes()), seed)
            }
        }
        DataType::Decimal256(p, _) => {
            let v = column.as_primitive::<Decimal256Type>().value(row);
            if *p <= 18 {
                murmur3::long(v.as_i128() as i64, seed)
            } else {
                murmur3::bytes(murmur3::java_big_integer_bytes(&v.to_be_bytes()), seed)
            }
        }
        DataType::Utf8 => murmur3::bytes(column.as_string::<i32>().value(row).as_bytes(), seed),
        DataType::Utf8View => murmur3::bytes(column.as_string_view().value(row).as_bytes(), seed),
        DataType::FixedSizeBinary(_) => {
            murmur3::bytes(column.as_fixed_size_binary().value(row), seed)
        }
        DataType::List(_) => chain(column.as_list::<i32>().value(row), seed),
        DataType::LargeList(_) => chain(column.as_list::<i64>().value(row), seed),
        DataType::FixedSizeList(_, _) => chain(column.as_fixed_size_list().value(row), seed),
        DataType::Struct(_) => {
            let fields = column.as_struct().columns();
            fields
                .iter()
                .fold(seed, |h, field| independent_hash(field.as_ref(), row, h))
        }
        other => panic!("no independent hash for {other}"),
    }
}

/// The published vectors of Spark's Murmur3 hold the independent implementation too.
#[test]
fn the_independent_murmur3_gives_the_published_vectors() {
    assert_eq!(murmur3::long(1, spark::SEED), 0x99f0_149d);
    assert_eq!(murmur3::long(-1, spark::SEED), 0xc800_8529);
    assert_eq!(murmur3::int(1, spark::SEED), 0xdea5_78e3);
    assert_eq!(murmur3::bytes(b"", spark::SEED), 142_593_372);
    assert_eq!(murmur3::bytes(b"hello", spark::SEED), 3_286_402_344);
    assert_eq!(
        murmur3::java_big_integer_bytes(&128i128.to_be_bytes()),
        &[0x00, 0x80]
    );
    assert_eq!(
        murmur3::java_big_integer_bytes(&(-129i128).to_be_bytes()),
        &[0xff, 0x7f]
    );
    assert_eq!(
        murmur3::java_big_integer_bytes(&0i128.to_be_bytes()),
        &[0x00]
    );
    assert_eq!(
        murmur3::java_big_integer_bytes(&(-1i128).to_be_bytes()),
        &[0xff]
    );
}

/// The types the Spark vectors do not reach (lists, structs, fixed-size binary) and those
/// whose wide values take another path (Date64, decimals above 18 digits), on many rows with
/// nulls and slices: both the columnar update and the row reference equal an independent
/// implementation.
#[test]
fn nested_and_wide_types_match_an_independent_murmur3() {
    use partout_testkit::{random_sliced_array, rng};
    let mut rng = rng(29);
    let item = |t: DataType| Arc::new(Field::new("item", t, true));
    let types = [
        DataType::Date64,
        DataType::Decimal128(38, 10),
        DataType::Decimal256(40, 5),
        DataType::Decimal256(18, 2),
        DataType::FixedSizeBinary(3),
        DataType::List(item(DataType::Int32)),
        DataType::LargeList(item(DataType::Utf8)),
        DataType::FixedSizeList(item(DataType::Int16), 2),
        DataType::List(item(DataType::List(item(DataType::Int64)))),
        DataType::Struct(
            vec![
                Field::new("a", DataType::Int64, true),
                Field::new("b", DataType::Utf8View, true),
                Field::new("c", DataType::List(item(DataType::Int32)), true),
            ]
            .into(),
        ),
    ];
    for data_type in types {
        for density in [0.0, 0.5] {
            let column = random_sliced_array(&data_type, 200, density, &mut rng);
            let seeds: Vec<u32> = (0..200u32).map(|i| i.wrapping_mul(2_246_822_519)).collect();
            let mut columnar = seeds.clone();
            spark::update(column.as_ref(), &mut columnar).unwrap();
            for (i, (&got, &seed)) in columnar.iter().zip(&seeds).enumerate() {
                let want = independent_hash(column.as_ref(), i, seed);
                assert_eq!(got, want, "{data_type} row {i} (columnar)");
                if column.is_valid(i) {
                    let reference = spark::row_hash(column.as_ref(), i, seed);
                    assert_eq!(reference, want, "{data_type} row {i} (row reference)");
                }
            }
        }
    }
}

#[test]
fn types_spark_cannot_hash_are_refused_up_front() {
    for data_type in [
        DataType::UInt64,
        DataType::Time64(TimeUnit::Nanosecond),
        DataType::Interval(arrow_schema::IntervalUnit::MonthDayNano),
    ] {
        let schema = Schema::new(vec![Field::new("k", data_type.clone(), true)]);
        let err = PartitionIds::try_new(Partitioning::spark([0], 8), &schema).unwrap_err();
        assert!(err.to_string().contains(&data_type.to_string()), "{err}");
    }
}

/// An independent, plainly written Spark Murmur3 (the benchmark's baseline) agrees with the
/// columnar implementation on random keys with nulls.
#[test]
fn the_naive_baseline_agrees() {
    use partout_testkit::baseline::NaiveSparkHash;
    let mut rng = partout_testkit::rng(23);
    for types in [
        vec![DataType::Int64],
        vec![DataType::Utf8View],
        vec![DataType::Int64, DataType::Utf8],
    ] {
        let columns: Vec<ArrayRef> = types
            .iter()
            .map(|t| partout_testkit::random_sliced_array(t, 500, 0.3, &mut rng))
            .collect();
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("k{i}"), c.data_type().clone(), true))
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let keys: Vec<usize> = (0..types.len()).collect();
        for n in [1, 7, 200, 1000] {
            let (mut ours, mut naive) = (Vec::new(), Vec::new());
            PartitionIds::try_new(Partitioning::spark(keys.clone(), n), &batch.schema())
                .unwrap()
                .compute(&batch, &mut ours)
                .unwrap();
            NaiveSparkHash.ids(&batch, &keys, n, &mut naive);
            assert_eq!(ours, naive, "{types:?} over {n}");
        }
    }
}

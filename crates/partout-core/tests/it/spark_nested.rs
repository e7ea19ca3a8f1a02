//! Spark's hash partitioning of nested keys (arrays, structs, arrays of structs, structs of
//! arrays, arrays of arrays, and decimals, dates and timestamps inside them) against vectors
//! Spark 4.3 computed itself (`tests/data/spark_nested_vectors.json`, written by
//! `spark_nested_vectors.py`). Each key type's vectors are replayed together as one multi-row
//! column and one at a time, whole and sliced, in every Arrow layout partout accepts for it.

use arrow_array::types::{Int16Type, Int32Type};
use arrow_array::*;
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer, i256};
use arrow_schema::{DataType, Field, Fields, Schema};
use partout_core::PartoutError;
use partout_core::ids::{PartitionIds, Partitioning, spark};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The vectors in the file: a change to the generator must come with its output.
const VECTORS: usize = 125;

/// How many layout variants each batch is built in (see [`Layout`]); the most options any
/// one Spark type has.
const VARIANTS: usize = 4;

/// One vector: the key columns' Spark types and values, Spark's hash, and its pmod for each
/// partition count.
struct Vector {
    types: Vec<String>,
    values: Vec<Value>,
    hash: i32,
    pmod: Vec<(u32, u32)>,
}

/// The generator's output.
struct VectorFile {
    partitions: Vec<u32>,
    vectors: Vec<Vector>,
}

impl VectorFile {
    fn load() -> Self {
        let json: Value =
            serde_json::from_str(include_str!("../data/spark_nested_vectors.json")).unwrap();
        assert_eq!(json["seed"], 42, "Spark's hash seed");
        assert_eq!(json["session_time_zone"], "UTC");
        // The premises the vectors rest on, as the generator recorded them from PySpark (facts
        // about Spark, not checks of partout: the tests below hold partout to the vectors).
        // Spark's own repartition put every row where `pmod(hash(key), n)` says, nested keys
        // among them; and Spark refused to hash a map.
        let checks = json["repartition_check"].as_array().unwrap();
        let mut nested = BTreeSet::new();
        for check in checks {
            assert_eq!(check["rows_not_in_pmod_hash_partition"], 0, "{check}");
            assert_eq!(check["partitions_used"], check["partitions"], "{check}");
            let key = check["key"].as_str().unwrap();
            assert!(
                matches!(
                    SparkType::parse(key),
                    SparkType::Array(_) | SparkType::Struct(_)
                ),
                "{key} is not nested"
            );
            nested.insert(key.to_string());
        }
        assert!(nested.len() >= 3, "{nested:?}");
        assert!(
            json["map_hash_refused"].is_string(),
            "Spark hashed a map: {}",
            json["map_hash_refused"]
        );
        let partitions: Vec<u32> = json["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap() as u32)
            .collect();
        let vectors = json["vectors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let strings = |x: &Value| -> Vec<String> {
                    x.as_array()
                        .unwrap()
                        .iter()
                        .map(|t| t.as_str().unwrap().to_string())
                        .collect()
                };
                let types = strings(&v["types"]);
                let values = v["values"].as_array().unwrap().clone();
                assert_eq!(types.len(), values.len(), "{v}");
                let pmod = partitions
                    .iter()
                    .map(|&n| (n, v["pmod"][n.to_string()].as_u64().unwrap() as u32))
                    .collect();
                Vector {
                    types,
                    values,
                    hash: i32::try_from(v["hash"].as_i64().unwrap()).unwrap(),
                    pmod,
                }
            })
            .collect();
        Self {
            partitions,
            vectors,
        }
    }

    /// The vectors grouped by key types, in file order.
    fn groups(&self) -> Vec<(&[String], Vec<&Vector>)> {
        let mut groups: Vec<(&[String], Vec<&Vector>)> = Vec::new();
        for v in &self.vectors {
            match groups.iter_mut().find(|(t, _)| *t == v.types.as_slice()) {
                Some((_, group)) => group.push(v),
                None => groups.push((&v.types, vec![v])),
            }
        }
        groups
    }
}

/// A Spark SQL type, as its DDL string names it.
#[derive(Debug)]
enum SparkType {
    Boolean,
    Byte,
    Short,
    Int,
    Long,
    Float,
    Double,
    String,
    Binary,
    Date,
    /// `timestamp` (an instant, `utc`) or `timestamp_ntz` (a wall-clock time).
    Timestamp {
        utc: bool,
    },
    Decimal(u8, i8),
    Array(Box<SparkType>),
    Struct(Vec<(String, SparkType)>),
}

impl SparkType {
    /// Parses Spark's DDL form: `array<struct<a:int,b:decimal(10,2)>>`.
    fn parse(ddl: &str) -> Self {
        let mut rest = ddl;
        let parsed = Self::parse_prefix(&mut rest);
        assert!(rest.is_empty(), "{ddl}: left over {rest:?}");
        parsed
    }

    fn parse_prefix(rest: &mut &str) -> Self {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..end];
        *rest = &rest[end..];
        let expect = |token: &str, rest: &mut &str| {
            *rest = rest
                .strip_prefix(token)
                .unwrap_or_else(|| panic!("expected {token} at {rest:?}"));
        };
        match name {
            "boolean" => Self::Boolean,
            "tinyint" => Self::Byte,
            "smallint" => Self::Short,
            "int" => Self::Int,
            "bigint" => Self::Long,
            "float" => Self::Float,
            "double" => Self::Double,
            "string" => Self::String,
            "binary" => Self::Binary,
            "date" => Self::Date,
            "timestamp" => Self::Timestamp { utc: true },
            "timestamp_ntz" => Self::Timestamp { utc: false },
            "decimal" => {
                expect("(", rest);
                let (p, tail) = rest.split_once(',').unwrap();
                let (s, tail) = tail.split_once(')').unwrap();
                *rest = tail;
                Self::Decimal(p.parse().unwrap(), s.parse().unwrap())
            }
            "array" => {
                expect("<", rest);
                let element = Self::parse_prefix(rest);
                expect(">", rest);
                Self::Array(Box::new(element))
            }
            "struct" => {
                expect("<", rest);
                let mut fields = Vec::new();
                loop {
                    let (field, tail) = rest.split_once(':').unwrap();
                    *rest = tail;
                    fields.push((field.to_string(), Self::parse_prefix(rest)));
                    if let Some(tail) = rest.strip_prefix(',') {
                        *rest = tail;
                    } else {
                        expect(">", rest);
                        return Self::Struct(fields);
                    }
                }
            }
            other => panic!("unknown Spark type {other}"),
        }
    }
}

/// One row of a column being built: a vector's value, a null, or a row of filler that must
/// not count (rows sliced away, the content behind a null list or struct).
#[derive(Clone, Copy)]
enum Slot<'a> {
    Value(&'a Value),
    Null,
    Filler,
}

impl<'a> Slot<'a> {
    fn of(value: &'a Value) -> Self {
        if value.is_null() {
            Self::Null
        } else {
            Self::Value(value)
        }
    }
}

/// Which Arrow layout each level of a column takes: option `(variant + depth) % options` of
/// the layouts its Spark type has, so that a nested column mixes layouts across its levels.
/// A sliced layout builds every level with filler rows before and after, then slices them off.
#[derive(Clone, Copy, Debug)]
struct Layout {
    variant: usize,
    depth: usize,
    sliced: bool,
}

impl Layout {
    fn pick(self, options: usize) -> usize {
        (self.variant + self.depth) % options
    }

    fn child(self) -> Self {
        Self {
            depth: self.depth + 1,
            ..self
        }
    }
}

/// The column of `slots` of type `spark_type` in `layout`.
fn build(spark_type: &SparkType, slots: &[Slot], layout: Layout) -> ArrayRef {
    if !layout.sliced {
        return build_whole(spark_type, slots, layout);
    }
    let padded: Vec<Slot> = [Slot::Filler, Slot::Filler]
        .into_iter()
        .chain(slots.iter().copied())
        .chain([Slot::Filler])
        .collect();
    build_whole(spark_type, &padded, layout).slice(2, slots.len())
}

/// Every slot's value read by `read`, the filler as `filler`, nulls as `None`.
fn scalars<'a, T: Copy>(
    slots: &[Slot<'a>],
    read: impl Fn(&'a Value) -> T,
    filler: T,
) -> Vec<Option<T>> {
    slots
        .iter()
        .map(|slot| match slot {
            Slot::Value(v) => Some(read(v)),
            Slot::Null => None,
            Slot::Filler => Some(filler),
        })
        .collect()
}

/// A null buffer marking the null slots (none if there are none).
fn nulls(slots: &[Slot]) -> Option<NullBuffer> {
    let valid: Vec<bool> = slots.iter().map(|s| !matches!(s, Slot::Null)).collect();
    valid.contains(&false).then(|| NullBuffer::from(valid))
}

/// `plain` as a dictionary whose values are `plain` reversed, so that every key differs from
/// its row number. Null rows alternate between a null key and a key to a null value: both
/// are null to Spark.
fn dictionary<K: arrow_array::types::ArrowDictionaryKeyType>(plain: &ArrayRef) -> ArrayRef
where
    K::Native: TryFrom<usize>,
{
    let n = plain.len();
    let reversed = UInt32Array::from_iter_values((0..n as u32).rev());
    let values = arrow_select::take::take(plain.as_ref(), &reversed, None).unwrap();
    let key = |i: usize| K::Native::try_from(n - 1 - i).ok().unwrap();
    let mut nulls_seen = 0;
    let keys: PrimitiveArray<K> = (0..n)
        .map(|i| {
            if plain.is_valid(i) {
                return Some(key(i));
            }
            nulls_seen += 1;
            (nulls_seen % 2 == 0).then(|| key(i))
        })
        .collect();
    Arc::new(DictionaryArray::<K>::try_new(keys, values).unwrap())
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// Days since 1970-01-01 of a proleptic Gregorian `yyyy-mm-dd`.
fn days(date: &str) -> i32 {
    let p: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (y, m, d) = (if p[1] <= 2 { p[0] - 1 } else { p[0] }, p[1], p[2]);
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    (era * 146_097 + day_of_era - 719_468) as i32
}

/// Microseconds since the epoch of `yyyy-mm-ddTHH:MM:SS.ffffff` (with `Z` for an instant).
fn micros(timestamp: &str) -> i64 {
    let (date, time) = timestamp.trim_end_matches('Z').split_once('T').unwrap();
    let (hms, fraction) = time.split_once('.').unwrap();
    assert_eq!(fraction.len(), 6, "{timestamp}");
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    i64::from(days(date)) * 86_400_000_000
        + (t[0] * 3600 + t[1] * 60 + t[2]) * 1_000_000
        + fraction.parse::<i64>().unwrap()
}

/// The unscaled value of a decimal written with exactly `scale` digits after the point.
fn unscaled(decimal: &str, scale: i8) -> i128 {
    let digits_after = decimal.split_once('.').map_or(0, |(_, f)| f.len());
    assert_eq!(digits_after, scale as usize, "{decimal} at scale {scale}");
    decimal.replace('.', "").parse().unwrap()
}

fn bytes(v: &Value) -> Vec<u8> {
    let hex = text(v).strip_prefix("0x").unwrap();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Builds the column without slicing it: every Spark type dispatches to its layouts here.
fn build_whole(spark_type: &SparkType, slots: &[Slot], layout: Layout) -> ArrayRef {
    let fits =
        |values: &[Option<i64>], max: i64| values.iter().flatten().all(|v| (0..=max).contains(v));
    match spark_type {
        SparkType::Boolean => Arc::new(BooleanArray::from(scalars(
            slots,
            |v| v.as_bool().unwrap(),
            true,
        ))),
        SparkType::Byte => Arc::new(Int8Array::from(scalars(slots, |v| int(v) as i8, 99))),
        SparkType::Short => Arc::new(Int16Array::from(scalars(slots, |v| int(v) as i16, 99))),
        SparkType::Int => {
            // Spark hashes every integer up to 32 bits as an int: UInt16 holds the same
            // values when they fit.
            let values = scalars(slots, int, 99);
            let plain: ArrayRef = Arc::new(Int32Array::from_iter(
                values.iter().map(|v| v.map(|v| v as i32)),
            ));
            let mut options = vec![plain.clone(), dictionary::<Int32Type>(&plain)];
            if fits(&values, i64::from(u16::MAX)) {
                options.push(Arc::new(UInt16Array::from_iter(
                    values.iter().map(|v| v.map(|v| v as u16)),
                )));
            }
            options.swap_remove(layout.pick(options.len()))
        }
        SparkType::Long => {
            // UInt32 is hashed as a long too.
            let values = scalars(slots, int, 99);
            let mut options: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(values.clone()))];
            if fits(&values, i64::from(u32::MAX)) {
                options.push(Arc::new(UInt32Array::from_iter(
                    values.iter().map(|v| v.map(|v| v as u32)),
                )));
            }
            options.swap_remove(layout.pick(options.len()))
        }
        SparkType::Float => Arc::new(Float32Array::from(scalars(
            slots,
            |v| text(v).parse::<f32>().unwrap(),
            2.5,
        ))),
        SparkType::Double => Arc::new(Float64Array::from(scalars(
            slots,
            |v| text(v).parse::<f64>().unwrap(),
            2.5,
        ))),
        SparkType::String => {
            let values = scalars(slots, text, "filler");
            let plain: ArrayRef = Arc::new(StringArray::from(values.clone()));
            match layout.pick(4) {
                0 => plain,
                1 => Arc::new(LargeStringArray::from(values)),
                2 => Arc::new(StringViewArray::from(values)),
                _ => dictionary::<Int16Type>(&plain),
            }
        }
        SparkType::Binary => {
            let values: Vec<Option<Vec<u8>>> = slots
                .iter()
                .map(|slot| match slot {
                    Slot::Value(v) => Some(bytes(v)),
                    Slot::Null => None,
                    Slot::Filler => Some(b"filler".to_vec()),
                })
                .collect();
            let refs: Vec<Option<&[u8]>> = values.iter().map(Option::as_deref).collect();
            let mut options: Vec<ArrayRef> = vec![
                Arc::new(BinaryArray::from(refs.clone())),
                Arc::new(LargeBinaryArray::from(refs.clone())),
                Arc::new(BinaryViewArray::from(refs)),
            ];
            // Fixed-size binary when every value has the same (non-zero) width; the filler
            // takes that width.
            let widths: BTreeSet<usize> = slots
                .iter()
                .zip(&values)
                .filter(|(s, _)| matches!(s, Slot::Value(_)))
                .map(|(_, v)| v.as_ref().unwrap().len())
                .collect();
            if let [width] = widths.into_iter().collect::<Vec<_>>()[..]
                && width > 0
            {
                let fixed = slots.iter().zip(&values).map(|(slot, v)| match slot {
                    Slot::Filler => Some(vec![0xab; width]),
                    _ => v.clone(),
                });
                options.push(Arc::new(
                    FixedSizeBinaryArray::try_from_sparse_iter_with_size(fixed, width as i32)
                        .unwrap(),
                ));
            }
            options.swap_remove(layout.pick(options.len()))
        }
        SparkType::Date => {
            let d = scalars(slots, |v| days(text(v)), 12_345);
            match layout.pick(2) {
                0 => Arc::new(Date32Array::from(d)),
                // Date64 is milliseconds; a time within the day does not change the date.
                _ => Arc::new(Date64Array::from_iter(
                    d.iter()
                        .map(|d| d.map(|d| i64::from(d) * 86_400_000 + 1_234)),
                )),
            }
        }
        SparkType::Timestamp { utc } => {
            let us = scalars(slots, |v| micros(text(v)), 1_000_000_000_000);
            let zone = |z: &str| utc.then(|| Arc::<str>::from(z));
            let whole = |unit: i64| us.iter().flatten().all(|u| u % unit == 0);
            // Arrow stores an instant in UTC whatever the zone says: the zone is for display,
            // and the hash must not depend on it.
            let mut options: Vec<ArrayRef> = vec![Arc::new(
                TimestampMicrosecondArray::from(us.clone()).with_timezone_opt(zone("UTC")),
            )];
            // Nanoseconds (999 more than the microsecond, floored away) reach only the years
            // 1677 to 2262.
            let nanos: Option<Vec<Option<i64>>> = us
                .iter()
                .map(|u| match u {
                    Some(u) => u
                        .checked_mul(1000)
                        .and_then(|n| n.checked_add(999))
                        .map(Some),
                    None => Some(None),
                })
                .collect();
            if let Some(nanos) = nanos {
                options.push(Arc::new(
                    TimestampNanosecondArray::from(nanos).with_timezone_opt(zone("UTC")),
                ));
            }
            if whole(1000) {
                options.push(Arc::new(
                    TimestampMillisecondArray::from_iter(us.iter().map(|u| u.map(|u| u / 1000)))
                        .with_timezone_opt(zone("Europe/Paris")),
                ));
            }
            if whole(1_000_000) {
                options.push(Arc::new(
                    TimestampSecondArray::from_iter(us.iter().map(|u| u.map(|u| u / 1_000_000)))
                        .with_timezone_opt(zone("+05:30")),
                ));
            }
            options.swap_remove(layout.pick(options.len()))
        }
        SparkType::Decimal(p, s) => {
            let (p, s) = (*p, *s);
            let v = scalars(slots, |v| unscaled(text(v), s), 7);
            let mut options: Vec<ArrayRef> = vec![
                Arc::new(
                    Decimal128Array::from(v.clone())
                        .with_precision_and_scale(p, s)
                        .unwrap(),
                ),
                Arc::new(
                    Decimal256Array::from_iter(v.iter().map(|v| v.map(i256::from_i128)))
                        .with_precision_and_scale(p, s)
                        .unwrap(),
                ),
            ];
            if p <= 18 {
                options.push(Arc::new(
                    Decimal64Array::from_iter(v.iter().map(|v| v.map(|v| v as i64)))
                        .with_precision_and_scale(p, s)
                        .unwrap(),
                ));
            }
            if p <= 9 {
                options.push(Arc::new(
                    Decimal32Array::from_iter(v.iter().map(|v| v.map(|v| v as i32)))
                        .with_precision_and_scale(p, s)
                        .unwrap(),
                ));
            }
            options.swap_remove(layout.pick(options.len()))
        }
        SparkType::Array(element) => build_list(element, slots, layout),
        SparkType::Struct(fields) => {
            // A null struct keeps filler in its fields: Spark's hash must skip it.
            let children: Vec<ArrayRef> = fields
                .iter()
                .map(|(name, field_type)| {
                    let field_slots: Vec<Slot> = slots
                        .iter()
                        .map(|slot| match slot {
                            Slot::Value(v) => Slot::of(
                                v.get(name)
                                    .unwrap_or_else(|| panic!("no field {name} in {v}")),
                            ),
                            Slot::Null | Slot::Filler => Slot::Filler,
                        })
                        .collect();
                    build(field_type, &field_slots, layout.child())
                })
                .collect();
            let arrow_fields: Fields = fields
                .iter()
                .zip(&children)
                .map(|((name, _), c)| Field::new(name, c.data_type().clone(), true))
                .collect();
            Arc::new(StructArray::try_new(arrow_fields, children, nulls(slots)).unwrap())
        }
    }
}

/// The elements of an array value.
fn items<'a>(slot: &Slot<'a>) -> Option<&'a Vec<Value>> {
    match slot {
        Slot::Value(v) => Some(v.as_array().unwrap_or_else(|| panic!("not an array: {v}"))),
        _ => None,
    }
}

/// An array column as a List, a LargeList, or (when every array has the same non-zero length)
/// a FixedSizeList. A null array keeps filler elements behind it: Spark's hash must skip them.
fn build_list(element: &SparkType, slots: &[Slot], layout: Layout) -> ArrayRef {
    let lengths: BTreeSet<usize> = slots.iter().filter_map(items).map(Vec::len).collect();
    let fixed = match lengths.into_iter().collect::<Vec<_>>()[..] {
        [length] if length > 0 => Some(length),
        _ => None,
    };
    let kind = layout.pick(if fixed.is_some() { 3 } else { 2 });
    // The elements of every row, and where each row ends.
    let mut elements: Vec<Slot> = Vec::new();
    let mut ends = vec![0usize];
    for slot in slots {
        match (items(slot), fixed) {
            (Some(values), _) => elements.extend(values.iter().map(Slot::of)),
            (None, Some(length)) if kind == 2 => {
                elements.extend(std::iter::repeat_n(Slot::Filler, length));
            }
            (None, _) if matches!(slot, Slot::Null) => elements.push(Slot::Filler),
            (None, _) => elements.extend([Slot::Filler, Slot::Filler]),
        }
        ends.push(elements.len());
    }
    let values = build(element, &elements, layout.child());
    let field = Arc::new(Field::new("item", values.data_type().clone(), true));
    match kind {
        0 => {
            let offsets: Vec<i32> = ends.iter().map(|&e| e as i32).collect();
            Arc::new(
                ListArray::try_new(
                    field,
                    OffsetBuffer::new(ScalarBuffer::from(offsets)),
                    values,
                    nulls(slots),
                )
                .unwrap(),
            )
        }
        1 => {
            let offsets: Vec<i64> = ends.iter().map(|&e| e as i64).collect();
            Arc::new(
                LargeListArray::try_new(
                    field,
                    OffsetBuffer::new(ScalarBuffer::from(offsets)),
                    values,
                    nulls(slots),
                )
                .unwrap(),
            )
        }
        _ => Arc::new(
            FixedSizeListArray::try_new(field, fixed.unwrap() as i32, values, nulls(slots))
                .unwrap(),
        ),
    }
}

/// Short names of every level of `data_type` (`List`, `Decimal256`, `Timestamp(Second)`, ...).
fn layout_names(data_type: &DataType, names: &mut BTreeSet<String>) {
    let name = match data_type {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            layout_names(f.data_type(), names);
            format!("{data_type:?}")
                .split('(')
                .next()
                .unwrap()
                .to_string()
        }
        DataType::Struct(fields) => {
            fields
                .iter()
                .for_each(|f| layout_names(f.data_type(), names));
            "Struct".into()
        }
        DataType::Dictionary(_, value) => {
            layout_names(value, names);
            "Dictionary".into()
        }
        DataType::Timestamp(unit, _) => format!("Timestamp({unit:?})"),
        DataType::Decimal32(..) => "Decimal32".into(),
        DataType::Decimal64(..) => "Decimal64".into(),
        DataType::Decimal128(..) => "Decimal128".into(),
        DataType::Decimal256(..) => "Decimal256".into(),
        DataType::FixedSizeBinary(_) => "FixedSizeBinary".into(),
        other => format!("{other:?}"),
    };
    names.insert(name);
}

/// Replays `vectors` (all of the same key types) as one batch built in `layout`: Spark's hash
/// from the columnar update and from the row reference, and Spark's pmod from the public
/// partitioning, for every row. Returns the Arrow types of the key columns.
fn replay(
    types: &[SparkType],
    vectors: &[&Vector],
    layout: Layout,
    partitions: &[u32],
) -> Vec<DataType> {
    let columns: Vec<ArrayRef> = types
        .iter()
        .enumerate()
        .map(|(c, t)| {
            let slots: Vec<Slot> = vectors.iter().map(|v| Slot::of(&v.values[c])).collect();
            build(t, &slots, layout)
        })
        .collect();
    for column in &columns {
        column.to_data().validate_full().unwrap();
    }
    let arrow_types: Vec<DataType> = columns.iter().map(|c| c.data_type().clone()).collect();
    let describe = |row: usize| {
        format!(
            "{:?} = {} as {} ({layout:?}, row {row} of {})",
            vectors[row].types,
            Value::from(vectors[row].values.clone()),
            arrow_types
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            vectors.len(),
        )
    };

    let mut hashes = vec![spark::SEED; vectors.len()];
    for column in &columns {
        spark::update(column.as_ref(), &mut hashes).unwrap();
    }
    for (row, vector) in vectors.iter().enumerate() {
        assert_eq!(hashes[row] as i32, vector.hash, "hash of {}", describe(row));
        let reference = columns.iter().fold(spark::SEED, |h, c| {
            if c.is_valid(row) {
                spark::row_hash(c.as_ref(), row, h)
            } else {
                h
            }
        });
        assert_eq!(
            reference as i32,
            vector.hash,
            "row reference hash of {}",
            describe(row)
        );
    }

    let fields: Vec<Field> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| Field::new(format!("k{i}"), c.data_type().clone(), true))
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let keys: Vec<usize> = (0..types.len()).collect();
    for &n in partitions {
        let mut ids =
            PartitionIds::try_new(Partitioning::spark(keys.clone(), n), &batch.schema()).unwrap();
        let mut out = Vec::new();
        ids.compute(&batch, &mut out).unwrap();
        for (row, vector) in vectors.iter().enumerate() {
            let want = vector.pmod.iter().find(|(m, _)| *m == n).unwrap().1;
            assert_eq!(out[row], want, "pmod {n} of {}", describe(row));
        }
    }
    arrow_types
}

#[test]
fn every_nested_spark_vector_in_every_layout() {
    let file = VectorFile::load();
    assert_eq!(file.vectors.len(), VECTORS, "the vector file is complete");
    let mut names = BTreeSet::new();
    let mut batches = 0;
    for (types, group) in file.groups() {
        let parsed: Vec<SparkType> = types.iter().map(|t| SparkType::parse(t)).collect();
        for variant in 0..VARIANTS {
            for sliced in [false, true] {
                let layout = Layout {
                    variant,
                    depth: 0,
                    sliced,
                };
                // All the type's vectors in one column, then each on its own (where the
                // layouts that need equal lengths, fixed-size lists and binaries, fit more
                // often).
                let singles = group.iter().map(std::slice::from_ref);
                for vectors in std::iter::once(group.as_slice()).chain(singles) {
                    for t in replay(&parsed, vectors, layout, &file.partitions) {
                        layout_names(&t, &mut names);
                    }
                    batches += 1;
                }
            }
        }
    }
    // Every layout the builders offer was reached by some vector.
    let expected = [
        "List",
        "LargeList",
        "FixedSizeList",
        "Struct",
        "Dictionary",
        "Int8",
        "Int16",
        "Int32",
        "UInt16",
        "Int64",
        "UInt32",
        "Boolean",
        "Float32",
        "Float64",
        "Utf8",
        "LargeUtf8",
        "Utf8View",
        "Binary",
        "LargeBinary",
        "BinaryView",
        "FixedSizeBinary",
        "Date32",
        "Date64",
        "Timestamp(Second)",
        "Timestamp(Millisecond)",
        "Timestamp(Microsecond)",
        "Timestamp(Nanosecond)",
        "Decimal32",
        "Decimal64",
        "Decimal128",
        "Decimal256",
    ];
    let missing: Vec<&str> = expected
        .into_iter()
        .filter(|n| !names.contains(*n))
        .collect();
    assert!(missing.is_empty(), "layouts never built: {missing:?}");
    assert!(batches > 8 * VECTORS, "only {batches} batches replayed");
}

/// Spark refuses to hash a map (its entries have no order); partout refuses it too, at the
/// top level and nested.
#[test]
fn maps_are_refused_as_spark_refuses_them() {
    // (That Spark refuses them is a premise of the vector file, checked as it loads.)
    let _ = VectorFile::load();
    let entries = Field::new(
        "entries",
        DataType::Struct(
            vec![
                Field::new("key", DataType::Int32, false),
                Field::new("value", DataType::Utf8, true),
            ]
            .into(),
        ),
        false,
    );
    let map = DataType::Map(Arc::new(entries), false);
    let nested = DataType::List(Arc::new(Field::new("item", map.clone(), true)));
    for data_type in [map, nested] {
        let schema = Schema::new(vec![Field::new("k", data_type.clone(), true)]);
        let err = PartitionIds::try_new(Partitioning::spark([0], 7), &schema).unwrap_err();
        assert!(
            matches!(err, PartoutError::UnsupportedType { .. }),
            "{data_type}: {err}"
        );
    }
}

//! The type lists: every Arrow type the scatter supports (flat and nested), the ones it refuses,
//! and which of them Presto pages carry without loss.

use arrow_schema::{DataType, Field, Fields, IntervalUnit, TimeUnit, UnionFields, UnionMode};
use std::sync::Arc;

/// A nullable field.
pub(crate) fn field(name: &str, data_type: DataType) -> Field {
    Field::new(name, data_type, true)
}

fn list_of(data_type: DataType) -> DataType {
    DataType::List(Arc::new(field("item", data_type)))
}

fn map_of(key: DataType, value: DataType) -> DataType {
    let entries = Fields::from(vec![
        Field::new("key", key, false),
        Field::new("value", value, true),
    ]);
    DataType::Map(
        Arc::new(Field::new("entries", DataType::Struct(entries), false)),
        false,
    )
}

/// The flat (non-nested) types the scatter supports.
pub fn flat_types() -> Vec<DataType> {
    use DataType::*;
    let mut types = vec![
        Null,
        Boolean,
        Int8,
        Int16,
        Int32,
        Int64,
        UInt8,
        UInt16,
        UInt32,
        UInt64,
        Float16,
        Float32,
        Float64,
        Decimal32(9, 2),
        Decimal64(18, 3),
        Decimal128(38, 10),
        Decimal256(76, 20),
        Date32,
        Date64,
        Time32(TimeUnit::Second),
        Time32(TimeUnit::Millisecond),
        Time64(TimeUnit::Microsecond),
        Time64(TimeUnit::Nanosecond),
        Timestamp(TimeUnit::Second, None),
        Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        Timestamp(TimeUnit::Microsecond, Some("+05:30".into())),
        Timestamp(TimeUnit::Nanosecond, None),
        Duration(TimeUnit::Second),
        Duration(TimeUnit::Millisecond),
        Duration(TimeUnit::Microsecond),
        Duration(TimeUnit::Nanosecond),
        Interval(IntervalUnit::YearMonth),
        Interval(IntervalUnit::DayTime),
        Interval(IntervalUnit::MonthDayNano),
        FixedSizeBinary(3),
        FixedSizeBinary(16),
        Utf8,
        LargeUtf8,
        Binary,
        LargeBinary,
        Utf8View,
        BinaryView,
    ];
    for key in [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64] {
        types.push(Dictionary(Box::new(key), Box::new(Utf8)));
    }
    types.push(Dictionary(Box::new(Int32), Box::new(Int64)));
    types
}

/// Nested types the scatter supports, with nesting depth 2 or more.
pub fn nested_types() -> Vec<DataType> {
    use DataType::*;
    let point = Fields::from(vec![field("x", Boolean), field("y", Utf8View)]);
    vec![
        Struct(Fields::from(vec![
            field("a", Int32),
            field("b", Utf8),
            field("c", list_of(Int64)),
        ])),
        Struct(Fields::empty()),
        list_of(Int32),
        list_of(list_of(Utf8)),
        LargeList(Arc::new(field("item", Struct(point)))),
        FixedSizeList(Arc::new(field("item", Int16)), 3),
        FixedSizeList(Arc::new(field("item", list_of(Int8))), 2),
        FixedSizeList(Arc::new(field("item", Int64)), 0),
        list_of(Dictionary(Box::new(UInt16), Box::new(Utf8View))),
        map_of(Utf8, Int64),
        map_of(Int32, list_of(Utf8)),
        Union(
            UnionFields::try_new(
                vec![0, 3],
                vec![field("i", Int32), field("s", list_of(Utf8))],
            )
            .expect("valid union fields"),
            UnionMode::Sparse,
        ),
        Union(
            UnionFields::try_new(
                vec![2, 7, 9],
                vec![
                    field("i", Int64),
                    field("s", Utf8View),
                    field("l", list_of(Int16)),
                ],
            )
            .expect("valid union fields"),
            UnionMode::Dense,
        ),
        ListView(Arc::new(field("item", Int32))),
        LargeListView(Arc::new(field("item", list_of(Utf8)))),
        ListView(Arc::new(field(
            "item",
            Struct(Fields::from(vec![field("a", Utf8)])),
        ))),
        run_end_encoded(Int16, Utf8),
        run_end_encoded(Int32, Int64),
        run_end_encoded(Int64, list_of(Int32)),
        run_end_encoded(Int32, Dictionary(Box::new(Int8), Box::new(Utf8))),
    ]
}

/// Run-end encoded values of `values` with run ends of `run_ends`, as Arrow writers name the
/// children.
pub fn run_end_encoded(run_ends: DataType, values: DataType) -> DataType {
    DataType::RunEndEncoded(
        Arc::new(Field::new("run_ends", run_ends, false)),
        Arc::new(Field::new("values", values, true)),
    )
}

/// Every type the scatter supports: [`flat_types`] then [`nested_types`].
pub fn every_type() -> Vec<DataType> {
    let mut types = flat_types();
    types.extend(nested_types());
    types
}

/// Whether Presto pages carry `data_type` without loss: a type the encoder takes
/// ([`partout_format::presto::can_encode`]) whose every value comes back (timestamps only in
/// milliseconds, Presto's unit). With `same_layout`, also only types that decode to the very
/// Arrow layout they were written from (no Null, FixedSizeBinary, dictionary or timestamp).
pub fn presto_carries(data_type: &DataType, same_layout: bool) -> bool {
    use DataType::*;
    let lossless = |t: &DataType| match t {
        Timestamp(unit, _) => *unit == TimeUnit::Millisecond && !same_layout,
        Null | FixedSizeBinary(_) | Dictionary(_, _) => !same_layout,
        _ => true,
    };
    partout_format::presto::can_encode(data_type) && every_nested(data_type, &lossless)
}

/// Whether `check` holds for `data_type` and every type nested in it.
fn every_nested(data_type: &DataType, check: &dyn Fn(&DataType) -> bool) -> bool {
    use DataType::*;
    check(data_type)
        && match data_type {
            List(f) | LargeList(f) | ListView(f) | LargeListView(f) | Map(f, _) => {
                every_nested(f.data_type(), check)
            }
            RunEndEncoded(_, values) => every_nested(values.data_type(), check),
            Struct(fields) => fields.iter().all(|f| every_nested(f.data_type(), check)),
            Dictionary(_, value) => every_nested(value, check),
            _ => true,
        }
}

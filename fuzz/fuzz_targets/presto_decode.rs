//! Presto page decoding on arbitrary bytes: the first byte picks the schema the pages are
//! decoded as, the rest are the pages. Errors are fine; panics, hangs and huge allocations are
//! findings.
#![no_main]

use arrow_schema::{DataType, Field, Fields, Schema};
use libfuzzer_sys::fuzz_target;
use partout_format::presto::{decode_pages, inspect_pages};
use std::sync::Arc;

fn schemas() -> Vec<Arc<Schema>> {
    let item = |t: DataType| Arc::new(Field::new("item", t, true));
    let row = Fields::from(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Utf8, true),
    ]);
    let entries = Arc::new(Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![
            Field::new("keys", DataType::Utf8, false),
            Field::new("values", DataType::Int64, true),
        ])),
        false,
    ));
    let one = |t: DataType| Arc::new(Schema::new(vec![Field::new("c", t, true)]));
    vec![
        one(DataType::Int64),
        one(DataType::Utf8),
        one(DataType::Decimal128(38, 2)),
        one(DataType::Boolean),
        one(DataType::List(item(DataType::Int64))),
        one(DataType::Map(entries, false)),
        one(DataType::Struct(row)),
        one(DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))),
        Arc::new(Schema::new(vec![
            Field::new("b", DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
        ])),
    ]
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, pages)) = data.split_first() else {
        return;
    };
    let schemas = schemas();
    let schema = &schemas[pick as usize % schemas.len()];
    let _ = decode_pages(pages, schema);
    let _ = inspect_pages(pages);
});

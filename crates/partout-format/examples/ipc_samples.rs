//! Writes Arrow IPC streams with partout's encoder for other readers to check (the Python
//! tests read them with pyarrow): `cargo run -p partout-format --example ipc_samples -- DIR`.
//!
//! Every value is a function of its row number, so a reader can recompute what it should find:
//! `id = i`, `name = "row-{i}"` (null when `i % 7 == 3`), `label` = the same as Utf8View with
//! every fifth value longer than 12 bytes, `score = i * 0.5`, `tags = [i, i + 1]` (Int32),
//! in batches of 1000 rows, 2500 rows per stream; one file per compression.

use arrow_array::builder::{Int32Builder, ListBuilder};
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, StringViewArray};
use arrow_schema::{Field, Schema};
use partout_format::ipc::{Compression, IpcStreamEncoder};
use std::sync::Arc;

const ROWS: usize = 2500;
const BATCH: usize = 1000;

fn batch(start: usize, len: usize) -> RecordBatch {
    let rows = start..start + len;
    let name = |i: usize| (i % 7 != 3).then(|| format!("row-{i}"));
    let label = |i: usize| {
        if i.is_multiple_of(5) {
            format!("a longer label {i}")
        } else {
            format!("l{i}")
        }
    };
    let mut tags = ListBuilder::new(Int32Builder::new());
    for i in rows.clone() {
        tags.values().append_value(i as i32);
        tags.values().append_value(i as i32 + 1);
        tags.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.clone().map(|i| i as i64))),
        Arc::new(StringArray::from_iter(rows.clone().map(name))),
        Arc::new(StringViewArray::from_iter_values(rows.clone().map(label))),
        Arc::new(Float64Array::from_iter_values(
            rows.clone().map(|i| i as f64 * 0.5),
        )),
        Arc::new(tags.finish()),
    ];
    let fields: Vec<Field> = ["id", "name", "label", "score", "tags"]
        .iter()
        .zip(&columns)
        .map(|(name, column)| Field::new(*name, column.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("a valid batch")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: ipc_samples DIR")?;
    std::fs::create_dir_all(&dir)?;
    for (name, compression) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4Frame),
        ("zstd", Compression::Zstd),
    ] {
        let schema = batch(0, 0).schema();
        let mut encoder = IpcStreamEncoder::try_new(schema, compression)?;
        let mut bytes = Vec::new();
        for start in (0..ROWS).step_by(BATCH) {
            // Slices of a larger batch, as a partitioner's destinations are.
            let whole = batch(start, BATCH.min(ROWS - start) + 10);
            encoder.encode(&whole.slice(0, BATCH.min(ROWS - start)), &mut bytes)?;
        }
        encoder.finish(&mut bytes)?;
        std::fs::write(format!("{dir}/samples.{name}.arrows"), bytes)?;
    }
    Ok(())
}

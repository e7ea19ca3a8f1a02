//! Partitioning by value where far more values are allowed than are met: the values met are
//! what is charged, so a high `--max-partitions` keeps rows buffered, and Parquet files of the
//! values in the input's first rows are written as flushed; workers turn to sorted runs only
//! once more values are met than their buffers were planned for, and every row still lands
//! once in its value's file, in Parquet and in Arrow IPC files.

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use partout_job::{Format, JobOptions, Manifest, repartition};
use std::path::Path;
use std::sync::Arc;

/// Spread over `values` values.
fn spread(values: i64) -> impl Fn(i64) -> i64 {
    move |i| i * 7919 % values
}

/// Rows `0..total` in batches of 20,000: `id`, `v = key(id)` and a string of the id.
fn input(path: &Path, total: i64, key: &dyn Fn(i64) -> i64) {
    let batch = |start: i64| {
        let ids = start..start + 20_000;
        RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
            ),
            (
                "v",
                Arc::new(Int64Array::from_iter_values(ids.clone().map(key))),
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(ids.map(|i| format!("s{i}")))),
            ),
        ])
        .unwrap()
    };
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch(0).schema(), None).unwrap();
    for start in (0..total).step_by(20_000) {
        writer.write(&batch(start)).unwrap();
        writer.flush().unwrap();
    }
    writer.close().unwrap();
}

/// Each destination's batches, read by parquet's or arrow-ipc's own reader.
fn read(out: &Path, name: &str, format: Format) -> Vec<RecordBatch> {
    let file = std::fs::File::open(out.join(name)).unwrap();
    match format {
        Format::Parquet => ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .map(Result::unwrap)
            .collect(),
        _ => arrow_ipc::reader::FileReader::try_new(file, None)
            .unwrap()
            .map(Result::unwrap)
            .collect(),
    }
}

/// Checks that every row of `0..total` is in its value's file (`key`'s) once, intact.
fn every_row_once(
    out: &Path,
    manifest: &Manifest,
    format: Format,
    (values, total): (i64, i64),
    key: &dyn Fn(i64) -> i64,
) {
    assert_eq!(manifest.destinations.len() as i64, values);
    let mut seen = vec![false; total as usize];
    for entry in &manifest.destinations {
        let name = entry
            .only_file()
            .map(|f| f.name.as_str())
            .unwrap()
            .to_string();
        let value: i64 = name
            .strip_prefix("v=")
            .and_then(|n| n.split('/').next())
            .unwrap()
            .parse()
            .unwrap();
        let mut rows = 0;
        for batch in read(out, &name, format) {
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let s = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            for r in 0..batch.num_rows() {
                let i = ids.value(r);
                assert_eq!(key(i), value, "row {i} in {name}");
                assert_eq!(s.value(r), format!("s{i}"));
                assert!(
                    !std::mem::replace(&mut seen[i as usize], true),
                    "row {i} twice"
                );
            }
            rows += batch.num_rows() as u64;
        }
        assert_eq!(rows, entry.rows, "{name}");
    }
    assert!(seen.iter().all(|&s| s), "a row lost");
}

#[test]
fn a_hundred_thousand_allowed_keep_four_values_buffered() {
    let dir = tempfile::tempdir().unwrap();
    let (values, total) = (4, 400_000);
    let path = dir.path().join("in.parquet");
    input(&path, total, &spread(values));
    let out = dir.path().join("out");
    let report = repartition(
        JobOptions::new([&path], &out, 1)
            .with_partition_by(["v"])
            .with_max_partitions(100_000)
            .with_threads(2),
    )
    .unwrap();
    let manifest = &report.manifest;
    let budget = manifest.memory_budget;
    assert!(!budget.sorted_runs, "{budget:?}");
    assert!(budget.sorted_runs_past > 0, "{budget:?}");
    // The first rows hold four values: their files are written as flushed.
    assert!(budget.parquet_writers_open > 0, "{budget:?}");
    assert!(
        manifest
            .workers
            .iter()
            .all(|w| w.sorted_runs_from_row.is_none()),
        "{:?}",
        manifest.workers
    );
    every_row_once(
        &out,
        manifest,
        Format::Parquet,
        (values, total),
        &spread(values),
    );
}

#[test]
fn workers_turn_to_sorted_runs_past_the_values_planned_and_every_row_lands_once() {
    let dir = tempfile::tempdir().unwrap();
    let (values, total) = (3_000, 1_200_000);
    let path = dir.path().join("in.parquet");
    input(&path, total, &spread(values));
    for format in [Format::Parquet, Format::Ipc] {
        let out = dir.path().join(format!("out-{format}"));
        let report = repartition(
            JobOptions::new([&path], &out, 1)
                .with_partition_by(["v"])
                .with_max_partitions(20_000)
                .with_format(format)
                .with_threads(2)
                // Buffers planned for a few hundred values.
                .with_memory_limit(64 << 20),
        )
        .unwrap();
        let manifest = &report.manifest;
        let planned = manifest.memory_budget.sorted_runs_past;
        // Every value is in the first rows: more than writers, so staged from the start.
        assert_eq!(manifest.memory_budget.parquet_writers_open, 0, "{format}");
        assert!(
            (64..values as u64).contains(&planned),
            "{format}: {:?}",
            manifest.memory_budget
        );
        // Each worker turned once more values were met than planned, early in its rows.
        for worker in &manifest.workers {
            let turned = worker.sorted_runs_from_row;
            assert!(
                turned.is_some_and(|rows| rows > 0 && rows < total as u64 / 2),
                "{format}: {worker:?}"
            );
        }
        every_row_once(&out, manifest, format, (values, total), &spread(values));
    }
}

#[test]
fn files_written_as_flushed_for_the_first_values_turn_to_sorted_runs_when_many_follow() {
    let dir = tempfile::tempdir().unwrap();
    // Two values in the first 200,000 rows, then 3,000.
    let (values, total) = (3_000, 1_200_000);
    let key = |i: i64| match i < 200_000 {
        true => i % 2,
        false => spread(values)(i),
    };
    let path = dir.path().join("in.parquet");
    input(&path, total, &key);
    let out = dir.path().join("out");
    let report = repartition(
        JobOptions::new([&path], &out, 1)
            .with_partition_by(["v"])
            .with_max_partitions(20_000)
            .with_threads(2)
            .with_memory_limit(64 << 20),
    )
    .unwrap();
    let manifest = &report.manifest;
    let budget = manifest.memory_budget;
    assert!(budget.parquet_writers_open > 0, "{budget:?}");
    assert!(
        (64..values as u64).contains(&budget.sorted_runs_past),
        "{budget:?}"
    );
    // Each worker turned once more values were met than planned, after the first rows.
    for worker in &manifest.workers {
        let turned = worker.sorted_runs_from_row;
        assert!(
            turned.is_some_and(|rows| rows > 0 && rows < total as u64),
            "{worker:?}"
        );
    }
    every_row_once(&out, manifest, Format::Parquet, (values, total), &key);
}

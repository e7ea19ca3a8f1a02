//! Parquet output, written from staged rows or as flushed (few files, or the first values
//! met partitioning by value): every row once and intact in its destination's file for many
//! types, row groups as large as the destination up to 1Mi rows, 10,000
//! destinations within 256 MiB, Snappy unless asked otherwise, and no scratch file left after
//! a run, whether it succeeded or failed.

use arrow_array::builder::{Int32Builder, ListBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array,
    RecordBatch, StringArray, StructArray, UInt32Array,
};
use arrow_schema::{DataType, Field};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::PageIndexPolicy;
use partout_core::ids::{PartitionIds, Partitioning};
use partout_job::{
    Compression, Job, JobError, JobOptions, Manifest, ParquetSettings, Progress, repartition,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows `start..start + len` of many types, with nulls: `id` (the row), `k` (the key, null for
/// every 13th), a string, a list, a struct, a date, a decimal and a boolean.
fn rows(start: i64, len: i64) -> RecordBatch {
    let ids = start..start + len;
    let mut list = ListBuilder::new(Int32Builder::new());
    for i in ids.clone() {
        match i % 5 {
            0 => list.append_null(),
            1 => list.append(true),
            _ => {
                list.values()
                    .append_slice(&[i as i32, -(i as i32), (i % 3) as i32]);
                list.values().append_null();
                list.append(true);
            }
        }
    }
    let structs = StructArray::new(
        vec![
            Field::new("a", DataType::Float64, true),
            Field::new("b", DataType::Utf8, true),
        ]
        .into(),
        vec![
            Arc::new(Float64Array::from_iter(
                ids.clone().map(|i| (i % 4 != 0).then_some(i as f64 / 8.0)),
            )),
            Arc::new(StringArray::from_iter_values(
                ids.clone().map(|i| format!("b{}", i % 100)),
            )),
        ],
        Some(ids.clone().map(|i| i % 9 != 0).collect()),
    );
    RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
        ),
        (
            "k",
            Arc::new(Int64Array::from_iter(
                ids.clone()
                    .map(|i| (i % 13 != 0).then_some(i * 7919 % 1000)),
            )),
        ),
        (
            "s",
            Arc::new(StringArray::from_iter(ids.clone().map(|i| {
                (i % 6 != 0).then(|| "text".repeat((i % 11) as usize) + &i.to_string())
            }))),
        ),
        ("l", Arc::new(list.finish())),
        ("st", Arc::new(structs)),
        (
            "d",
            Arc::new(Date32Array::from_iter_values(
                ids.clone().map(|i| (i % 20_000) as i32),
            )),
        ),
        (
            "m",
            Arc::new(
                Decimal128Array::from_iter(
                    ids.clone().map(|i| (i % 3 != 0).then_some(i as i128 * 101)),
                )
                .with_precision_and_scale(15, 2)
                .unwrap(),
            ),
        ),
        (
            "b",
            Arc::new(BooleanArray::from_iter(
                ids.map(|i| (i % 17 != 0).then_some(i % 2 == 0)),
            )),
        ),
    ])
    .unwrap()
}

/// A Parquet file of rows `0..total` in row groups of 20,000 rows (frames for several
/// workers).
fn input(dir: &Path, total: i64) -> PathBuf {
    let path = dir.join("in.parquet");
    let mut writer = ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        rows(0, 1).schema(),
        None,
    )
    .unwrap();
    for start in (0..total).step_by(20_000) {
        writer
            .write(&rows(start, 20_000.min(total - start)))
            .unwrap();
        writer.flush().unwrap();
    }
    writer.close().unwrap();
    path
}

/// What is in `dir` but `_manifest.json` and the Parquet files the manifest lists: nothing, or
/// the test fails.
fn assert_only_listed_files(dir: &Path, manifest: &Manifest) {
    let mut listed: Vec<String> = manifest
        .destinations
        .iter()
        .filter_map(|d| d.only_file().map(|f| f.name.as_str()).map(str::to_string))
        .collect();
    listed.push("_manifest.json".into());
    listed.sort();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, listed, "what the run left in {}", dir.display());
}

/// Each destination's file: its row groups' rows (checked against the manifest) and its rows.
fn read(out: &Path, manifest: &Manifest, p: usize) -> (Vec<u64>, Vec<RecordBatch>) {
    let entry = &manifest.destinations[p];
    let name = entry
        .only_file()
        .map(|f| f.name.as_str())
        .expect("every destination has a file");
    let file = std::fs::File::open(out.join(name)).unwrap();
    assert_eq!(file.metadata().unwrap().len(), entry.bytes, "{name}");
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let metadata = reader.metadata().clone();
    let row_groups: Vec<u64> = metadata
        .row_groups()
        .iter()
        .map(|rg| rg.num_rows() as u64)
        .collect();
    assert_eq!(
        entry.only_file().and_then(|f| f.row_groups.as_ref()),
        Some(&row_groups),
        "{name}"
    );
    for rg in metadata.row_groups() {
        for column in rg.columns() {
            assert!(
                column.statistics().is_some(),
                "{name}: no statistics for {}",
                column.column_path()
            );
        }
    }
    let batches = reader.build().unwrap().map(Result::unwrap).collect();
    (row_groups, batches)
}

#[test]
fn every_row_lands_once_intact_in_its_destination() {
    let dir = tempfile::tempdir().unwrap();
    let total = 150_000;
    let input = input(dir.path(), total);
    let out = dir.path().join("out");
    let n = 5;
    // A small limit: many flushes, so each file is gathered from many runs of both workers.
    let report = repartition(
        JobOptions::new([&input], &out, n)
            .with_keys(["k"])
            .with_threads(2)
            .with_memory_limit(8 << 20),
    )
    .unwrap();
    let manifest = &report.manifest;
    assert!(
        manifest.flushes > 2 * u64::from(n),
        "{} flushes",
        manifest.flushes
    );
    assert_only_listed_files(&out, manifest);
    let expected = rows(0, total);
    let mut ids =
        PartitionIds::try_new(Partitioning::hash(vec![1], n), &expected.schema()).unwrap();
    let mut found = Vec::new();
    let mut seen = vec![false; total as usize];
    for p in 0..n as usize {
        let (_, batches) = read(&out, manifest, p);
        for batch in batches {
            let mut destinations = Vec::new();
            ids.compute(&batch, &mut destinations).unwrap();
            assert!(
                destinations.iter().all(|&d| d as usize == p),
                "a row outside {p}"
            );
            let id = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            for &i in id.values() {
                assert!(!seen[i as usize], "row {i} twice");
                seen[i as usize] = true;
            }
            found.push(batch);
        }
    }
    assert!(seen.iter().all(|&s| s), "a row lost");
    // Every value intact: the rows found, put in id order, are the input.
    let found = arrow_select::concat::concat_batches(&found[0].schema(), &found).unwrap();
    let id = found
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let mut order = vec![0u32; total as usize];
    for (r, &i) in id.values().iter().enumerate() {
        order[i as usize] = r as u32;
    }
    let sorted = arrow_select::take::take_record_batch(&found, &UInt32Array::from(order)).unwrap();
    for (c, field) in expected.schema().fields().iter().enumerate() {
        assert_eq!(
            sorted.column(c).to_data(),
            expected.column(c).to_data(),
            "column {}",
            field.name()
        );
    }
}

#[test]
fn row_groups_hold_whole_destinations_up_to_a_million_rows() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 300_000);
    let out = dir.path().join("out");
    // 32 MiB: with an open row group per destination, three destinations had 2 MiB each.
    let report = repartition(
        JobOptions::new([&input], &out, 3)
            .with_keys(["id"])
            .with_threads(2)
            .with_memory_limit(32 << 20),
    )
    .unwrap();
    let manifest = &report.manifest;
    for p in 0..3 {
        let (row_groups, _) = read(&out, manifest, p);
        // About 100,000 rows each, in runs of a few thousand: one row group.
        let rows = manifest.destinations[p].rows;
        assert!(rows >= 1 << 16, "destination {p}: {rows} rows");
        assert_eq!(row_groups, [rows], "destination {p}");
    }
    let sizes = manifest.row_groups.as_ref().expect("row group sizes");
    assert_eq!(sizes.count, 3);
    assert!(sizes.min_rows >= 1 << 16, "{sizes:?}");
}

#[test]
/// The plan for 10,000 destinations fits a 256 MiB limit (the budget's arithmetic, not the
/// memory a run uses: bench/HISTORY.md measures that), and every destination gets its file with
/// one row group.
fn ten_thousand_destinations_are_planned_within_256_mib() {
    let dir = tempfile::tempdir().unwrap();
    let total = 100_000;
    let input = input(dir.path(), total);
    let out = dir.path().join("out");
    let limit = 256 << 20;
    let report = repartition(
        JobOptions::new([&input], &out, 10_000)
            .with_keys(["id"])
            .with_threads(2)
            .with_memory_limit(limit),
    )
    .unwrap();
    let manifest = &report.manifest;
    let budget = manifest.memory_budget;
    assert!(
        budget.destinations_fixed + budget.parquet_row_groups <= limit,
        "{budget:?}"
    );
    assert!(
        budget.destinations_fixed + 2 * budget.per_worker_buffers <= limit,
        "{budget:?}"
    );
    assert_eq!(manifest.output_rows, total as u64);
    assert_eq!(manifest.destinations.len(), 10_000);
    let files = manifest
        .destinations
        .iter()
        .filter(|d| d.only_file().map(|f| f.name.as_str()).is_some())
        .count();
    assert_eq!(files, 10_000);
    // Each destination's ten rows or so in one row group (an empty destination has none).
    for d in &manifest.destinations {
        let want: &[u64] = if d.rows == 0 { &[] } else { &[d.rows] };
        assert_eq!(
            d.only_file().and_then(|f| f.row_groups.as_deref()),
            Some(want),
            "{}",
            d.destination
        );
    }
    assert_only_listed_files(&out, manifest);
}

#[test]
fn parquet_is_snappy_unless_asked_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 30_000);
    for (compression, want) in [
        (None, parquet::basic::Compression::SNAPPY),
        (
            Some(Compression::None),
            parquet::basic::Compression::UNCOMPRESSED,
        ),
    ] {
        let out = dir.path().join(format!("out-{compression:?}"));
        let mut options = JobOptions::new([&input], &out, 2)
            .with_keys(["k"])
            .with_threads(1);
        options.compression = compression;
        let report = repartition(options).unwrap();
        let manifest = &report.manifest;
        let recorded = compression.unwrap_or(Compression::Snappy);
        assert_eq!(manifest.compression, recorded);
        assert_eq!(&Manifest::read(&out).unwrap(), manifest);
        let name = manifest.destinations[0]
            .only_file()
            .map(|f| f.name.as_str())
            .unwrap();
        let file = std::fs::File::open(out.join(name)).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        for rg in reader.metadata().row_groups() {
            for column in rg.columns() {
                assert_eq!(
                    column.compression(),
                    want,
                    "{name}: {}",
                    column.column_path()
                );
            }
        }
    }
}

/// A ZSTD level reaches the Parquet writer: the manifest names it, every column chunk is ZSTD,
/// and level 19 writes fewer bytes than level 1 for the same rows.
#[test]
fn a_zstd_level_reaches_the_parquet_writer() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 30_000);
    let mut bytes = Vec::new();
    for level in [1, 19] {
        let compression = Compression::Zstd(partout_job::ZstdLevel::try_new(level).unwrap());
        let out = dir.path().join(format!("out-{level}"));
        let options = JobOptions::new([&input], &out, 2)
            .with_keys(["k"])
            .with_threads(1)
            .with_compression(compression);
        let manifest = repartition(options).unwrap().manifest;
        assert_eq!(manifest.compression.to_string(), format!("zstd:{level}"));
        assert_eq!(&Manifest::read(&out).unwrap(), &manifest);
        let name = manifest.destinations[0]
            .only_file()
            .map(|f| f.name.as_str())
            .unwrap();
        let file = std::fs::File::open(out.join(name)).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        for rg in reader.metadata().row_groups() {
            for column in rg.columns() {
                assert!(matches!(
                    column.compression(),
                    parquet::basic::Compression::ZSTD(_)
                ));
            }
        }
        bytes.push(manifest.output_bytes);
    }
    assert!(bytes[1] < bytes[0], "bytes at levels 1 and 19: {bytes:?}");
}

#[test]
fn a_data_page_size_reaches_the_parquet_writer() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 30_000);
    // Pages of each file, counted from its offset index.
    let pages = |size: Option<&str>| -> usize {
        let out = dir
            .path()
            .join(format!("pages-{}", size.unwrap_or("default")));
        let mut options = JobOptions::new([&input], &out, 1)
            .with_keys(["k"])
            .with_threads(1);
        if let Some(size) = size {
            let settings = ParquetSettings::parse([("data_page_size", size)]).unwrap();
            options = options.with_parquet_settings(settings);
        }
        let manifest = repartition(options).unwrap().manifest;
        let name = manifest.destinations[0]
            .only_file()
            .map(|f| f.name.as_str())
            .unwrap();
        let file = std::fs::File::open(out.join(name)).unwrap();
        let with_index =
            ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let reader =
            ParquetRecordBatchReaderBuilder::try_new_with_options(file, with_index).unwrap();
        let index = reader.metadata().offset_index().expect("an offset index");
        index
            .iter()
            .flatten()
            .map(|c| c.page_locations().len())
            .sum()
    };
    let (small, default) = (pages(Some("4KiB")), pages(None));
    assert!(
        small > 4 * default,
        "pages at 4 KiB: {small}, at the default 64 KiB: {default}"
    );
}

/// Cancels the run once the rows are staged, when the files are being written: asked from a
/// thread other than the workers.
struct CancelWhileWriting;

impl Progress for CancelWhileWriting {
    fn cancelled(&self) -> bool {
        let name = std::thread::current().name().map(str::to_string);
        !name.is_some_and(|n| n.starts_with("partout-worker"))
    }
}

#[test]
fn no_scratch_file_is_left_after_a_failure_while_writing() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 60_000);
    let job = Job::try_new(
        JobOptions::new([&input], dir.path().join("out"), 8)
            .with_keys(["k"])
            .with_threads(2),
    )
    .unwrap();
    let err = job.run(&CancelWhileWriting).unwrap_err();
    assert!(matches!(err, JobError::Cancelled), "{err}");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["in.parquet"], "the run left more than its input");
}

/// Partitioning by value into Parquet: the files of the first values met are written as they
/// are flushed (pages of about `PAGE_ROWS` rows), those met past the writers the budget holds
/// are staged (pages of 64 KiB), and every row is in its value's file once, intact.
#[test]
fn values_met_past_the_open_writers_are_staged_and_every_row_lands_once() {
    let dir = tempfile::tempdir().unwrap();
    let (values, total) = (60i64, 1_200_000i64);
    let path = dir.path().join("in.parquet");
    let batch = |start: i64| {
        let ids = start..start + 20_000;
        RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
            ),
            (
                "v",
                Arc::new(Int64Array::from_iter_values(
                    ids.clone().map(|i| i % values),
                )),
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(ids.map(|i| format!("s{i}")))),
            ),
        ])
        .unwrap()
    };
    let mut writer = ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch(0).schema(),
        None,
    )
    .unwrap();
    for start in (0..total).step_by(20_000) {
        writer.write(&batch(start)).unwrap();
        writer.flush().unwrap();
    }
    writer.close().unwrap();
    let out = dir.path().join("out");
    let report = repartition(
        JobOptions::new([&path], &out, 1)
            .with_partition_by(["v"])
            .with_max_partitions(100)
            .with_threads(2)
            // Writers for about 25 of the 100 values allowed.
            .with_memory_limit(64 << 20),
    )
    .unwrap();
    let manifest = &report.manifest;
    assert!(
        manifest.memory_budget.parquet_writers_open > 0,
        "{manifest:?}"
    );
    let mut seen = vec![false; total as usize];
    let mut direct = 0;
    for (p, entry) in manifest.destinations.iter().enumerate() {
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
        let (_, batches) = read(&out, manifest, p);
        for batch in &batches {
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
                assert_eq!(i % values, value, "row {i} in {name}");
                assert_eq!(s.value(r), format!("s{i}"));
                assert!(
                    !std::mem::replace(&mut seen[i as usize], true),
                    "row {i} twice"
                );
            }
        }
        let file = std::fs::File::open(out.join(&name)).unwrap();
        let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
            .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Required)
            .parse_and_finish(&file)
            .unwrap();
        // The id column's largest page: written as flushed, pages end once past PAGE_ROWS
        // rows (checked every 1024); staged, at 64 KiB (8192 ids).
        let starts: Vec<i64> = metadata.offset_index().unwrap()[0][0]
            .page_locations()
            .iter()
            .map(|l| l.first_row_index)
            .chain([entry.rows as i64])
            .collect();
        let largest = starts.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        if largest <= (partout_output::PAGE_ROWS + 1024) as i64 {
            direct += 1;
        }
    }
    assert!(seen.iter().all(|&s| s), "a row lost");
    assert!(
        direct > 0 && direct < values,
        "{direct} of {values} values written as flushed"
    );
}

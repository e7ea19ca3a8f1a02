//! Rows sorted within each file (`--sort-by`): every file's rows in the order arrow's own
//! sort kernel gives them (by value and by hash, Parquet and Arrow IPC files, rolling over or
//! not, in a memory limit that makes each thread spill sorted runs), each row once, and
//! Parquet's `sorting_columns` saying so; and the outputs that cannot be sorted refused
//! before anything is written.

mod common;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_ord::sort::{SortColumn, lexsort_to_indices};
use arrow_schema::SortOptions;
use arrow_select::concat::concat_batches;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{FileReader, SerializedFileReader};
use partout_job::{Format, JobError, JobOptions, Layout, Rollover, SortOrder, repartition};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows `start..start + len`: `id`, a key `k` of seven values (one with a fifth of the rows),
/// a string `s` of 500 values with nulls, and a number `x` with nulls.
fn rows(start: i64, len: i64) -> RecordBatch {
    let ids = start..start + len;
    RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
        ),
        (
            "k",
            Arc::new(Int64Array::from_iter_values(
                ids.clone()
                    .map(|i| if i % 5 == 0 { 0 } else { i * 7919 % 7 }),
            )),
        ),
        (
            "s",
            Arc::new(StringArray::from_iter(ids.clone().map(|i| {
                (i % 13 != 0).then(|| format!("{:x}", i * 2_654_435_761 % 500).repeat(3))
            }))),
        ),
        (
            "x",
            Arc::new(Int64Array::from_iter(
                ids.map(|i| (i % 17 != 0).then_some(i * 48_271 % 10_007)),
            )),
        ),
    ])
    .unwrap()
}

fn input(dir: &Path, total: i64) -> PathBuf {
    common::parquet_input(dir, total, rows)
}

fn read_file(path: &Path) -> RecordBatch {
    let file = std::fs::File::open(path).unwrap();
    let batches: Vec<RecordBatch> = match path.extension().and_then(|e| e.to_str()) {
        Some("parquet") => ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .map(Result::unwrap)
            .collect(),
        Some("arrow") => arrow_ipc::reader::FileReader::try_new(file, None)
            .unwrap()
            .map(Result::unwrap)
            .collect(),
        other => panic!("{path:?}: unexpected extension {other:?}"),
    };
    let schema = batches[0].schema();
    concat_batches(&schema, &batches).unwrap()
}

/// Asserts that `batch`'s rows are in `order`: its sort columns equal those of the same
/// rows sorted by arrow's sort kernel.
fn assert_in_order(batch: &RecordBatch, order: &SortOrder, what: &str) {
    let columns: Vec<SortColumn> = order
        .keys()
        .iter()
        .map(|key| SortColumn {
            values: batch.column_by_name(&key.column).unwrap().clone(),
            options: Some(SortOptions {
                descending: key.descending,
                nulls_first: key.nulls_first,
            }),
        })
        .collect();
    let indices = lexsort_to_indices(&columns, None).unwrap();
    for column in &columns {
        let sorted = arrow_select::take::take(&column.values, &indices, None).unwrap();
        // Compared whole, reported briefly: a column's data is megabytes of text.
        if column.values.to_data() != sorted.to_data() {
            let first = (0..sorted.len())
                .find(|&i| column.values.slice(i, 1).to_data() != sorted.slice(i, 1).to_data());
            panic!("{what}: not in the order {order} from row {first:?}");
        }
    }
}

/// The ids of `batch`.
fn ids(batch: &RecordBatch) -> Vec<i64> {
    let ids = batch.column_by_name("id").unwrap();
    let ids = ids.as_any().downcast_ref::<Int64Array>().unwrap();
    ids.values().to_vec()
}

#[test]
fn every_file_is_sorted_and_holds_its_rows_once() {
    let dir = tempfile::tempdir().unwrap();
    let total = 200_000;
    let input = input(dir.path(), total);
    let order: SortOrder = "s DESC NULLS FIRST, x".parse().unwrap();
    // Every row's other columns as the input has them, by id: a sort that moved the key
    // columns without the rest of their rows is caught.
    let want = rows(0, total);
    let column = |batch: &RecordBatch, name: &str| batch.column_by_name(name).unwrap().clone();
    let (want_s, want_x) = (column(&want, "s"), column(&want, "x"));
    for (name, format, by_value, rollover) in [
        ("parquet by value", Format::Parquet, true, None),
        (
            "parquet by value, rolling",
            Format::Parquet,
            true,
            Some(9_000),
        ),
        ("parquet by hash", Format::Parquet, false, None),
        ("ipc by hash", Format::Ipc, false, None),
        ("ipc by value, rolling", Format::Ipc, true, Some(20_000)),
    ] {
        let out = dir.path().join(name.replace([' ', ','], "-"));
        let mut options = JobOptions::new([&input], &out, 3)
            .with_keys(["id"])
            .with_format(format)
            .with_threads(2)
            // Each thread sorts in about a megabyte: a destination's rows spill as runs.
            .with_memory_limit(8 << 20)
            .with_sort_by(order.clone());
        if by_value {
            options = options.with_partition_by(["k"]);
        }
        if let Some(rows) = rollover {
            options = options.with_rollover(Rollover::new(Some(rows), None).unwrap());
        }
        let manifest = repartition(options).unwrap().manifest;
        assert_eq!(manifest.sort_by, order);
        assert_eq!(manifest.max_rows_per_file, rollover);
        let mut seen = vec![0u8; total as usize];
        for entry in &manifest.destinations {
            let files = entry.files.as_deref().unwrap();
            if rollover.is_some() && entry.rows > 30_000 {
                assert!(files.len() > 1, "{name}: {files:?}");
            }
            let mut all = Vec::new();
            for file in files {
                let path = out.join(&file.name);
                let batch = read_file(&path);
                assert_eq!(batch.num_rows() as u64, file.rows);
                assert_in_order(&batch, &order, &format!("{name}: {}", file.name));
                let taken = Int64Array::from(ids(&batch));
                for (got, want) in [
                    (column(&batch, "s"), &want_s),
                    (column(&batch, "x"), &want_x),
                ] {
                    let want = arrow_select::take::take(want.as_ref(), &taken, None).unwrap();
                    assert_eq!(
                        got.as_ref(),
                        want.as_ref(),
                        "{name}: {}: a row's columns apart",
                        file.name
                    );
                }
                for id in ids(&batch) {
                    seen[id as usize] += 1;
                }
                if format == Format::Parquet {
                    let reader =
                        SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
                    // s and x are leaves 2 and 3 (k is in the directory names by value).
                    let (s, x) = match by_value {
                        true => (1, 2),
                        false => (2, 3),
                    };
                    for group in reader.metadata().row_groups() {
                        let columns = group.sorting_columns().unwrap();
                        let said: Vec<_> = columns
                            .iter()
                            .map(|c| (c.column_idx, c.descending, c.nulls_first))
                            .collect();
                        assert_eq!(said, [(s, true, true), (x, false, false)], "{name}");
                    }
                }
                all.push(batch);
            }
            // A destination's files follow one another in order too.
            let schema = all[0].schema();
            let whole = concat_batches(&schema, &all).unwrap();
            assert_in_order(
                &whole,
                &order,
                &format!("{name}: destination {}", entry.destination),
            );
        }
        assert!(
            seen.iter().all(|&n| n == 1),
            "{name}: a row lost or doubled"
        );
    }
}

#[test]
fn outputs_that_cannot_be_sorted_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 1000);
    let out = dir.path().join("out");
    let sorted = |order: &str| {
        JobOptions::new([&input], &out, 2)
            .with_keys(["id"])
            .with_sort_by(order.parse().unwrap())
    };
    for (options, says) in [
        (sorted("x").with_format(Format::Presto), "not Presto pages"),
        (
            sorted("x")
                .with_format(Format::Ipc)
                .with_layout(Layout::Shuffle),
            "shuffle layout",
        ),
        (sorted("nope"), "cannot sort by \"nope\""),
        // By value, k is in the directory names, not the files.
        (sorted("k").with_partition_by(["k"]), "cannot sort by \"k\""),
    ] {
        let err = repartition(options).unwrap_err();
        assert!(
            matches!(err, JobError::InvalidOption(_) | JobError::Write { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(says), "{says}: {err}");
        assert!(!out.exists());
    }
}

//! Files named after a pattern (`--file-name`): every file of the output is one the manifest
//! lists, at the pattern's name, in its value's directory, holding the rows it held under
//! partout's own name; patterns that could give two files one name refused before anything is
//! written; runs appended with `{run}` beside the first.

mod common;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use partout_job::{
    FileNamePattern, Format, JobError, JobOptions, Manifest, Rollover, WriteMode, repartition,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn rows(start: i64, len: i64) -> RecordBatch {
    let ids = start..start + len;
    RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
        ),
        (
            "k",
            Arc::new(Int64Array::from_iter_values(ids.map(|i| i % 3))),
        ),
    ])
    .unwrap()
}

fn input(dir: &Path) -> PathBuf {
    common::parquet_input(dir, 30_000, rows)
}

/// Every file under `out` but the manifest, relative to it, sorted.
fn files_in(out: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if !path.ends_with("_manifest.json") {
                found.push(
                    path.strip_prefix(out)
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .to_string(),
                );
            }
        }
    }
    found.sort();
    found
}

/// The names the manifest lists, sorted, each file's rows read back checked against it.
fn listed(out: &Path, manifest: &Manifest) -> Vec<String> {
    let mut names = Vec::new();
    for entry in &manifest.destinations {
        for file in entry.files.as_deref().unwrap() {
            let reader = std::fs::File::open(out.join(&file.name)).unwrap();
            let rows: usize = ParquetRecordBatchReaderBuilder::try_new(reader)
                .unwrap()
                .build()
                .unwrap()
                .map(|b| b.unwrap().num_rows())
                .sum();
            assert_eq!(rows as u64, file.rows, "{}", file.name);
            names.push(file.name.clone());
        }
    }
    names.sort();
    names
}

/// A run of `options`, then one more appending to its output: the second's manifest has
/// twice the rows, and lists every file of `out` (each file's rows checked), by name, sorted.
fn written_then_appended(out: &Path, options: impl Fn() -> JobOptions) -> Vec<String> {
    let first = repartition(options()).unwrap().manifest;
    let both = repartition(options().with_mode(WriteMode::Append))
        .unwrap()
        .manifest;
    assert_eq!(both.output_rows, 2 * first.output_rows);
    let names = listed(out, &both);
    assert_eq!(files_in(out), names);
    names
}

fn pattern(text: &str) -> FileNamePattern {
    text.parse().unwrap()
}

#[test]
fn files_take_the_pattern_s_names_in_their_directories() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path());
    // By hash: {dest} is the destination; rolling over, {part} each file's number.
    let out = dir.path().join("hash");
    let options = JobOptions::new([&input], &out, 3)
        .with_keys(["id"])
        .with_threads(2)
        .with_rollover(Rollover::new(Some(4000), None).unwrap())
        .with_file_name(pattern("orders_{dest}_{part}"));
    let manifest = repartition(options).unwrap().manifest;
    assert_eq!(manifest.file_name, Some(pattern("orders_{dest}_{part}")));
    let names = listed(&out, &manifest);
    assert_eq!(files_in(&out), names);
    for entry in &manifest.destinations {
        for (k, file) in entry.files.as_deref().unwrap().iter().enumerate() {
            let want = format!("orders_{:05}_{k:05}.parquet", entry.destination);
            assert_eq!(file.name, want);
        }
    }
    // By value, two buckets a value: {dest} is the bucket, in the value's directory.
    let out = dir.path().join("hive");
    let options = JobOptions::new([&input], &out, 2)
        .with_keys(["id"])
        .with_partition_by(["k"])
        .with_format(Format::Ipc)
        .with_file_name(pattern("b{dest}.arrow"));
    let manifest = repartition(options).unwrap().manifest;
    let mut names: Vec<String> = manifest
        .destinations
        .iter()
        .map(|d| d.only_file().unwrap().name.clone())
        .collect();
    names.sort();
    let want: Vec<String> = (0..3)
        .flat_map(|k| (0..2).map(move |b| format!("k={k}/b{b:05}.arrow")))
        .collect();
    assert_eq!(names, want);
    let found: Vec<String> = files_in(&out);
    assert_eq!(found, want);
}

#[test]
fn runs_appended_with_their_id_in_the_pattern_add_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path());
    let out = dir.path().join("out");
    let options = || {
        JobOptions::new([&input], &out, 1)
            .with_partition_by(["k"])
            .with_file_name(pattern("data-{run}"))
    };
    let names = written_then_appended(&out, options);
    assert_eq!(names.len(), 6, "{names:?}");
    // Each value's two files: one of each run.
    for k in 0..3 {
        let runs: Vec<&String> = names
            .iter()
            .filter(|n| n.starts_with(&format!("k={k}/data-")))
            .collect();
        assert_eq!(runs.len(), 2, "{names:?}");
        assert_ne!(runs[0], runs[1]);
    }
}

/// `{uuid}` alone stands for every placeholder a name needs: two buckets a value's
/// directory, files rolling over and a second run appending, each file under a name of its
/// own (a version 4 UUID, random), none given twice, every one listed.
#[test]
fn a_uuid_in_the_pattern_gives_each_file_of_every_run_a_name_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path());
    let out = dir.path().join("out");
    let options = || {
        JobOptions::new([&input], &out, 2)
            .with_keys(["id"])
            .with_partition_by(["k"])
            .with_rollover(Rollover::new(Some(2000), None).unwrap())
            .with_file_name(pattern("part-{uuid}"))
    };
    let names = written_then_appended(&out, options);
    // 30,000 rows over 3 values and 2 buckets, at most 2,000 rows a file, twice.
    assert!(names.len() >= 2 * 3 * 2 * 2, "{names:?}");
    let mut uuids: Vec<&str> = names
        .iter()
        .map(|name| {
            let (directory, file) = name.split_once('/').unwrap();
            assert!(["k=0", "k=1", "k=2"].contains(&directory), "{name}");
            let uuid = file
                .strip_prefix("part-")
                .and_then(|f| f.strip_suffix(".parquet"))
                .unwrap_or_else(|| panic!("{name}"));
            let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{name}");
            assert!(
                uuid.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
                "{name}"
            );
            assert_eq!(&uuid[14..15], "4", "a version 4 UUID: {name}");
            uuid
        })
        .collect();
    uuids.sort_unstable();
    uuids.dedup();
    assert_eq!(uuids.len(), names.len(), "a UUID given twice: {names:?}");
}

#[test]
fn patterns_that_could_give_two_files_one_name_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path());
    let out = dir.path().join("out");
    let named = |text: &str| {
        JobOptions::new([&input], &out, 2)
            .with_keys(["id"])
            .with_file_name(pattern(text))
    };
    for (options, says) in [
        (named("data"), "needs {dest}"),
        (
            named("data-{dest}").with_rollover(Rollover::new(Some(10), None).unwrap()),
            "needs {part}",
        ),
        (
            named("data-{dest}").with_mode(WriteMode::Append),
            "needs {run}",
        ),
        (
            named("data-{dest}")
                .with_layout(partout_job::Layout::Shuffle)
                .with_format(Format::Ipc),
            "shuffle layout",
        ),
    ] {
        let err = repartition(options).unwrap_err();
        assert!(matches!(err, JobError::InvalidOption(_)), "{err:?}");
        assert!(err.to_string().contains(says), "{says}: {err}");
        assert!(!out.exists());
    }
    // One destination a directory needs no {dest}.
    let one = JobOptions::new([&input], &out, 1)
        .with_keys(["id"])
        .with_file_name(pattern("all"));
    let manifest = repartition(one).unwrap().manifest;
    assert_eq!(
        manifest.destinations[0].only_file().unwrap().name,
        "all.parquet"
    );
}

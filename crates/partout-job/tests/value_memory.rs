//! Memory of a job partitioning by value, measured by a counting allocator: 100,000 values of
//! more rows than the limit holds within a 64 MiB limit, as are the same rows into one value
//! where 10,000 or 300 are allowed within 24 MiB, two values' files written as flushed while
//! 5,000 more values come within 64 MiB, and what each value costs whatever its rows (a few
//! rows into 100,000 values and into 1,000: the difference per value) within what the job
//! sets aside for each, as is what a value allowed but never met costs. (One test: the
//! allocator counts the whole process.)

#[path = "../../partout-exchange/tests/counting/mod.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use partout_job::{Job, JobOptions, Manifest};
use std::path::Path;
use std::sync::Arc;

/// Rows of a large input: 20 per value at 100,000 values, about 90 MB of Arrow data, more
/// than the limit holds.
const LARGE: i64 = 2_000_000;

/// Rows of a small input: 4 per value at 100,000 values, less than the limit holds.
const SMALL: i64 = 400_000;

/// Rows spread over `values` values, but for the first `few_first`, in two.
fn input(path: &Path, rows: i64, values: i64, few_first: i64) {
    let mut writer = None;
    for start in (0..rows).step_by(50_000) {
        let ids = start..start + 50_000;
        let batch = RecordBatch::try_from_iter([
            (
                "k",
                Arc::new(Int64Array::from_iter_values(ids.clone().map(|i| {
                    match i < few_first {
                        true => i % 2,
                        false => i * 7919 % values,
                    }
                }))) as ArrayRef,
            ),
            ("id", Arc::new(Int64Array::from_iter_values(ids.clone()))),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    ids.map(|i| format!("row {i:>12} of the input")),
                )),
            ),
        ])
        .unwrap();
        let writer = writer.get_or_insert_with(|| {
            ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None)
                .unwrap()
        });
        writer.write(&batch).unwrap();
    }
    writer.unwrap().close().unwrap();
}

/// The peak bytes of a job partitioning `rows` rows into `values` values above what was held
/// before it, and what it set aside per value whatever the rows.
fn peak(dir: &Path, rows: i64, values: i64) -> (i64, u64) {
    let (peak, per_value, _) = peak_allowing(dir, rows, (values, 0), values as u32, 64 << 20);
    (peak, per_value)
}

/// As [`peak`], with `allowed` values allowed, within `limit` bytes, the first `few_first`
/// rows in two values; and the run's manifest.
fn peak_allowing(
    dir: &Path,
    rows: i64,
    (values, few_first): (i64, i64),
    allowed: u32,
    limit: u64,
) -> (i64, u64, Manifest) {
    let path = dir.join(format!("in-{rows}-{values}-{few_first}.parquet"));
    input(&path, rows, values, few_first);
    let out = dir.join(format!("out-{rows}-{values}"));
    let options = JobOptions::new(vec![path], &out, 1)
        .with_partition_by(["k"])
        .with_max_partitions(allowed)
        .with_threads(2)
        .with_memory_limit(limit);
    let base = counting::start();
    let job = Job::try_new(options).unwrap();
    let reserved = job.budget().destinations_fixed + job.value_table_bytes();
    let report = job.run(&()).unwrap();
    let peak = counting::peak_since(base);
    assert_eq!(report.manifest.partitions, values as u32);
    assert_written(&out, &report.manifest, rows, values, few_first);
    (peak, reserved / values as u64, report.manifest)
}

/// Reads every file `manifest` lists back: each of the `rows` input rows once, in the
/// directory of its value (as [`input`] made it), its string as written.
fn assert_written(out: &Path, manifest: &Manifest, rows: i64, values: i64, few_first: i64) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    let mut seen = vec![false; rows as usize];
    for entry in &manifest.destinations {
        for file in entry.files.as_deref().unwrap_or_default() {
            let value: i64 = file
                .name
                .split('/')
                .next()
                .and_then(|dir| dir.strip_prefix("k="))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{}: not in a value's directory", file.name));
            let reader = std::fs::File::open(out.join(&file.name)).unwrap();
            let batches =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(reader)
                    .unwrap()
                    .build()
                    .unwrap();
            for batch in batches {
                let batch = batch.unwrap();
                let ids = batch
                    .column_by_name("id")
                    .unwrap()
                    .as_primitive::<Int64Type>();
                let texts = batch.column_by_name("s").unwrap();
                let texts = arrow_cast::cast(texts, &arrow_schema::DataType::Utf8).unwrap();
                let texts = texts.as_string::<i32>();
                for (row, &i) in ids.values().iter().enumerate() {
                    let want = match i < few_first {
                        true => i % 2,
                        false => i * 7919 % values,
                    };
                    assert_eq!(value, want, "row {i} in {}", file.name);
                    assert_eq!(texts.value(row), format!("row {i:>12} of the input"));
                    assert!(
                        !std::mem::replace(&mut seen[i as usize], true),
                        "row {i} twice"
                    );
                }
            }
        }
    }
    let missing = seen.iter().filter(|&&s| !s).count();
    assert_eq!(missing, 0, "{missing} rows not written");
}

/// A scratch directory: in memory where the system has one (tmpfs), since 100,000 files on a
/// disk's file system just emptied of as many can take a minute to create.
fn scratch() -> tempfile::TempDir {
    match Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").unwrap(),
        false => tempfile::tempdir().unwrap(),
    }
}

#[test]
fn a_hundred_thousand_values_stay_within_64_mib_and_each_costs_what_is_set_aside() {
    let dir = scratch();
    let (large, _) = peak(dir.path(), LARGE, 100_000);
    println!("{LARGE} rows into 100,000 values: peak {large} bytes");
    assert!(
        large <= 64 << 20,
        "peak {large} bytes over the 64 MiB limit"
    );
    // The same rows into one value where 10,000 are allowed, within 24 MiB: workers spill
    // sorted runs, and the value's file is written from 80 MB of staged rows, read a piece at
    // a time.
    let (skewed, ..) = peak_allowing(dir.path(), LARGE, (1, 0), 10_000, 24 << 20);
    println!("{LARGE} rows into one value of 10,000 allowed: peak {skewed} bytes");
    assert!(
        skewed <= 24 << 20,
        "peak {skewed} bytes over the 24 MiB limit"
    );
    // The same rows into one value of 300 allowed: workers hold batches laid out by
    // destination, and the one value's rows among them go out as messages of about a flush
    // each, not as one message of everything held.
    let held = dir.path().join("held");
    std::fs::create_dir(&held).unwrap();
    let (one, ..) = peak_allowing(&held, LARGE, (1, 0), 300, 24 << 20);
    println!("{LARGE} rows into one value of 300 allowed: peak {one} bytes");
    assert!(one <= 24 << 20, "peak {one} bytes over the 24 MiB limit");
    // Two values in the first rows, then 5,000, of 20,000 allowed, within 64 MiB: the two
    // values' files written as flushed, the next values buffered and then sorted runs,
    // writers open throughout.
    let turned = dir.path().join("turned");
    std::fs::create_dir(&turned).unwrap();
    let (turning, _, manifest) = peak_allowing(&turned, LARGE, (5_000, 200_000), 20_000, 64 << 20);
    let budget = manifest.memory_budget;
    assert!(budget.parquet_writers_open > 0, "{budget:?}");
    assert!(
        manifest
            .workers
            .iter()
            .all(|w| w.sorted_runs_from_row.is_some()),
        "{:?}",
        manifest.workers
    );
    println!("{LARGE} rows, two values then 5,000 of 20,000 allowed: peak {turning} bytes");
    assert!(
        turning <= 64 << 20,
        "peak {turning} bytes over the 64 MiB limit"
    );
    drop(dir);

    let dir = scratch();
    let (few, _) = peak(dir.path(), SMALL, 1_000);
    let (many, charged) = peak(dir.path(), SMALL, 100_000);
    let per_value = (many - few) / 99_000;
    println!(
        "{SMALL} rows: peak {few} bytes into 1,000 values, {many} into 100,000: {per_value} \
         bytes a value, {charged} set aside"
    );
    assert!(
        per_value <= charged as i64,
        "{per_value} bytes a value, {charged} set aside"
    );

    // One value met, and 2,000, of 100,000 allowed against of a few more than met: what each
    // value never met costs, within what the budget charges it.
    for (met, few) in [(1, 1_000u32), (2_000, 3_000)] {
        let [(few_peak, few_fixed), (many_peak, many_fixed)] = [few, 100_000].map(|allowed| {
            let d = dir.path().join(format!("{met}-of-{allowed}"));
            std::fs::create_dir(&d).unwrap();
            let (peak, _, manifest) = peak_allowing(&d, SMALL, (met, 0), allowed, 256 << 20);
            (peak, manifest.memory_budget.destinations_fixed)
        });
        let never = i64::from(100_000 - few);
        let unmet = (many_peak - few_peak) / never;
        let unmet_charged = (many_fixed - few_fixed) as i64 / never;
        println!(
            "{met} values met: a value never met costs {unmet} bytes, {unmet_charged} charged"
        );
        assert!(
            unmet <= unmet_charged,
            "{met} values met: a value never met costs {unmet} bytes, {unmet_charged} charged"
        );
    }
}

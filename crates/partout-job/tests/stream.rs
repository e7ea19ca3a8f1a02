//! A job whose input is a stream of batches ([`Job::from_stream`]) rather than files: every
//! row once in its destination, read back with parquet's reader; what it refuses.

use arrow_array::{
    Array, ArrayRef, Int64Array, RecordBatch, RecordBatchIterator, StringArray, cast::AsArray,
    types::Int64Type,
};
use arrow_schema::{ArrowError, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use partout_job::{Job, JobError, JobOptions, Scheme};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn batch(start: i64, len: i64) -> RecordBatch {
    let ids = start..start + len;
    RecordBatch::try_from_iter([
        (
            "k",
            Arc::new(Int64Array::from_iter_values(ids.clone().map(|i| i * 7 % 5))) as ArrayRef,
        ),
        ("id", Arc::new(Int64Array::from_iter_values(ids.clone()))),
        (
            "s",
            Arc::new(StringArray::from_iter_values(ids.map(|i| format!("v{i}")))),
        ),
    ])
    .unwrap()
}

fn stream(
    batches: Vec<Result<RecordBatch, ArrowError>>,
    schema: SchemaRef,
) -> Box<dyn arrow_array::RecordBatchReader + Send> {
    Box::new(RecordBatchIterator::new(batches, schema))
}

/// Every `(id, s)` of each `k=…` directory's file.
fn read_back(out: &Path) -> BTreeMap<i64, Vec<(i64, String)>> {
    let mut values = BTreeMap::new();
    for dir in std::fs::read_dir(out).unwrap().flatten() {
        let name = dir.file_name().into_string().unwrap();
        let Some(k) = name.strip_prefix("k=") else {
            continue;
        };
        let file = std::fs::File::open(dir.path().join("part-00000.parquet")).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let rows: &mut Vec<(i64, String)> = values.entry(k.parse().unwrap()).or_default();
        for b in reader {
            let b = b.unwrap();
            assert_eq!(b.num_columns(), 2, "the partition column is left out");
            let ids = b.column(0).as_primitive::<Int64Type>();
            let s = b.column(1).as_string_view_opt().map_or_else(
                || {
                    let s = b.column(1).as_string::<i32>();
                    (0..s.len()).map(|i| s.value(i).to_string()).collect()
                },
                |s| {
                    (0..s.len())
                        .map(|i| s.value(i).to_string())
                        .collect::<Vec<_>>()
                },
            );
            rows.extend(ids.values().iter().copied().zip(s));
        }
    }
    values
}

#[test]
fn a_stream_of_batches_is_partitioned_by_value_every_row_once() {
    // The default values allowed, and ten thousand: the stream's first batch, read
    // ahead to see its values, is still written once.
    for (allowed, limit) in [(None, 16u64 << 20), (Some(10_000), 64 << 20)] {
        let dir = tempfile::tempdir().unwrap();
        let batches: Vec<_> = (0..40).map(|i| Ok(batch(i * 1000, 1000))).collect();
        let schema = batch(0, 1).schema();
        let out = dir.path().join("out");
        let mut options = JobOptions::new(Vec::<std::path::PathBuf>::new(), &out, 1)
            .with_partition_by(["k"])
            .with_threads(2)
            .with_memory_limit(limit);
        if let Some(allowed) = allowed {
            options = options.with_max_partitions(allowed);
        }
        let job = Job::from_stream(options, stream(batches, schema)).unwrap();
        assert_eq!(job.input_rows(), None);
        // Five values in the first batch: their files written as flushed.
        assert!(job.budget().parquet_writers_open > 0, "{:?}", job.budget());
        let report = job.run(&()).unwrap();
        assert_eq!(report.manifest.output_rows, 40_000);
        let got = read_back(&out);
        assert_eq!(got.len(), 5);
        for (k, mut rows) in got {
            rows.sort();
            let expected: Vec<(i64, String)> = (0..40_000)
                .filter(|i| i * 7 % 5 == k)
                .map(|i| (i, format!("v{i}")))
                .collect();
            assert_eq!(rows, expected, "{allowed:?} allowed, k={k}");
        }
    }
}

#[test]
fn a_stream_s_error_a_stray_schema_files_too_and_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let schema = batch(0, 1).schema();
    let options = |name: &str| {
        JobOptions::new(Vec::<std::path::PathBuf>::new(), dir.path().join(name), 1)
            .with_partition_by(["k"])
            .with_threads(2)
    };
    // The stream's own error ends the run, naming the stream; nothing is left. Also when
    // the first batch fails (read ahead before the run).
    for good in [1, 0] {
        let mut failing: Vec<_> = (0..good).map(|_| Ok(batch(0, 10))).collect();
        failing.push(Err(ArrowError::IpcError("the producer broke".into())));
        let err = Job::from_stream(options("a"), stream(failing, schema.clone()))
            .unwrap()
            .run(&())
            .unwrap_err();
        assert!(err.to_string().contains("the producer broke"), "{err}");
        assert!(!dir.path().join("a").exists());
    }
    // A batch of another schema.
    let other =
        RecordBatch::try_from_iter([("k", Arc::new(Int64Array::from(vec![1])) as ArrayRef)])
            .unwrap();
    let err = Job::from_stream(
        options("b"),
        stream(vec![Ok(batch(0, 5)), Ok(other)], schema.clone()),
    )
    .unwrap()
    .run(&())
    .unwrap_err();
    assert!(err.to_string().contains("a batch of schema"), "{err}");
    assert!(!dir.path().join("b").exists());
    // Files and a stream at once; range partitioning.
    let both = JobOptions::new([dir.path().join("x.parquet")], dir.path().join("c"), 1)
        .with_partition_by(["k"]);
    assert!(matches!(
        Job::from_stream(both, stream(vec![], schema.clone())),
        Err(JobError::InvalidOption(_))
    ));
    let range = JobOptions::new(Vec::<std::path::PathBuf>::new(), dir.path().join("d"), 4)
        .with_keys(["k"])
        .with_scheme(Scheme::Range);
    assert!(matches!(
        Job::from_stream(range, stream(vec![], schema)),
        Err(JobError::InvalidOption(e)) if e.contains("range")
    ));
}

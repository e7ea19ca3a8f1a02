//! The job as a library: a run's manifest read back equals the one it returned, every row
//! lands once, and a cancelled or failed run leaves nothing behind.

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use partout_job::{
    Format, Job, JobError, JobOptions, Layout, Manifest, Progress, Scheme, WriteMode, repartition,
};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const ROWS: i64 = 200_000;

/// A Parquet file of `ROWS` rows (`k`, `s`) in row groups of 20,000, so a run has frames for
/// several workers.
fn input(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("in.parquet");
    let batch = |start: i64| {
        let k = Int64Array::from_iter_values(start..start + 20_000);
        let s = StringArray::from_iter_values((start..start + 20_000).map(|i| format!("v{i}")));
        RecordBatch::try_from_iter([("k", Arc::new(k) as ArrayRef), ("s", Arc::new(s) as _)])
            .unwrap()
    };
    let first = batch(0);
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), first.schema(), None).unwrap();
    for start in (0..ROWS).step_by(20_000) {
        writer.write(&batch(start)).unwrap();
        writer.flush().unwrap();
    }
    writer.close().unwrap();
    path
}

/// Nothing but `keep` in `dir`: no output, no staging directory.
fn assert_only(dir: &Path, keep: &[&str]) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, keep, "what the run left in {}", dir.display());
}

#[test]
fn the_manifest_read_back_is_the_one_returned() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path());
    for (scheme, format, layout) in [
        (Scheme::Spark, Format::Parquet, Layout::Files),
        (Scheme::Range, Format::Ipc, Layout::Files),
        (Scheme::Hash, Format::Presto, Layout::Shuffle),
        (Scheme::RoundRobin, Format::Ipc, Layout::Shuffle),
    ] {
        let out = dir.path().join(format!("out-{scheme}-{format}-{layout}"));
        let keys: &[&str] = if scheme == Scheme::RoundRobin {
            &[]
        } else {
            &["k"]
        };
        let report = repartition(
            JobOptions::new([&input], &out, 7)
                .with_keys(keys.iter().copied())
                .with_scheme(scheme)
                .with_format(format)
                .with_layout(layout)
                .with_threads(2),
        )
        .unwrap();
        let manifest = &report.manifest;
        assert_eq!(&Manifest::read(&out).unwrap(), manifest);
        assert_eq!(manifest.input_rows, ROWS as u64);
        assert_eq!(manifest.output_rows, ROWS as u64);
        let rows: u64 = manifest.destinations.iter().map(|d| d.rows).sum();
        assert_eq!(rows, ROWS as u64);
        assert_eq!(manifest.destinations.len(), 7);
        assert_eq!(manifest.workers.len(), 2);
        assert_eq!(manifest.range_bounds.is_some(), scheme == Scheme::Range);
        assert_eq!(manifest.shuffle_files.is_some(), layout == Layout::Shuffle);
        for d in &manifest.destinations {
            match layout {
                Layout::Files => {
                    let name = d
                        .only_file()
                        .map(|f| f.name.as_str())
                        .expect("every destination has rows, and a file");
                    let len = std::fs::metadata(out.join(name)).unwrap().len();
                    assert_eq!(len, d.bytes, "{name}");
                    if scheme == Scheme::Spark {
                        assert!(name.starts_with("bucket-"), "{name}");
                    }
                }
                Layout::Shuffle => assert!(d.files.is_none()),
            }
        }
    }
}

/// Cancels once `after` rows were partitioned; counts what it was told.
struct CancelAfter {
    after: u64,
    rows: AtomicU64,
    started: AtomicU64,
}

impl Progress for CancelAfter {
    fn start(&self, rows: Option<u64>) {
        self.started
            .store(rows.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    fn advance(&self, rows: u64, _bytes: u64) {
        self.rows.fetch_add(rows, Ordering::Relaxed);
    }

    fn cancelled(&self) -> bool {
        self.rows.load(Ordering::Relaxed) >= self.after
    }
}

#[test]
fn a_cancelled_run_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path());
    let job = Job::try_new(
        JobOptions::new([&input], dir.path().join("out"), 16)
            .with_keys(["k"])
            .with_threads(2),
    )
    .unwrap();
    assert_eq!(job.input_rows(), Some(ROWS as u64));
    let progress = CancelAfter {
        after: 30_000,
        rows: AtomicU64::new(0),
        started: AtomicU64::new(0),
    };
    let err = job.run(&progress).unwrap_err();
    assert!(matches!(err, JobError::Cancelled), "{err}");
    assert_eq!(progress.started.load(Ordering::Relaxed), ROWS as u64);
    let seen = progress.rows.load(Ordering::Relaxed);
    assert!(
        (30_000..ROWS as u64).contains(&seen),
        "{seen} rows before stopping"
    );
    assert_only(dir.path(), &["in.parquet"]);
}

#[test]
fn impossible_options_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path());
    let out = dir.path().join("out");
    let base = || JobOptions::new([&input], &out, 4).with_keys(["k"]);
    let cases: Vec<(JobOptions, &str)> = vec![
        (base().with_keys(["nope"]), "no key column \"nope\""),
        (JobOptions::new([&input], &out, 0), "between 1 and"),
        (JobOptions::new([&input], &out, 4), "needs key columns"),
        (
            base().with_scheme(Scheme::RoundRobin),
            "round-robin takes no key columns",
        ),
        (
            base()
                .with_format(Format::Presto)
                .with_compression(partout_job::Compression::ZSTD),
            "presto output takes no zstd compression",
        ),
        (
            base().with_compression(partout_job::Compression::Zstd(
                partout_job::ZstdLevel::try_new(-1).unwrap(),
            )),
            "Parquet takes ZSTD levels 1 to 22, not -1",
        ),
        (
            base().with_layout(Layout::Shuffle),
            "shuffle layout writes ipc or presto",
        ),
        (base().with_threads(0), "at least one thread"),
        (base().with_memory_limit(1 << 10), "too small"),
    ];
    for (options, want) in cases {
        let err = Job::try_new(options.clone()).unwrap_err();
        assert!(
            matches!(err, JobError::InvalidOption(_)) && err.to_string().contains(want),
            "{options:?}: {err}"
        );
    }
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep"), "x").unwrap();
    let err = Job::try_new(base()).unwrap_err();
    assert!(matches!(err, JobError::OutputNotEmpty(_)), "{err}");
    assert!(out.join("keep").exists());
    assert_only(dir.path(), &["in.parquet", "out"]);
}

/// A run that waits whenever it is asked whether it is cancelled: between batches, and
/// between its commit's steps, where the waits hold commits open long enough to overlap.
struct Slow;

impl Progress for Slow {
    fn cancelled(&self) -> bool {
        std::thread::sleep(std::time::Duration::from_millis(50));
        false
    }
}

/// Runs adding to one output at once commit in turn, each merging with what the one before
/// it left: every run's rows are there, once each, in files the manifest lists.
#[test]
fn runs_appending_to_one_output_at_once_keep_every_run_s_rows() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path());
    let out = dir.path().join("out");
    let options = || {
        JobOptions::new([&input], &out, 4)
            .with_keys(["k"])
            .with_threads(1)
            .with_mode(WriteMode::Append)
    };
    repartition(options()).unwrap();
    let appending = 4;
    std::thread::scope(|scope| {
        for _ in 0..appending {
            scope.spawn(|| Job::try_new(options()).unwrap().run(&Slow).unwrap());
        }
    });
    let manifest = Manifest::read(&out).unwrap();
    let runs = appending + 1;
    assert_eq!(manifest.output_rows, runs * ROWS as u64);
    let mut seen = vec![0u64; ROWS as usize];
    let mut listed = 1; // the manifest
    for entry in &manifest.destinations {
        for file in entry.files.as_deref().unwrap() {
            listed += 1;
            let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                std::fs::File::open(out.join(&file.name)).unwrap(),
            )
            .unwrap()
            .build()
            .unwrap();
            for batch in reader {
                let batch = batch.unwrap();
                let k = batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                for &k in k.values() {
                    seen[k as usize] += 1;
                }
            }
        }
    }
    assert!(
        seen.iter().all(|&n| n == runs),
        "a row not there {runs} times"
    );
    let on_disk = std::fs::read_dir(&out).unwrap().count();
    assert_eq!(on_disk, listed, "files the manifest does not list");
}

//! Jobs whose output is an object store's prefix, written to a real S3 server the test starts
//! (s3s-fs, in process, on 127.0.0.1; its objects are files under its root, which the test
//! reads directly): every format and layout equal to the same run on local disk, read back
//! through the output layer's reader; a destination past one part uploaded in parts; exactly
//! the objects the manifest names, then `_SUCCESS`; a prefix holding data refused, and
//! replaced with overwrite; a wrong secret refused without showing it, nothing committed;
//! transient failures retried to the same output; a server failing for good ends the run
//! with an error naming what failed, nothing committed, no upload left pending.

use arrow_array::{Array, Int64Array, RecordBatch, RecordBatchIterator};
use partout_format::Format;
use partout_job::{Job, JobError, JobOptions, Layout, Manifest, StorageOptions};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

mod s3;
use s3::{Faults, SECRET, Server, batches, ids_by_destination};

/// Runs a job of `rows` rows into `output`.
fn run(options: JobOptions, rows: i64, pad: usize) -> Result<Manifest, JobError> {
    let batches = batches(rows, pad);
    let schema = batches[0].schema();
    let stream = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
    Ok(Job::from_stream(options, Box::new(stream))?
        .run(&())?
        .manifest)
}

/// The names a manifest gives its objects, and the two markers.
fn named(manifest: &Manifest) -> Vec<String> {
    let mut names: Vec<String> = manifest
        .destinations
        .iter()
        .filter_map(|d| d.only_file().map(|f| f.name.as_str()).map(str::to_string))
        .collect();
    for files in manifest.shuffle_files.iter().flatten() {
        names.extend([files.data.clone(), files.index.clone()]);
    }
    names.extend(["_SUCCESS".to_string(), "_manifest.json".to_string()]);
    names.sort();
    names
}

#[test]
fn every_layout_in_the_store_equals_the_local_run() {
    let server = Server::start();
    let local = tempfile::tempdir().unwrap();
    for (format, layout) in [
        (Format::Ipc, Layout::Files),
        (Format::Ipc, Layout::Shuffle),
        (Format::Parquet, Layout::Files),
    ] {
        let prefix = format!("{format:?}-{layout:?}").to_lowercase();
        let options = |output: String| {
            JobOptions::new(Vec::<PathBuf>::new(), output, 4)
                .with_keys(["k"])
                .with_format(format)
                .with_layout(layout)
                .with_threads(2)
                .with_memory_limit(16 << 20)
        };
        let stored = run(
            options(format!("s3://lake/{prefix}")).with_storage_options(server.options(SECRET)),
            50_000,
            0,
        )
        .unwrap();
        let here = local.path().join(&prefix);
        let mine = run(options(here.to_str().unwrap().to_string()), 50_000, 0).unwrap();
        assert_eq!(server.objects(&prefix), named(&stored), "{prefix}");
        assert_eq!(Manifest::read(&server.dir(&prefix)).unwrap(), stored);
        let rows = |m: &Manifest| m.destinations.iter().map(|d| d.rows).collect::<Vec<_>>();
        assert_eq!(rows(&stored), rows(&mine), "{prefix}");
        if format == Format::Parquet {
            // Each object's name carries the run's id; the files' rows are the manifest's.
            for d in &stored.destinations {
                let name = d.only_file().map(|f| f.name.as_str()).unwrap();
                assert!(
                    name.starts_with(&format!("part-{:05}-", d.destination)),
                    "{name}"
                );
                let file = std::fs::File::open(server.dir(&prefix).join(name)).unwrap();
                let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
                use parquet::file::reader::FileReader;
                assert_eq!(reader.metadata().file_metadata().num_rows() as u64, d.rows);
            }
        } else {
            assert_eq!(
                ids_by_destination(&server.dir(&prefix)),
                ids_by_destination(&here)
            );
        }
    }
}

#[test]
fn a_destination_past_one_part_is_uploaded_in_parts() {
    let faults = Faults::none();
    let server = Server::with_faults(faults.clone());
    // One destination of ~30 MB: four parts of 8 MiB.
    let options = JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/big", 1)
        .with_keys(["k"])
        .with_format(Format::Ipc)
        .with_threads(2)
        .with_storage_options(server.options(SECRET));
    let manifest = run(options, 400_000, 60).unwrap();
    let name = manifest.destinations[0]
        .only_file()
        .map(|f| f.name.as_str())
        .unwrap();
    let size = std::fs::metadata(server.dir("big").join(name))
        .unwrap()
        .len();
    assert!(size > 24 << 20, "{size} bytes: not past three parts");
    // Put in parts of 8 MiB, not in one request: at least four of them.
    let parts = faults.parts.load(Ordering::SeqCst);
    assert!(parts >= 4, "{size} bytes put in {parts} parts");
    assert_eq!(size, manifest.destinations[0].bytes);
    let ids = ids_by_destination(&server.dir("big"));
    assert_eq!(ids[0], (0..400_000).collect::<Vec<_>>());
}

#[test]
fn a_prefix_holding_data_is_refused_and_overwrite_replaces_it() {
    let server = Server::start();
    let options = |n: u32| {
        JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/again", n)
            .with_keys(["k"])
            .with_format(Format::Ipc)
            .with_storage_options(server.options(SECRET))
    };
    let first = run(options(3), 20_000, 0).unwrap();
    let before = server.objects("again");
    let refused = run(options(2), 100, 0).unwrap_err();
    assert!(matches!(refused, JobError::OutputNotEmpty(_)), "{refused}");
    assert!(refused.to_string().contains("s3://lake/again"), "{refused}");
    assert_eq!(server.objects("again"), before);
    let second = run(options(2).with_overwrite(true), 7_000, 0).unwrap();
    assert_eq!(server.objects("again"), named(&second));
    assert_ne!(named(&first), named(&second));
    assert_eq!(
        ids_by_destination(&server.dir("again")).concat().len(),
        7_000
    );
}

/// An overwrite whose writes fail one at a time, each in turn (its objects, its manifest, its
/// `_SUCCESS`, the old objects' removal), leaves the old output whole or the new one: failing
/// before its manifest is in place, the old objects and rows as they were; failing at
/// `_SUCCESS`, after its manifest replaced the old one, that manifest taken back and every old
/// object left as it was (a reader of the manifest sees nothing, a reader of `_SUCCESS` the
/// old run); failing after, the new output whole. An overwrite that deleted the old objects
/// before its manifest and `_SUCCESS` were in place fails here.
#[test]
fn an_overwrite_failing_at_any_write_leaves_the_old_output_whole() {
    let options = |server: &Server, n: u32| {
        let mut options = server.options(SECRET).pairs().to_vec();
        options.extend([
            ("max_retries".into(), "0".into()),
            ("retry_timeout".into(), "1s".into()),
        ]);
        JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/old", n)
            .with_keys(["k"])
            .with_format(Format::Ipc)
            .with_storage_options(StorageOptions::new(options))
    };
    // The writes each run makes, counted on a server that fails none, and the new output.
    let counting = Faults::none();
    let server = Server::with_faults(counting.clone());
    run(options(&server, 3), 20_000, 0).unwrap();
    let first_writes = counting.counted();
    run(options(&server, 2).with_overwrite(true), 7_000, 0).unwrap();
    let overwrite_writes = counting.counted() - first_writes;
    let new_ids = ids_by_destination(&server.dir("old"));
    assert!(overwrite_writes >= 4, "{overwrite_writes} writes");
    let mut old_whole = 0;
    for failing in 1..=overwrite_writes {
        // That one write fails (no retry), the ones after it succeed.
        let server = Server::with_faults(Faults::new(first_writes + failing, 1, 500));
        run(options(&server, 3), 20_000, 0).unwrap();
        let (objects, ids) = (
            server.objects("old"),
            ids_by_destination(&server.dir("old")),
        );
        let what = format!("failing at write {failing} of {overwrite_writes}");
        match run(options(&server, 2).with_overwrite(true), 7_000, 0) {
            // Past the commit (the old objects' removal): the new output, whole.
            Ok(_) => assert_eq!(ids_by_destination(&server.dir("old")), new_ids, "{what}"),
            Err(error) => {
                let report = partout_core::error::report(&error);
                let now = server.objects("old");
                if now == objects {
                    assert_eq!(ids_by_destination(&server.dir("old")), ids, "{what}");
                    old_whole += 1;
                } else {
                    let without_manifest: Vec<String> = objects
                        .iter()
                        .filter(|o| *o != "_manifest.json")
                        .cloned()
                        .collect();
                    assert!(report.contains("_SUCCESS"), "{what}: {report}");
                    assert_eq!(now, without_manifest, "{what}: {report}");
                }
            }
        }
    }
    // The writes before the manifest (one per new object, and the manifest's own) each left
    // the old output whole.
    assert!(
        old_whole >= 3,
        "{old_whole} of {overwrite_writes} failures left the old output"
    );
}

#[test]
fn a_wrong_secret_is_refused_without_showing_it_and_commits_nothing() {
    let server = Server::start();
    let options = JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/denied", 2)
        .with_keys(["k"])
        .with_storage_options(server.options("not-the-secret-either"));
    let error = run(options, 1_000, 0).unwrap_err();
    let report = partout_core::error::report(&error);
    assert!(report.contains("s3://lake/denied"), "{report}");
    assert!(
        !report.contains("not-the-secret-either") && !report.contains(SECRET),
        "{report}"
    );
    assert!(format!("{error:?}").contains("s3://lake/denied"));
    assert!(server.objects("denied").is_empty());
    // An option no store takes: named, its value not shown.
    let typo = JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/typo", 2)
        .with_keys(["k"])
        .with_storage_options(StorageOptions::new([("aws_secret_acces_key", SECRET)]));
    let error = run(typo, 10, 0).unwrap_err();
    assert!(matches!(error, JobError::InvalidOption(_)), "{error:?}");
    assert!(
        error.to_string().contains("aws_secret_acces_key"),
        "{error}"
    );
    assert!(!format!("{error:?}").contains(SECRET));
    let debug = format!(
        "{:?}",
        StorageOptions::new([("aws_secret_access_key", SECRET)])
    );
    assert!(!debug.contains(SECRET), "{debug}");
}

#[test]
fn transient_failures_are_retried_to_the_same_output() {
    // Writes 3 to 6 answered 503 SlowDown once each: object_store retries them.
    let faults = Faults::new(3, 4, 503);
    let server = Server::with_faults(faults.clone());
    let options = |output: &str| {
        JobOptions::new(Vec::<PathBuf>::new(), output, 3)
            .with_keys(["k"])
            .with_format(Format::Ipc)
    };
    let manifest = run(
        options("s3://lake/retried").with_storage_options(server.options(SECRET)),
        30_000,
        0,
    )
    .unwrap();
    assert_eq!(server.objects("retried"), named(&manifest));
    // The same output as a run that met no failure, destination by destination: a retried
    // part landed in its own destination's object, once.
    let local = tempfile::tempdir().unwrap();
    let here = local.path().join("here");
    run(options(here.to_str().unwrap()), 30_000, 0).unwrap();
    let retried = ids_by_destination(&server.dir("retried"));
    assert_eq!(retried, ids_by_destination(&here));
    assert_eq!(retried.concat().len(), 30_000);
    assert!(
        faults.failed.load(Ordering::SeqCst) >= 4,
        "no failure was injected"
    );
}

#[test]
fn a_server_failing_for_good_ends_the_run_with_nothing_committed_or_pending() {
    // From the 3rd write on, every write fails: the first parts of the 30 MB destination
    // are taken, the rest refused; the upload must be aborted.
    let server = Server::with_faults(Faults::new(3, usize::MAX, 500));
    let mut options = server.options(SECRET).pairs().to_vec();
    options.extend([
        ("max_retries".into(), "2".into()),
        ("retry_timeout".into(), "5s".into()),
    ]);
    let options = JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/broken", 2)
        .with_keys(["k"])
        .with_format(Format::Ipc)
        .with_storage_options(StorageOptions::new(options));
    let started = std::time::Instant::now();
    let error = run(options, 400_000, 60).unwrap_err();
    let report = partout_core::error::report(&error);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{report}"
    );
    assert!(report.contains("broken/"), "{report}");
    assert!(
        !server
            .objects("broken")
            .iter()
            .any(|o| o == "_manifest.json" || o == "_SUCCESS")
    );
    assert!(
        server.objects("broken").is_empty(),
        "{:?}",
        server.objects("broken")
    );
    assert_eq!(
        server.pending_uploads(),
        0,
        "a multipart upload was left pending"
    );
}

/// Cancelled once the server has taken `after` writes.
struct CancelAfter {
    faults: Arc<Faults>,
    after: usize,
}

impl partout_job::Progress for CancelAfter {
    fn cancelled(&self) -> bool {
        self.faults.counted() >= self.after
    }
}

#[test]
fn a_run_cancelled_while_uploading_leaves_nothing_and_no_upload_pending() {
    // Writes are counted, none fails. One destination of 30 MB goes in four parts, two in
    // flight: cancelled once its upload began and took a part, the run sends no more parts,
    // aborts the upload and leaves nothing.
    let faults = Faults::new(usize::MAX, 0, 503);
    let server = Server::with_faults(faults.clone());
    let options = |prefix: &str| {
        JobOptions::new(Vec::<PathBuf>::new(), format!("s3://lake/{prefix}"), 1)
            .with_keys(["k"])
            .with_format(Format::Ipc)
            .with_threads(2)
            .with_storage_options(server.options(SECRET))
    };
    // The writes of the whole run, uncancelled.
    run(options("whole"), 400_000, 60).unwrap();
    let whole = faults.counted();
    let batches = batches(400_000, 60);
    let schema = batches[0].schema();
    let stream = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
    let job = Job::from_stream(options("cancelled"), Box::new(stream)).unwrap();
    let error = job
        .run(&CancelAfter {
            faults: faults.clone(),
            after: whole + 2,
        })
        .unwrap_err();
    assert!(matches!(error, JobError::Cancelled), "{error:?}");
    // Its uploads stopped at the next part: fewer writes than the run's (the deletes that
    // undo them are not writes).
    let writes = faults.counted() - whole;
    assert!(
        writes >= 2 && writes + 3 <= whole,
        "{writes} writes of {whole}"
    );
    assert!(
        server.objects("cancelled").is_empty(),
        "{:?}",
        server.objects("cancelled")
    );
    assert_eq!(
        server.pending_uploads(),
        0,
        "a multipart upload was left pending"
    );
}

#[test]
fn a_commit_in_a_small_memory_limit_uploads_every_row() {
    // 12 MiB: parts of 5 MiB, one upload at a time (the plan's bound is the unit test's).
    let server = Server::start();
    let options = JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/small", 2)
        .with_keys(["k"])
        .with_format(Format::Ipc)
        .with_threads(2)
        .with_memory_limit(12 << 20)
        .with_storage_options(server.options(SECRET));
    let manifest = run(options, 400_000, 60).unwrap();
    assert_eq!(server.objects("small"), named(&manifest));
    let mut ids = ids_by_destination(&server.dir("small")).concat();
    ids.sort_unstable();
    assert_eq!(ids, (0..400_000).collect::<Vec<_>>());
}

#[test]
fn a_hive_dataset_of_ten_thousand_values_is_committed_whole() {
    // 10,000 values of `k2`, five rows each: 10,000 objects, uploaded four at a time.
    let server = Server::start();
    let rows = 50_000i64;
    let batches: Vec<_> = batches(rows, 0)
        .into_iter()
        .map(|b| {
            let ids = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
            let k2 = Int64Array::from_iter_values(ids.values().iter().map(|i| i % 10_000));
            let mut columns = b.columns().to_vec();
            columns.push(Arc::new(k2));
            let mut fields: Vec<_> = b.schema().fields().iter().cloned().collect();
            fields.push(Arc::new(arrow_schema::Field::new(
                "k2",
                arrow_schema::DataType::Int64,
                false,
            )));
            RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns).unwrap()
        })
        .collect();
    let schema = batches[0].schema();
    let options = JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/values", 1)
        .with_partition_by(["k2"])
        .with_max_partitions(10_000)
        .with_threads(2)
        .with_storage_options(server.options(SECRET));
    let stream = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
    let manifest = Job::from_stream(options, Box::new(stream))
        .unwrap()
        .run(&())
        .unwrap()
        .manifest;
    assert_eq!(manifest.destinations.len(), 10_000);
    let objects = server.objects("values");
    assert_eq!(objects, named(&manifest));
    // Each value's object holds its five rows, and only them.
    use parquet::file::reader::FileReader;
    for d in &manifest.destinations {
        let name = d.only_file().map(|f| f.name.as_str()).unwrap();
        let value: i64 = name
            .strip_prefix("k2=")
            .and_then(|n| n.split('/').next())
            .unwrap()
            .parse()
            .unwrap();
        let file = std::fs::File::open(server.dir("values").join(name)).unwrap();
        let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows(), 5, "{name}");
        assert_eq!(d.rows, 5);
        let ids: Vec<i64> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|row| {
                use parquet::record::RowAccessor;
                row.unwrap().get_long(1).unwrap()
            })
            .collect();
        assert!(ids.iter().all(|i| i % 10_000 == value), "{name}: {ids:?}");
    }
}

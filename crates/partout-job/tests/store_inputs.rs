//! Jobs whose inputs are objects of a real S3 server the test starts (s3s-fs, in process, on
//! 127.0.0.1; its objects are files under its root, which the test fills directly): a prefix
//! of every input format read as the same files on disk are; a pattern and an object's name
//! each naming exactly their files; a Parquet object read by ranged GETs in bounded windows,
//! each byte got about once; objects that are missing, damaged, refused or failing for a
//! while; an output under the input prefix never read back.

use arrow_array::RecordBatch;
use partout_format::Format;
use partout_job::{Job, JobError, JobOptions, Manifest, StorageOptions};
use std::io::Write;
use std::path::Path;

mod s3;
use s3::{Faults, SECRET, Server, batches, ids_by_destination};

/// Rows in the inputs written by [`write_inputs`].
const ROWS: i64 = 40_000;

fn parquet(path: &Path, batches: &[RecordBatch], group_rows: usize) {
    let properties = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(group_rows))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), Some(properties)).unwrap();
    for batch in batches {
        writer.write(batch).unwrap();
    }
    writer.close().unwrap();
}

/// Rows `0..ROWS` in four files of every kind under `dir` (a Parquet file of several row
/// groups, an Arrow file, an Arrow stream, a gzipped CSV in a subdirectory), and files a
/// reader of the directory passes over.
fn write_inputs(dir: &Path) {
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let all = batches(ROWS, 3);
    let quarter = all.len() / 4;
    let parts: Vec<&[RecordBatch]> = vec![
        &all[..quarter],
        &all[quarter..2 * quarter],
        &all[2 * quarter..3 * quarter],
        &all[3 * quarter..],
    ];
    parquet(&dir.join("a.parquet"), parts[0], 3_000);
    let schema = all[0].schema();
    let mut file = arrow_ipc::writer::FileWriter::try_new(
        std::fs::File::create(dir.join("b.arrow")).unwrap(),
        &schema,
    )
    .unwrap();
    parts[1].iter().for_each(|b| file.write(b).unwrap());
    file.finish().unwrap();
    let mut stream = arrow_ipc::writer::StreamWriter::try_new(
        std::fs::File::create(dir.join("c.arrows")).unwrap(),
        &schema,
    )
    .unwrap();
    parts[2].iter().for_each(|b| stream.write(b).unwrap());
    stream.finish().unwrap();
    let csv = std::fs::File::create(dir.join("sub/d.csv.gz")).unwrap();
    let mut csv = flate2::write::GzEncoder::new(csv, flate2::Compression::fast());
    let mut text = arrow_csv::WriterBuilder::new()
        .with_header(true)
        .build(Vec::new());
    parts[3].iter().for_each(|b| text.write(b).unwrap());
    csv.write_all(&text.into_inner()).unwrap();
    csv.finish().unwrap();
    // Passed over: hidden names, and a file of no format partout reads.
    std::fs::write(dir.join("_SUCCESS"), b"").unwrap();
    std::fs::write(dir.join(".hidden.parquet"), b"not parquet").unwrap();
    std::fs::write(dir.join("notes.txt"), b"what these files are").unwrap();
}

/// A job of `inputs` into `output` (4 destinations by `k`, Arrow IPC files), with `options`.
fn job(inputs: &[&str], output: &Path, options: &StorageOptions) -> Result<Manifest, JobError> {
    let options = JobOptions::new(inputs.to_vec(), output, 4)
        .with_keys(["k"])
        .with_format(Format::Ipc)
        .with_threads(2)
        .with_memory_limit(64 << 20)
        .with_storage_options(options.clone());
    Ok(Job::try_new(options)?.run(&())?.manifest)
}

fn rows(manifest: &Manifest) -> u64 {
    manifest.destinations.iter().map(|d| d.rows).sum()
}

#[test]
fn a_prefix_of_every_format_is_read_as_the_same_files_on_disk() {
    let server = Server::start();
    write_inputs(&server.dir("in"));
    let out = tempfile::tempdir().unwrap();
    let (remote, local) = (out.path().join("remote"), out.path().join("local"));
    let from_store = job(&["s3://lake/in/"], &remote, &server.options(SECRET)).unwrap();
    let from_disk = job(
        &[server.dir("in").to_str().unwrap()],
        &local,
        &StorageOptions::default(),
    )
    .unwrap();
    assert_eq!(rows(&from_store), ROWS as u64);
    assert_eq!(ids_by_destination(&remote), ids_by_destination(&local));
    // Every id once.
    let mut ids = ids_by_destination(&remote).concat();
    ids.sort_unstable();
    assert_eq!(ids, (0..ROWS).collect::<Vec<_>>());
    assert_eq!(from_store.destinations.len(), from_disk.destinations.len());
}

#[test]
fn a_pattern_and_an_object_name_read_exactly_their_files() {
    let server = Server::start();
    write_inputs(&server.dir("in"));
    let out = tempfile::tempdir().unwrap();
    let options = server.options(SECRET);
    // The files by the quarter of the ids each holds (write_inputs): a.parquet the first,
    // b.arrow the second, c.arrows the third, sub/d.csv.gz the last.
    let quarter = ROWS / 4;
    let ids_of = |files: &[i64]| -> Vec<i64> {
        files
            .iter()
            .flat_map(|&f| f * quarter..(f + 1) * quarter)
            .collect()
    };
    for (i, (inputs, files)) in [
        (vec!["s3://lake/in/*.parquet"], vec![0]),
        (vec!["s3://lake/in/*.arrow*"], vec![1, 2]),
        (vec!["s3://lake/in/**/*.csv.gz"], vec![3]),
        (vec!["s3://lake/in/b.arrow", "s3://lake/in/sub"], vec![1, 3]),
    ]
    .into_iter()
    .enumerate()
    {
        let output = out.path().join(i.to_string());
        let manifest = job(&inputs, &output, &options).unwrap();
        // Exactly the named files' rows, each once: their ids.
        let mut ids = ids_by_destination(&output).concat();
        ids.sort_unstable();
        let want = ids_of(&files);
        assert!(
            ids == want,
            "{inputs:?}: read {} rows, ids {:?} to {:?}; wanted files {files:?}",
            ids.len(),
            ids.first(),
            ids.last()
        );
        assert_eq!(rows(&manifest), ids.len() as u64, "{inputs:?}");
    }
    // `*` stays within one part of a name.
    let none = job(&["s3://lake/in/*.csv.gz"], &out.path().join("x"), &options).unwrap_err();
    assert!(none.to_string().contains("s3://lake/in/*.csv.gz"), "{none}");
}

#[test]
fn a_parquet_object_is_read_in_bounded_windows_each_byte_about_once() {
    let faults = Faults::none();
    let server = Server::with_faults(faults.clone());
    std::fs::create_dir_all(server.dir("big")).unwrap();
    // About 30 MB in two row groups of 150,000 rows: three columns.
    let object = server.dir("big").join("lineitem.parquet");
    parquet(&object, &batches(300_000, 90), 150_000);
    let size = std::fs::metadata(&object).unwrap().len();
    assert!(size > 24 << 20, "{size}");
    let out = tempfile::tempdir().unwrap();
    let manifest = job(&["s3://lake/big/"], out.path(), &server.options(SECRET)).unwrap();
    assert_eq!(rows(&manifest), 300_000);
    let gets = faults.gets.lock().unwrap().clone();
    assert!(
        gets.iter().all(Option::is_some),
        "a GET of a whole object: {gets:?}"
    );
    let asked: Vec<u64> = gets.into_iter().flatten().collect();
    let largest = asked.iter().copied().max().unwrap();
    let total: u64 = asked.iter().sum();
    // Each column's window is a third of what a reader holds; pages (about 1 MiB) past it
    // are got whole.
    assert!(
        largest <= partout_input::STORE_READ_BYTES / 2,
        "a GET of {largest} bytes"
    );
    assert!(
        total <= size + size / 10,
        "{total} bytes got of an object of {size} (GETs: {asked:?})"
    );
    assert!(asked.len() > 8, "{} GETs", asked.len());
}

#[test]
fn missing_damaged_and_refused_objects_are_errors_naming_them() {
    let server = Server::start();
    write_inputs(&server.dir("in"));
    let out = tempfile::tempdir().unwrap();
    let options = server.options(SECRET);
    let missing = job(&["s3://lake/nothing/"], &out.path().join("a"), &options).unwrap_err();
    assert!(matches!(missing, JobError::Input(_)), "{missing:?}");
    assert!(
        missing.to_string().contains("s3://lake/nothing"),
        "{missing}"
    );
    let bucket = job(
        &["s3://no-such-bucket/in/"],
        &out.path().join("b"),
        &options,
    )
    .unwrap_err();
    assert!(
        bucket.to_string().contains("s3://no-such-bucket/in"),
        "{bucket}"
    );
    // A Parquet object cut short: its footer is gone.
    let whole = std::fs::read(server.dir("in/a.parquet")).unwrap();
    std::fs::create_dir_all(server.dir("cut")).unwrap();
    std::fs::write(server.dir("cut/a.parquet"), &whole[..whole.len() / 2]).unwrap();
    let cut = job(&["s3://lake/cut/"], &out.path().join("c"), &options).unwrap_err();
    let report = partout_core::error::report(&cut);
    assert!(report.contains("s3://lake/cut/a.parquet"), "{report}");
    assert!(report.contains("PAR1"), "{report}");
    // A wrong secret: refused, the secret never shown.
    let denied = job(
        &["s3://lake/in/"],
        &out.path().join("d"),
        &server.options("not-the-secret"),
    )
    .unwrap_err();
    let report = format!("{} {denied:?}", partout_core::error::report(&denied));
    assert!(report.contains("s3://lake/in"), "{report}");
    assert!(
        !report.contains("not-the-secret") && !report.contains(SECRET),
        "{report}"
    );
    // Storage options with no store to use them.
    let local = job(
        &[server.dir("in").to_str().unwrap()],
        &out.path().join("e"),
        &options,
    )
    .unwrap_err();
    assert!(local.to_string().contains("storage options"), "{local}");
    assert!(!out.path().join("a").exists() && !out.path().join("d").exists());
}

#[test]
fn reads_failing_for_a_while_are_retried_to_the_same_rows() {
    // GETs 5 to 8 answered 503 SlowDown once each: object_store retries them.
    let faults = Faults::reads(5, 4, 503);
    let server = Server::with_faults(faults.clone());
    write_inputs(&server.dir("in"));
    let out = tempfile::tempdir().unwrap();
    job(
        &["s3://lake/in/"],
        &out.path().join("r"),
        &server.options(SECRET),
    )
    .unwrap();
    let local = job(
        &[server.dir("in").to_str().unwrap()],
        &out.path().join("l"),
        &StorageOptions::default(),
    )
    .unwrap();
    assert_eq!(rows(&local), ROWS as u64);
    assert_eq!(
        ids_by_destination(&out.path().join("r")),
        ids_by_destination(&out.path().join("l"))
    );
    assert_eq!(faults.failed.load(std::sync::atomic::Ordering::SeqCst), 4);
}

#[test]
fn an_output_under_the_input_prefix_is_not_read_back() {
    let server = Server::start();
    write_inputs(&server.dir("data"));
    let options = |output: &str| {
        JobOptions::new(["s3://lake/data/"], output, 3)
            .with_keys(["k"])
            .with_format(Format::Parquet)
            .with_overwrite(true)
            .with_storage_options(server.options(SECRET))
    };
    for _ in 0..2 {
        let run = Job::try_new(options("s3://lake/data/out"))
            .unwrap()
            .run(&())
            .unwrap();
        assert_eq!(rows(&run.manifest), ROWS as u64);
    }
}

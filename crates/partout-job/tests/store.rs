//! Jobs whose output is an object store's prefix, written to a real S3 server the test starts
//! (s3s-fs, in process, on 127.0.0.1; its objects are files under its root, which the test
//! reads directly): every format and layout equal to the same run on local disk, read back
//! through the output layer's reader; a destination past one part uploaded in parts; exactly
//! the objects the manifest names, then `_SUCCESS`; a prefix holding data refused, and
//! replaced with overwrite; a wrong secret refused without showing it, nothing committed;
//! transient failures retried to the same output; a server failing for good ends the run
//! with an error naming what failed, nothing committed, no upload left pending.

use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchIterator, StringArray};
use partout_format::Format;
use partout_io::output::FinishedOutput;
use partout_job::{Job, JobError, JobOptions, Layout, Manifest, StorageOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const KEY: &str = "test-access-key";
const SECRET: &str = "test-secret-never-shown";

/// Failures the server answers with instead of doing a write (a PUT or POST): the writes
/// from the `from`-th on (counting from 1) fail, `times` of them (`usize::MAX`: every one),
/// with `status`.
#[derive(Debug)]
struct Faults {
    from: usize,
    times: usize,
    status: u16,
    writes: AtomicUsize,
    failed: AtomicUsize,
}

impl Faults {
    fn none() -> Arc<Self> {
        Self::new(usize::MAX, 0, 503)
    }

    fn new(from: usize, times: usize, status: u16) -> Arc<Self> {
        Arc::new(Self {
            from,
            times,
            status,
            writes: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
        })
    }

    /// Whether this request fails.
    fn fails(&self, method: &http::Method) -> bool {
        if method != http::Method::PUT && method != http::Method::POST {
            return false;
        }
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        n >= self.from && self.failed.fetch_add(1, Ordering::SeqCst) < self.times
    }
}

/// The S3 service behind [`Faults`].
#[derive(Clone)]
struct Faulty {
    inner: s3s::service::S3Service,
    faults: Arc<Faults>,
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Faulty {
    type Response = http::Response<s3s::Body>;
    type Error = s3s::HttpError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn call(&self, request: http::Request<hyper::body::Incoming>) -> Self::Future {
        if self.faults.fails(request.method()) {
            let body = "<Error><Code>SlowDown</Code><Message>injected</Message></Error>";
            let response = http::Response::builder()
                .status(self.faults.status)
                .body(s3s::Body::from(body.to_string()))
                .expect("a response");
            return Box::pin(async move { Ok(response) });
        }
        hyper::service::Service::call(&self.inner, request)
    }
}

/// An S3 server on 127.0.0.1 whose buckets are directories of `root`; runs while held.
struct Server {
    runtime: tokio::runtime::Runtime,
    address: std::net::SocketAddr,
    root: tempfile::TempDir,
}

impl Server {
    fn start() -> Self {
        Self::with_faults(Faults::none())
    }

    fn with_faults(faults: Arc<Faults>) -> Self {
        use hyper_util::rt::{TokioExecutor, TokioIo};
        use hyper_util::server::conn::auto::Builder;
        use s3s::auth::SimpleAuth;
        use s3s::service::S3ServiceBuilder;
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("lake")).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let fs = s3s_fs::FileSystem::new(root.path()).unwrap();
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(KEY, SECRET));
        let service = Faulty {
            inner: builder.build(),
            faults,
        };
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        runtime.spawn(async move {
            let http = Builder::new(TokioExecutor::new());
            while let Ok((socket, _)) = listener.accept().await {
                let connection = http
                    .serve_connection(TokioIo::new(socket), service.clone())
                    .into_owned();
                tokio::spawn(connection);
            }
        });
        Self {
            runtime,
            address,
            root,
        }
    }

    /// The client's options for this server, with `secret`.
    fn options(&self, secret: &str) -> StorageOptions {
        StorageOptions::new([
            ("aws_endpoint", format!("http://{}", self.address)),
            ("aws_allow_http", "true".into()),
            ("aws_access_key_id", KEY.into()),
            ("aws_secret_access_key", secret.into()),
            ("aws_region", "us-east-1".into()),
        ])
    }

    /// Multipart uploads begun and neither completed nor aborted.
    fn pending_uploads(&self) -> usize {
        std::fs::read_dir(self.root.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with(".upload-") && name.ends_with(".json")
            })
            .count()
    }

    /// Where the objects under `prefix` of bucket `lake` are.
    fn dir(&self, prefix: &str) -> PathBuf {
        self.root.path().join("lake").join(prefix)
    }

    /// The objects under `prefix`, by name relative to it.
    fn objects(&self, prefix: &str) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, base, out);
                } else {
                    let name = path.strip_prefix(base).unwrap().to_str().unwrap();
                    out.push(name.to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.dir(prefix), &self.dir(prefix), &mut out);
        out.sort();
        out
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = &self.runtime;
    }
}

/// Rows `0..rows`: a key of 101 values, the id, and a string of `pad` more characters.
fn batches(rows: i64, pad: usize) -> Vec<RecordBatch> {
    (0..rows)
        .step_by(10_000)
        .map(|start| {
            let ids = start..(start + 10_000).min(rows);
            RecordBatch::try_from_iter([
                (
                    "k",
                    Arc::new(Int64Array::from_iter_values(ids.clone().map(|i| i % 101)))
                        as ArrayRef,
                ),
                ("id", Arc::new(Int64Array::from_iter_values(ids.clone()))),
                (
                    "s",
                    Arc::new(StringArray::from_iter_values(
                        ids.map(|i| format!("v{i:0>pad$}", pad = pad)),
                    )),
                ),
            ])
            .unwrap()
        })
        .collect()
}

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
        .filter_map(|d| d.file.name().map(str::to_string))
        .collect();
    for files in manifest.shuffle_files.iter().flatten() {
        names.extend([files.data.clone(), files.index.clone()]);
    }
    names.extend(["_SUCCESS".to_string(), "_manifest.json".to_string()]);
    names.sort();
    names
}

/// Every destination's ids, read through the output layer's reader.
fn ids_by_destination(dir: &Path) -> Vec<Vec<i64>> {
    let output = FinishedOutput::open(dir).unwrap();
    (0..output.partitions())
        .map(|p| {
            let mut cursor = output.cursor(p).unwrap();
            let mut ids = Vec::new();
            while let Some(message) = cursor.next_message().unwrap() {
                let batch = message.to_batch(output.schema().unwrap()).unwrap();
                let column = batch
                    .column(1)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                ids.extend(column.values().iter().copied());
            }
            ids.sort_unstable();
            ids
        })
        .collect()
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
                let name = d.file.name().unwrap();
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
    let server = Server::start();
    // One destination of ~30 MB: four parts of 8 MiB.
    let options = JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/big", 1)
        .with_keys(["k"])
        .with_format(Format::Ipc)
        .with_threads(2)
        .with_storage_options(server.options(SECRET));
    let manifest = run(options, 400_000, 60).unwrap();
    let name = manifest.destinations[0].file.name().unwrap();
    let size = std::fs::metadata(server.dir("big").join(name))
        .unwrap()
        .len();
    assert!(size > 24 << 20, "{size} bytes: not past three parts");
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
    let options = JobOptions::new(Vec::<PathBuf>::new(), "s3://lake/retried", 3)
        .with_keys(["k"])
        .with_format(Format::Ipc)
        .with_storage_options(server.options(SECRET));
    let manifest = run(options, 30_000, 0).unwrap();
    assert_eq!(server.objects("retried"), named(&manifest));
    assert_eq!(
        ids_by_destination(&server.dir("retried")).concat().len(),
        30_000
    );
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

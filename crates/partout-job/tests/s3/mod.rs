//! An S3 server on 127.0.0.1 for the tests (s3s-fs, in process): its buckets are
//! directories of a temporary root the tests read and fill directly, and failures can be
//! injected between the client and it.

#![allow(dead_code)]

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use partout_job::StorageOptions;
use partout_output::FinishedOutput;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub const KEY: &str = "test-access-key";
pub const SECRET: &str = "test-secret-never-shown";

/// Failures the server answers with instead of doing a request of some methods (writes: a
/// PUT or POST; reads: a GET): those from the `from`-th on (counting from 1) fail, `times`
/// of them (`usize::MAX`: every one), with `status`. The ranges of every GET are recorded.
#[derive(Debug)]
pub struct Faults {
    from: usize,
    times: usize,
    status: u16,
    reads: bool,
    requests: AtomicUsize,
    pub failed: AtomicUsize,
    /// The parts of multipart uploads put (PUTs naming a `partNumber`), failed or not.
    pub parts: AtomicUsize,
    /// The bytes each ranged GET asked for, in order (`None`: the whole object).
    pub gets: Mutex<Vec<Option<u64>>>,
}

impl Faults {
    pub fn none() -> Arc<Self> {
        Self::new(usize::MAX, 0, 503)
    }

    /// Writes failing.
    pub fn new(from: usize, times: usize, status: u16) -> Arc<Self> {
        Arc::new(Self {
            from,
            times,
            status,
            reads: false,
            requests: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            parts: AtomicUsize::new(0),
            gets: Mutex::new(Vec::new()),
        })
    }

    /// Reads failing.
    pub fn reads(from: usize, times: usize, status: u16) -> Arc<Self> {
        let mut faults = Arc::into_inner(Self::new(from, times, status)).unwrap();
        faults.reads = true;
        Arc::new(faults)
    }

    /// Requests of the methods counted so far (failed or not).
    pub fn counted(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Whether this request fails; records a GET's range.
    fn fails(&self, request: &http::Request<hyper::body::Incoming>) -> bool {
        let method = request.method();
        if method == http::Method::GET {
            let asked = request
                .headers()
                .get(http::header::RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("bytes="))
                .and_then(|v| v.split_once('-'))
                .and_then(|(a, b)| Some(b.parse::<u64>().ok()? + 1 - a.parse::<u64>().ok()?));
            // (Listings are GETs too.)
            if !request
                .uri()
                .query()
                .is_some_and(|q| q.contains("list-type"))
            {
                self.gets.lock().unwrap().push(asked);
            }
        }
        if method == http::Method::PUT
            && request
                .uri()
                .query()
                .is_some_and(|q| q.split('&').any(|kv| kv.starts_with("partNumber=")))
        {
            self.parts.fetch_add(1, Ordering::SeqCst);
        }
        let counted = match self.reads {
            true => method == http::Method::GET,
            false => method == http::Method::PUT || method == http::Method::POST,
        };
        if !counted {
            return false;
        }
        let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        n >= self.from
            && self
                .failed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| {
                    (f < self.times).then_some(f + 1)
                })
                .is_ok()
    }
}

/// The S3 service behind [`Faults`].
#[derive(Clone)]
pub struct Faulty {
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
        if self.faults.fails(&request) {
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
pub struct Server {
    runtime: tokio::runtime::Runtime,
    address: std::net::SocketAddr,
    root: tempfile::TempDir,
}

impl Server {
    pub fn start() -> Self {
        Self::with_faults(Faults::none())
    }

    pub fn with_faults(faults: Arc<Faults>) -> Self {
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
    pub fn options(&self, secret: &str) -> StorageOptions {
        StorageOptions::new([
            ("aws_endpoint", format!("http://{}", self.address)),
            ("aws_allow_http", "true".into()),
            ("aws_access_key_id", KEY.into()),
            ("aws_secret_access_key", secret.into()),
            ("aws_region", "us-east-1".into()),
        ])
    }

    /// Multipart uploads begun and neither completed nor aborted.
    pub fn pending_uploads(&self) -> usize {
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
    pub fn dir(&self, prefix: &str) -> PathBuf {
        self.root.path().join("lake").join(prefix)
    }

    /// The objects under `prefix`, by name relative to it.
    pub fn objects(&self, prefix: &str) -> Vec<String> {
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
pub fn batches(rows: i64, pad: usize) -> Vec<RecordBatch> {
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

/// Every destination's ids, read through the output layer's reader.
pub fn ids_by_destination(dir: &Path) -> Vec<Vec<i64>> {
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

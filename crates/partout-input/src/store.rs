//! Object stores (S3, GCS, Azure) as partout reaches them: a URL and options made into an
//! `object_store` client, and the one runtime its requests run on.
//!
//! The clients are `object_store`'s (arrow-rs's), configured from the environment variables
//! their builders read, then from the options given (`aws_endpoint`, `aws_allow_http`, …, as
//! Polars and deltalake spell them), then `max_retries` / `retry_timeout` for the retries of
//! transient failures. A secret never appears in an error or in a URL as shown.
//!
//! Requests run on one runtime of partout's own ([`run`]), whatever thread asks: a worker of
//! the job, Python's thread, or a thread of another runtime (blocking that thread while the
//! request runs elsewhere, never nesting runtimes). A client keeps its connections on the
//! runtime that made them, so a client's requests all go through [`run`].

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreScheme};
use std::sync::{Arc, OnceLock};

/// An object store's client and the path a URL names in it.
#[derive(Clone)]
pub struct Client {
    /// The URL as it may be shown: no user, password or query.
    pub url: String,
    /// The store's client.
    pub store: Arc<dyn ObjectStore>,
    /// The path the URL names in the store.
    pub path: ObjectPath,
    /// How long a failed run keeps trying to take back what it wrote (the `retry_timeout`
    /// option): a store that went away may come back within it.
    pub patience: std::time::Duration,
}

/// Whether `text` is the URL of an object store (a scheme of two letters or more, not
/// `file`), rather than a local path or a `file://` URL.
pub fn is_store_url(text: &str) -> bool {
    text.split_once("://").is_some_and(|(scheme, _)| {
        scheme.len() > 1
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            && !scheme.eq_ignore_ascii_case("file")
    })
}

impl Client {
    /// The client of the store `url` names (`s3://bucket/path`, `gs://…`, `az://…`,
    /// `abfss://…`), configured from the environment and then `options`.
    ///
    /// # Errors
    /// What is wrong, for a URL of no object store, an option its store does not know
    /// (naming the key, never the value), or a client that cannot be configured.
    pub fn try_new(url: &url::Url, options: &[(String, String)]) -> Result<Self, String> {
        let unknown = || {
            format!(
                "{}: not an object store partout reaches (s3://, gs://, az://, abfss://)",
                shown(url)
            )
        };
        let (scheme, path) = ObjectStoreScheme::parse(url).map_err(|_| unknown())?;
        let invalid = |e: object_store::Error| format!("{}: {e}", shown(url));
        let (retry, options) = retry_config(options)?;
        let patience = retry.retry_timeout;
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::AmazonS3 => {
                use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
                let mut builder = AmazonS3Builder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry);
                for (key, value) in options {
                    builder = builder.with_config(key_of::<AmazonS3ConfigKey>(key, "S3")?, value);
                }
                Arc::new(builder.build().map_err(invalid)?)
            }
            ObjectStoreScheme::GoogleCloudStorage => {
                use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
                let mut builder = GoogleCloudStorageBuilder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry);
                for (key, value) in options {
                    builder = builder.with_config(key_of::<GoogleConfigKey>(key, "GCS")?, value);
                }
                Arc::new(builder.build().map_err(invalid)?)
            }
            ObjectStoreScheme::MicrosoftAzure => {
                use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
                let mut builder = MicrosoftAzureBuilder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry);
                for (key, value) in options {
                    builder = builder.with_config(key_of::<AzureConfigKey>(key, "Azure")?, value);
                }
                Arc::new(builder.build().map_err(invalid)?)
            }
            _ => return Err(unknown()),
        };
        Ok(Self {
            url: shown(url),
            store,
            path,
            patience,
        })
    }

    /// The URL of the object `path` of this client's store, as it may be shown.
    pub fn url_of(&self, path: &ObjectPath) -> String {
        let base = self.url.trim_end_matches('/');
        let own = self.path.as_ref();
        let rest = path.as_ref();
        // The URL names the store's root and then `self.path`: replace that tail.
        let root = base.strip_suffix(own).unwrap_or(base).trim_end_matches('/');
        format!("{root}/{rest}")
    }
}

/// `url` as it may be shown: scheme, host and path, never a user, password or query.
pub(crate) fn shown(url: &url::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// An option: its key and its value.
type Pair = (String, String);

/// How failed requests are retried (object_store's `RetryConfig`: transient errors — 5xx,
/// `SlowDown`, connection resets, timeouts — retried with exponential backoff), as the options
/// `max_retries` (default 10) and `retry_timeout` (seconds from a request's first try after
/// which it is not tried again, `30` or `30s`; default 180), which Polars' storage options
/// also take; and the options left for the store's client.
fn retry_config(
    options: &[(String, String)],
) -> Result<(object_store::RetryConfig, Vec<&Pair>), String> {
    let mut retry = object_store::RetryConfig::default();
    let mut rest = Vec::new();
    for pair in options {
        let (key, value) = pair;
        let number = |unit: &str| {
            value
                .trim()
                .trim_end_matches(unit)
                .parse::<u64>()
                .map_err(|_| format!("{key} takes a whole number, not {value:?}"))
        };
        match key.as_str() {
            "max_retries" => retry.max_retries = number("")? as usize,
            "retry_timeout" => retry.retry_timeout = std::time::Duration::from_secs(number("s")?),
            _ => rest.push(pair),
        }
    }
    Ok((retry, rest))
}

/// The configuration key `key` of a store, or an error naming it (never its value).
fn key_of<K: std::str::FromStr>(key: &str, store: &str) -> Result<K, String> {
    key.parse().map_err(|_| {
        format!(
            "{key:?} is not an option of {store} (object_store's configuration keys, e.g. \
             aws_endpoint, aws_region, aws_allow_http)"
        )
    })
}

/// The runtime every store request runs on: two threads, made at the first request.
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("partout-store")
                .enable_all()
                .build()
                .map_err(|e| format!("the object store's client cannot start: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Begins `future` on the stores' runtime: its handle, to wait for ([`wait`]) or abort.
///
/// # Errors
/// When the runtime cannot start.
pub(crate) fn spawn<F>(future: F) -> Result<tokio::task::JoinHandle<F::Output>, String>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(runtime()?.spawn(future))
}

/// Waits on this thread for what [`spawn`] began.
///
/// # Errors
/// When it panicked or was aborted.
pub(crate) fn wait<T>(task: tokio::task::JoinHandle<T>) -> Result<T, String> {
    futures::executor::block_on(task).map_err(|e| format!("the object store's client failed: {e}"))
}

/// Runs `future` on the stores' runtime and waits for it on this thread.
///
/// # Errors
/// When the runtime cannot start, or the future panicked.
pub(crate) fn run<F>(future: F) -> Result<F::Output, String>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    wait(spawn(future)?)
}

/// Runs `future`, which may borrow from the caller, to its end with the stores' runtime's
/// I/O and timers: on this thread, or on a thread of its own when this one is inside another
/// runtime (where blocking on one is refused).
///
/// # Errors
/// When the runtime cannot start, or the future panicked.
pub fn run_here<F>(future: F) -> Result<F::Output, String>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    let runtime = runtime()?;
    if tokio::runtime::Handle::try_current().is_err() {
        return Ok(runtime.block_on(future));
    }
    std::thread::scope(|scope| scope.spawn(|| runtime.block_on(future)).join())
        .map_err(|_| "the object store's client panicked".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_secrets() {
        let url = url::Url::parse("s3://key:secret@bucket/out?token=abc").unwrap();
        let text = shown(&url);
        assert!(!text.contains("secret") && !text.contains("abc") && !text.contains("key"));
        assert!(text.starts_with("s3://bucket/out"), "{text}");
    }

    #[test]
    fn store_urls_are_told_from_paths() {
        for url in [
            "s3://b/k",
            "gs://b",
            "az://c/p",
            "abfss://c@a.dfs.core.windows.net/p",
        ] {
            assert!(is_store_url(url), "{url}");
        }
        for path in [
            "data/x.parquet",
            "/tmp/a://b",
            "file:///tmp/x",
            "C://x",
            "FILE://x",
        ] {
            assert!(!is_store_url(path), "{path}");
        }
    }

    #[test]
    fn an_object_is_named_by_the_store_root_and_its_path() {
        let url = url::Url::parse("s3://bucket/in/data").unwrap();
        let client = Client::try_new(&url, &[("aws_region".into(), "us-east-1".into())]).unwrap();
        let object = ObjectPath::from("in/data/a/part-0.parquet");
        assert_eq!(
            client.url_of(&object),
            "s3://bucket/in/data/a/part-0.parquet"
        );
    }

    #[test]
    fn requests_run_from_inside_another_runtime() {
        let outer = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let got = outer.block_on(async { run(async { 6 * 7 }) });
        assert_eq!(got, Ok(42));
        let borrowed = 6;
        let got = outer.block_on(async { run_here(async { borrowed * 7 }) });
        assert_eq!(got, Ok(42));
        assert_eq!(run_here(async { borrowed * 7 }), Ok(42));
    }
}

/// Options of an object store's client (`aws_endpoint`, `aws_region`, credentials, …), by
/// `object_store`'s key names. Shown by key only: a value may be a secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StorageOptions(Vec<(String, String)>);

impl StorageOptions {
    /// The options `pairs`, in order (a later key wins).
    pub fn new<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// `KEY=VALUE`, as the command line gives one.
    ///
    /// # Errors
    /// A message for text without `=` or with an empty key (never showing the value).
    pub fn parse_pair(text: &str) -> std::result::Result<(String, String), String> {
        match text.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                Ok((key.trim().to_string(), value.to_string()))
            }
            _ => Err("a storage option is KEY=VALUE".into()),
        }
    }

    /// The pairs.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One option of a store's client, `KEY=VALUE` as a command line gives it
/// ([`StorageOptions::parse_pair`]), shown by its key only.
#[derive(Clone, PartialEq, Eq)]
pub struct StorageOption {
    /// The key.
    pub key: String,
    /// The value (perhaps a secret).
    pub value: String,
}

impl std::str::FromStr for StorageOption {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        StorageOptions::parse_pair(text).map(|(key, value)| Self { key, value })
    }
}

impl std::fmt::Debug for StorageOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}=…", self.key)
    }
}

impl FromIterator<StorageOption> for StorageOptions {
    fn from_iter<I: IntoIterator<Item = StorageOption>>(options: I) -> Self {
        Self::new(options.into_iter().map(|o| (o.key, o.value)))
    }
}

impl std::fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(key, _)| format!("{key}=…")))
            .finish()
    }
}

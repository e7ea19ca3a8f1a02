//! A prefix of an object store (`s3://bucket/prefix`, `gs://…`, `az://…`, `abfss://…`) as an
//! output's location, over the `object_store` crate: its S3, GCS and Azure clients, their
//! credentials and endpoints read from the environment variables their builders read, plus
//! the options given (`aws_endpoint`, `aws_allow_http`, …, as Polars and deltalake spell
//! them). A secret never appears in an error or in the location's text.
//!
//! An object store has no rename, so the commit is ordered instead:
//!
//! ```text
//!  writers fill a local staging directory (Pending::dir), as for a local output
//!  commit: every data object uploaded under PREFIX/ with the run's id in its name
//!          (part-00003-RUN.parquet; multipart past one part, parts in flight and
//!          uploads at once bounded by the commit's memory)
//!       ─► _manifest.json (naming those objects) ─► _SUCCESS
//!       ─► objects of an output replaced (--overwrite) deleted, only now
//!  any failure, or cancelled before the manifest: multipart uploads aborted, objects of
//!  this run deleted, nothing committed
//! ```
//!
//! Readers that honour the manifest or `_SUCCESS` see all of a run or none of it, and an
//! overwrite never changes an object a reader of the old manifest reads.

use super::merge::{Merged, merge};
use super::{Commit, Pending, Place, WriteMode, tag_files};
use crate::manifest::{MANIFEST_FILE, Manifest};
use crate::names::run_id;
use crate::{OutputError, Result, io};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use partout_input::Client;
use partout_input::StoreObject;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::AsyncReadExt;

mod cleanup;
use cleanup::{Cleanup, Left, left_behind};

/// The object written after the manifest: the run is complete.
pub const SUCCESS_FILE: &str = "_SUCCESS";
/// Bytes of one part of a multipart upload, when the commit's memory allows.
const PART_BYTES: usize = 8 << 20;
/// The least part S3 takes (but the last of an upload).
const MIN_PART_BYTES: usize = 5 << 20;
/// Parts S3 takes in one upload, at most: past `part × MAX_PARTS` parts grow.
const MAX_PARTS: u64 = 10_000;
/// Parts of one upload in flight at once, at most.
const PARTS_IN_FLIGHT: usize = 2;
/// Objects uploaded at once, at most.
const UPLOADS: usize = 4;

/// How a commit uploads within its memory: each upload holds the part being read and those
/// in flight, so `uploads × (parts_in_flight + 1) × part_bytes` bytes at most (96 MiB with
/// memory to spare; two parts of 5 MiB at the least).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    uploads: usize,
    parts_in_flight: usize,
    part_bytes: usize,
}

impl Plan {
    fn within(memory: u64) -> Self {
        let part_bytes = match memory >= 3 * PART_BYTES as u64 {
            true => PART_BYTES,
            false => MIN_PART_BYTES,
        };
        let parts = (memory / part_bytes as u64).max(2) as usize;
        let parts_in_flight = match parts >= 3 {
            true => PARTS_IN_FLIGHT,
            false => 1,
        };
        Self {
            uploads: (parts / (parts_in_flight + 1)).clamp(1, UPLOADS),
            parts_in_flight,
            part_bytes,
        }
    }
}

/// A prefix of an object store.
#[derive(Clone)]
pub struct StorePrefix {
    /// The store's client; the URL as given (without credentials or query) and the prefix.
    client: Client,
}

impl std::fmt::Debug for StorePrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorePrefix")
            .field("url", &self.client.url)
            .finish()
    }
}

impl PartialEq for StorePrefix {
    fn eq(&self, other: &Self) -> bool {
        self.client.url == other.client.url
    }
}

impl Eq for StorePrefix {}

impl StorePrefix {
    /// The prefix `url` names (`s3://bucket/prefix`, `gs://…`, `az://…`, `abfss://…`), its
    /// client configured from the environment and then `options` (keys as `object_store`
    /// names them: `aws_endpoint`, `aws_allow_http`, `google_service_account`, …).
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for a URL of no object store, an option its store does not
    /// know (naming the key, never the value), or a client that cannot be configured.
    pub fn try_new(url: &url::Url, options: &[(String, String)]) -> Result<Self> {
        let client = Client::try_new(url, options).map_err(OutputError::Invalid)?;
        Ok(Self { client })
    }

    /// The prefix, as `scheme://bucket/prefix`.
    pub fn url(&self) -> &str {
        &self.client.url
    }

    /// The store's client.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.client.store
    }

    /// The prefix in the store.
    pub fn prefix(&self) -> &ObjectPath {
        &self.client.path
    }

    /// The output's file `name` (a relative path) as an object to read.
    ///
    /// # Errors
    /// The store's error, naming the object.
    pub(crate) fn open_object(&self, name: &str) -> std::io::Result<Arc<StoreObject>> {
        let object = self.object(name);
        StoreObject::head(
            self.client.store.clone(),
            object.clone(),
            self.shown(&object),
        )
    }

    /// The object of the output's file `name` (a relative path).
    fn object(&self, name: &str) -> ObjectPath {
        name.split('/')
            .fold(self.client.path.clone(), |path, part| path.join(part))
    }

    /// The URL of `object`, as it may be shown.
    fn shown(&self, object: &ObjectPath) -> String {
        self.client.url_of(object)
    }

    /// The manifest of the output whose objects are `objects` (a listing of the prefix).
    ///
    /// # Errors
    /// [`OutputError::Invalid`] when there is none: objects that are not a partout output.
    fn manifest(&self, objects: &[ObjectPath]) -> Result<Manifest> {
        let at = self.object(MANIFEST_FILE);
        if !objects.contains(&at) {
            return Err(OutputError::Invalid(format!(
                "{} holds objects but no {MANIFEST_FILE}: a run adds only to a partout output",
                self.client.url
            )));
        }
        let shown = self.shown(&at);
        let unreadable = |e: std::io::Error| OutputError::Io {
            context: format!("reading {shown}"),
            source: e,
        };
        let object = self.open_object(MANIFEST_FILE).map_err(unreadable)?;
        let bytes = object.get(0..object.size).map_err(unreadable)?;
        Manifest::parse(&bytes, Path::new(&shown)).map_err(|e| OutputError::Io {
            context: e.context,
            source: e.source,
        })
    }

    /// Every object under the prefix.
    fn list(&self) -> Result<Vec<ObjectPath>> {
        let store = self.client.store.clone();
        let prefix = self.client.path.clone();
        let listed = block_on(async move {
            store
                .list(Some(&prefix))
                .map_ok(|meta| meta.location)
                .try_collect::<Vec<_>>()
                .await
        })?;
        listed.map_err(|e| store_error(format!("listing {}", self.client.url), e))
    }
}

/// An object store's error while `doing`.
fn store_error(doing: String, e: object_store::Error) -> OutputError {
    OutputError::Io {
        context: doing,
        source: std::io::Error::other(e.to_string()),
    }
}

/// Runs `future` to its end with the stores' runtime ([`partout_input::run_here`]).
fn block_on<F>(future: F) -> Result<F::Output>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    partout_input::run_here(future).map_err(|e| OutputError::Io {
        context: "committing to an object store".into(),
        source: std::io::Error::other(e),
    })
}

impl Place for StorePrefix {
    fn check(&self, mode: WriteMode) -> Result<Option<Manifest>> {
        let objects = self.list()?;
        match mode {
            _ if objects.is_empty() => Ok(None),
            WriteMode::Error => Err(OutputError::NotEmpty(self.client.url.clone())),
            WriteMode::Overwrite => Ok(None),
            WriteMode::Append | WriteMode::OverwritePartitions => self.manifest(&objects).map(Some),
        }
    }

    fn stage(&self, mode: WriteMode) -> Result<Box<dyn Pending>> {
        let dir = tempfile_dir()?;
        Ok(Box::new(StoreStaging {
            target: self.clone(),
            dir,
            run: run_id(),
            mode,
        }))
    }

    fn local_path(&self) -> Option<&Path> {
        None
    }
}

/// The name of this process's staging directory under `TMPDIR`, before its id.
const STAGING_PREFIX: &str = ".partout-upload-";

/// A fresh local directory for the writers: `TMPDIR/.partout-upload-PID/RUN`. Those of
/// processes that are gone (killed mid-run) are removed first, as a local output's are.
fn tempfile_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir();
    super::local::remove_stale(&base, STAGING_PREFIX);
    let process = base.join(format!("{STAGING_PREFIX}{}", std::process::id()));
    std::fs::create_dir_all(&process).map_err(io(format!("creating {}", process.display())))?;
    for attempt in 0..100u32 {
        let dir = process.join(format!("{}-{attempt}", run_id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(format!("creating {}", dir.display()))(e)),
        }
    }
    Err(OutputError::Invalid(format!(
        "no fresh staging directory in {}",
        process.display()
    )))
}

/// An output staged locally for a store prefix.
#[derive(Debug)]
struct StoreStaging {
    target: StorePrefix,
    dir: PathBuf,
    run: String,
    mode: WriteMode,
}

impl Drop for StoreStaging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        // The process's directory too, once no other run of it stages there.
        if let Some(process) = self.dir.parent() {
            let _ = std::fs::remove_dir(process);
        }
    }
}

impl Pending for StoreStaging {
    fn dir(&self) -> &Path {
        &self.dir
    }

    fn commit(self: Box<Self>, mut manifest: Manifest, commit: &Commit<'_>) -> Result<Manifest> {
        // Each file the manifest names, uploaded under its tagged name.
        let mut files = Vec::new();
        tag_files(&mut manifest, &self.run, &mut |name, object| {
            files.push((self.dir.join(name), object.to_string()));
            Ok(())
        })?;
        let before = self.target.list()?;
        // Added to the output there: the manifests merged, the objects of the value
        // directories rewritten deleted once the run is committed.
        let (manifest, dropped) = match self.mode.adds() && !before.is_empty() {
            true => {
                let Merged {
                    manifest: merged,
                    dropped,
                } = merge(self.target.manifest(&before)?, manifest, self.mode)?;
                (merged, Some(dropped))
            }
            false => (manifest, None),
        };
        let target = &self.target;
        let plan = Plan::within(commit.memory);
        block_on(target.upload_all(&files, plan, commit.cancelled))??;
        // The manifest last, naming the objects just written; then `_SUCCESS`.
        manifest.write(&self.dir).map_err(|e| OutputError::Io {
            context: format!("committing to {}: the manifest", target.url()),
            source: e.source,
        })?;
        let written: Vec<ObjectPath> = files.iter().map(|(_, o)| target.object(o)).collect();
        let (manifest_object, success) =
            (target.object(MANIFEST_FILE), target.object(SUCCESS_FILE));
        let staged_manifest = self.dir.join(MANIFEST_FILE);
        if (commit.cancelled)() {
            let left = block_on(target.take_back(&written))?;
            return Err(left_behind(OutputError::Cancelled, left));
        }
        // The commit's point: once the manifest is written, the run is committed. A failure
        // after it takes the manifest back first, so no manifest is left naming objects that
        // are deleted (with --overwrite, the old output's manifest is gone by then).
        let committed = block_on(async {
            let never = || false;
            target
                .upload(&staged_manifest, MANIFEST_FILE, plan, &never)
                .await?;
            if let Err(e) = target.store().put(&success, PutPayload::default()).await {
                let failed = store_error(format!("writing {}", target.shown(&success)), e);
                let left = target.take_back(std::slice::from_ref(&manifest_object));
                return Err(left_behind(failed, left.await));
            }
            Ok(())
        })?;
        if let Err(e) = committed {
            let left = block_on(target.take_back(&written))?;
            return Err(left_behind(e, left));
        }
        // The objects of the output replaced (or of the value directories rewritten): no
        // manifest names them any more.
        let stale: Vec<ObjectPath> = match (self.mode, dropped) {
            (_, Some(dropped)) => dropped.iter().map(|name| target.object(name)).collect(),
            (WriteMode::Overwrite, None) => {
                let keep: std::collections::HashSet<&ObjectPath> =
                    written.iter().chain([&manifest_object, &success]).collect();
                before.into_iter().filter(|o| !keep.contains(o)).collect()
            }
            _ => Vec::new(),
        };
        block_on(target.take_back(&stale))?;
        Ok(manifest)
    }
}

impl StorePrefix {
    /// Uploads each `(local file, name)`, a few at a time; on the first failure, takes back
    /// what was uploaded and says which object failed and why.
    async fn upload_all(
        &self,
        files: &[(PathBuf, String)],
        plan: Plan,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<()> {
        // (Owned items: a closure over borrowed ones is not `Send` for every lifetime.)
        let results: Vec<(ObjectPath, Result<()>)> = futures::stream::iter(files.to_vec())
            .map(|(file, name)| async move {
                let result = match cancelled() {
                    true => Err(OutputError::Cancelled),
                    false => self.upload(&file, &name, plan, cancelled).await,
                };
                (self.object(&name), result)
            })
            .buffer_unordered(plan.uploads)
            .collect()
            .await;
        let mut failure = None;
        let mut written = Vec::new();
        for (object, result) in results {
            match result {
                Ok(()) => written.push(object),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        match failure {
            None => Ok(()),
            Some(e) => Err(left_behind(e, self.take_back(&written).await)),
        }
    }

    /// Uploads `file` as the output's file `name`: in one request when it fits a part, else
    /// in parts (aborted on failure or once `cancelled`, with a cleanup's patience); about
    /// `(parts in flight + 1) × part` bytes held at once.
    async fn upload(
        &self,
        file: &Path,
        name: &str,
        plan: Plan,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<()> {
        let (store, object) = (self.store(), self.object(name));
        let shown = self.shown(&object);
        let failed = |e: object_store::Error| store_error(format!("uploading {shown}"), e);
        let mut reader = tokio::fs::File::open(file)
            .await
            .map_err(io(format!("opening {}", file.display())))?;
        let len = reader
            .metadata()
            .await
            .map_err(io(format!("reading {}", file.display())))?
            .len();
        let part = (plan.part_bytes as u64).max(len.div_ceil(MAX_PARTS)) as usize;
        if len <= part as u64 {
            let mut bytes = Vec::with_capacity(len as usize);
            reader
                .read_to_end(&mut bytes)
                .await
                .map_err(io(format!("reading {}", file.display())))?;
            store
                .put(&object, PutPayload::from(bytes))
                .await
                .map_err(failed)?;
            return Ok(());
        }
        let mut upload = store.put_multipart(&object).await.map_err(failed)?;
        // Parts of `part` bytes (the last one shorter), at most PARTS_IN_FLIGHT at once; on any
        // failure the upload is aborted, so the store keeps no part of it.
        let sent: Result<()> = async {
            let mut in_flight: futures::stream::FuturesUnordered<object_store::UploadPart> =
                futures::stream::FuturesUnordered::new();
            loop {
                let mut chunk = vec![0u8; part];
                let mut filled = 0;
                while filled < part {
                    let read = reader
                        .read(&mut chunk[filled..])
                        .await
                        .map_err(io(format!("reading {}", file.display())))?;
                    if read == 0 {
                        break;
                    }
                    filled += read;
                }
                if filled == 0 {
                    break;
                }
                chunk.truncate(filled);
                while in_flight.len() >= plan.parts_in_flight {
                    if let Some(done) = in_flight.next().await {
                        done.map_err(failed)?;
                    }
                }
                if cancelled() {
                    return Err(OutputError::Cancelled);
                }
                in_flight.push(upload.put_part(PutPayload::from(chunk)));
                if filled < part {
                    break;
                }
            }
            while let Some(done) = in_flight.next().await {
                done.map_err(failed)?;
            }
            upload.complete().await.map_err(failed)?;
            Ok(())
        }
        .await;
        match sent {
            Ok(()) => Ok(()),
            Err(e) => {
                let mut cleanup = Cleanup::new(self.client.patience);
                let aborted = loop {
                    if let Some(done) = cleanup.again(upload.abort().await).await {
                        break done;
                    }
                };
                let left = Left {
                    uploads: match aborted {
                        true => Vec::new(),
                        false => vec![shown.clone()],
                    },
                    ..Left::default()
                };
                Err(left_behind(e, left))
            }
        }
    }

    /// Deletes `objects`, a few at a time, each with the patience of a cleanup: those left.
    async fn take_back(&self, objects: &[ObjectPath]) -> Left {
        let cleanup = Cleanup::new(self.client.patience);
        let left: Vec<String> = futures::stream::iter(objects.to_vec())
            .map(|object| {
                let mut cleanup = cleanup;
                async move {
                    loop {
                        match cleanup.again(self.store().delete(&object).await).await {
                            Some(true) => return None,
                            Some(false) => return Some(self.shown(&object)),
                            None => continue,
                        }
                    }
                }
            })
            .buffer_unordered(UPLOADS)
            .filter_map(std::future::ready)
            .collect()
            .await;
        Left {
            objects: left,
            ..Left::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tagged;
    use super::*;

    #[test]
    fn a_tagged_name_keeps_its_directory_and_extension() {
        assert_eq!(tagged("part-00003.parquet", "r1"), "part-00003-r1.parquet");
        assert_eq!(
            tagged("k=a.b/part-00000.arrow", "r1"),
            "k=a.b/part-00000-r1.arrow"
        );
        assert_eq!(tagged("shuffle-000.index", "r1"), "shuffle-000-r1.index");
        assert_eq!(tagged("noext", "r1"), "noext-r1");
    }

    #[test]
    fn an_upload_plan_holds_its_parts_within_the_memory_given() {
        for memory in [
            0u64,
            4 << 20,
            10 << 20,
            16 << 20,
            24 << 20,
            64 << 20,
            1 << 30,
        ] {
            let plan = Plan::within(memory);
            let held = (plan.uploads * (plan.parts_in_flight + 1) * plan.part_bytes) as u64;
            assert!(plan.uploads >= 1 && plan.parts_in_flight >= 1, "{plan:?}");
            assert!(plan.part_bytes >= MIN_PART_BYTES, "{plan:?}");
            // Two of S3's least parts whatever the memory; within it once it holds them.
            assert!(
                held <= memory.max(2 * MIN_PART_BYTES as u64),
                "{memory}: {plan:?}"
            );
        }
        assert_eq!(
            Plan::within(1 << 30),
            Plan {
                uploads: UPLOADS,
                parts_in_flight: PARTS_IN_FLIGHT,
                part_bytes: PART_BYTES
            }
        );
    }

    #[test]
    fn staging_leaves_nothing_and_leftovers_of_dead_processes_are_removed() {
        if !Path::new("/proc/self").exists() {
            return;
        }
        // No process has a pid this large (Linux caps them at 2^22).
        let dead = std::env::temp_dir().join(format!("{STAGING_PREFIX}4294967295"));
        std::fs::create_dir_all(dead.join("run-0")).unwrap();
        let url = url::Url::parse("s3://bucket/out").unwrap();
        let prefix = StorePrefix::try_new(&url, &[("aws_region".into(), "us-east-1".into())]);
        let staged = prefix.unwrap().stage(WriteMode::Error).unwrap();
        assert!(!dead.exists(), "a dead process's staging directory is left");
        let dir = staged.dir().to_path_buf();
        std::fs::write(dir.join("part-00000.parquet"), b"x").unwrap();
        assert!(dir.starts_with(std::env::temp_dir()));
        drop(staged);
        assert!(!dir.exists());
    }

    #[test]
    fn an_unknown_option_is_named_without_its_value() {
        let url = url::Url::parse("s3://bucket/out").unwrap();
        let options = [("aws_secret_acess_key".to_string(), "hunter2".to_string())];
        let e = StorePrefix::try_new(&url, &options)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("aws_secret_acess_key") && !e.contains("hunter2"),
            "{e}"
        );
        let url = url::Url::parse("ftp://host/out").unwrap();
        let e = StorePrefix::try_new(&url, &[]).unwrap_err().to_string();
        assert!(e.contains("not an object store"), "{e}");
    }
}

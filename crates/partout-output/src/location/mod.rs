//! Where an output's bytes go: a [`Location`], one variant per kind of place, each a file of
//! this module implementing [`Place`]: the local file system ([`LocalDir`]) and a prefix of
//! an object store ([`StorePrefix`]: S3, GCS, Azure).
//!
//! ```text
//!  Location ─► Place::check(mode) (usable? empty, or a partout output to add to)
//!           ─► Place::stage(mode) ─► Pending: a local directory the writers fill
//!                               ─► commit (all or nothing)   or drop (nothing left)
//! ```
//!
//! A [`WriteMode`] says what becomes of an output already there: refused, replaced, added to,
//! or replaced value directory by value directory; the manifest of the output as it will be
//! is made by `merge`, whatever the place.
//!
//! Writers always write into a local directory (a staging area, also the scratch space of
//! staged files); what the commit does with it is the place's: a local directory is renamed
//! into place. A place without rename (an object store) commits by uploading the staged files
//! and writing the manifest last; it is one more file here and one more variant of
//! [`Location`], not a second path through the writers.

mod local;
mod merge;
mod named;
mod store;

pub use local::LocalDir;
pub use merge::{RunShape, check_compatible};
pub use store::{SUCCESS_FILE, StorePrefix};

use super::{OutputError, Result};
use crate::manifest::Manifest;
use std::path::Path;

/// What a kind of place does for an output: check that it may be written, give the writers a
/// directory to fill, and commit it.
pub trait Place: std::fmt::Debug + Send + Sync {
    /// Checks that the output may be written here as `mode` says: not something else
    /// already; empty ([`WriteMode::Error`]), or holding a partout output, or nothing, when a
    /// run adds to it. The manifest of the output there, when the mode adds to one.
    ///
    /// # Errors
    /// [`OutputError::NotEmpty`]; [`OutputError::Invalid`] for a place that cannot hold an
    /// output, or files without a manifest to add to; [`OutputError::Io`].
    fn check(&self, mode: WriteMode) -> Result<Option<Manifest>>;

    /// A fresh local directory for the writers, committed by [`Pending::commit`] as `mode`
    /// says and removed when dropped uncommitted.
    ///
    /// # Errors
    /// As [`check`](Self::check).
    fn stage(&self, mode: WriteMode) -> Result<Box<dyn Pending>>;

    /// The local directory the output ends in, where there is one.
    fn local_path(&self) -> Option<&Path>;
}

/// An output being written: a local directory the writers fill, committed all at once.
/// Dropped uncommitted, it leaves nothing behind.
pub trait Pending: std::fmt::Debug + Send + Sync {
    /// The directory to write into.
    fn dir(&self) -> &Path;

    /// Makes everything written visible at the location at once, with `manifest` (what the
    /// writers wrote, its files named as in [`dir`](Self::dir)) written last: replacing what
    /// was there, or added to it as the stage's [`WriteMode`] says (the files then named with
    /// the run's id, the manifest the merged one); the manifest as committed.
    ///
    /// The commit uses at most about `commit.memory` bytes, and ends as soon as
    /// `commit.cancelled` says so, leaving nothing.
    ///
    /// # Errors
    /// [`OutputError::Io`]; [`OutputError::Cancelled`]; nothing is left behind then.
    fn commit(self: Box<Self>, manifest: Manifest, commit: &Commit<'_>) -> Result<Manifest>;
}

/// What becomes of an output already at the location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// A location holding anything is refused (the default).
    #[default]
    Error,
    /// The output there is replaced, once the run has committed.
    Overwrite,
    /// The run's files are added beside those of the partout output there (named with the
    /// run's id), each destination's after its old ones, the manifests merged.
    Append,
    /// Partitioning by value: the value directories the run writes replace the old ones, the
    /// others are kept; the old files go only once the run has committed.
    OverwritePartitions,
}

impl WriteMode {
    /// Whether a run adds to the output there rather than replacing it all.
    pub fn adds(self) -> bool {
        matches!(self, Self::Append | Self::OverwritePartitions)
    }
}

/// Reads `error`, `overwrite`, `append` and `overwrite-partitions`.
impl std::str::FromStr for WriteMode {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "error" => Ok(Self::Error),
            "overwrite" => Ok(Self::Overwrite),
            "append" => Ok(Self::Append),
            "overwrite-partitions" | "overwrite_partitions" => Ok(Self::OverwritePartitions),
            _ => Err(format!(
                "unknown write mode {text:?} (one of: error, overwrite, append, \
                 overwrite-partitions)"
            )),
        }
    }
}

/// The name [`FromStr`](std::str::FromStr) reads back.
impl std::fmt::Display for WriteMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Error => "error",
            Self::Overwrite => "overwrite",
            Self::Append => "append",
            Self::OverwritePartitions => "overwrite-partitions",
        })
    }
}

/// `name` with the run's id before its extension: `k=1/part-00000.parquet` →
/// `k=1/part-00000-RUN.parquet`.
fn tagged(name: &str, run: &str) -> String {
    let (dir, file) = name.rsplit_once('/').map_or(("", name), |(d, f)| (d, f));
    let file = match file.split_once('.') {
        Some((stem, extension)) => format!("{stem}-{run}.{extension}"),
        None => format!("{file}-{run}"),
    };
    match dir {
        "" => file,
        dir => format!("{dir}/{file}"),
    }
}

/// Each file `manifest` names, with the run's id `run` (see [`tagged`]): `rename(old, new)`
/// is called for each, then the manifest names the new. Files named after a pattern
/// ([`Manifest::file_name`]) keep their names (`rename(old, old)`).
fn tag_files(
    manifest: &mut Manifest,
    run: &str,
    rename: &mut dyn FnMut(&str, &str) -> Result<()>,
) -> Result<()> {
    let named = manifest.file_name.is_some();
    let names = manifest
        .destinations
        .iter_mut()
        .flat_map(|d| d.files.iter_mut().flatten().map(|f| &mut f.name))
        .chain(
            manifest
                .shuffle_files
                .iter_mut()
                .flatten()
                .flat_map(|w| [&mut w.data, &mut w.index]),
        );
    for name in names {
        let new = match named {
            true => name.clone(),
            false => tagged(name, run),
        };
        rename(name, &new)?;
        *name = new;
    }
    Ok(())
}

/// What a commit may use, and whether it is to stop.
pub struct Commit<'a> {
    /// Bytes it may hold at once (a place that uploads holds parts of files in memory).
    pub memory: u64,
    /// Asked between steps; once it says yes, the commit undoes what it did and ends.
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
}

impl std::fmt::Debug for Commit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Commit")
            .field("memory", &self.memory)
            .finish_non_exhaustive()
    }
}

/// Where an output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// A directory of the local file system.
    Local(LocalDir),
    /// A prefix of an object store.
    Store(StorePrefix),
}

impl Location {
    /// The local directory `path`.
    pub fn local(path: impl Into<std::path::PathBuf>) -> Self {
        Self::Local(LocalDir::new(path))
    }

    /// The location `text` names: a URL of an object store (`s3://bucket/prefix`, `gs://…`,
    /// `az://…`, `abfss://…`, its client configured by `options` after the environment), a
    /// `file://` URL, or a local path.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for a URL of no place partout writes to, options its store
    /// does not take, or options given with a local path.
    pub fn parse(text: &str, options: &partout_input::StorageOptions) -> Result<Self> {
        let url = text
            .split_once("://")
            .filter(|(scheme, _)| scheme.len() > 1)
            .map(|_| url::Url::parse(text))
            .transpose()
            .map_err(|e| OutputError::Invalid(format!("{text:?} is not a URL: {e}")))?;
        let path = match url {
            None => std::path::PathBuf::from(text),
            Some(url) if url.scheme() == "file" => url
                .to_file_path()
                .map_err(|()| OutputError::Invalid(format!("{text:?} names no local path")))?,
            Some(url) => return Ok(Self::Store(StorePrefix::try_new(&url, options.pairs())?)),
        };
        if !options.is_empty() {
            return Err(OutputError::Invalid(format!(
                "storage options are for object stores; {text:?} is a local path"
            )));
        }
        Ok(Self::local(path))
    }

    /// What this kind of place does.
    pub fn place(&self) -> &dyn Place {
        match self {
            Self::Local(dir) => dir,
            Self::Store(prefix) => prefix,
        }
    }
}

/// Its path, or address.
impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local(dir) => write!(f, "{}", dir.path().display()),
            Self::Store(prefix) => f.write_str(prefix.url()),
        }
    }
}

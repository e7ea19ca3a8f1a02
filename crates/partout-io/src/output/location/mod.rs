//! Where an output's bytes go: a [`Location`], one variant per kind of place, each a file of
//! this module implementing [`Place`]. Today the local file system ([`LocalDir`]).
//!
//! ```text
//!  Location ─► Place::check (usable? empty unless overwriting)
//!           ─► Place::stage ─► Pending: a local directory the writers fill
//!                               ─► commit (all or nothing)   or drop (nothing left)
//! ```
//!
//! Writers always write into a local directory (a staging area, also the scratch space of
//! staged files); what the commit does with it is the place's: a local directory is renamed
//! into place. A place without rename (an object store) commits by uploading the staged files
//! and writing the manifest last; it is one more file here and one more variant of
//! [`Location`], not a second path through the writers.

mod local;

pub use local::LocalDir;

use super::Result;
use std::path::Path;

/// What a kind of place does for an output: check that it may be written, give the writers a
/// directory to fill, and commit it.
pub trait Place: std::fmt::Debug + Send + Sync {
    /// Checks that the output may be written here: not something else already, and empty
    /// unless `overwrite`.
    ///
    /// # Errors
    /// [`OutputError::NotEmpty`](super::OutputError::NotEmpty);
    /// [`OutputError::Invalid`](super::OutputError::Invalid) for a place that cannot hold an
    /// output; [`OutputError::Io`](super::OutputError::Io).
    fn check(&self, overwrite: bool) -> Result<()>;

    /// A fresh local directory for the writers, committed by [`Pending::commit`] and removed
    /// when dropped uncommitted.
    ///
    /// # Errors
    /// As [`check`](Self::check).
    fn stage(&self) -> Result<Box<dyn Pending>>;

    /// The local directory the output ends in, where there is one.
    fn local_path(&self) -> Option<&Path>;
}

/// An output being written: a local directory the writers fill, committed all at once.
/// Dropped uncommitted, it leaves nothing behind.
pub trait Pending: std::fmt::Debug + Send + Sync {
    /// The directory to write into.
    fn dir(&self) -> &Path;

    /// Makes everything written visible at the location at once, replacing what was there.
    ///
    /// # Errors
    /// [`OutputError::Io`](super::OutputError::Io); nothing is left behind then.
    fn commit(self: Box<Self>) -> Result<()>;
}

/// Where an output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// A directory of the local file system.
    Local(LocalDir),
}

impl Location {
    /// The local directory `path`.
    pub fn local(path: impl Into<std::path::PathBuf>) -> Self {
        Self::Local(LocalDir::new(path))
    }

    /// What this kind of place does.
    pub fn place(&self) -> &dyn Place {
        match self {
            Self::Local(dir) => dir,
        }
    }
}

/// Its path, or address.
impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local(dir) => write!(f, "{}", dir.path().display()),
        }
    }
}

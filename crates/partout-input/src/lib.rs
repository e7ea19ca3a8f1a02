//! partout-input: the files partout reads.
//!
//! Parquet, Arrow IPC (file and stream) and CSV files, local or in an object store, given one
//! by one or as directories and patterns, read as one stream of record batches of one schema,
//! a batch at a time (never a whole file in memory). [`discover`] lists the files and their
//! [`InputFormat`]s, [`InputReader`] reads them in order, [`plan_frames`] cuts them into
//! [`Frame`]s that parallel workers read on their own (Parquet row groups or row ranges of
//! them, IPC file batch ranges; CSV files and IPC streams whole). Every error names the file.
//!
//! Damaged inputs are errors naming the file, never panics, stack overflows or allocations
//! of what the file claims: footers, messages and counts are checked against the file's size
//! before a format crate is handed them, and what panics inside a format crate anyway is
//! contained (`contain.rs`).
//!
//! | module | what it holds |
//! |---|---|
//! | `format` | [`InputFormat`]: what a file is, from its first bytes, then its name |
//! | `discover` | the files a list of paths, directories and patterns names |
//! | `reader` | a file opened as batches; [`InputReader`], the files in order |
//! | `frames` | [`Frames`]: the files cut into pieces workers read on their own |
//! | `contain` | calls into the format crates, their errors and panics made errors |
//! | `ipc_file`, `parquet_footer` | the checked readers of an IPC file's footer and messages, and of a Parquet footer |
//! | `source`, `store` | [`InputFile`] and where its bytes come from: a local file, or an object store's client ([`StorageOptions`]) |
//! | `size` | [`parse_bytes`]: `64MiB` and the like |
//!
//! Nothing here depends on partout's outputs: partout-output reads its own files back through
//! this crate's checked readers ([`IoError`], [`store`](StorageOptions)), never the reverse.

#![forbid(unsafe_code)]

mod contain;
mod discover;
mod format;
mod frames;
mod ipc_file;
mod parquet_footer;
mod reader;
mod size;
mod source;
mod store;

pub use contain::panic_message;
pub use discover::{discover, discover_in};
pub use format::InputFormat;
pub use frames::{Frame, FrameReader, Frames, plan_frames, plan_frames_by};
pub use reader::InputReader;
pub use size::parse_bytes;
pub use source::READ_BYTES as STORE_READ_BYTES;
pub use source::{InputFile, Opened, StoreObject};
pub use store::{Client, StorageOption, StorageOptions, is_store_url, run_here};

use std::fmt;
use std::path::{Path, PathBuf};

/// Rows per batch read from inputs that do not fix it themselves (Parquet, CSV).
pub const BATCH_ROWS: usize = 8192;

/// Errors of reading a file: an input, or an output read back.
#[derive(Debug)]
#[non_exhaustive]
pub enum IoError {
    /// A file could not be read, or is not what it claims: the file and what went wrong.
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        what: String,
        /// The error that caused it, where the system or a format crate gave one (see
        /// [`source`](std::error::Error::source)).
        cause: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The inputs cannot be read together (no files, different schemas, ...).
    Inputs(String),
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File { path, what, .. } => write!(f, "{}: {what}", path.display()),
            Self::Inputs(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::File {
                cause: Some(cause), ..
            } => Some(cause.as_ref()),
            _ => None,
        }
    }
}

/// The result type of partout-input.
pub type Result<T, E = IoError> = std::result::Result<T, E>;

impl IoError {
    /// `path` is not what it claims to be, or cannot be used: `what` says how.
    pub fn file(path: &Path, what: impl fmt::Display) -> Self {
        file_error(path, what)
    }

    /// `what` went wrong with `path`, caused by the system's error `e` (kept as the source).
    pub fn system(path: &Path, what: &str, e: std::io::Error) -> Self {
        file_io_error(path, what, e)
    }
}

fn file_error(path: &Path, what: impl fmt::Display) -> IoError {
    IoError::File {
        path: path.to_path_buf(),
        what: what.to_string(),
        cause: None,
    }
}

/// `what` went wrong with `path`, caused by the system's error `e` (kept as the source).
fn file_io_error(path: &Path, what: &str, e: std::io::Error) -> IoError {
    IoError::File {
        path: path.to_path_buf(),
        what: what.to_string(),
        cause: Some(Box::new(e)),
    }
}

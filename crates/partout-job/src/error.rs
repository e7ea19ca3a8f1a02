//! The error type of partout-job.

use partout_exchange::WriterError;
use partout_input::IoError;
use partout_output::OutputError;
use partout_output::manifest::ManifestError;
use std::fmt;
use std::path::PathBuf;

/// Errors of a repartition job, by fault.
///
/// Variants that wrap another error say what was being done and give the cause through
/// [`source`](std::error::Error::source); a printed chain (`anyhow`'s `{:#}`) names each step
/// once.
#[derive(Debug)]
#[non_exhaustive]
pub enum JobError {
    /// Options that cannot work together or with the inputs (a missing key column, a
    /// compression the format does not take, a memory limit too small), named with values.
    InvalidOption(String),
    /// The output directory exists and holds files, and the options do not say to replace it.
    OutputNotEmpty(PathBuf),
    /// An input could not be read (or is not what its name or first bytes say).
    Input(IoError),
    /// Partitioning or writing failed, while doing `context`.
    Write {
        /// What was being done.
        context: String,
        /// The writer's error.
        source: WriterError,
    },
    /// A file system operation on the output failed.
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// A worker panicked (a bug, or a library meeting input it did not expect); the run
    /// stopped and left no output.
    WorkerPanicked(String),
    /// The job was cancelled (through [`Progress::cancelled`](crate::Progress::cancelled));
    /// it left no output.
    Cancelled,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidOption(what) => write!(f, "{what}"),
            Self::OutputNotEmpty(path) => write!(
                f,
                "{} exists and is not empty (replacing it takes the overwrite option)",
                path.display()
            ),
            Self::Input(e) => write!(f, "{e}"),
            Self::Write { context, .. } | Self::Io { context, .. } => write!(f, "{context}"),
            Self::WorkerPanicked(what) => write!(f, "a worker failed unexpectedly: {what}"),
            Self::Cancelled => write!(f, "cancelled"),
        }
    }
}

impl std::error::Error for JobError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Shown as its own message: its cause is the next link.
            Self::Input(e) => e.source(),
            Self::Write { source, .. } => Some(source),
            Self::Io { source, .. } => Some(source),
            Self::InvalidOption(_)
            | Self::OutputNotEmpty(_)
            | Self::WorkerPanicked(_)
            | Self::Cancelled => None,
        }
    }
}

impl From<IoError> for JobError {
    fn from(e: IoError) -> Self {
        Self::Input(e)
    }
}

/// A manifest not read or written: a file system error, with the same context.
impl From<ManifestError> for JobError {
    fn from(e: ManifestError) -> Self {
        Self::Io {
            context: e.context,
            source: e.source,
        }
    }
}

/// The output layer's refusals are the job's: an invalid option, an output not empty, a file
/// system error.
impl From<OutputError> for JobError {
    fn from(e: OutputError) -> Self {
        match e {
            OutputError::Invalid(what) => Self::InvalidOption(what),
            OutputError::NotEmpty(location) => Self::OutputNotEmpty(PathBuf::from(location)),
            OutputError::Io { context, source } => Self::Io { context, source },
            OutputError::Cancelled => Self::Cancelled,
            other => Self::InvalidOption(other.to_string()),
        }
    }
}

/// `context` for a writer error.
pub(crate) fn writing(context: impl Into<String>) -> impl FnOnce(WriterError) -> JobError {
    let context = context.into();
    move |source| JobError::Write { context, source }
}

/// `context` for a file system error.
pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> JobError {
    let context = context.into();
    move |source| JobError::Io { context, source }
}

/// The result type of partout-job.
pub type Result<T, E = JobError> = std::result::Result<T, E>;

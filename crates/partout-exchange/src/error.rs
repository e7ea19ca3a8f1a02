//! The error type of partout-exchange.

use partout_core::PartoutError;
use partout_format::FormatError;
use std::fmt;

/// Errors of the partitioned writer.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriterError {
    /// An option that cannot work, named with its value.
    InvalidOption(String),
    /// Partitioning or buffering failed (wrong schema, bad ids, unsupported type, ...).
    Partition(PartoutError),
    /// Encoding a destination's batch failed.
    Encode(FormatError),
    /// The sink failed while receiving a destination's bytes, or while finishing.
    Sink {
        /// The destination being written (`None`: finishing).
        destination: Option<usize>,
        /// The sink's error.
        source: std::io::Error,
    },
    /// An earlier call failed part-way; the writer's output is incomplete.
    Failed,
}

impl fmt::Display for WriterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidOption(what) => write!(f, "invalid writer option: {what}"),
            Self::Partition(e) => write!(f, "{e}"),
            Self::Encode(e) => write!(f, "encoding failed: {e}"),
            Self::Sink {
                destination,
                source,
            } => match destination {
                Some(p) => write!(f, "writing destination {p} failed: {source}"),
                None => write!(f, "finishing the output failed: {source}"),
            },
            Self::Failed => write!(
                f,
                "the writer failed earlier and its output is incomplete; it takes no more input"
            ),
        }
    }
}

/// The message of each variant includes its cause's, so `source` gives none: an error chain
/// printed in full does not repeat it.
impl std::error::Error for WriterError {}

impl From<PartoutError> for WriterError {
    fn from(e: PartoutError) -> Self {
        Self::Partition(e)
    }
}

impl From<FormatError> for WriterError {
    fn from(e: FormatError) -> Self {
        Self::Encode(e)
    }
}

impl From<arrow_schema::ArrowError> for WriterError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::Partition(PartoutError::Arrow(e))
    }
}

/// The result type of partout-exchange.
pub type Result<T, E = WriterError> = std::result::Result<T, E>;

//! The error type of partout-exchange.

use arrow_schema::ArrowError;
use partout_core::PartoutError;
use partout_format::FormatError;
use std::fmt;

/// Errors of the partitioned writer.
///
/// Variants that wrap another error say what was being done and give the cause through
/// [`source`](std::error::Error::source), so that a printed chain (`anyhow`'s `{:#}`, or a
/// walk over `source()`) names each step once; a partitioning error is shown as it is.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriterError {
    /// An option that cannot work, named with its value.
    InvalidOption(String),
    /// Partitioning or buffering refused the input (wrong schema, bad ids, unsupported type,
    /// a partitioning that does not fit the schema). Nothing of the batch was buffered.
    Partition(PartoutError),
    /// arrow-rs failed on a batch the writer built (taking replicated rows).
    Arrow(ArrowError),
    /// Encoding a destination's batch failed.
    Encode(FormatError),
    /// An output was handed a destination it does not have.
    NoSuchDestination {
        /// The destination asked for.
        destination: usize,
        /// How many the output has.
        destinations: usize,
    },
    /// The sink failed while receiving a destination's bytes, or while finishing.
    Sink {
        /// The destination being written (`None`: finishing).
        destination: Option<usize>,
        /// The sink's error, kept whole: an I/O error, a Parquet writer's, an exchange's.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// An earlier call failed part-way; the writer's output is incomplete.
    Failed,
}

impl fmt::Display for WriterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidOption(what) => write!(f, "invalid writer option: {what}"),
            Self::Partition(e) => write!(f, "{e}"),
            Self::Arrow(_) => write!(f, "building a batch failed"),
            Self::Encode(_) => write!(f, "encoding failed"),
            Self::NoSuchDestination {
                destination,
                destinations,
            } => write!(
                f,
                "no destination {destination}: the output has {destinations}"
            ),
            Self::Sink {
                destination: Some(p),
                ..
            } => write!(f, "writing destination {p} failed"),
            Self::Sink {
                destination: None, ..
            } => write!(f, "finishing the output failed"),
            Self::Failed => write!(
                f,
                "the writer failed earlier and its output is incomplete; it takes no more input"
            ),
        }
    }
}

impl std::error::Error for WriterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Shown as its own message: its cause is the next link.
            Self::Partition(e) => e.source(),
            Self::Arrow(e) => Some(e),
            Self::Encode(e) => Some(e),
            Self::Sink { source, .. } => Some(source.as_ref()),
            Self::InvalidOption(_) | Self::NoSuchDestination { .. } | Self::Failed => None,
        }
    }
}

impl WriterError {
    /// A sink's failure at `destination` (`None`: while finishing), keeping `source` as the
    /// cause.
    pub fn sink(
        destination: Option<usize>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Self::Sink {
            destination,
            source: source.into(),
        }
    }
}

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

impl From<ArrowError> for WriterError {
    fn from(e: ArrowError) -> Self {
        Self::Arrow(e)
    }
}

/// The result type of partout-exchange.
pub type Result<T, E = WriterError> = std::result::Result<T, E>;

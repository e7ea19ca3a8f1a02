//! The error type of partout-core.

use arrow_schema::{ArrowError, DataType};
use std::fmt;

/// Errors raised by partout-core, grouped by whose fault they are.
#[derive(Debug)]
#[non_exhaustive]
pub enum PartoutError {
    /// The caller passed an argument that can never work (a zero partition count, a length
    /// mismatch, ...).
    InvalidArgument(String),
    /// A partition id was not below the partition count.
    PartitionIdOutOfRange {
        /// Row (0-based, within the batch) holding the bad id.
        row: usize,
        /// The id found there.
        id: u32,
        /// The partition count the ids were checked against.
        num_partitions: u32,
    },
    /// The Arrow type is not supported by this operation.
    UnsupportedType {
        /// The offending type.
        data_type: DataType,
        /// What was being attempted with it.
        context: &'static str,
    },
    /// A key column named that the schema does not have.
    MissingKeyColumn {
        /// The name asked for.
        name: String,
        /// The schema's columns, in order.
        columns: Vec<String>,
    },
    /// The batch or array is larger than partout can index (more than `u32::MAX` rows or
    /// child values).
    TooLarge(String),
    /// Partitioning by value met more distinct keys than its limit allows.
    TooManyValues {
        /// The most distinct keys allowed.
        limit: u32,
    },
    /// An error reported by arrow-rs.
    Arrow(ArrowError),
}

/// The result type of partout-core.
pub type Result<T, E = PartoutError> = std::result::Result<T, E>;

impl fmt::Display for PartoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Self::PartitionIdOutOfRange {
                row,
                id,
                num_partitions,
            } => write!(
                f,
                "partition id {id} at row {row} is out of range for {num_partitions} partitions"
            ),
            Self::UnsupportedType { data_type, context } => {
                write!(f, "unsupported type {data_type} for {context}")
            }
            Self::MissingKeyColumn { name, columns } => write!(
                f,
                "no key column {name:?} in the data (columns: {})",
                columns.join(", ")
            ),
            Self::TooLarge(msg) => write!(f, "input too large: {msg}"),
            Self::TooManyValues { limit } => write!(
                f,
                "more than {limit} distinct values of the partition key: raise the limit on \
                 partitions if that many are meant"
            ),
            Self::Arrow(e) => write!(f, "arrow error: {e}"),
        }
    }
}

impl std::error::Error for PartoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // The Arrow error's text is this error's own (above); its cause, if any, is the
            // next link, so a chain prints each message once.
            Self::Arrow(e) => e.source(),
            _ => None,
        }
    }
}

/// `error`'s message and each cause under it, joined by `": "`; a cause whose text the
/// message ends with already is not repeated. What a person or a client is told.
///
/// ```
/// let io = std::io::Error::other("disk full");
/// let error = partout_core::PartoutError::Arrow(arrow_schema::ArrowError::IoError(
///     "writing".into(),
///     io,
/// ));
/// assert_eq!(partout_core::error::report(&error), "arrow error: Io error: writing: disk full");
/// ```
pub fn report(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !message.ends_with(&text) {
            message = format!("{message}: {text}");
        }
        cause = e.source();
    }
    message
}

impl From<ArrowError> for PartoutError {
    fn from(e: ArrowError) -> Self {
        Self::Arrow(e)
    }
}

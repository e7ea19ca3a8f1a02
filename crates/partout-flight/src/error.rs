//! [`ExchangeError`]: what went wrong, as both protocols report it.

use std::fmt;

/// Why an exchange cannot give what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeError {
    /// No such exchange or destination (what was asked, and what there is).
    NotFound(String),
    /// A request that cannot be served as asked: a bad ticket, token or option.
    InvalidArgument(String),
    /// The messages asked for were acknowledged and freed.
    Freed(String),
    /// A producer failed: the exchange ends in this error, never in a short stream.
    Failed(String),
    /// The exchange was cancelled.
    Cancelled(String),
    /// An output file that cannot be read, or does not hold what its manifest says.
    Corrupt(String),
    /// Past one of the server's limits (exchanges, memory): what, and the limit.
    ResourceExhausted(String),
}

impl ExchangeError {
    /// The error prefixed with `context`, of the same kind.
    pub fn context(self, context: impl fmt::Display) -> Self {
        let wrap = |what: String| format!("{context}: {what}");
        match self {
            Self::NotFound(w) => Self::NotFound(wrap(w)),
            Self::InvalidArgument(w) => Self::InvalidArgument(wrap(w)),
            Self::Freed(w) => Self::Freed(wrap(w)),
            Self::Failed(w) => Self::Failed(wrap(w)),
            Self::Cancelled(w) => Self::Cancelled(wrap(w)),
            Self::Corrupt(w) => Self::Corrupt(wrap(w)),
            Self::ResourceExhausted(w) => Self::ResourceExhausted(wrap(w)),
        }
    }
}

impl fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound(w) => write!(f, "not found: {w}"),
            Self::InvalidArgument(w) => write!(f, "invalid argument: {w}"),
            Self::Freed(w) => write!(f, "already acknowledged and freed: {w}"),
            Self::Failed(w) => write!(f, "the exchange failed: {w}"),
            Self::Cancelled(w) => write!(f, "the exchange was cancelled: {w}"),
            Self::Corrupt(w) => write!(f, "unreadable output: {w}"),
            Self::ResourceExhausted(w) => write!(f, "past the server's limits: {w}"),
        }
    }
}

impl std::error::Error for ExchangeError {}

impl From<ExchangeError> for tonic::Status {
    fn from(e: ExchangeError) -> Self {
        let message = e.to_string();
        match e {
            ExchangeError::NotFound(_) => Self::not_found(message),
            ExchangeError::InvalidArgument(_) => Self::invalid_argument(message),
            ExchangeError::Freed(_) => Self::out_of_range(message),
            ExchangeError::Failed(_) => Self::aborted(message),
            ExchangeError::Cancelled(_) => Self::cancelled(message),
            ExchangeError::Corrupt(_) => Self::data_loss(message),
            ExchangeError::ResourceExhausted(_) => Self::resource_exhausted(message),
        }
    }
}

impl From<partout_format::FormatError> for ExchangeError {
    fn from(e: partout_format::FormatError) -> Self {
        match e {
            partout_format::FormatError::InvalidArgument(w) => Self::InvalidArgument(w),
            other => Self::Corrupt(other.to_string()),
        }
    }
}

impl From<arrow_schema::ArrowError> for ExchangeError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::Corrupt(e.to_string())
    }
}

/// Results of the exchange.
pub type Result<T, E = ExchangeError> = std::result::Result<T, E>;

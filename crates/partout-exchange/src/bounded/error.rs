//! [`ExchangeError`]: why an exchange cannot do what was asked.

use std::fmt;
use std::sync::Arc;

/// Why an exchange cannot do what was asked.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ExchangeError {
    /// No such output.
    NotFound(String),
    /// A request that cannot be served as asked (an acknowledgement past the end).
    InvalidArgument(String),
    /// The items asked for were acknowledged and freed.
    Freed(String),
    /// A producer failed: the exchange ends in its error.
    Failed(Arc<dyn std::error::Error + Send + Sync>),
    /// The exchange was cancelled.
    Cancelled(String),
    /// The budget is full, a consumer waits, and nothing may be spilled (no spill file, or
    /// past its limit, or the memory pool refused and there is no disk).
    ResourcesExhausted(String),
    /// Writing or reading the spill file failed.
    Spill(String),
}

impl fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound(w) => write!(f, "not found: {w}"),
            Self::InvalidArgument(w) => write!(f, "invalid argument: {w}"),
            Self::Freed(w) => write!(f, "already acknowledged and freed: {w}"),
            Self::Failed(e) => write!(f, "a producer failed: {e}"),
            Self::Cancelled(w) => write!(f, "cancelled: {w}"),
            Self::ResourcesExhausted(w) => write!(f, "resources exhausted: {w}"),
            Self::Spill(w) => write!(f, "spilling failed: {w}"),
        }
    }
}

impl std::error::Error for ExchangeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Failed(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

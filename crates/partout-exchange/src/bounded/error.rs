//! [`ExchangeError`]: why an exchange cannot do what was asked, with its cause. It is the one
//! error of every exchange, in this process ([`BoundedExchange`](super::BoundedExchange)) and
//! over the network (`partout-flight`, which only decides how each protocol reports it).

use std::fmt;
use std::sync::Arc;

/// The error underneath an [`ExchangeError`], shared: one producer's failure reaches every
/// consumer of the exchange.
pub type Cause = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why an exchange cannot do what was asked.
///
/// Its [`Display`](fmt::Display) is its own message; the error it comes from, if any, is its
/// [`source`](std::error::Error::source). [`ExchangeError::report`] joins the two, as clients
/// are told.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ExchangeError {
    /// No such exchange, output or destination (what was asked, and what there is).
    NotFound(String),
    /// A request that cannot be served as asked: an acknowledgement past the end, a bad
    /// ticket, token or option.
    InvalidArgument(String),
    /// The items asked for were acknowledged and freed.
    Freed(String),
    /// A producer failed: the exchange ends in this error, never in a short output.
    Failed {
        /// What failed.
        what: String,
        /// The producer's own error.
        cause: Option<Cause>,
    },
    /// The exchange was cancelled.
    Cancelled(String),
    /// An output file or a message that cannot be read, or does not hold what its manifest
    /// says.
    Corrupt {
        /// What cannot be read.
        what: String,
        /// The decoder's or the file system's error.
        cause: Option<Cause>,
    },
    /// Past a limit: the budget is full, a consumer waits, and nothing may be spilled (no
    /// spill file, or past its limit, or the memory pool refused and there is no disk); or
    /// past one of a server's limits (exchanges, memory). What, and the limit.
    ResourcesExhausted(String),
    /// Writing or reading the spill file failed.
    Spill(String),
}

impl ExchangeError {
    /// Unreadable `what`, with no cause beyond the words.
    pub fn corrupt(what: impl Into<String>) -> Self {
        Self::Corrupt {
            what: what.into(),
            cause: None,
        }
    }

    /// Unreadable `what`, because of `cause`.
    pub fn corrupt_because(
        what: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Self::Corrupt {
            what: what.into(),
            cause: Some(Arc::from(cause.into())),
        }
    }

    /// The exchange failed at `what`, because of `cause`.
    pub fn failed(what: impl Into<String>, cause: Option<Cause>) -> Self {
        Self::Failed {
            what: what.into(),
            cause,
        }
    }

    /// The error a producer's `cause` ends the exchange in: the cause itself when it is an
    /// exchange's error already (kept as it was), a failure of "a producer" otherwise.
    pub fn producer_failed(cause: Cause) -> Self {
        match cause.downcast_ref::<Self>() {
            Some(e) => e.clone(),
            None => Self::failed("a producer failed", Some(cause)),
        }
    }

    /// The error prefixed with `context`, of the same kind and with the same cause.
    pub fn context(self, context: impl fmt::Display) -> Self {
        let wrap = |what: String| format!("{context}: {what}");
        match self {
            Self::NotFound(w) => Self::NotFound(wrap(w)),
            Self::InvalidArgument(w) => Self::InvalidArgument(wrap(w)),
            Self::Freed(w) => Self::Freed(wrap(w)),
            Self::Failed { what, cause } => Self::Failed {
                what: wrap(what),
                cause,
            },
            Self::Cancelled(w) => Self::Cancelled(wrap(w)),
            Self::Corrupt { what, cause } => Self::Corrupt {
                what: wrap(what),
                cause,
            },
            Self::ResourcesExhausted(w) => Self::ResourcesExhausted(wrap(w)),
            Self::Spill(w) => Self::Spill(wrap(w)),
        }
    }

    /// The message and every cause under it, each once: what a client is told.
    pub fn report(&self) -> String {
        partout_core::error::report(self)
    }
}

impl fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound(w) => write!(f, "not found: {w}"),
            Self::InvalidArgument(w) => write!(f, "invalid argument: {w}"),
            Self::Freed(w) => write!(f, "already acknowledged and freed: {w}"),
            Self::Failed { what, .. } => write!(f, "the exchange failed: {what}"),
            Self::Cancelled(w) => write!(f, "the exchange was cancelled: {w}"),
            Self::Corrupt { what, .. } => write!(f, "unreadable output: {what}"),
            Self::ResourcesExhausted(w) => write!(f, "resources exhausted: {w}"),
            Self::Spill(w) => write!(f, "spilling failed: {w}"),
        }
    }
}

impl std::error::Error for ExchangeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Failed { cause, .. } | Self::Corrupt { cause, .. } => cause
                .as_deref()
                .map(|e| e as &(dyn std::error::Error + 'static)),
            _ => None,
        }
    }
}

/// A message or a file that does not decode: a bad argument stays one, the rest is corrupt.
impl From<partout_format::FormatError> for ExchangeError {
    fn from(e: partout_format::FormatError) -> Self {
        match e {
            partout_format::FormatError::InvalidArgument(w) => Self::InvalidArgument(w),
            other => Self::corrupt_because("a message", other),
        }
    }
}

/// A message arrow-ipc cannot decode.
impl From<arrow_schema::ArrowError> for ExchangeError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::corrupt_because("a message", e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn the_cause_is_kept_and_reported_once() {
        let io = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "short read");
        let error = ExchangeError::corrupt_because("/out/3.arrow", io).context("destination 3");
        assert_eq!(
            error.to_string(),
            "unreadable output: destination 3: /out/3.arrow"
        );
        let cause = error.source().expect("a cause");
        assert_eq!(
            cause.downcast_ref::<std::io::Error>().map(|e| e.kind()),
            Some(std::io::ErrorKind::UnexpectedEof)
        );
        assert_eq!(
            error.report(),
            "unreadable output: destination 3: /out/3.arrow: short read"
        );
        assert_eq!(error.report().matches("short read").count(), 1);
    }

    #[test]
    fn a_producer_failure_keeps_an_exchange_error_as_it_was() {
        let own = ExchangeError::InvalidArgument("no destination 7".into());
        let kept = ExchangeError::producer_failed(Arc::new(own));
        assert!(matches!(&kept, ExchangeError::InvalidArgument(w) if w == "no destination 7"));
        let io: Cause = Arc::new(std::io::Error::other("the disk is gone"));
        let failed = ExchangeError::producer_failed(io);
        assert!(matches!(failed, ExchangeError::Failed { .. }), "{failed}");
        assert_eq!(
            failed.report(),
            "the exchange failed: a producer failed: the disk is gone"
        );
    }

    #[test]
    fn a_format_error_keeps_its_kind_and_text() {
        let bad = ExchangeError::from(partout_format::FormatError::InvalidArgument("no".into()));
        assert!(matches!(&bad, ExchangeError::InvalidArgument(w) if w == "no"));
        let corrupt = ExchangeError::from(partout_format::FormatError::Corrupt(
            "a body past its end".into(),
        ));
        assert!(
            matches!(corrupt, ExchangeError::Corrupt { .. }),
            "{corrupt}"
        );
        assert!(
            corrupt.report().ends_with("a body past its end"),
            "{}",
            corrupt.report()
        );
    }
}

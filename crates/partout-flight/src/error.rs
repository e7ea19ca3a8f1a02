//! [`ExchangeError`]: what went wrong, with its cause, and how each protocol reports it (a gRPC
//! code for Flight, an HTTP status for Presto's protocol), decided here alone.

use axum::http::StatusCode;
use std::fmt;
use std::sync::Arc;

/// The error underneath an [`ExchangeError`], shared: one producer's failure reaches every
/// consumer of the exchange.
pub type Cause = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why an exchange cannot give what was asked.
///
/// Its [`Display`](fmt::Display) is its own message; the error it comes from, if any, is its
/// [`source`](std::error::Error::source). [`ExchangeError::report`] joins the two, as the
/// protocols send them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ExchangeError {
    /// No such exchange or destination (what was asked, and what there is).
    NotFound(String),
    /// A request that cannot be served as asked: a bad ticket, token or option.
    InvalidArgument(String),
    /// The messages asked for were acknowledged and freed.
    Freed(String),
    /// A producer failed: the exchange ends in this error, never in a short stream.
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
    /// Past one of the server's limits (exchanges, memory): what, and the limit.
    ResourceExhausted(String),
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
            Self::ResourceExhausted(w) => Self::ResourceExhausted(wrap(w)),
        }
    }

    /// The message and every cause under it, each once: what a client is told.
    pub fn report(&self) -> String {
        partout_core::error::report(self)
    }

    /// The gRPC code Flight answers with.
    pub fn grpc_code(&self) -> tonic::Code {
        match self {
            Self::NotFound(_) => tonic::Code::NotFound,
            Self::InvalidArgument(_) => tonic::Code::InvalidArgument,
            Self::Freed(_) => tonic::Code::OutOfRange,
            Self::Failed { .. } => tonic::Code::Aborted,
            Self::Cancelled(_) => tonic::Code::Cancelled,
            Self::Corrupt { .. } => tonic::Code::DataLoss,
            Self::ResourceExhausted(_) => tonic::Code::ResourceExhausted,
        }
    }

    /// The HTTP status Presto's protocol answers with.
    pub fn http_status(&self) -> StatusCode {
        match self {
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::InvalidArgument(_) => StatusCode::BAD_REQUEST,
            Self::Freed(_) | Self::Cancelled(_) => StatusCode::GONE,
            Self::Failed { .. } | Self::Corrupt { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            Self::ResourceExhausted(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
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
            Self::ResourceExhausted(w) => write!(f, "past the server's limits: {w}"),
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

impl From<ExchangeError> for tonic::Status {
    fn from(e: ExchangeError) -> Self {
        Self::new(e.grpc_code(), e.report())
    }
}

impl From<partout_format::FormatError> for ExchangeError {
    fn from(e: partout_format::FormatError) -> Self {
        match e {
            partout_format::FormatError::InvalidArgument(w) => Self::InvalidArgument(w),
            other => Self::corrupt_because("a message", other),
        }
    }
}

impl From<arrow_schema::ArrowError> for ExchangeError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::corrupt_because("a message", e)
    }
}

/// Results of the exchange.
pub type Result<T, E = ExchangeError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn each_kind_has_one_grpc_code_and_one_http_status() {
        let cause: Cause = Arc::new(std::io::Error::other("short read"));
        let table = [
            (
                ExchangeError::NotFound("x".into()),
                tonic::Code::NotFound,
                404,
            ),
            (
                ExchangeError::InvalidArgument("x".into()),
                tonic::Code::InvalidArgument,
                400,
            ),
            (
                ExchangeError::Freed("x".into()),
                tonic::Code::OutOfRange,
                410,
            ),
            (ExchangeError::failed("x", None), tonic::Code::Aborted, 500),
            (
                ExchangeError::Cancelled("x".into()),
                tonic::Code::Cancelled,
                410,
            ),
            (
                ExchangeError::corrupt_because("x", cause),
                tonic::Code::DataLoss,
                500,
            ),
            (
                ExchangeError::ResourceExhausted("x".into()),
                tonic::Code::ResourceExhausted,
                503,
            ),
        ];
        for (error, code, status) in table {
            assert_eq!(error.grpc_code(), code, "{error}");
            assert_eq!(error.http_status().as_u16(), status, "{error}");
            let sent = tonic::Status::from(error.clone());
            assert_eq!(sent.code(), code);
            assert_eq!(sent.message(), error.report());
        }
    }

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
    fn a_format_error_keeps_its_kind_and_text() {
        let bad = ExchangeError::from(partout_format::FormatError::InvalidArgument("no".into()));
        assert_eq!(bad.grpc_code(), tonic::Code::InvalidArgument);
        let corrupt = ExchangeError::from(partout_format::FormatError::Corrupt(
            "a body past its end".into(),
        ));
        assert_eq!(corrupt.grpc_code(), tonic::Code::DataLoss);
        assert!(
            corrupt.report().ends_with("a body past its end"),
            "{}",
            corrupt.report()
        );
    }
}

//! How each protocol reports an [`ExchangeError`] (the exchange's one error, from
//! `partout-exchange`): a gRPC code for Flight, an HTTP status for Presto's protocol, decided
//! here alone.

use axum::http::StatusCode;
pub use partout_exchange::{Cause, ExchangeError};

/// Results of the exchange.
pub type Result<T, E = ExchangeError> = std::result::Result<T, E>;

/// An [`ExchangeError`] as each protocol reports it: one gRPC code and one HTTP status per
/// kind, and the [report](ExchangeError::report) as the message.
pub trait ProtocolError {
    /// The gRPC code Flight answers with.
    fn grpc_code(&self) -> tonic::Code;

    /// The HTTP status Presto's protocol answers with.
    fn http_status(&self) -> StatusCode;

    /// The status Flight answers with: the code, and the message with its causes.
    fn into_status(self) -> tonic::Status;
}

impl ProtocolError for ExchangeError {
    fn grpc_code(&self) -> tonic::Code {
        match self {
            Self::NotFound(_) => tonic::Code::NotFound,
            Self::InvalidArgument(_) => tonic::Code::InvalidArgument,
            Self::Freed(_) => tonic::Code::OutOfRange,
            Self::Failed { .. } | Self::Spill(_) => tonic::Code::Aborted,
            Self::Cancelled(_) => tonic::Code::Cancelled,
            Self::Corrupt { .. } => tonic::Code::DataLoss,
            Self::ResourcesExhausted(_) => tonic::Code::ResourceExhausted,
            _ => tonic::Code::Internal,
        }
    }

    fn http_status(&self) -> StatusCode {
        match self {
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::InvalidArgument(_) => StatusCode::BAD_REQUEST,
            Self::Freed(_) | Self::Cancelled(_) => StatusCode::GONE,
            Self::Failed { .. } | Self::Corrupt { .. } | Self::Spill(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            Self::ResourcesExhausted(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn into_status(self) -> tonic::Status {
        tonic::Status::new(self.grpc_code(), self.report())
    }
}

/// `e` as Flight answers with it: [`ProtocolError::into_status`].
pub(crate) fn status(e: ExchangeError) -> tonic::Status {
    e.into_status()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

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
                ExchangeError::ResourcesExhausted("x".into()),
                tonic::Code::ResourceExhausted,
                503,
            ),
            (ExchangeError::Spill("x".into()), tonic::Code::Aborted, 500),
        ];
        for (error, code, status) in table {
            assert_eq!(error.grpc_code(), code, "{error}");
            assert_eq!(error.http_status().as_u16(), status, "{error}");
            let sent = error.clone().into_status();
            assert_eq!(sent.code(), code);
            assert_eq!(sent.message(), error.report());
        }
    }
}

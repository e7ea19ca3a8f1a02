//! partout-format: the bytes partout sends to destinations.
//!
//! * [`ipc`]: one Arrow IPC stream per destination, encoded without IO (bytes out), with the
//!   IPC format's own LZ4_FRAME or ZSTD body compression, and a decoder that turns malformed
//!   bytes into errors.
//! * [`presto`]: Presto's SerializedPage (the Presto and Velox exchange format), encoder and
//!   decoder, byte-compatible with Presto's own serde.
//! * [`message`]: one unit of a destination's output ([`Message`]: an IPC record batch with
//!   its dictionaries, or a Presto page) as it is held, spilled, sent and read back.
//! * [`stream`]: what a destination of a partitioned output receives ([`Encoding`]: a format
//!   and its compression, checked together and against the schema) and the per-destination
//!   [`StreamEncoder`]s that make its bytes.

#![forbid(unsafe_code)]

pub mod ipc;
pub mod message;
pub mod presto;
pub mod spec;
pub mod stream;

pub use message::{IpcMessage, Message, MessageEncoder};
pub use spec::{Compression, Format, ZstdLevel};
pub use stream::{Encoding, StreamEncoder, StreamEncoders};

use arrow_schema::ArrowError;
use std::fmt;

/// Errors of partout-format.
#[derive(Debug)]
#[non_exhaustive]
pub enum FormatError {
    /// Bytes that are not a valid stream: what was wrong, as found by the decoder.
    Corrupt(String),
    /// The encoder was used wrongly (a batch of another schema, a finished stream).
    InvalidArgument(String),
    /// An error from arrow-rs while encoding.
    Arrow(ArrowError),
    /// Input that would decode to more than its size allows (what, and the limit).
    TooLarge(String),
    /// Reading the input failed.
    Io(std::io::Error),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Corrupt(what) => write!(f, "corrupt input: {what}"),
            Self::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Self::Arrow(e) => write!(f, "arrow error: {e}"),
            Self::TooLarge(what) => write!(f, "input too large to decode: {what}"),
            Self::Io(e) => write!(f, "reading failed: {e}"),
        }
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // The Arrow error's text is this error's own (above); its cause, if any, is the
            // next link, so a chain prints each message once.
            Self::Arrow(e) => e.source(),
            Self::Io(e) => e.source(),
            _ => None,
        }
    }
}

impl From<ArrowError> for FormatError {
    fn from(e: ArrowError) -> Self {
        Self::Arrow(e)
    }
}

impl From<std::io::Error> for FormatError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

/// The result type of partout-format.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;

//! What can go wrong, by the class of `partout.errors` it is raised as: the conversions from
//! the Rust crates' errors, each by its kind.

use arrow_schema::ArrowError;
use partout_core::PartoutError;
use partout_exchange::WriterError;
use partout_format::FormatError;
use partout_input::IoError;
use partout_job::JobError;
use pyo3::prelude::*;

/// What can go wrong, by the kind of `partout.errors` class it is raised as.
#[derive(Debug)]
pub(crate) enum Error {
    /// An argument that can never work.
    InvalidArgument(String),
    /// A column type the operation cannot handle.
    UnsupportedType(String),
    /// Data whose schema does not fit the call (a missing key, batches of two schemas).
    SchemaMismatch(String),
    /// The input could not be read, or the job failed otherwise.
    Input(String),
    /// Bytes that are not what they claim to be.
    Corrupt(String),
    /// A file could not be read or written.
    Io(String),
}

/// The result type of the native module.
pub(crate) type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The same kind of error with `message`.
    pub(crate) fn with_message(self, message: String) -> Self {
        match self {
            Error::InvalidArgument(_) => Error::InvalidArgument(message),
            Error::UnsupportedType(_) => Error::UnsupportedType(message),
            Error::SchemaMismatch(_) => Error::SchemaMismatch(message),
            Error::Input(_) => Error::Input(message),
            Error::Corrupt(_) => Error::Corrupt(message),
            Error::Io(_) => Error::Io(message),
        }
    }

    /// The Python exception: an instance of the class of `partout.errors` for the kind.
    pub(crate) fn into_py(self, py: Python<'_>) -> PyErr {
        let (class, message) = match self {
            Error::InvalidArgument(m) => ("InvalidArgumentError", m),
            Error::UnsupportedType(m) => ("UnsupportedTypeError", m),
            Error::SchemaMismatch(m) => ("SchemaMismatchError", m),
            Error::Input(m) => ("PartoutError", m),
            Error::Corrupt(m) => ("CorruptInputError", m),
            Error::Io(m) => ("PartoutIOError", m),
        };
        match py
            .import("partout.errors")
            .and_then(|errors| errors.getattr(class))
            .and_then(|class| class.call1((message,)))
        {
            Ok(instance) => PyErr::from_value(instance),
            Err(e) => e,
        }
    }
}

impl From<PartoutError> for Error {
    fn from(error: PartoutError) -> Self {
        match error {
            PartoutError::UnsupportedType { .. } => Error::UnsupportedType(error.to_string()),
            PartoutError::MissingKeyColumn { name, columns } => Error::SchemaMismatch(format!(
                "no column {name:?} to partition by; the data has [{}]",
                columns.join(", ")
            )),
            PartoutError::Arrow(e) => Error::Input(e.to_string()),
            other => Error::InvalidArgument(other.to_string()),
        }
    }
}

impl From<FormatError> for Error {
    fn from(error: FormatError) -> Self {
        match error {
            FormatError::InvalidArgument(_) => Error::InvalidArgument(error.to_string()),
            other => Error::Input(other.to_string()),
        }
    }
}

impl From<ArrowError> for Error {
    fn from(error: ArrowError) -> Self {
        Error::Input(error.to_string())
    }
}

/// `error` and its causes, each after the last (a job's error names what it was doing, its
/// causes what went wrong).
fn chain(error: &dyn std::error::Error) -> String {
    partout_core::error::report(error)
}

/// The Python exception for a failed job, by kind, with its whole message.
pub(crate) fn job_error(error: JobError) -> Error {
    let message = chain(&error);
    match error {
        // The writer's kind of error (an unsupported type, an invalid option), the job's
        // context before its message.
        JobError::Write { source, .. } => writer_error(source).with_message(message),
        JobError::InvalidOption(_) => Error::InvalidArgument(message),
        JobError::OutputNotEmpty(_) | JobError::Io { .. } => Error::Io(message),
        JobError::Input(IoError::File { cause, .. }) => {
            if cause.is_some_and(|c| c.downcast_ref::<std::io::Error>().is_some()) {
                Error::Io(message)
            } else {
                Error::Corrupt(message)
            }
        }
        JobError::Input(IoError::Inputs(_)) => Error::SchemaMismatch(message),
        _ => Error::Input(message),
    }
}

/// The Python exception for a writer's error, by kind.
pub(crate) fn writer_error(error: WriterError) -> Error {
    let message = chain(&error);
    match error {
        WriterError::Partition(e) => Error::from(e),
        WriterError::InvalidOption(_) | WriterError::NoSuchDestination { .. } => {
            Error::InvalidArgument(message)
        }
        WriterError::Encode(FormatError::InvalidArgument(_)) => Error::UnsupportedType(message),
        // The sink's own cause travels in the message (a full disk, a failed exchange).
        WriterError::Sink { .. } => Error::Io(message),
        _ => Error::Input(message),
    }
}

/// An error of the file system at `path`.
pub(crate) fn io(path: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

//! Calls into the format crates on a file's bytes, their errors and panics made errors naming
//! the file.

use crate::{InputFile, Result, file_error};
use arrow_array::RecordBatch;
use arrow_schema::ArrowError;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Batches as a format crate reads them.
pub(crate) type Batches = Box<dyn Iterator<Item = std::result::Result<RecordBatch, ArrowError>>>;

/// What a panic says.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// Runs `read`, a call into a format crate (parquet, arrow-ipc, arrow-csv) on `file`'s bytes,
/// its errors and its panics made errors naming the file.
///
/// The format crates panic on some damaged input (arrow-ipc's schema conversion, which the
/// Parquet reader uses for the Arrow schema a file carries, panics on malformed types; its
/// buffer slicing asserts bounds): what partout can check cheaply it checks before calling
/// (see the `ipc` and `parquet_footer` modules), the rest is contained here. A reader that
/// panicked is not used again.
pub(crate) fn contain<T, E: fmt::Display>(
    file: &InputFile,
    read: impl FnOnce() -> std::result::Result<T, E>,
) -> Result<T> {
    let not_readable = |what: &dyn fmt::Display| {
        file_error(
            &file.path,
            format!("not a readable {:?} file: {what}", file.format),
        )
    };
    match catch_unwind(AssertUnwindSafe(read)) {
        Ok(result) => result.map_err(|e| not_readable(&e)),
        Err(panic) => Err(not_readable(&format_args!(
            "its reader failed: {}",
            panic_message(panic.as_ref())
        ))),
    }
}

/// Batches from a format crate: a panic ends them with an error, and so does a count of rows
/// other than the file's metadata claims for them (a Parquet reader stops quietly where a
/// row group's pages end, however many rows the row group claims).
pub(crate) struct Contained {
    batches: Batches,
    done: bool,
    claimed_rows: Option<u64>,
    rows: u64,
}

impl Contained {
    pub(crate) fn boxed(batches: Batches, claimed_rows: Option<u64>) -> Batches {
        Box::new(Self {
            batches,
            done: false,
            claimed_rows,
            rows: 0,
        })
    }
}

impl Iterator for Contained {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = match catch_unwind(AssertUnwindSafe(|| self.batches.next())) {
            Ok(Some(Ok(batch))) => {
                self.rows += batch.num_rows() as u64;
                return Some(Ok(batch));
            }
            Ok(Some(Err(e))) => Some(Err(e)),
            Ok(None) => self
                .claimed_rows
                .filter(|&claimed| claimed != self.rows)
                .map(|claimed| {
                    Err(ArrowError::ParseError(format!(
                        "its metadata claims {claimed} rows where its data holds {}",
                        self.rows
                    )))
                }),
            Err(panic) => Some(Err(ArrowError::ExternalError(
                format!("its reader failed: {}", panic_message(panic.as_ref())).into(),
            ))),
        };
        self.done = true;
        next
    }
}

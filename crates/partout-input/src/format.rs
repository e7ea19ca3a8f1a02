//! The input formats partout reads, and how a file is known as one: by its first bytes, then
//! its name.

use crate::{Result, file_error, file_io_error};
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// A file format partout reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// Apache Parquet: begins with `PAR1`.
    Parquet,
    /// Arrow IPC file (Feather 2): begins with `ARROW1`.
    IpcFile,
    /// Arrow IPC stream: begins with the continuation marker (then its schema message).
    IpcStream,
    /// CSV with a header row (`.csv`); the schema is inferred from the first file.
    Csv,
    /// CSV compressed with gzip (`.csv.gz`), read through a streaming decompressor.
    CsvGzip,
    /// CSV compressed with Zstandard (`.csv.zst`), read through a streaming decompressor.
    CsvZstd,
}

/// What names say, for files whose first bytes are not one of the binary formats.
const CSV_NAMES: &str = ".csv, .csv.gz or .csv.zst";

impl InputFormat {
    /// The format a file name's extension names (`.parquet`/`.pq`, `.arrow`/`.feather`/`.ipc`,
    /// `.arrows`, `.csv`, `.csv.gz`, `.csv.zst`).
    pub fn from_extension(path: &Path) -> Option<InputFormat> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let (stem, extension) = name.rsplit_once('.')?;
        match extension {
            "parquet" | "pq" => Some(InputFormat::Parquet),
            "arrow" | "feather" | "ipc" => Some(InputFormat::IpcFile),
            "arrows" => Some(InputFormat::IpcStream),
            "csv" => Some(InputFormat::Csv),
            "gz" if stem.ends_with(".csv") => Some(InputFormat::CsvGzip),
            "zst" if stem.ends_with(".csv") => Some(InputFormat::CsvZstd),
            _ => None,
        }
    }

    /// The binary format `head` (a file's first bytes) announces: Parquet's `PAR1`, the Arrow
    /// file's `ARROW1`, an Arrow stream's continuation marker followed by a schema message;
    /// gzip's and Zstandard's magic numbers (compressed CSV, if the name says CSV).
    ///
    /// ```
    /// use partout_input::InputFormat;
    /// assert_eq!(InputFormat::from_content(b"PAR1\x15\x00"), Some(InputFormat::Parquet));
    /// assert_eq!(InputFormat::from_content(b"ARROW1\x00\x00"), Some(InputFormat::IpcFile));
    /// assert_eq!(InputFormat::from_content(b"id,name\n1,a\n"), None);
    /// ```
    pub fn from_content(head: &[u8]) -> Option<InputFormat> {
        if head.starts_with(b"PAR1") {
            Some(InputFormat::Parquet)
        } else if head.starts_with(b"ARROW1") {
            Some(InputFormat::IpcFile)
        } else if is_ipc_stream(head) {
            Some(InputFormat::IpcStream)
        } else if head.starts_with(&[0x1f, 0x8b]) {
            Some(InputFormat::CsvGzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(InputFormat::CsvZstd)
        } else {
            None
        }
    }

    /// The format of the file at `path`: its first bytes decide (whatever its name), then
    /// its name (CSV, which has no mark of its own).
    ///
    /// # Errors
    /// [`IoError::File`](crate::IoError::File) for a file that cannot be read, an empty file, a compressed file not
    /// named CSV, a name that promises a binary format the bytes do not hold, and bytes of no
    /// format partout reads; each naming what the file begins with.
    pub fn detect(path: &Path) -> Result<InputFormat> {
        let mut head = [0u8; 64];
        let mut file = File::open(path).map_err(|e| file_io_error(path, "cannot be opened", e))?;
        let mut len = 0;
        while len < head.len() {
            match file.read(&mut head[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(file_io_error(path, "cannot be read", e)),
            }
        }
        Self::from_head(path, &head[..len])
    }

    /// [`detect`](Self::detect) for the file `path` that begins with `head` (its first 64
    /// bytes, or all of it when shorter).
    pub(crate) fn from_head(path: &Path, head: &[u8]) -> Result<InputFormat> {
        if head.is_empty() {
            return Err(file_error(path, "an empty file: no format to read"));
        }
        let named = InputFormat::from_extension(path);
        match (InputFormat::from_content(head), named) {
            (Some(compressed @ (InputFormat::CsvGzip | InputFormat::CsvZstd)), named) => {
                if named == Some(compressed) {
                    Ok(compressed)
                } else {
                    Err(file_error(
                        path,
                        format!(
                            "{} data not named {} (begins {}): partout reads compressed CSV only",
                            if compressed == InputFormat::CsvGzip {
                                "gzip"
                            } else {
                                "Zstandard"
                            },
                            if compressed == InputFormat::CsvGzip {
                                ".csv.gz"
                            } else {
                                ".csv.zst"
                            },
                            describe_head(head)
                        ),
                    ))
                }
            }
            (Some(format), _) => Ok(format),
            (None, Some(InputFormat::Csv)) => Ok(InputFormat::Csv),
            (
                None,
                Some(
                    named @ (InputFormat::Parquet | InputFormat::IpcFile | InputFormat::IpcStream),
                ),
            ) => Err(file_error(
                path,
                format!(
                    "named as {named:?} but its bytes are not (begins {}; Parquet begins PAR1, an Arrow file ARROW1, an Arrow stream ff ff ff ff)",
                    describe_head(head)
                ),
            )),
            (None, _) => Err(file_error(
                path,
                format!(
                    "unknown file type: neither Parquet, an Arrow file nor an Arrow stream by its first bytes (begins {}), nor named {CSV_NAMES}",
                    describe_head(head)
                ),
            )),
        }
    }
}

/// Whether `head` begins an Arrow IPC stream: the continuation marker (what follows, the
/// schema message, is the reader's to check, and its errors name what is wrong).
fn is_ipc_stream(head: &[u8]) -> bool {
    head.starts_with(&[0xff, 0xff, 0xff, 0xff])
}

/// A file's first bytes for an error: ASCII text as a quoted string, or hex.
fn describe_head(head: &[u8]) -> String {
    let head = &head[..head.len().min(16)];
    if head
        .iter()
        .all(|b| b.is_ascii_graphic() || b" \t\r\n".contains(b))
    {
        format!("{:?}", String::from_utf8_lossy(head))
    } else {
        head.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

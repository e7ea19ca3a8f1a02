//! partout-io: the files partout reads and writes.
//!
//! Inputs: Parquet, Arrow IPC (file and stream) and CSV files, given one by one or as
//! directories, read as one stream of record batches of one schema, a batch at a time (never a
//! whole file in memory). [`discover`] lists the files and their formats, [`InputReader`] reads
//! them in order, [`plan_frames`] cuts them into [`Frame`]s that parallel workers read on their
//! own (Parquet row groups or row ranges of them, IPC file batch ranges; CSV files and IPC
//! streams whole). Every error names the file.
//!
//! Outputs: the [`output`] layer, the one owner of an output — its spec
//! ([`output::OutputSpec`]: format, compression, layout, location), the writers of each
//! layout ([`DestinationFiles`], one file per destination shared by every worker;
//! [`ShuffleFile`], one worker's data file and index of byte ranges; [`StagedParquet`], each
//! destination's file written whole from rows staged first) and where they are committed
//! ([`output::location`]).
//!
//! Damaged inputs are errors naming the file, never panics, stack overflows or allocations
//! of what the file claims: footers, messages and counts are checked against the file's size
//! before a format crate is handed them, and what panics inside a format crate anyway is
//! contained (see `contain`).
//!
//! The [`manifest`] module: what a run wrote, [`manifest::Manifest`] (`_manifest.json`
//! beside the outputs, read back by [`manifest::Manifest::read`], its output's spec by
//! [`manifest::Manifest::output_spec`]).

#![forbid(unsafe_code)]

mod discover;
mod frames;
mod ipc;
pub mod manifest;
pub mod output;
mod parquet_footer;
mod runs;
mod size;
mod source;
mod store;

pub use discover::{discover, discover_in};
pub use frames::{Frame, FrameReader, Frames, plan_frames, plan_frames_by};
pub use output::{
    DestinationFile, DestinationFiles, DirectParquet, DirectSink, FilesHandle, PAGE_ROWS,
    ParquetOptions, ParquetSettings, SHUFFLE_INDEX_MAGIC, ShuffleFile, ShuffleRange, StagedParquet,
    parse_shuffle_index, read_shuffle_index,
};
pub use runs::{RunOptions, SortedRuns};
pub use size::parse_bytes;
pub use source::READ_BYTES as STORE_READ_BYTES;
pub use store::is_store_url;

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, SchemaRef};
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// Rows per batch read from inputs that do not fix it themselves (Parquet, CSV).
pub const BATCH_ROWS: usize = 8192;

/// Errors of partout-io.
#[derive(Debug)]
#[non_exhaustive]
pub enum IoError {
    /// A file could not be read, or is not what it claims: the file and what went wrong.
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        what: String,
        /// The error that caused it, where the system or a format crate gave one (see
        /// [`source`](std::error::Error::source)).
        cause: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The inputs cannot be read together (no files, different schemas, ...).
    Inputs(String),
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File { path, what, .. } => write!(f, "{}: {what}", path.display()),
            Self::Inputs(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::File {
                cause: Some(cause), ..
            } => Some(cause.as_ref()),
            _ => None,
        }
    }
}

/// The result type of partout-io.
pub type Result<T, E = IoError> = std::result::Result<T, E>;

fn file_error(path: &Path, what: impl fmt::Display) -> IoError {
    IoError::File {
        path: path.to_path_buf(),
        what: what.to_string(),
        cause: None,
    }
}

/// `what` went wrong with `path`, caused by the system's error `e` (kept as the source).
fn file_io_error(path: &Path, what: &str, e: std::io::Error) -> IoError {
    IoError::File {
        path: path.to_path_buf(),
        what: what.to_string(),
        cause: Some(Box::new(e)),
    }
}

/// A file format partout reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
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

impl Format {
    /// The format a file name's extension names (`.parquet`/`.pq`, `.arrow`/`.feather`/`.ipc`,
    /// `.arrows`, `.csv`, `.csv.gz`, `.csv.zst`).
    pub fn from_extension(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let (stem, extension) = name.rsplit_once('.')?;
        match extension {
            "parquet" | "pq" => Some(Format::Parquet),
            "arrow" | "feather" | "ipc" => Some(Format::IpcFile),
            "arrows" => Some(Format::IpcStream),
            "csv" => Some(Format::Csv),
            "gz" if stem.ends_with(".csv") => Some(Format::CsvGzip),
            "zst" if stem.ends_with(".csv") => Some(Format::CsvZstd),
            _ => None,
        }
    }

    /// The binary format `head` (a file's first bytes) announces: Parquet's `PAR1`, the Arrow
    /// file's `ARROW1`, an Arrow stream's continuation marker followed by a schema message;
    /// gzip's and Zstandard's magic numbers (compressed CSV, if the name says CSV).
    ///
    /// ```
    /// use partout_io::Format;
    /// assert_eq!(Format::from_content(b"PAR1\x15\x00"), Some(Format::Parquet));
    /// assert_eq!(Format::from_content(b"ARROW1\x00\x00"), Some(Format::IpcFile));
    /// assert_eq!(Format::from_content(b"id,name\n1,a\n"), None);
    /// ```
    pub fn from_content(head: &[u8]) -> Option<Format> {
        if head.starts_with(b"PAR1") {
            Some(Format::Parquet)
        } else if head.starts_with(b"ARROW1") {
            Some(Format::IpcFile)
        } else if is_ipc_stream(head) {
            Some(Format::IpcStream)
        } else if head.starts_with(&[0x1f, 0x8b]) {
            Some(Format::CsvGzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Format::CsvZstd)
        } else {
            None
        }
    }

    /// The format of the file at `path`: its first bytes decide (whatever its name), then
    /// its name (CSV, which has no mark of its own).
    ///
    /// # Errors
    /// [`IoError::File`] for a file that cannot be read, an empty file, a compressed file not
    /// named CSV, a name that promises a binary format the bytes do not hold, and bytes of no
    /// format partout reads; each naming what the file begins with.
    pub fn detect(path: &Path) -> Result<Format> {
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
    pub(crate) fn from_head(path: &Path, head: &[u8]) -> Result<Format> {
        if head.is_empty() {
            return Err(file_error(path, "an empty file: no format to read"));
        }
        let named = Format::from_extension(path);
        match (Format::from_content(head), named) {
            (Some(compressed @ (Format::CsvGzip | Format::CsvZstd)), named) => {
                if named == Some(compressed) {
                    Ok(compressed)
                } else {
                    Err(file_error(
                        path,
                        format!(
                            "{} data not named {} (begins {}): partout reads compressed CSV only",
                            if compressed == Format::CsvGzip {
                                "gzip"
                            } else {
                                "Zstandard"
                            },
                            if compressed == Format::CsvGzip {
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
            (None, Some(Format::Csv)) => Ok(Format::Csv),
            (None, Some(named @ (Format::Parquet | Format::IpcFile | Format::IpcStream))) => {
                Err(file_error(
                    path,
                    format!(
                        "named as {named:?} but its bytes are not (begins {}; Parquet begins PAR1, an Arrow file ARROW1, an Arrow stream ff ff ff ff)",
                        describe_head(head)
                    ),
                ))
            }
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

/// One input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Where it is: its path, or its URL in an object store.
    pub path: PathBuf,
    /// How to read it.
    pub format: Format,
    /// Where its bytes are read from.
    pub(crate) source: source::Source,
}

impl InputFile {
    /// The local file `path`, to be read as `format`.
    pub fn local(path: impl Into<PathBuf>, format: Format) -> Self {
        Self {
            path: path.into(),
            format,
            source: source::Source::Local,
        }
    }

    /// Whether it is an object of an object store.
    pub fn in_store(&self) -> bool {
        matches!(self.source, source::Source::Store(_))
    }
}

type Batches = Box<dyn Iterator<Item = std::result::Result<RecordBatch, ArrowError>>>;

/// What a panic says.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
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
fn contain<T, E: fmt::Display>(
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
struct Contained {
    batches: Batches,
    done: bool,
    claimed_rows: Option<u64>,
    rows: u64,
}

impl Contained {
    fn boxed(batches: Batches, claimed_rows: Option<u64>) -> Batches {
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

/// The metadata of a Parquet file, checked, and the file's length.
fn parquet_metadata(
    file: &InputFile,
) -> Result<(parquet::arrow::arrow_reader::ArrowReaderMetadata, u64)> {
    let (mut handle, len) = source::open(file)?;
    let metadata = contain(file, || parquet_footer::read_metadata(&mut handle, len))?;
    Ok((metadata, len))
}

/// An Arrow IPC file opened, its footer read.
fn ipc_file(file: &InputFile) -> Result<(SchemaRef, ipc::IpcFile<BufReader<source::Opened>>)> {
    let (handle, len) = source::open(file)?;
    contain(file, || ipc::IpcFile::try_new(BufReader::new(handle), len))
}

/// Opens one file as a stream of batches, with its schema. CSV files take `csv_schema` when
/// given, and infer one otherwise.
fn open(file: &InputFile, csv_schema: Option<&SchemaRef>) -> Result<(SchemaRef, Batches)> {
    let mut claimed_rows = None;
    let (schema, batches): (SchemaRef, Batches) = match file.format {
        Format::Parquet => {
            let (metadata, _) = parquet_metadata(file)?;
            let groups: Vec<usize> = (0..metadata.metadata().num_row_groups()).collect();
            let handle = source::parquet_bytes(file, metadata.metadata(), &groups)?;
            // (Checked not negative and to sum within i64.)
            let rows = metadata
                .metadata()
                .row_groups()
                .iter()
                .map(|g| g.num_rows() as u64);
            claimed_rows = Some(rows.sum());
            let reader = contain(file, || {
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::new_with_metadata(
                    handle, metadata,
                )
                .with_batch_size(BATCH_ROWS)
                .build()
            })?;
            let schema = arrow_array::RecordBatchReader::schema(&reader);
            (schema, Box::new(reader))
        }
        Format::IpcFile => {
            let (schema, reader) = ipc_file(file)?;
            (schema, Box::new(reader))
        }
        Format::IpcStream => {
            let (handle, len) = source::open(file)?;
            let (schema, reader) = contain(file, || {
                ipc::IpcStream::try_new(BufReader::new(handle), len)
            })?;
            (schema, Box::new(reader))
        }
        Format::Csv | Format::CsvGzip | Format::CsvZstd => {
            // The text, decompressed as it is read; opened anew after schema inference.
            let text = || -> Result<Box<dyn std::io::BufRead>> {
                let (handle, _) = source::open(file)?;
                Ok(match file.format {
                    Format::CsvGzip => {
                        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(handle)))
                    }
                    Format::CsvZstd => Box::new(BufReader::new(
                        zstd::stream::read::Decoder::new(handle)
                            .map_err(|e| file_io_error(&file.path, "cannot be decompressed", e))?,
                    )),
                    _ => Box::new(BufReader::new(handle)),
                })
            };
            let schema = match csv_schema {
                Some(schema) => schema.clone(),
                None => {
                    let format = arrow_csv::reader::Format::default().with_header(true);
                    let mut head = text()?;
                    let (schema, _) =
                        contain(file, || format.infer_schema(&mut head, Some(10_000)))?;
                    std::sync::Arc::new(schema)
                }
            };
            let text = text()?;
            let reader = contain(file, || {
                arrow_csv::ReaderBuilder::new(schema.clone())
                    .with_header(true)
                    .with_batch_size(BATCH_ROWS)
                    .build(text)
            })?;
            (schema, Box::new(reader))
        }
    };
    Ok((schema, Contained::boxed(batches, claimed_rows)))
}

/// Reads input files one after the other as one stream of batches of one schema.
///
/// ```no_run
/// use partout_io::{InputReader, discover};
/// let files = discover(&["data/".into()]).unwrap();
/// let mut reader = InputReader::try_new(files).unwrap();
/// for batch in &mut reader {
///     let batch = batch.unwrap();
///     println!("{} rows", batch.num_rows());
/// }
/// ```
pub struct InputReader {
    files: std::vec::IntoIter<InputFile>,
    schema: SchemaRef,
    current: Option<(PathBuf, Batches)>,
    failed: bool,
}

impl fmt::Debug for InputReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputReader")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl InputReader {
    /// A reader of `files`, in order; the first file's schema is the schema of all.
    ///
    /// # Errors
    /// [`IoError::Inputs`] for no files; [`IoError::File`] when the first file cannot be
    /// opened.
    pub fn try_new(files: Vec<InputFile>) -> Result<Self> {
        let mut files = files.into_iter();
        let first = files
            .next()
            .ok_or_else(|| IoError::Inputs("no input files".into()))?;
        let (schema, batches) = open(&first, None)?;
        Ok(Self {
            files,
            schema,
            current: Some((first.path, batches)),
            failed: false,
        })
    }

    /// The schema of every batch.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn next_file(&mut self) -> Result<bool> {
        let Some(file) = self.files.next() else {
            return Ok(false);
        };
        let (schema, batches) = open(&file, Some(&self.schema))?;
        if schema.fields() != self.schema.fields() {
            return Err(file_error(
                &file.path,
                format!(
                    "its schema {schema} differs from the first input's {}",
                    self.schema
                ),
            ));
        }
        self.current = Some((file.path, batches));
        Ok(true)
    }
}

impl Iterator for InputReader {
    type Item = Result<RecordBatch>;

    /// The next batch; after an error, nothing more.
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            if let Some((path, batches)) = &mut self.current {
                match batches.next() {
                    Some(Ok(batch)) => return Some(Ok(batch)),
                    Some(Err(e)) => {
                        self.failed = true;
                        return Some(Err(file_error(path, format!("reading failed: {e}"))));
                    }
                    None => self.current = None,
                }
            }
            match self.next_file() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

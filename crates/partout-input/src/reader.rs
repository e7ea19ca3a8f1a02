//! An input file opened as a stream of batches; and [`InputReader`], the files of one schema
//! read in order.

use crate::contain::{Batches, Contained, contain};
use crate::source::{self, InputFile};
use crate::{
    BATCH_ROWS, InputFormat, IoError, Result, file_error, file_io_error, ipc_file as ipc,
    parquet_footer,
};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use std::fmt;
use std::io::BufReader;
use std::path::PathBuf;

/// The metadata of a Parquet file, checked, and the file's length.
pub(crate) fn parquet_metadata(
    file: &InputFile,
) -> Result<(parquet::arrow::arrow_reader::ArrowReaderMetadata, u64)> {
    let (mut handle, len) = source::open(file)?;
    let metadata = contain(file, || parquet_footer::read_metadata(&mut handle, len))?;
    Ok((metadata, len))
}

/// An Arrow IPC file opened, its footer read.
pub(crate) fn ipc_file(
    file: &InputFile,
) -> Result<(SchemaRef, ipc::IpcFile<BufReader<source::Opened>>)> {
    let (handle, len) = source::open(file)?;
    contain(file, || ipc::IpcFile::try_new(BufReader::new(handle), len))
}

/// Opens one file as a stream of batches, with its schema. CSV files take `csv_schema` when
/// given, and infer one otherwise.
pub(crate) fn open(
    file: &InputFile,
    csv_schema: Option<&SchemaRef>,
) -> Result<(SchemaRef, Batches)> {
    let mut claimed_rows = None;
    let (schema, batches): (SchemaRef, Batches) = match file.format {
        InputFormat::Parquet => {
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
        InputFormat::IpcFile => {
            let (schema, reader) = ipc_file(file)?;
            (schema, Box::new(reader))
        }
        InputFormat::IpcStream => {
            let (handle, len) = source::open(file)?;
            let (schema, reader) = contain(file, || {
                ipc::IpcStream::try_new(BufReader::new(handle), len)
            })?;
            (schema, Box::new(reader))
        }
        InputFormat::Csv | InputFormat::CsvGzip | InputFormat::CsvZstd => {
            // The text, decompressed as it is read; opened anew after schema inference.
            let text = || -> Result<Box<dyn std::io::BufRead>> {
                let (handle, _) = source::open(file)?;
                Ok(match file.format {
                    InputFormat::CsvGzip => {
                        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(handle)))
                    }
                    InputFormat::CsvZstd => Box::new(BufReader::new(
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
/// use partout_input::{InputReader, discover};
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

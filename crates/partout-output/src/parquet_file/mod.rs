//! One Parquet file being written: [`ParquetFile`], the one way partout's outputs write
//! Parquet, whether a destination's file is written as the workers flush
//! ([`FlushedParquet`](crate::FlushedParquet)) or from its staged rows
//! ([`StagedFiles`](crate::StagedFiles)).
//!
//! ```text
//!  create(path, properties, pages?) ─► write(batch)… ─► [end_row_group] ─► end
//!     .NAME.partial, removed if dropped          footer ─► rows per row group, statistics
//! ```
//!
//! A file written as flushed keeps its finished pages in a [page file](pages) until their row
//! group ends, so its row groups are as large as a staged file's without holding them.

pub(crate) mod pages;

use crate::rollover::PartFile;
use crate::{DestinationFile, Partial, io_error, sink_error, statistics};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use pages::PageFile;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::file::properties::WriterProperties;
use partout_exchange::WriterError;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

/// A Parquet file of destination `p` being written under its hidden name (removed when
/// dropped before it is put in place).
pub(crate) struct ParquetFile {
    writer: ArrowWriter<File>,
    schema: SchemaRef,
    p: usize,
    rows: u64,
    /// The most rows a row group holds.
    max_row_group_rows: Option<usize>,
    partial: Partial,
}

impl ParquetFile {
    /// Creates destination `p`'s file at `path` for batches of `schema`, written with
    /// `properties`; its finished pages wait in `pages` until their row group ends, when
    /// given (else in memory, as the parquet crate holds them).
    pub(crate) fn create(
        p: usize,
        path: PathBuf,
        schema: SchemaRef,
        properties: &WriterProperties,
        pages: Option<PageFile>,
    ) -> Result<Self, WriterError> {
        let partial = Partial::new(path);
        let file = File::create(partial.path()).map_err(io_error(Some(p)))?;
        let mut options = ArrowWriterOptions::new().with_properties(properties.clone());
        if let Some(pages) = pages {
            options = options.with_page_store_factory(Arc::new(pages));
        }
        let writer = ArrowWriter::try_new_with_options(file, schema.clone(), options)
            .map_err(|e| sink_error(Some(p), e))?;
        Ok(Self {
            writer,
            schema,
            p,
            rows: 0,
            max_row_group_rows: properties.max_row_group_row_count(),
            partial,
        })
    }

    /// Writes `batch` (a row group ends when it reaches its limits).
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<(), WriterError> {
        self.writer
            .write(batch)
            .map_err(|e| sink_error(Some(self.p), e))?;
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// The bytes the writer holds in memory (its pages being filled, dictionaries, and the
    /// finished pages it keeps itself).
    pub(crate) fn memory_size(&self) -> usize {
        self.writer.memory_size()
    }

    /// Ends the open row group now.
    pub(crate) fn end_row_group(&mut self) -> Result<(), WriterError> {
        self.writer.flush().map_err(|e| sink_error(Some(self.p), e))
    }

    /// Ends the file: its last row group and its footer, read back for what the manifest
    /// records of it (rows per row group, and each column's statistics when `statistics`).
    /// The file is left under its hidden name, unnamed, for its caller to put in place.
    pub(crate) fn end(
        mut self,
        statistics: bool,
    ) -> Result<(Partial, DestinationFile), WriterError> {
        let metadata = self
            .writer
            .finish()
            .map_err(|e| sink_error(Some(self.p), e))?;
        let row_groups: Vec<u64> = metadata
            .row_groups()
            .iter()
            .map(|rg| rg.num_rows() as u64)
            .collect();
        let file = DestinationFile {
            name: String::new(),
            rows: self.rows,
            bytes: self.writer.bytes_written() as u64,
            columns: statistics.then(|| statistics::of_file(&self.schema, &metadata)),
            row_groups: Some(row_groups),
        };
        Ok((self.partial, file))
    }
}

impl PartFile for ParquetFile {
    fn rows(&self) -> u64 {
        self.rows
    }

    /// The row groups written and the writer's estimate of its open one.
    fn bytes(&self) -> u64 {
        (self.writer.bytes_written() + self.writer.in_progress_size()) as u64
    }

    fn row_group_room(&self) -> Option<u64> {
        let max = self.max_row_group_rows? as u64;
        Some(max.saturating_sub(self.writer.in_progress_rows() as u64))
    }
}

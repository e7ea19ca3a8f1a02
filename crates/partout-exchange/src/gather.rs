//! [`Gather`]: an output's small batches gathered into batches of a given row count.
//!
//! A [`Ready`](crate::Ready) writer under a tight budget hands each destination its rows a
//! few hundred at a time; a reader that wants batches of the session's size (DataFusion's
//! operators do) gathers them here, with arrow's `BatchCoalescer`, which copies each piece's
//! rows as it arrives, so the piece goes back to [`Spares`] at once for the writer to reuse its
//! buffers. One thing is done first: a view column holding less than half of its data buffers
//! is compacted into a buffer of exactly its strings' size. Given such a column, the coalescer
//! copies its strings into blocks that grow to 1 MiB and hands each block on with the batch it
//! was filling, so at hundreds of outputs nearly every gathered batch carried a fresh,
//! mostly-empty megabyte per string column: measured at 200 outputs, a third of the run went to
//! the kernel zeroing those pages. A compact column's buffers are referenced instead.

use crate::spares::Spares;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, SchemaRef};
use arrow_select::coalesce::BatchCoalescer;
use std::sync::Arc;

/// Batches gathered into batches of `batch_size` rows (the last one shorter).
#[derive(Debug)]
pub struct Gather {
    coalescer: BatchCoalescer,
    spares: Option<Arc<Spares>>,
}

impl Gather {
    /// Gathers batches of `schema` into batches of `batch_size` rows (at least 1).
    pub fn new(schema: SchemaRef, batch_size: usize) -> Self {
        Self {
            coalescer: BatchCoalescer::new(schema, batch_size.max(1)),
            spares: None,
        }
    }

    /// Gives each piece to `spares` once its rows are copied.
    pub fn with_spares(mut self, spares: Arc<Spares>) -> Self {
        self.spares = Some(spares);
        self
    }

    /// Gathers `batch`'s rows.
    ///
    /// # Errors
    /// Arrow's, from copying the rows (e.g. a data buffer past 4 GiB).
    pub fn push(&mut self, batch: RecordBatch) -> Result<(), ArrowError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        // Only the sparse view columns are replaced; the batch is rebuilt only if there are.
        let mut columns: Option<Vec<ArrayRef>> = None;
        for (i, column) in batch.columns().iter().enumerate() {
            if let Some(compacted) = compacted(column) {
                columns.get_or_insert_with(|| batch.columns().to_vec())[i] = compacted;
            }
        }
        let copy = match columns {
            Some(columns) => RecordBatch::try_new(batch.schema(), columns)?,
            None => batch.clone(),
        };
        self.coalescer.push_batch(copy)?;
        if let Some(spares) = &self.spares {
            spares.give(batch);
        }
        Ok(())
    }

    /// Rows held and not yet handed on.
    pub fn buffered_rows(&self) -> usize {
        self.coalescer.get_buffered_rows()
    }

    /// A batch of `batch_size` rows, when that many are held.
    pub fn next_batch(&mut self) -> Option<RecordBatch> {
        self.coalescer.next_completed_batch()
    }

    /// The rows held, as batches: one call after the last push.
    ///
    /// # Errors
    /// As [`Gather::push`].
    pub fn finish(&mut self) -> Result<(), ArrowError> {
        self.coalescer.finish_buffered_batch()
    }
}

/// `column`'s strings copied into one buffer of exactly their size, when it is a view column
/// whose data buffers are more than twice the strings they hold (the coalescer's own test for
/// copying them); `None` otherwise.
fn compacted(column: &ArrayRef) -> Option<ArrayRef> {
    fn sparse<T: arrow_array::types::ByteViewType>(
        array: &arrow_array::GenericByteViewArray<T>,
    ) -> bool {
        let held: usize = array.data_buffers().iter().map(|b| b.capacity()).sum();
        let used = array.total_buffer_bytes_used();
        used != 0 && held > used * 2
    }
    match column.data_type() {
        DataType::Utf8View => {
            let views = column.as_string_view();
            sparse(views).then(|| Arc::new(views.gc()) as ArrayRef)
        }
        DataType::BinaryView => {
            let views = column.as_binary_view();
            sparse(views).then(|| Arc::new(views.gc()) as ArrayRef)
        }
        _ => None,
    }
}

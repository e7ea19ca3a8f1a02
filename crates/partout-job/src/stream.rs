//! [`StreamInput`]: a stream of another library's batches as a job's input, read by the
//! workers in turn.

use crate::error::Result;
use std::sync::Mutex;

/// An input stream of batches, read by the workers in turn.
pub(crate) struct StreamInput(Mutex<Ahead>);

/// A stream and the batch read ahead of the workers, if one was.
struct Ahead {
    batch: Option<Result<arrow_array::RecordBatch, arrow_schema::ArrowError>>,
    rest: Box<dyn arrow_array::RecordBatchReader + Send>,
}

impl std::fmt::Debug for StreamInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamInput")
    }
}

impl StreamInput {
    pub(crate) fn new(reader: Box<dyn arrow_array::RecordBatchReader + Send>) -> Self {
        Self(Mutex::new(Ahead {
            batch: None,
            rest: reader,
        }))
    }

    /// The stream's first batch, read ahead: [`next`](Self::next) still gives it first.
    /// `None` at the stream's end or an error, which `next` gives.
    pub(crate) fn peek(&mut self) -> Option<arrow_array::RecordBatch> {
        let ahead = self.0.get_mut().unwrap_or_else(|e| e.into_inner());
        if ahead.batch.is_none() {
            ahead.batch = ahead.rest.next();
        }
        ahead.batch.as_ref()?.as_ref().ok().cloned()
    }

    /// The stream's next batch, or `None` at its end. A batch of more than
    /// [`BATCH_ROWS`](partout_input::BATCH_ROWS) rows is given in slices of that many (zero-copy),
    /// so that one large batch (a table of one chunk) is shared by every worker, as a file's
    /// frames are.
    pub(crate) fn next(
        &self,
    ) -> Option<Result<arrow_array::RecordBatch, arrow_schema::ArrowError>> {
        // A worker that panicked while reading left the stream where it was.
        let mut ahead = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let next = ahead.batch.take().or_else(|| ahead.rest.next());
        match next {
            Some(Ok(batch)) if batch.num_rows() > partout_input::BATCH_ROWS => {
                let rows = partout_input::BATCH_ROWS;
                ahead.batch = Some(Ok(batch.slice(rows, batch.num_rows() - rows)));
                Some(Ok(batch.slice(0, rows)))
            }
            next => next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StreamInput;
    use arrow_array::{Array, Int64Array, RecordBatch, RecordBatchIterator};
    use partout_input::BATCH_ROWS;
    use std::sync::Arc;

    fn batch(start: i64, rows: usize) -> RecordBatch {
        let ids = Int64Array::from_iter_values(start..start + rows as i64);
        RecordBatch::try_from_iter([("id", Arc::new(ids) as Arc<dyn Array>)]).unwrap()
    }

    /// A batch larger than a frame is given in slices of [`BATCH_ROWS`], so every worker
    /// shares it; the rows come once each, in order, the one read ahead included.
    #[test]
    fn a_large_batch_is_given_in_slices_every_row_once() {
        let big = 2 * BATCH_ROWS + 5;
        let batches = [batch(0, big), batch(big as i64, 7)];
        let schema = batches[0].schema();
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
        let mut input = StreamInput::new(Box::new(reader));
        assert_eq!(input.peek().map(|b| b.num_rows()), Some(big));
        let mut sizes = Vec::new();
        let mut next_id = 0;
        while let Some(batch) = input.next() {
            let batch = batch.unwrap();
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            for id in ids.values() {
                assert_eq!(*id, next_id);
                next_id += 1;
            }
            sizes.push(batch.num_rows());
        }
        assert_eq!(sizes, [BATCH_ROWS, BATCH_ROWS, 5, 7]);
    }
}

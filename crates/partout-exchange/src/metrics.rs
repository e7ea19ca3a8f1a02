//! [`WriterMetrics`]: what a [`PartitionedWriter`](crate::PartitionedWriter) did.

use std::time::Duration;

/// What a [`PartitionedWriter`](crate::PartitionedWriter) did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriterMetrics {
    /// Batches appended.
    pub batches: u64,
    /// Rows appended.
    pub rows_in: u64,
    /// Rows written to destinations (more than `rows_in` when rows are replicated).
    pub rows_out: u64,
    /// Bytes of row data taken in: appended to the buffers (values, offsets, validity), or
    /// with [`Flush::AllAtLimit`](crate::Flush::AllAtLimit) the held batches' Arrow data as
    /// arrow counts it (view columns count their views and every data buffer).
    pub bytes_in: u64,
    /// Encoded bytes handed to the sink.
    pub bytes_out: u64,
    /// Record batches encoded (one per destination flush).
    pub flushes: u64,
    /// Flushes forced by the memory limit.
    pub memory_flushes: u64,
    /// The most buffer memory held at once.
    pub peak_held_bytes: u64,
    /// Time computing partition ids.
    pub ids_time: Duration,
    /// Time moving rows into the buffers.
    pub scatter_time: Duration,
    /// Time building and encoding flushed batches.
    pub encode_time: Duration,
    /// Time in the byte sink (part of the output's time, where the output can tell it apart).
    pub sink_time: Duration,
    /// Rows each destination received.
    pub destination_rows: Vec<u64>,
    /// Bytes each destination received.
    pub destination_bytes: Vec<u64>,
}

impl WriterMetrics {
    /// Adds what a `later` writer did over the same destinations (the same output, taken over
    /// by another writer): counts and times summed, destination by destination; the peak is
    /// the larger of the two, as the writers held memory one after the other.
    pub fn add(&mut self, later: &WriterMetrics) {
        self.batches += later.batches;
        self.rows_in += later.rows_in;
        self.rows_out += later.rows_out;
        self.bytes_in += later.bytes_in;
        self.bytes_out += later.bytes_out;
        self.flushes += later.flushes;
        self.memory_flushes += later.memory_flushes;
        self.peak_held_bytes = self.peak_held_bytes.max(later.peak_held_bytes);
        self.ids_time += later.ids_time;
        self.scatter_time += later.scatter_time;
        self.encode_time += later.encode_time;
        self.sink_time += later.sink_time;
        for (to, from) in [
            (&mut self.destination_rows, &later.destination_rows),
            (&mut self.destination_bytes, &later.destination_bytes),
        ] {
            if to.len() < from.len() {
                to.resize(from.len(), 0);
            }
            for (t, f) in to.iter_mut().zip(from) {
                *t += f;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_writers_metrics_add_destination_by_destination() {
        let mut before = WriterMetrics {
            rows_in: 5,
            flushes: 2,
            peak_held_bytes: 100,
            scatter_time: Duration::from_millis(3),
            destination_rows: vec![1, 4],
            destination_bytes: vec![10, 40],
            ..WriterMetrics::default()
        };
        let later = WriterMetrics {
            rows_in: 7,
            flushes: 1,
            peak_held_bytes: 60,
            scatter_time: Duration::from_millis(4),
            destination_rows: vec![2, 0, 5],
            destination_bytes: vec![20, 0, 50],
            ..WriterMetrics::default()
        };
        before.add(&later);
        assert_eq!(before.rows_in, 12);
        assert_eq!(before.flushes, 3);
        assert_eq!(before.peak_held_bytes, 100);
        assert_eq!(before.scatter_time, Duration::from_millis(7));
        assert_eq!(before.destination_rows, [3, 4, 5]);
        assert_eq!(before.destination_bytes, [30, 40, 50]);
    }
}

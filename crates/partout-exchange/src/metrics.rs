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

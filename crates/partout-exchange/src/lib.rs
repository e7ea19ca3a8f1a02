//! partout-exchange: partitioned output, from input batches to each destination's bytes.
//!
//! [`PartitionedWriter`] takes batches, computes each row's destination, appends the rows to
//! per-destination column buffers and, when a destination's buffer reaches its flush target,
//! hands the destination's rows as one batch to a [`BatchSink`]. The usual one, [`Encoded`],
//! encodes it as the next record batch of the destination's Arrow IPC stream (or as a Presto
//! page; see [`partout_format::Encoding`]) and passes the bytes to a [`Sink`]: [`MemorySink`]
//! keeps each destination's bytes; [`FileSink`] writes one file per destination into a
//! directory, under temporary names until [`Sink::finish`] renames them, so an interrupted run
//! never leaves files that look complete. Other batch sinks (a Parquet file per destination,
//! files shared by several writers) live in `partout-output`.
//!
//! Modules, each with one job: `options` (what the writer may hold and when it flushes),
//! `writer` (the writer and the [`BatchSink`] it flushes to), `metrics`, `encoded` (the
//! encoding batch sink), `sink` (byte sinks), `gather` (small batches into batches of a size,
//! for readers that want them), `error`.

#![forbid(unsafe_code)]

pub mod bounded;
mod encoded;
mod error;
mod gather;
mod metrics;
mod options;
mod ready;
mod sink;
mod spares;
mod writer;

pub use bounded::{
    Account, BoundedExchange, BoundedOptions, Cause, ExchangeError, ExchangeMetrics, Fetched, Item,
    OutputStatus, SpillMetrics, SpillTarget, spill_batch, unspill_batch,
};
pub use encoded::Encoded;
pub use error::{Result, WriterError};
pub use gather::Gather;
pub use metrics::WriterMetrics;
pub use options::{Flush, SLICES_FROM, WriterOptions};
pub use ready::{Ready, ReadyBatch};
pub use sink::{FileSink, MemorySink, Sink};
pub use spares::Spares;
pub use writer::{BatchSink, Flushed, PartitionedWriter, SinkCapabilities, SinkClock};

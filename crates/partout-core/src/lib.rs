//! partout-core: the kernels of a repartitioning engine for Apache Arrow.
//!
//! ```text
//!  RecordBatch + ids ──► ScatterPlan ──► scatter (per column) ──► PartitionedBatch
//!                        (histogram,      (one pass per column,     (rows grouped by
//!                         offsets, order)  every Arrow layout)       destination)
//! ```
//!
//! * [`ids`] computes a destination per row from key columns: a fast hash, Spark's exact
//!   Murmur3, round-robin, single, or ids given in a column.
//! * [`ScatterPlan`] counts the rows of each destination and computes, once per batch, where
//!   every row goes (a counting sort, with a virtual fan-out for few destinations).
//! * [`scatter_column`] moves one column by a plan, with one kernel per physical layout.
//! * [`Partitioner`] does both for a whole batch with reusable scratch and returns a
//!   [`PartitionedBatch`], whose destinations are zero-copy slices.
//!
//! No IO, no threads: callers own both.

pub mod error;
pub mod ids;
pub mod plan;
pub mod scatter;

pub use error::{PartoutError, Result};
pub use plan::ScatterPlan;
pub use scatter::batch::{PartitionedBatch, Partitioner, partition_each};
pub use scatter::{
    DestinationBuffers, GatheredBatch, MAX_MERGED, OutputBuilder, ScatterScratch, scatter_column,
    scatter_columns,
};

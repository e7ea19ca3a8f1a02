//! The native module of the `partout` Python package (`partout._partout`): partition ids and
//! the partitioning of Arrow data that arrives through the Arrow PyCapsule interface (anything
//! with `__arrow_c_array__` or `__arrow_c_stream__`: pyarrow, polars, DuckDB, ...).
//!
//! ```text
//!  data ──C stream──► batch by batch, the GIL released ─► ids ─► Partitioner ─► slices
//!                                                                       n pyarrow Tables ◄─┘
//! ```
//!
//! Input batches are read through the C data interface without a copy; each is laid out by
//! destination once (one copy of every row), and every destination's table is made of
//! zero-copy slices of those reordered batches, a chunk per input batch that sent it rows.
//! (Moving every destination's rows into buffers of its own instead, one chunk per table,
//! measured slower: the buffers grow by doubling.) Errors are raised as the classes of
//! `partout.errors`, by kind.
//!
//! By area: `partition` (`partition`, `partition_ids`), `job` (`repartition`, `write_dataset`), `read`
//! (`read`), `writer` (`PartitionedWriter`), `errors` (the exception of each error).

#![forbid(unsafe_code)]

mod errors;
mod job;
mod partition;
mod read;
mod writer;

use pyo3::prelude::*;

// The system's allocator, not mimalloc as in the CLI: mimalloc kept memory freed across
// threads, and `write_dataset` from a stream at a 64 MiB limit peaked 156 MiB over reading the
// stream alone (80 with its pages purged at once), where glibc's stays within twice the limit.
// It made `partition` a quarter faster (0.52 s against 0.69 s at 200 parts, SF 1): the
// promise of memory wins.

/// The native module: `partout._partout`.
#[pymodule]
fn _partout(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(partition::partition, module)?)?;
    module.add_function(wrap_pyfunction!(partition::partition_ids, module)?)?;
    module.add_function(wrap_pyfunction!(job::repartition, module)?)?;
    module.add_function(wrap_pyfunction!(job::write_dataset, module)?)?;
    module.add_function(wrap_pyfunction!(read::read, module)?)?;
    module.add_class::<writer::PartitionedWriter>()?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

//! partout-plots: the figures of BENCHMARKS.md and the README, drawn as SVG from the JSON the
//! benchmarks print.
//!
//! | figure | from | shows |
//! |---|---|---|
//! | `writer.svg` | `partout bench writer --json`, one run per destination count | ns per row against destinations, uncompressed and LZ4, partout beside each peer and the floor |
//! | `files.svg` | `bench/e2e.py --json`, one file per destination count | seconds and peak memory against destinations, partout beside DuckDB and Polars |
//! | `cluster.svg` | `partout-ballista`'s `cluster` example's `--json` | the 22 TPC-H queries' seconds and bytes over the links against the link rate, partout (LZ4, ZSTD(1)) beside Ballista's own writer |
//! | `scatter.svg` | `partout bench scatter --json` | arrow's grouped take ÷ partout against destinations, per column kind |
//! | `partition_by.svg` | `bench/partition_by.py --json` | seconds and peak memory per partition key (its distinct values), bars of partout beside DuckDB, Polars and pyarrow |
//! | `object_store.svg` | `bench/object_store.py` (its `object_store.json`, in `partition_by.json`'s form with a `title`) | the same bars, partitioning by value into an S3 server on loopback |
//!
//! A figure holds the results of one machine only: results from two CPUs in one figure are
//! refused, since their ratios cannot be compared.

//!
//! A module per figure loads its results into a [`Figure`] (`writer`, `files`, `cluster`,
//! `scatter`, `partition_by`), on the pieces every figure shares (`figure`); [`draw`] (`svg`)
//! writes any figure, its panels drawn as lines (`lines`) or grouped bars (`bars`).

#![forbid(unsafe_code)]

mod bars;
mod cluster;
mod figure;
mod files;
mod lines;
mod partition_by;
#[cfg(test)]
mod samples;
mod scatter;
mod style;
mod svg;
mod writer;

pub use cluster::cluster_figure;
pub use figure::{Figure, Panel, Series};
pub use files::files_figure;
pub use partition_by::partition_by_figure;
pub use scatter::scatter_figure;
pub use svg::draw;
pub use writer::writer_figure;

//! partout-bench: the benchmark suites and the demo behind `partout bench <suite>` and
//! `partout demo`. Each suite times partout beside the honest baseline, in the same run and in
//! alternation ([`harness::alternate`]), on seeded or generated data, and prints a table or
//! one JSON object per line ([`report`]).
//!
//! | module     | suite                                                                  |
//! |------------|------------------------------------------------------------------------|
//! | [`scatter`] | the scatter kernels on Velox's PartitionedVectorBenchmark matrix      |
//! | [`ids`]     | partition ids beside DataFusion 55's foldhash ids and a plain Murmur3 |
//! | [`plan`]    | the scatter plan alone, for every fan-out                              |
//! | [`writer`]  | the partitioned writer on TPC-H lineitem beside DataFusion's and Comet's ways |
//! | [`presto`]  | lineitem encoded as Presto pages beside Arrow IPC                     |
//! | [`e2e`]     | lineitem as Parquet repartitioned into N Parquet files, at each thread count |
//! | [`demo`]    | the main job on built-in data, in memory and on disk                  |
//!
//! Each suite has its options (`clap::Args`, embedded by the command line) and a `run`.
//! Errors are `anyhow`: like the binary's, they end a run with a message for a person.

#![forbid(unsafe_code)]

pub mod demo;
pub mod e2e;
pub mod exchange;
pub mod fingerprint;
pub mod harness;
pub mod ids;
mod lineitem;
pub mod plan;
pub mod presto;
pub mod report;
pub mod scatter;
pub mod writer;

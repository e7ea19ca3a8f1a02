//! Integration tests of partout-output: shuffle files, Parquet files written as flushed and
//! from staged rows, the write modes, sorted runs merged per destination, the fuzzers' seeds
//! read back whole, and the fuzzers' committed inputs replayed.
//!
//! The binary's allocator aborts on any allocation of more than 256 MiB (`capped.rs`): no test
//! reads anything near that, so such an allocation is a reader trusting a length a damaged
//! file claims.

mod flushed;
mod fuzz_corpus;
mod modes;
mod seeds;
mod shuffle;
mod sorted_runs;
mod staged;

#[path = "../../../partout-input/tests/it/capped.rs"]
mod capped;

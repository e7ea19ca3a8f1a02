//! Integration tests of partout-input: inputs of every format, alone and in directories,
//! frames, and damaged files read as errors naming the file.
//!
//! The binary's allocator aborts on any allocation of more than 256 MiB (`capped.rs`): no test
//! reads anything near that, so such an allocation is a reader trusting a length a damaged
//! file claims.

mod capped;
mod damaged;
mod inputs;

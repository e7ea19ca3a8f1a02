//! parquet 59.3.2 (arrow-rs) with partout's changes to its encoder, compiled from parquet's
//! published source with `patches/parquet-59-encoder.patch` applied (by `build.rs`). Its API
//! is `parquet`'s, and the files it writes are byte for byte the ones stock parquet writes;
//! what the patch changes, and why, is in `patches/README.md`.
//!
//! partout-output writes every Parquet file through this crate (it names it `parquet`);
//! everything else in the workspace reads with stock parquet, and this crate's tests hold what
//! it writes to stock parquet's reader and writer.

// parquet's code, as published: its lints are its own.
#![allow(warnings, clippy::all, clippy::pedantic, unexpected_cfgs, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/parquet/src/lib.rs"));

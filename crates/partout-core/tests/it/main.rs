//! Integration tests of partout-core: every kernel held to the naive reference partitioner.

mod alloc;
mod buffers;
mod ids;
mod oracle;
mod shared;
mod spark;
mod spark_nested;
mod spec;

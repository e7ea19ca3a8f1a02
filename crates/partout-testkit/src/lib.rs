//! partout-testkit: seeded Arrow data for every type partout handles, and naive reference
//! implementations to hold the real kernels to.
//!
//! * [`every_type`] lists the types the scatter supports, nested ones at depth 2 and more.
//! * [`random_array`] / [`random_batch`] make seeded data of any of them, with a chosen null
//!   density and, on request, a non-zero offset.
//! * [`random_ids`] makes partition ids: uniform, in runs, or all to one destination.
//! * [`reference_partition`] is the oracle: one arrow `take` per destination, obviously right.
//! * [`fast_hash`] is partout's fast hash written again row by row, the reference of its
//!   hash partitioning; [`fingerprint`] what each destination must hold, schema and rows.
//! * [`baseline`] holds the peers' ways of doing the same job, for benchmarks;
//!   [`workload`] the benchmark matrix.
//! * [`netns`] is a virtual cluster of network hosts (Linux network namespaces on a bridge,
//!   links shaped or cut) for the tests that cross a network.

#![forbid(unsafe_code)]

pub mod baseline;
pub mod fast_hash;
pub mod fingerprint;
mod generators;
pub mod netns;
mod oracle;
mod types;
pub mod workload;

pub use generators::{
    IdPattern, TestRng, batch_of, random_array, random_batch, random_ids, random_nulls,
    random_sliced_array, rng, sample_batch,
};
pub use oracle::{
    assert_same_rows, check_ipc_outputs, error_chain, random_inputs, reference_partition,
    with_id_column, with_ids,
};
pub use types::{every_type, flat_types, nested_types, presto_carries, run_end_encoded};

/// The machine a benchmark runs on, for its report: the CPU's model name, family and model,
/// and the threads available (`AMD EPYC, family 25 model 17, 2 threads`).
pub fn machine() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_string())
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    match (field("model name"), field("cpu family"), field("model")) {
        (Some(name), Some(family), Some(model)) => {
            format!("{name}, family {family} model {model}, {threads} threads")
        }
        (Some(name), _, _) => format!("{name}, {threads} threads"),
        _ => format!("unknown CPU, {threads} threads"),
    }
}

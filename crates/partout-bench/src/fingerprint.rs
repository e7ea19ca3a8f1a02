//! The benchmarks' check of every contender's output ([`partout_testkit::fingerprint`]):
//! what it must have written, computed from the input by the reference partitioner of its
//! scheme, against what it wrote, decoded.

use anyhow::{Context, Result, anyhow};
use arrow_array::RecordBatch;
use partout_core::ids::{PartitionIds, Partitioning};
use partout_testkit::baseline::DataFusionHash;
use partout_testkit::fingerprint::{self as prints, Fingerprint};

/// The partitioner whose destinations a contender's output must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// partout's fast hash of the first column (`Partitioning::hash`).
    PartoutHash,
    /// DataFusion 55's hash of the first column, `% n` (its `RepartitionExec`'s ids).
    DataFusionHash,
}

/// What `n` destinations must hold of `batches` partitioned by `reference`.
///
/// # Errors
/// A column the fingerprint cannot encode, or ids that cannot be computed.
pub fn expected(batches: &[RecordBatch], reference: Reference, n: u32) -> Result<Vec<Fingerprint>> {
    let Some(first) = batches.first() else {
        return Ok(vec![(0, 0); n as usize]);
    };
    match reference {
        Reference::PartoutHash => {
            let mut ids = PartitionIds::try_new(Partitioning::hash(vec![0], n), &first.schema())?;
            prints::expected(batches, n, |batch, out| -> Result<()> {
                Ok(ids.compute(batch, out)?)
            })
        }
        Reference::DataFusionHash => {
            let mut hash = DataFusionHash::new();
            prints::expected(batches, n, |batch, out| -> Result<()> {
                hash.ids(batch, &[0], n, out);
                Ok(())
            })
        }
    }
}

/// What each destination's Arrow IPC stream in `outputs` holds.
///
/// # Errors
/// A stream that does not decode.
pub fn of_streams(outputs: &[Vec<u8>]) -> Result<Vec<Fingerprint>> {
    outputs
        .iter()
        .enumerate()
        .map(|(p, bytes)| {
            let (_, batches) = partout_format::ipc::decode_stream(bytes)
                .with_context(|| format!("decoding destination {p}"))?;
            Ok(prints::of_batches(&batches)?)
        })
        .collect()
}

/// An error naming `who` and the first destination whose rows differ from `expected`.
///
/// # Errors
/// That destination.
pub fn check(who: &str, expected: &[Fingerprint], got: &[Fingerprint]) -> Result<()> {
    prints::check(who, expected, got).map_err(|e| anyhow!(e))
}

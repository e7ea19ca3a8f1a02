//! [`Budget`]: how a job shares its memory limit between what destinations cost whatever
//! their rows, open Parquet row groups, and each worker's buffered rows.

use crate::error::{JobError, Result};
use serde::{Deserialize, Serialize};

/// Bytes each destination costs each worker whatever its rows: its buffers' bookkeeping, its
/// stream encoder (measured: about 2 KiB with two workers, 10,000 destinations).
const DESTINATION_BYTES: u64 = 2 << 10;

/// Bytes an open Parquet destination file holds outside its row group: a buffered writer and
/// the metadata of the row groups written.
const PARQUET_FILE_BYTES: u64 = 24 << 10;

/// The least memory a Parquet destination's open row group is given: smaller row groups make
/// files of mostly metadata, and metadata that the writer holds until the end.
const MIN_ROW_GROUP_BYTES: u64 = 64 << 10;

/// The most memory a Parquet destination's open row group is given.
const MAX_ROW_GROUP_BYTES: u64 = 128 << 20;

/// A Parquet writer's memory over its own estimate of its open row group (encoder buffers'
/// spare capacity, the copy made while a row group is written out).
const ROW_GROUP_OVERHEAD: u64 = 3;

/// The least each worker's buffers are given.
const MIN_WORKER_BYTES: u64 = 256 << 10;

/// How the memory limit is shared (recorded in the manifest as `memory_budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// What destinations cost whatever their rows.
    #[serde(rename = "destinations_fixed")]
    pub fixed: u64,
    /// Open Parquet row groups, all destinations together (zero for other outputs).
    #[serde(rename = "parquet_row_groups")]
    pub row_groups: u64,
    /// Each worker's buffered rows.
    #[serde(rename = "per_worker_buffers")]
    pub per_worker: u64,
}

impl Budget {
    /// Shares `memory_limit` for `partitions` destinations written by `workers` workers:
    /// first what destinations cost whatever their rows; for Parquet files
    /// (`parquet_files`), half of the rest for open row groups (rows are encoded as they are
    /// flushed, and a row group is written when it holds its share); of what is left, three
    /// fifths for the workers' buffered rows, the rest for flushes being encoded and the
    /// allocator's slack.
    ///
    /// # Errors
    /// [`JobError::InvalidOption`] when the limit cannot cover the least the job needs,
    /// saying how much that is.
    pub fn try_new(
        memory_limit: u64,
        partitions: u32,
        workers: usize,
        parquet_files: bool,
    ) -> Result<Self> {
        let n = u64::from(partitions);
        let threads = workers as u64;
        let fixed = n * threads * DESTINATION_BYTES
            + if parquet_files {
                n * PARQUET_FILE_BYTES
            } else {
                0
            };
        let least_row_groups = if parquet_files {
            n * MIN_ROW_GROUP_BYTES * ROW_GROUP_OVERHEAD
        } else {
            0
        };
        let minimum = fixed + least_row_groups + threads * MIN_WORKER_BYTES;
        if memory_limit < minimum {
            return Err(JobError::InvalidOption(format!(
                "a memory limit of {memory_limit} bytes is too small for {n} destinations and {workers} threads: it takes at least {minimum} bytes{}",
                if parquet_files {
                    " (Parquet files need room for a row group each; the shuffle layout does not)"
                } else {
                    ""
                }
            )));
        }
        let rest = memory_limit - fixed;
        let row_groups = if parquet_files {
            (rest / 2).max(least_row_groups)
        } else {
            0
        };
        let per_worker = (rest - row_groups) * 3 / 5 / threads;
        Ok(Self {
            fixed,
            row_groups,
            per_worker,
        })
    }

    /// Memory each Parquet destination's open row group may hold, by the writer's own
    /// estimate (between 64 KiB and 128 MiB).
    pub fn row_group_bytes(&self, partitions: u32) -> usize {
        (self.row_groups / u64::from(partitions) / ROW_GROUP_OVERHEAD)
            .clamp(MIN_ROW_GROUP_BYTES, MAX_ROW_GROUP_BYTES) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_stay_within_the_limit() {
        for (limit, n, workers, parquet) in [
            (256u64 << 20, 64u32, 2usize, true),
            (256 << 20, 10_000, 2, false),
            (64 << 20, 1000, 8, false),
            (1 << 30, 1, 1, true),
        ] {
            let budget = Budget::try_new(limit, n, workers, parquet).unwrap();
            let used = budget.fixed + budget.row_groups + budget.per_worker * workers as u64;
            assert!(used <= limit, "{budget:?} over {limit}");
            assert!(budget.per_worker >= MIN_WORKER_BYTES * 3 / 5, "{budget:?}");
            assert_eq!(budget.row_groups > 0, parquet);
        }
    }

    #[test]
    fn a_limit_too_small_says_how_much_it_takes() {
        let err = Budget::try_new(1 << 20, 10_000, 2, true).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("too small") && text.contains("10000 destinations"),
            "{text}"
        );
        assert!(text.contains("row group"), "{text}");
    }
}

//! [`BudgetExt`]: how a job shares its memory limit between what destinations cost whatever
//! their rows, each worker's buffered rows, and, for Parquet files, the open row groups of
//! the files being written once the rows are staged.

use crate::error::{JobError, Result};
use partout_output::manifest::Budget;

/// Bytes each destination costs each worker whatever its rows: its buffers' bookkeeping, its
/// stream encoder (measured: about 2 KiB with two workers, 10,000 destinations).
const DESTINATION_BYTES: u64 = 2 << 10;

/// Bytes each destination costs each worker that spills sorted runs: its rows and bytes
/// counted by the writer (16), its rows in the run being spilled (16), its place in the
/// writer's plan (16), its output's bookkeeping. No buffers of its own: the worker holds whole
/// batches. Measured: about 56 bytes at 100,000 destinations (`tests/value_memory.rs`).
const SORTED_DESTINATION_BYTES: u64 = 80;

/// Bytes each destination allowed costs each worker that buffers rows before the destination
/// is met: its place in the destination buffers (48: its column buffers come with its first
/// rows), its flush target, its rows and bytes in the writer's metrics, and its share of the
/// output's slots. Batches held laid out by destination carry offsets for the destinations
/// met, not those allowed. Measured with one value met of 1,000 against 20,000 and 100,000
/// allowed in 64 and 256 MiB (`tests/value_memory.rs`'s allocator): 204-365 bytes a value
/// for both workers together; charged with room to spare.
const UNMET_DESTINATION_BYTES: u64 = 256;

/// Partitioning by value, the fewest destinations worth buffering before workers turn to
/// sorted runs: below, they spill sorted runs from the start.
const MIN_BUFFERED_DESTINATIONS: u64 = 64;

/// Below this share of a worker's buffers per destination, flushed messages would hold a few
/// rows each: workers hold whole batches instead and spill them as sorted runs, merged at
/// the end (`partout_output::SortedRuns`).
const SORTED_RUNS_BELOW: u64 = 32 << 10;

/// [`SORTED_RUNS_BELOW`] for files written whole from staged rows (Parquet files): flushed
/// messages are staged, read back and gathered before they are encoded, so a small message
/// costs its header in the scratch file, not in the output. Measured on lineitem SF 1 into
/// Parquet by value, 2 threads, 256 MiB, AMD EPYC family 26 model 2: at 2,526 values (13 KiB a
/// destination) buffered 3.45 s against sorted runs 5.0 s; at 10,000 (3.3 KiB) buffered
/// 5.8 s against 4.95 s.
const STAGED_SORTED_RUNS_BELOW: u64 = 8 << 10;

/// Bytes each Parquet destination costs while the files are written, once the workers are
/// done: its file's name (about 60), its result (about 90), its manifest entry (about 80),
/// its place in the writing order.
const PARQUET_DESTINATION_BYTES: u64 = 256;

/// Bytes each Parquet destination costs per worker while the files are written: its runs in
/// the worker's scratch file (32: one, once merged from sorted runs), its rows and bytes in
/// the worker's metrics (16).
const PARQUET_WORKER_DESTINATION_BYTES: u64 = 48;

/// The least memory a Parquet writer's open row group is given: smaller row groups make files
/// of mostly metadata.
const MIN_ROW_GROUP_BYTES: u64 = 1 << 20;

/// The most memory a Parquet writer's open row group is given (the row count, 1Mi rows,
/// usually ends a row group first).
const MAX_ROW_GROUP_BYTES: u64 = 256 << 20;

/// A Parquet writer's memory over its estimate of its open row group's encoded size: pages
/// being filled (up to 1 MiB a column), dictionaries and their hash tables, the run being
/// decoded and the batch being gathered.
const ROW_GROUP_OVERHEAD: u64 = 2;

/// The least each worker's buffers are given.
const MIN_WORKER_BYTES: u64 = 256 << 10;

/// The share of what is left for buffers and writers that Parquet writers open while the
/// workers run may take, at most (two thirds): the rest is the workers' buffers.
const DIRECT_WRITERS_SHARE: (u64, u64) = (2, 3);

/// The least a worker's buffers give each destination when files are written as flushed:
/// smaller flushes reach the Parquet writer as batches of a few hundred rows, each write a
/// cost per column.
const DIRECT_MIN_FLUSH_BYTES: u64 = 64 << 10;

/// How a job shares its memory limit: [`Budget`]'s shares, worked out for a job (the
/// [`Budget`] itself, as the manifest records it, is partout-output's).
///
/// ```
/// use partout_job::{Budget, BudgetExt};
///
/// let budget = Budget::try_new(256 << 20, 64, 2, true)?;
/// assert!(budget.row_group_bytes(2) >= 1 << 20);
/// # Ok::<(), partout_job::JobError>(())
/// ```
pub trait BudgetExt: Sized {
    /// Shares `memory_limit` for `partitions` destinations written by `workers` workers:
    /// first what destinations cost whatever their rows; of the rest, three fifths for the
    /// workers' buffered rows, the remainder for flushes being encoded and the allocator's
    /// slack. Parquet files (`parquet_files`) are written after the rows are staged, when the
    /// workers' buffers are gone: their open row groups, one per thread, get the same three
    /// fifths. When each destination's share of a worker's buffers would be under 32 KiB
    /// (8 KiB for Parquet files, whose flushes are staged), workers spill sorted runs
    /// instead, and destinations cost less
    /// ([`sorted_runs`](Budget::sorted_runs)).
    ///
    /// # Errors
    /// [`JobError::InvalidOption`] when the limit cannot cover the least the job needs,
    /// saying how much that is.
    fn try_new(
        memory_limit: u64,
        partitions: u32,
        workers: usize,
        parquet_files: bool,
    ) -> Result<Self>;

    /// As [`try_new`](Self::try_new) for destinations discovered as the input is read
    /// (partitioning by value: `allowed` may be met, few may be): where buffering all of them
    /// would leave each under the share that makes buffering pay, the workers buffer the
    /// first destinations met, as many as keep that share
    /// ([`sorted_runs_past`](Budget::sorted_runs_past)), and turn to sorted runs
    /// only if more are met. A destination not met costs a worker
    /// 512 bytes, not the 2 KiB of one met: what is charged is what is met.
    ///
    /// # Errors
    /// As [`try_new`](Self::try_new).
    fn try_discovered(
        memory_limit: u64,
        allowed: u32,
        workers: usize,
        parquet_files: bool,
    ) -> Result<Self>;

    /// The encoded size at which each of `threads` Parquet writers ends its open row group
    /// (between 1 MiB and 256 MiB).
    fn row_group_bytes(&self, threads: usize) -> usize;

    /// Shares `memory_limit` for `partitions` Parquet files written as they are flushed by
    /// `workers` workers, each file's writer open from its first flush and planned at
    /// `writer_bytes`: the writers together ([`parquet_writers_open`](Budget::parquet_writers_open)) and
    /// the workers' buffers share the three fifths that [`try_new`](Self::try_new) gives the
    /// buffers alone. `None` when the writers would take more than two thirds of it, or
    /// leave each destination under 64 KiB of a worker's buffers: then rows are staged.
    ///
    /// With [`Discovered`] destinations (partitioning by value: `partitions` is how many may
    /// be met, not how many will), the writers take at most a third of it, as many as fit,
    /// for the first destinations met; those met past them are staged. Where that would
    /// leave each possible destination under 16 KiB of a worker's buffers, destinations are
    /// charged as met, as [`try_discovered`](Self::try_discovered) charges them: the workers
    /// buffer as many past the writers as keep 16 KiB each
    /// ([`sorted_runs_past`](Budget::sorted_runs_past)) and turn to sorted runs past
    /// them, but only when every destination of the input's first rows
    /// ([`Discovered::sampled`]) gets a writer. `None` otherwise, or with room for fewer than
    /// two writers: then [`try_discovered`](Self::try_discovered)'s staged budget gives more
    /// values a useful share (lineitem by `l_shipdate`, 2,526 values, Intel Xeon: written as
    /// flushed at 10 KiB a value 8.6 s, staged at 15 KiB 6.2 s).
    fn flushed_parquet(
        memory_limit: u64,
        partitions: u32,
        workers: usize,
        writer_bytes: u64,
        discovered: Option<Discovered>,
    ) -> Option<Self>;
}

impl BudgetExt for Budget {
    fn try_new(
        memory_limit: u64,
        partitions: u32,
        workers: usize,
        parquet_files: bool,
    ) -> Result<Self> {
        let n = u64::from(partitions);
        let buffered = share(memory_limit, n, n, workers, parquet_files, false);
        match buffered {
            Ok(budget) if pays(&budget, n, parquet_files) => Ok(budget),
            _ => share(memory_limit, n, n, workers, parquet_files, true),
        }
    }

    fn try_discovered(
        memory_limit: u64,
        allowed: u32,
        workers: usize,
        parquet_files: bool,
    ) -> Result<Self> {
        let all = Self::try_new(memory_limit, allowed, workers, parquet_files)?;
        if !all.sorted_runs {
            return Ok(all);
        }
        let first = |met: u64| {
            share(
                memory_limit,
                u64::from(allowed),
                met,
                workers,
                parquet_files,
                false,
            )
            .ok()
            .filter(|b| pays(b, met, parquet_files))
        };
        Ok(most_met(u64::from(allowed), first)
            .and_then(|met| first(met).map(|b| (met, b)))
            .map_or(all, |(met, budget)| Budget {
                sorted_runs_past: met,
                ..budget
            }))
    }

    fn row_group_bytes(&self, threads: usize) -> usize {
        (self.parquet_row_groups / threads.max(1) as u64 / ROW_GROUP_OVERHEAD)
            .clamp(MIN_ROW_GROUP_BYTES, MAX_ROW_GROUP_BYTES) as usize
    }

    fn flushed_parquet(
        memory_limit: u64,
        partitions: u32,
        workers: usize,
        writer_bytes: u64,
        discovered: Option<Discovered>,
    ) -> Option<Self> {
        let allowed = u64::from(partitions.max(1));
        let plan = |buffered: u64| {
            flushed_plan(
                memory_limit,
                allowed,
                buffered,
                workers,
                writer_bytes,
                discovered.is_some(),
            )
        };
        if let Some(every) = plan(allowed) {
            return Some(every);
        }
        // Charged as met: the first destinations met buffered, sorted runs past them.
        let sampled = discovered?.sampled;
        let met = most_met(allowed, plan)?;
        plan(met)
            .filter(|b| sampled.saturating_mul(writer_bytes) <= b.parquet_writers_open)
            .map(|b| Budget {
                sorted_runs_past: met,
                ..b
            })
    }
}

/// Partitioning by value, what the input's first rows tell [`BudgetExt::flushed_parquet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Discovered {
    /// Destinations met in the input's first rows.
    pub sampled: u64,
}

/// [`BudgetExt::flushed_parquet`] for `allowed` destinations of which the first `buffered` met are
/// buffered (charged as met), `discovered` or not.
fn flushed_plan(
    memory_limit: u64,
    allowed: u64,
    buffered: u64,
    workers: usize,
    writer_bytes: u64,
    discovered: bool,
) -> Option<Budget> {
    let threads = workers.max(1) as u64;
    // The workers' bookkeeping, and what the files cost once written (as staged).
    let fixed = workers_fixed(allowed, buffered, threads, false)
        .max(allowed * (PARQUET_DESTINATION_BYTES + threads * PARQUET_WORKER_DESTINATION_BYTES));
    let share = memory_limit.checked_sub(fixed)? * 3 / 5;
    let all = allowed.saturating_mul(writer_bytes);
    let (writers, least_flush) = match discovered {
        false if all.saturating_mul(DIRECT_WRITERS_SHARE.1) > share * DIRECT_WRITERS_SHARE.0 => {
            return None;
        }
        false => (all, DIRECT_MIN_FLUSH_BYTES),
        true => (all.min(share / 3), 2 * STAGED_SORTED_RUNS_BELOW),
    };
    if writers < writer_bytes.min(all).saturating_mul(2) {
        return None;
    }
    let per_worker = (share - writers) / threads;
    if per_worker / (2 * buffered) < least_flush {
        return None;
    }
    Some(Budget {
        destinations_fixed: fixed,
        // Destinations met past the writers are staged, and written once the writers are
        // closed.
        parquet_row_groups: share,
        per_worker_buffers: per_worker,
        sorted_runs: false,
        parquet_writers_open: writers,
        sorted_runs_past: 0,
    })
}

/// Whether buffering `n` destinations under `budget` gives each the share that makes it pay
/// (32 KiB of a worker's buffers; 8 KiB for Parquet files, whose flushes are staged).
fn pays(budget: &Budget, n: u64, parquet_files: bool) -> bool {
    let below = match parquet_files {
        true => STAGED_SORTED_RUNS_BELOW,
        false => SORTED_RUNS_BELOW,
    };
    budget.per_worker_buffers / (2 * n.max(1)) >= below
}

/// The most destinations, fewer than `allowed` and at least [`MIN_BUFFERED_DESTINATIONS`],
/// for which `plan` gives a budget (it gives one for fewer whenever it does for more).
fn most_met<T>(allowed: u64, plan: impl Fn(u64) -> Option<T>) -> Option<u64> {
    let (mut low, mut high) = (MIN_BUFFERED_DESTINATIONS, allowed.checked_sub(1)?);
    plan(low)?;
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        match plan(mid) {
            Some(_) => low = mid,
            None => high = mid - 1,
        }
    }
    Some(low)
}

/// What destinations cost the workers whatever their rows: `allowed`, of which the first
/// `buffered` met are buffered (the rest cost what a destination not met does until the
/// workers turn to sorted runs), or all spilled as `sorted_runs`.
fn workers_fixed(allowed: u64, buffered: u64, threads: u64, sorted_runs: bool) -> u64 {
    match sorted_runs {
        true => allowed * threads * SORTED_DESTINATION_BYTES,
        false if buffered >= allowed => allowed * threads * DESTINATION_BYTES,
        false => {
            threads
                * (buffered * DESTINATION_BYTES + (allowed - buffered) * UNMET_DESTINATION_BYTES)
        }
    }
}

/// The shares for `n` destinations, the first `buffered` met buffered (all of them, or the
/// rest spilled as sorted runs once met) or all spilled as `sorted_runs`.
fn share(
    memory_limit: u64,
    n: u64,
    buffered: u64,
    workers: usize,
    parquet_files: bool,
    sorted_runs: bool,
) -> Result<Budget> {
    let threads = workers as u64;
    // What destinations cost the workers is given back before Parquet files are written
    // (all but their metrics, counted in both): the costs of the two phases do not add up.
    let workers_fixed = workers_fixed(n, buffered, threads, sorted_runs);
    let fixed = match parquet_files {
        true => workers_fixed
            .max(n * (PARQUET_DESTINATION_BYTES + threads * PARQUET_WORKER_DESTINATION_BYTES)),
        false => workers_fixed,
    };
    let least_share = threads
        * if parquet_files {
            MIN_WORKER_BYTES.max(MIN_ROW_GROUP_BYTES * ROW_GROUP_OVERHEAD)
        } else {
            MIN_WORKER_BYTES
        };
    // The shares are three fifths of what is left.
    let minimum = fixed + least_share * 5 / 3;
    if memory_limit < minimum {
        return Err(JobError::InvalidOption(format!(
            "a memory limit of {memory_limit} bytes is too small for {n} destinations and {workers} threads: it takes at least {minimum} bytes{}",
            if parquet_files {
                " (each thread writing Parquet needs room for a row group)"
            } else {
                ""
            }
        )));
    }
    let share = (memory_limit - fixed) * 3 / 5;
    Ok(Budget {
        destinations_fixed: fixed,
        parquet_writers_open: 0,
        parquet_row_groups: if parquet_files { share } else { 0 },
        per_worker_buffers: share / threads,
        sorted_runs,
        sorted_runs_past: 0,
    })
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
            (256 << 20, 10_000, 2, true),
            (16 << 20, 100, 2, true),
        ] {
            let budget = Budget::try_new(limit, n, workers, parquet).unwrap();
            // The phases do not overlap: buffered rows, then open row groups.
            let staging = budget.destinations_fixed + budget.per_worker_buffers * workers as u64;
            let writing = budget.destinations_fixed + budget.parquet_row_groups;
            assert!(staging.max(writing) <= limit, "{budget:?} over {limit}");
            if parquet {
                let writers = budget.row_group_bytes(workers) as u64 * ROW_GROUP_OVERHEAD;
                assert!(
                    budget.destinations_fixed + writers * workers as u64 <= limit,
                    "{budget:?}"
                );
            }
            assert!(
                budget.per_worker_buffers >= MIN_WORKER_BYTES * 3 / 5,
                "{budget:?}"
            );
            assert_eq!(budget.parquet_row_groups > 0, parquet);
        }
    }

    #[test]
    fn high_fan_out_spills_sorted_runs_and_gives_destinations_less() {
        let buffered = Budget::try_new(64 << 20, 64, 2, false).unwrap();
        assert!(!buffered.sorted_runs, "{buffered:?}");
        let sorted = Budget::try_new(64 << 20, 10_000, 2, false).unwrap();
        assert!(sorted.sorted_runs, "{sorted:?}");
        // 10,000 destinations no longer take most of 64 MiB.
        assert!(sorted.destinations_fixed <= 8 << 20, "{sorted:?}");
        assert!(sorted.per_worker_buffers >= 16 << 20, "{sorted:?}");
        // A limit too small to buffer 100,000 destinations still runs, spilling runs.
        let tight = Budget::try_new(256 << 20, 100_000, 2, false).unwrap();
        assert!(tight.sorted_runs, "{tight:?}");
    }

    #[test]
    fn parquet_files_buffer_smaller_shares_than_streams_before_spilling_runs() {
        // About 13 KiB a destination at 3,000 destinations in 256 MiB.
        let parquet = Budget::try_new(256 << 20, 3000, 2, true).unwrap();
        assert!(!parquet.sorted_runs, "{parquet:?}");
        let streams = Budget::try_new(256 << 20, 3000, 2, false).unwrap();
        assert!(streams.sorted_runs, "{streams:?}");
        // About 3 KiB: Parquet files spill too.
        let parquet = Budget::try_new(256 << 20, 12_000, 2, true).unwrap();
        assert!(parquet.sorted_runs, "{parquet:?}");
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

    #[test]
    fn few_parquet_files_are_written_as_flushed_within_the_limit_and_many_are_staged() {
        // lineitem's 16 columns: about 2.25 MiB a writer.
        let writer = (256 << 10) + 16 * (128 << 10);
        for (n, limit) in [(16u32, 256u64 << 20), (32, 256 << 20), (4, 64 << 20)] {
            let budget = Budget::flushed_parquet(limit, n, 2, writer, None).unwrap();
            let running = budget.destinations_fixed
                + budget.parquet_writers_open
                + 2 * budget.per_worker_buffers;
            assert!(running <= limit, "{budget:?} over {limit}");
            assert!(
                budget.destinations_fixed + budget.parquet_row_groups <= limit,
                "{budget:?}"
            );
            assert_eq!(budget.parquet_writers_open, u64::from(n) * writer);
            assert!(!budget.sorted_runs);
            assert!(budget.per_worker_buffers / (2 * u64::from(n)) >= DIRECT_MIN_FLUSH_BYTES);
        }
        // Too many writers for the limit: staged.
        assert!(Budget::flushed_parquet(256 << 20, 64, 2, writer, None).is_none());
        assert!(Budget::flushed_parquet(64 << 20, 16, 2, writer, None).is_none());
        assert!(Budget::flushed_parquet(1 << 20, 1, 2, writer, None).is_none());
        // Writers that fit but would leave the workers flushes of a few rows: staged.
        assert!(Budget::flushed_parquet(256 << 20, 1000, 2, 1, None).is_none());
        // Writers that cannot be planned (a schema Parquet cannot carry): staged, no overflow.
        for discovered in [None, Some(Discovered { sampled: 1 })] {
            assert!(Budget::flushed_parquet(256 << 20, 4, 2, u64::MAX, discovered).is_none());
        }
    }

    #[test]
    fn values_met_first_get_writers_within_a_third_and_the_rest_are_staged() {
        let writer = (256 << 10) + 16 * (128 << 10);
        let sampled = |sampled| Some(Discovered { sampled });
        // 1,000 values allowed (the default) in 256 MiB: writers for about twenty.
        let budget = Budget::flushed_parquet(256 << 20, 1000, 2, writer, sampled(4)).unwrap();
        let running =
            budget.destinations_fixed + budget.parquet_writers_open + 2 * budget.per_worker_buffers;
        assert!(running <= 256 << 20, "{budget:?}");
        let writers = budget.parquet_writers_open / writer;
        assert!(
            (16..=24).contains(&writers),
            "{writers} writers: {budget:?}"
        );
        assert!(
            budget.per_worker_buffers / 2000 >= 2 * STAGED_SORTED_RUNS_BELOW,
            "{budget:?}"
        );
        assert_eq!(budget.sorted_runs_past, 0, "every value buffered");
        // Every allowed value buffered: what the first rows hold does not matter.
        assert_eq!(
            Budget::flushed_parquet(256 << 20, 1000, 2, writer, sampled(900)),
            Some(budget)
        );
        // Four values allowed: a writer each.
        let four = Budget::flushed_parquet(256 << 20, 4, 2, writer, sampled(4)).unwrap();
        assert_eq!(four.parquet_writers_open, 4 * writer);
        // 3,000 or 100,000 values allowed and more values in the first rows than writers:
        // too little buffer for each, staged.
        for allowed in [3000, 100_000] {
            assert!(Budget::flushed_parquet(256 << 20, allowed, 2, writer, sampled(300)).is_none());
        }
    }

    #[test]
    fn few_values_among_many_allowed_get_writers_and_are_charged_as_met() {
        let writer = (256 << 10) + 16 * (128 << 10);
        // 64 MiB with 20,000 allowed: writers for three.
        for (limit, allowed, sampled) in [
            (256u64 << 20, 3000u32, 4),
            (256 << 20, 100_000, 4),
            (64 << 20, 20_000, 2),
        ] {
            let discovered = Some(Discovered { sampled });
            let budget = Budget::flushed_parquet(limit, allowed, 2, writer, discovered)
                .unwrap_or_else(|| panic!("{allowed} allowed in {limit}"));
            // Writers for the values of the first rows.
            assert!(
                budget.parquet_writers_open >= sampled * writer,
                "{budget:?}"
            );
            let met = budget.sorted_runs_past;
            assert!(
                (MIN_BUFFERED_DESTINATIONS..u64::from(allowed)).contains(&met),
                "{budget:?}"
            );
            // The first values met get 16 KiB of a worker's buffers each; past them, sorted
            // runs.
            assert!(
                budget.per_worker_buffers / (2 * met) >= 2 * STAGED_SORTED_RUNS_BELOW,
                "{budget:?}"
            );
            assert!(!budget.sorted_runs, "{budget:?}");
            assert!(budget.destinations_fixed >= 2 * u64::from(allowed) * UNMET_DESTINATION_BYTES);
            let running = budget.destinations_fixed
                + budget.parquet_writers_open
                + 2 * budget.per_worker_buffers;
            assert!(running <= limit, "{budget:?} over {limit}");
            assert!(
                budget.destinations_fixed + budget.parquet_row_groups <= limit,
                "{budget:?}"
            );
            // A first batch of more values than writers: staged, where more get buffers.
            let writers = budget.parquet_writers_open / writer;
            let many = Some(Discovered {
                sampled: writers + 1,
            });
            assert!(Budget::flushed_parquet(limit, allowed, 2, writer, many).is_none());
        }
    }

    #[test]
    fn values_not_met_cost_what_is_charged_for_them_and_the_first_met_are_buffered() {
        // Ten times the values that buffering could give 8 KiB each: buffered until that
        // many are met, within the limit, with every value charged 512 bytes a worker.
        for (limit, allowed, parquet) in [
            (256u64 << 20, 100_000u32, true),
            (256 << 20, 100_000, false),
            (64 << 20, 20_000, true),
            (64 << 20, 10_000, false),
        ] {
            let budget = Budget::try_discovered(limit, allowed, 2, parquet).unwrap();
            let all = Budget::try_new(limit, allowed, 2, parquet).unwrap();
            assert!(all.sorted_runs, "{all:?}");
            assert!(!budget.sorted_runs, "{budget:?}");
            let met = budget.sorted_runs_past;
            assert!(
                (MIN_BUFFERED_DESTINATIONS..u64::from(allowed)).contains(&met),
                "{budget:?}"
            );
            assert!(pays(&budget, met, parquet), "{budget:?}");
            assert!(budget.destinations_fixed >= 2 * u64::from(allowed) * UNMET_DESTINATION_BYTES);
            assert!(
                budget.destinations_fixed + 2 * budget.per_worker_buffers <= limit,
                "{budget:?}"
            );
            assert!(
                budget.destinations_fixed + budget.parquet_row_groups <= limit,
                "{budget:?}"
            );
            // Once turned, the workers hold batches within the same share.
            assert!(
                budget.destinations_fixed >= all.destinations_fixed,
                "{budget:?} against {all:?}"
            );
        }
        // Every allowed value buffered with a useful share: nothing to turn from.
        let few = Budget::try_discovered(256 << 20, 1000, 2, true).unwrap();
        assert_eq!(few, Budget::try_new(256 << 20, 1000, 2, true).unwrap());
        assert_eq!(few.sorted_runs_past, 0);
        // So little memory that not even 64 would keep their share: sorted runs throughout.
        let tight = Budget::try_discovered(16 << 20, 10_000, 2, false).unwrap();
        assert!(
            tight.sorted_runs && tight.sorted_runs_past == 0,
            "{tight:?}"
        );
    }

    #[test]
    fn parquet_at_ten_thousand_destinations_fits_in_256_mib_with_large_row_groups() {
        let budget = Budget::try_new(256 << 20, 10_000, 2, true).unwrap();
        // lineitem encodes to about 35 bytes a row: 24 MiB holds about 700K rows.
        assert!(budget.row_group_bytes(2) >= 24 << 20, "{budget:?}");
    }
}

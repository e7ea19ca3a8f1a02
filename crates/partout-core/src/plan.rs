//! [`ScatterPlan`]: the counting sort that every column of a batch is moved by.
//!
//! ```text
//!  ids      [2, 0, 2, 1, 0]          one partition id per row
//!  counts   [2, 1, 2]                histogram (over virtual ids when fanned out)
//!  offsets  [0, 2, 3, 5]             exclusive prefix sum: where each destination starts
//!  order    [1, 4, 3, 0, 2]          order[cursor[id[i]]++] = i, the input row of each output slot
//! ```
//!
//! The plan is computed once per batch and then applied to every column, so the per-cursor
//! dependency chain of a counting sort (`cursor[p]` is read, stored, and read again by the next
//! row of the same partition) is paid once per batch rather than once per column. Columns are
//! then moved by `order`, a loop with no loop-carried dependency at all.
//!
//! With few destinations, consecutive rows mostly hit the same cursor, and that chain limits the
//! plan to one row per store-to-load latency. The *virtual fan-out* gives every destination
//! `fanout` sub-cursors, one per contiguous stripe of the batch: row `i` of a batch cut into
//! `fanout` stripes of `L` rows has virtual id `vid = id * fanout + min(i / L, fanout - 1)`, and
//! the loops walk the stripes side by side (row `j` of every stripe, then row `j + 1`), so
//! consecutive steps use different cursors and their chains overlap. Destination `p` owns the
//! contiguous virtual range `[p * fanout, (p + 1) * fanout)` and stripe `k` holds earlier rows
//! than stripe `k + 1`, so rows still come out grouped by destination *and* in input order
//! within each destination, whatever the fan-out.

use crate::error::{PartoutError, Result};
use std::mem::MaybeUninit;

/// The most destinations (times fan-out) a plan accepts: its histogram has one counter per
/// destination and stripe, so an absurd count would be an absurd allocation.
pub const MAX_PARTITIONS: u32 = 1 << 20;

/// Checks a partition count: at least 1 and at most [`MAX_PARTITIONS`].
///
/// The one check every entry point that takes a partition count makes ([`ScatterPlan::build`],
/// [`Partitioner::try_new`](crate::Partitioner::try_new),
/// [`PartitionIds::try_new`](crate::ids::PartitionIds::try_new),
/// [`RangeBounds::from_sample`](crate::ids::RangeBounds::from_sample)), with the same message.
///
/// # Errors
/// [`PartoutError::InvalidArgument`] naming the count and the bounds when it is 0 or above
/// [`MAX_PARTITIONS`].
///
/// ```
/// use partout_core::plan::{MAX_PARTITIONS, check_partition_count};
/// assert_eq!(check_partition_count(200).unwrap(), 200);
/// let zero = check_partition_count(0).unwrap_err().to_string();
/// assert!(zero.contains("at least 1") && zero.contains("got 0"), "{zero}");
/// let many = check_partition_count(MAX_PARTITIONS + 1).unwrap_err().to_string();
/// assert!(many.contains("between 1 and 1048576, got 1048577"), "{many}");
/// ```
pub fn check_partition_count(n: u32) -> Result<u32> {
    match n {
        0 => Err(PartoutError::InvalidArgument(format!(
            "the partition count must be at least 1 (between 1 and {MAX_PARTITIONS}), got 0"
        ))),
        1..=MAX_PARTITIONS => Ok(n),
        _ => Err(PartoutError::InvalidArgument(format!(
            "the partition count must be between 1 and {MAX_PARTITIONS}, got {n}"
        ))),
    }
}

/// Virtual-id space that [`auto_fanout`] aims for: `num_partitions * fanout <= VIRTUAL_TARGET`.
pub const VIRTUAL_TARGET: u32 = 128;

/// The largest automatic fan-out: 8 interleaved stripes already hide the cursor chain, and more
/// stripes only add cursors to keep in cache.
pub const MAX_FANOUT: u32 = 8;

/// The fan-out for `num_partitions` destinations, chosen by measurement (`partout bench plan`,
/// numbers in bench/HISTORY.md): the largest power of two `f <= MAX_FANOUT` with
/// `num_partitions * f <= VIRTUAL_TARGET`, but at least 2 up to 1024 destinations, where two
/// stripes still pay for themselves when keys come in runs, and 1 beyond.
///
/// ```
/// use partout_core::plan::auto_fanout;
/// assert_eq!(auto_fanout(4), 8);
/// assert_eq!(auto_fanout(16), 8);
/// assert_eq!(auto_fanout(64), 2);
/// assert_eq!(auto_fanout(1024), 2);
/// assert_eq!(auto_fanout(4096), 1);
/// ```
pub fn auto_fanout(num_partitions: u32) -> u32 {
    let floor = if num_partitions <= 1024 { 2 } else { 1 };
    match VIRTUAL_TARGET.checked_div(num_partitions) {
        Some(q) if q >= 2 => (1 << (31 - q.leading_zeros())).min(MAX_FANOUT),
        _ => floor,
    }
}

/// A counting sort of one batch's rows by partition id: destination offsets and the input row
/// of every output slot.
///
/// A plan owns its buffers and is rebuilt in place for every batch: once it has seen a batch
/// of a given size and partition count it allocates nothing more.
///
/// ```
/// use partout_core::ScatterPlan;
/// let mut plan = ScatterPlan::new();
/// plan.build(&[2, 0, 2, 1, 0], 3).unwrap();
/// assert_eq!(plan.offsets(), &[0, 2, 3, 5]);
/// assert_eq!(plan.order(), &[1, 4, 3, 0, 2]);
/// assert_eq!(plan.range(2), 3..5);
/// ```
#[derive(Debug, Default, Clone)]
pub struct ScatterPlan {
    num_partitions: u32,
    rows: usize,
    /// `num_partitions + 1` destination start offsets.
    offsets: Vec<u32>,
    /// Per virtual id: the count, then the start, then the running cursor.
    cursors: Vec<u32>,
    /// For every output slot, the input row that goes there.
    order: Vec<u32>,
}

impl ScatterPlan {
    /// An empty plan, to be filled by [`build`](Self::build).
    pub fn new() -> Self {
        Self::default()
    }

    /// Plans `ids` over `num_partitions` destinations with the fan-out [`auto_fanout`] chooses.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] when `num_partitions` is 0 or above
    /// [`MAX_PARTITIONS`],
    /// [`PartoutError::PartitionIdOutOfRange`] naming the first row whose id is not below
    /// `num_partitions`, [`PartoutError::TooLarge`] beyond `u32::MAX` rows.
    pub fn build(&mut self, ids: &[u32], num_partitions: u32) -> Result<()> {
        self.build_with_fanout(ids, num_partitions, auto_fanout(num_partitions))
    }

    /// Plans `ids` with an explicit virtual fan-out (a power of two; see the module
    /// documentation). The result is the same for every fan-out; only the speed differs.
    ///
    /// # Errors
    /// As [`build`](Self::build), and [`PartoutError::InvalidArgument`] when `fanout` is not a
    /// power of two or `num_partitions * fanout` exceeds [`MAX_PARTITIONS`].
    pub fn build_with_fanout(
        &mut self,
        ids: &[u32],
        num_partitions: u32,
        fanout: u32,
    ) -> Result<()> {
        self.check(num_partitions, fanout)?;
        self.prepare(ids, num_partitions, fanout)?;
        // Every slot of `order` is written below, so a reused buffer of the right length
        // needs no clearing.
        if self.order.len() != ids.len() {
            self.order.resize(ids.len(), 0);
        }
        let order = self.order.as_mut_ptr();
        let n = ids.len();
        place(ids, &mut self.cursors, fanout, |row, slot| {
            debug_assert!(slot < n);
            // SAFETY: `place` hands out every slot below `ids.len() == order.len()` once.
            unsafe { *order.add(slot) = row as u32 };
        });
        Ok(())
    }

    /// Plans like [`build_with_fanout`](Self::build_with_fanout) and moves `values` while
    /// placing the rows: `moved[slot] = values[row]`, saving a separate pass over the order for
    /// one column. With `keep_order` false the order is not written at all
    /// ([`order`](Self::order) is then empty): a one-column batch needs nothing else. On
    /// success every slot of `moved` is initialised.
    ///
    /// # Errors
    /// As [`build_with_fanout`](Self::build_with_fanout).
    ///
    /// # Panics
    /// If `values` or `moved` differ in length from `ids`.
    pub(crate) fn build_moving<T: Copy>(
        &mut self,
        ids: &[u32],
        num_partitions: u32,
        fanout: u32,
        values: &[T],
        moved: &mut [MaybeUninit<T>],
        keep_order: bool,
    ) -> Result<()> {
        assert!(
            values.len() == ids.len() && moved.len() == ids.len(),
            "one value per id"
        );
        self.check(num_partitions, fanout)?;
        self.prepare(ids, num_partitions, fanout)?;
        let n = ids.len();
        let out = moved.as_mut_ptr();
        let src = values.as_ptr();
        if keep_order {
            if self.order.len() != ids.len() {
                self.order.resize(ids.len(), 0);
            }
            let order = self.order.as_mut_ptr();
            place(ids, &mut self.cursors, fanout, |row, slot| {
                debug_assert!(slot < n && row < n);
                // SAFETY: `place` hands out every `slot < ids.len()` once, with
                // `row < ids.len()`; `order`, `values` and `moved` have `ids.len()` entries.
                unsafe {
                    *order.add(slot) = row as u32;
                    (*out.add(slot)).write(*src.add(row));
                }
            });
        } else {
            self.order.clear();
            place(ids, &mut self.cursors, fanout, |row, slot| {
                debug_assert!(slot < n && row < n);
                // SAFETY: as above, without the order.
                unsafe { (*out.add(slot)).write(*src.add(row)) };
            });
        }
        Ok(())
    }

    /// Argument checks shared by the builders.
    fn check(&self, num_partitions: u32, fanout: u32) -> Result<()> {
        check_partition_count(num_partitions)?;
        if !fanout.is_power_of_two() || num_partitions.saturating_mul(fanout) > MAX_PARTITIONS {
            return Err(PartoutError::InvalidArgument(format!(
                "the fan-out must be a power of two with {num_partitions} partitions times \
                 fan-out at most {MAX_PARTITIONS}, got {fanout}"
            )));
        }
        Ok(())
    }

    /// Validates the ids, counts them, and turns the counts into start offsets (the cursors)
    /// and destination offsets.
    fn prepare(&mut self, ids: &[u32], num_partitions: u32, fanout: u32) -> Result<()> {
        let rows = u32::try_from(ids.len()).map_err(|_| {
            PartoutError::TooLarge(format!(
                "{} rows in one batch (at most u32::MAX)",
                ids.len()
            ))
        })?;
        check_ids(ids, num_partitions)?;
        self.num_partitions = num_partitions;
        self.rows = ids.len();
        self.cursors.clear();
        self.cursors.resize((num_partitions * fanout) as usize, 0);
        count(ids, &mut self.cursors, fanout);

        let mask = fanout - 1;
        self.offsets.clear();
        let mut start = 0u32;
        for (v, slot) in self.cursors.iter_mut().enumerate() {
            if v as u32 & mask == 0 {
                self.offsets.push(start);
            }
            let n = *slot;
            *slot = start;
            start += n;
        }
        self.offsets.push(rows);
        debug_assert_eq!(start, rows);
        Ok(())
    }

    /// The number of destinations.
    pub fn num_partitions(&self) -> u32 {
        self.num_partitions
    }

    /// The number of planned rows.
    pub fn num_rows(&self) -> usize {
        self.rows
    }

    /// `num_partitions + 1` offsets: destination `p` owns output slots
    /// `offsets[p]..offsets[p + 1]`.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The input row of every output slot: a permutation of `0..num_rows`.
    pub fn order(&self) -> &[u32] {
        &self.order
    }

    /// The capacity, in `u32`s, of the buffers the plan holds (for tests and metrics).
    pub fn capacity(&self) -> usize {
        self.offsets.capacity() + self.cursors.capacity() + self.order.capacity()
    }

    /// The output slots of destination `p`.
    ///
    /// # Panics
    /// If `p >= num_partitions`.
    pub fn range(&self, p: usize) -> std::ops::Range<usize> {
        self.offsets[p] as usize..self.offsets[p + 1] as usize
    }
}

/// Checks `ids` as a plan does before moving rows: every id below `num_partitions`.
///
/// # Errors
/// [`PartoutError::PartitionIdOutOfRange`] naming the first id that is not, and its row.
pub fn check_ids(ids: &[u32], num_partitions: u32) -> Result<()> {
    if all_below(ids, num_partitions) {
        Ok(())
    } else {
        Err(first_bad_id(ids, num_partitions))
    }
}

/// Whether every id is below `num_partitions`.
///
/// With AVX2 (detected at run time) this is a vectorised unsigned maximum, 8 ids per
/// instruction. Baseline SSE2 has no unsigned 32-bit compare or maximum, so the portable
/// version compares as signed against `num_partitions - 1` (at most [`MAX_PARTITIONS`], so
/// positive as an `i32`), which catches ids up to `i32::MAX`, and checks the top bit for the
/// rest: about three times the work, measured at 0.1 ns/row.
fn all_below(ids: &[u32], num_partitions: u32) -> bool {
    debug_assert!((1..=MAX_PARTITIONS).contains(&num_partitions));
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { max_avx2(ids) } < num_partitions;
    }
    all_below_portable(ids, num_partitions)
}

/// [`all_below`] with baseline instructions only.
fn all_below_portable(ids: &[u32], num_partitions: u32) -> bool {
    let last = (num_partitions - 1) as i32;
    let bad = ids.iter().fold(0u32, |bad, &id| {
        bad | ((id as i32 > last) as u32) | (id >> 31)
    });
    bad == 0
}

/// The largest id (0 for none), compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_avx2(ids: &[u32]) -> u32 {
    ids.iter().fold(0, |m, &id| m.max(id))
}

/// The error for the first id not below `num_partitions` (the slow path).
fn first_bad_id(ids: &[u32], num_partitions: u32) -> PartoutError {
    let row = ids.iter().position(|&id| id >= num_partitions).unwrap_or(0);
    PartoutError::PartitionIdOutOfRange {
        row,
        id: ids[row],
        num_partitions,
    }
}

/// Visits every row as `(row, virtual id)`, stripe by stripe side by side when fanned out.
///
/// With `fanout == 1` this is a plain loop. Otherwise the batch is cut into `fanout` stripes of
/// `len / fanout` rows (the last stripe also takes the remainder), row `i` of stripe `k` gets
/// virtual id `id * fanout + k`, and the visit order is row 0 of every stripe, then row 1, ...
/// The visitor must be cheap: it is the body of the hot loop.
#[inline(always)]
fn for_each_virtual(ids: &[u32], fanout: u32, visit: impl FnMut(usize, usize)) {
    match fanout {
        1 => {
            let mut visit = visit;
            for (i, &id) in ids.iter().enumerate() {
                visit(i, id as usize);
            }
        }
        2 => for_each_striped::<2>(ids, visit),
        4 => for_each_striped::<4>(ids, visit),
        8 => for_each_striped::<8>(ids, visit),
        16 => for_each_striped::<16>(ids, visit),
        32 => for_each_striped::<32>(ids, visit),
        64 => for_each_striped::<64>(ids, visit),
        _ => for_each_striped_dyn(ids, fanout as usize, visit),
    }
}

/// [`for_each_virtual`] for a fan-out known at compile time: the stripe loop unrolls.
#[inline(always)]
fn for_each_striped<const S: usize>(ids: &[u32], mut visit: impl FnMut(usize, usize)) {
    let stripe_len = ids.len() / S;
    let shift = S.trailing_zeros();
    for j in 0..stripe_len {
        for k in 0..S {
            let i = k * stripe_len + j;
            debug_assert!(i < ids.len());
            // SAFETY: `i < S * stripe_len <= ids.len()`.
            let id = unsafe { *ids.get_unchecked(i) };
            visit(i, ((id as usize) << shift) | k);
        }
    }
    for (i, &id) in ids.iter().enumerate().skip(S * stripe_len) {
        visit(i, ((id as usize) << shift) | (S - 1));
    }
}

/// [`for_each_virtual`] for any other power-of-two fan-out.
#[inline(always)]
fn for_each_striped_dyn(ids: &[u32], stripes: usize, mut visit: impl FnMut(usize, usize)) {
    let stripe_len = ids.len() / stripes;
    let shift = stripes.trailing_zeros();
    for j in 0..stripe_len {
        for k in 0..stripes {
            let i = k * stripe_len + j;
            visit(i, ((ids[i] as usize) << shift) | k);
        }
    }
    for (i, &id) in ids.iter().enumerate().skip(stripes * stripe_len) {
        visit(i, ((id as usize) << shift) | (stripes - 1));
    }
}

/// Histogram of virtual ids into `counts`.
#[inline(never)]
fn count(ids: &[u32], counts: &mut [u32], fanout: u32) {
    let counts_len = counts.len();
    let counts = counts.as_mut_ptr();
    for_each_virtual(ids, fanout, |_, v| {
        debug_assert!(v < counts_len);
        // SAFETY: `all_below` checked `id < num_partitions`, and the stripe `k < fanout`, so
        // `v = id * fanout + k < num_partitions * fanout == counts.len()`.
        unsafe { *counts.add(v) += 1 };
    });
}

/// The counting-sort scatter: `store(i, cursor[vid(i)]++)` for every row `i`, handing out
/// every slot below `ids.len()` exactly once, destination by destination and, within one, in
/// row order. `cursors` must hold the start slot of every virtual id (the exclusive prefix sum
/// of the counts of these very ids).
#[inline(always)]
fn place(ids: &[u32], cursors: &mut [u32], fanout: u32, mut store: impl FnMut(usize, usize)) {
    let cursors_len = cursors.len();
    let cursors = cursors.as_mut_ptr();
    for_each_virtual(ids, fanout, |i, v| {
        debug_assert!(v < cursors_len);
        // SAFETY: `all_below` checked `id < num_partitions`, so
        // `v = id * fanout + k < num_partitions * fanout == cursors.len()`.
        let slot = unsafe { cursors.add(v) };
        // SAFETY: as above. `cursors[v]` starts at the exclusive prefix sum of the counts and
        // advances once per row counted for `v`, so it stays below the start of the next
        // virtual id, hence below `ids.len()`.
        let c = unsafe {
            let c = *slot;
            *slot = c + 1;
            c as usize
        };
        debug_assert!(c < ids.len());
        store(i, c);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fanout_gives_the_same_stable_plan() {
        let sizes: &[usize] = if cfg!(miri) {
            &[0, 1, 7, 64, 100]
        } else {
            &[0, 1, 7, 63, 64, 100, 1000]
        };
        for &rows in sizes {
            let ids: Vec<u32> = (0..rows as u32).map(|i| (i * 7 + i / 5) % 3).collect();
            let mut expected = ScatterPlan::new();
            expected.build_with_fanout(&ids, 3, 1).unwrap();
            for p in 0..3 {
                let rows_of_p: Vec<u32> =
                    (0..rows as u32).filter(|&i| ids[i as usize] == p).collect();
                assert_eq!(
                    &expected.order()[expected.range(p as usize)],
                    &rows_of_p[..]
                );
            }
            for fanout in [2, 4, 8, 64, 256] {
                let mut plan = ScatterPlan::new();
                plan.build_with_fanout(&ids, 3, fanout).unwrap();
                assert_eq!(
                    plan.offsets(),
                    expected.offsets(),
                    "rows {rows} fanout {fanout}"
                );
                assert_eq!(
                    plan.order(),
                    expected.order(),
                    "rows {rows} fanout {fanout}"
                );
            }
        }
    }

    #[test]
    fn moving_while_planning_matches_the_order() {
        let ids: Vec<u32> = (0..1000u32).map(|i| (i * 31 + i / 7) % 13).collect();
        let values: Vec<u64> = (0..1000u64).map(|i| i * i + 5).collect();
        let build = |plan: &mut ScatterPlan, fanout, keep_order| {
            let mut moved = vec![MaybeUninit::uninit(); values.len()];
            plan.build_moving(&ids, 13, fanout, &values, &mut moved, keep_order)
                .unwrap();
            // SAFETY: `build_moving` initialised every slot.
            moved
                .into_iter()
                .map(|v| unsafe { v.assume_init() })
                .collect::<Vec<u64>>()
        };
        for fanout in [1, 2, 8] {
            let mut plan = ScatterPlan::new();
            let moved = build(&mut plan, fanout, true);
            let want: Vec<u64> = plan.order().iter().map(|&r| values[r as usize]).collect();
            assert_eq!(moved, want);
            let offsets = plan.offsets().to_vec();
            let alone = build(&mut plan, fanout, false);
            assert_eq!(alone, want);
            assert!(plan.order().is_empty());
            assert_eq!(plan.num_rows(), 1000);
            assert_eq!(plan.offsets(), &offsets[..]);
        }
    }

    #[test]
    fn out_of_range_id_names_its_row() {
        let mut plan = ScatterPlan::new();
        let err = plan.build(&[0, 1, 5, 9], 4).unwrap_err();
        assert!(matches!(
            err,
            PartoutError::PartitionIdOutOfRange {
                row: 2,
                id: 5,
                num_partitions: 4
            }
        ));
    }

    #[test]
    fn impossible_options_are_errors() {
        let mut plan = ScatterPlan::new();
        assert!(matches!(
            plan.build(&[0], 0),
            Err(PartoutError::InvalidArgument(_))
        ));
        assert!(matches!(
            plan.build_with_fanout(&[0], 4, 3),
            Err(PartoutError::InvalidArgument(_))
        ));
        for (n, fanout) in [(u32::MAX, 1), (MAX_PARTITIONS + 1, 1), (MAX_PARTITIONS, 2)] {
            assert!(
                matches!(
                    plan.build_with_fanout(&[0], n, fanout),
                    Err(PartoutError::InvalidArgument(_))
                ),
                "{n} x {fanout}"
            );
        }
    }

    #[test]
    fn both_range_checks_agree_on_the_edges() {
        let n = 1000u32;
        for ids in [
            vec![],
            vec![0],
            vec![n - 1; 33],
            vec![n],
            vec![u32::MAX],
            vec![1 << 31],
            vec![(1 << 31) - 1],
            (0..n).collect::<Vec<_>>(),
            (0..=n).rev().collect::<Vec<_>>(),
        ] {
            let want = ids.iter().all(|&id| id < n);
            assert_eq!(all_below_portable(&ids, n), want, "{ids:?}");
            assert_eq!(all_below(&ids, n), want, "{ids:?}");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 is there, checked just above.
                assert_eq!(unsafe { max_avx2(&ids) } < n, want, "{ids:?}");
            }
        }
    }

    #[test]
    fn ids_past_i32_are_caught() {
        let mut plan = ScatterPlan::new();
        for (ids, n, bad_row) in [
            (vec![0u32, 3, u32::MAX], 4u32, 2usize),
            (vec![1 << 31, 0], 4, 0),
            (vec![5, (1 << 31) - 1], 6, 1),
            (vec![2, i32::MAX as u32 + 5, 1], 3, 1),
        ] {
            match plan.build_with_fanout(&ids, n, 1) {
                Err(PartoutError::PartitionIdOutOfRange { row, .. }) => assert_eq!(row, bad_row),
                other => panic!("{ids:?} over {n}: {other:?}"),
            }
        }
    }

    /// A million-entry histogram: too slow under Miri, and no unsafe code differs from the
    /// small cases.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn the_largest_partition_count_works() {
        let mut plan = ScatterPlan::new();
        let err =
            plan.build_with_fanout(&[0, MAX_PARTITIONS - 1, MAX_PARTITIONS], MAX_PARTITIONS, 1);
        assert!(matches!(
            err,
            Err(PartoutError::PartitionIdOutOfRange { row: 2, .. })
        ));
        plan.build_with_fanout(&[MAX_PARTITIONS - 1, 0], MAX_PARTITIONS, 1)
            .unwrap();
        assert_eq!(plan.order(), &[1, 0]);
    }

    #[test]
    fn empty_batch_has_empty_destinations() {
        let mut plan = ScatterPlan::new();
        plan.build(&[], 5).unwrap();
        assert_eq!(plan.offsets(), &[0; 6]);
        assert!(plan.order().is_empty());
    }

    #[test]
    fn auto_fanout_stays_in_its_bounds() {
        for n in (1..5000u32).step_by(if cfg!(miri) { 7 } else { 1 }) {
            let f = auto_fanout(n);
            assert!(f.is_power_of_two() && f <= MAX_FANOUT, "{n}: {f}");
            assert!(n * f <= VIRTUAL_TARGET || f <= 2, "{n}: {f}");
            assert!(f == MAX_FANOUT || n * f * 2 > VIRTUAL_TARGET, "{n}: {f}");
        }
    }
}

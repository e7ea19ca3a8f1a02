//! [`Order`]: the input rows a kernel reads, in output order, each checked below a bound.
//!
//! ```text
//!  rows  [1, 4, 3, 0, 2]   bound 5   every row < bound: one check per column, none per row
//! ```
//!
//! The kernels read `values[rows[j]]` without a bounds check per row: they check once that
//! the values reach `bound`, and the `Order` invariant does the rest. The fields are private
//! so that every `Order` comes from a constructor that upholds it: a plan's order, a checked
//! slice of rows, a piece of another order, or [`Order::new_unchecked`] where the caller has
//! the proof at hand.

use crate::plan::ScatterPlan;
use std::ops::Range;

/// Input rows in output order, every one below `bound`.
///
/// The invariant is what lets the kernels check one bound per column instead of one per row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Order<'a> {
    rows: &'a [u32],
    bound: usize,
}

impl<'a> Order<'a> {
    /// No rows (below any bound).
    pub(crate) const EMPTY: Order<'static> = Order {
        rows: &[],
        bound: 0,
    };

    /// The order of a plan: a permutation of `0..plan.num_rows()` (or nothing, for a plan
    /// that moved its one column without writing an order).
    pub(crate) fn of_plan(plan: &'a ScatterPlan) -> Self {
        let (rows, bound) = (plan.order(), plan.num_rows());
        debug_assert!(rows.len() == bound || rows.is_empty());
        debug_assert!(rows.iter().all(|&r| (r as usize) < bound));
        Self { rows, bound }
    }

    /// An order whose rows are all checked to be below `bound`.
    #[cfg(test)]
    pub(crate) fn try_new(rows: &'a [u32], bound: usize) -> Option<Self> {
        rows.iter()
            .all(|&r| (r as usize) < bound)
            .then_some(Self { rows, bound })
    }

    /// An order of `rows` below `bound`, unchecked.
    ///
    /// # Safety
    /// Every entry of `rows` must be below `bound`: the kernels index values up to `bound`
    /// with these rows without checking them.
    pub(crate) unsafe fn new_unchecked(rows: &'a [u32], bound: usize) -> Self {
        debug_assert!(rows.iter().all(|&r| (r as usize) < bound));
        Self { rows, bound }
    }

    /// The rows `range` of this order, below the same bound.
    ///
    /// # Panics
    /// If `range` reaches past the order.
    pub(crate) fn slice(self, range: Range<usize>) -> Self {
        Self {
            rows: &self.rows[range],
            bound: self.bound,
        }
    }

    /// The rows, in output order.
    pub(crate) fn rows(&self) -> &'a [u32] {
        self.rows
    }

    /// Every row is below this.
    pub(crate) fn bound(&self) -> usize {
        self.bound
    }

    /// The number of rows.
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_at_or_past_the_bound_are_refused() {
        assert!(Order::try_new(&[0, 4, 2], 5).is_some());
        assert!(Order::try_new(&[0, 5, 2], 5).is_none());
        assert!(Order::try_new(&[], 0).is_some());
        assert!(Order::try_new(&[0], 0).is_none());
    }

    #[test]
    fn a_slice_keeps_the_bound() {
        let order = Order::try_new(&[3, 1, 4, 1, 5], 6).unwrap();
        let piece = order.slice(1..4);
        assert_eq!(piece.rows(), &[1, 4, 1]);
        assert_eq!(piece.bound(), 6);
        assert_eq!(order.slice(5..5).len(), 0);
    }

    #[test]
    fn a_plan_gives_its_permutation() {
        let mut plan = ScatterPlan::new();
        plan.build(&[1, 0, 1, 0], 2).unwrap();
        let order = Order::of_plan(&plan);
        assert_eq!(order.rows(), &[1, 3, 0, 2]);
        assert_eq!(order.bound(), 4);
        assert_eq!(Order::EMPTY.len(), 0);
    }
}

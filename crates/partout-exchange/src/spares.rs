//! [`Spares`]: batches a pull-side writer flushed that their readers are done with, on their
//! way back to a writer that reuses their buffers.
//!
//! A [`Ready`](crate::Ready) writer hands its batches on, so the buffers it lent them are not
//! its own when it next flushes: without a way back it allocates new ones at every flush, and
//! the reader frees the old ones, on another thread. A reader that only copies rows out of a
//! batch (an operator gathering small batches into larger ones) gives the batch to `Spares`
//! instead, and the writer takes its buffers at its next flush: in steady state neither side
//! allocates. Bytes kept here are bounded and charged to an [`Account`].

use crate::bounded::Account;
use arrow_array::RecordBatch;
use std::sync::{Arc, Mutex};

/// Batches given back by their readers, up to a byte limit, for writers to reuse.
#[derive(Debug)]
pub struct Spares {
    kept: Mutex<Kept>,
    limit: usize,
    account: Option<Arc<dyn Account>>,
}

#[derive(Debug, Default)]
struct Kept {
    batches: Vec<(RecordBatch, usize)>,
    bytes: usize,
}

impl Spares {
    /// Keeps up to `limit` bytes of batches (their memory as arrow counts it).
    pub fn new(limit: usize) -> Self {
        Self {
            kept: Mutex::default(),
            limit,
            account: None,
        }
    }

    /// Charges the batches kept to `account`; one it refuses is dropped instead.
    pub fn with_account(mut self, account: Arc<dyn Account>) -> Self {
        self.account = Some(account);
        self
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives `batch` back: kept while within the limit (and what the account grants),
    /// dropped otherwise. Only its holder's last reference lets a writer reuse its buffers.
    pub fn give(&self, batch: RecordBatch) {
        let bytes = batch.get_array_memory_size();
        let mut kept = self.kept();
        if kept.bytes + bytes > self.limit {
            return;
        }
        if let Some(account) = &self.account
            && account.try_grow(bytes).is_err()
        {
            return;
        }
        kept.bytes += bytes;
        kept.batches.push((batch, bytes));
    }

    /// The batch given back last, if any.
    pub fn take(&self) -> Option<RecordBatch> {
        let (batch, bytes) = {
            let mut kept = self.kept();
            let (batch, bytes) = kept.batches.pop()?;
            kept.bytes -= bytes;
            (batch, bytes)
        };
        if let Some(account) = &self.account {
            account.shrink(bytes);
        }
        Some(batch)
    }

    /// Bytes of the batches kept.
    pub fn held_bytes(&self) -> usize {
        self.kept().bytes
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        let bytes = self.kept().bytes;
        if let Some(account) = &self.account
            && bytes > 0
        {
            account.shrink(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int64Array};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An account granting up to a limit, holding what it granted.
    #[derive(Debug)]
    struct Limited {
        held: AtomicUsize,
        limit: usize,
    }

    impl Account for Limited {
        fn try_grow(&self, bytes: usize) -> Result<(), String> {
            let held = self.held.load(Ordering::SeqCst);
            if held + bytes > self.limit {
                return Err(format!("{held} + {bytes} past {}", self.limit));
            }
            self.held.store(held + bytes, Ordering::SeqCst);
            Ok(())
        }

        fn shrink(&self, bytes: usize) {
            self.held.fetch_sub(bytes, Ordering::SeqCst);
        }
    }

    fn batch(rows: i64) -> RecordBatch {
        let values: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows));
        RecordBatch::try_from_iter([("v", values)]).unwrap()
    }

    /// Batches are kept within the byte limit and what the account grants, taken back last
    /// first, and the account gets back what it granted, also for batches never taken.
    #[test]
    fn spares_keep_within_their_limit_and_their_account() {
        let one = batch(1000).get_array_memory_size();
        let account = Arc::new(Limited {
            held: AtomicUsize::new(0),
            limit: 3 * one,
        });
        let spares = Spares::new(2 * one).with_account(account.clone());
        for rows in [1000, 1000, 1000] {
            spares.give(batch(rows));
        }
        assert_eq!(spares.held_bytes(), 2 * one, "the third is past the limit");
        assert_eq!(account.held.load(Ordering::SeqCst), 2 * one);
        assert_eq!(spares.take().map(|b| b.num_rows()), Some(1000));
        assert_eq!(account.held.load(Ordering::SeqCst), one);
        // The account refuses what the limit would allow.
        let tight = Arc::new(Limited {
            held: AtomicUsize::new(0),
            limit: one / 2,
        });
        let refused = Spares::new(10 * one).with_account(tight.clone());
        refused.give(batch(1000));
        assert_eq!(refused.held_bytes(), 0);
        assert!(refused.take().is_none());
        drop(spares);
        assert_eq!(account.held.load(Ordering::SeqCst), 0, "given back on drop");
    }
}

//! How an exchange is made ([`BoundedOptions`]) and what it reports: [`Fetched`] items,
//! an [`OutputStatus`], its [`ExchangeMetrics`].

use super::Account;
use super::spill::{SpillMetrics, SpillTarget};
use std::sync::Arc;
use std::time::Duration;

/// How a [`BoundedExchange`](super::BoundedExchange) is made.
#[derive(Debug)]
pub struct BoundedOptions {
    /// Outputs (destinations).
    pub outputs: usize,
    /// Producers that will finish; the exchange is complete when all of them have.
    pub producers: usize,
    /// The most bytes of items held in memory at once.
    pub budget_bytes: usize,
    /// Where items go when waiting could wait forever (`None`: that is an error).
    pub spill: Option<SpillTarget>,
    /// A memory pool every byte held is reserved from as well.
    pub account: Option<Arc<dyn Account>>,
    /// How long a producer waits for room while a consumer waits on an output with nothing
    /// for it, before it spills (default 100 ms).
    pub patience: Duration,
}

impl BoundedOptions {
    /// `outputs` outputs fed by `producers` producers within `budget_bytes`, without a spill
    /// file or an account.
    pub fn new(outputs: usize, producers: usize, budget_bytes: usize) -> Self {
        Self {
            outputs,
            producers,
            budget_bytes,
            spill: None,
            account: None,
            patience: Duration::from_millis(100),
        }
    }

    /// Waiting up to `patience` for room before spilling.
    pub fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// Spilling to `target`.
    pub fn with_spill(mut self, target: SpillTarget) -> Self {
        self.spill = Some(target);
        self
    }

    /// Reserving every byte held from `account` too.
    pub fn with_account(mut self, account: Arc<dyn Account>) -> Self {
        self.account = Some(account);
        self
    }
}

/// What a consumer fetched: items from the sequence asked for, the sequence after them, and
/// whether nothing follows.
#[derive(Debug)]
pub struct Fetched<T> {
    /// The items, in order.
    pub items: Vec<T>,
    /// The sequence after the last item.
    pub next: u64,
    /// Whether nothing follows `next`.
    pub complete: bool,
}

/// An output's totals so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputStatus {
    /// Rows produced for it (closed outputs included).
    pub rows: u64,
    /// Bytes produced for it.
    pub bytes: u64,
    /// Whether every producer finished.
    pub complete: bool,
}

/// What the exchange did: memory and spilling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExchangeMetrics {
    /// Bytes held in memory now.
    pub held_bytes: usize,
    /// The most bytes held in memory at once.
    pub peak_held_bytes: usize,
    /// Spilling.
    pub spill: SpillMetrics,
}

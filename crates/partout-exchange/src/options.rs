//! [`WriterOptions`]: when a [`PartitionedWriter`](crate::PartitionedWriter) flushes and how
//! much memory it may hold. What the flushed batches become (a format, a compression) is the
//! output's business, not the writer's.

use crate::error::{Result, WriterError};

/// When destinations flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flush {
    /// Each destination flushes when it reaches its target; past the memory limit, the
    /// destinations holding most flush first. Suits outputs written as they are flushed, when
    /// each destination's share of the memory limit holds batches worth a message.
    #[default]
    AtTarget,
    /// No destination flushes on its own: past the memory limit, every destination flushes,
    /// in destination order, and the output is told the round ended
    /// ([`Flushed::EndOfRound`](crate::Flushed::EndOfRound)). Suits outputs that spill sorted
    /// runs and merge them at the end (high fan-out under a small limit, where each
    /// destination's share would hold a few rows).
    AllAtLimit,
}

/// The default of [`WriterOptions::slices_from`]: from this many destinations, an output that
/// [takes runs](crate::SinkCapabilities::slices) gets each destination's rows as runs of held batches,
/// not from per-destination buffers. Measured on lineitem, 5% faster at 200 destinations and
/// 27% at 1000, but slower at 16 and 64 (BENCHMARKS.md).
pub const SLICES_FROM: usize = 200;

/// Options of a [`PartitionedWriter`](crate::PartitionedWriter), checked by [`WriterOptions::validate`].
///
/// ```
/// use partout_exchange::WriterOptions;
///
/// let options = WriterOptions::default()
///     .with_target_bytes(256 << 10)
///     .with_memory_limit(16 << 20);
/// assert!(options.validate().is_ok());
/// assert!(WriterOptions::default().with_jitter(1.5).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct WriterOptions {
    /// A destination flushes when it holds this many bytes (default 256 KiB), before jitter
    /// and the memory limit's share. Batches this large encode with little overhead, and the
    /// buffers of a few dozen destinations stay in the CPU's caches while they fill (1 MiB
    /// targets ran 10-20% slower at 16 destinations).
    pub target_bytes: usize,
    /// Each destination's target is drawn within `target × (1 ± jitter)` (default 0.25; from 0
    /// to 0.9).
    pub jitter: f64,
    /// Bytes of buffer memory all destinations together may hold (default 64 MiB; at least
    /// `target_bytes`).
    pub memory_limit: usize,
    /// Rows with a null in any key column go to every destination, and one row (the first)
    /// goes to every destination once (default off).
    pub replicate_nulls_and_any: bool,
    /// Seeds the jitter, for reproducible flush points (default 0).
    pub seed: u64,
    /// When destinations flush (default [`Flush::AtTarget`]).
    pub flush: Flush,
    /// A destination also flushes when it holds this many rows (default: no row target),
    /// for consumers that take batches of a set size (DataFusion's `batch_size`).
    pub target_rows: Option<usize>,
    /// From this many destinations (default [`SLICES_FROM`]), with
    /// [`Flush::AtTarget`], no row target and an output that takes them (Arrow IPC streams of
    /// flat columns), each batch is held laid out by destination and every destination's rows
    /// are written at once from the held batches, instead of moving into per-destination
    /// buffers. `usize::MAX` never, 1 always: for measurement.
    pub slices_from: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            target_bytes: 256 << 10,
            jitter: 0.25,
            memory_limit: 64 << 20,
            replicate_nulls_and_any: false,
            seed: 0,
            flush: Flush::AtTarget,
            target_rows: None,
            slices_from: SLICES_FROM,
        }
    }
}

impl WriterOptions {
    /// Sets [`target_bytes`](Self::target_bytes).
    pub fn with_target_bytes(mut self, bytes: usize) -> Self {
        self.target_bytes = bytes;
        self
    }

    /// Sets [`jitter`](Self::jitter).
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// Sets [`memory_limit`](Self::memory_limit).
    pub fn with_memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Sets [`replicate_nulls_and_any`](Self::replicate_nulls_and_any).
    pub fn with_replicate_nulls_and_any(mut self, on: bool) -> Self {
        self.replicate_nulls_and_any = on;
        self
    }

    /// Sets [`seed`](Self::seed).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`target_rows`](Self::target_rows).
    pub fn with_target_rows(mut self, rows: usize) -> Self {
        self.target_rows = Some(rows);
        self
    }

    /// Sets [`flush`](Self::flush).
    pub fn with_flush(mut self, flush: Flush) -> Self {
        self.flush = flush;
        self
    }

    /// Sets [`slices_from`](Self::slices_from).
    pub fn with_slices_from(mut self, destinations: usize) -> Self {
        self.slices_from = destinations;
        self
    }

    /// Checks that the options can work.
    ///
    /// # Errors
    /// [`WriterError::InvalidOption`] naming the option and its value: a zero target, a
    /// jitter outside 0..=0.9, a memory limit below the target, a row target of 0.
    pub fn validate(&self) -> Result<()> {
        let invalid = |what: String| Err(WriterError::InvalidOption(what));
        if self.target_bytes == 0 {
            return invalid("target_bytes must be at least 1, got 0".into());
        }
        if self.target_rows == Some(0) {
            return invalid("target_rows must be at least 1, got 0".into());
        }
        if !(0.0..=0.9).contains(&self.jitter) {
            return invalid(format!(
                "jitter must be between 0 and 0.9, got {}",
                self.jitter
            ));
        }
        if self.memory_limit < self.target_bytes {
            return invalid(format!(
                "memory_limit ({} bytes) must be at least target_bytes ({} bytes)",
                self.memory_limit, self.target_bytes
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_options_are_named() {
        let cases = [
            (
                WriterOptions::default().with_target_bytes(0),
                "target_bytes",
            ),
            (WriterOptions::default().with_jitter(-0.1), "jitter"),
            (WriterOptions::default().with_target_rows(0), "target_rows"),
            (WriterOptions::default().with_jitter(f64::NAN), "jitter"),
            (
                WriterOptions::default()
                    .with_target_bytes(10 << 20)
                    .with_memory_limit(1 << 20),
                "memory_limit",
            ),
        ];
        for (options, name) in cases {
            let err = options.validate().unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
        }
        assert!(WriterOptions::default().validate().is_ok());
    }
}

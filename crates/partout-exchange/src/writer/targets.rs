//! [`Targets`]: when each destination of a writer that flushes at target flushes.

use crate::options::WriterOptions;

/// Each destination's flush target: within ±jitter of a base target, drawn anew after every
/// flush (xorshift draws: no allocation, no dependency, reproducible from the seed). The base
/// is the smaller of [`WriterOptions::target_bytes`] and half the memory limit's share of each
/// destination met so far (one that has held rows): a writer over many possible destinations
/// of which few are met (values not yet seen, partitioning by value) flushes as a writer
/// over those few would, instead of in slivers sized for all of them. Past the memory limit
/// the largest flush first whatever their targets, so the limit holds as more are met.
#[derive(Debug)]
pub(super) struct Targets {
    /// Each destination's target; [`UNMET`] before it is met.
    targets: Vec<usize>,
    target_bytes: usize,
    memory_limit: usize,
    /// Destinations met.
    met: usize,
    jitter: f64,
    rng: u64,
}

/// The target of a destination not met yet.
const UNMET: usize = 0;

impl Targets {
    /// Targets for `n` destinations under `options`, none met.
    pub(super) fn new(n: usize, options: &WriterOptions) -> Self {
        Self {
            targets: vec![UNMET; n],
            target_bytes: options.target_bytes,
            memory_limit: options.memory_limit,
            met: 0,
            jitter: options.jitter,
            rng: options.seed ^ 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// The base target were all `n` destinations met (a writer holding runs of every
    /// destination at once).
    pub(super) fn share_of_all(n: usize, options: &WriterOptions) -> usize {
        options
            .target_bytes
            .min(options.memory_limit / (2 * n.max(1)))
            .max(1)
    }

    /// Counts destination `p` as met (it holds rows), if it was not.
    pub(super) fn meet(&mut self, p: usize) {
        if self.targets[p] == UNMET {
            self.met += 1;
            // Drawn when first asked, once every destination met with it is counted.
            self.targets[p] = usize::MAX;
        }
    }

    /// Destination `p`'s target (`p` met).
    pub(super) fn of(&mut self, p: usize) -> usize {
        if self.targets[p] == usize::MAX || self.targets[p] == UNMET {
            self.meet(p);
            self.targets[p] = self.draw();
        }
        self.targets[p]
    }

    /// Draws destination `p`'s next target.
    pub(super) fn redraw(&mut self, p: usize) {
        self.meet(p);
        self.targets[p] = self.draw();
    }

    /// A target within ±jitter of the base target (never [`UNMET`]).
    fn draw(&mut self) -> usize {
        let base = self
            .target_bytes
            .min(self.memory_limit / (2 * self.met.max(1)))
            .max(1);
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let unit = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        let factor = 1.0 + self.jitter * (2.0 * unit - 1.0);
        ((base as f64 * factor) as usize).clamp(1, usize::MAX - 1)
    }
}

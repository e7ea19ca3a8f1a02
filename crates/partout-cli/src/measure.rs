//! Timing for the benchmark suites: contenders run in alternation, sample after sample, so a
//! noisy machine slows them alike; figures are medians.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// How long and how often to measure.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Samples per contender.
    pub samples: usize,
    /// Shortest sample: enough iterations are batched into one to last this long.
    pub min_sample: Duration,
}

impl Budget {
    /// The default budget of the benchmark suites.
    pub const FULL: Budget = Budget {
        samples: 15,
        min_sample: Duration::from_millis(3),
    };
    /// A quick look (CI smoke runs).
    pub const QUICK: Budget = Budget {
        samples: 3,
        min_sample: Duration::from_micros(300),
    };
}

/// Median nanoseconds per call of each contender, measured in alternation.
pub fn compare(budget: Budget, contenders: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    // Warm up and calibrate: how many calls make one sample.
    let iters: Vec<u32> = contenders
        .iter_mut()
        .map(|f| {
            f();
            let start = Instant::now();
            f();
            let once = start.elapsed().max(Duration::from_nanos(50));
            (budget.min_sample.as_nanos() / once.as_nanos()).clamp(1, 1_000_000) as u32
        })
        .collect();
    let mut samples = vec![Vec::with_capacity(budget.samples); contenders.len()];
    for _ in 0..budget.samples {
        for (i, f) in contenders.iter_mut().enumerate() {
            let start = Instant::now();
            for _ in 0..iters[i] {
                f();
            }
            samples[i].push(start.elapsed().as_nanos() as f64 / iters[i] as f64);
        }
    }
    samples.into_iter().map(median).collect()
}

/// The median of some samples.
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    }
}

/// Keeps a result alive so the optimiser cannot drop the work that made it.
pub fn keep<T>(value: T) {
    black_box(value);
}

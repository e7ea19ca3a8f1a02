//! Timing for the suites: contenders run in alternation, round after round, so a noisy machine
//! slows them alike; figures are medians.
//!
//! ```text
//!            contender 0   contender 1   contender 2
//! round 0        1st           2nd           3rd
//! round 1        3rd           1st           2nd
//! round 2        2nd           3rd           1st      -> samples[i]: one per round
//! ```
//!
//! [`alternate`] is that loop, for runs that last long enough to time one by one (the writer,
//! the demo, `e2e`); [`compare`] drives it with calibrated batches of calls, for kernels that
//! take microseconds.

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Runs `contenders` contenders in turn, round after round, and returns each one's samples in
/// round order: `run(i)` runs contender `i` once and returns what it measured.
///
/// Each round starts with the next contender: what running right after another costs (its
/// freed memory given back, caches cold) falls on all in turn, and a burst of noise on the
/// machine hits one sample of several contenders rather than every sample of one.
///
/// # Errors
/// The first error `run` returns; no round runs after it.
///
/// ```
/// use partout_bench::harness::alternate;
/// let mut order = Vec::new();
/// let samples = alternate(3, 2, |i| {
///     order.push(i);
///     Ok::<_, std::convert::Infallible>(i * 10 + order.len())
/// })
/// .unwrap();
/// assert_eq!(order, [0, 1, 1, 0, 0, 1]);
/// assert_eq!(samples, [vec![1, 4, 5], vec![12, 13, 16]]);
/// ```
pub fn alternate<S, E>(
    rounds: usize,
    contenders: usize,
    mut run: impl FnMut(usize) -> Result<S, E>,
) -> Result<Vec<Vec<S>>, E> {
    let mut samples: Vec<Vec<S>> = (0..contenders)
        .map(|_| Vec::with_capacity(rounds))
        .collect();
    for round in 0..rounds {
        for k in 0..contenders {
            let i = (round + k) % contenders;
            samples[i].push(run(i)?);
        }
    }
    Ok(samples)
}

/// Runs `work` once; returns the wall-clock seconds it took beside its result.
///
/// # Errors
/// The error of `work`.
pub fn time<T, E>(work: impl FnOnce() -> Result<T, E>) -> Result<(f64, T), E> {
    let start = Instant::now();
    let value = work()?;
    Ok((start.elapsed().as_secs_f64(), value))
}

/// How long and how often [`compare`] measures.
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

    /// [`Budget::QUICK`] when `quick`, else [`Budget::FULL`].
    pub fn new(quick: bool) -> Budget {
        if quick { Budget::QUICK } else { Budget::FULL }
    }
}

/// Median nanoseconds per call of each contender, measured in alternation ([`alternate`]):
/// each is called once to warm up and once to calibrate how many calls make a sample of at
/// least `budget.min_sample`.
pub fn compare(budget: Budget, contenders: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let calls: Vec<u32> = contenders
        .iter_mut()
        .map(|f| {
            f();
            let start = Instant::now();
            f();
            let once = start.elapsed().max(Duration::from_nanos(50));
            (budget.min_sample.as_nanos() / once.as_nanos()).clamp(1, 1_000_000) as u32
        })
        .collect();
    let Ok(samples) = alternate::<_, Infallible>(budget.samples, contenders.len(), |i| {
        let start = Instant::now();
        for _ in 0..calls[i] {
            contenders[i]();
        }
        Ok(start.elapsed().as_nanos() as f64 / f64::from(calls[i]))
    });
    samples.into_iter().map(median).collect()
}

/// The median of some samples (NaN for none).
///
/// ```
/// use partout_bench::harness::median;
/// assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
/// assert!(median(Vec::new()).is_nan());
/// ```
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

/// The median of `measure` over each contender's samples (as [`alternate`] returns them).
///
/// ```
/// use partout_bench::harness::medians;
/// let samples = [vec![(1.0, 'a'), (3.0, 'b'), (2.0, 'c')], vec![(5.0, 'd')]];
/// assert_eq!(medians(&samples, |s| s.0), [2.0, 5.0]);
/// ```
pub fn medians<S>(samples: &[Vec<S>], measure: impl Fn(&S) -> f64) -> Vec<f64> {
    samples
        .iter()
        .map(|s| median(s.iter().map(&measure).collect()))
        .collect()
}

/// Keeps a result alive so the optimiser cannot drop the work that made it.
pub fn keep<T>(value: T) {
    black_box(value);
}

#[cfg(test)]
mod tests {
    use super::{Budget, alternate, compare};

    #[test]
    fn alternate_stops_at_the_first_error() {
        let mut runs = 0;
        let result = alternate(5, 3, |i| {
            runs += 1;
            if runs == 4 { Err(i) } else { Ok(()) }
        });
        // Round 1 starts with contender 1.
        assert_eq!(result, Err(1));
        assert_eq!(runs, 4);
    }

    #[test]
    fn alternate_with_no_rounds_or_contenders_runs_nothing() {
        let mut never = |_: usize| -> Result<(), ()> { panic!("ran") };
        assert_eq!(alternate(0, 2, &mut never), Ok(vec![vec![], vec![]]));
        assert_eq!(alternate(3, 0, &mut never), Ok(vec![]));
    }

    #[test]
    fn compare_calls_each_contender_and_returns_one_median_each() {
        let (mut a, mut b) = (0u32, 0u32);
        let times = compare(
            Budget::QUICK,
            &mut [&mut || a += 1, &mut || {
                b += 1;
                std::thread::sleep(std::time::Duration::from_micros(200));
            }],
        );
        assert_eq!(times.len(), 2);
        assert!(times.iter().all(|t| t.is_finite() && *t > 0.0), "{times:?}");
        assert!(times[1] > times[0], "{times:?}");
        // Warm-up, calibration, then at least one call per sample.
        assert!(a >= 2 + 3 && b >= 2 + 3);
    }
}

//! What the suites print: stdout writes that hand a closed pipe back as an error, one JSON
//! object per line, and the line every suite that times partout beside a baseline shares.

use anyhow::{Context, Result};
use serde_json::json;

/// `print!` to stdout, returning the write error (a closed pipe) instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)?
    }};
}

/// `println!` to stdout, returning the write error (a closed pipe) instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

pub(crate) use {out, outln};

/// Prints `object` as one line of JSON.
///
/// # Errors
/// When stdout is closed (or the object cannot be encoded).
pub fn print_json(object: &serde_json::Value) -> Result<()> {
    outln!(
        "{}",
        serde_json::to_string(object).context("encoding JSON")?
    );
    Ok(())
}

/// One case timed beside one baseline: a line of the suites' common JSON contract,
/// `{"suite", "case", "ours_ns", "baseline", "baseline_ns", "ratio", "rows", "bytes"}`.
#[derive(Debug, Clone, Copy)]
pub struct Comparison<'a> {
    /// The suite (`scatter`, `ids`).
    pub suite: &'a str,
    /// The case, named as the suite's table names it.
    pub case: &'a str,
    /// partout's median nanoseconds.
    pub ours_ns: f64,
    /// The baseline's name.
    pub baseline: &'a str,
    /// The baseline's median nanoseconds.
    pub baseline_ns: f64,
    /// Rows the case handles per call.
    pub rows: usize,
    /// Bytes the case handles per call.
    pub bytes: usize,
}

impl Comparison<'_> {
    /// The baseline's time over ours: above 1, partout is faster.
    pub fn ratio(&self) -> f64 {
        self.baseline_ns / self.ours_ns
    }

    /// The JSON line: times rounded to whole nanoseconds, the ratio to two decimals.
    ///
    /// ```
    /// use partout_bench::report::Comparison;
    /// let line = Comparison {
    ///     suite: "ids",
    ///     case: "hash/Int64/P16",
    ///     ours_ns: 1000.4,
    ///     baseline: "datafusion_foldhash",
    ///     baseline_ns: 2345.6,
    ///     rows: 8192,
    ///     bytes: 65536,
    /// }
    /// .to_json();
    /// assert_eq!(line["ours_ns"], 1000.0);
    /// assert_eq!(line["baseline_ns"], 2346.0);
    /// assert_eq!(line["ratio"], 2.34);
    /// assert_eq!(line["rows"], 8192);
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "suite": self.suite,
            "case": self.case,
            "ours_ns": self.ours_ns.round(),
            "baseline": self.baseline,
            "baseline_ns": self.baseline_ns.round(),
            "ratio": (self.ratio() * 100.0).round() / 100.0,
            "rows": self.rows,
            "bytes": self.bytes,
            "cpu": partout_testkit::machine(),
        })
    }

    /// Prints [`Comparison::to_json`] as one line.
    ///
    /// # Errors
    /// When stdout is closed.
    pub fn print_json(&self) -> Result<()> {
        print_json(&self.to_json())
    }
}

//! The file-job figure, `files.svg`, from `bench/e2e.py --json` (one result per destination
//! count): seconds and peak memory against destinations, partout beside DuckDB and Polars.

use crate::figure::{Figure, Panel, finish, one_cpu, push};
use anyhow::{Context, Result, ensure};
use serde_json::Value;

/// The contenders of `bench/e2e.py`, by its summary's keys, as the legend names them.
const FILE_CONTENDERS: [(&str, &str); 4] = [
    ("partout-2t", "partout, 2 threads"),
    ("duckdb", "DuckDB, 2 threads"),
    ("polars", "Polars, 2 threads"),
    ("partout-1t", "partout, 1 thread"),
];

/// The file-job figure from `bench/e2e.py --json` results (one per destination count): the
/// median seconds, and the median peak memory, against destinations.
///
/// # Errors
/// A result missing a field, results from two CPUs, or a count measured twice.
pub fn files_figure(results: &[Value], date: &str) -> Result<Figure> {
    ensure!(!results.is_empty(), "no result of bench/e2e.py");
    let mut time = Panel {
        title: "time".into(),
        x_desc: "destinations".into(),
        y_desc: "seconds, median (lower is faster)".into(),
        log_y: false,
        categories: Vec::new(),
        series: Vec::new(),
    };
    let mut memory = Panel {
        title: "peak memory".into(),
        x_desc: "destinations".into(),
        y_desc: "peak RSS, MiB (log scale)".into(),
        log_y: true,
        categories: Vec::new(),
        series: Vec::new(),
    };
    let mut cpus = Vec::new();
    let mut rows = None;
    for (i, result) in results.iter().enumerate() {
        let n = result["partitions"]
            .as_f64()
            .with_context(|| format!("result {}: no partitions", i + 1))?;
        cpus.push(
            result["machine"]["cpu"]
                .as_str()
                .with_context(|| format!("result {}: no machine.cpu", i + 1))?
                .to_string(),
        );
        rows.get_or_insert(result["input"]["rows"].as_f64().unwrap_or_default());
        for (key, name) in FILE_CONTENDERS {
            let summary = &result["summary"][key];
            if summary.is_null() {
                continue;
            }
            let number = |field: &str| {
                summary[field]
                    .as_f64()
                    .with_context(|| format!("result {}: {key} has no {field}", i + 1))
            };
            push(&mut time.series, name, (n, number("median_s")?));
            push(
                &mut memory.series,
                name,
                (n, number("peak_rss_mib_median")?),
            );
        }
    }
    let cpu = one_cpu(cpus.iter().map(String::as_str))?;
    finish(&mut time)?;
    finish(&mut memory)?;
    Ok(Figure {
        title: format!(
            "lineitem ({:.1} M rows) Parquet into N Parquet files ({cpu}, {date})",
            rows.unwrap_or_default() / 1e6
        ),
        panels: vec![time, memory],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_figure_reads_time_and_memory_per_contender() {
        let result = |n: u32, partout_s: f64, duckdb_mib: f64| {
            serde_json::json!({
                "machine": {"cpu": "X"}, "input": {"rows": 6_001_215}, "partitions": n,
                "summary": {
                    "partout-2t": {"median_s": partout_s, "peak_rss_mib_median": 150.0},
                    "duckdb": {"median_s": 3.0, "peak_rss_mib_median": duckdb_mib},
                },
            })
        };
        let figure = files_figure(&[result(64, 2.0, 1500.0), result(16, 1.5, 900.0)], "d").unwrap();
        let [time, memory] = &figure.panels[..] else {
            panic!("two panels")
        };
        assert_eq!(time.series[0].name, "partout, 2 threads");
        assert_eq!(time.series[0].points, vec![(16.0, 1.5), (64.0, 2.0)]);
        assert_eq!(memory.series[1].name, "DuckDB, 2 threads");
        assert_eq!(memory.series[1].points, vec![(16.0, 900.0), (64.0, 1500.0)]);
        assert!(memory.log_y);
    }
}

//! The partition-by figure, `partition_by.svg`, from `bench/partition_by.py --json`: per
//! partition key (its distinct values), grouped bars of seconds and of peak memory, partout
//! beside DuckDB, Polars and pyarrow.

use crate::figure::{Figure, Panel, Series, finish};
use anyhow::{Context, Result, ensure};
use serde_json::Value;

/// The contenders of `bench/partition_by.py`, by its results' keys, as the legend names them,
/// with their colours: partout's, DuckDB's and Polars' of the files figure, and for pyarrow
/// one no other figure has (orange is partout on 1 thread there).
const PARTITION_BY_CONTENDERS: [(&str, &str, usize); 4] = [
    ("partout", "partout", 0),
    ("duckdb", "DuckDB", 1),
    ("polars", "Polars", 2),
    ("pyarrow", "pyarrow", 5),
];

/// `n` with a comma between thousands: 2,526.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The partition-by figure from `bench/partition_by.py --json`: per partition key (its
/// distinct values), the median seconds and the median peak memory of every contender, as
/// grouped bars. A contender left out of a case (pyarrow past `PYARROW_MAX_VALUES`), or of
/// the run, keeps its place, marked "not run".
///
/// # Errors
/// No case, a case without its name or contenders, or a contender run without its
/// `median_s` or `peak_rss_mib`.
pub fn partition_by_figure(result: &Value, date: &str) -> Result<Figure> {
    let cases = result["results"].as_array().context("no results")?;
    ensure!(!cases.is_empty(), "no case measured");
    let panel = |title: &str, y_desc: &str, log_y| Panel {
        title: title.into(),
        x_desc: String::new(),
        y_desc: y_desc.into(),
        log_y,
        categories: Vec::new(),
        series: PARTITION_BY_CONTENDERS
            .iter()
            .map(|(_, name, colour)| Series {
                name: (*name).to_string(),
                points: Vec::new(),
                colour: *colour,
            })
            .collect(),
    };
    let mut time = panel("time", "seconds, median (lower is faster)", false);
    let mut memory = panel("peak memory", "peak RSS, MiB, median (log scale)", true);
    // Per contender, the most runs of any case.
    let mut runs = [0; PARTITION_BY_CONTENDERS.len()];
    let mut columns = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let name = case["case"]
            .as_str()
            .with_context(|| format!("result {}: no case", i + 1))?;
        let contenders = case["contenders"]
            .as_object()
            .with_context(|| format!("{name}: no contenders"))?;
        let x = i as f64;
        let mut values = None;
        for (slot, (key, _, _)) in PARTITION_BY_CONTENDERS.iter().enumerate() {
            let summary = contenders.get(*key).unwrap_or(&Value::Null);
            if summary.is_null() || summary["runs"].as_u64() == Some(0) {
                continue;
            }
            let number = |field: &str| {
                summary[field]
                    .as_f64()
                    .with_context(|| format!("{name}: {key} has no {field}"))
            };
            time.series[slot].points.push((x, number("median_s")?));
            memory.series[slot]
                .points
                .push((x, number("peak_rss_mib")?));
            runs[slot] = runs[slot].max(summary["runs"].as_u64().unwrap_or_default());
            values = values.or(summary["values"].as_u64());
        }
        // The distinct values the outputs were checked to hold; the case's name without.
        time.categories.push(values.map_or_else(
            || name.to_string(),
            |n| format!("{} value{}", thousands(n), if n == 1 { "" } else { "s" }),
        ));
        if let Some(cols) = case["columns"].as_array() {
            let cols: Vec<&str> = cols.iter().filter_map(Value::as_str).collect();
            columns.push(cols.join("+"));
        }
    }
    time.x_desc = format!("partitioned by {}", columns.join(" | "));
    memory.x_desc = time.x_desc.clone();
    memory.categories = time.categories.clone();
    // The median of fewer runs than the others' (pyarrow's one) is named so.
    if let Some(rounds) = result["rounds"].as_u64() {
        for (slot, runs) in runs.into_iter().enumerate() {
            if runs > 0 && runs < rounds {
                let plural = if runs == 1 { "" } else { "s" };
                for panel in [&mut time, &mut memory] {
                    let series = &mut panel.series[slot];
                    series.name = format!("{} ({runs} run{plural})", series.name);
                }
            }
        }
    }
    finish(&mut time)?;
    finish(&mut memory)?;
    let input = result["input"].as_str().unwrap_or("lineitem");
    // bench/e2e.sh names its input lineitem-sf{SF}.parquet.
    let table = match input
        .strip_suffix(".parquet")
        .and_then(|stem| stem.rsplit_once("-sf"))
    {
        Some((table, sf)) => format!("{table} SF {sf}"),
        None => input.to_string(),
    };
    let cpu = result["machine"]["cpu"]
        .as_str()
        .context("no machine.cpu")?;
    let threads = result["threads"].as_u64().context("no threads")?;
    // A run may say when it was measured (the results' `date` file dates the others), and
    // what was (the object store's, writing to a server).
    let date = result["date"].as_str().unwrap_or(date);
    let what = result["title"]
        .as_str()
        .unwrap_or("partitioned by value, a directory per value, Snappy Parquet");
    Ok(Figure {
        title: format!("{table} {what} ({cpu}, {threads} threads, {date})"),
        panels: vec![time, memory],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::{partition_by_result, partition_by_sample};

    #[test]
    fn partition_by_bars_are_per_case_and_a_contender_not_run_has_none() {
        let figure = partition_by_figure(&partition_by_sample(), "2026-11-26").unwrap();
        let [time, memory] = &figure.panels[..] else {
            panic!("two panels")
        };
        assert_eq!(
            time.categories,
            ["4 values", "2,526 values", "10,000 values"],
            "the checked value counts, not the cases' names"
        );
        let names: Vec<&str> = time.series.iter().map(|s| s.name.as_str()).collect();
        // Every contender keeps its place, Polars not run at all and spark not drawn.
        assert_eq!(names, ["partout", "DuckDB", "Polars", "pyarrow (1 run)"]);
        let colours: Vec<usize> = memory.series.iter().map(|s| s.colour).collect();
        assert_eq!(colours, [0, 1, 2, 5]);
        assert_eq!(time.series[0].points, [(0.0, 3.3), (1.0, 6.1), (2.0, 7.9)]);
        assert_eq!(time.series[1].points, [(0.0, 2.1), (2.0, 10.6)]);
        assert!(time.series[2].points.is_empty());
        assert_eq!(memory.series[3].points, [(0.0, 1200.0), (1.0, 9200.0)]);
        assert!(memory.log_y && !time.log_y);
        for text in [
            "lineitem SF 1",
            "Snappy Parquet",
            "CPU X",
            "2 threads",
            "2026-11-26",
        ] {
            assert!(figure.title.contains(text), "{text:?} in {}", figure.title);
        }
        let mut told = partition_by_sample();
        told["title"] = "into a store".into();
        told["date"] = "2026-11-29".into();
        let title = partition_by_figure(&told, "d").unwrap().title;
        assert!(title.starts_with("lineitem SF 1 into a store ("), "{title}");
        assert!(title.ends_with(", 2026-11-29)"), "{title}");
        let mut broken = partition_by_sample();
        broken["results"][2]["contenders"]["duckdb"]
            .as_object_mut()
            .unwrap()
            .remove("peak_rss_mib");
        let error = partition_by_figure(&broken, "d").unwrap_err().to_string();
        assert!(error.contains("duckdb has no peak_rss_mib"), "{error}");
        let error = partition_by_figure(&partition_by_result(&[]), "d").unwrap_err();
        assert!(error.to_string().contains("no case"), "{error}");
    }
}

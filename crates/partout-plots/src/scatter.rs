//! The scatter figure, `scatter.svg`, from `partout bench scatter --json`: per column kind,
//! arrow's grouped take's time over partout's against destinations.

use crate::figure::{Figure, Panel, finish, one_cpu, push};
use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use std::collections::BTreeMap;

/// The scatter figure from the JSON lines of `partout bench scatter --json`: per column kind,
/// arrow's grouped take's time over partout's against destinations, the geometric mean over
/// the kind's cases at that count (1 and 10 columns, with and without nulls).
///
/// # Errors
/// A scatter line missing a field or with a case not named `KIND_{C}Cols_P{N}_{nulls}`, or
/// results from two CPUs.
pub fn scatter_figure(lines: &str, date: &str) -> Result<Figure> {
    // (kind, destinations) -> the ratios' logarithms.
    let mut logs: BTreeMap<(String, u64), Vec<f64>> = BTreeMap::new();
    let mut kinds: Vec<String> = Vec::new();
    let mut cpus = Vec::new();
    for (i, line) in lines.lines().enumerate() {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if value["suite"] != "scatter" || value["baseline"] != "grouped_take" {
            continue;
        }
        let what = || format!("line {}", i + 1);
        let case = value["case"]
            .as_str()
            .with_context(|| format!("{}: no case", what()))?;
        let parts: Vec<&str> = case.rsplitn(4, '_').collect();
        let [_, p, _, kind] = parts[..] else {
            bail!("{}: case {case:?} is not KIND_CCols_PN_nulls", what());
        };
        let n: u64 = p
            .strip_prefix('P')
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("{}: case {case:?} names no destinations", what()))?;
        let (ours, theirs) = (value["ours_ns"].as_f64(), value["baseline_ns"].as_f64());
        let (Some(ours), Some(theirs)) = (ours, theirs) else {
            bail!("{}: no ours_ns or baseline_ns", what());
        };
        cpus.push(
            value["cpu"]
                .as_str()
                .with_context(|| format!("{}: no cpu", what()))?
                .to_string(),
        );
        if !kinds.iter().any(|k| k == kind) {
            kinds.push(kind.to_string());
        }
        logs.entry((kind.to_string(), n))
            .or_default()
            .push((theirs / ours).ln());
    }
    ensure!(!logs.is_empty(), "no result of `partout bench scatter`");
    let cpu = one_cpu(cpus.iter().map(String::as_str))?;
    let mut panel = Panel {
        title: "arrow's grouped take ÷ partout (above 1: partout faster)".into(),
        x_desc: "destinations".into(),
        y_desc: "time ratio, geometric mean of the kind's cases".into(),
        log_y: false,
        categories: Vec::new(),
        series: Vec::new(),
    };
    for kind in &kinds {
        for ((k, n), logs) in &logs {
            if k == kind {
                let mean = logs.iter().sum::<f64>() / logs.len() as f64;
                push(&mut panel.series, kind, (*n as f64, mean.exp()));
            }
        }
    }
    finish(&mut panel)?;
    Ok(Figure {
        title: format!("partout bench scatter, 10,000-row batches ({cpu}, {date})"),
        panels: vec![panel],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_points_are_geometric_means_of_the_kinds_cases() {
        let line = |case: &str, baseline: &str, ours: f64, theirs: f64| {
            serde_json::json!({
                "suite": "scatter", "case": case, "baseline": baseline, "ours_ns": ours,
                "baseline_ns": theirs, "cpu": "X",
            })
            .to_string()
        };
        let lines = [
            line("VARCHAR_VIEW_1Cols_P16_noNulls", "grouped_take", 10.0, 40.0),
            line(
                "VARCHAR_VIEW_10Cols_P16_halfNulls",
                "grouped_take",
                10.0,
                10.0,
            ),
            line(
                "VARCHAR_VIEW_1Cols_P16_noNulls",
                "take_per_destination",
                10.0,
                90.0,
            ),
            line("BIGINT_1Cols_P4_noNulls", "grouped_take", 10.0, 15.0),
        ]
        .join("\n");
        let figure = scatter_figure(&lines, "d").unwrap();
        let series = &figure.panels[0].series;
        assert_eq!(series[0].name, "VARCHAR_VIEW");
        // The geometric mean of 4x and 1x, the other baseline left out.
        assert!((series[0].points[0].1 - 2.0).abs() < 1e-9, "{series:?}");
        assert_eq!(series[1].points, vec![(4.0, 1.5)]);
        let error = scatter_figure(&line("P16", "grouped_take", 1.0, 1.0), "d").unwrap_err();
        assert!(error.to_string().contains("is not KIND"), "{error}");
    }
}

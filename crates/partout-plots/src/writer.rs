//! The writer figure, `writer.svg`, from `partout bench writer --json`: per codec, a panel of
//! nanoseconds per input row against destinations, partout beside each peer and the floors.

use crate::figure::{Figure, Panel, finish, one_cpu, push};
use anyhow::{Context, Result, ensure};
use serde_json::Value;
use std::collections::BTreeMap;

/// The contenders of `partout bench writer` drawn, in legend order; the floors ("partition
/// only", "codec alone", named "lz4 alone" in earlier results) are drawn in their codec's
/// panel.
const WRITER_CONTENDERS: [&str; 7] = [
    "partout",
    "datafusion way",
    "per-slice writer",
    "comet way",
    "partition only",
    "codec alone",
    "lz4 alone",
];

/// The writer figure from the JSON lines of `partout bench writer --json` runs (other lines
/// are skipped): per codec, nanoseconds per input row against destinations.
///
/// # Errors
/// A writer line missing a field, results from two CPUs, or a case measured twice.
pub fn writer_figure(lines: &str, date: &str) -> Result<Figure> {
    let mut panels: BTreeMap<String, Panel> = BTreeMap::new();
    let mut cpus = Vec::new();
    let mut sf = None;
    for (i, line) in lines.lines().enumerate() {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if value["suite"] != "writer" {
            continue;
        }
        let field = |name: &str| {
            value[name]
                .as_f64()
                .with_context(|| format!("line {}: no number {name}", i + 1))
        };
        let text = |name: &str| {
            value[name]
                .as_str()
                .with_context(|| format!("line {}: no text {name}", i + 1))
        };
        let contender = text("contender")?;
        if !WRITER_CONTENDERS.contains(&contender) {
            continue;
        }
        cpus.push(text("cpu")?.to_string());
        sf.get_or_insert(field("sf")?);
        let codec = text("codec")?;
        let panel = panels.entry(codec.to_string()).or_insert_with(|| Panel {
            title: match codec {
                "none" => "uncompressed".to_string(),
                other => match other.strip_prefix("zstd:") {
                    Some(level) => format!("ZSTD level {level}"),
                    None => other.to_uppercase(),
                },
            },
            x_desc: "destinations".into(),
            y_desc: "ns per input row (lower is faster)".into(),
            log_y: false,
            categories: Vec::new(),
            series: Vec::new(),
        });
        let ns_per_row = field("seconds")? * 1e9 / field("rows")?;
        push(
            &mut panel.series,
            contender,
            (field("partitions")?, ns_per_row),
        );
    }
    ensure!(!panels.is_empty(), "no result of `partout bench writer`");
    let cpu = one_cpu(cpus.iter().map(String::as_str))?;
    // Uncompressed first.
    let mut panels: Vec<Panel> = panels.into_values().collect();
    panels.sort_by_key(|p| p.title != "uncompressed");
    for panel in &mut panels {
        panel.series.sort_by_key(|s| {
            WRITER_CONTENDERS
                .iter()
                .position(|c| *c == s.name)
                .unwrap_or(usize::MAX)
        });
        finish(panel)?;
    }
    Ok(Figure {
        title: format!(
            "partout bench writer: lineitem SF {} hashed into IPC streams ({cpu}, {date})",
            sf.unwrap_or_default()
        ),
        panels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::writer_line;

    #[test]
    fn writer_points_are_ns_per_row_by_destinations_in_order() {
        let lines = [
            writer_line("partout", "none", 200, 0.06, "X"),
            "not json".to_string(),
            writer_line("partout", "none", 16, 0.03, "X"),
            writer_line("datafusion way", "lz4", 16, 0.12, "X"),
            writer_line("partout scatter+copy", "none", 16, 0.01, "X"),
        ]
        .join("\n");
        let figure = writer_figure(&lines, "2026-11-26").unwrap();
        assert_eq!(figure.panels.len(), 2);
        assert_eq!(figure.panels[0].title, "uncompressed");
        let partout = &figure.panels[0].series;
        assert_eq!(partout.len(), 1, "scatter+copy is not drawn");
        assert_eq!(partout[0].points, vec![(16.0, 50.0), (200.0, 100.0)]);
        assert_eq!(figure.panels[1].series[0].points, vec![(16.0, 200.0)]);
        assert!(figure.title.contains("X, 2026-11-26"), "{}", figure.title);
    }

    #[test]
    fn results_of_two_machines_or_a_case_twice_are_refused() {
        let two = [
            writer_line("partout", "none", 16, 0.03, "X"),
            writer_line("partout", "none", 64, 0.03, "Y"),
        ]
        .join("\n");
        let error = writer_figure(&two, "d").unwrap_err().to_string();
        assert!(error.contains("more than one machine"), "{error}");
        let twice = [
            writer_line("partout", "none", 16, 0.03, "X"),
            writer_line("partout", "none", 16, 0.04, "X"),
        ]
        .join("\n");
        let error = writer_figure(&twice, "d").unwrap_err().to_string();
        assert!(error.contains("measured twice at 16"), "{error}");
    }
}

//! partout-plots: the figures of BENCHMARKS.md and the README, drawn as SVG from the JSON the
//! benchmarks print.
//!
//! | figure | from | shows |
//! |---|---|---|
//! | `writer.svg` | `partout bench writer --json`, one run per destination count | ns per row against destinations, uncompressed and LZ4, partout beside each peer and the floor |
//! | `files.svg` | `bench/e2e.py --json`, one file per destination count | seconds and peak memory against destinations, partout beside DuckDB and Polars |
//!
//! A figure holds the results of one machine only: results from two CPUs in one figure are
//! refused, since their ratios cannot be compared.

#![forbid(unsafe_code)]

use anyhow::{Context, Result, bail, ensure};
use plotters::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One line of a panel: a contender's points, `(x, y)`, in increasing `x`.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The contender, as the legend names it.
    pub name: String,
    /// Its points.
    pub points: Vec<(f64, f64)>,
}

/// One chart of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The chart's caption.
    pub title: String,
    /// What the x axis counts (always on a log scale: destinations span 16 to thousands).
    pub x_desc: String,
    /// What the y axis measures.
    pub y_desc: String,
    /// A log scale on the y axis (for quantities that differ by orders of magnitude).
    pub log_y: bool,
    /// Its lines.
    pub series: Vec<Series>,
}

/// A figure: panels side by side under one title naming the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The figure's title, with the machine and date.
    pub title: String,
    /// Its panels, left to right.
    pub panels: Vec<Panel>,
}

/// Adds `(x, y)` to the series `name` of `series` (made when first named).
fn push(series: &mut Vec<Series>, name: &str, point: (f64, f64)) {
    match series.iter_mut().find(|s| s.name == name) {
        Some(s) => s.points.push(point),
        None => series.push(Series {
            name: name.to_string(),
            points: vec![point],
        }),
    }
}

/// Sorts every series' points by `x`, refusing two points at one `x` (the same case measured
/// twice: which one is the figure's is not for the plot to choose).
fn finish(panel: &mut Panel) -> Result<()> {
    for series in &mut panel.series {
        series.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if let Some(w) = series.points.windows(2).find(|w| w[0].0 == w[1].0) {
            bail!(
                "{}: {} is measured twice at {} {}",
                panel.title,
                series.name,
                w[0].0,
                panel.x_desc
            );
        }
    }
    Ok(())
}

/// The one CPU all `cpus` name, refusing a mix.
fn one_cpu<'a>(cpus: impl IntoIterator<Item = &'a str>) -> Result<String> {
    let mut cpus: Vec<&str> = cpus.into_iter().collect();
    cpus.sort_unstable();
    cpus.dedup();
    match cpus.as_slice() {
        [cpu] => Ok((*cpu).to_string()),
        [] => bail!("no result names its CPU"),
        _ => bail!(
            "results from more than one machine ({}): ratios compare within one run only",
            cpus.join("; ")
        ),
    }
}

/// The contenders of `partout bench writer` drawn, in legend order; the floors ("partition
/// only", "lz4 alone") are drawn in their codec's panel.
const WRITER_CONTENDERS: [&str; 6] = [
    "partout",
    "datafusion way",
    "per-slice writer",
    "comet way",
    "partition only",
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
                other => other.to_uppercase(),
            },
            x_desc: "destinations".into(),
            y_desc: "ns per input row (lower is faster)".into(),
            log_y: false,
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

/// The contenders of `bench/e2e.py`, by its summary's keys, as the legend names them.
const FILE_CONTENDERS: [(&str, &str); 4] = [
    ("partout-1t", "partout, 1 thread"),
    ("partout-2t", "partout, 2 threads"),
    ("duckdb", "DuckDB, 2 threads"),
    ("polars", "Polars, 2 threads"),
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
        series: Vec::new(),
    };
    let mut memory = Panel {
        title: "peak memory".into(),
        x_desc: "destinations".into(),
        y_desc: "peak RSS, MiB (log scale)".into(),
        log_y: true,
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

/// The line colours, one per series in legend order.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0x94, 0x67, 0xbd),
];

/// The range of `values` widened by a margin, for an axis (from 0 on a linear scale).
fn axis(values: impl Iterator<Item = f64> + Clone, log: bool) -> std::ops::Range<f64> {
    let max = values.clone().fold(f64::MIN, f64::max);
    let min = values.fold(f64::MAX, f64::min);
    if log {
        (min / 1.5)..(max * 1.5)
    } else {
        0.0..(max * 1.15)
    }
}

/// Draws one panel on `area`.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let points = || panel.series.iter().flat_map(|s| s.points.iter());
    ensure!(
        points().next().is_some(),
        "{}: nothing to draw",
        panel.title
    );
    let xs = axis(points().map(|p| p.0), true);
    let ys = axis(points().map(|p| p.1), panel.log_y);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&panel.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    // Destinations on a log scale, labelled at the measured counts.
    let ticks: Vec<f64> = {
        let mut t: Vec<f64> = points().map(|p| p.0).collect();
        t.sort_by(f64::total_cmp);
        t.dedup();
        t
    };
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(&panel.x_desc)
                .y_desc(&panel.y_desc)
                .x_labels(ticks.len().max(2))
                .x_label_formatter(&|x| {
                    ticks
                        .iter()
                        .find(|t| (*t / x - 1.0).abs() < 0.05)
                        .map_or(String::new(), |t| format!("{t:.0}"))
                })
                .draw()?;
            for (i, series) in panel.series.iter().enumerate() {
                let colour = COLOURS[i % COLOURS.len()];
                chart
                    .draw_series(LineSeries::new(
                        series.points.iter().copied(),
                        colour.stroke_width(2),
                    ))?
                    .label(series.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                    });
                chart.draw_series(
                    series
                        .points
                        .iter()
                        .map(|&p| Circle::new(p, 3, colour.filled())),
                )?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()?;
        }};
    }
    let x = xs.log_scale().with_key_points(ticks.clone());
    if panel.log_y {
        draw!(builder.build_cartesian_2d(x, ys.log_scale())?);
    } else {
        draw!(builder.build_cartesian_2d(x, ys)?);
    }
    Ok(())
}

/// Draws `figure` as an SVG file at `path`: its panels side by side, 520 pixels wide each.
///
/// # Errors
/// A panel with no point, or a file that cannot be written.
pub fn draw(figure: &Figure, path: &Path) -> Result<()> {
    let width = 520 * figure.panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(&figure.title, ("sans-serif", 16))?;
    let areas = root.split_evenly((1, figure.panels.len().max(1)));
    for (area, panel) in areas.iter().zip(&figure.panels) {
        draw_panel(area, panel)?;
    }
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer_line(contender: &str, codec: &str, n: u32, seconds: f64, cpu: &str) -> String {
        serde_json::json!({
            "suite": "writer", "contender": contender, "codec": codec, "sf": 0.1,
            "partitions": n, "rows": 600_000, "seconds": seconds, "cpu": cpu,
        })
        .to_string()
    }

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

    #[test]
    fn the_svg_has_a_line_and_a_legend_entry_per_series() {
        let lines = [
            writer_line("partout", "none", 16, 0.03, "X"),
            writer_line("partout", "none", 64, 0.04, "X"),
            writer_line("partout", "none", 200, 0.05, "X"),
            writer_line("comet way", "none", 16, 0.06, "X"),
            writer_line("comet way", "none", 64, 0.07, "X"),
            writer_line("comet way", "none", 200, 0.09, "X"),
        ]
        .join("\n");
        let figure = writer_figure(&lines, "d").unwrap();
        let dir = std::env::temp_dir().join(format!("partout-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("writer.svg");
        draw(&figure, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        // Per series, in its colour: its line (three points, rising to the right as its
        // time per row grows: SVG's y grows downwards) and its legend sample.
        for (colour, name) in [("#D62728", "partout"), ("#1F77B4", "comet way")] {
            let lines: Vec<Vec<(f64, f64)>> = svg
                .lines()
                .filter(|l| l.starts_with("<polyline") && l.contains(colour))
                .map(|l| {
                    let points = l
                        .split("points=\"")
                        .nth(1)
                        .unwrap()
                        .split('"')
                        .next()
                        .unwrap();
                    points
                        .split_whitespace()
                        .map(|p| {
                            let (x, y) = p.split_once(',').unwrap();
                            (x.parse().unwrap(), y.parse().unwrap())
                        })
                        .collect()
                })
                .collect();
            assert_eq!(lines.len(), 2, "{name}: {lines:?}");
            let line = lines
                .iter()
                .find(|l| l.len() == 3)
                .expect("a line of three points");
            assert!(
                line.windows(2).all(|w| w[1].0 > w[0].0 && w[1].1 < w[0].1),
                "{name}: {line:?}"
            );
            assert!(svg.contains(&format!("\n{name}\n")), "no legend for {name}");
        }
        assert_eq!(svg.matches("<circle").count(), 6);
        for text in ["uncompressed", "destinations"] {
            assert!(
                svg.contains(&format!("\n{text}\n")),
                "no {text:?} in the SVG"
            );
        }
    }
}

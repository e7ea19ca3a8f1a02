//! partout-plots: the figures of BENCHMARKS.md and the README, drawn as SVG from the JSON the
//! benchmarks print.
//!
//! | figure | from | shows |
//! |---|---|---|
//! | `writer.svg` | `partout bench writer --json`, one run per destination count | ns per row against destinations, uncompressed and LZ4, partout beside each peer and the floor |
//! | `files.svg` | `bench/e2e.py --json`, one file per destination count | seconds and peak memory against destinations, partout beside DuckDB and Polars |
//! | `cluster.svg` | `partout-ballista`'s `cluster` example's `--json` | the 22 TPC-H queries' seconds and bytes over the links against the link rate, partout (LZ4, ZSTD(1)) beside Ballista's own writer |
//! | `scatter.svg` | `partout bench scatter --json` | arrow's grouped take ÷ partout against destinations, per column kind |
//! | `partition_by.svg` | `bench/partition_by.py --json` | seconds and peak memory per partition key (its distinct values), bars of partout beside DuckDB, Polars and pyarrow |
//!
//! A figure holds the results of one machine only: results from two CPUs in one figure are
//! refused, since their ratios cannot be compared.

#![forbid(unsafe_code)]

use anyhow::{Context, Result, bail, ensure};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One line of a panel, or one colour of its bars: a contender's points, `(x, y)`, in
/// increasing `x`.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The contender, as the legend names it.
    pub name: String,
    /// Its points.
    pub points: Vec<(f64, f64)>,
    /// Its colour, an index into the palette: its place in the legend unless its figure
    /// keeps a contender's colour of another figure.
    pub colour: usize,
}

/// One chart of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The chart's caption.
    pub title: String,
    /// What the x axis counts (on a log scale for lines: destinations span 16 to thousands).
    pub x_desc: String,
    /// What the y axis measures.
    pub y_desc: String,
    /// A log scale on the y axis (for quantities that differ by orders of magnitude).
    pub log_y: bool,
    /// Empty for lines; else the panel is grouped bars, a group per category (in order, `x`
    /// being its index) with a bar per series, and "not run" where a series has no point.
    pub categories: Vec<String>,
    /// Its lines, or its bars' colours.
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
            colour: series.len(),
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
    Ok(Figure {
        title: format!(
            "{table} partitioned by value, a directory per value, Snappy Parquet \
             ({cpu}, {threads} threads, {date})"
        ),
        panels: vec![time, memory],
    })
}

/// A link rate in `tc`'s syntax (`1gbit`, `100mbit`), in Gbit/s; `None` for `unlimited`.
fn gbits(rate: &str) -> Result<Option<f64>> {
    if rate == "unlimited" {
        return Ok(None);
    }
    let split = rate
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rate.len());
    let (number, unit) = rate.split_at(split);
    let number: f64 = number
        .parse()
        .with_context(|| format!("link rate {rate:?}: no number"))?;
    let scale = match unit {
        "gbit" => 1.0,
        "mbit" => 1e-3,
        "kbit" => 1e-6,
        _ => bail!("link rate {rate:?}: unit {unit:?} is not gbit, mbit or kbit"),
    };
    Ok(Some(number * scale))
}

/// The cluster figure from `partout-ballista`'s `cluster` example's JSON: the 22 TPC-H
/// queries' total time and the bytes sent over the links, per contender, against the links'
/// rate (an unlimited link is left out: it has no rate to place it at).
///
/// # Errors
/// A result missing a field, or a link rate that does not parse.
pub fn cluster_figure(result: &Value, date: &str) -> Result<Figure> {
    let mut time = Panel {
        title: "22 TPC-H queries, in all".into(),
        x_desc: "link rate, Gbit/s".into(),
        y_desc: "seconds, median (lower is faster)".into(),
        log_y: false,
        categories: Vec::new(),
        series: Vec::new(),
    };
    let mut wire = Panel {
        title: "bytes over the links".into(),
        x_desc: "link rate, Gbit/s".into(),
        y_desc: "MB sent by all hosts, median".into(),
        log_y: false,
        categories: Vec::new(),
        series: Vec::new(),
    };
    let machine = result["machine"].as_str().context("no machine")?;
    let links = result["links"].as_array().context("no links")?;
    ensure!(!links.is_empty(), "no link measured");
    for link in links {
        let rate = link["link"].as_str().context("a link without its rate")?;
        let Some(x) = gbits(rate)? else {
            continue;
        };
        for contender in link["contenders"].as_array().context("no contenders")? {
            let name = contender["name"]
                .as_str()
                .context("a contender without a name")?;
            let number = |field: &str| {
                contender[field]
                    .as_f64()
                    .with_context(|| format!("{rate}: {name} has no {field}"))
            };
            push(&mut time.series, name, (x, number("total_seconds")?));
            push(&mut wire.series, name, (x, number("wire_bytes")? / 1e6));
        }
    }
    finish(&mut time)?;
    finish(&mut wire)?;
    Ok(Figure {
        title: format!(
            "Ballista on separate hosts, TPC-H SF {} ({machine}, {date})",
            result["sf"].as_f64().unwrap_or_default()
        ),
        panels: vec![time, wire],
    })
}

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

/// The line colours, one per series in legend order.
const COLOURS: [RGBColor; 8] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// The range of `values` widened by a margin, for an axis (from 0 on a linear scale), with
/// `headroom` more above the largest: where the legend goes.
fn axis(
    values: impl Iterator<Item = f64> + Clone,
    log: bool,
    headroom: f64,
) -> std::ops::Range<f64> {
    let max = values.clone().fold(f64::MIN, f64::max);
    let min = values.fold(f64::MAX, f64::min);
    if log {
        (min / 1.5)..(max * 1.5 * 10f64.powf(3.0 * headroom))
    } else {
        0.0..(max * (1.15 + headroom))
    }
}

/// `value` as an axis or a bar labels it: whole from 10 up, else to a tenth.
fn label(value: f64) -> String {
    if value >= 10.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// A bar's value as it is labelled: to a tenth below 100 (seconds), else whole (MiB).
fn bar_label(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// On a linear scale, the height bars are cut at so that an outlier does not flatten the
/// rest: just above the tallest bar within 3x of the next tallest (`None`: none is cut).
fn cut(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(|a, b| b.total_cmp(a));
    let kept = values.windows(2).position(|w| w[0] <= 3.0 * w[1])?;
    (kept > 0).then(|| values[kept] * 1.12)
}

/// The x axis of `n` groups of bars: the group `i` spans `i - 0.5..i + 0.5`, labelled at `i`.
struct Groups(usize);

impl Ranged for Groups {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = (value + 0.5) / self.0.max(1) as f64;
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _: Hint) -> Vec<f64> {
        (0..self.0).map(|i| i as f64).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        -0.5..self.0 as f64 - 0.5
    }
}

/// Draws a panel of grouped bars (its `categories` not empty) on `area`: per category, a bar
/// per series in legend order, labelled with its value, and "not run" where the series has
/// no point.
fn draw_bars<DB: DrawingBackend>(
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
    let groups = panel.categories.len();
    let slots = panel.series.len().max(1);
    // A group spans 0.8 of its category's width: a bar per series, a little apart.
    let width = 0.8 / slots as f64;
    let left = |x: f64, slot: usize| x - 0.4 + width * slot as f64;
    let cut = if panel.log_y {
        None
    } else {
        cut(points().map(|p| p.1))
    };
    let headroom = 0.07 * panel.series.len() as f64;
    let ys = match cut {
        // The cut bars' labels above the cut, the legend above them.
        Some(cut) => 0.0..cut * (1.05 + headroom),
        None => axis(points().map(|p| p.1), panel.log_y, headroom),
    };
    let bottom = ys.start;
    let xs = Groups(groups);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&panel.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    let value_style = TextStyle::from(("sans-serif", 11).into_font())
        .pos(Pos::new(HPos::Center, VPos::Bottom))
        .color(&BLACK);
    let not_run_style = TextStyle::from(
        ("sans-serif", 11)
            .into_font()
            .transform(FontTransform::Rotate270),
    )
    .pos(Pos::new(HPos::Left, VPos::Center))
    .color(&RGBColor(0x7f, 0x7f, 0x7f));
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_desc(&panel.x_desc)
                .y_desc(&panel.y_desc)
                .x_labels(groups.max(2))
                .x_label_formatter(&|x| {
                    let i = x.round();
                    if (x - i).abs() < 0.01 && i >= 0.0 {
                        panel
                            .categories
                            .get(i as usize)
                            .cloned()
                            .unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| label(*y))
                .draw()?;
            for (slot, series) in panel.series.iter().enumerate() {
                let colour = COLOURS[series.colour % COLOURS.len()];
                let top = |y: f64| cut.map_or(y, |cut| y.min(cut));
                chart
                    .draw_series(series.points.iter().map(|&(x, y)| {
                        let x0 = left(x, slot) + width * 0.05;
                        Rectangle::new([(x0, bottom), (x0 + width * 0.9, top(y))], colour.filled())
                    }))?
                    .label(series.name.as_str())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 16, y + 5)], colour.filled())
                    });
                // A cut bar: a white gap across it below its top.
                chart.draw_series(series.points.iter().filter_map(|&(x, y)| {
                    let cut = cut.filter(|cut| y > *cut)?;
                    Some(Rectangle::new(
                        [
                            (left(x, slot), cut * 0.90),
                            (left(x, slot) + width, cut * 0.93),
                        ],
                        WHITE.filled(),
                    ))
                }))?;
                chart.draw_series(series.points.iter().map(|&(x, y)| {
                    EmptyElement::at((left(x, slot) + width / 2.0, top(y)))
                        + Text::new(bar_label(y), (0, -3), value_style.clone())
                }))?;
                chart.draw_series(
                    (0..groups)
                        .filter(|i| !series.points.iter().any(|p| p.0 == *i as f64))
                        .map(|i| {
                            EmptyElement::at((left(i as f64, slot) + width / 2.0, bottom))
                                + Text::new("not run", (0, -6), not_run_style.clone())
                        }),
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
    if panel.log_y {
        draw!(builder.build_cartesian_2d(xs, ys.log_scale())?);
    } else {
        draw!(builder.build_cartesian_2d(xs, ys)?);
    }
    Ok(())
}

/// Draws one panel on `area`: its lines, or its bars when it has categories.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    if !panel.categories.is_empty() {
        return draw_bars(area, panel);
    }
    let points = || panel.series.iter().flat_map(|s| s.points.iter());
    ensure!(
        points().next().is_some(),
        "{}: nothing to draw",
        panel.title
    );
    let xs = axis(points().map(|p| p.0), true, 0.0);
    // Room above the lines for the legend: a line of it per series.
    let headroom = 0.07 * panel.series.len() as f64;
    let ys = axis(points().map(|p| p.1), panel.log_y, headroom);
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
                        // Counts are whole; a rate below 1 Gbit/s is not.
                        .map_or(String::new(), |t| format!("{t}"))
                })
                .y_label_formatter(&|y| label(*y))
                .draw()?;
            for series in &panel.series {
                let colour = COLOURS[series.colour % COLOURS.len()];
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

/// Draws `figure` as an SVG file at `path`: its panels side by side, 520 pixels wide each
/// (900 at least).
///
/// # Errors
/// A panel with no point, or a file that cannot be written.
pub fn draw(figure: &Figure, path: &Path) -> Result<()> {
    let width = (520 * figure.panels.len() as u32).max(900);
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
    fn cluster_points_are_totals_and_megabytes_by_link_rate() {
        let result = serde_json::json!({
            "machine": "cpu X", "sf": 1.0,
            "links": [
                {"link": "10gbit", "contenders": [
                    {"name": "partout LZ4", "total_seconds": 30.0, "wire_bytes": 2.0e9}]},
                {"link": "unlimited", "contenders": [
                    {"name": "partout LZ4", "total_seconds": 29.0, "wire_bytes": 2.0e9}]},
                {"link": "1gbit", "contenders": [
                    {"name": "partout LZ4", "total_seconds": 40.0, "wire_bytes": 2.5e9},
                    {"name": "Ballista (LZ4)", "total_seconds": 50.0, "wire_bytes": 3.0e9}]}
            ]
        });
        let figure = cluster_figure(&result, "today").unwrap();
        assert_eq!(
            figure.panels[0].series[0].points,
            [(1.0, 40.0), (10.0, 30.0)]
        );
        assert_eq!(figure.panels[0].series[1].points, [(1.0, 50.0)]);
        assert_eq!(
            figure.panels[1].series[0].points,
            [(1.0, 2500.0), (10.0, 2000.0)]
        );
        assert!(figure.title.contains("cpu X"));
        let mut broken = result.clone();
        broken["links"][0]["link"] = "10gb".into();
        assert!(cluster_figure(&broken, "today").is_err());
        let mut broken = result;
        broken["links"][2]["contenders"][1]
            .as_object_mut()
            .unwrap()
            .remove("wire_bytes");
        let error = cluster_figure(&broken, "today").unwrap_err().to_string();
        assert!(error.contains("wire_bytes"), "{error}");
    }

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

    /// A contender of a case: its name and (seconds, MiB, runs), `None` when recorded as null.
    type Contender<'a> = (&'a str, Option<(f64, f64, u64)>);

    /// A `bench/partition_by.py --json` result: per case, its name, distinct values and
    /// contenders.
    fn partition_by_result(cases: &[(&str, u64, &[Contender])]) -> Value {
        let results: Vec<Value> = cases
            .iter()
            .map(|(case, values, contenders)| {
                let contenders: serde_json::Map<String, Value> = contenders
                    .iter()
                    .map(|(name, measured)| {
                        let summary = measured.map_or(Value::Null, |(s, mib, runs)| {
                            serde_json::json!({
                                "median_s": s, "peak_rss_mib": mib, "runs": runs,
                                "same": true, "values": values, "files": values,
                                "directories": values, "bytes": 1000,
                            })
                        });
                        (name.to_string(), summary)
                    })
                    .collect();
                serde_json::json!({"case": case, "columns": ["l_key"], "contenders": contenders})
            })
            .collect();
        serde_json::json!({
            "machine": {"cpu": "CPU X", "cpus": 2}, "input": "lineitem-sf1.parquet",
            "threads": 2, "rounds": 3, "results": results,
        })
    }

    fn partition_by_sample() -> Value {
        partition_by_result(&[
            (
                "4 values",
                4,
                &[
                    ("partout", Some((3.3, 112.0, 3))),
                    ("duckdb", Some((2.1, 1900.0, 3))),
                    ("pyarrow", Some((3.2, 1200.0, 1))),
                    ("spark", Some((9.0, 9.0, 3))),
                ],
            ),
            (
                "~2,500 values",
                2526,
                &[
                    ("partout", Some((6.1, 106.0, 3))),
                    ("duckdb", None),
                    ("pyarrow", Some((104.0, 9200.0, 1))),
                ],
            ),
            (
                "10,000 values",
                10_000,
                &[
                    ("partout", Some((7.9, 108.0, 3))),
                    ("duckdb", Some((10.6, 3200.0, 3))),
                ],
            ),
        ])
    }

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

    #[test]
    fn an_outlier_bar_is_cut_just_above_the_rest() {
        let cut_at = cut([3.3, 104.0, 17.1, 10.6].into_iter()).unwrap();
        assert!((cut_at - 17.1 * 1.12).abs() < 1e-9, "{cut_at}");
        assert_eq!(cut([3.3, 2.1, 7.9].into_iter()), None);
        assert_eq!(cut([5.0].into_iter()), None);
    }

    #[test]
    fn the_partition_by_svg_has_the_cases_contenders_and_not_run() {
        let figure = partition_by_figure(&partition_by_sample(), "d").unwrap();
        let dir = std::env::temp_dir().join(format!("partout-plots-pb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("partition_by.svg");
        draw(&figure, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        for text in [
            "4 values",
            "2,526 values",
            "10,000 values",
            "partout",
            "DuckDB",
            "Polars",
            "pyarrow (1 run)",
            "time",
            "peak memory",
            // Bars labelled with their values, the cut one with its own.
            "3.3",
            "104",
            "9200",
        ] {
            assert!(
                svg.contains(&format!("\n{text}\n")),
                "no {text:?} in the SVG"
            );
        }
        assert!(!svg.contains("spark"));
        // Per panel: DuckDB at 2,526 values, Polars at all three, pyarrow at 10,000.
        assert_eq!(svg.matches("\nnot run\n").count(), 2 * 5);
        // Per panel, a bar per point and a legend sample, in the contender's colour.
        for (colour, bars) in [
            ("#D62728", 3),
            ("#1F77B4", 2),
            ("#2CA02C", 0),
            ("#9467BD", 2),
        ] {
            let rects = svg
                .lines()
                .filter(|l| l.starts_with("<rect") && l.contains(&format!("fill=\"{colour}\"")))
                .count();
            assert_eq!(rects, 2 * (bars + 1), "{colour}");
        }
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

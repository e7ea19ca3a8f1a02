//! What every figure is made of, whatever it draws: [`Figure`], its [`Panel`]s and their
//! [`Series`] of points; and what loading any of them shares: adding a point to its series,
//! refusing a case measured twice, and refusing results of more than one machine.

use anyhow::{Result, bail};

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
pub(crate) fn push(series: &mut Vec<Series>, name: &str, point: (f64, f64)) {
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
pub(crate) fn finish(panel: &mut Panel) -> Result<()> {
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
pub(crate) fn one_cpu<'a>(cpus: impl IntoIterator<Item = &'a str>) -> Result<String> {
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

//! Draws a figure as an SVG file: its panels side by side under its title, each drawn as
//! lines ([`crate::lines`]) or grouped bars ([`crate::bars`]); and what both kinds of panel
//! share: the palette, the axes' ranges and their labels.

use crate::bars::draw_bars;
use crate::figure::{Figure, Panel};
use crate::lines::draw_lines;
use anyhow::{Context, Result};
use plotters::prelude::*;
use std::path::Path;

/// The colours of lines and bars, by `Series::colour`.
pub(crate) const COLOURS: [RGBColor; 8] = [
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
pub(crate) fn axis(
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
pub(crate) fn label(value: f64) -> String {
    if value >= 10.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// Draws one panel on `area`: its lines, or its bars when it has categories.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    if panel.categories.is_empty() {
        draw_lines(area, panel)
    } else {
        draw_bars(area, panel)
    }
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

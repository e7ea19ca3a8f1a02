//! Draws a figure as an SVG file: its panels side by side under its title, each drawn as
//! lines ([`crate::lines`]) or grouped bars ([`crate::bars`]), in the style both share
//! ([`crate::style`]).

use crate::bars::draw_bars;
use crate::figure::{Figure, Panel};
use crate::lines::draw_lines;
use anyhow::{Context, Result};
use plotters::prelude::*;
use std::path::Path;

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

//! Draws a panel of lines, as every figure but the partition-by one has: a contender's
//! measurements against destinations (or the link rate), one line each.

use crate::figure::Panel;
use crate::style::{COLOURS, axis, label};
use anyhow::{Result, ensure};
use plotters::prelude::*;

/// Draws a panel of lines (its `categories` empty) on `area`: a line per series, marked at
/// its points, the x axis on a log scale labelled at the measured values.
pub(crate) fn draw_lines<DB: DrawingBackend>(
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

#[cfg(test)]
mod tests {
    use crate::samples::writer_line;
    use crate::{draw, writer_figure};

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

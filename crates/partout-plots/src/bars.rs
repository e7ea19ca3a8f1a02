//! Draws a panel of grouped bars, as the partition-by figure has: per category, a bar per
//! contender labelled with its value, an outlier cut so it does not flatten the rest, and
//! "not run" where a contender has no bar.

use crate::figure::Panel;
use crate::style::{COLOURS, axis, label};
use anyhow::{Result, ensure};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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
pub(crate) fn draw_bars<DB: DrawingBackend>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::partition_by_sample;
    use crate::{draw, partition_by_figure};

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
}

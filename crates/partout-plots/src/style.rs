//! What both kinds of panel share: the palette, the axes' ranges and their labels.

use plotters::prelude::*;

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

//! The cluster figure, `cluster.svg`, from `partout-ballista`'s `cluster` example's `--json`:
//! the 22 TPC-H queries' seconds and the bytes over the links against the link rate, partout
//! beside Ballista's own writer.

use crate::figure::{Figure, Panel, finish, push};
use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}

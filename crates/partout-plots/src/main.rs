//! `partout-plots RESULTS OUT`: draws the benchmarks' figures from their JSON results.
//!
//! In `RESULTS`: `writer.jsonl` (the lines of `partout bench writer --json` runs),
//! `scatter.jsonl` (`partout bench scatter --json`), `files-*.json` (`bench/e2e.py --json`
//! results, one per destination count), `cluster.json` (`partout-ballista`'s `cluster`
//! example's `--json`), `partition_by.json` (`bench/partition_by.py --json`) and
//! `object_store.json` (`bench/object_store.py`), each figure drawn when its results are there; a `date` file, when present, dates the figures.
//! `bench/figures.sh` runs the benchmarks and then this.

use anyhow::{Context, Result, ensure};
use clap::Parser;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(about = "Draws the benchmarks' figures (SVG) from their JSON results")]
struct Args {
    /// The directory of results.
    results: PathBuf,
    /// The directory the figures are written to.
    out: PathBuf,
}

/// How a figure is made from the text of its results file.
type Make = fn(&str, &str) -> Result<partout_plots::Figure>;

/// A figure from one JSON document, as the `*_figure` functions of one document take it.
fn from_json(
    text: &str,
    date: &str,
    figure: fn(&serde_json::Value, &str) -> Result<partout_plots::Figure>,
) -> Result<partout_plots::Figure> {
    figure(&serde_json::from_str(text).context("parsing")?, date)
}

/// Each results file with one figure: its name, the figure's file, how it is drawn. The
/// object store bench's runs by value are drawn as partition_by.json's are.
const ONE_FILE: [(&str, &str, Make); 5] = [
    ("writer.jsonl", "writer.svg", partout_plots::writer_figure),
    (
        "scatter.jsonl",
        "scatter.svg",
        partout_plots::scatter_figure,
    ),
    ("cluster.json", "cluster.svg", |t, d| {
        from_json(t, d, partout_plots::cluster_figure)
    }),
    ("partition_by.json", "partition_by.svg", |t, d| {
        from_json(t, d, partout_plots::partition_by_figure)
    }),
    ("object_store.json", "object_store.svg", |t, d| {
        from_json(t, d, partout_plots::partition_by_figure)
    }),
];

fn main() -> Result<()> {
    let args = Args::parse();
    let read = |name: &str| {
        let path = args.results.join(name);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    };
    let date = read("date").map_or_else(|_| "undated".to_string(), |d| d.trim().to_string());
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut drawn = Vec::new();
    let mut draw = |figure: partout_plots::Figure, name: &str| -> Result<()> {
        let path = args.out.join(name);
        partout_plots::draw(&figure, &path)?;
        drawn.push(path);
        Ok(())
    };
    for (results, svg, make) in ONE_FILE {
        if let Ok(text) = read(results) {
            draw(make(&text, &date).context(results)?, svg)?;
        }
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&args.results)
        .with_context(|| format!("reading {}", args.results.display()))?
    {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("files-") && name.ends_with(".json") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            files.push(
                serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            );
        }
    }
    if !files.is_empty() {
        draw(
            partout_plots::files_figure(&files, &date).context("files-*.json")?,
            "files.svg",
        )?;
    }
    ensure!(
        !drawn.is_empty(),
        "no results in {} (writer.jsonl, scatter.jsonl, files-*.json, cluster.json, \
         partition_by.json, object_store.json)",
        args.results.display()
    );
    for path in drawn {
        println!("{}", path.display());
    }
    Ok(())
}

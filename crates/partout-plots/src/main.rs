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
    if let Ok(lines) = read("writer.jsonl") {
        let figure = partout_plots::writer_figure(&lines, &date).context("writer.jsonl")?;
        let path = args.out.join("writer.svg");
        partout_plots::draw(&figure, &path)?;
        drawn.push(path);
    }
    if let Ok(lines) = read("scatter.jsonl") {
        let figure = partout_plots::scatter_figure(&lines, &date).context("scatter.jsonl")?;
        let path = args.out.join("scatter.svg");
        partout_plots::draw(&figure, &path)?;
        drawn.push(path);
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
    if let Ok(text) = read("cluster.json") {
        let result = serde_json::from_str(&text).context("parsing cluster.json")?;
        let figure = partout_plots::cluster_figure(&result, &date).context("cluster.json")?;
        let path = args.out.join("cluster.svg");
        partout_plots::draw(&figure, &path)?;
        drawn.push(path);
    }
    if let Ok(text) = read("partition_by.json") {
        let result = serde_json::from_str(&text).context("parsing partition_by.json")?;
        let figure =
            partout_plots::partition_by_figure(&result, &date).context("partition_by.json")?;
        let path = args.out.join("partition_by.svg");
        partout_plots::draw(&figure, &path)?;
        drawn.push(path);
    }
    // The object store bench's runs by value, drawn as partition_by.json's are.
    if let Ok(text) = read("object_store.json") {
        let result = serde_json::from_str(&text).context("parsing object_store.json")?;
        let figure =
            partout_plots::partition_by_figure(&result, &date).context("object_store.json")?;
        let path = args.out.join("object_store.svg");
        partout_plots::draw(&figure, &path)?;
        drawn.push(path);
    }
    if !files.is_empty() {
        let figure = partout_plots::files_figure(&files, &date).context("files-*.json")?;
        let path = args.out.join("files.svg");
        partout_plots::draw(&figure, &path)?;
        drawn.push(path);
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

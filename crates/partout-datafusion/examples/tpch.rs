//! TPC-H in process, with and without partout: the 22 queries' answers and times.
//!
//! ```text
//! cargo run --release -p partout-datafusion --example tpch -- [SF] [TARGET_PARTITIONS]
//! ```
//! (defaults: SF 0.1, 2 partitions). Each query runs once in a plain DataFusion session and
//! once with `with_partout()`; the answers are printed side by side when they differ.

#[path = "../tests/common/tpch.rs"]
mod tpch;

use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::common::Result;
use std::time::Instant;

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let sf: f64 = args
        .next()
        .map_or(0.1, |a| a.parse().expect("a scale factor"));
    let partitions: usize = args
        .next()
        .map_or(2, |a| a.parse().expect("a partition count"));
    let started = Instant::now();
    let tables = tpch::tables(sf, 8192)?;
    println!(
        "TPC-H SF {sf}: generated in {:.1} s; {partitions} target partitions",
        started.elapsed().as_secs_f64()
    );
    println!(
        "{:>5} {:>6} {:>12} {:>12} {:>7}  answers",
        "query", "rows", "DataFusion ms", "partout ms", "ratio"
    );
    let (mut plain_total, mut partout_total) = (0.0, 0.0);
    for (k, sql) in tpch::QUERIES.iter().enumerate() {
        let mut answers = Vec::new();
        let mut times = Vec::new();
        for partout in [false, true] {
            let ctx = tpch::session(partitions, partout);
            tpch::register(&ctx, &tables, partitions)?;
            let started = Instant::now();
            let batches = ctx.sql(sql).await?.collect().await?;
            times.push(started.elapsed().as_secs_f64() * 1e3);
            let mut lines: Vec<String> = pretty_format_batches(&batches)?
                .to_string()
                .lines()
                .map(str::to_string)
                .collect();
            // Rows in a canonical order: queries without ORDER BY may return them in any.
            lines.sort();
            answers.push((batches.iter().map(|b| b.num_rows()).sum::<usize>(), lines));
        }
        plain_total += times[0];
        partout_total += times[1];
        let same = answers[0] == answers[1];
        println!(
            "{:>5} {:>6} {:>12.1} {:>12.1} {:>6.2}x  {}",
            format!("q{}", k + 1),
            answers[1].0,
            times[0],
            times[1],
            times[0] / times[1],
            if same { "same" } else { "DIFFER" }
        );
        if !same {
            println!(
                "DataFusion:\n{}\npartout:\n{}",
                answers[0].1.join("\n"),
                answers[1].1.join("\n")
            );
        }
    }
    println!(
        "total {:>19.1} {:>12.1} {:>6.2}x  (one run each: see the benchmark for medians)",
        plain_total,
        partout_total,
        plain_total / partout_total
    );
    Ok(())
}

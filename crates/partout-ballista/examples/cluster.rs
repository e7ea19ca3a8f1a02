//! The 22 TPC-H queries on a Ballista cluster of separate network hosts (network namespaces
//! on a bridge, every link shaped to one rate; `tests/common/netcluster.rs`): a scheduler and
//! three `partout-ballista-executor` processes, the client in a host of its own. Contenders,
//! alternating within each round, a fresh cluster each:
//!
//! - partout writing the hash shuffles with LZ4,
//! - partout writing them with ZSTD level 1,
//! - Ballista's own sort-shuffle writer with its default codec (LZ4).
//!
//! For each link rate and contender: total and per-query times (medians of the rounds), bytes
//! sent over the links per query (every host's counters), the hash shuffle stages' file
//! bytes and write time. Every answer is checked against single-node DataFusion's.
//! Needs root (network namespaces) and the release executor binary:
//!
//! ```text
//! cargo build --release -p partout-ballista --bins --examples
//! target/release/examples/cluster --sf 1 --rounds 3 --links 1gbit,10gbit --json out.json
//! ```

#[path = "../../partout-datafusion/tests/common/tpch.rs"]
mod tpch;

#[allow(dead_code)]
#[path = "../tests/common/netcluster.rs"]
mod netcluster;

use ballista::prelude::SessionContextExt;
use ballista_core::extension::SessionConfigExt;
use clap::Parser;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use netcluster::{NetCluster, Options, Writer};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// TPC-H scale factor.
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    /// Rounds; each runs every contender once, in turn.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Link rates (`tc` syntax), `unlimited` for none.
    #[arg(long, value_delimiter = ',', default_value = "1gbit,10gbit")]
    links: Vec<String>,
    /// Queries to run (all 22 when none is named).
    #[arg(long, value_delimiter = ',')]
    queries: Vec<usize>,
    /// Executors.
    #[arg(long, default_value_t = 3)]
    executors: usize,
    /// Task slots per executor.
    #[arg(long, default_value_t = 2)]
    vcores: usize,
    /// Partitions of the client's plans.
    #[arg(long, default_value_t = 6)]
    target_partitions: usize,
    /// Prints every stage of every query: who wrote it, its codec, rows and file bytes.
    #[arg(long)]
    stages: bool,
    /// Writes the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One contender: who writes, with which codec.
struct Contender {
    name: &'static str,
    writer: Writer,
    codec: &'static str,
}

const CONTENDERS: [Contender; 3] = [
    Contender {
        name: "partout LZ4",
        writer: Writer::Partout,
        codec: "lz4",
    },
    Contender {
        name: "partout ZSTD(1)",
        writer: Writer::Partout,
        codec: "zstd:1",
    },
    Contender {
        name: "Ballista (LZ4)",
        writer: Writer::Ballista,
        codec: "lz4",
    },
];

/// One query's run by one contender.
#[derive(Clone, Copy, Default)]
struct Run {
    seconds: f64,
    wire_bytes: u64,
    hash_file_bytes: u64,
    hash_write_seconds: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn session_config(codec: &str, target_partitions: usize) -> SessionConfig {
    SessionConfig::new_with_ballista()
        .with_target_partitions(target_partitions)
        .set_str("ballista.shuffle.compression.codec", codec)
}

async fn register(ctx: &SessionContext, dir: &Path) {
    for name in [
        "nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem",
    ] {
        let path = dir.join(format!("{name}.parquet"));
        ctx.register_parquet(name, path.to_str().unwrap(), ParquetReadOptions::default())
            .await
            .unwrap();
    }
}

async fn answer(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<tpch::Answer> {
    let df = ctx.sql(sql).await?;
    let schema = df.schema().inner().clone();
    let batches = df.collect().await?;
    tpch::Answer::new(&schema, &batches)
}

/// Runs `queries` on a fresh cluster for `contender` with every link at `link`.
fn run_cluster(
    args: &Args,
    tables: &Path,
    expected: &[tpch::Answer],
    queries: &[usize],
    contender: &Contender,
    link: Option<&str>,
    executor_bin: &Path,
) -> Vec<Run> {
    let cluster = NetCluster::start(Options {
        prefix: "pbb",
        executors: args.executors,
        writer: contender.writer,
        executor_timeout: 60,
        // Long enough to read the stages' files after each query.
        clean_up_after: 10,
        link: link.map(str::to_string),
        vcores: args.vcores,
        executor_bin: executor_bin.to_path_buf(),
        scheduler_bin: None,
    })
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
    cluster.client(|| async {
        let state = SessionStateBuilder::new()
            .with_config(session_config(contender.codec, args.target_partitions))
            .with_default_features()
            .build();
        let remote = SessionContext::remote_with_state(&cluster.url(), state)
            .await
            .unwrap();
        register(&remote, tables).await;
        let mut runs = Vec::new();
        for (n, expected) in queries.iter().zip(expected) {
            let jobs_before = cluster.jobs().await;
            let wire_before = cluster.wire_bytes();
            let started = Instant::now();
            let actual = answer(&remote, tpch::QUERIES[n - 1])
                .await
                .unwrap_or_else(|e| panic!("{}: q{n} failed: {e}", contender.name));
            let seconds = started.elapsed().as_secs_f64();
            let wire_bytes = cluster.wire_bytes() - wire_before;
            tpch::compare_answers(*n, expected, &actual)
                .unwrap_or_else(|e| panic!("{}: q{n} answers differ: {e}", contender.name));
            let mut run = Run {
                seconds,
                wire_bytes,
                ..Run::default()
            };
            for job in cluster.jobs().await.difference(&jobs_before) {
                let stages = cluster.stages(job).await;
                if args.stages {
                    for s in &stages {
                        println!(
                            "    {} q{n} stage {}: {}, {} rows, {} B of files, codec {}",
                            contender.name,
                            s.stage,
                            match (s.hash, s.partout_bytes.is_some()) {
                                (true, true) => "hash, by partout",
                                (true, false) => "hash, by Ballista",
                                (false, _) => "not hash, by Ballista",
                            },
                            s.rows,
                            s.file_bytes,
                            s.codec
                        );
                    }
                }
                for stage in stages.iter().filter(|s| s.hash) {
                    let by_partout = stage.partout_bytes.is_some();
                    assert_eq!(
                        by_partout,
                        contender.writer == Writer::Partout,
                        "{}: q{n} stage {} written by the wrong engine",
                        contender.name,
                        stage.stage
                    );
                    assert_eq!(stage.codec, contender.codec);
                    run.hash_file_bytes += stage.file_bytes;
                    run.hash_write_seconds += stage.write_nanos as f64 / 1e9;
                }
            }
            runs.push(run);
        }
        runs
    })
}

fn main() {
    let args = Args::parse();
    let queries: Vec<usize> = if args.queries.is_empty() {
        (1..=22).collect()
    } else {
        args.queries.clone()
    };
    let executor_bin = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("partout-ballista-executor")))
        .filter(|bin| bin.exists())
        .expect(
            "partout-ballista-executor next to this example's directory: build it with \
             `cargo build --release -p partout-ballista --bins --examples`",
        );
    let machine = partout_testkit::machine();
    println!(
        "Ballista on separate hosts: {machine}, TPC-H SF {}, {} executors x {} slots, {} \
         target partitions, {} rounds",
        args.sf, args.executors, args.vcores, args.target_partitions, args.rounds
    );
    let tables = tempfile::tempdir().expect("a scratch directory");
    let started = Instant::now();
    for table in tpch::tables(args.sf, 8192).expect("TPC-H tables") {
        let file = std::fs::File::create(tables.path().join(format!("{}.parquet", table.name)))
            .expect("a table file");
        let mut writer = parquet::arrow::ArrowWriter::try_new(file, table.schema.clone(), None)
            .expect("a Parquet writer");
        for batch in &table.batches {
            writer.write(batch).expect("a written batch");
        }
        writer.close().expect("a closed file");
    }
    println!("tables written in {:.1?}", started.elapsed());
    // The oracle: single-node DataFusion.
    let expected: Vec<tpch::Answer> = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let local = SessionContext::new_with_config(session_config("lz4", args.target_partitions));
        register(&local, tables.path()).await;
        let mut answers = Vec::new();
        for n in &queries {
            answers.push(answer(&local, tpch::QUERIES[n - 1]).await.unwrap());
        }
        answers
    });
    let mut json = String::from("{");
    let _ = write!(
        json,
        "\"machine\": {:?}, \"sf\": {}, \"rounds\": {}, \"executors\": {}, \"links\": [",
        machine, args.sf, args.rounds, args.executors
    );
    for (l, link) in args.links.iter().enumerate() {
        let rate = (link != "unlimited").then_some(link.as_str());
        // runs[contender][round][query]
        let mut runs: Vec<Vec<Vec<Run>>> = vec![Vec::new(); CONTENDERS.len()];
        for round in 0..args.rounds {
            for k in 0..CONTENDERS.len() {
                let c = (k + round) % CONTENDERS.len();
                let contender = &CONTENDERS[c];
                let result = run_cluster(
                    &args,
                    tables.path(),
                    &expected,
                    &queries,
                    contender,
                    rate,
                    &executor_bin,
                );
                let total: f64 = result.iter().map(|r| r.seconds).sum();
                let wire: u64 = result.iter().map(|r| r.wire_bytes).sum();
                println!(
                    "  {link} round {round}: {:<16} {total:7.2} s, {:8.1} MB on the wire",
                    contender.name,
                    wire as f64 / 1e6
                );
                runs[c].push(result);
            }
        }
        let totals: Vec<f64> = runs
            .iter()
            .map(|r| {
                median(
                    r.iter()
                        .map(|q| q.iter().map(|x| x.seconds).sum())
                        .collect(),
                )
            })
            .collect();
        let wires: Vec<f64> = runs
            .iter()
            .map(|r| {
                median(
                    r.iter()
                        .map(|q| q.iter().map(|x| x.wire_bytes as f64).sum())
                        .collect(),
                )
            })
            .collect();
        let files: Vec<f64> = runs
            .iter()
            .map(|r| {
                median(
                    r.iter()
                        .map(|q| q.iter().map(|x| x.hash_file_bytes as f64).sum())
                        .collect(),
                )
            })
            .collect();
        let writes: Vec<f64> = runs
            .iter()
            .map(|r| {
                median(
                    r.iter()
                        .map(|q| q.iter().map(|x| x.hash_write_seconds).sum())
                        .collect(),
                )
            })
            .collect();
        let baseline = CONTENDERS.len() - 1;
        println!(
            "\nlinks at {link}: medians of {} rounds (ratio: Ballista's own ÷ contender)",
            args.rounds
        );
        println!(
            "| contender | total s | ratio | on the wire MB | ratio | hash shuffle files MB | \
             hash shuffle write s (tasks summed) | write share |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        let slots = (args.executors * args.vcores) as f64;
        for (c, contender) in CONTENDERS.iter().enumerate() {
            println!(
                "| {} | {:.2} | {:.2}x | {:.1} | {:.2}x | {:.1} | {:.2} | {:.1}% |",
                contender.name,
                totals[c],
                totals[baseline] / totals[c],
                wires[c] / 1e6,
                wires[baseline] / wires[c],
                files[c] / 1e6,
                writes[c],
                100.0 * writes[c] / (totals[c] * slots)
            );
        }
        println!("\nper query at {link}: median s, MB on the wire");
        let header: Vec<&str> = CONTENDERS.iter().map(|c| c.name).collect();
        println!("| query | {} |", header.join(" | "));
        println!("|---|{}", "---|".repeat(CONTENDERS.len()));
        let mut per_query = Vec::new();
        for (i, n) in queries.iter().enumerate() {
            let cells: Vec<(f64, f64)> = runs
                .iter()
                .map(|r| {
                    (
                        median(r.iter().map(|q| q[i].seconds).collect()),
                        median(r.iter().map(|q| q[i].wire_bytes as f64).collect()),
                    )
                })
                .collect();
            let shown: Vec<String> = cells
                .iter()
                .map(|(s, b)| format!("{s:.2} s, {:.1} MB", b / 1e6))
                .collect();
            println!("| q{n} | {} |", shown.join(" | "));
            per_query.push(cells);
        }
        let _ = write!(
            json,
            "{}{{\"link\": {link:?}, \"contenders\": [",
            if l > 0 { ", " } else { "" }
        );
        for (c, contender) in CONTENDERS.iter().enumerate() {
            let totals_per_round: Vec<String> = runs[c]
                .iter()
                .map(|q| format!("{:.4}", q.iter().map(|x| x.seconds).sum::<f64>()))
                .collect();
            let queries_json: Vec<String> = queries
                .iter()
                .zip(&per_query)
                .map(|(n, cells)| {
                    format!(
                        "{{\"query\": {n}, \"seconds\": {:.4}, \"wire_bytes\": {:.0}}}",
                        cells[c].0, cells[c].1
                    )
                })
                .collect();
            let _ = write!(
                json,
                "{}{{\"name\": {:?}, \"codec\": {:?}, \"total_seconds\": {:.4}, \
                 \"total_seconds_per_round\": [{}], \"wire_bytes\": {:.0}, \
                 \"hash_file_bytes\": {:.0}, \"hash_write_seconds\": {:.4}, \"queries\": [{}]}}",
                if c > 0 { ", " } else { "" },
                contender.name,
                contender.codec,
                totals[c],
                totals_per_round.join(", "),
                wires[c],
                files[c],
                writes[c],
                queries_json.join(", ")
            );
        }
        json.push_str("]}");
    }
    json.push_str("]}\n");
    if let Some(path) = &args.json {
        std::fs::write(path, json).expect("the JSON results");
        println!("\nresults: {}", path.display());
    }
}

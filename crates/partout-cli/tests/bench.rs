//! `partout demo` and `partout bench <suite>` end to end: the bench JSON contract, the demo, and
//! their errors. They are built with partout-cli's `bench` feature only (`required-features`).

use std::process::{Command, Output};

fn partout(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_partout"))
        .args(args)
        .output()
        .expect("the partout binary runs")
}

/// The run succeeded (its stderr shown when not).
fn assert_success(result: &Output) {
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
}

/// The JSON objects a successful run printed, one per line.
fn json_lines(out: Output) -> Vec<serde_json::Value> {
    assert_success(&out);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is a JSON object"))
        .collect()
}

#[test]
fn bench_json_has_one_object_per_case_and_baseline() {
    let out = partout(&[
        "bench",
        "scatter",
        "--json",
        "--quick",
        "--kinds",
        "INTEGER,VARCHAR",
        "--partitions",
        "3,256",
    ]);
    let lines = json_lines(out);
    // 2 kinds x 2 column counts x 2 null densities x 2 partition counts x 2 baselines.
    assert_eq!(lines.len(), 32);
    for object in &lines {
        assert_eq!(object["suite"], "scatter");
        for field in ["ours_ns", "baseline_ns", "ratio", "rows", "bytes"] {
            assert!(
                object[field].as_f64().is_some_and(|v| v > 0.0),
                "{field} in {object}"
            );
        }
        let ratio = object["baseline_ns"].as_f64().unwrap() / object["ours_ns"].as_f64().unwrap();
        assert!(
            (ratio - object["ratio"].as_f64().unwrap()).abs() < 0.01 + ratio * 0.01,
            "{object}"
        );
        assert!(
            ["grouped_take", "take_per_destination"]
                .contains(&object["baseline"].as_str().unwrap())
        );
        assert!(object["case"].as_str().unwrap().contains("_P"));
    }
}

/// The demo's result lines (each ends in its speedup, or `-` when there is none).
fn demo_lines(out: std::process::Output) -> String {
    assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("every contender's destinations checked row by row and value by value"),
        "{text}"
    );
    text
}

fn speedup_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| l.trim_end().ends_with('x') || l.trim_end().ends_with('-'))
        .count()
}

#[test]
fn the_demo_checks_and_reports_without_duckdb() {
    // No DuckDB to be found: an empty PATH, and no Python named.
    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_partout"))
        .args(["demo", "--sf", "0.01", "--rounds", "1"])
        .env("PATH", empty.path())
        .env_remove("PARTOUT_PYTHON")
        .output()
        .unwrap();
    let text = demo_lines(out);
    // The in-memory line and one on-disk line, each with a speedup; DuckDB said missing.
    assert_eq!(speedup_lines(&text), 2, "{text}");
    assert!(text.contains("DuckDB not found"), "{text}");
    assert_memory_rate_counts_every_pass(&text);
}

/// The number in `text` just before `before` (a run of digits and dots).
fn number_before(text: &str, before: &str) -> f64 {
    let head = &text[..text
        .find(before)
        .unwrap_or_else(|| panic!("{before:?} in {text}"))];
    let head = head.trim_end();
    let start = head
        .char_indices()
        .rfind(|&(_, c)| !(c.is_ascii_digit() || c == '.'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    head[start..]
        .parse()
        .unwrap_or_else(|_| panic!("a number before {before:?} in {text}"))
}

/// The in-memory line's partout rate is the rows every pass streamed over partout's median
/// time, both printed in the demo's note (a rate of the rows of one pass is a third of it).
fn assert_memory_rate_counts_every_pass(text: &str) {
    let line = text
        .lines()
        .find(|l| l.starts_with("in memory:"))
        .unwrap_or_else(|| panic!("an in-memory line in {text}"));
    let printed: f64 = line
        .split_once("streams")
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("partout's Mrow/s in {line:?}"));
    let rows = number_before(text, " rows, in partout's median");
    let seconds = number_before(text, " s. On disk");
    // Printed to 0.1 Mrow/s, from a median printed to the millisecond: the rate lies between
    // those of the median's bounds, give or take the rate's rounding.
    let (low, high) = (
        rows / (seconds + 0.0005) / 1e6 - 0.05,
        rows / (seconds - 0.0005).max(1e-9) / 1e6 + 0.05,
    );
    assert!(
        (low..=high).contains(&printed),
        "printed {printed} Mrow/s; {rows} rows in {seconds} s is {low:.2}-{high:.2} ({line:?})"
    );
    let table = number_before(text, " rows, 16 columns");
    assert!(
        rows >= 2.0 * table,
        "each run streams the table more than once: {rows} rows of {table}"
    );
}

/// The DuckDB comparison, with the Python `./run-tests` installs DuckDB into
/// (`PARTOUT_PYTHON`), or a DuckDB this machine has.
#[test]
fn the_demo_compares_with_duckdb() {
    let python = std::env::var("PARTOUT_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = [
        "duckdb -c 'SELECT 1'",
        &format!("{python} -c 'import duckdb'"),
    ]
    .iter()
    .any(|command| {
        std::process::Command::new("sh")
            .args(["-c", command])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    assert!(
        found,
        "no DuckDB here: set PARTOUT_PYTHON to a Python with the duckdb module (./run-tests does)"
    );
    let out = partout(&["demo", "--sf", "0.01", "--rounds", "1"]);
    let text = demo_lines(out);
    assert_eq!(speedup_lines(&text), 3, "{text}");
    assert!(
        text.contains("vs DuckDB COPY ... PARTITION_BY") && !text.contains("DuckDB not found"),
        "{text}"
    );
}

#[test]
fn bench_e2e_reports_every_thread_count_and_the_floor() {
    let out = partout(&[
        "bench",
        "e2e",
        "--sf",
        "0.01",
        "--rounds",
        "1",
        "--threads",
        "1,2",
        "-n",
        "8",
        "--json",
    ]);
    assert_success(&out);
    let lines = json_lines(out);
    assert_eq!(lines.len(), 3);
    let rows = lines[0]["rows"].as_u64().unwrap();
    assert!(rows > 50_000, "{rows}");
    for line in &lines {
        assert_eq!(line["rows"].as_u64(), Some(rows));
        assert!(line["seconds"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(lines[2]["destinations"], 1);
}

#[test]
fn bad_options_are_one_line_errors_with_exit_code_2() {
    for args in [
        &["bench", "scatter", "--kinds", "NOPE"][..],
        &["bench", "scatter", "--partitions", "0"],
        &[
            "bench",
            "plan",
            "--quick",
            "--partitions",
            "4",
            "--fanouts",
            "3",
        ],
        &["demo", "--batches", "0"],
        &["bench", "writer", "--sf", "0"],
        &["bench", "writer", "--sf", "0.001", "--memory-limit", "10"],
    ] {
        let out = partout(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("partout: "), "{args:?}: {err}");
    }
}

#[test]
fn bench_writer_json_reports_every_contender() {
    let out = partout(&[
        "bench",
        "writer",
        "--json",
        "--sf",
        "0.002",
        "--rounds",
        "1",
        "--codecs",
        "none,lz4,zstd",
    ]);
    let lines = json_lines(out);
    let names: Vec<(String, String)> = lines
        .iter()
        .map(|o| {
            (
                o["contender"].as_str().unwrap().to_string(),
                o["codec"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (name, codec) in [
        ("partout", "none"),
        ("partout scatter+copy", "none"),
        ("datafusion way", "none"),
        ("per-slice writer", "none"),
        ("comet way", "none"),
        ("partout", "lz4"),
        ("codec alone", "lz4"),
        ("partout", "zstd"),
        ("datafusion way", "zstd"),
        ("comet way", "zstd"),
        ("codec alone", "zstd"),
    ] {
        assert!(
            names.contains(&(name.to_string(), codec.to_string())),
            "{name} {codec} missing from {names:?}"
        );
    }
    for object in &lines {
        assert_eq!(object["suite"], "writer");
        assert!(
            object["seconds"].as_f64().is_some_and(|s| s > 0.0),
            "{object}"
        );
        assert!(
            object["rows"].as_u64().is_some_and(|r| r > 1000),
            "{object}"
        );
        if object["contender"] == "partout" {
            assert!(
                object["phases_ms"]["scatter"].as_f64().is_some(),
                "{object}"
            );
        }
    }
}

#[test]
fn bench_presto_json_reports_pages_and_ipc() {
    let lines = json_lines(partout(&[
        "bench", "presto", "--json", "--sf", "0.002", "--rounds", "1",
    ]));
    assert_eq!(lines.len(), 5);
    for object in &lines {
        assert_eq!(object["suite"], "presto");
        assert!(
            object["bytes_out"].as_u64().is_some_and(|b| b > 0),
            "{object}"
        );
        assert!(
            object["rows_per_s"].as_f64().is_some_and(|r| r > 0.0),
            "{object}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|o| o["format"] == "presto page" && o["variant"] == "crc32+lz4")
    );
}

/// The suites the tests above leave out run on small inputs and report each contender:
/// partition ids, the writer against DataFusion's own hash, and the network exchange.
#[test]
fn the_ids_writer_and_exchange_suites_report_each_contender() {
    let runs: [(&str, &[&str], &str); 3] = [
        ("ids", &["--quick", "--partitions", "200"], "ours_ns"),
        (
            "writer",
            &[
                "--sf",
                "0.01",
                "--rounds",
                "1",
                "--hash",
                "datafusion",
                "--only",
                "partout,datafusion",
            ],
            "seconds",
        ),
        ("exchange", &["--sf", "0.01", "--rounds", "1"], "seconds"),
    ];
    for (suite, options, figure) in runs {
        let mut args = vec!["bench", suite, "--json"];
        args.extend(options);
        let lines = json_lines(partout(&args));
        assert!(!lines.is_empty(), "{suite}: no result");
        for object in &lines {
            assert_eq!(object["suite"], suite, "{object}");
            assert!(
                object[figure].as_f64().is_some_and(|v| v > 0.0),
                "{figure} in {object}"
            );
        }
        if suite == "writer" {
            let contenders: Vec<_> = lines.iter().map(|o| o["contender"].clone()).collect();
            assert!(
                contenders.contains(&"partout".into()) && contenders.len() >= 2,
                "{contenders:?}"
            );
        }
    }
}

/// `bench e2e` on a file of its own, keyed by each of its columns in turn: every run's files
/// are read back and checked, destination by destination, against the test kit's reference
/// of partout's hash, which must agree with the job's for keys of every kind here (nulls, long
/// and short strings in views, dictionaries, decimals, lists), and the files must keep the
/// input's types exactly.
#[test]
fn bench_e2e_checks_every_destination_by_any_key() {
    use arrow_array::builder::{ListBuilder, StringDictionaryBuilder};
    use arrow_array::types::Int32Type;
    use arrow_array::{
        ArrayRef, Decimal128Array, Int32Array, Int64Array, RecordBatch, StringViewArray,
    };
    use std::sync::Arc;

    let rows = 3000;
    let int: ArrayRef = Arc::new(Int64Array::from_iter(
        (0..rows).map(|i| (i % 11 != 0).then_some(i * 7919 % 1000)),
    ));
    let view: ArrayRef = Arc::new(StringViewArray::from_iter((0..rows).map(|i| {
        (i % 13 != 0).then(|| match i % 3 {
            0 => format!("k{}", i % 50),
            _ => format!("a key longer than twelve bytes {}", i % 70),
        })
    })));
    let mut dictionary = StringDictionaryBuilder::<Int32Type>::new();
    for i in 0..rows {
        dictionary.append_option((i % 17 != 0).then(|| format!("d{}", i % 9)));
    }
    let decimal: ArrayRef = Arc::new(
        Decimal128Array::from_iter_values((0..rows).map(|i| i128::from(i % 300) * 1_000_003))
            .with_precision_and_scale(20, 3)
            .unwrap(),
    );
    let mut list = ListBuilder::new(arrow_array::builder::Int32Builder::new());
    for i in 0..rows {
        list.values().append_slice(&[i as i32 % 5, i as i32 % 7]);
        list.append(i % 19 != 0);
    }
    let ordinal: ArrayRef = Arc::new(Int32Array::from_iter_values(0..rows as i32));
    let batch = RecordBatch::try_from_iter([
        ("int", int),
        ("view", view),
        ("dictionary", Arc::new(dictionary.finish()) as ArrayRef),
        ("decimal", decimal),
        ("list", Arc::new(list.finish()) as ArrayRef),
        ("ordinal", ordinal),
    ])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("keys.parquet");
    let mut writer = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&input).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let input = input.to_str().unwrap();
    for key in ["int", "view", "dictionary", "decimal", "list"] {
        let lines = json_lines(partout(&[
            "bench",
            "e2e",
            "--input",
            input,
            "--by",
            key,
            "-n",
            "5",
            "--threads",
            "1",
            "--rounds",
            "1",
            "--json",
        ]));
        assert_eq!(lines.len(), 2, "{key}: {lines:?}");
        for line in &lines {
            assert_eq!(line["rows"].as_u64(), Some(rows as u64), "{key}: {line}");
            // Every destination of every run read back and found as the reference says.
            assert_eq!(
                line["destinations_checked"], line["destinations"],
                "{key}: {line}"
            );
        }
    }
}

/// `bench plan` runs every fan-out it is given on both id patterns, each plan checked against
/// the ids before it is timed, and prints a figure for each.
#[test]
fn bench_plan_reports_every_fanout_for_every_pattern_and_count() {
    let result = partout(&[
        "bench",
        "plan",
        "--quick",
        "--partitions",
        "4,300",
        "--fanouts",
        "1,2,16",
    ]);
    assert_success(&result);
    let text = String::from_utf8(result.stdout).expect("UTF-8");
    let rows: Vec<(&str, Vec<f64>)> = text
        .lines()
        .filter(|l| l.starts_with("Uniform") || l.starts_with("Runs"))
        .map(|l| {
            let (label, figures) = l.split_at(22);
            let figures = figures
                .split_whitespace()
                .map(|f| f.parse().expect("a figure"))
                .collect();
            (label.trim_end(), figures)
        })
        .collect();
    let labels: Vec<&str> = rows.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        labels,
        [
            "Uniform / 4",
            "Uniform / 300",
            "Runs(4) / 4",
            "Runs(4) / 300"
        ],
        "{text}"
    );
    for (label, figures) in &rows {
        assert_eq!(figures.len(), 3, "{label}: {figures:?}");
        assert!(
            figures.iter().all(|f| f.is_finite() && *f > 0.0),
            "{label}: {figures:?}"
        );
    }
}

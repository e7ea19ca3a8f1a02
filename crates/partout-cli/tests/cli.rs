//! The `partout` binary end to end: the bench JSON contract, the demo, and errors.

use std::process::{Command, Output};

fn partout(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_partout"))
        .args(args)
        .output()
        .expect("the partout binary runs")
}

/// The JSON objects a successful run printed, one per line.
fn json_lines(out: Output) -> Vec<serde_json::Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

#[test]
fn the_demo_checks_and_reports() {
    let out = partout(&["demo", "--batches", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("checked against the reference partitioner"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.trim_end().ends_with('x')).count(),
        4,
        "{text}"
    );
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
        assert!(!err.trim().is_empty(), "{args:?}");
    }
}

#[test]
fn bench_writer_json_reports_every_contender() {
    let out = partout(&[
        "bench", "writer", "--json", "--sf", "0.002", "--rounds", "1",
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
        ("comet way", "none"),
        ("partout", "lz4"),
        ("lz4 alone", "lz4"),
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
fn inspect_describes_presto_pages_and_names_corruption() {
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use partout_format::presto::{PageOptions, encode_page};
    use std::sync::Arc;
    let batch = RecordBatch::try_from_iter([
        (
            "k",
            Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])) as ArrayRef,
        ),
        (
            "s",
            Arc::new(StringArray::from(vec!["a", "bb", "ccc"])) as ArrayRef,
        ),
    ])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.bin");
    let mut bytes = Vec::new();
    encode_page(&batch, PageOptions::default(), &mut bytes).unwrap();
    encode_page(&batch.slice(0, 0), PageOptions::default(), &mut bytes).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let out = partout(&["inspect", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("2 Presto pages, 3 rows"), "{text}");
    assert!(
        text.contains("LONG_ARRAY")
            && text.contains("VARIABLE_WIDTH")
            && text.contains("RLE(LONG_ARRAY)"),
        "{text}"
    );
    assert!(text.contains("checksum ok"), "{text}");
    // One flipped body byte: the checksum names the page.
    bytes[30] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let out = partout(&["inspect", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("checksum mismatch") && err.lines().count() == 1,
        "{err}"
    );
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

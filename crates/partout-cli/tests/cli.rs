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

mod repartition {
    use super::partout;
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use partout_core::ids::{PartitionIds, Partitioning};
    use std::path::Path;
    use std::sync::Arc;

    /// Rows `start..start + len`: `k = i * 7 % 1000`, `s = "v{i}"`, `i` itself.
    fn rows(start: i64, len: i64) -> RecordBatch {
        let range = start..start + len;
        RecordBatch::try_from_iter([
            (
                "i",
                Arc::new(Int64Array::from_iter_values(range.clone())) as ArrayRef,
            ),
            (
                "k",
                Arc::new(Int64Array::from_iter_values(
                    range.clone().map(|i| i * 7 % 1000),
                )) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    range.map(|i| format!("v{i}")),
                )) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    fn parquet(path: &Path, batches: &[RecordBatch]) {
        let file = std::fs::File::create(path).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), None).unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        w.close().unwrap();
    }

    fn run(args: &[&str]) -> std::process::Output {
        let mut all = vec!["repartition", "--quiet"];
        all.extend_from_slice(args);
        partout(&all)
    }

    #[test]
    fn every_row_lands_once_in_its_destination() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        std::fs::create_dir(&input).unwrap();
        parquet(
            &input.join("a.parquet"),
            &[rows(0, 20_000), rows(20_000, 3)],
        );
        parquet(&input.join("b.parquet"), &[rows(20_003, 7_000)]);
        for (scheme, format) in [("hash", "ipc"), ("spark", "presto")] {
            let out = dir.path().join(format!("out-{scheme}"));
            let result = run(&[
                input.to_str().unwrap(),
                "--by",
                "k",
                "-n",
                "7",
                "--scheme",
                scheme,
                "--format",
                format,
                "--compression",
                "lz4",
                "-o",
                out.to_str().unwrap(),
            ]);
            assert!(
                result.status.success(),
                "{}",
                String::from_utf8_lossy(&result.stderr)
            );
            let manifest: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(out.join("_manifest.json")).unwrap())
                    .unwrap();
            assert_eq!(manifest["input_rows"], 27_003);
            let schema = rows(0, 1).schema();
            let partitioning = if scheme == "hash" {
                Partitioning::hash(vec![1], 7)
            } else {
                Partitioning::spark(vec![1], 7)
            };
            let mut ids = PartitionIds::try_new(partitioning, &schema).unwrap();
            let mut seen = vec![0u32; 27_003];
            let mut listed = 0;
            for p in 0..7 {
                let entry = &manifest["destinations"][p];
                let Some(file) = entry["file"].as_str() else {
                    continue;
                };
                let bytes = std::fs::read(out.join(file)).unwrap();
                assert_eq!(entry["bytes"].as_u64().unwrap(), bytes.len() as u64);
                let batches = if format == "ipc" {
                    partout_format::ipc::decode_stream(&bytes).unwrap().1
                } else {
                    partout_format::presto::decode_pages(&bytes, &schema).unwrap()
                };
                let mut buffer = Vec::new();
                let mut rows_here = 0;
                for batch in &batches {
                    ids.compute(batch, &mut buffer).unwrap();
                    assert!(
                        buffer.iter().all(|&id| id as usize == p),
                        "a row in the wrong file"
                    );
                    let i = batch
                        .column(0)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .unwrap();
                    let s = batch
                        .column(2)
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .unwrap();
                    for r in 0..batch.num_rows() {
                        seen[i.value(r) as usize] += 1;
                        assert_eq!(s.value(r), format!("v{}", i.value(r)));
                    }
                    rows_here += batch.num_rows();
                }
                assert_eq!(entry["rows"].as_u64().unwrap(), rows_here as u64);
                listed += rows_here;
            }
            assert_eq!(listed, 27_003);
            assert!(
                seen.iter().all(|&c| c == 1),
                "{scheme}: a row lost or duplicated"
            );
        }
    }

    #[test]
    fn bad_runs_are_one_line_errors_and_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.parquet");
        parquet(&input, &[rows(0, 100)]);
        let out = dir.path().join("out");
        let inp = input.to_str().unwrap();
        let o = out.to_str().unwrap();
        let missing = dir.path().join("missing.csv");
        let corrupt = dir.path().join("zz.parquet");
        std::fs::write(&corrupt, b"PAR1 broken PAR1").unwrap();
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (
                vec![inp, "--by", "nope", "-n", "4", "-o", o],
                "no key column \"nope\"",
            ),
            (vec![inp, "--by", "k", "-n", "0", "-o", o], "between 1 and"),
            (vec![inp, "-n", "4", "-o", o], "--by"),
            (
                vec![
                    inp,
                    "--by",
                    "s",
                    "-n",
                    "4",
                    "--format",
                    "presto",
                    "--compression",
                    "zstd",
                    "-o",
                    o,
                ],
                "ZSTD",
            ),
            (
                vec![
                    inp,
                    corrupt.to_str().unwrap(),
                    "--by",
                    "k",
                    "-n",
                    "4",
                    "-o",
                    o,
                ],
                "zz.parquet",
            ),
            (
                vec![missing.to_str().unwrap(), "--by", "k", "-n", "4", "-o", o],
                "missing.csv",
            ),
        ];
        for (args, want) in cases {
            let result = run(&args);
            assert_eq!(result.status.code(), Some(2), "{args:?}");
            let err = String::from_utf8_lossy(&result.stderr);
            assert!(
                err.contains(want) && err.trim().lines().count() == 1,
                "{args:?}: {err}"
            );
            assert!(!out.exists(), "{args:?} left output behind");
        }
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains("partout"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");

        // An existing, non-empty output directory needs --overwrite.
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("keep.txt"), "x").unwrap();
        let result = run(&[inp, "--by", "k", "-n", "4", "-o", o]);
        assert_eq!(result.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&result.stderr).contains("--overwrite"));
        assert!(out.join("keep.txt").exists());
        let result = run(&[inp, "--by", "k", "-n", "4", "-o", o, "--overwrite"]);
        assert!(
            result.status.success(),
            "{}",
            String::from_utf8_lossy(&result.stderr)
        );
        assert!(!out.join("keep.txt").exists() && out.join("_manifest.json").exists());
    }
}

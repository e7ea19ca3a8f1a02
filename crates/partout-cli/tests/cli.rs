//! The `partout` binary end to end: `repartition`, `inspect`, `serve`, and errors. (`demo` and
//! `bench`, built with the `bench` feature, are tested in `tests/bench.rs`.)

use std::process::{Command, Output};

fn partout(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_partout"))
        .args(args)
        .output()
        .expect("the partout binary runs")
}

/// The `_manifest.json` a run wrote into `out`.
fn manifest(out: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("_manifest.json")).unwrap()).unwrap()
}

/// The run succeeded (its stderr shown when not).
fn assert_success(result: &Output) {
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
}

/// Without the `bench` feature (the product binary) `demo` and `bench`, whatever follows them
/// (`--help` too), say how to get them: one line, exit code 2.
#[cfg(not(feature = "bench"))]
#[test]
fn demo_and_bench_say_how_to_get_them() {
    for args in [
        &["demo"][..],
        &["demo", "--sf", "0.01", "--rounds", "1"],
        &["bench"],
        &["bench", "scatter", "--quick"],
        &["bench", "e2e", "--sf", "0.01"],
        &["bench", "--help"],
    ] {
        let out = partout(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!(
                "partout: `partout {}` is not in this build",
                args[0]
            )) && err.contains("-p partout-cli --features bench"),
            "{args:?}: {err}"
        );
    }
    // The top-level help still lists both, saying the same.
    let out = partout(&["--help"]);
    assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    for command in ["demo", "bench"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(command) && l.contains("--features bench")),
            "{text}"
        );
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
    assert_success(&out);
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

mod repartition {
    use super::{assert_success, manifest, partout};
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use partout_core::ids::{PartitionIds, Partitioning};
    use std::path::Path;
    use std::sync::Arc;

    /// Rows `start..start + len`: `i` itself, `k = key(i)`, `s = text(i, 0)`.
    pub fn rows(start: i64, len: i64) -> RecordBatch {
        padded_rows(start, len, 0)
    }

    /// The key of row `i`: 100,003 values, spread.
    fn key(i: i64) -> i64 {
        i * 7919 % 100_003
    }

    /// The string of row `i`, `pad` characters longer than `v{i}`.
    fn text(i: i64, pad: usize) -> String {
        format!("v{i}{:pad$}", "")
    }

    /// As [`rows`], with strings `pad` characters longer.
    pub fn padded_rows(start: i64, len: i64, pad: usize) -> RecordBatch {
        let range = start..start + len;
        RecordBatch::try_from_iter([
            (
                "i",
                Arc::new(Int64Array::from_iter_values(range.clone())) as ArrayRef,
            ),
            (
                "k",
                Arc::new(Int64Array::from_iter_values(range.clone().map(key))) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(range.map(|i| text(i, pad)))) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    /// No staging directory (`.NAME.partout-PID-N`) is left in `dir`.
    fn assert_no_staging_left(dir: &Path) {
        let leftovers: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains("partout"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
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

    /// The inputs of the round trips: a directory of a Parquet file of many row groups (cut
    /// into several frames), an Arrow IPC file, a CSV file and an Arrow IPC stream; `TOTAL`
    /// rows, `i` from 0.
    const TOTAL: usize = 150_000 + 20_000 + 5_003 + 3_000;

    fn inputs(dir: &Path) -> std::path::PathBuf {
        let input = dir.join("in");
        std::fs::create_dir(&input).unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(10_000))
            .build();
        let file = std::fs::File::create(input.join("a.parquet")).unwrap();
        let batches: Vec<RecordBatch> = (0..15).map(|b| rows(b * 10_000, 10_000)).collect();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), Some(props)).unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        w.close().unwrap();
        let file = std::fs::File::create(input.join("b.arrow")).unwrap();
        let mut w = arrow_ipc::writer::FileWriter::try_new(file, &rows(0, 1).schema()).unwrap();
        w.write(&rows(150_000, 12_000)).unwrap();
        w.write(&rows(162_000, 8_000)).unwrap();
        w.finish().unwrap();
        let file = std::fs::File::create(input.join("c.csv")).unwrap();
        let mut w = arrow_csv::WriterBuilder::new()
            .with_header(true)
            .build(file);
        w.write(&rows(170_000, 5_003)).unwrap();
        let file = std::fs::File::create(input.join("d.arrows")).unwrap();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &rows(0, 1).schema()).unwrap();
        w.write(&rows(175_003, 1_000)).unwrap();
        w.write(&rows(176_003, 2_000)).unwrap();
        w.finish().unwrap();
        input
    }

    /// Every destination's batches, as the manifest lists them.
    fn read_outputs(out: &Path, schema: &arrow_schema::SchemaRef) -> Vec<Vec<RecordBatch>> {
        let manifest = manifest(out);
        let n = manifest["partitions"].as_u64().unwrap() as usize;
        let format = manifest["format"].as_str().unwrap().to_string();
        let decode = |bytes: &[u8]| -> Vec<RecordBatch> {
            match format.as_str() {
                "ipc" => partout_format::ipc::decode_stream(bytes).unwrap().1,
                "presto" => partout_format::presto::decode_pages(bytes, schema).unwrap(),
                "parquet" => {
                    let bytes = bytes::Bytes::copy_from_slice(bytes);
                    parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(bytes, 4096)
                        .unwrap()
                        .map(Result::unwrap)
                        .collect()
                }
                other => panic!("format {other}"),
            }
        };
        let mut outputs = vec![Vec::new(); n];
        let mut bytes_seen = vec![0u64; n];
        match manifest["layout"].as_str().unwrap() {
            "files" => {
                for (p, output) in outputs.iter_mut().enumerate() {
                    let entry = &manifest["destinations"][p];
                    let Some(file) = entry["files"][0]["name"].as_str() else {
                        assert_eq!(entry["files"], serde_json::json!([]), "{entry}");
                        continue;
                    };
                    let bytes = std::fs::read(out.join(file)).unwrap();
                    bytes_seen[p] = bytes.len() as u64;
                    *output = decode(&bytes);
                }
            }
            "shuffle" => {
                for worker in manifest["shuffle_files"].as_array().unwrap() {
                    let data = std::fs::read(out.join(worker["data"].as_str().unwrap())).unwrap();
                    let index = out.join(worker["index"].as_str().unwrap());
                    let (count, ranges) =
                        partout_output::read_shuffle_index(&index, data.len() as u64).unwrap();
                    assert_eq!(count as usize, n);
                    // A destination's ranges of one worker, concatenated, are its stream.
                    let mut streams = vec![Vec::new(); n];
                    for r in ranges {
                        let range = r.offset as usize..(r.offset + r.len) as usize;
                        streams[r.destination as usize].extend_from_slice(&data[range]);
                        bytes_seen[r.destination as usize] += r.len;
                    }
                    for (p, stream) in streams.iter().enumerate() {
                        if !stream.is_empty() {
                            outputs[p].extend(decode(stream));
                        }
                    }
                }
            }
            other => panic!("layout {other}"),
        }
        for p in 0..n {
            let entry = &manifest["destinations"][p];
            assert_eq!(
                entry["bytes"].as_u64().unwrap(),
                bytes_seen[p],
                "destination {p}"
            );
            let rows: usize = outputs[p].iter().map(RecordBatch::num_rows).sum();
            assert_eq!(
                entry["rows"].as_u64().unwrap(),
                rows as u64,
                "destination {p}"
            );
        }
        outputs
    }

    /// Every input row once in the output, in the destination `partitioning` gives it (by
    /// re-hashing), its values intact; the manifest's counts add up.
    fn check(out: &Path, partitioning: Partitioning) {
        let schema = rows(0, 1).schema();
        let n = partitioning.num_partitions() as usize;
        let mut ids = PartitionIds::try_new(partitioning, &schema).unwrap();
        let outputs = read_outputs(out, &schema);
        assert_eq!(outputs.len(), n);
        let mut seen = vec![0u32; TOTAL];
        let mut buffer = Vec::new();
        for (p, batches) in outputs.iter().enumerate() {
            for batch in batches {
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
                let k = batch
                    .column(1)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                let s = batch
                    .column(2)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap();
                for r in 0..batch.num_rows() {
                    let row = i.value(r);
                    seen[row as usize] += 1;
                    assert_eq!(k.value(r), key(row));
                    assert_eq!(s.value(r), text(row, 0));
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "a row lost or duplicated");
        let manifest = manifest(out);
        assert_eq!(manifest["input_rows"], TOTAL as u64);
        assert_eq!(manifest["output_rows"], TOTAL as u64);
        let listed: u64 = (0..n)
            .map(|p| manifest["destinations"][p]["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(manifest["output_bytes"].as_u64().unwrap(), listed);
    }

    #[test]
    fn every_row_lands_once_in_its_destination() {
        let dir = tempfile::tempdir().unwrap();
        let input = inputs(dir.path());
        let cases = [
            ("hash", "parquet", "snappy", "files", "2", "7"),
            ("spark", "parquet", "zstd:1", "files", "1", "16"),
            ("hash", "ipc", "lz4", "files", "2", "5"),
            ("spark", "presto", "lz4", "files", "2", "3"),
            ("hash", "ipc", "none", "shuffle", "2", "300"),
            ("spark", "presto", "none", "shuffle", "3", "7"),
            ("round-robin", "parquet", "none", "files", "2", "7"),
            ("range", "ipc", "zstd:-5", "files", "2", "6"),
            ("spark", "ipc", "zstd", "shuffle", "2", "9"),
        ];
        for (scheme, format, compression, layout, threads, n) in cases {
            let out = dir.path().join(format!("out-{scheme}-{format}-{layout}"));
            let mut args = vec![input.to_str().unwrap(), "-n", n, "--scheme", scheme];
            if scheme != "round-robin" {
                args.extend(["--by", "k"]);
            }
            args.extend([
                "--format",
                format,
                "--compression",
                compression,
                "--layout",
                layout,
                "--threads",
                threads,
                "-o",
                out.to_str().unwrap(),
            ]);
            let result = run(&args);
            assert!(
                result.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&result.stderr)
            );
            assert_eq!(manifest(&out)["compression"], compression, "{args:?}");
            let n: u32 = n.parse().unwrap();
            let partitioning = match scheme {
                "hash" => Partitioning::hash(vec![1], n),
                "spark" => Partitioning::spark(vec![1], n),
                "range" => {
                    // The split points the manifest records, sampled from the input: ranges of
                    // about equal rows.
                    let manifest = manifest(&out);
                    let splits: Vec<i64> = manifest["range_bounds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|row| row[0].as_str().unwrap().parse().unwrap())
                        .collect();
                    assert_eq!(splits.len(), n as usize - 1);
                    for p in 0..n as usize {
                        let rows = manifest["destinations"][p]["rows"].as_u64().unwrap();
                        let even = TOTAL as u64 / u64::from(n);
                        assert!(rows > even / 2 && rows < even * 2, "{p}: {rows} rows");
                    }
                    let bounds = partout_core::ids::RangeBounds {
                        splits: RecordBatch::try_from_iter([(
                            "k",
                            Arc::new(Int64Array::from(splits)) as ArrayRef,
                        )])
                        .unwrap(),
                        options: vec![Default::default()],
                    };
                    Partitioning::range(vec![1], bounds)
                }
                _ => {
                    // Round-robin: each worker deals its rows in turn, continuing across its
                    // batches, so its destinations' counts differ by at most one; over the
                    // workers, by at most one per worker.
                    let manifest = manifest(&out);
                    let counts: Vec<u64> = (0..n as usize)
                        .map(|p| manifest["destinations"][p]["rows"].as_u64().unwrap())
                        .collect();
                    let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                    let workers: u64 = threads.parse().unwrap();
                    assert!(hi - lo <= workers, "{counts:?} over {workers} workers");
                    Partitioning::single()
                }
            };
            if scheme == "round-robin" {
                // Every row once: read all destinations as one.
                let outputs = read_outputs(&out, &rows(0, 1).schema());
                let mut seen: Vec<i64> = outputs
                    .iter()
                    .flatten()
                    .flat_map(|b| {
                        b.column(0)
                            .as_any()
                            .downcast_ref::<Int64Array>()
                            .unwrap()
                            .values()
                            .to_vec()
                    })
                    .collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..TOTAL as i64).collect::<Vec<_>>());
            } else {
                check(&out, partitioning);
            }
            // Spark's buckets are named by bucket id.
            if scheme == "spark" && layout == "files" {
                assert!(out.join(format!("bucket-00002.{}", ext(format))).exists());
            }
        }
    }

    fn ext(format: &str) -> &'static str {
        match format {
            "parquet" => "parquet",
            "ipc" => "arrows",
            _ => "presto",
        }
    }

    /// `path` read by arrow-rs's Parquet reader alone, outside partout.
    fn reference_read(path: &Path) -> Result<Vec<RecordBatch>, Box<dyn std::error::Error>> {
        let file = std::fs::File::open(path)?;
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)?
            .build()?;
        Ok(reader.collect::<Result<_, _>>()?)
    }

    /// Every value partout wrote under `out` is what the reference reader read (`reference`).
    fn assert_written_as_read(out: &Path, reference: &[RecordBatch], what: &str) {
        let ours: Vec<RecordBatch> = read_outputs(out, &reference[0].schema())
            .into_iter()
            .flatten()
            .collect();
        assert!(
            row_strings(&ours) == row_strings(reference),
            "{what}: the values written are not the values in the file"
        );
    }

    /// Every row of `batches` as text, sorted: rows compared whatever their order and batches.
    fn row_strings(batches: &[RecordBatch]) -> Vec<String> {
        use arrow_cast::display::{ArrayFormatter, FormatOptions};
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        for batch in batches {
            let columns: Vec<ArrayFormatter> = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
                .collect();
            for r in 0..batch.num_rows() {
                let row: Vec<String> = columns.iter().map(|c| c.value(r).to_string()).collect();
                rows.push(row.join("|"));
            }
        }
        rows.sort_unstable();
        rows
    }

    #[test]
    fn damaged_data_pages_are_one_line_errors_and_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.parquet");
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .set_max_row_group_row_count(Some(20_000))
            .build();
        let batches: Vec<RecordBatch> = (0..6).map(|b| rows(b * 10_000, 10_000)).collect();
        let file = std::fs::File::create(&good).unwrap();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), Some(props)).unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        w.close().unwrap();
        let bytes = std::fs::read(&good).unwrap();
        let out = dir.path().join("out");
        let mut refused = 0;
        // 64 bytes overwritten at points through the data pages (the footer left whole, so
        // the damage is found while workers read).
        for k in 1..8 {
            let mut damaged = bytes.clone();
            let at = bytes.len() * k / 12;
            for (i, b) in damaged[at..at + 64].iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(37).wrapping_add(k as u8);
            }
            let path = dir.path().join(format!("damaged{k}.parquet"));
            std::fs::write(&path, &damaged).unwrap();
            let result = run(&[
                path.to_str().unwrap(),
                "--by",
                "k",
                "-n",
                "4",
                "--threads",
                "2",
                "-o",
                out.to_str().unwrap(),
            ]);
            let err = String::from_utf8_lossy(&result.stderr);
            if result.status.success() {
                // Damage inside values of an uncompressed stretch can go unseen by any reader;
                // then every value partout wrote must be what arrow-rs's own Parquet reader
                // reads from the same damaged file (and a file it refuses, partout must
                // refuse too).
                let reference = reference_read(&path).unwrap_or_else(|e| {
                    panic!("damage at {at}: partout read a file arrow-rs refuses: {e}")
                });
                assert_written_as_read(&out, &reference, &format!("damage at {at}"));
                std::fs::remove_dir_all(&out).unwrap();
                continue;
            }
            refused += 1;
            assert_eq!(result.status.code(), Some(2), "damage at {at}: {err}");
            assert!(
                err.contains(&format!("damaged{k}.parquet")) && err.trim().lines().count() == 1,
                "damage at {at}: {err}"
            );
            assert!(!out.exists(), "damage at {at} left output behind");
        }
        assert!(refused >= 4, "only {refused} of 7 damaged files refused");
        assert_no_staging_left(dir.path());
    }

    /// Damage no reader can see (bytes of plain, uncompressed Int64 values changed: still
    /// valid values): the run succeeds, and every value written is what arrow-rs's own
    /// reader reads from the damaged file, the changed ones included.
    #[test]
    fn damage_no_reader_sees_is_read_as_the_reference_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("plain.parquet");
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::UNCOMPRESSED)
            .set_dictionary_enabled(false)
            .build();
        let batches: Vec<RecordBatch> = (0..3).map(|b| rows(b * 10_000, 10_000)).collect();
        let file = std::fs::File::create(&good).unwrap();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), Some(props)).unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        let metadata = w.close().unwrap();
        // The middle of the first column's chunk: inside its plain values.
        let chunk = metadata.row_group(0).column(0);
        let at = (chunk.data_page_offset() + chunk.compressed_size() / 2) as usize;
        let mut bytes = std::fs::read(&good).unwrap();
        for (i, b) in bytes[at..at + 16].iter_mut().enumerate() {
            *b ^= 0x5a ^ i as u8;
        }
        let damaged = dir.path().join("damaged.parquet");
        std::fs::write(&damaged, &bytes).unwrap();
        let reference = reference_read(&damaged).unwrap();
        assert!(
            row_strings(&reference) != row_strings(&batches),
            "the damage changed values"
        );
        let out = dir.path().join("out");
        let result = run(&[
            damaged.to_str().unwrap(),
            "--by",
            "k",
            "-n",
            "4",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_success(&result);
        assert_written_as_read(&out, &reference, "plain values damaged");
    }

    #[test]
    fn without_a_terminal_stderr_has_the_summary_alone() {
        let dir = tempfile::tempdir().unwrap();
        let input = inputs(dir.path());
        let out = dir.path().join("out");
        // Not through `run`, which adds --quiet.
        let result = partout(&[
            "repartition",
            input.to_str().unwrap(),
            "--by",
            "k",
            "-n",
            "5",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(result.status.success());
        let err = String::from_utf8_lossy(&result.stderr);
        // No progress bar drawn into a pipe: one line, the summary.
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("partout: {TOTAL} rows"))
                && err.contains("into 5 destinations")
                && err.contains("M rows/s"),
            "{err}"
        );
        assert!(!err.contains('\r') && !err.contains('\u{1b}'), "{err:?}");
        let quiet = run(&[
            input.to_str().unwrap(),
            "--by",
            "k",
            "-n",
            "5",
            "--overwrite",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(quiet.status.success() && quiet.stderr.is_empty());
    }

    #[test]
    fn inspect_reads_a_shuffle_index() {
        let dir = tempfile::tempdir().unwrap();
        let input = inputs(dir.path());
        let out = dir.path().join("out");
        let result = run(&[
            input.to_str().unwrap(),
            "--by",
            "k",
            "-n",
            "6",
            "--format",
            "presto",
            "--layout",
            "shuffle",
            "--threads",
            "1",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_success(&result);
        let manifest = manifest(&out);
        let index = out.join("shuffle-000.index");
        let shown = partout(&["inspect", index.to_str().unwrap()]);
        assert_success(&shown);
        let text = String::from_utf8(shown.stdout).unwrap();
        assert!(
            text.contains(&format!("{TOTAL} rows, 6 of 6 destinations with rows")),
            "{text}"
        );
        // One worker: its ranges are every destination's whole output.
        for p in 0..6 {
            let entry = &manifest["destinations"][p];
            let tail = format!(" ranges, {} rows, {} bytes", entry["rows"], entry["bytes"]);
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("destination {p}: ")) && l.ends_with(&tail)),
                "{p}: {text}"
            );
        }
        // Cut the data file short: the index no longer fits it.
        let data = out.join("shuffle-000.data");
        let bytes = std::fs::read(&data).unwrap();
        std::fs::write(&data, &bytes[..bytes.len() - 1]).unwrap();
        let shown = partout(&["inspect", index.to_str().unwrap()]);
        assert_eq!(shown.status.code(), Some(2));
        let err = String::from_utf8_lossy(&shown.stderr);
        assert!(
            err.contains("passes the data") && err.contains("shuffle-000.index"),
            "{err}"
        );
    }

    #[test]
    fn inspect_reads_back_an_output_directory_and_an_ipc_stream() {
        let dir = tempfile::tempdir().unwrap();
        let input = inputs(dir.path());
        for layout in ["shuffle", "files"] {
            let out = dir.path().join(layout);
            let result = run(&[
                input.to_str().unwrap(),
                "--by",
                "k",
                "-n",
                "4",
                "--format",
                "ipc",
                "--layout",
                layout,
                "-o",
                out.to_str().unwrap(),
            ]);
            assert_success(&result);
            let shown = partout(&["inspect", out.to_str().unwrap()]);
            assert_success(&shown);
            let text = String::from_utf8(shown.stdout).unwrap();
            assert!(
                text.contains(&format!("{layout} layout, 4 destinations")),
                "{text}"
            );
            assert!(
                text.contains(&format!("{TOTAL} rows read back, as recorded")),
                "{text}"
            );
            let manifest = manifest(&out);
            for p in 0..4 {
                let rows = &manifest["destinations"][p]["rows"];
                let line = format!("destination {p}: ");
                assert!(
                    text.lines()
                        .any(|l| l.starts_with(&line) && l.contains(&format!(" {rows} rows"))),
                    "{p}: {text}"
                );
            }
            // A manifest that records other rows than the files hold.
            let path = out.join("_manifest.json");
            let mut edited = manifest.clone();
            let rows = edited["destinations"][2]["rows"].as_u64().unwrap();
            edited["destinations"][2]["rows"] = (rows + 1).into();
            std::fs::write(&path, serde_json::to_vec(&edited).unwrap()).unwrap();
            let shown = partout(&["inspect", out.to_str().unwrap()]);
            assert_eq!(shown.status.code(), Some(2));
            let err = String::from_utf8_lossy(&shown.stderr);
            assert!(
                err.contains(&format!(
                    "destination 2: its files hold {rows} rows, the manifest records {}",
                    rows + 1
                )),
                "{err}"
            );
        }
        // One destination's file, an Arrow IPC stream.
        let manifest = manifest(&dir.path().join("files"));
        let entry = &manifest["destinations"][1];
        let file = dir
            .path()
            .join("files")
            .join(entry["files"][0]["name"].as_str().unwrap());
        let shown = partout(&["inspect", file.to_str().unwrap()]);
        assert_success(&shown);
        let text = String::from_utf8(shown.stdout).unwrap();
        assert!(
            text.contains("Arrow IPC stream, ")
                && text.contains(&format!(" {} rows", entry["rows"])),
            "{text}"
        );
        assert!(text.contains("  k: Int64"), "{text}");
        // Cut short: named.
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() - 20]).unwrap();
        let shown = partout(&["inspect", file.to_str().unwrap()]);
        assert_eq!(shown.status.code(), Some(2));
        let err = String::from_utf8_lossy(&shown.stderr);
        assert!(
            err.contains(file.file_name().unwrap().to_str().unwrap()),
            "{err}"
        );
    }

    #[test]
    fn an_output_inside_the_input_directory_is_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let input = inputs(dir.path());
        let out = input.join("out");
        for _ in 0..2 {
            let result = run(&[
                input.to_str().unwrap(),
                "--by",
                "k",
                "-n",
                "3",
                "--overwrite",
                "-o",
                out.to_str().unwrap(),
            ]);
            assert_success(&result);
            check(&out, Partitioning::hash(vec![1], 3));
        }
    }

    #[test]
    fn a_killed_run_leaves_no_output_that_looks_complete() {
        let dir = tempfile::tempdir().unwrap();
        let input = inputs(dir.path());
        let out = dir.path().join("out");
        let stop_after = [5u64, 40, 150, 400];
        for (attempt, ms) in stop_after.into_iter().enumerate() {
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_partout"))
                .args([
                    "repartition",
                    "--quiet",
                    input.to_str().unwrap(),
                    "--by",
                    "k",
                ])
                .args(["-n", "1000", "--threads", "2", "--memory-limit", "64MiB"])
                .args(["-o", out.to_str().unwrap(), "--overwrite"])
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(ms));
            let _ = child.kill();
            let status = child.wait().unwrap();
            if status.success() || out.exists() {
                // It finished before the kill (or in the moment between putting its output in
                // place and exiting): then a whole output, every row checked.
                check(&out, Partitioning::hash(vec![1], 1000));
                std::fs::remove_dir_all(&out).unwrap();
                continue;
            }
            assert!(
                !out.exists(),
                "attempt {attempt}: a killed run left {}",
                out.display()
            );
        }
        // A later run clears what killed runs left and finishes.
        let result = run(&[
            input.to_str().unwrap(),
            "--by",
            "k",
            "-n",
            "1000",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_success(&result);
        check(&out, Partitioning::hash(vec![1], 1000));
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(!names.iter().any(|n| n.contains("partout")), "{names:?}");
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
        // A nested key column (which the fast hash takes: checked after the errors).
        let nested = dir.path().join("nested.parquet");
        let list = arrow_array::ListArray::from_iter_primitive::<arrow_array::types::Int64Type, _, _>(
            (0..10).map(|i| Some(vec![Some(i), None])),
        );
        parquet(
            &nested,
            &[RecordBatch::try_from_iter([("l", Arc::new(list) as ArrayRef)]).unwrap()],
        );
        let nested_path = nested.to_str().unwrap();
        let compressed = |c| vec![inp, "--by", "k", "-n", "4", "--compression", c, "-o", o];
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (
                vec![inp, "--by", "nope", "-n", "4", "-o", o],
                "no key column \"nope\"",
            ),
            (vec![inp, "--by", "k", "-n", "0", "-o", o], "between 1 and"),
            (
                vec![inp, "-n", "4", "-o", o],
                "the hash scheme needs key columns",
            ),
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
                "presto output takes no zstd compression",
            ),
            (
                vec![
                    inp,
                    "--by",
                    "k",
                    "-n",
                    "4",
                    "--format",
                    "ipc",
                    "--compression",
                    "snappy",
                    "-o",
                    o,
                ],
                "ipc output takes no snappy compression",
            ),
            (
                compressed("zstd:0x1"),
                "ZSTD level \"0x1\" is not a whole number",
            ),
            (
                compressed("zstd:-2"),
                "Parquet takes ZSTD levels 1 to 22, not -2",
            ),
            (
                vec![inp, "--by", "k", "-n", "4", "--layout", "shuffle", "-o", o],
                "shuffle layout writes ipc or presto, not parquet",
            ),
            (
                vec![
                    inp,
                    "--by",
                    "k",
                    "-n",
                    "10000",
                    "--memory-limit",
                    "1MiB",
                    "-o",
                    o,
                ],
                "a memory limit of 1048576 bytes is too small for 10000 destinations",
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
            (
                vec![
                    inp,
                    "--by",
                    "k",
                    "-n",
                    "4",
                    "--format",
                    "ipc",
                    "--layout",
                    "shuffle",
                    "--max-rows-per-file",
                    "10",
                    "-o",
                    o,
                ],
                "files roll over at a size in the files layout",
            ),
            (
                vec![
                    inp,
                    "--by",
                    "k",
                    "-n",
                    "4",
                    "--max-rows-per-file",
                    "0",
                    "-o",
                    o,
                ],
                "--max-rows-per-file",
            ),
            (
                vec![
                    inp,
                    "--by",
                    "k",
                    "-n",
                    "4",
                    "--max-bytes-per-file",
                    "0",
                    "-o",
                    o,
                ],
                "the most bytes per file must be above zero",
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
        assert_no_staging_left(dir.path());
        let result = run(&[nested_path, "--by", "l", "-n", "4", "-o", o]);
        assert!(
            result.status.success(),
            "a list key: {}",
            String::from_utf8_lossy(&result.stderr)
        );
        std::fs::remove_dir_all(&out).unwrap();

        // A size the argument parser refuses: one line too.
        let result = run(&[
            inp,
            "--by",
            "k",
            "-n",
            "4",
            "--memory-limit",
            "12 parsecs",
            "-o",
            o,
        ]);
        assert_eq!(result.status.code(), Some(2));
        let err = String::from_utf8_lossy(&result.stderr);
        assert!(
            err.contains("unknown unit") && err.trim().lines().count() == 1,
            "{err}"
        );

        // An existing, non-empty output directory needs --overwrite; files that are not a
        // partout output are not appended to.
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("keep.txt"), "x").unwrap();
        let result = run(&[inp, "--by", "k", "-n", "4", "-o", o]);
        assert_eq!(result.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&result.stderr).contains("--overwrite"));
        assert!(out.join("keep.txt").exists());
        let result = run(&[inp, "--by", "k", "-n", "4", "--mode", "append", "-o", o]);
        assert_eq!(result.status.code(), Some(2));
        let err = String::from_utf8_lossy(&result.stderr);
        assert!(err.contains("holds files but no _manifest.json"), "{err}");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
        let result = run(&[inp, "--by", "k", "-n", "4", "-o", o, "--overwrite"]);
        assert_success(&result);
        assert!(!out.join("keep.txt").exists() && out.join("_manifest.json").exists());
    }
}

/// Peak memory under `--memory-limit`: a many-batch input several times the limit, partitioned
/// into 8 Parquet files written as flushed (the manifest says so) and into hundreds and
/// thousands of destinations, peaks no more than the limit above what reading the same input
/// into one destination under a tiny limit takes (the reader's own memory, the program); and
/// so does a run whose user set the allocator's purge delay themselves (the binary still sets
/// its other option: eagerly committed arenas took this run to 80 MiB).
#[test]
fn memory_stays_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let batch = |start: i64, len: i64| repartition::padded_rows(start, len, 40);
    // About 150 MiB of Arrow data in 300 batches, row groups of 64K rows.
    let input = dir.path().join("big.parquet");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(1 << 16))
        .build();
    let file = std::fs::File::create(&input).unwrap();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(file, batch(0, 1).schema(), Some(props)).unwrap();
    for b in 0..300 {
        w.write(&batch(b * 8192, 8192)).unwrap();
    }
    w.close().unwrap();
    let peak = |format: &str, layout: &str, n: &str, limit: u64, env: &[(&str, &str)]| {
        let out = dir.path().join(format!("out-{format}-{layout}-{n}"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_partout"));
        command.envs(env.iter().copied());
        let result = command
            .args([
                "repartition",
                "--quiet",
                input.to_str().unwrap(),
                "--by",
                "k",
                "-n",
                n,
                "--threads",
                "2",
                "--format",
                format,
                "--layout",
                layout,
                "--memory-limit",
                &limit.to_string(),
                "-o",
                out.to_str().unwrap(),
            ])
            .output()
            .expect("the partout binary runs");
        assert_success(&result);
        let manifest = manifest(&out);
        std::fs::remove_dir_all(&out).unwrap();
        let direct = manifest["memory_budget"]["parquet_writers_open"].as_u64();
        assert_eq!(
            direct.is_some(),
            format == "parquet" && n == "8",
            "{manifest}"
        );
        (
            manifest["peak_rss_bytes"].as_u64().expect("peak memory"),
            manifest["input_arrow_bytes"].as_u64().unwrap(),
        )
    };
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let (base, _) = peak("ipc", "files", "1", 1 << 20, &[]);
    // A purge delay of the user's own: the binary still sets the allocator's other option.
    let users_delay: &[(&str, &str)] = &[("MIMALLOC_PURGE_DELAY", "2")];
    for (format, layout, n, limit, env) in [
        // Eight Parquet files written as flushed (their writers fit), a hundred staged.
        ("parquet", "files", "8", 32u64 << 20, &[][..]),
        ("parquet", "files", "8", 32u64 << 20, users_delay),
        ("parquet", "files", "100", 32 << 20, &[]),
        ("ipc", "files", "1000", 32 << 20, &[]),
        ("presto", "shuffle", "1000", 32 << 20, &[]),
        ("ipc", "shuffle", "10000", 64 << 20, &[]),
        ("parquet", "files", "10000", 64 << 20, &[]),
    ] {
        let (high, data) = peak(format, layout, n, limit, env);
        assert!(
            data > 2 * limit,
            "the input ({data} bytes) must dwarf the limit"
        );
        eprintln!(
            "{format}/{layout}, {n} destinations{}: peak {:.1} MiB; reading alone {:.1} MiB; limit {:.1} MiB; data {:.1} MiB",
            if env.is_empty() {
                ""
            } else {
                ", the user's purge delay"
            },
            mib(high),
            mib(base),
            mib(limit),
            mib(data)
        );
        assert!(
            high <= base + limit,
            "{format}/{layout}: peak {high} bytes passes reading's {base} plus the limit {limit}"
        );
    }
}

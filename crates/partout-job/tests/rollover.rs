//! Files that roll over at a size (`--max-rows-per-file`, `--max-bytes-per-file`): each
//! destination's rows are exactly those of the same run without rollover, spread over files
//! numbered in order, none over its row limit and none past its byte limit by more than its
//! last row group; for Parquet (staged), Arrow IPC streams (hash), Arrow IPC files (by
//! value) and Presto pages, and read back through the output layer's reader.

mod common;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_select::concat::concat_batches;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use partout_format::presto::decode_page;
use partout_job::{
    DestinationEntry, Format, JobError, JobOptions, Layout, Manifest, ParquetSettings, Rollover,
    repartition,
};
use partout_output::FinishedOutput;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows `0..total`: `id`, a key `k` (a fifth of the rows share key 0: a skewed value) and a
/// string of some length.
fn rows(start: i64, len: i64) -> RecordBatch {
    let ids = start..start + len;
    RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
        ),
        (
            "k",
            Arc::new(Int64Array::from_iter_values(
                ids.clone()
                    .map(|i| if i % 5 == 0 { 0 } else { i * 7919 % 7 }),
            )),
        ),
        (
            "s",
            Arc::new(StringArray::from_iter_values(
                ids.map(|i| format!("{i:x}").repeat(1 + (i % 7) as usize)),
            )),
        ),
    ])
    .unwrap()
}

fn input(dir: &Path, total: i64) -> PathBuf {
    common::parquet_input(dir, total, rows)
}

/// A file's batches, read by the format's own reader (parquet's, arrow-ipc's).
fn read_file(path: &Path, format: Format) -> Vec<RecordBatch> {
    let file = std::fs::File::open(path).unwrap();
    match format {
        Format::Parquet => ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .map(Result::unwrap)
            .collect(),
        _ if path.extension().is_some_and(|e| e == "arrow") => {
            arrow_ipc::reader::FileReader::try_new(file, None)
                .unwrap()
                .map(Result::unwrap)
                .collect()
        }
        _ => arrow_ipc::reader::StreamReader::try_new(file, None)
            .unwrap()
            .map(Result::unwrap)
            .collect(),
    }
}

/// A destination's rows: its files read in order and checked against what the manifest
/// says of each (rows, bytes), sorted by `id`.
fn destination_rows(out: &Path, entry: &DestinationEntry, format: Format) -> RecordBatch {
    let mut batches = Vec::new();
    for file in entry.files.as_deref().unwrap() {
        let path = out.join(&file.name);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            file.bytes,
            "{}",
            file.name
        );
        let read = read_file(&path, format);
        let rows: usize = read.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows as u64, file.rows, "{}", file.name);
        batches.extend(read);
    }
    let schema = rows(0, 1).schema();
    sorted(&concat_batches(&schema, &batches).unwrap())
}

/// `batch` in the order of its `id` column.
fn sorted(batch: &RecordBatch) -> RecordBatch {
    let ids = batch
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let mut order: Vec<u32> = (0..batch.num_rows() as u32).collect();
    order.sort_by_key(|&i| ids.value(i as usize));
    let order = arrow_array::UInt32Array::from(order);
    arrow_select::take::take_record_batch(batch, &order).unwrap()
}

fn options(input: &Path, out: &Path, n: u32, format: Format) -> JobOptions {
    JobOptions::new([input], out, n)
        .with_keys(["id"])
        .with_format(format)
        .with_threads(2)
}

/// The names a destination's files must have: its name without rollover, each file's
/// number before the extension, counting from zero.
fn assert_numbered(entry: &DestinationEntry, unrolled: &str) {
    let (stem, extension) = unrolled.rsplit_once('.').unwrap();
    for (k, file) in entry.files.as_deref().unwrap().iter().enumerate() {
        assert_eq!(file.name, format!("{stem}-{k:05}.{extension}"));
    }
}

/// Every file of `out` but the manifest is one the manifest lists.
fn assert_only_listed(out: &Path, manifest: &Manifest) {
    let mut listed: Vec<String> = manifest
        .destinations
        .iter()
        .flat_map(|d| d.files.iter().flatten().map(|f| f.name.clone()))
        .collect();
    listed.push("_manifest.json".into());
    listed.sort();
    let mut found = Vec::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let name = path.strip_prefix(out).unwrap();
                found.push(name.to_str().unwrap().to_string());
            }
        }
    }
    found.sort();
    assert_eq!(found, listed);
}

#[test]
fn a_row_limit_spreads_each_destination_over_numbered_files_of_that_many_rows() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 50_000);
    // Parquet files written as flushed (the default limit holds their writers) and staged
    // (a limit that holds none); Arrow IPC streams.
    for (format, limit, n, max, direct) in [
        (Format::Parquet, 256u64 << 20, 3, 4000, true),
        (Format::Parquet, 8 << 20, 64, 300, false),
        (Format::Ipc, 256 << 20, 3, 4000, false),
    ] {
        let whole = dir.path().join(format!("whole-{format}-{limit}"));
        let rolled = dir.path().join(format!("rolled-{format}-{limit}"));
        let one = repartition(options(&input, &whole, n, format).with_memory_limit(limit)).unwrap();
        let rows = Rollover::new(Some(max), None).unwrap();
        let options = options(&input, &rolled, n, format).with_memory_limit(limit);
        let many = repartition(options.with_rollover(rows)).unwrap().manifest;
        assert_eq!(
            many.memory_budget.parquet_writers_open > 0,
            direct,
            "{format} in {limit}"
        );
        for (p, entry) in many.destinations.iter().enumerate() {
            let unrolled = &one.manifest.destinations[p];
            let files = entry.files.as_deref().unwrap();
            assert!(files.len() > 1, "{format}: destination {p} rolled over");
            // Every file full but the last.
            let (last, full) = files.split_last().unwrap();
            assert!(full.iter().all(|f| f.rows == max), "{format}: {files:?}");
            assert!(last.rows > 0 && last.rows <= max, "{format}: {last:?}");
            assert_eq!(entry.rows, unrolled.rows);
            assert_numbered(entry, &unrolled.only_file().unwrap().name);
            // The same rows as the run without rollover, each once.
            assert_eq!(
                destination_rows(&rolled, entry, format),
                destination_rows(&whole, unrolled, format),
                "{format}: destination {p}"
            );
        }
        assert_only_listed(&rolled, &many);
    }
}

#[test]
fn rolled_streams_read_back_through_the_output_layer_as_the_whole_destination() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 30_000);
    for format in [Format::Ipc, Format::Presto] {
        let whole = dir.path().join(format!("whole-{format}"));
        let rolled = dir.path().join(format!("rolled-{format}"));
        repartition(options(&input, &whole, 2, format)).unwrap();
        let limit = Rollover::new(Some(3000), None).unwrap();
        repartition(options(&input, &rolled, 2, format).with_rollover(limit)).unwrap();
        let (whole, rolled) = (
            FinishedOutput::open(&whole).unwrap(),
            FinishedOutput::open(&rolled).unwrap(),
        );
        for p in 0..2 {
            let read = |output: &FinishedOutput| {
                let mut cursor = output.cursor(p).unwrap();
                let mut batches = Vec::new();
                let schema = rows(0, 1).schema();
                while let Some(message) = cursor.next_message().unwrap() {
                    batches.push(message.to_batch(&schema).unwrap());
                }
                sorted(&concat_batches(&schema, &batches).unwrap())
            };
            let entry = &rolled.manifest().destinations[p as usize];
            let files = entry.files.as_deref().unwrap();
            assert!(files.len() >= 4, "{format}: {files:?}");
            // Each file within the limit, and the files together the destination's rows; an
            // Arrow IPC stream's rows counted by arrow's own reader, not the manifest.
            assert!(files.iter().all(|f| f.rows <= 3000), "{format}: {files:?}");
            assert_eq!(files.iter().map(|f| f.rows).sum::<u64>(), entry.rows);
            if format == Format::Ipc {
                for f in files {
                    let path = dir.path().join(format!("rolled-{format}")).join(&f.name);
                    let reader = arrow_ipc::reader::StreamReader::try_new(
                        std::fs::File::open(&path).unwrap(),
                        None,
                    )
                    .unwrap();
                    let read: usize = reader.map(|b| b.unwrap().num_rows()).sum();
                    assert_eq!(read as u64, f.rows, "{}", f.name);
                }
            }
            assert_eq!(read(&rolled), read(&whole), "{format}: destination {p}");
        }
    }
}

#[test]
fn a_byte_limit_ends_each_file_within_one_row_group_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 200_000);
    // Parquet row groups of 4096 rows, about 40 KiB; Arrow IPC batches of 8192 rows, about
    // 260 KiB: several to a file.
    for (format, max, batch_bytes, limit) in [
        (Format::Parquet, 256u64 << 10, None, 256u64 << 20),
        (Format::Parquet, 256 << 10, None, 8 << 20),
        (Format::Ipc, 512 << 10, Some(320u64 << 10), 256 << 20),
    ] {
        let out = dir.path().join(format!("by-value-{format}-{limit}"));
        let rollover = Rollover::new(None, Some(max)).unwrap();
        let mut options = JobOptions::new([&input], &out, 1)
            .with_partition_by(["k"])
            .with_format(format)
            .with_threads(2)
            .with_memory_limit(limit)
            .with_rollover(rollover);
        if format == Format::Parquet {
            let rows = ParquetSettings::parse([("row_group_rows", "4096")]).unwrap();
            options = options.with_parquet_settings(rows);
        }
        let manifest = repartition(options).unwrap().manifest;
        let direct = manifest.memory_budget.parquet_writers_open > 0;
        assert_eq!(
            direct,
            format == Format::Parquet && limit > 8 << 20,
            "{format} {limit}"
        );
        let mut seen = vec![false; 200_000];
        for entry in &manifest.destinations {
            let files = entry.files.as_deref().unwrap();
            let value = files[0].name.split('/').next().unwrap().to_string();
            for (k, file) in files.iter().enumerate() {
                let path = out.join(&file.name);
                assert!(file.name.starts_with(&format!("{value}/")), "{}", file.name);
                let last = k + 1 == files.len();
                // Before its last row group (or batch) the file was under the limit.
                let tail = match batch_bytes {
                    None => {
                        let reader = ParquetRecordBatchReaderBuilder::try_new(
                            std::fs::File::open(&path).unwrap(),
                        )
                        .unwrap();
                        let groups = reader.metadata().row_groups();
                        let footer = file.bytes
                            - groups
                                .iter()
                                .map(|g| g.compressed_size() as u64)
                                .sum::<u64>();
                        groups.last().unwrap().compressed_size() as u64 + footer
                    }
                    Some(bytes) => bytes,
                };
                assert!(
                    file.bytes < max + tail,
                    "{format}: {} {}",
                    file.name,
                    file.bytes
                );
                if !last {
                    assert!(
                        file.bytes >= max / 2,
                        "{format}: {} {}",
                        file.name,
                        file.bytes
                    );
                }
                // The Hive layout leaves `k` out of the files.
                let read = read_file(&path, format);
                let batch = concat_batches(&read[0].schema(), &read).unwrap();
                assert_eq!(batch.num_rows() as u64, file.rows, "{}", file.name);
                let ids = batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                for id in ids.values() {
                    let k = if id % 5 == 0 { 0 } else { id * 7919 % 7 };
                    assert_eq!(value, format!("k={k}"), "row {id}");
                    assert!(
                        !std::mem::replace(&mut seen[*id as usize], true),
                        "row {id} twice"
                    );
                }
            }
        }
        assert!(seen.iter().all(|&s| s), "{format}: a row lost");
        let skewed = manifest
            .destinations
            .iter()
            .map(|d| d.files.as_ref().unwrap().len());
        assert!(
            skewed.max().unwrap() >= 3,
            "{format}: the skewed value rolled over"
        );
        assert_only_listed(&out, &manifest);
    }
}

/// Presto pages roll over at a byte limit as the other formats do: each file is ended by the
/// page that takes it to the limit (under it before that page, at or past it after), its
/// pages decode to the rows the manifest says, and the files together are the destination
/// of the same run without rollover.
#[test]
fn a_byte_limit_ends_each_presto_file_at_the_page_that_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 200_000);
    let max = 256u64 << 10;
    let (whole, rolled) = (dir.path().join("whole"), dir.path().join("rolled"));
    let one = repartition(options(&input, &whole, 2, Format::Presto))
        .unwrap()
        .manifest;
    let limit = Rollover::new(None, Some(max)).unwrap();
    let many = repartition(options(&input, &rolled, 2, Format::Presto).with_rollover(limit))
        .unwrap()
        .manifest;
    let schema = rows(0, 1).schema();
    let pages = |path: &Path| -> Vec<(RecordBatch, usize)> {
        let bytes = std::fs::read(path).unwrap();
        let mut at = 0;
        let mut pages = Vec::new();
        while at < bytes.len() {
            let (batch, taken) = decode_page(&bytes[at..], &schema).unwrap();
            at += taken;
            pages.push((batch, taken));
        }
        pages
    };
    for (p, entry) in many.destinations.iter().enumerate() {
        let unrolled = &one.destinations[p];
        let files = entry.files.as_deref().unwrap();
        assert!(files.len() >= 3, "destination {p}: {files:?}");
        assert_numbered(entry, &unrolled.only_file().unwrap().name);
        let mut batches = Vec::new();
        for (k, file) in files.iter().enumerate() {
            let path = rolled.join(&file.name);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), file.bytes);
            let read = pages(&path);
            let last_page = read.last().unwrap().1 as u64;
            assert!(
                file.bytes - last_page < max,
                "{}: {} bytes",
                file.name,
                file.bytes
            );
            if k + 1 < files.len() {
                assert!(file.bytes >= max, "{}: {} bytes", file.name, file.bytes);
            }
            let rows: usize = read.iter().map(|(b, _)| b.num_rows()).sum();
            assert_eq!(rows as u64, file.rows, "{}", file.name);
            batches.extend(read.into_iter().map(|(b, _)| b));
        }
        let unrolled = pages(&whole.join(&unrolled.only_file().unwrap().name));
        let unrolled: Vec<RecordBatch> = unrolled.into_iter().map(|(b, _)| b).collect();
        assert_eq!(
            sorted(&concat_batches(&schema, &batches).unwrap()),
            sorted(&concat_batches(&schema, &unrolled).unwrap()),
            "destination {p}"
        );
    }
    assert_only_listed(&rolled, &many);
}

#[test]
fn limits_are_refused_where_they_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path(), 10);
    let limit = Rollover::new(Some(5), None).unwrap();
    let shuffle = options(&input, &dir.path().join("s"), 2, Format::Ipc)
        .with_layout(Layout::Shuffle)
        .with_rollover(limit);
    let err = repartition(shuffle).unwrap_err();
    assert!(
        matches!(&err, JobError::InvalidOption(what) if what.contains("shuffle layout")),
        "{err}"
    );
    assert!(!dir.path().join("s").exists());
    let zero = Rollover::new(None, Some(0)).unwrap_err().to_string();
    assert!(zero.contains("above zero"), "{zero}");
}

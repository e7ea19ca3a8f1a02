//! Parquet files written as flushed ([`FlushedParquet`]): every row once in its destination's
//! file, whether the file was open from its first flush or its destination was staged past the
//! writers' budget; rows that never filled the sample written at the end; writers past their
//! budget end row groups early; nothing left behind when abandoned.

use crate::staged::rows;
use arrow_array::{Array, Int64Array, StringArray, UInt32Array};
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::properties::WriterProperties;
use partout_exchange::BatchSink;
use partout_format::ipc::Compression;
use partout_output::FileList;
use partout_output::{
    DestinationFile, FlushedParquet, PAGE_ROWS, ParquetWriterConfig, StagedFiles,
};
use std::path::Path;
use std::sync::Arc;

/// `destinations` files in `dir`, their writers holding `budget` bytes together.
fn output(dir: &Path, destinations: usize, budget: usize) -> FlushedParquet {
    let options = ParquetWriterConfig {
        properties: WriterProperties::builder()
            .set_max_row_group_row_count(Some(1 << 20))
            .build(),
        row_group_bytes: 64 << 20,
        staging: Compression::None,
        chosen: Default::default(),
    };
    let staged =
        StagedFiles::try_new(dir, "part", rows(0, 1).schema(), destinations, options).unwrap();
    FlushedParquet::new(staged, budget)
}

/// Flushes rows `0..total` over `destinations` destinations (row `i` to `i % destinations`)
/// through two workers' sinks (even and odd batches of `batch` rows).
fn flush(output: &FlushedParquet, total: i64, batch: i64, destinations: usize) {
    let mut workers = [output.sink(0).unwrap(), output.sink(1).unwrap()];
    for (b, start) in (0..total).step_by(batch as usize).enumerate() {
        let rows = rows(start, batch.min(total - start));
        for p in 0..destinations {
            let take: Vec<u32> = (0..rows.num_rows() as u32)
                .filter(|&r| (start as usize + r as usize) % destinations == p)
                .collect();
            let slice =
                arrow_select::take::take_record_batch(&rows, &UInt32Array::from(take)).unwrap();
            if slice.num_rows() > 0 {
                workers[b % 2].write_batch(p, &slice).unwrap();
            }
        }
    }
    for w in &mut workers {
        w.finish(&mut vec![0; output_destinations(destinations)])
            .unwrap();
    }
}

fn output_destinations(destinations: usize) -> usize {
    destinations + 1
}

/// The files in `dir` and below, sorted, as paths relative to it.
fn names(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap();
                names.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    names.sort();
    names
}

/// What a file holds: its rows' ids, its row groups, and its first column's most rows in a
/// page.
struct Read {
    ids: Vec<i64>,
    row_groups: Vec<u64>,
    page_rows: i64,
}

/// Reads `file` in `dir`, checking its size and row groups against what the writer said
/// and each row's name against its id.
fn read(dir: &Path, file: &DestinationFile) -> Read {
    let name = file.name.as_str();
    let path = dir.join(name);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        file.bytes,
        "{name}"
    );
    let reader = ParquetRecordBatchReaderBuilder::try_new_with_options(
        std::fs::File::open(&path).unwrap(),
        ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required),
    )
    .unwrap();
    let metadata = reader.metadata().clone();
    let row_groups: Vec<u64> = metadata
        .row_groups()
        .iter()
        .map(|rg| rg.num_rows() as u64)
        .collect();
    assert_eq!(file.row_groups.as_ref(), Some(&row_groups), "{name}");
    let mut page_rows = 0;
    for (g, offsets) in metadata.offset_index().into_iter().flatten().enumerate() {
        let starts: Vec<i64> = offsets[0]
            .page_locations()
            .iter()
            .map(|l| l.first_row_index)
            .chain([metadata.row_group(g).num_rows()])
            .collect();
        page_rows = starts
            .windows(2)
            .map(|w| w[1] - w[0])
            .fold(page_rows, i64::max);
    }
    let mut ids = Vec::new();
    for batch in reader.build().unwrap() {
        let batch = batch.unwrap();
        let id = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let names = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        for r in 0..batch.num_rows() {
            let i = id.value(r);
            let want = (i % 7 != 0).then(|| format!("n{i}"));
            assert_eq!(
                names.is_valid(r).then(|| names.value(r)),
                want.as_deref(),
                "{name}"
            );
            ids.push(i);
        }
    }
    Read {
        ids,
        row_groups,
        page_rows,
    }
}

/// Checks that every row of `0..total` is in its destination's file once; each file as read.
fn every_row_once(dir: &Path, files: &[FileList], total: i64, destinations: usize) -> Vec<Read> {
    let mut seen = vec![false; total as usize];
    let read: Vec<Read> = files
        .iter()
        .map(|f| {
            let [file] = f.as_slice() else {
                panic!("one file a destination: {f:?}");
            };
            let read = read(dir, file);
            assert_eq!(read.ids.len() as u64, file.rows, "{}", file.name);
            read
        })
        .collect();
    for (p, file) in read.iter().enumerate() {
        for &i in &file.ids {
            assert_eq!(i as usize % destinations, p, "row {i} in destination {p}");
            assert!(!seen[i as usize], "row {i} twice");
            seen[i as usize] = true;
        }
    }
    assert!(seen.iter().all(|&s| s), "a row lost");
    read
}

#[test]
fn every_row_lands_once_whether_its_file_was_written_as_flushed_or_staged() {
    let dir = tempfile::tempdir().unwrap();
    let destinations = 5;
    let schema = rows(0, 1).schema();
    // Writers for two of the five destinations: the others are staged.
    let output = output(
        dir.path(),
        output_destinations(destinations),
        2 * FlushedParquet::writer_bytes(&schema) as usize,
    );
    let total = 300_000;
    flush(&output, total, 1000, destinations);
    let files = output.finish(None, 2, &|| false).unwrap();
    assert_eq!(
        names(dir.path()),
        (0..=destinations)
            .map(|p| format!("part-{p:05}.parquet"))
            .collect::<Vec<_>>(),
        "scratch, page and partial files removed"
    );
    let read = every_row_once(dir.path(), &files, total, destinations);
    // Written as flushed: pages end once past PAGE_ROWS rows (the writer checks between its
    // mini-batches of 1024). Staged: pages of 64 KiB, here about 20,000 rows.
    let direct = read
        .iter()
        .filter(|r| !r.ids.is_empty() && r.page_rows < 2 * PAGE_ROWS as i64)
        .count();
    assert_eq!(
        direct,
        2,
        "{:?}",
        read.iter().map(|r| r.page_rows).collect::<Vec<_>>()
    );
    for r in &read[..destinations] {
        assert_eq!(r.row_groups, [60_000], "one row group a file, either way");
    }
    assert!(read[destinations].ids.is_empty() && read[destinations].row_groups.is_empty());
}

/// Workers flushing to the same few destinations at once: a worker that finds one's lock held
/// leaves its batch for the holder (when the budget holds it), and every row still lands once.
/// With no room in the budget, none is left and each waits for the lock. Whether two workers
/// meet at a lock is the scheduler's doing (4 workers on however many cores): the run is
/// repeated, up to 8 times, until one batch was left, every run's rows checked.
#[test]
fn batches_left_for_a_busy_destination_are_each_written_once() {
    for (budget, leaves) in [(64 << 20, true), (1, false)] {
        let attempts = if leaves { 8 } else { 1 };
        let lefts: Vec<usize> = (0..attempts)
            .map(|_| contended_run(budget))
            .take_while(|&left| left == 0 || !leaves)
            .collect();
        if leaves {
            assert!(
                lefts.len() < attempts,
                "no batch left in {attempts} runs at a budget of {budget}"
            );
        } else {
            assert_eq!(lefts, [0], "batches left at a budget of {budget}");
        }
    }
}

/// Four workers flushing rows of one parity each to two destinations at `budget`: every row
/// checked to land once, in its destination; the batches left for a lock's holder.
fn contended_run(budget: usize) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let destinations = 2;
    let output = output(dir.path(), output_destinations(destinations), budget);
    let (workers, batch, batches) = (4, 500, 200);
    let total = workers * batch * batches;
    std::thread::scope(|scope| {
        for w in 0..workers {
            let output = &output;
            scope.spawn(move || {
                let mut sink = output.sink(w as usize).unwrap();
                for b in 0..batches {
                    let start = (b * workers + w) * batch;
                    let rows = rows(start, batch);
                    // Rows of one parity, so each lands in its destination.
                    for p in 0..destinations as i64 {
                        let take: Vec<u32> = (0..batch as u32)
                            .filter(|&r| (start + r as i64) % 2 == p)
                            .collect();
                        let slice =
                            arrow_select::take::take_record_batch(&rows, &UInt32Array::from(take))
                                .unwrap();
                        sink.write_batch(p as usize, &slice).unwrap();
                    }
                }
                sink.finish(&mut vec![0; output_destinations(destinations)])
                    .unwrap();
            });
        }
    });
    let left = output.left();
    let files = output.finish(None, 2, &|| false).unwrap();
    every_row_once(dir.path(), &files, total, destinations);
    left
}

#[test]
fn rows_that_never_fill_the_sample_are_written_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let destinations = 3;
    let output = output(dir.path(), output_destinations(destinations), 64 << 20);
    let total = 1000;
    flush(&output, total, 100, destinations);
    // Nothing is written before the end: the rows are the sample.
    assert!(names(dir.path()).iter().all(|n| n.starts_with(".scratch")));
    let files = output.finish(None, 2, &|| false).unwrap();
    let read = every_row_once(dir.path(), &files, total, destinations);
    assert_eq!(read.len(), destinations + 1);
    assert!(read[destinations].ids.is_empty());
}

#[test]
fn writers_past_their_budget_end_row_groups_early_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let destinations = 3;
    // A budget of one byte: one writer, ending its row group after every write.
    let output = output(dir.path(), output_destinations(destinations), 1);
    let total = 30_000;
    flush(&output, total, 3000, destinations);
    let files = output.finish(None, 1, &|| false).unwrap();
    let read = every_row_once(dir.path(), &files, total, destinations);
    let most = read.iter().map(|r| r.row_groups.len()).max().unwrap();
    assert!(
        most >= 5,
        "{:?}",
        read.iter().map(|r| &r.row_groups).collect::<Vec<_>>()
    );
}

#[test]
fn files_go_to_the_names_given() {
    let dir = tempfile::tempdir().unwrap();
    let destinations = 2;
    let output = output(dir.path(), output_destinations(destinations), 64 << 20);
    flush(&output, 100_000, 2000, destinations);
    let given: Vec<String> = (0..=destinations)
        .map(|p| format!("k={p}/part-00000.parquet"))
        .collect();
    let files = output.finish(Some(given.clone()), 2, &|| false).unwrap();
    assert_eq!(names(dir.path()), given);
    every_row_once(dir.path(), &files, 100_000, destinations);
}

#[test]
fn an_abandoned_or_cancelled_output_leaves_nothing_behind() {
    for cancel in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let destinations = 4;
        let output = output(dir.path(), output_destinations(destinations), 64 << 20);
        flush(&output, 100_000, 1000, destinations);
        assert!(
            names(dir.path()).iter().any(|n| n.ends_with(".partial")),
            "{:?}",
            names(dir.path())
        );
        if cancel {
            let err = output.finish(None, 2, &|| true).unwrap_err();
            assert!(
                matches!(err, partout_exchange::WriterError::Failed),
                "{err}"
            );
        } else {
            drop(output);
        }
        assert_eq!(names(dir.path()), Vec::<String>::new());
    }
}

/// A schema Parquet cannot carry plans no writer (the output refuses it by name later), and
/// planning never reaches the parquet crate's conversion, which panics on unions.
#[test]
fn a_schema_parquet_cannot_carry_plans_no_writer_and_does_not_panic() {
    use arrow_schema::{DataType, Field, Schema, UnionFields, UnionMode};
    let union = DataType::Union(
        UnionFields::try_new([0], [Field::new("a", DataType::Int32, true)]).unwrap(),
        UnionMode::Sparse,
    );
    let schema = Arc::new(Schema::new(vec![Field::new("u", union, true)]));
    assert_eq!(FlushedParquet::writer_bytes(&schema), u64::MAX);
    let flat = rows(0, 1).schema();
    assert!(FlushedParquet::writer_bytes(&flat) < 1 << 20);
}

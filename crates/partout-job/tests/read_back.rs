//! Finished outputs read back through the output layer's reader ([`FinishedOutput`] and its
//! [`FileCursor`]s), in each stream format and layout: every row once, equal keys in one
//! destination, a destination's file read exactly as arrow's own stream reader reads it,
//! skipping landing on the message a full read gives; and damaged or missing files refused
//! naming the file.

use arrow_array::{
    ArrayRef, DictionaryArray, Int64Array, RecordBatch, RecordBatchIterator, cast::AsArray,
    types::Int32Type, types::Int64Type,
};
use arrow_schema::SchemaRef;
use partout_exchange::ExchangeError;
use partout_format::Format;
use partout_job::{Job, JobOptions, Layout};
use partout_output::{FileCursor, FinishedOutput};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const ROWS: i64 = 200_000;

/// Rows `start..start + len`: a key of 97 values, the row's id, and a dictionary column.
fn batch(start: i64, len: i64) -> RecordBatch {
    let ids = start..start + len;
    let words: DictionaryArray<Int32Type> = ids
        .clone()
        .map(|i| ["north", "south", "east", "west"][(i % 4) as usize])
        .collect();
    RecordBatch::try_from_iter([
        (
            "k",
            Arc::new(Int64Array::from_iter_values(
                ids.clone().map(|i| i * 31 % 97),
            )) as ArrayRef,
        ),
        ("id", Arc::new(Int64Array::from_iter_values(ids))),
        ("w", Arc::new(words)),
    ])
    .unwrap()
}

/// A hash-partitioned output of [`ROWS`] rows into 5 destinations, on 2 workers under a
/// small memory limit (so destinations are flushed many times).
fn output(dir: &Path, format: Format, layout: Layout) -> (std::path::PathBuf, SchemaRef) {
    let batches: Vec<_> = (0..ROWS / 1000)
        .map(|b| Ok(batch(b * 1000, 1000)))
        .collect();
    let schema = batch(0, 1).schema();
    let out = dir.join(format!("{format:?}-{layout:?}"));
    let options = JobOptions::new(Vec::<std::path::PathBuf>::new(), &out, 5)
        .with_keys(["k"])
        .with_format(format)
        .with_layout(layout)
        .with_threads(2)
        .with_memory_limit(4 << 20);
    let stream = Box::new(RecordBatchIterator::new(batches, schema.clone()));
    let report = Job::from_stream(options, stream).unwrap().run(&()).unwrap();
    assert_eq!(report.manifest.output_rows, ROWS as u64);
    (out, schema)
}

/// `(k, id, w)` of every row of `batches`.
fn rows(batches: &[RecordBatch]) -> Vec<(i64, i64, String)> {
    let mut rows = Vec::new();
    for b in batches {
        let k = b.column(0).as_primitive::<Int64Type>();
        let id = b.column(1).as_primitive::<Int64Type>();
        let w = b.column(2).as_dictionary::<Int32Type>();
        let values = w.values().as_string::<i32>();
        for i in 0..b.num_rows() {
            let word = values.value(w.keys().value(i) as usize).to_string();
            rows.push((k.value(i), id.value(i), word));
        }
    }
    rows
}

/// Every destination's batches, read through the output layer.
fn read_all(output: &FinishedOutput, schema: &SchemaRef) -> Vec<Vec<RecordBatch>> {
    (0..output.partitions())
        .map(|p| {
            let mut cursor = output.cursor(p).unwrap();
            let mut batches = Vec::new();
            while let Some(b) = cursor.next_batch(Some(schema)).unwrap() {
                assert_eq!(b.schema().fields(), schema.fields());
                batches.push(b);
            }
            batches
        })
        .collect()
}

#[test]
fn every_stream_output_reads_back_every_row_once_by_key() {
    let dir = tempfile::tempdir().unwrap();
    for format in [Format::Ipc, Format::Presto] {
        for layout in [Layout::Files, Layout::Shuffle] {
            let (out, schema) = output(dir.path(), format, layout);
            let finished = FinishedOutput::open(&out).unwrap();
            assert_eq!(finished.partitions(), 5);
            assert_eq!(finished.schema().is_some(), format == Format::Ipc);
            let read = read_all(&finished, &schema);
            let mut destination_of = BTreeMap::new();
            let mut ids = Vec::new();
            for (p, batches) in read.iter().enumerate() {
                let got = rows(batches);
                assert_eq!(
                    got.len() as u64,
                    finished.manifest().destinations[p].rows,
                    "{format:?} {layout:?}: destination {p}"
                );
                for (k, id, w) in got {
                    assert_eq!(*destination_of.entry(k).or_insert(p), p, "key {k} split");
                    assert_eq!(w, ["north", "south", "east", "west"][(id % 4) as usize]);
                    assert_eq!(k, id * 31 % 97);
                    ids.push(id);
                }
            }
            ids.sort_unstable();
            assert_eq!(ids, (0..ROWS).collect::<Vec<_>>(), "{format:?} {layout:?}");
            assert_eq!(destination_of.len(), 97);
        }
    }
}

#[test]
fn a_destination_file_reads_as_arrow_reads_it_and_skips_to_the_same_message() {
    let dir = tempfile::tempdir().unwrap();
    let (out, schema) = output(dir.path(), Format::Ipc, Layout::Files);
    let finished = FinishedOutput::open(&out).unwrap();
    let read = read_all(&finished, &schema);
    for (p, batches) in read.iter().enumerate() {
        let entry = &finished.manifest().destinations[p];
        let file =
            std::fs::File::open(out.join(entry.only_file().map(|f| f.name.as_str()).unwrap()))
                .unwrap();
        // arrow-ipc's own reader: the same batches in the same order.
        let theirs: Vec<RecordBatch> = arrow_ipc::reader::StreamReader::try_new(file, None)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(theirs.len() > 1, "destination {p} was flushed once");
        assert_eq!(rows(batches), rows(&theirs), "destination {p}");
        // The same file as a stream file on its own.
        let mut cursor = FileCursor::file(
            out.join(entry.only_file().map(|f| f.name.as_str()).unwrap()),
            Format::Ipc,
        )
        .unwrap();
        let mut alone = Vec::new();
        while let Some(b) = cursor.next_batch(None).unwrap() {
            alone.push(b);
        }
        assert_eq!(rows(&alone), rows(&theirs));
        // Skipping n messages lands where n reads land.
        let n = theirs.len() as u64 / 2;
        let mut skipped = finished.cursor(p as u32).unwrap();
        assert!(skipped.skip(n).unwrap());
        let next = skipped.next_batch(None).unwrap().unwrap();
        assert_eq!(rows(&[next]), rows(&theirs[n as usize..=n as usize]));
        assert!(
            !finished
                .cursor(p as u32)
                .unwrap()
                .skip(theirs.len() as u64 + 1)
                .unwrap()
        );
    }
}

#[test]
fn damaged_and_missing_files_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (out, schema) = output(dir.path(), Format::Presto, Layout::Files);
    let finished = FinishedOutput::open(&out).unwrap();
    let p = (0..5u32)
        .find(|&p| finished.manifest().destinations[p as usize].rows > 0)
        .unwrap();
    let name = finished.manifest().destinations[p as usize]
        .only_file()
        .map(|f| f.name.as_str())
        .unwrap()
        .to_string();
    let path = out.join(&name);
    let bytes = std::fs::read(&path).unwrap();
    let read = |cursor: &mut FileCursor| -> Result<u64, ExchangeError> {
        let mut rows = 0;
        while let Some(b) = cursor.next_batch(Some(&schema))? {
            rows += b.num_rows() as u64;
        }
        Ok(rows)
    };
    // A page header claiming a negative body.
    let mut negative = bytes.clone();
    negative[9..13].copy_from_slice(&(-8i32).to_le_bytes());
    std::fs::write(&path, &negative).unwrap();
    let e = read(&mut finished.cursor(p).unwrap()).unwrap_err();
    assert!(matches!(e, ExchangeError::Corrupt { .. }), "{e:?}");
    assert!(
        e.report().contains(&name) && e.report().contains("-8 body bytes"),
        "{}",
        e.report()
    );
    // Cut short inside the last page.
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let e = read(&mut finished.cursor(p).unwrap()).unwrap_err();
    assert!(e.report().contains(&name), "{}", e.report());
    // One flipped body byte: the page's checksum.
    let mut flipped = bytes.clone();
    flipped[40] ^= 0x20;
    std::fs::write(&path, &flipped).unwrap();
    let e = read(&mut finished.cursor(p).unwrap()).unwrap_err();
    assert!(e.report().contains("checksum"), "{}", e.report());
    // Whole again: it reads.
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        read(&mut finished.cursor(p).unwrap()).unwrap(),
        finished.manifest().destinations[p as usize].rows
    );
    // Pages read as an IPC stream, a missing file, Parquet, pages without their schema.
    let e = read(&mut FileCursor::file(&path, Format::Ipc).unwrap()).unwrap_err();
    assert!(matches!(e, ExchangeError::Corrupt { .. }), "{e:?}");
    let e = FileCursor::file(out.join("nothing.presto"), Format::Presto).unwrap_err();
    assert!(matches!(e, ExchangeError::NotFound(_)), "{e:?}");
    let e = FileCursor::file(&path, Format::Parquet).unwrap_err();
    assert!(matches!(e, ExchangeError::InvalidArgument(_)), "{e:?}");
    let e = FileCursor::file(&path, Format::Presto)
        .unwrap()
        .next_batch(None)
        .unwrap_err();
    assert!(matches!(e, ExchangeError::InvalidArgument(_)), "{e:?}");
    // An output directory without its manifest.
    std::fs::remove_file(out.join(partout_job::MANIFEST_FILE)).unwrap();
    let e = FinishedOutput::open(&out).unwrap_err();
    assert!(matches!(e, ExchangeError::NotFound(_)), "{e:?}");
}

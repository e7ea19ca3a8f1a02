//! Inputs of every format, alone and mixed in directories; bad inputs as errors naming the file.

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use partout_input::{InputFormat, InputReader, IoError, discover};
use std::path::Path;
use std::sync::Arc;

/// Rows `start..start + len`: `id = i`, `name = "n{i}"`.
fn rows(start: i64, len: i64) -> RecordBatch {
    RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from_iter_values(start..start + len)) as ArrayRef,
        ),
        (
            "name",
            Arc::new(StringArray::from_iter_values(
                (start..start + len).map(|i| format!("n{i}")),
            )) as ArrayRef,
        ),
    ])
    .unwrap()
}

fn write(path: &Path, format: InputFormat, batches: &[RecordBatch]) {
    let file = std::fs::File::create(path).unwrap();
    let schema = batches[0].schema();
    match format {
        InputFormat::Parquet => {
            let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
            batches.iter().for_each(|b| w.write(b).unwrap());
            w.close().unwrap();
        }
        InputFormat::IpcFile => {
            let mut w = arrow_ipc::writer::FileWriter::try_new(file, &schema).unwrap();
            batches.iter().for_each(|b| w.write(b).unwrap());
            w.finish().unwrap();
        }
        InputFormat::IpcStream => {
            let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &schema).unwrap();
            batches.iter().for_each(|b| w.write(b).unwrap());
            w.finish().unwrap();
        }
        InputFormat::Csv => {
            let mut w = arrow_csv::WriterBuilder::new()
                .with_header(true)
                .build(file);
            batches.iter().for_each(|b| w.write(b).unwrap());
        }
        InputFormat::CsvGzip => {
            let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            let mut w = arrow_csv::WriterBuilder::new().with_header(true).build(gz);
            batches.iter().for_each(|b| w.write(b).unwrap());
            w.into_inner().finish().unwrap();
        }
        InputFormat::CsvZstd => {
            let zst = zstd::stream::write::Encoder::new(file, 1).unwrap();
            let mut w = arrow_csv::WriterBuilder::new().with_header(true).build(zst);
            batches.iter().for_each(|b| w.write(b).unwrap());
            w.into_inner().finish().unwrap();
        }
    }
}

fn ids(reader: InputReader) -> Vec<i64> {
    reader
        .flat_map(|b| {
            let b = b.unwrap();
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect()
}

#[test]
fn every_format_reads_back_every_row() {
    let dir = tempfile::tempdir().unwrap();
    for (name, format) in [
        ("a.parquet", InputFormat::Parquet),
        ("b.arrow", InputFormat::IpcFile),
        ("c.arrows", InputFormat::IpcStream),
        ("d.csv", InputFormat::Csv),
        ("e.csv.gz", InputFormat::CsvGzip),
        ("f.CSV.ZST", InputFormat::CsvZstd),
    ] {
        let path = dir.path().join(name);
        write(&path, format, &[rows(0, 10_000), rows(10_000, 5)]);
        let files = discover(std::slice::from_ref(&path)).unwrap();
        assert_eq!(files[0].format, format);
        let reader = InputReader::try_new(files).unwrap();
        assert_eq!(reader.schema().fields().len(), 2);
        assert_eq!(ids(reader), (0..10_005).collect::<Vec<_>>(), "{name}");
    }
}

#[test]
fn directories_are_read_in_name_order_skipping_hidden_and_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    write(
        &dir.path().join("2.parquet"),
        InputFormat::Parquet,
        &[rows(100, 50)],
    );
    write(
        &dir.path().join("1.parquet"),
        InputFormat::Parquet,
        &[rows(0, 100)],
    );
    write(
        &sub.join("3.parquet"),
        InputFormat::Parquet,
        &[rows(150, 7)],
    );
    write(
        &dir.path().join(".hidden.parquet"),
        InputFormat::Parquet,
        &[rows(-5, 5)],
    );
    std::fs::write(dir.path().join("notes.txt"), "not data").unwrap();
    let files = discover(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(files.len(), 3);
    assert_eq!(
        ids(InputReader::try_new(files).unwrap()),
        (0..157).collect::<Vec<_>>()
    );
}

#[test]
fn bad_inputs_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.parquet");
    let err = discover(std::slice::from_ref(&missing)).unwrap_err();
    assert!(err.to_string().contains("missing.parquet"), "{err}");

    let unknown = dir.path().join("data.json");
    std::fs::write(&unknown, "{}").unwrap();
    let err = discover(&[unknown]).unwrap_err().to_string();
    assert!(
        err.contains("data.json") && err.contains("unknown file type") && err.contains("\"{}\""),
        "{err}"
    );

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(discover(&[empty]), Err(IoError::Inputs(_))));

    let corrupt = dir.path().join("corrupt.parquet");
    std::fs::write(&corrupt, b"PAR1 this is not parquet PAR1").unwrap();
    let err = InputReader::try_new(discover(&[corrupt]).unwrap()).unwrap_err();
    assert!(
        err.to_string().contains("corrupt.parquet") && err.to_string().contains("Parquet"),
        "{err}"
    );

    // A truncated IPC stream: the error comes while reading, naming the file.
    let stream = dir.path().join("cut.arrows");
    write(
        &stream,
        InputFormat::IpcStream,
        &[rows(0, 1000), rows(1000, 1000)],
    );
    let bytes = std::fs::read(&stream).unwrap();
    std::fs::write(&stream, &bytes[..bytes.len() - 100]).unwrap();
    let results: Vec<_> = InputReader::try_new(discover(&[stream]).unwrap())
        .unwrap()
        .collect();
    let err = results
        .iter()
        .find_map(|r| r.as_ref().err())
        .expect("an error");
    assert!(err.to_string().contains("cut.arrows"), "{err}");
    assert!(results.last().unwrap().is_err(), "nothing after the error");
}

#[test]
fn files_of_another_schema_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("1.parquet"),
        InputFormat::Parquet,
        &[rows(0, 10)],
    );
    let other =
        RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![1])) as ArrayRef)])
            .unwrap();
    write(
        &dir.path().join("2.parquet"),
        InputFormat::Parquet,
        &[other],
    );
    let results: Vec<_> = InputReader::try_new(discover(&[dir.path().to_path_buf()]).unwrap())
        .unwrap()
        .collect();
    let err = results.last().unwrap().as_ref().unwrap_err();
    assert!(
        err.to_string().contains("2.parquet") && err.to_string().contains("schema"),
        "{err}"
    );
}

#[test]
fn frames_read_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let batches: Vec<RecordBatch> = (0..30).map(|i| rows(i * 1000, 1000)).collect();
    // Parquet with row groups of 700 rows (and one cut anywhere in a batch), an IPC file of 30
    // batches, a CSV file.
    let parquet = dir.path().join("a.parquet");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(700))
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&parquet).unwrap(),
        batches[0].schema(),
        Some(props),
    )
    .unwrap();
    batches.iter().for_each(|b| w.write(b).unwrap());
    w.close().unwrap();
    let ipc = dir.path().join("b.arrow");
    write(&ipc, InputFormat::IpcFile, &batches);
    let csv = dir.path().join("c.csv");
    write(&csv, InputFormat::Csv, &batches);
    let files = discover(&[parquet, ipc, csv]).unwrap();
    for frame_rows in [1, 500, 8192, 10_000, 50_000, 1 << 30, usize::MAX] {
        let frames = partout_input::plan_frames(&files, frame_rows).unwrap();
        assert!(frames.frames.len() >= 3);
        let mut seen = Vec::new();
        for frame in &frames.frames {
            let mut rows = 0;
            for batch in frame.read(&frames.schema).unwrap() {
                let batch = batch.unwrap();
                rows += batch.num_rows() as u64;
                let column = batch.column(0).as_any().downcast_ref::<Int64Array>();
                seen.extend_from_slice(column.unwrap().values());
            }
            if let Some(expected) = frame.rows() {
                assert_eq!(rows, expected, "{frame:?}");
            }
        }
        seen.sort_unstable();
        let expected: Vec<i64> = (0..30_000).flat_map(|i| [i, i, i]).collect();
        assert_eq!(seen, expected, "frames of {frame_rows} rows");
    }
    // Small frames cut the Parquet file and the IPC file into several.
    let frames = partout_input::plan_frames(&files, 8192).unwrap();
    let per_file = |name: &str| {
        frames
            .frames
            .iter()
            .filter(|f| f.path().ends_with(name))
            .count()
    };
    assert!(per_file("a.parquet") >= 3, "{frames:?}");
    assert!(per_file("b.arrow") >= 3, "{frames:?}");
    assert_eq!(per_file("c.csv"), 1);
    assert_eq!(frames.rows(), None, "a CSV file's rows are not known");
}

#[test]
fn frames_refuse_a_file_of_another_schema() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    write(&a, InputFormat::Parquet, &[rows(0, 10)]);
    let b = dir.path().join("b.arrow");
    let other = RecordBatch::try_from_iter([(
        "x",
        Arc::new(Int64Array::from_iter_values(0..3)) as ArrayRef,
    )])
    .unwrap();
    write(&b, InputFormat::IpcFile, &[other]);
    let err = partout_input::plan_frames(&discover(&[a, b]).unwrap(), 100).unwrap_err();
    assert!(
        matches!(&err, IoError::File { path, .. } if path.ends_with("b.arrow")),
        "{err}"
    );
    assert!(err.to_string().contains("schema"), "{err}");
}

/// A file that is not there: the error names it and keeps the system's error as its source.
#[test]
fn a_missing_file_keeps_the_systems_error_as_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.parquet");
    let err = discover(std::slice::from_ref(&missing)).unwrap_err();
    assert!(
        matches!(&err, IoError::File { path, .. } if *path == missing),
        "{err}"
    );
    let source = std::error::Error::source(&err).expect("a cause");
    let io = source
        .downcast_ref::<std::io::Error>()
        .expect("the system's error");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
}

/// Binary inputs are known by their first bytes whatever their names (or with none); CSV by
/// its name; a name that promises what the bytes are not, compressed data not named CSV and an
/// empty file are errors naming the file and what it begins with; in a directory, a file of
/// no format is passed over but one whose name lies is an error.
#[test]
fn inputs_are_known_by_their_content_and_names_that_lie_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (name, format) in [
        ("data.stream", InputFormat::IpcStream),
        ("data.bin", InputFormat::Parquet),
        ("noextension", InputFormat::IpcFile),
        ("part-0.pq", InputFormat::Parquet),
        ("stream.arrow", InputFormat::IpcStream),
        ("file.arrows", InputFormat::IpcFile),
    ] {
        let path = dir.path().join(name);
        write(&path, format, &[rows(0, 300), rows(300, 7)]);
        let files = discover(std::slice::from_ref(&path)).unwrap();
        assert_eq!(files[0].format, format, "{name}");
        let reader = InputReader::try_new(files).unwrap();
        assert_eq!(ids(reader), (0..307).collect::<Vec<_>>(), "{name}");
    }
    let csv_named_parquet = dir.path().join("lies.parquet");
    write(&csv_named_parquet, InputFormat::Csv, &[rows(0, 3)]);
    let err = discover(std::slice::from_ref(&csv_named_parquet))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("lies.parquet")
            && err.contains("named as Parquet")
            && err.contains("\"id,name\\n0,n0"),
        "{err}"
    );
    let gzip_not_csv = dir.path().join("data.gz");
    write(&gzip_not_csv, InputFormat::CsvGzip, &[rows(0, 3)]);
    let err = discover(&[gzip_not_csv]).unwrap_err().to_string();
    assert!(
        err.contains("gzip data not named .csv.gz") && err.contains("1f 8b"),
        "{err}"
    );
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, b"").unwrap();
    let err = discover(std::slice::from_ref(&empty))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("empty.csv") && err.contains("empty file"),
        "{err}"
    );
    std::fs::remove_file(&empty).unwrap();

    // A directory: the lying file is an error, never rows silently left out.
    let err = discover(&[dir.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("lies.parquet"), "{err}");
    std::fs::remove_file(&csv_named_parquet).unwrap();
    std::fs::remove_file(dir.path().join("data.gz")).unwrap();
    std::fs::write(dir.path().join("README"), "notes, not data").unwrap();
    let files = discover(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(files.len(), 6, "{files:?}");

    // Damaged compressed CSV: an error naming the file.
    let damaged = dir.path().join("cut.csv.gz");
    write(&damaged, InputFormat::CsvGzip, &[rows(0, 5000)]);
    let bytes = std::fs::read(&damaged).unwrap();
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    let results: Vec<_> = match InputReader::try_new(discover(&[damaged]).unwrap()) {
        Ok(reader) => reader.collect(),
        Err(e) => vec![Err(e)],
    };
    let err = results
        .iter()
        .find_map(|r| r.as_ref().err())
        .expect("an error");
    assert!(err.to_string().contains("cut.csv.gz"), "{err}");
}

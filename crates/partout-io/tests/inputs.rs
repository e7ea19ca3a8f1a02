//! Inputs of every format, alone and mixed in directories; bad inputs as errors naming the file.

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use partout_io::{Format, InputReader, IoError, discover};
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

fn write(path: &Path, format: Format, batches: &[RecordBatch]) {
    let file = std::fs::File::create(path).unwrap();
    let schema = batches[0].schema();
    match format {
        Format::Parquet => {
            let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
            batches.iter().for_each(|b| w.write(b).unwrap());
            w.close().unwrap();
        }
        Format::IpcFile => {
            let mut w = arrow_ipc::writer::FileWriter::try_new(file, &schema).unwrap();
            batches.iter().for_each(|b| w.write(b).unwrap());
            w.finish().unwrap();
        }
        Format::IpcStream => {
            let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &schema).unwrap();
            batches.iter().for_each(|b| w.write(b).unwrap());
            w.finish().unwrap();
        }
        Format::Csv => {
            let mut w = arrow_csv::WriterBuilder::new()
                .with_header(true)
                .build(file);
            batches.iter().for_each(|b| w.write(b).unwrap());
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
        ("a.parquet", Format::Parquet),
        ("b.arrow", Format::IpcFile),
        ("c.arrows", Format::IpcStream),
        ("d.csv", Format::Csv),
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
        Format::Parquet,
        &[rows(100, 50)],
    );
    write(
        &dir.path().join("1.parquet"),
        Format::Parquet,
        &[rows(0, 100)],
    );
    write(&sub.join("3.parquet"), Format::Parquet, &[rows(150, 7)]);
    write(
        &dir.path().join(".hidden.parquet"),
        Format::Parquet,
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
    let err = discover(&[unknown]).unwrap_err();
    assert!(err.to_string().contains("unknown file type"), "{err}");

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
        Format::IpcStream,
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
        Format::Parquet,
        &[rows(0, 10)],
    );
    let other =
        RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![1])) as ArrayRef)])
            .unwrap();
    write(&dir.path().join("2.parquet"), Format::Parquet, &[other]);
    let results: Vec<_> = InputReader::try_new(discover(&[dir.path().to_path_buf()]).unwrap())
        .unwrap()
        .collect();
    let err = results.last().unwrap().as_ref().unwrap_err();
    assert!(
        err.to_string().contains("2.parquet") && err.to_string().contains("schema"),
        "{err}"
    );
}

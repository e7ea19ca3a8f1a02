//! The fuzz targets' checks, one function per target, each given the fuzzer's bytes. The
//! targets (`fuzz_targets/`) call them under libFuzzer; partout-output's `fuzz_corpus` test replays
//! every committed input (`corpus/`) through them on every test run.
//!
//! In every check errors are fine; panics, stack overflows, hangs and huge allocations are
//! findings, and so are the wrong results each one names.

use arrow_schema::{DataType, Field, Fields, Schema};
use partout_format::ipc::decode_stream;
use partout_format::presto::{decode_pages, inspect_pages};
use partout_input::{InputFile, InputReader, IoError, discover, plan_frames};
use partout_output::parse_shuffle_index;
use std::path::Path;
use std::sync::Arc;

/// Arrow IPC stream decoding on arbitrary bytes, as partout reads a destination's stream back.
pub fn ipc_decode(data: &[u8]) {
    let _ = decode_stream(data);
}

/// The Presto page walk alone, as `partout inspect` runs it: no schema, no arrays.
pub fn presto_inspect(data: &[u8]) {
    let _ = inspect_pages(data);
}

fn schemas() -> Vec<Arc<Schema>> {
    let item = |t: DataType| Arc::new(Field::new("item", t, true));
    let row = Fields::from(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Utf8, true),
    ]);
    let entries = Arc::new(Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![
            Field::new("keys", DataType::Utf8, false),
            Field::new("values", DataType::Int64, true),
        ])),
        false,
    ));
    let one = |t: DataType| Arc::new(Schema::new(vec![Field::new("c", t, true)]));
    vec![
        one(DataType::Int64),
        one(DataType::Utf8),
        one(DataType::Decimal128(38, 2)),
        one(DataType::Boolean),
        one(DataType::List(item(DataType::Int64))),
        one(DataType::Map(entries, false)),
        one(DataType::Struct(row)),
        one(DataType::Dictionary(
            Box::new(DataType::Int32),
            Box::new(DataType::Utf8),
        )),
        Arc::new(Schema::new(vec![
            Field::new("b", DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
        ])),
    ]
}

/// Presto page decoding: the first byte picks the schema the pages are decoded as, the rest are
/// the pages.
pub fn presto_decode(data: &[u8]) {
    let Some((&pick, pages)) = data.split_first() else {
        return;
    };
    let schemas = schemas();
    let schema = &schemas[pick as usize % schemas.len()];
    let _ = decode_pages(pages, schema);
    let _ = inspect_pages(pages);
}

/// The shuffle index reader: the first 8 bytes are the data file's length (little-endian), the
/// rest is the index. Errors must name the index; an index that parses must describe ranges
/// that fit the data file, in order, without overlap, each of a listed destination.
pub fn shuffle_index(data: &[u8]) {
    let Some((data_len, index)) = data.split_first_chunk::<8>() else {
        return;
    };
    let data_len = u64::from_le_bytes(*data_len);
    let path = Path::new("fuzz.index");
    match parse_shuffle_index(path, index, data_len) {
        Ok((destinations, ranges)) => {
            let mut end = 0u64;
            for range in &ranges {
                assert!(range.destination < destinations, "{range:?}");
                assert!(range.offset >= end, "{range:?} overlaps the range before");
                end = range.offset + range.len;
                assert!(end <= data_len, "{range:?} passes {data_len} bytes");
            }
            assert_eq!(index.len(), 20 + 28 * ranges.len());
        }
        Err(IoError::File { path: named, .. }) => assert_eq!(named, path),
        Err(e) => panic!("an error not naming the index: {e}"),
    }
}

/// Input file formats, picked by the low two bits of an input's first byte.
const EXTENSIONS: [&str; 4] = ["parquet", "arrow", "arrows", "csv"];
/// Frame sizes, picked by the next two: one row (Parquet row groups cut into single rows, IPC
/// files into single batches), a few rows, partout's batch size, a frame per file.
const FRAME_ROWS: [usize; 4] = [1, 3, 8192, 1 << 20];

/// An error must name the file.
fn check(result: Result<(), IoError>, path: &Path) -> bool {
    match result {
        Ok(()) => true,
        Err(IoError::File { path: named, .. }) if named == path => false,
        Err(e) => panic!("an error not naming {}: {e}", path.display()),
    }
}

/// Rows read by `InputReader`, `None` after an error.
fn read_whole(files: &[InputFile], path: &Path) -> Option<u64> {
    let mut rows = 0;
    let result = InputReader::try_new(files.to_vec()).and_then(|reader| {
        for batch in reader {
            rows += batch?.num_rows() as u64;
        }
        Ok(())
    });
    check(result, path).then_some(rows)
}

/// Rows read frame by frame, `None` after an error.
fn read_frames(files: &[InputFile], frame_rows: usize, path: &Path) -> Option<u64> {
    let mut rows = 0;
    let result = plan_frames(files, frame_rows).and_then(|frames| {
        for frame in &frames.frames {
            let mut frame_rows = 0;
            for batch in frame.read(&frames.schema)? {
                frame_rows += batch?.num_rows() as u64;
            }
            if let Some(expected) = frame.rows() {
                assert_eq!(frame_rows, expected, "{frame:?}");
            }
            rows += frame_rows;
        }
        Ok(())
    });
    check(result, path).then_some(rows)
}

/// partout's input readers, as its CLI reads them: the first byte picks the format and the
/// frame size; the rest is written to a file of that format's extension in `dir`, which is then
/// found by `discover` (which may refuse it, by its first bytes), read whole by `InputReader`,
/// and cut by `plan_frames` into frames that are each read. Every result must be `Ok` or an
/// error naming the file; when the whole file reads without error both ways, the frames must
/// hold as many rows as the whole.
pub fn input_files(data: &[u8], dir: &Path) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let path = dir.join(format!("input.{}", EXTENSIONS[usize::from(pick & 3)]));
    std::fs::write(&path, bytes).expect("writing the input");
    let frame_rows = FRAME_ROWS[usize::from(pick >> 2 & 3)];
    let files = match discover(std::slice::from_ref(&path)) {
        Ok(files) => files,
        Err(e) => {
            check(Err(e), &path);
            return;
        }
    };
    let whole = read_whole(&files, &path);
    let framed = read_frames(&files, frame_rows, &path);
    if let (Some(whole), Some(framed)) = (whole, framed) {
        assert_eq!(whole, framed, "rows read whole and by frames");
    }
}

//! Small valid inputs of every format and a valid shuffle index, read back through partout-input and partout-output.
//! They are the fuzz targets' seeds too: with `PARTOUT_FUZZ_SEEDS=DIR`, the test also writes
//! them as `DIR/input_files/*` (a first byte picking the format and frame size, as the
//! `input_files` target reads it) and `DIR/shuffle_index/*` (the data file's length, then the
//! index).

use arrow_array::builder::{Int64Builder, MapBuilder, StringBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray,
    FixedSizeBinaryArray, Float64Array, Int32Array, Int64Array, ListArray, RecordBatch,
    StringArray, StructArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field};
use partout_input::{InputFormat, InputReader, discover, plan_frames};
use std::path::Path;
use std::sync::Arc;

/// Rows `start..start + len` of every kind of column: primitives, strings, nulls, decimals,
/// timestamps, dictionaries, lists, structs and maps.
fn typed(start: i64, len: usize) -> RecordBatch {
    let ids: Vec<i64> = (start..start + len as i64).collect();
    let maybe = |i: i64| (i % 3 != 1).then_some(i);
    let list =
        ListArray::from_iter_primitive::<Int32Type, _, _>(ids.iter().map(|&i| {
            (i % 4 != 2).then(|| (0..i % 3).map(|j| Some(j as i32)).collect::<Vec<_>>())
        }));
    let point = StructArray::from(vec![
        (
            Arc::new(Field::new("x", DataType::Float64, true)),
            Arc::new(Float64Array::from_iter(
                ids.iter().map(|&i| maybe(i).map(|i| i as f64 / 2.0)),
            )) as ArrayRef,
        ),
        (
            Arc::new(Field::new("label", DataType::Utf8, false)),
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|i| format!("p{i}")),
            )) as ArrayRef,
        ),
    ]);
    let mut tags = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
    for &i in &ids {
        for j in 0..i % 3 {
            tags.keys().append_value(format!("k{j}"));
            tags.values().append_value(i * j);
        }
        tags.append(i % 5 != 4).unwrap();
    }
    // The same dictionary in every batch: an IPC file allows no replacement.
    let colours = DictionaryArray::<Int32Type>::try_new(
        Int32Array::from_iter(ids.iter().map(|&i| maybe(i).map(|i| (i % 3) as i32))),
        Arc::new(StringArray::from(vec!["red", "green", "blue"])),
    )
    .unwrap();
    RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids.clone())) as ArrayRef),
        (
            "name",
            Arc::new(StringArray::from_iter(
                ids.iter().map(|&i| maybe(i).map(|i| format!("n{i}"))),
            )),
        ),
        (
            "score",
            Arc::new(Float64Array::from_iter_values(
                ids.iter().map(|&i| i as f64 * 1.5),
            )),
        ),
        (
            "flag",
            Arc::new(BooleanArray::from_iter(
                ids.iter().map(|&i| maybe(i).map(|i| i % 2 == 0)),
            )),
        ),
        (
            "price",
            Arc::new(
                Decimal128Array::from_iter(ids.iter().map(|&i| maybe(i).map(i128::from)))
                    .with_precision_and_scale(12, 2)
                    .unwrap(),
            ),
        ),
        (
            "at",
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(ids.iter().map(|&i| i * 1_000_000))
                    .with_timezone("UTC"),
            ),
        ),
        (
            "day",
            Arc::new(Date32Array::from_iter_values(ids.iter().map(|&i| i as i32))),
        ),
        (
            "raw",
            Arc::new(BinaryArray::from_iter_values(
                ids.iter().map(|&i| i.to_le_bytes()),
            )),
        ),
        (
            "key",
            Arc::new(
                FixedSizeBinaryArray::try_from_iter(ids.iter().map(|&i| (i as i32).to_be_bytes()))
                    .unwrap(),
            ),
        ),
        ("colour", Arc::new(colours)),
        ("items", Arc::new(list)),
        ("point", Arc::new(point)),
        ("tags", Arc::new(tags.finish())),
    ])
    .unwrap()
}

/// One column of 32-bit integers: the simplest file of each format.
fn plain(start: i32, len: i32) -> RecordBatch {
    RecordBatch::try_from_iter([(
        "v",
        Arc::new(Int32Array::from_iter_values(start..start + len)) as ArrayRef,
    )])
    .unwrap()
}

fn parquet(batches: &[RecordBatch], props: parquet::file::properties::WriterProperties) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(&mut out, batches[0].schema(), Some(props)).unwrap();
    batches.iter().for_each(|b| w.write(b).unwrap());
    w.close().unwrap();
    out
}

fn ipc(
    batches: &[RecordBatch],
    file: bool,
    compression: Option<arrow_ipc::CompressionType>,
) -> Vec<u8> {
    let options = arrow_ipc::writer::IpcWriteOptions::default()
        .try_with_compression(compression)
        .unwrap();
    let schema = batches[0].schema();
    let mut out = Vec::new();
    if file {
        let mut w = arrow_ipc::writer::FileWriter::try_new_with_options(&mut out, &schema, options)
            .unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        w.finish().unwrap();
    } else {
        let mut w =
            arrow_ipc::writer::StreamWriter::try_new_with_options(&mut out, &schema, options)
                .unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        w.finish().unwrap();
    }
    out
}

/// The seed inputs: a name, the format, the frame size selector (0 to 3, as the fuzz target
/// reads it), the file's bytes and its rows.
fn inputs() -> Vec<(&'static str, InputFormat, u8, Vec<u8>, u64)> {
    use parquet::basic::{Compression, Encoding, ZstdLevel};
    use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
    let small = [typed(0, 5), typed(5, 2)];
    let plain_rows = [plain(0, 6)];
    let v2 = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_max_row_group_row_count(Some(3))
        .set_data_page_row_count_limit(2)
        .set_write_batch_size(2)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_compression(Compression::SNAPPY)
        .build();
    let zstd = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_dictionary_enabled(false)
        .set_encoding(Encoding::DELTA_BINARY_PACKED)
        .build();
    let csv = "id,name,score,flag,day\n\
               1,a,1.5,true,2024-01-02\n\
               2,\"b, quoted\",,false,2024-01-03\n\
               3,,-0.25,,\n";
    vec![
        (
            "typed.parquet",
            InputFormat::Parquet,
            0,
            parquet(&small, WriterProperties::default()),
            7,
        ),
        (
            "typed-v2-groups.parquet",
            InputFormat::Parquet,
            1,
            parquet(&small, v2),
            7,
        ),
        (
            "plain-zstd.parquet",
            InputFormat::Parquet,
            2,
            parquet(&plain_rows, zstd),
            6,
        ),
        (
            "typed.arrow",
            InputFormat::IpcFile,
            0,
            ipc(&small, true, None),
            7,
        ),
        (
            "typed-lz4.arrow",
            InputFormat::IpcFile,
            0,
            ipc(&small, true, Some(arrow_ipc::CompressionType::LZ4_FRAME)),
            7,
        ),
        (
            "plain.arrow",
            InputFormat::IpcFile,
            2,
            ipc(&plain_rows, true, None),
            6,
        ),
        (
            "typed.arrows",
            InputFormat::IpcStream,
            0,
            ipc(&small, false, None),
            7,
        ),
        (
            "typed-zstd.arrows",
            InputFormat::IpcStream,
            0,
            ipc(&small, false, Some(arrow_ipc::CompressionType::ZSTD)),
            7,
        ),
        (
            "plain.arrows",
            InputFormat::IpcStream,
            2,
            ipc(&plain_rows, false, None),
            6,
        ),
        ("mixed.csv", InputFormat::Csv, 0, csv.as_bytes().to_vec(), 3),
    ]
}

/// A shuffle index of three destinations, and its data file's length.
fn shuffle_index(dir: &Path) -> (Vec<u8>, u64) {
    use partout_exchange::BatchSink;
    use partout_format::ipc::Compression;
    use partout_output::ShuffleFile;
    let mut shuffle = ShuffleFile::try_new(
        dir,
        "w0",
        plain(0, 1).schema(),
        3,
        partout_format::Encoding::ipc(Compression::None),
    )
    .unwrap();
    shuffle.write_batch(2, &plain(0, 4)).unwrap();
    shuffle.write_batch(0, &plain(4, 2)).unwrap();
    shuffle.write_batch(2, &plain(6, 1)).unwrap();
    shuffle.finish(&mut [0; 3]).unwrap();
    let data_len = std::fs::metadata(dir.join("w0.data")).unwrap().len();
    (std::fs::read(dir.join("w0.index")).unwrap(), data_len)
}

#[test]
fn fuzz_seeds_read_back_whole_and_by_frames() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = std::env::var_os("PARTOUT_FUZZ_SEEDS").map(std::path::PathBuf::from);
    for (name, format, frame_size, bytes, rows) in inputs() {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let files = discover(std::slice::from_ref(&path)).unwrap();
        assert_eq!(files[0].format, format);
        let read: usize = InputReader::try_new(files.clone())
            .unwrap()
            .map(|b| b.unwrap().num_rows())
            .sum();
        assert_eq!(read as u64, rows, "{name}");
        let frames = plan_frames(&files, [1, 3, 8192, 1 << 20][usize::from(frame_size)]).unwrap();
        let framed: usize = frames
            .frames
            .iter()
            .flat_map(|f| f.read(&frames.schema).unwrap())
            .map(|b| b.unwrap().num_rows())
            .sum();
        assert_eq!(framed as u64, rows, "{name} by frames");
        if let Some(seeds) = &seeds {
            // The fuzz target's formats: Parquet, IPC file, IPC stream, CSV.
            let format_pick = match format {
                InputFormat::Parquet => 0,
                InputFormat::IpcFile => 1,
                InputFormat::IpcStream => 2,
                InputFormat::Csv => 3,
                InputFormat::CsvGzip | InputFormat::CsvZstd => {
                    unreachable!("the seeds are uncompressed")
                }
            };
            let pick = format_pick | frame_size << 2;
            let out = seeds.join("input_files");
            std::fs::create_dir_all(&out).unwrap();
            std::fs::write(out.join(name), [&[pick], bytes.as_slice()].concat()).unwrap();
        }
    }
    let (index, data_len) = shuffle_index(dir.path());
    let (destinations, ranges) =
        partout_output::parse_shuffle_index(Path::new("w0.index"), &index, data_len).unwrap();
    assert_eq!(
        (destinations, ranges.len()),
        (3, 5),
        "three batches, two stream ends"
    );
    if let Some(seeds) = &seeds {
        let out = seeds.join("shuffle_index");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(
            out.join("w0"),
            [data_len.to_le_bytes().as_slice(), &index].concat(),
        )
        .unwrap();
    }
}

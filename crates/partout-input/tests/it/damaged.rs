//! Damaged inputs, each named after what it broke: an error naming the file, never a panic,
//! a stack overflow or an allocation of what the file claims (the binary's allocator aborts
//! on those, see `main.rs`).

use arrow_array::{ArrayRef, Int32Array, RecordBatch};
use parquet::file::metadata::{
    ParquetMetaDataBuilder, ParquetMetaDataReader, ParquetMetaDataWriter,
};
use partout_input::{InputReader, IoError, discover, plan_frames};
use std::sync::Arc;

/// Every way partout reads `bytes` as the file `name` (whole, and by frames of one row and of
/// many): each must give batches or an error naming the file. The errors' texts, joined.
fn read_all_ways(name: &str, bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let files = discover(std::slice::from_ref(&path)).unwrap();
    let mut errors = Vec::new();
    let mut keep = |result: Result<(), IoError>| match result {
        Ok(()) => {}
        Err(IoError::File {
            path: named, what, ..
        }) if named == path => errors.push(what),
        Err(e) => panic!("an error not naming {name}: {e}"),
    };
    keep(
        InputReader::try_new(files.clone())
            .and_then(|mut reader| reader.try_for_each(|batch| batch.map(drop))),
    );
    for frame_rows in [1, 1 << 20] {
        keep(plan_frames(&files, frame_rows).and_then(|frames| {
            for frame in &frames.frames {
                frame.read(&frames.schema)?.collect::<Result<Vec<_>, _>>()?;
            }
            Ok(())
        }));
    }
    errors.join("\n")
}

fn ints(values: impl IntoIterator<Item = i32>) -> RecordBatch {
    let values: ArrayRef = Arc::new(Int32Array::from_iter_values(values));
    RecordBatch::try_from_iter([("v", values)]).unwrap()
}

// --- Parquet ---

/// Thrift compact bytes written by hand: footers that claim what no writer would write.
#[derive(Default)]
struct Thrift(Vec<u8>);

const I32: u8 = 5;
const I64: u8 = 6;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const STRUCT: u8 = 12;

impl Thrift {
    fn varint(&mut self, mut v: u64) -> &mut Self {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    /// A field `delta` ids after the last one.
    fn field(&mut self, delta: u8, kind: u8) -> &mut Self {
        self.0.push(delta << 4 | kind);
        self
    }
    fn int(&mut self, delta: u8, kind: u8, v: i64) -> &mut Self {
        self.field(delta, kind)
            .varint(((v << 1) ^ (v >> 63)) as u64)
    }
    fn name(&mut self, delta: u8, name: &str) -> &mut Self {
        self.field(delta, BINARY).varint(name.len() as u64);
        self.0.extend_from_slice(name.as_bytes());
        self
    }
    fn list(&mut self, delta: u8, kind: u8, len: u64) -> &mut Self {
        self.field(delta, LIST);
        self.0.push(0xf0 | kind);
        self.varint(len)
    }
    fn stop(&mut self) -> &mut Self {
        self.0.push(0);
        self
    }
    /// A SchemaElement: a group of `children` (the root when `root`), or an optional INT32.
    fn element(&mut self, children: Option<i64>, root: bool) -> &mut Self {
        match children {
            Some(n) if root => self.name(4, "schema").int(1, I32, n),
            Some(n) => self.int(3, I32, 1).name(1, "g").int(1, I32, n),
            None => self.int(1, I32, 1).int(2, I32, 1).name(1, "x"),
        }
        .stop()
    }
}

/// A Parquet file of no data: just `footer` (a FileMetaData).
fn parquet_of_footer(footer: &[u8]) -> Vec<u8> {
    [
        b"PAR1",
        footer,
        &(footer.len() as u32).to_le_bytes(),
        b"PAR1",
    ]
    .concat()
}

/// A footer: version 1, a schema of a leaf in `depth` nested groups (the root included),
/// no rows, `row_groups` row groups claimed (none there).
fn footer(depth: usize, row_groups: u64) -> Vec<u8> {
    let mut t = Thrift::default();
    t.int(1, I32, 1).list(1, STRUCT, depth as u64 + 1);
    t.element(Some(1), true);
    for _ in 1..depth {
        t.element(Some(1), false);
    }
    t.element(None, false);
    t.int(1, I64, 0).list(1, STRUCT, row_groups).stop();
    t.0
}

#[test]
fn parquet_schema_nested_thousands_deep_is_an_error_not_a_stack_overflow() {
    // 3000 levels in 30 KB overflowed an 8 MiB stack in the parquet crate's recursive schema
    // parsing (10 000 levels) or arrow schema conversion (3000). Tests run on 2 MiB stacks.
    for depth in [65, 3000, 100_000] {
        let errors = read_all_ways("deep.parquet", &parquet_of_footer(&footer(depth, 0)));
        assert!(
            errors.contains("nested more than 64 levels deep"),
            "{errors}"
        );
    }
    // At the limit the file reads (it has no rows).
    assert_eq!(
        read_all_ways("deep.parquet", &parquet_of_footer(&footer(64, 0))),
        ""
    );
}

#[test]
fn parquet_footer_claiming_billions_of_row_groups_is_an_error() {
    // The parquet crate made room for the row groups the list header claims before reading
    // them: 2^31 - 1 of them, 206 GB, for a 46-byte file.
    let errors = read_all_ways(
        "groups.parquet",
        &parquet_of_footer(&footer(1, i32::MAX as u64)),
    );
    assert!(errors.contains("list of 2147483647 elements"), "{errors}");
}

#[test]
fn parquet_schema_element_claiming_more_children_than_elements_is_an_error() {
    // The parquet crate made room for the children a group claims before reading them
    // (17 GB, for a 46-byte file).
    let mut t = Thrift::default();
    t.int(1, I32, 1).list(1, STRUCT, 2);
    t.element(Some(i32::MAX as i64), true).element(None, false);
    t.int(1, I64, 0).list(1, STRUCT, 0).stop();
    let errors = read_all_ways("children.parquet", &parquet_of_footer(&t.0));
    assert!(
        errors.contains("2147483647 children with 1 elements after it"),
        "{errors}"
    );
}

/// A valid Parquet file of two row groups of `ints(0..6)`, its footer rewritten by `change`.
fn parquet_with_metadata(
    change: impl FnOnce(ParquetMetaDataBuilder) -> ParquetMetaDataBuilder,
) -> Vec<u8> {
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(3))
        .build();
    let mut bytes = Vec::new();
    let batch = ints(0..6);
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let end = bytes.len() - 8;
    let footer_len = u32::from_le_bytes(bytes[end..end + 4].try_into().unwrap()) as usize;
    let metadata = ParquetMetaDataReader::decode_metadata(&bytes[end - footer_len..end]).unwrap();
    let metadata = change(metadata.into_builder()).build();
    bytes.truncate(end - footer_len);
    ParquetMetaDataWriter::new(&mut bytes, &metadata)
        .finish()
        .unwrap();
    bytes
}

#[test]
fn parquet_row_group_claiming_2_pow_62_rows_is_not_cut_into_2_pow_62_frames() {
    // Frames of one row cut a row group into as many frames as it claims rows (a vector of
    // 2^62 ranges: a capacity overflow panic).
    let bytes = parquet_with_metadata(|mut m| {
        let mut groups = m.take_row_groups();
        groups[0] = groups[0]
            .clone()
            .into_builder()
            .set_num_rows(1 << 62)
            .build()
            .unwrap();
        m.set_row_groups(groups)
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.parquet");
    std::fs::write(&path, &bytes).unwrap();
    let frames = plan_frames(&discover(&[path]).unwrap(), 1).unwrap();
    // About one frame per 64 bytes of the file, and one per row group.
    let most = 1 + 2 + bytes.len() / 64;
    assert!(
        frames.frames.len() <= most,
        "{} frames",
        frames.frames.len()
    );
    assert_eq!(frames.rows(), Some((1 << 62) + 3));
    let errors = read_all_ways("rows.parquet", &bytes);
    // Its pages hold 3 rows: read whole or by frames, that is an error, not 3 rows.
    assert_eq!(errors.matches("metadata claims").count(), 3, "{errors}");
}

#[test]
fn parquet_row_counts_past_i64_are_an_error() {
    // Each was cut into a frame per row too, and their sum wrapped (or panicked, with
    // overflow checks). The parquet crate's writer sums the counts it writes, so the second
    // group is written claiming `MARK` rows (its Thrift varint as long as i64::MAX's) and
    // that claim is then rewritten in the footer's bytes.
    const MARK: i64 = i64::MAX - 64;
    let varint = |n: i64| {
        let mut zigzag = ((n << 1) ^ (n >> 63)) as u64;
        let mut out = Vec::new();
        while zigzag >= 0x80 {
            out.push((zigzag as u8) | 0x80);
            zigzag >>= 7;
        }
        out.push(zigzag as u8);
        out
    };
    let mut bytes = parquet_with_metadata(|mut m| {
        let mut groups = m.take_row_groups();
        groups[1] = groups[1]
            .clone()
            .into_builder()
            .set_num_rows(MARK)
            .build()
            .unwrap();
        m.set_row_groups(groups)
    });
    let (mark, max) = (varint(MARK), varint(i64::MAX));
    assert_eq!(mark.len(), max.len());
    let at: Vec<usize> = (0..bytes.len() - mark.len())
        .filter(|&i| bytes[i..].starts_with(&mark))
        .collect();
    assert_eq!(at.len(), 1, "the claim is in the footer once");
    bytes[at[0]..at[0] + max.len()].copy_from_slice(&max);
    let errors = read_all_ways("sum.parquet", &bytes);
    assert!(
        errors.contains("row group 1 claims 9223372036854775807 rows"),
        "{errors}"
    );
}

#[test]
fn parquet_column_chunk_outside_the_file_is_an_error() {
    type Change = fn(
        parquet::file::metadata::ColumnChunkMetaDataBuilder,
    ) -> parquet::file::metadata::ColumnChunkMetaDataBuilder;
    let changes: [(&str, Change); 3] = [
        // (An error before too, from the pages; checked first, it bounds a page's claimed
        // size by the file's.)
        ("past", |c| c.set_total_compressed_size(i64::MAX / 2)),
        // `ColumnChunkMetaData::byte_range` asserted.
        ("negative", |c| {
            c.set_data_page_offset(-5).set_dictionary_page_offset(None)
        }),
        ("overflowing", |c| {
            c.set_total_compressed_size(i64::MAX)
                .set_data_page_offset(i64::MAX)
        }),
    ];
    for (name, change) in changes {
        let bytes = parquet_with_metadata(|mut m| {
            let mut groups = m.take_row_groups();
            let columns = groups[1]
                .columns()
                .iter()
                .map(|c| change(c.clone().into_builder()).build().unwrap())
                .collect();
            groups[1] = groups[1]
                .clone()
                .into_builder()
                .set_column_metadata(columns)
                .build()
                .unwrap();
            m.set_row_groups(groups)
        });
        let errors = read_all_ways(&format!("{name}.parquet"), &bytes);
        assert!(
            errors.contains("row group 1 column 0: a chunk of"),
            "{name}: {errors}"
        );
    }
}

// --- Arrow IPC ---

fn ipc_stream(batch: &RecordBatch, compression: Option<arrow_ipc::CompressionType>) -> Vec<u8> {
    let options = arrow_ipc::writer::IpcWriteOptions::default()
        .try_with_compression(compression)
        .unwrap();
    let mut out = Vec::new();
    let mut w =
        arrow_ipc::writer::StreamWriter::try_new_with_options(&mut out, &batch.schema(), options)
            .unwrap();
    w.write(batch).unwrap();
    w.finish().unwrap();
    out
}

fn ipc_file(batch: &RecordBatch, compression: Option<arrow_ipc::CompressionType>) -> Vec<u8> {
    let options = arrow_ipc::writer::IpcWriteOptions::default()
        .try_with_compression(compression)
        .unwrap();
    let mut out = Vec::new();
    let mut w =
        arrow_ipc::writer::FileWriter::try_new_with_options(&mut out, &batch.schema(), options)
            .unwrap();
    w.write(batch).unwrap();
    w.finish().unwrap();
    out
}

/// The messages of an IPC stream or file (from the first continuation marker): the start of
/// each, its flatbuffer's start and its body's start and end.
fn messages(bytes: &[u8]) -> Vec<(usize, usize, usize, usize)> {
    let mut at = bytes.windows(4).position(|w| w == [0xff; 4]).unwrap();
    let mut found = Vec::new();
    while at + 8 <= bytes.len() && bytes[at..at + 4] == [0xff; 4] {
        let len = i32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        let flatbuffer = at + 8;
        let message = arrow_ipc::root_as_message(&bytes[flatbuffer..flatbuffer + len]).unwrap();
        let body = flatbuffer + len;
        found.push((at, flatbuffer, body, body + message.bodyLength() as usize));
        at = body + message.bodyLength() as usize;
    }
    found
}

#[test]
fn ipc_stream_claiming_a_2_gib_message_is_an_error() {
    // arrow-ipc's StreamReader zero-filled a buffer of the claimed length first.
    let bytes = [[0xff; 4], i32::MAX.to_le_bytes(), [0; 4]].concat();
    let errors = read_all_ways("big.arrows", &bytes);
    assert!(
        errors.contains("2147483647 bytes asked for where 4 are left"),
        "{errors}"
    );
}

#[test]
fn ipc_stream_claiming_a_body_past_its_end_is_an_error() {
    // arrow-ipc's StreamReader zero-filled a body of the claimed length first.
    let mut bytes = ipc_stream(&ints(0..1000), None);
    let (_, flatbuffer, body, end) = messages(&bytes)[1];
    let len = ((end - body) as i64).to_le_bytes();
    let at = bytes[flatbuffer..body]
        .windows(8)
        .position(|w| w == len)
        .unwrap()
        + flatbuffer;
    bytes[at..at + 8].copy_from_slice(&(1i64 << 50).to_le_bytes());
    let errors = read_all_ways("body.arrows", &bytes);
    assert!(
        errors.contains("a message body of 1125899906842624 bytes"),
        "{errors}"
    );
}

#[test]
fn ipc_compressed_buffer_claiming_more_than_its_codec_makes_is_an_error() {
    // arrow-ipc made room for the decompressed length a buffer's first 8 bytes claim.
    for codec in [
        arrow_ipc::CompressionType::LZ4_FRAME,
        arrow_ipc::CompressionType::ZSTD,
    ] {
        for (name, mut bytes) in [
            ("claims.arrows", ipc_stream(&ints(0..1000), Some(codec))),
            ("claims.arrow", ipc_file(&ints(0..1000), Some(codec))),
        ] {
            let (_, flatbuffer, body, end) = messages(&bytes)[1];
            let message = arrow_ipc::root_as_message(&bytes[flatbuffer..body]).unwrap();
            let buffers = message.header_as_record_batch().unwrap().buffers().unwrap();
            // The values buffer (the first is the validity, empty).
            let values = buffers.get(1);
            assert!(values.length() > 8 && body + values.offset() as usize + 8 <= end);
            let at = body + values.offset() as usize;
            bytes[at..at + 8].copy_from_slice(&(1i64 << 50).to_le_bytes());
            let errors = read_all_ways(name, &bytes);
            assert!(
                errors.contains("compressed buffer 1 claims 1125899906842624 bytes from"),
                "{codec:?} {name}: {errors}"
            );
        }
    }
}

#[test]
fn ipc_file_block_past_its_end_is_an_error() {
    // arrow-ipc's FileReader zero-filled a block of the length the footer claims (and
    // panicked on a negative one).
    for body in [1i64 << 50, -8] {
        let mut bytes = ipc_file(&ints(0..10), None);
        let footer_len = i32::from_le_bytes(bytes[bytes.len() - 10..][..4].try_into().unwrap());
        let footer_start = bytes.len() - 10 - footer_len as usize;
        let footer = arrow_ipc::root_as_footer(&bytes[footer_start..bytes.len() - 10]).unwrap();
        let block = footer.recordBatches().unwrap().get(0);
        let block_at = (block as *const arrow_ipc::Block as usize)
            - bytes[footer_start..].as_ptr() as usize
            + footer_start;
        // A Block: offset (i64), metadata length (i32, padded), body length (i64).
        assert_eq!(
            &bytes[block_at..block_at + 8],
            &block.offset().to_le_bytes()
        );
        bytes[block_at + 16..block_at + 24].copy_from_slice(&body.to_le_bytes());
        let errors = read_all_ways("block.arrow", &bytes);
        assert!(errors.contains("a record batch block"), "{body}: {errors}");
    }
}

#[test]
fn files_claiming_nothing_odd_still_read() {
    for (name, bytes) in [
        (
            "ok.arrows",
            ipc_stream(&ints(0..1000), Some(arrow_ipc::CompressionType::ZSTD)),
        ),
        (
            "ok.arrow",
            ipc_file(&ints(0..1000), Some(arrow_ipc::CompressionType::LZ4_FRAME)),
        ),
        ("ok.parquet", parquet_with_metadata(|m| m)),
    ] {
        assert_eq!(read_all_ways(name, &bytes), "", "{name}");
    }
}

/// Inputs the `input_files` fuzz target found arrow-ipc panicking or allocating on (before
/// partout checked and contained them), kept in `tests/data`: each an error naming the file.
#[test]
fn ipc_inputs_found_by_fuzzing_are_errors() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for (name, what) in [
        // arrow-ipc's schema conversion unwrapped the list of fields (checked first).
        ("schema-without-fields.arrow", "schema: no fields"),
        // arrow-ipc unwrapped a dictionary batch's data (checked first).
        (
            "dictionary-batch-without-data.arrows",
            "a dictionary batch without data",
        ),
        // arrow-ipc's schema conversion panicked on a malformed type (now checked first).
        ("type-none.arrow", "schema: field \"\": unknown type NONE"),
        (
            "int-of-bit-width-536870944.arrow",
            "schema: field \"item\": no 536870944-bit integer type",
        ),
        (
            "decimal-precision-past-255.arrow",
            "schema: field \"price\": unknown decimal precision, scale or width",
        ),
        // arrow-buffer asserted the bounds of a slice of the message's body.
        (
            "buffer-past-body.arrows",
            "buffer 31 at 1408+360287970189639698 outside a body of 1792 bytes",
        ),
        // arrow-ipc's FileReader asked for 0x5c5c5c5c5c5c5c5c bytes.
        (
            "block-claiming-6-exabytes.arrow",
            "a record batch block (1088 + 1408 bytes at 8448) outside the file's 5738 bytes",
        ),
    ] {
        let errors = read_all_ways(name, &std::fs::read(data.join(name)).unwrap());
        assert_eq!(errors.matches(what).count(), 3, "{name}: {errors}");
    }
}

#[test]
fn ipc_validity_buffer_shorter_than_its_rows_is_an_error() {
    // arrow-buffer asserted, while a batch was read (now refused before the read).
    let flags: ArrayRef = Arc::new(arrow_array::BooleanArray::from_iter(
        (0..1000).map(|i| (i % 3 != 0).then_some(i % 2 == 0)),
    ));
    let batch = RecordBatch::try_from_iter([("flag", flags)]).unwrap();
    let mut bytes = ipc_stream(&batch, None);
    let (_, flatbuffer, body, _) = messages(&bytes)[1];
    let message = arrow_ipc::root_as_message(&bytes[flatbuffer..body]).unwrap();
    let validity = message
        .header_as_record_batch()
        .unwrap()
        .buffers()
        .unwrap()
        .get(0);
    assert_eq!(validity.length(), 125, "1000 bits");
    let at = (validity as *const arrow_ipc::Buffer as usize) - bytes.as_ptr() as usize;
    // A Buffer: offset, length (i64 each).
    bytes[at + 8..at + 16].copy_from_slice(&1i64.to_le_bytes());
    let errors = read_all_ways("validity.arrows", &bytes);
    assert!(
        errors.contains("1000 rows, 334 null, with 1 bytes of null bits"),
        "{errors}"
    );
}

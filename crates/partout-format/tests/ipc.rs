//! Arrow IPC streams: every type round-trips through the encoder and arrow-rs's reader under
//! every compression; malformed bytes are errors, never panics.

use arrow_array::RecordBatch;
use partout_format::ipc::{Compression, IpcStreamEncoder, decode_stream};
use partout_testkit::{every_type, random_batch, rng};
use proptest::prelude::*;
use std::sync::Arc;

const COMPRESSIONS: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::ZSTD];

fn encode_all(batches: &[RecordBatch], compression: Compression) -> Vec<u8> {
    let mut encoder = IpcStreamEncoder::try_new(batches[0].schema(), compression).unwrap();
    let mut out = Vec::new();
    for batch in batches {
        encoder.encode(batch, &mut out).unwrap();
    }
    encoder.finish(&mut out).unwrap();
    out
}

#[test]
fn every_type_round_trips_under_every_compression() {
    let mut rng = rng(5);
    for data_type in every_type() {
        for compression in COMPRESSIONS {
            let batches: Vec<RecordBatch> = (0..3)
                .map(|i| {
                    random_batch(
                        std::slice::from_ref(&data_type),
                        50 * i,
                        0.3,
                        true,
                        &mut rng,
                    )
                })
                .collect();
            let bytes = encode_all(&batches, compression);
            let (schema, decoded) = decode_stream(&bytes)
                .unwrap_or_else(|e| panic!("{data_type} {compression:?}: {e}"));
            assert_eq!(schema, batches[0].schema(), "{data_type}");
            assert_eq!(decoded, batches, "{data_type} {compression:?}");
        }
    }
}

/// The streams of many destinations (`StreamEncoders`, which share one encoder when the schema
/// has no dictionaries) are what one encoder per destination writes: for every type, under
/// every compression, for destinations given batches in turn, one given none (the schema
/// alone) and one left unended where only begun streams are ended; an ended destination given
/// more rows begins a second stream. Byte for byte, but for LZ4 bodies of flat columns: the
/// shared streams write them through partout's runs encoder, whose validity bitmaps hold no
/// bits past their rows where arrow-ipc copies what the batch held there, so those streams
/// are compared by what they decode to.
#[test]
fn many_destinations_write_what_one_encoder_each_writes() {
    use partout_format::{Encoding, StreamEncoders};
    let mut rng = rng(17);
    let mut types: Vec<Vec<arrow_schema::DataType>> =
        every_type().into_iter().map(|t| vec![t]).collect();
    types.push(every_type());
    for (i, types) in types.iter().enumerate() {
        let compression = COMPRESSIONS[i % 3];
        let batches: Vec<RecordBatch> = (0..5)
            .map(|k| random_batch(types, [40, 0, 7, 300, 1][k], 0.3, k == 2, &mut rng))
            .collect();
        let schema = batches[0].schema();
        // Destination 0 gets batches 0, 2, 4; destination 1 batches 1, 3; destination 2 none.
        let mut encoders = StreamEncoders::try_new(schema, 3, Encoding::ipc(compression)).unwrap();
        let mut got = vec![Vec::new(); 3];
        for (k, batch) in batches.iter().enumerate() {
            let p = k % 2;
            encoders.encode(p, batch, &mut got[p]).unwrap();
        }
        let mut unbegun = Vec::new();
        assert!(
            !encoders.finish_begun(2, &mut unbegun).unwrap(),
            "{types:?}"
        );
        assert!(unbegun.is_empty());
        assert!(encoders.finish_begun(0, &mut got[0]).unwrap());
        encoders.finish(1, &mut got[1]).unwrap();
        encoders.finish(2, &mut got[2]).unwrap();
        let own = |ks: &[usize]| {
            let mut encoder = IpcStreamEncoder::try_new(batches[0].schema(), compression).unwrap();
            let mut out = Vec::new();
            for &k in ks {
                encoder.encode(&batches[k], &mut out).unwrap();
            }
            encoder.finish(&mut out).unwrap();
            out
        };
        let same = |got: &[u8], own: Vec<u8>, what: &str| {
            if compression == Compression::Lz4 {
                let (got, own) = (decode_stream(got).unwrap(), decode_stream(&own).unwrap());
                assert_eq!(got, own, "{types:?}: {what}");
            } else {
                assert!(got == own, "{types:?}: {what}");
            }
        };
        same(&got[0], own(&[0, 2, 4]), "destination 0");
        same(&got[1], own(&[1, 3]), "destination 1");
        same(&got[2], own(&[]), "destination 2");
        assert!(encoders.encode(3, &batches[0], &mut Vec::new()).is_err());
        // An ended destination given more rows begins a new stream, schema first.
        let mut again = Vec::new();
        encoders.encode(0, &batches[3], &mut again).unwrap();
        assert!(encoders.finish_begun(0, &mut again).unwrap());
        same(&again, own(&[3]), "destination 0's second stream");
    }
}

/// A batch encoded as parts is, joined, the bytes `encode` appends, for every type under
/// every compression (dictionaries included, which come as one part); uncompressed, the parts
/// of a schema without dictionaries share the batch's own value buffers instead of copying
/// them.
#[test]
fn parts_join_into_the_encoded_bytes_and_share_the_batch_buffers() {
    use arrow_array::Array;
    use partout_format::{Encoding, StreamEncoders};
    let mut rng = rng(23);
    let mut types: Vec<Vec<arrow_schema::DataType>> =
        every_type().into_iter().map(|t| vec![t]).collect();
    types.push(every_type());
    for (i, types) in types.iter().enumerate() {
        for compression in [COMPRESSIONS[i % 3], Compression::None] {
            let batches: Vec<RecordBatch> = (0..3)
                .map(|k| random_batch(types, [50, 0, 9][k], 0.3, false, &mut rng))
                .collect();
            let schema = batches[0].schema();
            let encoding = Encoding::ipc(compression);
            let mut by_parts = StreamEncoders::try_new(schema.clone(), 2, encoding).unwrap();
            let mut by_bytes = StreamEncoders::try_new(schema, 2, encoding).unwrap();
            let mut streams = [Vec::new(), Vec::new()];
            for (k, batch) in batches.iter().enumerate() {
                let mut parts = Vec::new();
                by_parts.encode_parts(k % 2, batch, &mut parts).unwrap();
                let mut expected = Vec::new();
                by_bytes.encode(k % 2, batch, &mut expected).unwrap();
                let joined: Vec<u8> = parts.iter().flat_map(|p| p.as_slice().to_vec()).collect();
                assert!(joined == expected, "{types:?} {compression:?}: batch {k}");
                streams[k % 2].extend_from_slice(&joined);
            }
            // The parts are right by themselves, not only like `encode`: arrow-ipc's own
            // reader gives back each destination's batches from them.
            for (p, stream) in streams.iter_mut().enumerate() {
                by_parts.finish(p, stream).unwrap();
                let reader = arrow_ipc::reader::StreamReader::try_new(&stream[..], None).unwrap();
                let read: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
                let sent: Vec<&RecordBatch> = batches.iter().skip(p).step_by(2).collect();
                assert_eq!(read.len(), sent.len(), "{types:?} {compression:?}");
                for (read, sent) in read.iter().zip(sent) {
                    assert_eq!(read, sent, "{types:?} {compression:?}: destination {p}");
                }
            }
        }
    }
    // A fixed-width column, uncompressed: its values go out as the batch's own buffer.
    let batch = random_batch(&[arrow_schema::DataType::Int64], 1000, 0.0, false, &mut rng);
    let mut encoders =
        StreamEncoders::try_new(batch.schema(), 1, Encoding::ipc(Compression::None)).unwrap();
    let mut parts = Vec::new();
    encoders.encode_parts(0, &batch, &mut parts).unwrap();
    let values = batch.column(0).to_data().buffers()[0].clone();
    assert!(
        parts
            .iter()
            .any(|p| p.as_ptr() == values.as_ptr() && p.len() == values.len()),
        "the values were copied into {} parts",
        parts.len()
    );
    assert!(encoders.encode_parts(1, &batch, &mut parts).is_err());
}

#[test]
fn a_stream_without_batches_still_has_its_schema() {
    let batch = random_batch(&[arrow_schema::DataType::Int32], 0, 0.0, false, &mut rng(1));
    let encoder = IpcStreamEncoder::try_new(batch.schema(), Compression::None).unwrap();
    let mut out = Vec::new();
    encoder.finish(&mut out).unwrap();
    let (schema, batches) = decode_stream(&out).unwrap();
    assert_eq!(schema, batch.schema());
    assert!(batches.is_empty());
}

#[test]
fn view_slices_carry_only_their_own_bytes() {
    // A slice of 10 rows of a 10,000-row Utf8View column: its stream must not carry the
    // whole column's data buffers.
    let big = random_batch(
        &[arrow_schema::DataType::Utf8View],
        10_000,
        0.0,
        false,
        &mut rng(2),
    );
    let slice = big.slice(100, 10);
    let whole = encode_all(std::slice::from_ref(&big), Compression::None).len();
    let small = encode_all(std::slice::from_ref(&slice), Compression::None).len();
    assert!(
        small * 50 < whole,
        "a 10-row slice took {small} bytes, the whole batch {whole}"
    );
    let (_, decoded) =
        decode_stream(&encode_all(std::slice::from_ref(&slice), Compression::None)).unwrap();
    assert_eq!(decoded, [slice]);
}

#[test]
fn a_batch_of_another_schema_is_refused() {
    let a = random_batch(&[arrow_schema::DataType::Int32], 5, 0.0, false, &mut rng(3));
    let b = random_batch(&[arrow_schema::DataType::Utf8], 5, 0.0, false, &mut rng(3));
    let mut encoder = IpcStreamEncoder::try_new(a.schema(), Compression::None).unwrap();
    let err = encoder.encode(&b, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("invalid argument"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Truncated or corrupted streams give an error or (for corruption inside value bytes) a
    /// stream that decodes to valid arrays; never a panic.
    #[test]
    fn malformed_streams_never_panic(
        seed in any::<u64>(),
        type_index in 0..every_type().len(),
        compression in prop::sample::select(COMPRESSIONS.to_vec()),
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
    ) {
        let mut rng = rng(seed);
        let data_type = every_type().swap_remove(type_index);
        let batch = random_batch(&[data_type], 20, 0.3, false, &mut rng);
        let mut bytes = encode_all(&[batch], compression);
        for (at, xor) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= xor;
        }
        let truncated = &bytes[..cut.index(bytes.len() + 1)];
        let outcome = std::panic::catch_unwind(|| decode_stream(truncated).map(|(_, b)| b.len()));
        prop_assert!(outcome.is_ok(), "the decoder panicked");
    }
}

/// A stream whose one column nests `depth` lists in each other, as partout's encoder writes it,
/// with a batch of three null rows or none
/// (built on a thread with a large stack: arrow-rs recurses once per level to write and drop
/// such a schema).
fn nested_list_stream(depth: usize, with_batch: bool) -> Vec<u8> {
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || {
            let mut data_type = arrow_schema::DataType::Int64;
            for _ in 0..depth {
                data_type = arrow_schema::DataType::new_list(data_type, true);
            }
            if !with_batch {
                let field = arrow_schema::Field::new("deep", data_type, true);
                let schema = Arc::new(arrow_schema::Schema::new(vec![field]));
                let encoder = IpcStreamEncoder::try_new(schema, Compression::None).unwrap();
                let mut out = Vec::new();
                encoder.finish(&mut out).unwrap();
                return out;
            }
            let column = arrow_array::new_null_array(&data_type, 3);
            let batch = RecordBatch::try_from_iter([("deep", column)]).unwrap();
            encode_all(&[batch], Compression::None)
        })
        .unwrap()
        .join()
        .unwrap()
}

/// Decodes `bytes` on a thread with a 256 KiB stack (2 MiB in debug builds, whose frames in
/// arrow-ipc are many times larger): a decoder that recursed once per level of a 10,000-deep
/// schema would overflow it and abort the test binary.
fn decode_on_small_stack(bytes: Vec<u8>) -> Result<usize, String> {
    let stack = if cfg!(debug_assertions) {
        2 << 20
    } else {
        256 << 10
    };
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            decode_stream(&bytes)
                .map(|(schema, _)| schema.fields().len())
                .map_err(|e| e.to_string())
        })
        .unwrap()
        .join()
        .unwrap()
}

/// A schema message nesting lists 10,000 deep is refused by the flatbuffer verifier (at most
/// 64 tables deep) before anything recurses over it; a batch of the deepest schema it lets
/// through (60 lists) decodes within the same small stack.
#[test]
fn a_schema_nested_ten_thousand_deep_is_an_error_not_a_stack_overflow() {
    let err = decode_on_small_stack(nested_list_stream(10_000, false)).unwrap_err();
    assert!(
        err.starts_with("corrupt input: Arrow IPC stream at byte 8: invalid message")
            && err.contains("depth limit reached"),
        "{err}"
    );
    let deepest = (1..64)
        .rev()
        .find(|&depth| decode_on_small_stack(nested_list_stream(depth, true)).is_ok())
        .unwrap();
    assert!(deepest >= 16, "only {deepest} levels decode");
    assert!(decode_on_small_stack(nested_list_stream(deepest + 1, true)).is_err());
}

/// Streams the fuzzer (`fuzz/fuzz_targets/ipc_decode.rs`) found that made arrow-ipc's reader
/// panic, each now refused before the reader sees it: a field of type NONE
/// (`unimplemented!`), a schema without a fields vector (`unwrap` on `None`), a column with
/// nulls and fewer null bits than rows (an assertion in `BooleanBuffer::new`), and an offsets
/// buffer whose length is not a whole number of `i32`s (an assertion in `typed_data`).
#[test]
fn streams_that_panicked_arrow_ipc_are_errors() {
    let cases: [(&[u8], &str); 4] = [
        (
            include_bytes!("data/ipc_panics/field_type_none.arrows"),
            "unknown type NONE",
        ),
        (
            include_bytes!("data/ipc_panics/schema_without_fields.arrows"),
            "schema: no fields",
        ),
        (
            include_bytes!("data/ipc_panics/null_bits_shorter_than_rows.arrows"),
            "bytes of null bits",
        ),
        (
            include_bytes!("data/ipc_panics/offsets_not_whole_i32s.arrows"),
            "for values of 4 bytes",
        ),
    ];
    for (bytes, want) in cases {
        let err = decode_stream(bytes).unwrap_err().to_string();
        assert!(
            err.starts_with("corrupt input: Arrow IPC stream at byte") && err.contains(want),
            "{err:?} should say {want:?}"
        );
    }
}

/// A ZSTD level is honoured: the stream at each level is byte for byte what arrow-rs's own
/// `StreamWriter` writes at that level, levels give different bytes (a faster level, more of
/// them), and every level decodes to the input.
#[test]
fn zstd_levels_write_what_arrow_writes_at_that_level() {
    use arrow_ipc::writer::{IpcWriteOptions, StreamWriter};
    use partout_format::ipc::ZstdLevel;
    let mut rng = rng(23);
    let types = every_type();
    let batches: Vec<RecordBatch> = (0..2)
        .map(|_| random_batch(&types, 2000, 0.1, false, &mut rng))
        .collect();
    let mut sizes = Vec::new();
    for level in [-20, 1, 3, 19] {
        let level = ZstdLevel::try_new(level).unwrap();
        let ours = encode_all(&batches, Compression::Zstd(level));
        let options = IpcWriteOptions::default()
            .try_with_compression(Some(arrow_ipc::CompressionType::ZSTD))
            .unwrap()
            .try_with_compression_level(Some(level.get()))
            .unwrap();
        let mut theirs = Vec::new();
        let mut writer =
            StreamWriter::try_new_with_options(&mut theirs, &batches[0].schema(), options).unwrap();
        for batch in &batches {
            writer.write(batch).unwrap();
        }
        writer.finish().unwrap();
        drop(writer);
        assert!(
            ours == theirs,
            "level {level}: partout's bytes differ from arrow-rs's"
        );
        let (_, decoded) = decode_stream(&ours).unwrap();
        assert_eq!(decoded, batches, "level {level}");
        sizes.push(ours.len());
    }
    assert!(
        sizes[0] > sizes[1] && sizes[1] > sizes[3],
        "sizes by level {sizes:?}"
    );
    assert_eq!(
        encode_all(&batches, Compression::ZSTD),
        encode_all(&batches, Compression::Zstd(ZstdLevel::try_new(3).unwrap()))
    );
}

//! IPC messages written straight from slices of rows (`SlicesEncoder`): for every flat type,
//! under every compression, from plain and sliced batches, with and without nulls, with
//! empty slices and slices of every size around the sharing threshold, a stream of the messages
//! decodes (with arrow-rs's reader, after partout's checks) to what arrow's `concat` of the
//! same slices gives.

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_schema::DataType;
use partout_format::ipc::slices::{SHARED_SLICE, SliceSource, SlicesEncoder};
use partout_format::ipc::{Compression, IpcStreamEncoder, ZstdLevel, decode_stream};
use partout_testkit::{every_type, random_batch, rng};
use proptest::prelude::*;
use std::ops::Range;

/// The flat types: those the slices encoder takes.
fn flat() -> Vec<DataType> {
    every_type()
        .into_iter()
        .filter(|t| {
            SlicesEncoder::takes(&arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                "c",
                t.clone(),
                true,
            )]))
        })
        .collect()
}

/// `messages`, each a message's parts, in a stream of `schema`.
fn stream(
    schema: &arrow_schema::SchemaRef,
    compression: Compression,
    messages: &[Vec<Buffer>],
) -> Vec<u8> {
    let mut empty = Vec::new();
    IpcStreamEncoder::try_new(schema.clone(), compression)
        .unwrap()
        .finish(&mut empty)
        .unwrap();
    let (start, end) = empty.split_at(empty.len() - 8);
    let mut out = start.to_vec();
    for parts in messages {
        for part in parts {
            out.extend_from_slice(part.as_slice());
        }
    }
    out.extend_from_slice(end);
    out
}

/// Encodes `slices` of `batches` (batch index, rows) as one message per group, decodes the
/// stream, and checks each message against arrow's concat of its slices.
fn check(batches: &[RecordBatch], groups: &[Vec<(usize, Range<usize>)>], compression: Compression) {
    let schema = batches[0].schema();
    let mut encoder = SlicesEncoder::new(schema.clone(), compression)
        .unwrap()
        .unwrap();
    let sources: Vec<SliceSource> = batches.iter().map(SliceSource::new).collect();
    let mut messages = Vec::new();
    let mut want = Vec::new();
    for group in groups {
        let slices: Vec<_> = group
            .iter()
            .map(|(b, r)| (&sources[*b], r.clone()))
            .collect();
        let mut parts = Vec::new();
        encoder.encode(&slices, &mut parts).unwrap();
        messages.push(parts);
        let slices: Vec<RecordBatch> = group
            .iter()
            .map(|(b, r)| batches[*b].slice(r.start, r.len()))
            .collect();
        want.push(arrow_select::concat::concat_batches(&schema, &slices).unwrap());
    }
    let bytes = stream(&schema, compression, &messages);
    let (got_schema, got) =
        decode_stream(&bytes).unwrap_or_else(|e| panic!("{compression:?}: {e}"));
    assert_eq!(got_schema, schema);
    assert_eq!(got.len(), want.len());
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(got, want, "message {i}, {compression:?}");
    }
}

fn compressions() -> [Compression; 4] {
    let one = Compression::Zstd(ZstdLevel::try_new(1).unwrap());
    [Compression::None, Compression::Lz4, Compression::ZSTD, one]
}

#[test]
fn every_flat_type_round_trips_from_runs() {
    let types = flat();
    assert!(types.len() > 20, "{types:?}");
    let mut rng = rng(41);
    for (i, data_type) in types.iter().enumerate() {
        for sliced in [false, true] {
            let batches: Vec<RecordBatch> = [700, 0, 1300]
                .iter()
                .map(|&n| {
                    random_batch(
                        std::slice::from_ref(data_type),
                        n,
                        0.2 * (i % 2) as f64,
                        sliced,
                        &mut rng,
                    )
                })
                .collect();
            // Message 0: slices from every batch (one empty); 1: one whole batch; 2: one row.
            let groups = vec![
                vec![(0, 3..400), (1, 0..0), (2, 0..1300), (0, 400..700)],
                vec![(2, 0..1300)],
                vec![(0, 699..700)],
            ];
            check(&batches, &groups, compressions()[i % 4]);
        }
    }
}

/// Slices of every length around the sharing threshold, and every width of type: slices shared
/// by reference and copied, side by side in one buffer.
#[test]
fn runs_around_the_sharing_threshold_round_trip() {
    let mut rng = rng(43);
    let types = [
        DataType::Int8,
        DataType::Int64,
        DataType::Utf8,
        DataType::Decimal128(20, 3),
    ];
    let rows = 2 * SHARED_SLICE + 50;
    let batches = vec![random_batch(&types, rows, 0.1, false, &mut rng)];
    let groups: Vec<Vec<(usize, Range<usize>)>> = [
        SHARED_SLICE / 8 - 1,
        SHARED_SLICE / 8,
        SHARED_SLICE - 1,
        SHARED_SLICE,
        SHARED_SLICE + 1,
    ]
    .iter()
    .map(|&n| vec![(0, 0..n), (0, n..n + 3), (0, 7..7 + n)])
    .collect();
    check(&batches, &groups, Compression::None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_runs_of_flat_columns_round_trip(
        seed in any::<u64>(),
        type_picks in proptest::collection::vec(any::<prop::sample::Index>(), 1..4),
        lens in proptest::collection::vec(0usize..300, 1..4),
        cuts in proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..8),
        nulls in 0.0f64..0.5,
        sliced in any::<bool>(),
        codec in 0usize..4,
    ) {
        let all = flat();
        let types: Vec<DataType> = type_picks.iter().map(|i| i.get(&all).clone()).collect();
        let mut rng = rng(seed);
        let batches: Vec<RecordBatch> = lens
            .iter()
            .map(|&n| random_batch(&types, n, nulls, sliced, &mut rng))
            .collect();
        let slices: Vec<(usize, Range<usize>)> = cuts
            .iter()
            .map(|(b, x, y)| {
                let b = b.index(batches.len());
                let n = batches[b].num_rows();
                let (x, y) = (x.index(n + 1), y.index(n + 1));
                (b, x.min(y)..x.max(y))
            })
            .collect();
        check(&batches, &[slices], compressions()[codec]);
    }
}

#[test]
fn a_run_outside_its_batch_is_an_error() {
    let mut rng = rng(47);
    let batch = random_batch(&[DataType::Int32], 10, 0.0, false, &mut rng);
    let source = SliceSource::new(&batch);
    let mut encoder = SlicesEncoder::new(batch.schema(), Compression::None)
        .unwrap()
        .unwrap();
    let err = encoder
        .encode(&[(&source, 5..11)], &mut Vec::new())
        .unwrap_err();
    assert!(
        err.to_string().contains("rows 5..11 of a batch of 10 rows"),
        "{err}"
    );
    let other = random_batch(&[DataType::Int64], 10, 0.0, false, &mut rng);
    let other = SliceSource::new(&other);
    let err = encoder
        .encode(&[(&other, 0..1)], &mut Vec::new())
        .unwrap_err();
    assert!(
        err.to_string().contains("column 1 is Int64, not Int32"),
        "{err}"
    );
}

/// View columns whose long values lie back to back (shared) and out of order (copied), and
/// views past the end of their buffers (an error, not a panic).
#[test]
fn views_in_order_and_out_of_order_round_trip() {
    use arrow_array::{ArrayRef, StringViewArray, UInt32Array};
    let values: Vec<Option<String>> = (0..3000)
        .map(|i| (i % 11 != 0).then(|| format!("{i:>width$}", width = 5 + i % 40)))
        .collect();
    // Compacted: every long value in one buffer, in row order.
    let in_order = StringViewArray::from_iter(values.iter().map(|v| v.as_deref())).gc();
    assert_eq!(in_order.data_buffers().len(), 1);
    let reversed: UInt32Array = (0..3000u32).rev().collect();
    let out_of_order = arrow_select::take::take(&in_order, &reversed, None).unwrap();
    let batch = |array: ArrayRef| RecordBatch::try_from_iter([("s", array)]).unwrap();
    let batches = vec![batch(std::sync::Arc::new(in_order)), batch(out_of_order)];
    let groups = vec![
        vec![(0, 0..1000), (1, 0..1000), (0, 2000..3000), (1, 2500..2600)],
        vec![(1, 10..20)],
        vec![(0, 10..2990)],
    ];
    for compression in compressions() {
        check(&batches, &groups, compression);
    }
}

//! The partitioned writer end to end: batches in, IPC streams out, decoded and held to the
//! reference partitioner.

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use partout_core::ids::{PartitionIds, Partitioning};
use partout_exchange::{
    FileSink, Flush, MemorySink, PartitionedWriter, Sink, WriterError, WriterOptions,
};
use partout_format::Encoding;
use partout_format::ipc::{Compression, decode_stream};
use partout_testkit::{
    IdPattern, assert_same_rows, check_ipc_outputs as check_outputs, error_chain, every_type,
    presto_carries, random_batch, random_ids, random_inputs, reference_partition, rng,
    with_id_column, with_ids,
};
use proptest::prelude::*;
use std::sync::Arc;

const COMPRESSIONS: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::ZSTD];

/// Writes `inputs` with the writer, by the ids in their last column, into a memory sink.
fn write_given(
    inputs: &[(RecordBatch, Vec<u32>)],
    n: u32,
    options: WriterOptions,
    encoding: Encoding,
) -> (MemorySink, partout_exchange::WriterMetrics) {
    let schema = inputs[0].0.schema();
    let pid = schema.fields().len() - 1;
    let mut writer = PartitionedWriter::try_new(
        schema,
        Partitioning::given(pid, n),
        options,
        encoding,
        MemorySink::new(n as usize),
    )
    .unwrap();
    for (batch, _) in inputs {
        writer.append(batch).unwrap();
    }
    writer.finish().unwrap()
}

/// Writes `batches` (each with random ids over `n` destinations) and checks the result.
fn round_trip(
    types: &[DataType],
    n: u32,
    rows: &[usize],
    options: WriterOptions,
    compression: Compression,
    seed: u64,
) {
    let inputs = random_inputs(types, rows, n, seed);
    let (sink, metrics) = write_given(&inputs, n, options, Encoding::ipc(compression));
    let total: usize = rows.iter().sum();
    assert_eq!(metrics.rows_in, total as u64);
    assert_eq!(metrics.rows_out, total as u64);
    assert_eq!(metrics.batches, rows.len() as u64);
    assert!(sink.is_finished());
    let outputs = sink.into_outputs();
    assert_eq!(
        metrics.bytes_out,
        outputs.iter().map(|o| o.len() as u64).sum::<u64>()
    );
    for (p, output) in outputs.iter().enumerate() {
        assert_eq!(metrics.destination_bytes[p], output.len() as u64);
        let rows = inputs
            .iter()
            .flat_map(|(_, ids)| ids)
            .filter(|&&id| id as usize == p)
            .count();
        assert_eq!(
            metrics.destination_rows[p], rows as u64,
            "destination {p}'s rows"
        );
    }
    check_outputs(&outputs, &inputs, n);
}

#[test]
fn every_type_round_trips_under_every_compression() {
    for (i, data_type) in every_type().into_iter().enumerate() {
        for (j, compression) in COMPRESSIONS.into_iter().enumerate() {
            let options = WriterOptions::default()
                .with_target_bytes(2048)
                .with_seed(i as u64);
            let n = [1, 7, 300][(i + j) % 3];
            round_trip(
                std::slice::from_ref(&data_type),
                n,
                &[300, 0, 500, 1],
                options,
                compression,
                (i * 3 + j) as u64,
            );
        }
    }
}

#[test]
fn all_types_together_up_to_2000_destinations_under_either_flush() {
    let types = every_type();
    for (n, flush) in [
        (1, Flush::AtTarget),
        (64, Flush::AtTarget),
        (2000, Flush::AtTarget),
        // Batches merged into the buffers a few at a time (from 512 destinations), and the
        // rest at the end.
        (600, Flush::AtTarget),
        (1, Flush::AllAtLimit),
        (2000, Flush::AllAtLimit),
    ] {
        let options = WriterOptions::default()
            .with_target_bytes(16 << 10)
            .with_memory_limit(4 << 20)
            .with_flush(flush);
        let rows: &[usize] = if n == 600 {
            &[300, 0, 700, 1, 500, 300, 300, 300, 900, 20, 300, 300]
        } else {
            &[1000, 2000, 10]
        };
        round_trip(&types, n, rows, options, Compression::Lz4, u64::from(n));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn random_writers_round_trip(
        type_picks in prop::collection::vec(0usize..64, 1..4),
        n in 1u32..=2000,
        rows in prop::collection::vec(0usize..1500, 1..5),
        target in 1usize..200_000,
        limit_factor in 1usize..64,
        compression in 0usize..3,
        all_at_limit in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let all = every_type();
        let types: Vec<DataType> = type_picks.iter().map(|&i| all[i % all.len()].clone()).collect();
        let options = WriterOptions::default()
            .with_target_bytes(target)
            .with_memory_limit(target * limit_factor)
            .with_flush(if all_at_limit { Flush::AllAtLimit } else { Flush::AtTarget })
            .with_seed(seed);
        round_trip(&types, n, &rows, options, COMPRESSIONS[compression], seed);
    }
}

/// Ids a caller computes (another engine's hash) place rows exactly where the same ids in a
/// column place them, under either flush; ids that cannot be are refused.
#[test]
fn ids_given_by_the_caller_place_rows_as_an_id_column_does() {
    let types = every_type();
    for (n, flush) in [(5, Flush::AtTarget), (300, Flush::AllAtLimit)] {
        let inputs = random_inputs(&types, &[700, 0, 1200], n, u64::from(n));
        let options = WriterOptions::default()
            .with_target_bytes(8 << 10)
            .with_memory_limit(2 << 20)
            .with_flush(flush)
            .with_seed(3);
        let (expected, _) = write_given(&inputs, n, options.clone(), Encoding::default());
        let mut writer = PartitionedWriter::try_new(
            inputs[0].0.schema(),
            Partitioning::round_robin(n),
            options,
            Encoding::default(),
            MemorySink::new(n as usize),
        )
        .unwrap();
        for (batch, ids) in &inputs {
            writer.append_with_ids(batch, ids).unwrap();
        }
        let (sink, metrics) = writer.finish().unwrap();
        assert_eq!(metrics.rows_in, 1900);
        let outputs = sink.into_outputs();
        assert_eq!(outputs, expected.into_outputs(), "{n} destinations");
        check_outputs(&outputs, &inputs, n);
    }
    let (batch, ids) = &random_inputs(&types[..2], &[10], 4, 1)[0];
    let writer = |options: WriterOptions| {
        PartitionedWriter::try_new(
            batch.schema(),
            Partitioning::round_robin(4),
            options,
            Encoding::default(),
            MemorySink::new(4),
        )
        .unwrap()
    };
    let mut plain = writer(WriterOptions::default());
    let err = plain.append_with_ids(batch, &ids[1..]).unwrap_err();
    assert!(
        err.to_string()
            .contains("9 partition ids for a batch of 10 rows"),
        "{err}"
    );
    let mut bad = ids.clone();
    bad[4] = 4;
    let err = plain.append_with_ids(batch, &bad).unwrap_err();
    assert!(err.to_string().contains("partition id 4 of 4"), "{err}");
    // Refused batches leave the writer usable.
    plain.append_with_ids(batch, ids).unwrap();
    assert_eq!(plain.finish().unwrap().1.rows_in, 10);
    let mut replicating = writer(WriterOptions::default().with_replicate_nulls_and_any(true));
    let err = replicating.append_with_ids(batch, ids).unwrap_err();
    assert!(err.to_string().contains("replicated"), "{err}");
}

/// Hash partitioning end to end: every decoded row re-hashes to the destination holding it,
/// and every input row comes out exactly once.
#[test]
fn hash_partitioned_rows_rehash_to_their_destination() {
    let mut rng = rng(17);
    let n = 37;
    let batches: Vec<RecordBatch> = (0..5)
        .map(|_| {
            random_batch(
                &[DataType::Int64, DataType::Utf8View],
                2000,
                0.2,
                false,
                &mut rng,
            )
        })
        .collect();
    let schema = batches[0].schema();
    let partitioning = Partitioning::hash(vec![1, 2], n);
    let mut writer = PartitionedWriter::try_new(
        schema.clone(),
        partitioning.clone(),
        WriterOptions::default().with_target_bytes(4096),
        Encoding::default(),
        MemorySink::new(n as usize),
    )
    .unwrap();
    for batch in &batches {
        writer.append(batch).unwrap();
    }
    let (sink, metrics) = writer.finish().unwrap();
    assert!(metrics.flushes > u64::from(n), "{metrics:?}");
    let mut ids = PartitionIds::try_new(partitioning, &schema).unwrap();
    let mut seen = vec![0usize; 2000];
    let mut buffer = Vec::new();
    for (p, bytes) in sink.into_outputs().iter().enumerate() {
        for batch in decode_stream(bytes).unwrap().1 {
            ids.compute(&batch, &mut buffer).unwrap();
            assert!(
                buffer.iter().all(|&id| id as usize == p),
                "a row in destination {p} hashes elsewhere"
            );
            let rows = batch
                .column(0)
                .as_any()
                .downcast_ref::<UInt32Array>()
                .unwrap();
            for row in rows.values() {
                seen[*row as usize] += 1;
            }
        }
    }
    assert!(
        seen.iter().all(|&s| s == batches.len()),
        "rows lost or duplicated"
    );
}

/// Presto's replicate-nulls-and-any: a row with a null key goes to every destination, the
/// first row goes to every destination once, every other row to its own destination once.
#[test]
fn replicated_rows_reach_every_destination() {
    let n = 5u32;
    let batches: Vec<RecordBatch> = (0..3)
        .map(|b| {
            let keys =
                Int64Array::from_iter((0..100i64).map(|i| (i % 9 != 4).then_some(i * 31 + b)));
            let tags = StringArray::from_iter_values((0..100).map(|i| format!("b{b}r{i}")));
            RecordBatch::try_from_iter([
                ("k", Arc::new(keys) as ArrayRef),
                ("tag", Arc::new(tags) as ArrayRef),
            ])
            .unwrap()
        })
        .collect();
    let schema = batches[0].schema();
    let partitioning = Partitioning::hash(vec![0], n);
    for flush in [Flush::AtTarget, Flush::AllAtLimit] {
        let options = WriterOptions::default()
            .with_replicate_nulls_and_any(true)
            .with_flush(flush)
            .with_target_bytes(512)
            .with_memory_limit(4096);
        let mut writer = PartitionedWriter::try_new(
            schema.clone(),
            partitioning.clone(),
            options,
            Encoding::default(),
            MemorySink::new(n as usize),
        )
        .unwrap();
        for batch in &batches {
            writer.append(batch).unwrap();
        }
        let (sink, metrics) = writer.finish().unwrap();
        let mut ids = PartitionIds::try_new(partitioning.clone(), &schema).unwrap();
        let mut expected: Vec<Vec<String>> = vec![Vec::new(); n as usize];
        let mut buffer = Vec::new();
        let mut replicated = 0;
        for (b, batch) in batches.iter().enumerate() {
            ids.compute(batch, &mut buffer).unwrap();
            for row in 0..batch.num_rows() {
                let tag = format!("b{b}r{row}");
                if batch.column(0).is_null(row) || (b, row) == (0, 0) {
                    replicated += 1;
                    expected.iter_mut().for_each(|e| e.push(tag.clone()));
                } else {
                    expected[buffer[row] as usize].push(tag);
                }
            }
        }
        assert_eq!(metrics.rows_in, 300);
        assert_eq!(metrics.rows_out, 300 + replicated * (u64::from(n) - 1));
        for (p, bytes) in sink.into_outputs().iter().enumerate() {
            let got: Vec<String> = decode_stream(bytes)
                .unwrap()
                .1
                .iter()
                .flat_map(|b| {
                    let tags = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
                    tags.iter()
                        .map(|t| t.unwrap().to_string())
                        .collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(got, expected[p], "destination {p} ({flush:?})");
        }
    }
}

/// A batch of another schema is refused with a message naming it, and the writer goes on.
#[test]
fn a_batch_of_another_schema_is_refused() {
    let good =
        RecordBatch::try_from_iter([("k", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef)])
            .unwrap();
    let bad =
        RecordBatch::try_from_iter([("k", Arc::new(StringArray::from(vec!["x"])) as ArrayRef)])
            .unwrap();
    let mut writer = PartitionedWriter::try_new(
        good.schema(),
        Partitioning::hash(vec![0], 2),
        WriterOptions::default(),
        Encoding::default(),
        MemorySink::new(2),
    )
    .unwrap();
    writer.append(&good).unwrap();
    let err = writer.append(&bad).unwrap_err();
    assert!(
        matches!(err, WriterError::Partition(_)) && err.to_string().contains("schema"),
        "{err}"
    );
    writer.append(&good).unwrap();
    let (_, metrics) = writer.finish().unwrap();
    assert_eq!(metrics.rows_in, 6);
}

#[test]
fn impossible_setups_are_errors() {
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
    let make = |partitioning: Partitioning, options: WriterOptions| {
        PartitionedWriter::try_new(
            schema.clone(),
            partitioning,
            options,
            Encoding::default(),
            MemorySink::new(4),
        )
        .map(|_| ())
    };
    let err = make(Partitioning::hash(vec![3], 4), WriterOptions::default()).unwrap_err();
    assert!(err.to_string().contains('3'), "{err}");
    let err = make(Partitioning::hash(vec![0], 0), WriterOptions::default()).unwrap_err();
    assert!(err.to_string().contains("partition"), "{err}");
    let err = make(
        Partitioning::hash(vec![0], 4),
        WriterOptions::default().with_memory_limit(10),
    )
    .unwrap_err();
    assert!(matches!(err, WriterError::InvalidOption(_)), "{err}");
}

/// `check` finds what building a writer finds, naming the problem, and a setup it passes
/// builds under either flush.
#[test]
fn check_finds_what_building_a_writer_finds() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("tag", DataType::Utf8, true),
    ]));
    let hash = Partitioning::hash(vec![0, 1], 16);
    for flush in [Flush::AtTarget, Flush::AllAtLimit] {
        let options = WriterOptions::default().with_flush(flush);
        PartitionedWriter::check(&schema, &hash, &options).unwrap();
        PartitionedWriter::try_new(
            schema.clone(),
            hash.clone(),
            options,
            Encoding::default(),
            MemorySink::new(16),
        )
        .unwrap();
    }
    let check = |partitioning: Partitioning, options: WriterOptions| {
        let err = PartitionedWriter::check(&schema, &partitioning, &options).unwrap_err();
        let built = PartitionedWriter::try_new(
            schema.clone(),
            partitioning,
            options,
            Encoding::default(),
            MemorySink::new(16),
        );
        assert_eq!(
            built.map(|_| ()).unwrap_err().to_string(),
            err.to_string(),
            "building finds the same"
        );
        err
    };
    let err = check(Partitioning::hash(vec![2], 16), WriterOptions::default());
    assert!(
        matches!(err, WriterError::Partition(_)) && err.to_string().contains("key column 2"),
        "{err}"
    );
    let err = check(
        hash.clone(),
        WriterOptions::default().with_memory_limit(1000),
    );
    assert!(
        matches!(err, WriterError::InvalidOption(_)) && err.to_string().contains("memory_limit"),
        "{err}"
    );
    // Ids given by a string column: not partition ids.
    let err = check(Partitioning::given(1, 16), WriterOptions::default());
    assert!(
        matches!(err, WriterError::Partition(_))
            && err.to_string().contains("unsupported type Utf8"),
        "{err}"
    );
}

/// A sink that fails on its third write.
struct Failing(usize);

impl Sink for Failing {
    fn write(&mut self, _: usize, _: &[u8]) -> std::io::Result<()> {
        self.0 += 1;
        if self.0 == 3 {
            return Err(std::io::Error::other("disk full"));
        }
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_sink_stops_the_writer() {
    let batch = RecordBatch::try_from_iter([(
        "k",
        Arc::new(Int64Array::from_iter_values(0..1000)) as ArrayRef,
    )])
    .unwrap();
    let mut writer = PartitionedWriter::try_new(
        batch.schema(),
        Partitioning::hash(vec![0], 4),
        WriterOptions::default().with_target_bytes(100),
        Encoding::default(),
        Failing(0),
    )
    .unwrap();
    let err = writer.append(&batch).unwrap_err();
    let chain = error_chain(&err);
    assert!(
        chain.contains("disk full") && chain.contains("destination"),
        "{chain}"
    );
    assert!(matches!(writer.append(&batch), Err(WriterError::Failed)));
    assert!(matches!(writer.finish(), Err(WriterError::Failed)));
}

/// The file sink gets one complete stream per destination, empty destinations included.
#[test]
fn file_sink_gets_one_stream_per_destination() {
    let dir = tempfile::tempdir().unwrap();
    let batch = RecordBatch::try_from_iter([(
        "k",
        Arc::new(Int64Array::from_iter_values(0..50)) as ArrayRef,
    )])
    .unwrap();
    let ids: Vec<u32> = (0..50).map(|i| if i % 2 == 0 { 0 } else { 2 }).collect();
    let input = with_ids(&batch, &ids);
    let sink = FileSink::try_new(dir.path(), "arrows", 3).unwrap();
    let mut writer = PartitionedWriter::try_new(
        input.schema(),
        Partitioning::given(1, 3),
        WriterOptions::default(),
        Encoding::ipc(Compression::ZSTD),
        sink,
    )
    .unwrap();
    writer.append(&input).unwrap();
    let (sink, _) = writer.finish().unwrap();
    let outputs: Vec<Vec<u8>> = (0..3)
        .map(|p| std::fs::read(sink.path(p)).unwrap())
        .collect();
    check_outputs(&outputs, &[(input, ids)], 3);
    assert_eq!(decode_stream(&outputs[1]).unwrap().1.len(), 0);
}

/// The writer emitting Presto pages: each destination's file is its pages back to back, and
/// decoding them gives exactly the destination's rows, with and without LZ4.
#[test]
fn presto_pages_round_trip_through_the_writer() {
    let types: Vec<DataType> = every_type()
        .into_iter()
        .filter(|t| presto_carries(t, true))
        .collect();
    assert!(types.len() >= 15, "{types:?}");
    let mut rng = rng(99);
    for (n, compression) in [
        (1u32, Compression::None),
        (13, Compression::Lz4),
        (300, Compression::None),
    ] {
        let inputs: Vec<(RecordBatch, Vec<u32>)> = (0..3)
            .map(|k| {
                let batch = random_batch(&types, 700, 0.3, k == 1, &mut rng);
                let batch = batch
                    .project(&(1..batch.num_columns()).collect::<Vec<_>>())
                    .unwrap();
                let ids = random_ids(700, n, IdPattern::Runs(4), &mut rng);
                // Presto has no unsigned type: the ids travel as INTEGER.
                let column = Arc::new(arrow_array::Int32Array::from_iter_values(
                    ids.iter().map(|&i| i as i32),
                ));
                (with_id_column(&batch, column), ids)
            })
            .collect();
        let schema = inputs[0].0.schema();
        let options = WriterOptions::default().with_target_bytes(8 << 10);
        let presto = Encoding::presto(compression == Compression::Lz4);
        let (sink, metrics) = write_given(&inputs, n, options, presto);
        assert!(metrics.flushes >= u64::from(n.min(10)));
        let mut want: Vec<Vec<RecordBatch>> = vec![Vec::new(); n as usize];
        for (batch, ids) in &inputs {
            for (p, part) in reference_partition(batch, ids, n).into_iter().enumerate() {
                want[p].push(part);
            }
        }
        for (p, bytes) in sink.into_outputs().iter().enumerate() {
            let pages = partout_format::presto::decode_pages(bytes, &schema).unwrap();
            let got = arrow_select::concat::concat_batches(&schema, &pages).unwrap();
            let want = arrow_select::concat::concat_batches(&schema, &want[p]).unwrap();
            assert_same_rows(&got, &want, p);
        }
    }
}

#[test]
fn presto_output_refuses_what_presto_cannot_carry() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("u", DataType::UInt32, true),
    ]));
    let err = PartitionedWriter::try_new(
        schema.clone(),
        Partitioning::hash(vec![0], 4),
        WriterOptions::default(),
        Encoding::presto(false),
        MemorySink::new(4),
    )
    .unwrap_err();
    assert!(matches!(err, WriterError::Encode(_)), "{err}");
    let chain = error_chain(&err);
    assert!(
        chain.contains("\"u\"") && chain.contains("UInt32"),
        "{chain}"
    );
    let err = Encoding::try_new(partout_format::Format::Presto, Compression::ZSTD).unwrap_err();
    assert!(err.to_string().contains("ZSTD"), "{err}");
}

/// From `SLICES_FROM` destinations, an IPC output of flat columns gets each destination's rows
/// as runs of held batches, all destinations flushed together (one flush event gives most
/// destinations a message); below it, and for columns the runs encoder does not take,
/// destinations flush one by one as their buffers fill. Either way every row arrives where the
/// reference partitioner puts it, under every compression, from large and small batches.
#[test]
fn many_destinations_of_flat_columns_flush_together_from_held_runs() {
    let flat = [
        DataType::Int64,
        DataType::Utf8View,
        DataType::Utf8,
        DataType::Boolean,
    ];
    let nested = [DataType::Int64, DataType::new_list(DataType::Int32, true)];
    let slices_from = partout_exchange::SLICES_FROM as u32;
    for (types, n, together) in [
        (&flat[..], slices_from, true),
        (&flat[..], 1000, true),
        (&flat[..], slices_from - 1, false),
        (&nested[..], 1000, false),
    ] {
        for (c, compression) in COMPRESSIONS.into_iter().enumerate() {
            // Batches of a row per destination (gathered before they are laid out, in held
            // runs), then a large one and small ones.
            let mut rows = vec![n as usize; 60];
            rows.extend([20 * n as usize, 3, 100, 1]);
            let inputs = random_inputs(types, &rows, n, u64::from(n) + c as u64);
            let schema = inputs[0].0.schema();
            let options = WriterOptions::default()
                .with_target_bytes(1 << 10)
                .with_memory_limit(64 << 20);
            let mut writer = PartitionedWriter::try_new(
                schema.clone(),
                Partitioning::given(schema.fields().len() - 1, n),
                options,
                Encoding::ipc(compression),
                MemorySink::new(n as usize),
            )
            .unwrap();
            let mut first_flush = None;
            for (batch, _) in &inputs {
                writer.append(batch).unwrap();
                let flushes = writer.metrics().flushes;
                if flushes > 0 && first_flush.is_none() {
                    first_flush = Some(flushes);
                }
            }
            let first = first_flush.expect("a flush before the end");
            assert_eq!(
                first >= u64::from(n) / 2,
                together,
                "{types:?} into {n}: {first} destinations flushed at the first flush"
            );
            let (sink, metrics) = writer.finish().unwrap();
            assert_eq!(metrics.rows_out, rows.iter().sum::<usize>() as u64);
            check_outputs(&sink.into_outputs(), &inputs, n);
        }
    }
}

/// Held runs are laid out for the destinations met so far, not all there may be: batches
/// whose ids reach further and further among 20,000 (a few values, then thousands, then
/// the last destination), large and small, held together across flushes of every size, each
/// row still lands where the reference partitioner puts it.
#[test]
fn held_runs_grow_with_the_destinations_met() {
    let n = 20_000;
    let types = [DataType::Int64, DataType::Utf8View];
    let mut rng = rng(77);
    let mut inputs = Vec::new();
    for (k, (met, rows)) in [
        (3, 8192),
        (3, 100),
        (40, 8192),
        (2000, 5),
        (2000, 9000),
        (5000, 8192),
        (n, 3),
        (4, 8192),
    ]
    .into_iter()
    .enumerate()
    {
        let batch = random_batch(&types, rows, 0.2, k % 2 == 1, &mut rng);
        let pattern = match met {
            all if all == n => IdPattern::AllTo(n - 1),
            _ => IdPattern::Uniform,
        };
        let ids = random_ids(rows, met, pattern, &mut rng);
        inputs.push((with_ids(&batch, &ids), ids));
    }
    for memory_limit in [64 << 20, 256 << 10] {
        let schema = inputs[0].0.schema();
        let options = WriterOptions::default()
            .with_target_bytes(1 << 10)
            .with_memory_limit(memory_limit);
        let mut writer = PartitionedWriter::try_new(
            schema.clone(),
            Partitioning::given(schema.fields().len() - 1, n),
            options,
            Encoding::ipc(Compression::None),
            MemorySink::new(n as usize),
        )
        .unwrap();
        for (batch, _) in &inputs {
            writer.append(batch).unwrap();
        }
        let (sink, metrics) = writer.finish().unwrap();
        let rows: usize = inputs.iter().map(|(b, _)| b.num_rows()).sum();
        assert_eq!(metrics.rows_out, rows as u64);
        check_outputs(&sink.into_outputs(), &inputs, n);
    }
}

/// A batch whose view columns are compact is written the same whether the output checks them
/// (`write_batch`) or takes the writer's word for it (`Flushed::Compact`).
#[test]
fn compact_batches_are_written_alike_with_and_without_the_check() {
    use partout_exchange::{BatchSink, Encoded, Flushed};
    let mut rng = rng(61);
    let types = [DataType::Utf8View, DataType::BinaryView, DataType::Int32];
    let batch = random_batch(&types, 500, 0.2, false, &mut rng);
    // Compact, as the writer's buffers build them.
    let batch = partout_core::Partitioner::try_new(1)
        .unwrap()
        .with_compact_views()
        .partition(&batch, &vec![0; batch.num_rows()])
        .unwrap()
        .into_parts()
        .0;
    for compression in COMPRESSIONS {
        let mut output = Encoded::try_new(
            batch.schema(),
            2,
            Encoding::ipc(compression),
            MemorySink::new(2),
        )
        .unwrap();
        let checked = output.write_batch(0, &batch).unwrap();
        let trusted = output
            .write_flushed(Flushed::Compact {
                destination: 1,
                batch: &batch,
            })
            .unwrap();
        assert_eq!(checked, trusted);
        output.finish(&mut [0, 0]).unwrap();
        let outputs = output.into_sink().into_outputs();
        assert!(outputs[0] == outputs[1], "{compression:?}");
    }
}

/// A writer built for ids its caller gives writes exactly what a writer partitioning by an id
/// column writes, under either flush; it refuses `append` (and goes on taking ids), options
/// that replicate rows by their keys, and a destination count of 0.
#[test]
fn a_writer_given_ids_takes_them_and_nothing_else() {
    use partout_exchange::Encoded;
    let types = every_type();
    let output = |schema, n: u32| {
        Encoded::try_new(
            schema,
            n as usize,
            Encoding::default(),
            MemorySink::new(n as usize),
        )
        .unwrap()
    };
    for (n, flush) in [(5, Flush::AtTarget), (300, Flush::AllAtLimit)] {
        let inputs = random_inputs(&types, &[700, 0, 1200], n, u64::from(n) + 7);
        let schema = inputs[0].0.schema();
        let options = WriterOptions::default()
            .with_target_bytes(8 << 10)
            .with_memory_limit(2 << 20)
            .with_flush(flush)
            .with_seed(3);
        let (expected, _) = write_given(&inputs, n, options.clone(), Encoding::default());
        let mut writer =
            PartitionedWriter::with_given_ids(schema.clone(), n, options, output(schema, n))
                .unwrap();
        let err = writer.append(&inputs[0].0).unwrap_err();
        assert!(
            matches!(err, WriterError::Partition(_)) && err.to_string().contains("append_with_ids"),
            "{err}"
        );
        for (batch, ids) in &inputs {
            writer.append_with_ids(batch, ids).unwrap();
        }
        let (sink, metrics) = writer.finish().unwrap();
        assert_eq!(metrics.rows_in, 1900);
        let outputs = sink.into_outputs();
        assert_eq!(outputs, expected.into_outputs(), "{n} destinations");
        check_outputs(&outputs, &inputs, n);
    }
    let schema = random_inputs(&types[..2], &[10], 4, 1)[0].0.schema();
    let replicating = WriterOptions::default().with_replicate_nulls_and_any(true);
    let err = PartitionedWriter::with_given_ids(
        schema.clone(),
        4,
        replicating,
        output(schema.clone(), 4),
    )
    .unwrap_err();
    assert!(
        matches!(err, WriterError::InvalidOption(_)) && err.to_string().contains("replicated"),
        "{err}"
    );
    let err = PartitionedWriter::with_given_ids(
        schema.clone(),
        0,
        WriterOptions::default(),
        output(schema, 1),
    )
    .unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
}

/// A sink that takes a millisecond over every write.
struct Slow(MemorySink);

impl Sink for Slow {
    fn write(&mut self, destination: usize, bytes: &[u8]) -> std::io::Result<()> {
        std::thread::sleep(std::time::Duration::from_millis(1));
        self.0.write(destination, bytes)
    }
    fn finish(&mut self) -> std::io::Result<()> {
        self.0.finish()
    }
}

/// What a sink offers reaches its writer: the time an encoded output spends in its sink is
/// counted as the sink's, not the encoder's; batches a pull-side output handed on and got
/// back are taken again at the next flush.
#[test]
fn what_a_sink_offers_reaches_its_writer() {
    use partout_exchange::{Ready, Spares};
    let batch = RecordBatch::try_from_iter([(
        "k",
        Arc::new(Int64Array::from_iter_values(0..1000)) as ArrayRef,
    )])
    .unwrap();
    let on = Partitioning::hash(vec![0], 4);
    let options = WriterOptions::default().with_target_bytes(1 << 10);
    let mut writer = PartitionedWriter::try_new(
        batch.schema(),
        on.clone(),
        options.clone(),
        Encoding::default(),
        Slow(MemorySink::new(4)),
    )
    .unwrap();
    writer.append(&batch).unwrap();
    let (_, metrics) = writer.finish().unwrap();
    // Every flush writes at least once, and every destination's stream ends with a write.
    let writes = u32::try_from(metrics.flushes).unwrap() + 4;
    assert!(
        metrics.sink_time >= std::time::Duration::from_millis(writes.into()),
        "{metrics:?}"
    );

    let spares = Arc::new(Spares::new(usize::MAX));
    let mut writer = PartitionedWriter::with_output(
        batch.schema(),
        on,
        options,
        Ready::new(usize::MAX).with_spares(spares.clone()),
    )
    .unwrap();
    writer.append(&batch).unwrap();
    let mut given = 0;
    for piece in writer.drain_ready() {
        spares.give(piece.batch);
        given += 1;
    }
    assert!(given > 0 && spares.held_bytes() > 0);
    let kept = spares.held_bytes();
    writer.append(&batch).unwrap();
    assert!(spares.held_bytes() < kept, "no spare taken of {given}");
}

/// Destinations that never hold a row take no share of the memory limit: a writer over 150
/// possible destinations of which 4 are met (values not seen yet) flushes in pieces of its
/// target as a writer over those 4 does, not in slivers of `limit / 300` (150: below the
/// count from which an IPC output takes runs of held batches instead).
#[test]
fn flush_targets_are_shared_among_the_destinations_met() {
    let flushes = |n: u32| {
        let batch = RecordBatch::try_from_iter([(
            "k",
            Arc::new(Int64Array::from_iter_values(0..8192)) as ArrayRef,
        )])
        .unwrap();
        let ids: Vec<u32> = (0..8192).map(|i| i % 4).collect();
        let options = WriterOptions::default()
            .with_target_bytes(64 << 10)
            .with_memory_limit(8 << 20)
            .with_seed(5);
        let output = partout_exchange::Encoded::try_new(
            batch.schema(),
            n as usize,
            Encoding::default(),
            MemorySink::new(n as usize),
        )
        .unwrap();
        let mut writer =
            PartitionedWriter::with_given_ids(batch.schema(), n, options, output).unwrap();
        for _ in 0..100 {
            writer.append_with_ids(&batch, &ids).unwrap();
        }
        let (_, metrics) = writer.finish().unwrap();
        assert_eq!(metrics.destination_rows.iter().sum::<u64>(), 819_200);
        metrics.flushes
    };
    let (few, many) = (flushes(4), flushes(150));
    // 6.4 MiB in 64 KiB pieces: about 100 flushes either way (in 27 KiB pieces: 185).
    assert!(few <= 150, "{few}");
    assert!(
        many <= few + few / 4,
        "{many} flushes over 150 destinations, {few} over 4"
    );
}

/// `flush` hands every row appended so far to the output and the writer goes on: after each
/// batch and flush, the rows handed over equal the rows in and none are held, in every buffering mode (destinations
/// filled one batch at a time, batches merged from 512 destinations, held slices from
/// `SLICES_FROM`); at the end every row is where the reference partitioner puts it, once, in
/// input order.
#[test]
fn a_flush_hands_over_every_row_so_far_and_writing_goes_on() {
    let types = [DataType::Int64, DataType::Utf8View, DataType::Utf8];
    let slices_from = partout_exchange::SLICES_FROM as u32;
    for n in [7, 600, slices_from.max(700)] {
        let rows = [3, 1000, 1, 0, 5000, 20];
        let inputs = random_inputs(&types, &rows, n, u64::from(n));
        let schema = inputs[0].0.schema();
        let mut writer = PartitionedWriter::try_new(
            schema.clone(),
            Partitioning::given(schema.fields().len() - 1, n),
            WriterOptions::default(),
            Encoding::ipc(Compression::None),
            MemorySink::new(n as usize),
        )
        .unwrap();
        let mut appended = 0u64;
        for (batch, _) in &inputs {
            writer.append(batch).unwrap();
            writer.flush().unwrap();
            appended += batch.num_rows() as u64;
            let handed: u64 = writer.metrics().destination_rows.iter().sum();
            assert_eq!(handed, appended, "{n} destinations");
            assert_eq!(writer.held_bytes(), 0, "{n} destinations hold rows");
        }
        let (sink, metrics) = writer.finish().unwrap();
        assert_eq!(metrics.rows_out, appended);
        check_outputs(&sink.into_outputs(), &inputs, n);
    }
}

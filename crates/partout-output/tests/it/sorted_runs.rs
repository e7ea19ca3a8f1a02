//! Sorted runs: a writer holding whole batches spills them as runs, merged per destination at
//! the end. Every row comes out once, in its destination, in input order, for every type,
//! through multi-pass merges; the run files are gone afterwards, and a damaged run is an
//! error naming it.

use arrow_array::RecordBatch;
use partout_core::ids::Partitioning;
use partout_exchange::{
    BatchSink, Encoded, Flush, Flushed, MemorySink, PartitionedWriter, WriterMetrics, WriterOptions,
};
use partout_format::Encoding;
use partout_format::ipc::Compression;
use partout_output::{RunOptions, SortedRuns};
use partout_testkit::{check_ipc_outputs, error_chain, every_type, random_inputs};
use proptest::prelude::*;
use std::path::Path;

type Runs = SortedRuns<Encoded<MemorySink>>;

/// A writer that holds up to `limit` bytes and spills sorted runs into `dir`.
fn writer(
    schema: arrow_schema::SchemaRef,
    n: u32,
    limit: usize,
    dir: &Path,
    options: RunOptions,
) -> PartitionedWriter<Runs> {
    let pid = schema.fields().len() - 1;
    let output = Encoded::try_new(
        schema.clone(),
        n as usize,
        Encoding::ipc(Compression::Lz4),
        MemorySink::new(n as usize),
    )
    .unwrap();
    let runs = SortedRuns::new(output, schema.clone(), n as usize, dir, "t", options);
    let options = WriterOptions::default()
        .with_target_bytes(limit.min(4096))
        .with_memory_limit(limit)
        .with_flush(Flush::AllAtLimit);
    PartitionedWriter::with_output(schema, Partitioning::given(pid, n), options, runs).unwrap()
}

/// Writes `inputs` through sorted runs and checks every destination's output, the metrics,
/// and that no run file is left. Returns the runs spilled.
fn round_trip(
    inputs: &[(RecordBatch, Vec<u32>)],
    n: u32,
    limit: usize,
    options: RunOptions,
) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(inputs[0].0.schema(), n, limit, dir.path(), options);
    for (batch, _) in inputs {
        writer
            .append(batch)
            .unwrap_or_else(|e| panic!("{}", error_chain(&e)));
        assert!(
            writer.held_bytes() <= limit + batch.get_array_memory_size() + 4 * batch.num_rows(),
            "{} bytes held over a limit of {limit}",
            writer.held_bytes()
        );
    }
    let (runs, metrics): (Runs, WriterMetrics) = writer
        .finish_output()
        .unwrap_or_else(|e| panic!("{}", error_chain(&e)));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "run files left behind"
    );
    let spilled = metrics.memory_flushes + 1;
    let sink = runs.output().sink();
    assert!(sink.is_finished());
    let outputs: Vec<Vec<u8>> = (0..n as usize).map(|p| sink.output(p)).collect();
    for (p, output) in outputs.iter().enumerate() {
        assert_eq!(metrics.destination_bytes[p], output.len() as u64, "{p}");
    }
    assert_eq!(
        metrics.bytes_out,
        outputs.iter().map(|o| o.len() as u64).sum::<u64>()
    );
    check_ipc_outputs(&outputs, inputs, n);
    spilled
}

#[test]
fn every_type_comes_out_once_in_order_through_multi_pass_merges() {
    // Chunks of 1 KiB and room for two at a time: every merge of more than two runs goes
    // through intermediate runs.
    let tight = RunOptions {
        chunk_bytes: 1 << 10,
        merge_bytes: 2 << 10,
        message_bytes: 2 << 10,
    };
    for (i, data_type) in every_type().into_iter().enumerate() {
        let n = [1, 7, 300][i % 3];
        let inputs = random_inputs(
            std::slice::from_ref(&data_type),
            &[300, 0, 500, 1, 200],
            n,
            i as u64,
        );
        // A limit of 1 KiB: every batch of 256 rows or more is spilled as it comes.
        let spilled = round_trip(&inputs, n, 1 << 10, tight);
        assert!(spilled >= 3, "{data_type}: {spilled} runs");
    }
}

#[test]
fn all_types_together_at_high_fan_out() {
    let types = every_type();
    let inputs = random_inputs(&types, &[1000, 2000, 10, 1500], 3000, 7);
    let spilled = round_trip(&inputs, 3000, 256 << 10, RunOptions::within(256 << 10));
    assert!(spilled > 3, "{spilled} runs");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_runs_merge_to_what_the_oracle_gives(
        type_picks in prop::collection::vec(0usize..64, 1..4),
        n in 1u32..=500,
        rows in prop::collection::vec(0usize..800, 1..6),
        limit in 2048usize..100_000,
        chunk in 256usize..20_000,
        merge in 0usize..40_000,
        message in 1usize..20_000,
        seed in any::<u64>(),
    ) {
        let all = every_type();
        let types: Vec<_> = type_picks.iter().map(|&i| all[i % all.len()].clone()).collect();
        let inputs = random_inputs(&types, &rows, n, seed);
        let options = RunOptions { chunk_bytes: chunk, merge_bytes: merge, message_bytes: message };
        round_trip(&inputs, n, limit, options);
    }
}

/// Spills two runs of `n` destinations by hand into `dir`.
fn two_runs(dir: &Path, n: u32) -> Runs {
    let inputs = random_inputs(&every_type()[..3], &[200, 300], n, 3);
    let schema = inputs[0].0.schema();
    let output = Encoded::try_new(
        schema.clone(),
        n as usize,
        Encoding::default(),
        MemorySink::new(n as usize),
    )
    .unwrap();
    let tiny = RunOptions {
        chunk_bytes: 512,
        merge_bytes: 1 << 20,
        message_bytes: 1 << 10,
    };
    let mut runs = SortedRuns::new(output, schema, n as usize, dir, "d", tiny);
    for (batch, ids) in &inputs {
        let mut order: Vec<u32> = (0..batch.num_rows() as u32).collect();
        order.sort_by_key(|&r| ids[r as usize]);
        let sorted =
            arrow_select::take::take_record_batch(batch, &arrow_array::UInt32Array::from(order))
                .unwrap();
        let mut counts = vec![0usize; n as usize];
        ids.iter().for_each(|&id| counts[id as usize] += 1);
        let spans: Vec<(usize, usize)> = counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(p, &c)| (p, c))
            .collect();
        runs.write_flushed(Flushed::Sorted {
            batch: &sorted,
            runs: &spans,
            destination_bytes: &mut vec![0; n as usize],
        })
        .unwrap();
        runs.write_flushed(Flushed::EndOfRound).unwrap();
    }
    assert_eq!(runs.runs(), 2);
    runs
}

fn run_files(dir: &Path, extension: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

#[test]
fn a_damaged_run_is_an_error_naming_it_and_nothing_is_left() {
    for damage in [
        "truncated data",
        "extra data",
        "truncated counts",
        "counts moved",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = two_runs(dir.path(), 20);
        let data = run_files(dir.path(), "arrows");
        let counts = run_files(dir.path(), "rows");
        assert_eq!((data.len(), counts.len()), (2, 2));
        // One run's two files, whichever it is: its data and the counts beside it.
        let counts = [counts[0].clone(), data[1].with_extension("rows")];
        let bytes = std::fs::read(&data[1]).unwrap();
        let rows = std::fs::read(&counts[1]).unwrap();
        match damage {
            "truncated data" => std::fs::write(&data[1], &bytes[..bytes.len() / 2]).unwrap(),
            "extra data" => {
                let first = std::fs::read(&data[0]).unwrap();
                std::fs::write(&data[1], first).unwrap();
            }
            "truncated counts" => std::fs::write(&counts[1], &rows[..rows.len() - 3]).unwrap(),
            _ => {
                // Every row counted as the first destination's, then a destination with more
                // rows than the run holds.
                let mut moved = rows.clone();
                moved[..8].copy_from_slice(&u64::MAX.to_le_bytes());
                std::fs::write(&counts[1], moved).unwrap();
            }
        }
        let err = error_chain(&runs.finish(&mut [0; 20]).expect_err(damage));
        let name = data[1].file_name().unwrap().to_string_lossy().into_owned();
        assert!(err.contains(&name), "{damage}: {err}");
        drop(runs);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{damage}: files left"
        );
    }
}

#[test]
fn abandoned_runs_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let runs = two_runs(dir.path(), 5);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
    drop(runs);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn rows_out_of_destination_order_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = two_runs(dir.path(), 5);
    let batch = random_inputs(&every_type()[..3], &[4], 5, 9).remove(0).0;
    runs.write_batch(3, &batch.slice(0, 2)).unwrap();
    let err = error_chain(&runs.write_batch(1, &batch.slice(2, 2)).unwrap_err());
    assert!(err.contains("destination 1"), "{err}");
    let err = error_chain(
        &runs
            .write_flushed(Flushed::Sorted {
                batch: &batch,
                runs: &[(4, 1), (2, 3)],
                destination_bytes: &mut [0; 5],
            })
            .unwrap_err(),
    );
    assert!(err.contains("destination 2"), "{err}");
    let err = error_chain(
        &runs
            .write_flushed(Flushed::Sorted {
                batch: &batch,
                runs: &[(4, 3)],
                destination_bytes: &mut [0; 5],
            })
            .unwrap_err(),
    );
    assert!(err.contains("4 rows"), "{err}");
    let err = error_chain(&runs.write_batch(9, &batch).unwrap_err());
    assert!(err.contains('9'), "{err}");
}

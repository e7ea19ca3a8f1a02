//! A live exchange's memory, measured from outside it: a global counting allocator sees every
//! byte the process holds while partout's writers feed an exchange whose one stalled
//! destination would hold many budgets. One test in this binary, so nothing else allocates
//! beside it.

mod common;
#[path = "../../partout-exchange/tests/counting/mod.rs"]
mod counting;

use arrow_array::RecordBatch;
use futures::executor::block_on;
use partout_core::ids::Partitioning;
use partout_exchange::WriterOptions;
use partout_flight::{LiveExchange, LiveOptions};

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// Bytes each reader asks for at once.
const FETCH_BYTES: usize = 64 << 10;

/// Reads destination `p` to its end, acknowledging each fetch: its rows.
fn drain(live: &LiveExchange, p: u32) -> u64 {
    let (mut from, mut rows) = (0, 0);
    loop {
        let fetched = block_on(live.fetch(p, from, FETCH_BYTES, None)).unwrap();
        rows += fetched.messages.iter().map(|m| m.rows()).sum::<u64>();
        from = fetched.next;
        live.ack(p, from).unwrap();
        if fetched.complete {
            return rows;
        }
    }
}

#[test]
fn a_stalled_destination_holds_the_process_within_the_budget() {
    let (partitions, producers, batches, rows) = (4u32, 2usize, 120usize, 2_000usize);
    let budget = 256 << 10;
    let writer_limit = 256 << 10;
    let dir = tempfile::tempdir().unwrap();
    let live = LiveExchange::try_new(
        None,
        LiveOptions::new(partitions, producers)
            .with_budget(budget)
            .with_spill_dir(dir.path()),
    )
    .unwrap();
    // The inputs exist before the count starts: only what the exchange, its writers and
    // readers hold is measured.
    let inputs: Vec<Vec<RecordBatch>> = (0..producers)
        .map(|k| {
            (0..batches)
                .map(|i| common::batch(rows, (k * batches + i) as u64))
                .collect()
        })
        .collect();
    let input_bytes: usize = inputs
        .iter()
        .flatten()
        .map(RecordBatch::get_array_memory_size)
        .sum();
    // The stalled destination alone receives about a quarter of the input: many budgets.
    assert!(
        input_bytes / 4 > 10 * budget,
        "{input_bytes} bytes of input"
    );
    let base = counting::start();
    let writers: Vec<_> = inputs
        .into_iter()
        .map(|batches| {
            let live = live.clone();
            std::thread::spawn(move || {
                let options = WriterOptions::default()
                    .with_target_bytes(16 << 10)
                    .with_memory_limit(writer_limit);
                let partitioning = Partitioning::hash(vec![0], partitions);
                let mut writer = live
                    .writer(batches[0].schema(), partitioning, options)
                    .unwrap();
                for batch in &batches {
                    writer.append(batch).unwrap();
                }
                writer.finish_output().unwrap();
            })
        })
        .collect();
    // Destinations 0 to 2 are drained as they fill; destination 3 is not read until every
    // producer has finished.
    let readers: Vec<_> = (0..partitions - 1)
        .map(|p| {
            let live = live.clone();
            std::thread::spawn(move || drain(&live, p))
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let drained: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let peak = counting::peak_since(base);
    let last = drain(&live, partitions - 1);
    assert_eq!(drained + last, (producers * batches * rows) as u64);
    let metrics = live.metrics();
    // Beside the budget: each producer's writer within its limit (buffers grow to twice what
    // they hold), each reader's fetch, and a spill write's encoded copy per producer.
    let allowance = budget + producers * 2 * writer_limit + 3 * FETCH_BYTES + (512 << 10);
    assert!(
        peak <= allowance as i64,
        "{peak} bytes at the peak for a budget of {budget} (allowed {allowance}; the stalled \
         destination received about {} bytes): {metrics:?}",
        input_bytes / 4
    );
    // The exchange held the stalled destination's rows on disk, not in memory.
    assert!(metrics.spill.spill_count > 0, "{metrics:?}");
}

//! The bounded exchange's memory, measured from outside it: a global counting allocator sees
//! every byte the process holds while producers fill a budget that one stalled output would
//! pass many times over. One test in this binary, so nothing else allocates beside it.

mod counting;
mod rows;

use futures::executor::block_on;
use partout_exchange::{BoundedExchange, BoundedOptions, Item, SpillTarget};
use rows::Rows;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const ROWS: i64 = 8192;

fn batch(producer: usize, k: usize) -> Rows {
    rows::numbered(producer, k, ROWS)
}

#[test]
fn a_stalled_output_holds_the_process_within_the_budget() {
    let item = batch(0, 0).bytes();
    let (outputs, producers, batches) = (4, 2, 400);
    let budget = 8 * item;
    // The stalled output alone receives 25 times the budget's worth.
    assert_eq!(producers * batches / outputs, 25 * budget / item);
    let options = BoundedOptions::new(outputs, producers, budget)
        .with_spill(SpillTarget::in_dir(std::env::temp_dir()));
    let ex = Arc::new(BoundedExchange::try_new(options).unwrap());
    let base = counting::start();
    let handles: Vec<_> = (0..producers)
        .map(|i| {
            let ex = ex.clone();
            std::thread::spawn(move || {
                for k in 0..batches {
                    ex.push(k % outputs, batch(i, k)).unwrap();
                }
                ex.producer_finished();
            })
        })
        .collect();
    // Outputs 0 to 2 are drained as they fill; output 3 is not read until the end.
    let readers: Vec<_> = (0..outputs - 1)
        .map(|p| {
            let ex = ex.clone();
            std::thread::spawn(move || {
                let mut rows = 0;
                while let Some(item) = block_on(ex.take(p)).unwrap() {
                    rows += item.0.num_rows();
                }
                rows
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let drained: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let peak = counting::peak_since(base);
    let mut last = 0;
    while let Some(item) = block_on(ex.take(outputs - 1)).unwrap() {
        last += item.0.num_rows();
    }
    let total = producers * batches * ROWS as usize;
    assert_eq!(drained + last, total);
    assert_eq!(last, total / outputs);
    // Beside the budget: the batch each producer is making and pushing, the batch each
    // reader holds, and a spill write's encoded copy per producer.
    let allowance = budget + (2 * producers + outputs) * item + (1 << 20);
    assert!(
        peak <= allowance as i64,
        "{peak} bytes at the peak for a budget of {budget} (allowed {allowance}): {:?}",
        ex.metrics()
    );
    assert!(ex.metrics().spill.spill_count > 0);
}

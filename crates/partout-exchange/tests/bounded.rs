//! The bounded exchange with real threads and real spill files: outputs read in any order
//! complete, every row arrives once, errors reach everyone, and spilled batches of every
//! Arrow type come back equal.

mod rows;

use arrow_array::{Array, Int64Array};
use futures::executor::block_on;
use partout_exchange::{
    BoundedExchange, BoundedOptions, ExchangeError, Item, SpillTarget, spill_batch, unspill_batch,
};
use rows::Rows;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

const ROWS: i64 = 4096;

/// Producer `producer`'s `k`th batch: values unique over every producer and batch.
fn batch(producer: usize, k: usize) -> Rows {
    rows::numbered(producer, k, ROWS)
}

/// Where producer `producer`'s `k`th batch goes: skewed, so that outputs fill unevenly.
fn destination(producer: usize, k: usize, outputs: usize) -> usize {
    (k * 7 + producer + k / 3) % outputs
}

/// Every value each output should get, sorted.
fn expected(producers: usize, batches: usize, outputs: usize) -> Vec<Vec<i64>> {
    let mut want = vec![Vec::new(); outputs];
    for i in 0..producers {
        for k in 0..batches {
            let b = batch(i, k);
            let values = b.0.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            want[destination(i, k, outputs)].extend(values.values().iter().copied());
        }
    }
    for w in &mut want {
        w.sort_unstable();
    }
    want
}

fn values(items: &[Rows]) -> Vec<i64> {
    let mut all: Vec<i64> = items
        .iter()
        .flat_map(|r| {
            let a = r.0.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            a.values().to_vec()
        })
        .collect();
    all.sort_unstable();
    all
}

fn spawn_producers(
    exchange: &Arc<BoundedExchange<Rows>>,
    producers: usize,
    batches: usize,
) -> Vec<std::thread::JoinHandle<Result<(), ExchangeError>>> {
    (0..producers)
        .map(|i| {
            let exchange = exchange.clone();
            std::thread::spawn(move || {
                for k in 0..batches {
                    exchange.push(destination(i, k, exchange.outputs()), batch(i, k))?;
                }
                exchange.producer_finished();
                Ok(())
            })
        })
        .collect()
}

/// Every item of output `p`, taken (and acknowledged) one by one.
fn drain(exchange: &BoundedExchange<Rows>, p: usize) -> Result<Vec<Rows>, ExchangeError> {
    let mut items = Vec::new();
    while let Some(item) = block_on(exchange.take(p))? {
        items.push(item);
    }
    Ok(items)
}

/// Runs `f` on a thread and fails the test if it has not finished within a minute.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}: no progress for 60 s"))
}

fn exchange(
    outputs: usize,
    producers: usize,
    budget: usize,
    spill: bool,
) -> Arc<BoundedExchange<Rows>> {
    let mut options = BoundedOptions::new(outputs, producers, budget);
    if spill {
        options = options.with_spill(SpillTarget::in_dir(std::env::temp_dir()));
    }
    Arc::new(BoundedExchange::try_new(options).unwrap())
}

#[test]
fn outputs_read_one_after_another_complete_with_every_row_once() {
    let (outputs, producers, batches) = (4, 2, 60);
    let budget = 4 * batch(0, 0).bytes();
    let ex = exchange(outputs, producers, budget, true);
    let handles = spawn_producers(&ex, producers, batches);
    let reader = ex.clone();
    let got = bounded("reading outputs in order", move || {
        (0..outputs)
            .map(|p| drain(&reader, p).unwrap())
            .collect::<Vec<_>>()
    });
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let want = expected(producers, batches, outputs);
    for p in 0..outputs {
        assert_eq!(values(&got[p]), want[p], "output {p}");
    }
    let metrics = ex.metrics();
    assert!(metrics.spill.spill_count > 0, "{metrics:?}");
    assert_eq!(
        metrics.spill.read_count, metrics.spill.spill_count,
        "{metrics:?}"
    );
    assert!(metrics.peak_held_bytes <= budget, "{metrics:?}");
    assert_eq!(metrics.held_bytes, 0);
}

#[test]
fn a_stalled_output_reads_every_row_after_the_others_finish() {
    let (outputs, producers, batches) = (4, 2, 60);
    let budget = 4 * batch(0, 0).bytes();
    let ex = exchange(outputs, producers, budget, true);
    let handles = spawn_producers(&ex, producers, batches);
    let others: Vec<_> = (0..outputs - 1)
        .map(|p| {
            let ex = ex.clone();
            std::thread::spawn(move || drain(&ex, p).unwrap())
        })
        .collect();
    let got: Vec<Vec<Rows>> = bounded("the other outputs", move || {
        others.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let last = drain(&ex, outputs - 1).unwrap();
    let want = expected(producers, batches, outputs);
    for p in 0..outputs - 1 {
        assert_eq!(values(&got[p]), want[p], "output {p}");
    }
    assert_eq!(values(&last), want[outputs - 1]);
    let metrics = ex.metrics();
    assert!(metrics.peak_held_bytes <= budget, "{metrics:?}");
    assert!(metrics.spill.spilled_bytes > 0, "{metrics:?}");
}

#[test]
fn without_a_spill_file_an_order_that_needs_one_is_resources_exhausted() {
    let (outputs, producers, batches) = (4, 2, 60);
    let ex = exchange(outputs, producers, 2 * batch(0, 0).bytes(), false);
    let handles = spawn_producers(&ex, producers, batches);
    let reader = ex.clone();
    let result = bounded("reading outputs in order", move || {
        (0..outputs).try_for_each(|p| drain(&reader, p).map(drop))
    });
    let err = result.unwrap_err();
    assert!(matches!(err, ExchangeError::ResourcesExhausted(_)), "{err}");
    assert!(err.to_string().contains("no disk to spill to"), "{err}");
    for h in handles {
        assert!(h.join().unwrap().is_err());
    }
}

#[test]
fn past_the_spill_limit_is_resources_exhausted_for_everyone() {
    let item = batch(0, 0).bytes();
    let options = BoundedOptions::new(4, 2, 2 * item)
        .with_spill(SpillTarget::in_dir(std::env::temp_dir()).with_limit(3 * item as u64));
    let ex = Arc::new(BoundedExchange::try_new(options).unwrap());
    let handles = spawn_producers(&ex, 2, 60);
    let reader = ex.clone();
    let err = bounded("reading outputs in order", move || {
        (0..4).try_for_each(|p| drain(&reader, p).map(drop))
    })
    .unwrap_err();
    assert!(err.to_string().contains("spill limit"), "{err}");
    for h in handles {
        let _ = h.join().unwrap();
    }
}

#[test]
fn a_producer_failure_reaches_every_waiting_consumer() {
    let ex = exchange(3, 2, 1 << 20, true);
    let waiting: Vec<_> = (0..3)
        .map(|p| {
            let ex = ex.clone();
            std::thread::spawn(move || drain(&ex, p))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    ex.push(1, batch(0, 0)).unwrap();
    ex.fail(Arc::new(std::io::Error::other("input 7 broke")));
    for w in waiting {
        let err = bounded("a waiting consumer", move || w.join().unwrap()).unwrap_err();
        assert!(err.report().contains("input 7 broke"), "{err}");
    }
    assert!(ex.push(0, batch(0, 1)).is_err());
    assert_eq!(ex.metrics().held_bytes, 0);
}

#[test]
fn closing_outputs_frees_them_and_lets_producers_stop() {
    let ex = exchange(2, 1, 1 << 20, true);
    ex.push(0, batch(0, 0)).unwrap();
    ex.push(1, batch(0, 1)).unwrap();
    assert!(!ex.close(0).unwrap());
    assert_eq!(ex.metrics().held_bytes, batch(0, 1).bytes());
    // Items for a closed output are let go, but counted.
    ex.push(0, batch(0, 2)).unwrap();
    assert_eq!(ex.status(0).unwrap().rows, 2 * ROWS as u64);
    assert!(ex.close(1).unwrap());
    assert_eq!(ex.metrics().held_bytes, 0);
    assert!(ex.all_closed());
}

#[test]
fn sequences_are_kept_until_acknowledged_and_freed_after() {
    let ex = exchange(1, 1, 1 << 20, true);
    for k in 0..3 {
        ex.push(0, batch(0, k)).unwrap();
    }
    let first = ex.try_fetch(0, 0, 1).unwrap();
    assert_eq!(
        (first.items.len(), first.next, first.complete),
        (1, 1, false)
    );
    // Asked again, the same item (a retry).
    let again = ex.try_fetch(0, 0, usize::MAX).unwrap();
    assert_eq!((again.items.len(), again.next), (3, 3));
    assert_eq!(values(&again.items[..1]), values(&first.items));
    assert_eq!(
        ex.remaining_bytes(0, 1).unwrap(),
        2 * batch(0, 0).bytes() as u64
    );
    ex.ack(0, 2).unwrap();
    let err = ex.try_fetch(0, 1, 1).unwrap_err();
    assert!(matches!(err, ExchangeError::Freed(_)), "{err}");
    assert!(matches!(
        ex.ack(0, 9),
        Err(ExchangeError::InvalidArgument(_))
    ));
    ex.producer_finished();
    let last = ex.try_fetch(0, 2, usize::MAX).unwrap();
    assert_eq!((last.items.len(), last.next, last.complete), (1, 3, true));
    assert!(matches!(
        ex.try_fetch(5, 0, 1),
        Err(ExchangeError::NotFound(_))
    ));
}

#[test]
fn cancelling_ends_waits_and_frees_the_queues() {
    let ex = exchange(2, 1, batch(0, 0).bytes(), true);
    ex.push(1, batch(0, 0)).unwrap();
    let consumer = {
        let ex = ex.clone();
        std::thread::spawn(move || block_on(ex.fetch(0, 0, 1)))
    };
    std::thread::sleep(Duration::from_millis(50));
    ex.cancel("the query was cancelled");
    let err = bounded("a waiting consumer", move || consumer.join().unwrap()).unwrap_err();
    assert!(matches!(err, ExchangeError::Cancelled(_)), "{err}");
    assert_eq!(ex.metrics().held_bytes, 0);
}

#[test]
fn spilled_batches_of_every_type_come_back_equal() {
    let types = partout_testkit::every_type();
    let mut rng = partout_testkit::rng(7);
    for sliced in [false, true] {
        let original = partout_testkit::random_batch(&types, 97, 0.2, sliced, &mut rng);
        let mut bytes = Vec::new();
        spill_batch(&original, &mut bytes).unwrap();
        let back = unspill_batch(&bytes).unwrap();
        assert_eq!(back.schema(), original.schema());
        for (a, b) in back.columns().iter().zip(original.columns()) {
            assert_eq!(a.to_data(), b.to_data(), "{}", a.data_type());
        }
    }
    // Bytes that are not one batch's stream are an error, not a panic.
    let err = unspill_batch(&[0xff; 16]).unwrap_err();
    assert!(matches!(err, ExchangeError::Spill(_)), "{err}");
}

#[test]
fn consumers_that_are_only_slow_hold_producers_back_without_spilling() {
    let (outputs, producers, batches) = (4, 2, 60);
    let budget = 4 * batch(0, 0).bytes();
    // A patience far beyond any consumer's pause: room always comes first.
    let options = BoundedOptions::new(outputs, producers, budget)
        .with_spill(SpillTarget::in_dir(std::env::temp_dir()))
        .with_patience(Duration::from_secs(30));
    let ex = Arc::new(BoundedExchange::try_new(options).unwrap());
    // Every consumer has asked before the producers start (threads start in no set order):
    // none of their outputs is one nobody asked for.
    for p in 0..outputs {
        assert!(ex.try_fetch(p, 0, 1).unwrap().items.is_empty());
    }
    let readers: Vec<_> = (0..outputs)
        .map(|p| {
            let ex = ex.clone();
            std::thread::spawn(move || {
                let mut items = Vec::new();
                while let Some(item) = block_on(ex.take(p)).unwrap() {
                    items.push(item);
                    std::thread::sleep(Duration::from_millis(1));
                }
                items
            })
        })
        .collect();
    let handles = spawn_producers(&ex, producers, batches);
    let got: Vec<Vec<Rows>> = bounded("slow consumers", move || {
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let want = expected(producers, batches, outputs);
    for p in 0..outputs {
        assert_eq!(values(&got[p]), want[p], "output {p}");
    }
    let metrics = ex.metrics();
    assert_eq!(metrics.spill.spill_count, 0, "{metrics:?}");
    assert!(metrics.peak_held_bytes <= budget, "{metrics:?}");
}

#[test]
fn a_consumer_that_stops_after_asking_is_waited_for_only_its_patience() {
    let (outputs, producers, batches) = (4, 2, 60);
    let budget = 4 * batch(0, 0).bytes();
    let options = BoundedOptions::new(outputs, producers, budget)
        .with_spill(SpillTarget::in_dir(std::env::temp_dir()))
        .with_patience(Duration::from_millis(20));
    let ex = Arc::new(BoundedExchange::try_new(options).unwrap());
    // Output 0 is asked for once, then left until the others have finished.
    assert!(ex.try_fetch(0, 0, 1).unwrap().items.is_empty());
    let handles = spawn_producers(&ex, producers, batches);
    let others: Vec<_> = (1..outputs)
        .map(|p| {
            let ex = ex.clone();
            std::thread::spawn(move || drain(&ex, p).unwrap())
        })
        .collect();
    let got: Vec<Vec<Rows>> = bounded("the other outputs", move || {
        others.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let first = drain(&ex, 0).unwrap();
    let want = expected(producers, batches, outputs);
    assert_eq!(values(&first), want[0]);
    for p in 1..outputs {
        assert_eq!(values(&got[p - 1]), want[p], "output {p}");
    }
    let metrics = ex.metrics();
    assert!(metrics.spill.spill_count > 0, "{metrics:?}");
    assert!(metrics.peak_held_bytes <= budget, "{metrics:?}");
}

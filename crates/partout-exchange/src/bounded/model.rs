//! Every interleaving of a small exchange's steps, walked exhaustively over the exchange's own
//! state machine (`state.rs`): producers push scripted items, consumers read outputs in a
//! scripted order (one after another, or closing some), and an actor that would wait is
//! runnable again only after a wake-up the state machine asked for since it began to wait,
//! as with the listener taken before the check in `mod.rs`.
//!
//! At every end of every interleaving: no actor waits forever (a state where every live
//! actor waits is a lost wake-up or a stuck exchange, reported with its trace), memory stayed
//! within the budget, and every consumer got each item of its outputs exactly once, in each
//! producer's order, or every actor got the exchange's error.

use super::ExchangeError;
use super::state::{Found, Offer, State, Stored, Wake};
use std::collections::HashSet;

/// An item: (producer, index).
type It = (usize, usize);

const ITEM: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Wait {
    No,
    /// Waiting for room; whether a wake-up came since.
    Room(bool),
    /// Waiting on an output; whether a wake-up came since.
    Output(usize, bool),
}

#[derive(Debug, Clone)]
struct Producer {
    /// (output, item) to push, in order.
    script: Vec<usize>,
    next: usize,
    /// An item decided to spill, written (outside the lock) by the next step.
    spilling: bool,
    /// A queued item (output, sequence, item) being written to make room, by the next step.
    evicting: Option<(usize, u64, It)>,
    /// Its wait for room ran out of patience.
    expired: bool,
    /// Fails instead of finishing.
    fails: bool,
    wait: Wait,
    done: bool,
}

#[derive(Debug, Clone)]
struct Consumer {
    /// Outputs read to their end in this order; negative: closed without reading.
    script: Vec<(usize, bool)>,
    at: usize,
    from: u64,
    got: Vec<(usize, It)>,
    wait: Wait,
    done: bool,
    error: bool,
}

#[derive(Debug, Clone)]
struct World {
    state: State<It>,
    producers: Vec<Producer>,
    consumers: Vec<Consumer>,
    budget: usize,
    trace: Vec<String>,
}

impl World {
    fn apply(&mut self, wake: Wake) {
        for producer in &mut self.producers {
            if let Wait::Room(woken) = &mut producer.wait {
                *woken |= wake.room;
            }
        }
        for consumer in &mut self.consumers {
            if let Wait::Output(p, woken) = &mut consumer.wait {
                *woken |= wake.all_outputs || wake.output == Some(*p);
            }
        }
    }

    /// The world without its trace, for telling states apart.
    fn key(&self) -> String {
        format!("{:?}{:?}{:?}", self.state, self.producers, self.consumers)
    }

    fn runnable(&self, actor: usize) -> bool {
        let (wait, done) = match actor.checked_sub(self.producers.len()) {
            None => (&self.producers[actor].wait, self.producers[actor].done),
            Some(c) => (&self.consumers[c].wait, self.consumers[c].done),
        };
        // A producer waiting for room while a consumer starves runs out of patience at some
        // point: it may run again whenever that holds.
        let patience = actor < self.producers.len() && self.state.any_starving();
        !done
            && match wait {
                Wait::No => true,
                Wait::Room(woken) => *woken || patience,
                Wait::Output(_, woken) => *woken,
            }
    }

    fn step_producer(&mut self, i: usize) {
        let producer = &mut self.producers[i];
        if let Wait::Room(woken) = producer.wait {
            producer.wait = Wait::No;
            producer.expired = !woken;
        }
        if producer.next == producer.script.len() {
            producer.done = true;
            let wake = match producer.fails {
                true => self
                    .state
                    .end(ExchangeError::Cancelled(format!("producer {i}"))),
                false => self.state.producer_finished(),
            };
            self.trace.push(format!("p{i} finishes"));
            self.apply(wake);
            return;
        }
        let p = producer.script[producer.next];
        let item = (i, producer.next);
        if let Some((q, sequence, victim)) = producer.evicting.take() {
            let offset = (victim.0 * 1000 + victim.1) as u64;
            let at = super::state::Spilled { offset, len: 0 };
            let wake = self.state.evicted(q, sequence, at);
            self.trace.push(format!("p{i} evicted {victim:?} of {q}"));
            self.apply(wake);
            return;
        }
        if producer.spilling {
            producer.spilling = false;
            producer.next += 1;
            // The spill file's place stands for the item in the model.
            let offset = (item.0 * 1000 + item.1) as u64;
            let stored = Stored::Spilled(super::state::Spilled { offset, len: 0 });
            let (_, wake) = self.state.enqueue(p, stored, ITEM, 1);
            self.trace
                .push(format!("p{i} queues spilled {item:?} on {p}"));
            self.apply(wake);
            return;
        }
        let expired = std::mem::take(&mut self.producers[i].expired);
        match self.state.offer(p, ITEM, expired) {
            Err(e) => {
                self.producers[i].done = true;
                self.trace.push(format!("p{i} gets {e}"));
                let wake = self.state.end(e);
                self.apply(wake);
            }
            Ok(Offer::Dropped) => {
                self.state.let_go(p, ITEM, 1);
                self.producers[i].next += 1;
                self.trace.push(format!("p{i} lets {item:?} go"));
            }
            Ok(Offer::Memory) => {
                self.producers[i].next += 1;
                let (_, wake) = self.state.enqueue(p, Stored::Memory(item), ITEM, 1);
                self.trace.push(format!("p{i} queues {item:?} on {p}"));
                self.apply(wake);
            }
            Ok(Offer::Spill) => {
                self.producers[i].spilling = true;
                self.trace.push(format!("p{i} spills {item:?}"));
            }
            Ok(Offer::Evict {
                output,
                sequence,
                item: victim,
            }) => {
                self.producers[i].evicting = Some((output, sequence, victim));
                self.trace
                    .push(format!("p{i} evicts {victim:?} of {output}"));
            }
            Ok(Offer::Wait(_)) => {
                self.producers[i].wait = Wait::Room(false);
                self.trace.push(format!("p{i} waits for room"));
            }
        }
    }

    fn step_consumer(&mut self, c: usize) {
        if let Wait::Output(p, _) = self.consumers[c].wait {
            self.consumers[c].wait = Wait::No;
            self.state.wait_ends(p);
        }
        let consumer = &self.consumers[c];
        let Some(&(p, read)) = consumer.script.get(consumer.at) else {
            self.consumers[c].done = true;
            return;
        };
        if !read {
            let wake = self.state.close(p);
            self.trace.push(format!("c{c} closes {p}"));
            self.apply(wake);
            self.consumers[c].at += 1;
            return;
        }
        let from = consumer.from;
        self.state.polled(p);
        match self.state.find(p, from) {
            Err(e) => {
                self.trace.push(format!("c{c} gets {e}"));
                self.consumers[c].error = true;
                self.consumers[c].done = true;
            }
            Ok(Found::Item(stored)) => {
                let item = match stored {
                    Stored::Memory(item) => item,
                    Stored::Spilled(at) => {
                        ((at.offset / 1000) as usize, (at.offset % 1000) as usize)
                    }
                };
                self.consumers[c].got.push((p, item));
                self.consumers[c].from += 1;
                let wake = self.state.ack(p, from + 1).expect("an item just found");
                self.trace.push(format!("c{c} takes {item:?} from {p}"));
                self.apply(wake);
            }
            Ok(Found::End) => {
                self.trace.push(format!("c{c} ends {p}"));
                let consumer = &mut self.consumers[c];
                consumer.at += 1;
                consumer.from = 0;
            }
            Ok(Found::Empty) => {
                self.consumers[c].wait = Wait::Output(p, false);
                let wake = self.state.wait_begins(p, from);
                self.trace.push(format!("c{c} waits on {p}"));
                self.apply(wake);
            }
        }
    }

    fn step(&mut self, actor: usize) {
        match actor.checked_sub(self.producers.len()) {
            None => self.step_producer(actor),
            Some(c) => self.step_consumer(c),
        }
        self.state.check_counts();
        let held = self.state.held();
        assert!(
            held <= self.budget.max(ITEM),
            "{held} bytes held past the budget of {}: {:#?}",
            self.budget,
            self.trace
        );
    }

    /// Checks a finished interleaving: true when every row arrived, false when it ended in
    /// an error.
    fn check_end(&self, spills: bool) -> bool {
        let failed =
            self.producers.iter().any(|p| p.fails) || self.consumers.iter().any(|c| c.error);
        if failed {
            assert!(
                !spills || self.producers.iter().any(|p| p.fails),
                "an error with a spill file and no failing producer: {:#?}",
                self.trace
            );
            return false;
        }
        for consumer in &self.consumers {
            for &(p, read) in &consumer.script {
                if !read {
                    continue;
                }
                let got: Vec<It> = consumer
                    .got
                    .iter()
                    .filter(|(q, _)| *q == p)
                    .map(|(_, item)| *item)
                    .collect();
                let expected: usize = self
                    .producers
                    .iter()
                    .map(|prod| prod.script.iter().filter(|&&q| q == p).count())
                    .sum();
                assert_eq!(got.len(), expected, "output {p}: {:#?}", self.trace);
                // Items kept in memory come in each producer's order, once.
                for i in 0..self.producers.len() {
                    let mine: Vec<usize> = got
                        .iter()
                        .filter(|(prod, _)| *prod == i)
                        .map(|(_, n)| *n)
                        .collect();
                    assert!(mine.windows(2).all(|w| w[0] < w[1]), "{:#?}", self.trace);
                }
            }
        }
        true
    }
}

/// What a walk saw: states, and ends in which every row arrived or everyone got an error.
#[derive(Default)]
struct Walk {
    seen: HashSet<String>,
    complete: u64,
    errors: u64,
    /// States reached by a producer deciding to evict a queued item.
    evictions: u64,
}

impl std::fmt::Debug for Walk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (states, complete, errors) = (self.seen.len(), self.complete, self.errors);
        write!(
            f,
            "{states} states, {complete} complete ends, {errors} ends in errors"
        )
    }
}

/// Walks every interleaving from `world` (a state reached before is not walked again).
fn explore(world: World, spills: bool, walk: &mut Walk) {
    let seen = &mut walk.seen;
    if !seen.insert(world.key()) {
        return;
    }
    if world.trace.last().is_some_and(|t| t.contains(" evicts ")) {
        walk.evictions += 1;
    }
    let actors = world.producers.len() + world.consumers.len();
    let runnable: Vec<usize> = (0..actors).filter(|&a| world.runnable(a)).collect();
    if runnable.is_empty() {
        let stuck: Vec<usize> = (0..actors)
            .filter(|&a| match a.checked_sub(world.producers.len()) {
                None => !world.producers[a].done,
                Some(c) => !world.consumers[c].done,
            })
            .collect();
        assert!(
            stuck.is_empty(),
            "actors {stuck:?} wait forever: {:#?}",
            world.trace
        );
        match world.check_end(spills) {
            true => walk.complete += 1,
            false => walk.errors += 1,
        }
        return;
    }
    for actor in runnable {
        let mut next = world.clone();
        next.step(actor);
        explore(next, spills, walk);
    }
}

fn world(
    producers: &[&[usize]],
    consumers: &[&[(usize, bool)]],
    outputs: usize,
    budget_items: usize,
    spills: bool,
    failing: Option<usize>,
) -> World {
    World {
        state: State::new(outputs, producers.len(), budget_items * ITEM, spills),
        producers: producers
            .iter()
            .enumerate()
            .map(|(i, script)| Producer {
                script: script.to_vec(),
                next: 0,
                spilling: false,
                evicting: None,
                expired: false,
                fails: failing == Some(i),
                wait: Wait::No,
                done: false,
            })
            .collect(),
        consumers: consumers
            .iter()
            .map(|script| Consumer {
                script: script.to_vec(),
                at: 0,
                from: 0,
                got: Vec::new(),
                wait: Wait::No,
                done: false,
                error: false,
            })
            .collect(),
        budget: budget_items * ITEM,
        trace: Vec::new(),
    }
}

fn run(
    producers: &[&[usize]],
    consumers: &[&[(usize, bool)]],
    outputs: usize,
    budget_items: usize,
    spills: bool,
    failing: Option<usize>,
) -> Walk {
    let mut walk = Walk::default();
    let w = world(producers, consumers, outputs, budget_items, spills, failing);
    explore(w, spills, &mut walk);
    walk
}

#[test]
fn one_consumer_reading_outputs_one_after_another_always_finishes() {
    // Two producers, two outputs, a budget of one item: reading output 0 to its end first
    // needs the items of output 1 spilled.
    for budget in [1, 2] {
        let walk = run(
            &[&[1, 0, 1], &[1, 0]],
            &[&[(0, true), (1, true)]],
            2,
            budget,
            true,
            None,
        );
        assert!(walk.seen.len() > 100 && walk.errors == 0, "{walk:?}");
        assert!(walk.evictions > 0, "{walk:?}");
        let walk = run(
            &[&[0, 1, 1], &[1, 1]],
            &[&[(1, true), (0, true)]],
            2,
            budget,
            true,
            None,
        );
        assert!(walk.seen.len() > 100 && walk.errors == 0, "{walk:?}");
    }
}

#[test]
fn consumers_of_their_own_outputs_always_finish() {
    run(
        &[&[0, 1, 0], &[1, 1, 0]],
        &[&[(0, true)], &[(1, true)]],
        2,
        1,
        true,
        None,
    );
}

#[test]
fn without_a_spill_file_an_order_that_needs_one_is_an_error_not_a_hang() {
    // The same orders with no disk: every interleaving ends, some in ResourcesExhausted.
    let walk = run(
        &[&[1, 0, 1], &[1, 0]],
        &[&[(0, true), (1, true)]],
        2,
        1,
        false,
        None,
    );
    assert!(walk.errors > 0 && walk.complete == 0, "{walk:?}");
    // With a consumer per output, orders where one waits while the other's items fill the
    // budget end in the error too (the exchange cannot tell a slow consumer from one that
    // never comes); the others complete. None hangs.
    let walk = run(
        &[&[1, 0, 1], &[1, 0]],
        &[&[(0, true)], &[(1, true)]],
        2,
        1,
        false,
        None,
    );
    assert!(walk.errors > 0 && walk.complete > 0, "{walk:?}");
}

#[test]
fn closing_an_output_and_a_failing_producer_release_everyone() {
    run(
        &[&[1, 0, 1], &[0, 1]],
        &[&[(1, false), (0, true)]],
        2,
        1,
        true,
        None,
    );
    run(
        &[&[1, 0, 1], &[0, 1]],
        &[&[(0, true)], &[(1, true)]],
        2,
        1,
        true,
        Some(1),
    );
}

#[test]
fn three_outputs_and_two_consumers_reading_in_their_own_orders() {
    run(
        &[&[2, 0, 1], &[2, 1]],
        &[&[(0, true), (2, true)], &[(1, true)]],
        3,
        1,
        true,
        None,
    );
}

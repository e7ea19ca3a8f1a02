//! Steady-state allocation tests, with a counting global allocator (per thread, so tests
//! running side by side do not disturb each other).

use partout_core::{Partitioner, ScatterPlan};
use partout_testkit::{IdPattern, random_batch, random_ids, rng};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn bump() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// const-initialised thread local, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_of<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let before = ALLOCATIONS.with(Cell::get);
    let result = f();
    (ALLOCATIONS.with(Cell::get) - before, result)
}

#[test]
fn a_warm_plan_allocates_nothing() {
    let mut rng = rng(1);
    for num_partitions in [1u32, 4, 16, 256, 1024] {
        let mut plan = ScatterPlan::new();
        let first = random_ids(10_000, num_partitions, IdPattern::Uniform, &mut rng);
        plan.build(&first, num_partitions).unwrap();
        for pattern in [IdPattern::Uniform, IdPattern::Runs(4), IdPattern::AllTo(0)] {
            let ids = random_ids(10_000, num_partitions, pattern, &mut rng);
            let (count, result) = allocations_of(|| plan.build(&ids, num_partitions));
            result.unwrap();
            assert_eq!(count, 0, "{num_partitions} partitions, {pattern:?}");
        }
    }
}

#[test]
fn a_warm_partitioner_does_not_grow_its_scratch() {
    use arrow_schema::{DataType, Field};
    use std::sync::Arc;
    let mut rng = rng(2);
    let list_of_lists = DataType::List(Arc::new(Field::new(
        "item",
        DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
        true,
    )));
    let types = [
        DataType::Int64,
        DataType::Utf8View,
        DataType::Boolean,
        list_of_lists,
    ];
    let batch = random_batch(&types, 5000, 0.5, false, &mut rng);
    let mut partitioner = Partitioner::try_new(64).unwrap();
    let warm_ids = random_ids(5000, 64, IdPattern::Uniform, &mut rng);
    partitioner.partition(&batch, &warm_ids).unwrap();
    let capacity = partitioner.scratch_capacity();

    // The same batch under new ids: outputs are the same sizes, so a steady partitioner makes
    // the same allocations each time (the output arrays) and its scratch keeps its capacity.
    let mut counts = Vec::new();
    for _ in 0..5 {
        let ids = random_ids(5000, 64, IdPattern::Uniform, &mut rng);
        let (count, out) = allocations_of(|| partitioner.partition(&batch, &ids));
        drop(out.unwrap());
        counts.push(count);
        assert_eq!(partitioner.scratch_capacity(), capacity);
    }
    assert!(
        counts.windows(2).all(|w| w[0] == w[1]),
        "allocations per batch vary: {counts:?}"
    );
}

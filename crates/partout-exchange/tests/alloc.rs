//! The writer's hot path and memory bound, under a counting global allocator (per thread, so
//! tests running side by side do not disturb each other).

use arrow_array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch};
use arrow_schema::SchemaRef;
use partout_core::ids::Partitioning;
use partout_exchange::{Encoded, PartitionedWriter, Sink, WriterOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn track(allocated: usize, freed: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + allocated as i64 - freed as i64;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
    if allocated > 0 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// const-initialised thread locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size(), 0);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        track(layout.size(), 0);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        track(new_size, layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(0, layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What an append that flushes nothing may allocate, for a batch of `columns` columns (of
/// lineitem's kinds) into `partitions` destinations of an output taking runs: none below
/// [`SLICES_FROM`] destinations (rows move into buffers that are reused); from it, the held
/// batch's own arrays (each column's buffers and array, the batch, its offsets), so a bound
/// per column, whatever the destinations: an allocation per destination and batch fails it.
fn held_batch_allocations(partitions: u32, columns: u64) -> u64 {
    if (partitions as usize) < partout_exchange::SLICES_FROM {
        0
    } else {
        16 * columns + 8
    }
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Counts what it is given and keeps nothing.
#[derive(Default)]
struct CountingSink {
    bytes: u64,
    writes: u64,
}

impl Sink for CountingSink {
    fn write(&mut self, _destination: usize, bytes: &[u8]) -> std::io::Result<()> {
        self.bytes += bytes.len() as u64;
        self.writes += 1;
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A fixed-width batch (BIGINT key, INTEGER with nulls, DOUBLE) whose values depend on `seed`.
fn fixed_batch(rows: usize, seed: i64) -> RecordBatch {
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "k",
            Arc::new(Int64Array::from_iter_values(
                (0..rows as i64).map(|i| (i + seed).wrapping_mul(0x9e37_79b9)),
            )),
        ),
        (
            "i",
            Arc::new(Int32Array::from_iter(
                (0..rows as i32).map(|i| (i % 7 != 0).then_some(i ^ seed as i32)),
            )),
        ),
        (
            "d",
            Arc::new(Float64Array::from_iter_values(
                (0..rows).map(|i| i as f64 * 0.5 + seed as f64),
            )),
        ),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

fn schema() -> SchemaRef {
    fixed_batch(1, 0).schema()
}

/// A writer hashing on the BIGINT key into a sink that keeps nothing.
fn writer(
    partitions: u32,
    target: usize,
    limit: usize,
) -> PartitionedWriter<Encoded<CountingSink>> {
    let options = WriterOptions::default()
        .with_target_bytes(target)
        .with_memory_limit(limit);
    PartitionedWriter::try_new(
        schema(),
        Partitioning::hash(vec![0], partitions),
        options,
        partout_format::Encoding::default(),
        CountingSink::default(),
    )
    .unwrap()
}

/// Steady state with flushes, at every destination count: once every destination has flushed
/// and had its buffers handed back, an append that flushes nothing allocates nothing at all
/// (ids, plan, scatter into the buffers), and a flushing append allocates only what building
/// and encoding the flushed batches needs.
///
/// Appends without a flush are common at every count: a flush takes out about 700 rows
/// whatever the destination count, several appends' worth (with a target that shrank as the
/// count grew, every append flushed several destinations).
///
/// Steady state also needs each destination's recycled buffers to fit all its later fills.
/// A fill varies with the target's jitter (0.75 to 1.25 of it) and the rows one append brings,
/// so a buffer could outgrow, once more after its destination's first flush, the capacity its
/// first fill left it. Arrow grows a buffer to at least twice its capacity, exactly twice when
/// an append adds no more than the capacity; here every append adds at most 64 bytes to a
/// buffer (at most 8 rows to one destination), or, for a lone destination, always the same
/// 128 rows, so capacities are powers of two from 64 bytes. Every fill lies between about 525
/// and 900 rows (0.75 to 1.25 of 700, plus one append): 8-byte values above 4 KiB and below
/// 8, 4-byte values above 2 KiB and below 4, validity above 64 bytes and below 128. So a
/// destination's first fill gives each of its buffers the capacity it keeps.
#[test]
fn steady_state_appends_do_not_allocate_between_flushes() {
    use partout_core::ids::PartitionIds;
    // About 700 rows of 20 bytes and a validity bit.
    const TARGET: usize = 14_100;
    for partitions in [1u32, 16, 200, 1000] {
        let rows = if partitions == 1 {
            128
        } else {
            (2 * partitions as usize).min(128)
        };
        // Keys distinct across batches, so that every destination receives rows.
        let batches: Vec<RecordBatch> = (0..256)
            .map(|s| fixed_batch(rows, s * rows as i64))
            .collect();
        if partitions > 1 {
            let mut ids =
                PartitionIds::try_new(Partitioning::hash(vec![0], partitions), &schema()).unwrap();
            let mut out = Vec::new();
            for batch in &batches {
                ids.compute(batch, &mut out).unwrap();
                let mut counts = vec![0; partitions as usize];
                out.iter().for_each(|&p| counts[p as usize] += 1);
                let most = counts.iter().max().copied().unwrap_or(0);
                assert!(most <= 8, "{partitions} destinations: {most} rows to one");
            }
        }
        let mut writer = writer(partitions, TARGET, 1 << 30);
        let mut appended = 0;
        while writer.metrics().destination_rows.contains(&0) {
            assert!(
                appended < 100_000,
                "{partitions} destinations: not all flushed after {appended} appends"
            );
            writer.append(&batches[appended % batches.len()]).unwrap();
            appended += 1;
        }
        // Held runs flush every destination at once, each flush a whole limit's worth: fewer.
        let flushes_wanted = if held_batch_allocations(partitions, 1) > 0 {
            10
        } else {
            200
        };
        let (mut quiet, mut flushing) = (0, 0);
        while flushing < flushes_wanted {
            let flushes = writer.metrics().flushes;
            let held = writer.held_bytes();
            let before = allocations();
            writer.append(&batches[appended % batches.len()]).unwrap();
            appended += 1;
            let allocated = allocations() - before;
            let flushed = writer.metrics().flushes - flushes;
            if flushed == 0 {
                quiet += 1;
                assert!(
                    allocated <= held_batch_allocations(partitions, 3),
                    "{partitions} destinations: an append without a flush allocated {allocated} \
                     times (held memory {held} -> {} bytes)",
                    writer.held_bytes()
                );
            } else {
                flushing += 1;
                // Building and encoding a flushed batch allocates (arrow's IPC writer), a
                // bounded amount per flush; nothing else does.
                assert!(
                    allocated <= 60 * flushed,
                    "{partitions} destinations: {allocated} allocations for {flushed} flushes"
                );
            }
        }
        assert!(
            quiet >= 2 * flushing,
            "{partitions} destinations: {quiet} appends without a flush, {flushing} with"
        );
        let (sink, metrics) = writer.finish().unwrap();
        assert_eq!(metrics.rows_in, (appended * rows) as u64);
        assert_eq!(sink.bytes, metrics.bytes_out);
    }
}

/// Memory stays within the limit (plus the batch in flight and one encoded flush) whatever
/// the input size and the partition count: the same bound holds over the first 100 batches
/// and over the 500 after them.
#[test]
fn memory_is_bounded_by_the_limit() {
    for (partitions, limit) in [(16u32, 4usize << 20), (1000, 8 << 20), (5000, 8 << 20)] {
        let mut writer = writer(partitions, 1 << 20, limit);
        let batch_bytes = 8192 * 20;
        let live_before = LIVE.with(Cell::get);
        let mut peaks = Vec::new();
        for (from, to) in [(0, 100), (100, 600)] {
            PEAK.with(|p| p.set(LIVE.with(Cell::get)));
            for s in from..to {
                let batch = fixed_batch(8192, s);
                writer.append(&batch).unwrap();
            }
            peaks.push((PEAK.with(Cell::get) - live_before) as usize);
        }
        let (sink, metrics) = writer.finish().unwrap();
        assert_eq!(metrics.rows_in, 600 * 8192);
        assert!(metrics.bytes_in > 90 << 20, "{} bytes in", metrics.bytes_in);
        assert!(
            metrics.peak_held_bytes as usize <= limit + 2 * batch_bytes,
            "{metrics:?}"
        );
        // The limit, the batch in flight (input, ids, plan, growth past the limit before the
        // largest flush), an encoded flush, and arrow's IPC writer state per destination.
        let target = (limit / (2 * partitions as usize)).min(1 << 20);
        let allowance = limit + 4 * batch_bytes + 4 * target + partitions as usize * 2048;
        assert!(
            peaks[0] <= allowance && peaks[1] <= allowance,
            "{partitions} destinations, limit {limit}: peaks {peaks:?} > {allowance}"
        );
        assert_eq!(sink.bytes, metrics.bytes_out);
    }
}

/// lineitem's kinds of columns (strings, views, decimals, dates, beside the fixed-width key):
/// in steady state an append that flushes nothing allocates only to grow a buffer that a fill
/// outgrew, which a buffer does a few times at most before its capacity covers every later
/// fill (it doubles). Measured over 400 appends after every destination has flushed: in each
/// half, at most one allocation for four quiet appends.
/// (Dictionary and nested columns are not held to this: their appends allocate, ~260 and
/// ~210 times per append at 16 destinations; bench/HISTORY.md.)
#[test]
fn variable_width_appends_allocate_only_to_grow_buffers() {
    use arrow_schema::DataType;
    let types = [
        DataType::Utf8,
        DataType::Utf8View,
        DataType::Decimal128(15, 2),
        DataType::Date32,
    ];
    let mut rng = partout_testkit::rng(7);
    let batches: Vec<RecordBatch> = (0..64)
        .map(|_| partout_testkit::random_batch(&types, 128, 0.1, false, &mut rng))
        .collect();
    for partitions in [16u32, 200] {
        let options = WriterOptions::default()
            .with_target_bytes(64 << 10)
            .with_memory_limit(1 << 30);
        let mut writer = PartitionedWriter::try_new(
            batches[0].schema(),
            // Keyed on the strings: every batch's keys are its own.
            Partitioning::hash(vec![1], partitions),
            options,
            partout_format::Encoding::default(),
            CountingSink::default(),
        )
        .unwrap();
        let mut appended = 0;
        while writer.metrics().destination_rows.contains(&0)
            || writer.metrics().flushes < 2 * u64::from(partitions)
        {
            assert!(
                appended < 100_000,
                "not all flushed after {appended} appends"
            );
            writer.append(&batches[appended % batches.len()]).unwrap();
            appended += 1;
        }
        // Quiet appends and their allocations, in the first and the second half.
        let mut halves = [(0u64, 0u64); 2];
        for i in 0..400 {
            let flushes = writer.metrics().flushes;
            let before = allocations();
            writer.append(&batches[appended % batches.len()]).unwrap();
            appended += 1;
            let allocated = allocations() - before;
            if writer.metrics().flushes == flushes {
                let half = &mut halves[i / 200];
                half.0 += 1;
                half.1 += allocated;
            }
        }
        // Growth is rare and does not become common: a few allocations in 200 appends, not
        // one or more per append (held batches: their own arrays, per append).
        for (quiet, allocated) in halves {
            assert!(quiet > 50, "{halves:?}");
            let allowed = quiet / 4 + quiet * held_batch_allocations(partitions, 5);
            assert!(
                allocated <= allowed,
                "{partitions} destinations: {allocated} allocations in {quiet} quiet appends"
            );
        }
        let (sink, metrics) = writer.finish().unwrap();
        assert_eq!(metrics.rows_in, (appended * 128) as u64);
        assert_eq!(sink.bytes, metrics.bytes_out);
    }
}

//! A global allocator that counts the bytes the whole process holds, and their peak: memory
//! measured from outside the code under test. A test binary that uses it declares it as its
//! allocator and holds one test, so that nothing else allocates beside it:
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: counting::Counting = counting::Counting;
//! ```
//!
//! (Shared by `#[path]` with other crates' memory tests.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

/// The counting allocator: the system's, with every byte counted.
pub struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

fn track(allocated: usize, freed: usize) {
    let change = allocated as i64 - freed as i64;
    let now = LIVE.fetch_add(change, Ordering::Relaxed) + change;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// atomics, which never allocate.
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

/// Starts a measurement: the bytes held now, from which [`peak_since`] counts.
pub fn start() -> i64 {
    let now = LIVE.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now
}

/// The most bytes held at once since [`start`] returned `base`, beyond `base`.
pub fn peak_since(base: i64) -> i64 {
    PEAK.load(Ordering::Relaxed) - base
}

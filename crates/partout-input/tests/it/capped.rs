//! The test binaries' allocator: it aborts on any allocation of more than [`MAX_ALLOCATION`]
//! bytes. No test reads anything near that, so such an allocation is a reader trusting a
//! length a damaged file claims. partout-input's and partout-output's test binaries both use
//! it (partout-output's by `#[path]`).

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest allocation any test may make.
const MAX_ALLOCATION: usize = 256 << 20;

struct Capped;

fn check(size: usize) {
    if size > MAX_ALLOCATION {
        // Not a panic: the allocator must not unwind. (eprintln! does not allocate for a
        // message of integers.)
        eprintln!("an allocation of {size} bytes: a length a file claims was trusted");
        std::process::abort();
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged, after a size check that
// allocates nothing.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Capped = Capped;

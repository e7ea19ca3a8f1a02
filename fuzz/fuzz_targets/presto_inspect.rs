//! The Presto page walk alone, as `partout inspect` runs it: no schema, no arrays, arbitrary
//! bytes as pages. Errors are fine; panics, stack overflows, hangs and huge allocations are
//! findings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use partout_format::presto::inspect_pages;

fuzz_target!(|data: &[u8]| {
    let _ = inspect_pages(data);
});

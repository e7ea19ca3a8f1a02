//! partout's input readers on arbitrary bytes ([`partout_fuzz::input_files`]), in a temporary
//! directory made once per process.
//!
//! A panic inside arrow-ipc or parquet that partout-input contains (turns into an error naming the
//! file) is not a finding here; run with `PARTOUT_FUZZ_STRICT=1` to stop at those too.
#![no_main]

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

thread_local! {
    /// The last panic's message and place, printed when it escapes partout.
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The directory of the input file, and whether contained panics are findings too.
fn setup() -> &'static (tempfile::TempDir, bool) {
    static SETUP: OnceLock<(tempfile::TempDir, bool)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let strict = std::env::var_os("PARTOUT_FUZZ_STRICT").is_some_and(|v| v != "0");
        if !strict {
            // libfuzzer-sys aborts in its panic hook, before any unwinding: panics partout
            // catches would be reported too. Record them instead; one that escapes aborts below.
            std::panic::set_hook(Box::new(|info| {
                LAST_PANIC.with(|last| *last.borrow_mut() = info.to_string());
            }));
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        (dir, strict)
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (dir, strict) = setup();
    let run = || partout_fuzz::input_files(data, dir.path());
    if *strict {
        run();
    } else if catch_unwind(AssertUnwindSafe(run)).is_err() {
        LAST_PANIC.with(|last| eprintln!("panic escaped partout: {}", last.borrow()));
        std::process::abort();
    }
});

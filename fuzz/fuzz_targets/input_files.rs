//! partout's input readers on arbitrary bytes, read as its CLI reads them: the low two bits of
//! the first byte pick the format (Parquet, Arrow IPC file, Arrow IPC stream, CSV), the next two
//! the frame size; the rest is written to a file of that format's extension (in a temporary
//! directory made once per process), which is then found by `discover`, read whole by
//! `InputReader`, and cut by `plan_frames` into frames that are each read.
//!
//! Every result must be `Ok` or an error naming the file; when the whole file reads without
//! error both ways, the frames must hold as many rows as the whole. Panics, stack overflows,
//! hangs and huge allocations are findings.
//!
//! A panic inside arrow-ipc or parquet that partout-io contains (turns into an error naming the
//! file) is not a finding here; run with `PARTOUT_FUZZ_STRICT=1` to stop at those too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use partout_io::{InputFile, InputReader, IoError, discover, plan_frames};
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::OnceLock;

const EXTENSIONS: [&str; 4] = ["parquet", "arrow", "arrows", "csv"];
/// Frame sizes: one row (Parquet row groups cut into single rows, IPC files into single
/// batches), a few rows, partout's batch size, a frame per file.
const FRAME_ROWS: [usize; 4] = [1, 3, 8192, 1 << 20];

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

/// An error must name the file.
fn check(result: Result<(), IoError>, path: &Path) -> bool {
    match result {
        Ok(()) => true,
        Err(IoError::File { path: named, .. }) if named == path => false,
        Err(e) => panic!("an error not naming {}: {e}", path.display()),
    }
}

/// Rows read by `InputReader`, `None` after an error.
fn read_whole(files: &[InputFile], path: &Path) -> Option<u64> {
    let mut rows = 0;
    let result = InputReader::try_new(files.to_vec()).and_then(|reader| {
        for batch in reader {
            rows += batch?.num_rows() as u64;
        }
        Ok(())
    });
    check(result, path).then_some(rows)
}

/// Rows read frame by frame, `None` after an error.
fn read_frames(files: &[InputFile], frame_rows: usize, path: &Path) -> Option<u64> {
    let mut rows = 0;
    let result = plan_frames(files, frame_rows).and_then(|frames| {
        for frame in &frames.frames {
            let mut frame_rows = 0;
            for batch in frame.read(&frames.schema)? {
                frame_rows += batch?.num_rows() as u64;
            }
            if let Some(expected) = frame.rows() {
                assert_eq!(frame_rows, expected, "{frame:?}");
            }
            rows += frame_rows;
        }
        Ok(())
    });
    check(result, path).then_some(rows)
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let (dir, strict) = setup();
    let path = dir
        .path()
        .join(format!("input.{}", EXTENSIONS[usize::from(pick & 3)]));
    std::fs::write(&path, bytes).expect("writing the input");
    let frame_rows = FRAME_ROWS[usize::from(pick >> 2 & 3)];
    let run = || {
        let files = discover(std::slice::from_ref(&path)).expect("the input is there");
        let whole = read_whole(&files, &path);
        let framed = read_frames(&files, frame_rows, &path);
        if let (Some(whole), Some(framed)) = (whole, framed) {
            assert_eq!(whole, framed, "rows read whole and by frames");
        }
    };
    if *strict {
        run();
    } else if catch_unwind(AssertUnwindSafe(run)).is_err() {
        LAST_PANIC.with(|last| eprintln!("panic escaped partout: {}", last.borrow()));
        std::process::abort();
    }
});

//! Every committed input of the network fuzz targets (`fuzz/corpus/flight_put/`,
//! `fuzz/corpus/flight_requests/`, `fuzz/corpus/presto_paths/`) through its target's check (`fuzz/src/flight.rs`, shared
//! with the targets): what the fuzzers found once stays fixed on every test run, without a
//! nightly toolchain or libFuzzer. Fuzzing itself: FUZZING.md.
//!
//! The targets' seeds are written by `flight_seeds`:
//!
//! ```sh
//! PARTOUT_FUZZ_SEEDS=$PWD/fuzz/corpus cargo test -p partout-flight --test fuzz_corpus flight_seeds
//! ```

#[path = "../../../fuzz/src/flight.rs"]
#[allow(dead_code, missing_docs)]
mod checks;

#[path = "../../../fuzz/src/corpus.rs"]
mod corpus_files;

use corpus_files::corpus;
use std::path::PathBuf;

/// Inputs that still fail, named `open-*`: findings reported and not fixed yet (FUZZING.md,
/// "Runs"). Each must still fail; once one passes, drop the prefix.
const OPEN: &str = "open-";

/// Runs `check` on every input of `target`'s corpus; names the input that fails (or, for an
/// `open-*` input, passes).
fn replay(target: &str, check: impl Fn(&[u8])) -> usize {
    let inputs = corpus(target);
    for (path, bytes) in &inputs {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(bytes)));
        let open = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(OPEN));
        if open {
            assert!(
                result.is_err(),
                "{target}: {} passes now: rename it without {OPEN:?}",
                path.display()
            );
        } else {
            assert!(result.is_ok(), "{target}: {} fails", path.display());
        }
    }
    inputs.len()
}

#[test]
fn flight_put_corpus() {
    let n = replay("flight_put", |bytes| {
        let _ = checks::flight_put(bytes);
    });
    assert!(n > 10, "{n} inputs");
}

#[test]
fn flight_requests_corpus() {
    let n = replay("flight_requests", checks::flight_requests);
    assert!(n > 5, "{n} inputs");
}

#[test]
fn presto_paths_corpus() {
    let n = replay("presto_paths", checks::presto_paths);
    assert!(n > 5, "{n} inputs");
}

/// The framing round-trips, and a truncated message ends the sequence.
#[test]
fn flight_put_framing() {
    let messages: [(&[u8], &[u8]); 3] = [(b"ab", b""), (b"", b"cde"), (b"f", b"gh")];
    let joined = checks::join_messages(messages);
    assert_eq!(checks::split_messages(&joined), messages);
    assert_eq!(
        checks::split_messages(&joined[..joined.len() - 1]),
        messages[..2]
    );
}

/// The valid seeds decode whole: the check refuses none of their messages.
#[test]
fn flight_put_seeds_decode() {
    for (name, bytes) in checks::flight_put_seeds() {
        let rows = checks::flight_put(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = if name == "seed-empty-batch" { 0 } else { 5 };
        assert!(rows >= want, "{name}: {rows} rows");
    }
}

/// The crafted IPC streams the other targets found (partout-format's and partout-input's test
/// data), as `flight_put` inputs: each refused with an error.
fn crafted() -> Vec<(String, Vec<u8>)> {
    let dirs = [
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../partout-format/tests/data/ipc_panics"
        ),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../partout-input/tests/data"),
    ];
    let mut crafted = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".arrows") || name.ends_with(".arrow") {
                let bytes = checks::ipc_stream_to_messages(&std::fs::read(&path).unwrap());
                crafted.push((format!("crafted-{name}"), bytes));
            }
        }
    }
    crafted.sort();
    crafted
}

#[test]
fn flight_put_crafted_streams_fail() {
    for (name, bytes) in crafted() {
        if let Ok(rows) = checks::flight_put(&bytes) {
            // A file whose damage is in its footer or blocks has a valid stream inside.
            assert!(
                name.contains("block-claiming") || rows == 0,
                "{name}: {rows} rows"
            );
        }
    }
}

/// The seeds of the three targets, each run through its target's check (which must not panic
/// on it, as on any input), and written into `$PARTOUT_FUZZ_SEEDS/TARGET/` when it is set (see
/// the module's documentation; the committed corpus is the fuzzers' merge of them and what they
/// found, named by content, so a seed need not be in it as written).
#[test]
fn flight_seeds() {
    let mut put = checks::flight_put_seeds();
    put.extend(crafted());
    seeds_pass("flight_put", put, |bytes| {
        let _ = checks::flight_put(bytes);
    });
    seeds_pass(
        "flight_requests",
        checks::flight_requests_seeds(),
        checks::flight_requests,
    );
    seeds_pass(
        "presto_paths",
        checks::presto_paths_seeds(),
        checks::presto_paths,
    );
}

/// Runs each of `target`'s `seeds` through `check`, then writes them into
/// `$PARTOUT_FUZZ_SEEDS/TARGET/` when it is set.
fn seeds_pass(target: &str, seeds: Vec<(String, Vec<u8>)>, check: impl Fn(&[u8])) {
    assert!(seeds.len() > 5, "{target}: {} seeds", seeds.len());
    for (name, bytes) in &seeds {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(bytes)));
        assert!(result.is_ok(), "{target}: seed {name} fails its check");
    }
    if let Some(root) = std::env::var_os("PARTOUT_FUZZ_SEEDS") {
        let dir = PathBuf::from(root).join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}

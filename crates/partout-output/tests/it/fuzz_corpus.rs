//! Every committed fuzz input (`fuzz/corpus/TARGET/`) through its target's check
//! (`fuzz/src/lib.rs`, shared with the fuzz targets): what the fuzzers found once stays fixed on
//! every test run, without a nightly toolchain or libFuzzer, under this binary's allocation
//! cap. Fuzzing itself: FUZZING.md.

#[path = "../../../../fuzz/src/lib.rs"]
#[allow(dead_code, missing_docs)]
mod checks;

#[path = "../../../../fuzz/src/corpus.rs"]
mod corpus_files;

use corpus_files::corpus;

/// Runs `check` on every input of `target`'s corpus; names the input that fails.
fn replay(target: &str, check: impl Fn(&[u8])) -> usize {
    let inputs = corpus(target);
    for (path, bytes) in &inputs {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(bytes)));
        assert!(result.is_ok(), "{target}: {} fails", path.display());
    }
    inputs.len()
}

#[test]
fn ipc_decode_corpus() {
    assert!(replay("ipc_decode", checks::ipc_decode) > 100);
}

#[test]
fn presto_decode_corpus() {
    assert!(replay("presto_decode", checks::presto_decode) > 100);
}

#[test]
fn presto_inspect_corpus() {
    assert!(replay("presto_inspect", checks::presto_inspect) > 100);
}

#[test]
fn shuffle_index_corpus() {
    assert!(replay("shuffle_index", checks::shuffle_index) >= 1);
}

#[test]
fn input_files_corpus() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        replay("input_files", |bytes| checks::input_files(
            bytes,
            dir.path()
        )) > 100
    );
}

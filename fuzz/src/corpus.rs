//! The committed corpora as the replay tests read them (`crates/partout-output/tests/it/fuzz_corpus.rs`,
//! `crates/partout-flight/tests/fuzz_corpus.rs` include this file by `#[path]`; the fuzz
//! targets do not use it).

use std::path::{Path, PathBuf};

/// The inputs of `target`'s committed corpus (`fuzz/corpus/TARGET/`), in name order, for a
/// test of a crate in `crates/`.
pub fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{} holds no input", dir.display());
    inputs
}

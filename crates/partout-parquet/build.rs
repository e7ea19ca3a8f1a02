//! Makes the parquet crate partout writes through: copies `parquet` 59.3.2's published source
//! (the crate this package depends on, from Cargo's registry) into `OUT_DIR`, applies
//! `patches/parquet-59-encoder.patch` to it (with `partout-patch`), and leaves it for
//! `src/lib.rs` to include. Nothing of parquet's is kept in this repository but the patch.
//!
//! The source is found at `$PARTOUT_PARQUET_SRC` if set, else in Cargo's registry.

use std::fs;
use std::path::Path;

fn main() {
    let source = partout_patch::Source {
        name: "parquet",
        // The version the patch is written for (and `Cargo.toml` pins).
        version: "59.3.2",
        patch: "patches/parquet-59-encoder.patch",
        source_env: "PARTOUT_PARQUET_SRC",
    };
    // Included into this crate's root, the library's file can hold no inner attributes: its
    // documentation and lint levels are `src/lib.rs`'s.
    let out = partout_patch::apply(&source, &["src/lib.rs"])
        .unwrap_or_else(|e| panic!("partout-parquet: {e}"));
    unexport_macros(&out).unwrap_or_else(|e| panic!("partout-parquet: {e}"));
}

/// parquet's Thrift macros are `#[macro_export]`ed and named by path (`crate::thrift_struct`),
/// which Rust refuses for macros that come out of a macro's expansion, as everything inside
/// an `include!` does. They become crate-wide re-exports instead (`pub(crate) use`), which
/// the same paths name; nothing else changes.
fn unexport_macros(out: &Path) -> Result<(), String> {
    let macros = out.join("src/parquet_macros.rs");
    let text = fs::read_to_string(&macros).map_err(|e| format!("{}: {e}", macros.display()))?;
    let mut names = Vec::new();
    let mut exported = false;
    let mut kept = Vec::new();
    for line in text.lines() {
        if line.trim() == "#[macro_export]" {
            exported = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("macro_rules! ") {
            if exported {
                names.push(rest.trim_end_matches(" {").trim().to_string());
            }
            exported = false;
        }
        kept.push(line);
    }
    if names.is_empty() {
        return Err(format!("{}: no exported macro found", macros.display()));
    }
    let list = names.join(", ");
    let reexport = format!("\npub(crate) use {{{list}}};");
    kept.push(&reexport);
    fs::write(&macros, kept.join("\n") + "\n").map_err(|e| format!("{}: {e}", macros.display()))?;
    let lib = out.join("src/lib.rs");
    let mut text = fs::read_to_string(&lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    text.push_str(&format!(
        "\n#[allow(unused_imports)]\npub(crate) use parquet_macros::{{{list}}};\n"
    ));
    fs::write(&lib, text).map_err(|e| format!("{}: {e}", lib.display()))
}

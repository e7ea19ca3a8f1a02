//! Makes Ballista 55's scheduler with partout's fix: copies `ballista-scheduler` 55.0.0's
//! published source (the crate this package depends on, from Cargo's registry) into
//! `OUT_DIR`, applies `patches/ballista-scheduler-55-executor-loss.patch` to it (with
//! `partout-patch`), and leaves it for `src/lib.rs` and `src/main.rs` to include. Nothing of
//! Ballista's is kept in this repository but the patch.
//!
//! The source is found at `$PARTOUT_BALLISTA_SCHEDULER_SRC` if set, else in Cargo's registry
//! (`$CARGO_HOME`, or `~/.cargo`). A patch that does not apply fails the build, naming the
//! file and the hunk.

use std::fs;

fn main() {
    let source = partout_patch::Source {
        name: "ballista-scheduler",
        // The version the patch is written for (and `Cargo.toml` pins).
        version: "55.0.0",
        patch: "patches/ballista-scheduler-55-executor-loss.patch",
        source_env: "PARTOUT_BALLISTA_SCHEDULER_SRC",
    };
    // Included into this crate's root, the library's and the binary's files can hold no inner
    // attributes (their documentation, their lint levels): `src/lib.rs` sets its own.
    let out = partout_patch::apply(&source, &["src/lib.rs", "src/bin/main.rs"])
        .unwrap_or_else(|e| panic!("partout-ballista-scheduler: {e}"));
    // The binary names the library by the crate it is compiled into here.
    let main = out.join("src/bin/main.rs");
    let text = fs::read_to_string(&main).unwrap_or_else(|e| panic!("{}: {e}", main.display()));
    fs::write(
        &main,
        text.replace("ballista_scheduler::", "partout_ballista_scheduler::"),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", main.display()));
}

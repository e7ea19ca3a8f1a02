//! Makes Ballista 55's scheduler with partout's fix: copies `ballista-scheduler` 55.0.0's
//! published source (the crate this package depends on, from Cargo's registry) into
//! `OUT_DIR`, applies `patches/ballista-scheduler-55-executor-loss.patch` to it, and leaves
//! it for `src/lib.rs` and `src/main.rs` to include. Nothing of Ballista's is kept in this
//! repository but the patch.
//!
//! The source is found at `$PARTOUT_BALLISTA_SCHEDULER_SRC` if set, else in Cargo's registry
//! (`$CARGO_HOME`, or `~/.cargo`). A patch that does not apply fails the build, naming the
//! file and the hunk.

use std::fs;
use std::path::{Path, PathBuf};

/// The version the patch is written for (and `Cargo.toml` pins).
const VERSION: &str = "55.0.0";
const PATCH: &str = "patches/ballista-scheduler-55-executor-loss.patch";

fn main() {
    println!("cargo::rerun-if-changed={PATCH}");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=PARTOUT_BALLISTA_SCHEDULER_SRC");
    if let Err(e) = run() {
        panic!("partout-ballista-scheduler: {e}");
    }
}

fn run() -> Result<(), String> {
    let source = find_source()?;
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?)
        .join("ballista-scheduler");
    if out.exists() {
        fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    copy_tree(&source.join("src"), &out.join("src"))?;
    let patch = fs::read_to_string(PATCH).map_err(|e| format!("{PATCH}: {e}"))?;
    for (path, diff) in file_diffs(&patch)? {
        let target = out.join(&path);
        let original =
            fs::read_to_string(&target).map_err(|e| format!("{}: {e}", target.display()))?;
        let parsed = diffy::Patch::from_str(diff)
            .map_err(|e| format!("{PATCH}: the diff of {path} does not parse: {e}"))?;
        let patched = diffy::apply(&original, &parsed).map_err(|e| {
            format!("{PATCH} does not apply to {path} of ballista-scheduler {VERSION}: {e}")
        })?;
        fs::write(&target, patched).map_err(|e| format!("{}: {e}", target.display()))?;
    }
    // Included into this crate's root, the library's file can hold no inner attributes (its
    // documentation, its lint levels): `src/lib.rs` sets its own.
    strip_inner_attributes(&out.join("src/lib.rs"))?;
    // The binary names the library by the crate it is compiled into here.
    let main = out.join("src/bin/main.rs");
    strip_inner_attributes(&main)?;
    let text = fs::read_to_string(&main).map_err(|e| format!("{}: {e}", main.display()))?;
    fs::write(
        &main,
        text.replace("ballista_scheduler::", "partout_ballista_scheduler::"),
    )
    .map_err(|e| format!("{}: {e}", main.display()))?;
    Ok(())
}

/// `ballista-scheduler` `VERSION`'s source directory.
fn find_source() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("PARTOUT_BALLISTA_SCHEDULER_SRC") {
        return Ok(dir.into());
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let registry = home.join("registry").join("src");
    let name = format!("ballista-scheduler-{VERSION}");
    let entries = fs::read_dir(&registry).map_err(|e| format!("{}: {e}", registry.display()))?;
    for entry in entries.flatten() {
        let candidate = entry.path().join(&name);
        if candidate.join("src").join("lib.rs").is_file() {
            return Ok(candidate);
        }
    }
    Err(format!(
        "{name}'s source is not under {} (set PARTOUT_BALLISTA_SCHEDULER_SRC to its directory)",
        registry.display()
    ))
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path();
        let dest = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &dest)?;
        } else {
            fs::copy(&path, &dest).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// The patch split by file: (path from the crate's root, the file's unified diff from its
/// `---` line).
fn file_diffs(patch: &str) -> Result<Vec<(String, &str)>, String> {
    let mut files = Vec::new();
    let starts: Vec<usize> = patch
        .match_indices("diff --git ")
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || patch.as_bytes()[i - 1] == b'\n')
        .collect();
    for (k, &start) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(patch.len());
        let chunk = &patch[start..end];
        let minus = chunk
            .find("\n--- ")
            .ok_or_else(|| format!("{PATCH}: a file's diff without a --- line"))?;
        let diff = &chunk[minus + 1..];
        let path = diff
            .lines()
            .find_map(|l| l.strip_prefix("+++ b/"))
            .ok_or_else(|| format!("{PATCH}: a file's diff without a +++ line"))?;
        files.push((path.trim().to_string(), diff));
    }
    if files.is_empty() {
        return Err(format!("{PATCH} holds no file's diff"));
    }
    Ok(files)
}

/// Removes `#![…]` and `//!` lines.
fn strip_inner_attributes(file: &Path) -> Result<(), String> {
    let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !(l.starts_with("#![") || l.starts_with("//!"))
        })
        .collect();
    fs::write(file, kept.join("\n") + "\n").map_err(|e| format!("{}: {e}", file.display()))
}

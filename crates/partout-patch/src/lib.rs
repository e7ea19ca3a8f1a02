//! For build scripts: a published crate's source, copied from Cargo's registry into `OUT_DIR`
//! with a patch applied, ready for the calling crate to `include!`.
//!
//! partout carries its changes to a dependency (Ballista's scheduler, parquet's encoder) as
//! patches against that dependency's published source, so that each change is a diff a
//! maintainer upstream can read. The crate that carries one depends on the exact published
//! version (so that Cargo downloads its source), and its build script calls [`apply`]. Nothing
//! of the dependency is kept in this repository but the patch.
//!
//! A patch that does not apply fails the build, naming the patch, the file and the version.

use std::fs;
use std::path::{Path, PathBuf};

/// One published crate and the patch to apply to it.
pub struct Source<'a> {
    /// The crate's name in the registry (`parquet`).
    pub name: &'a str,
    /// The exact version the patch is written for (the calling crate pins it with `=`).
    pub version: &'a str,
    /// The patch, a unified diff with paths relative to the crate's root (`a/src/…`, `b/src/…`),
    /// relative to the calling crate's directory.
    pub patch: &'a str,
    /// An environment variable that, when set, names the source directory to use instead of
    /// the registry's.
    pub source_env: &'a str,
}

/// Copies `source`'s `src/` into `OUT_DIR/<name>/src`, applies its patch, and removes the
/// inner attributes (`#![…]`, `//!`) of the files named in `strip` (paths from the crate's
/// root), which cannot stand inside an `include!`. Returns the copy's root.
pub fn apply(source: &Source<'_>, strip: &[&str]) -> Result<PathBuf, String> {
    println!("cargo::rerun-if-changed={}", source.patch);
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed={}", source.source_env);
    let from = find_source(source)?;
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| format!("OUT_DIR: {e}"))?)
        .join(source.name);
    if out.exists() {
        fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    copy_tree(&from.join("src"), &out.join("src"))?;
    let patch = fs::read_to_string(source.patch).map_err(|e| format!("{}: {e}", source.patch))?;
    for (path, diff) in file_diffs(source.patch, &patch)? {
        let target = out.join(&path);
        let original =
            fs::read_to_string(&target).map_err(|e| format!("{}: {e}", target.display()))?;
        let parsed = diffy::Patch::from_str(diff)
            .map_err(|e| format!("{}: the diff of {path} does not parse: {e}", source.patch))?;
        let patched = diffy::apply(&original, &parsed).map_err(|e| {
            format!(
                "{} does not apply to {path} of {} {}: {e}",
                source.patch, source.name, source.version
            )
        })?;
        fs::write(&target, patched).map_err(|e| format!("{}: {e}", target.display()))?;
    }
    for file in strip {
        strip_inner_attributes(&out.join(file))?;
    }
    Ok(out)
}

/// The source directory of `source.name` `source.version`.
fn find_source(source: &Source<'_>) -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os(source.source_env) {
        return Ok(dir.into());
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let registry = home.join("registry").join("src");
    let name = format!("{}-{}", source.name, source.version);
    let entries = fs::read_dir(&registry).map_err(|e| format!("{}: {e}", registry.display()))?;
    for entry in entries.flatten() {
        let candidate = entry.path().join(&name);
        if candidate.join("src").join("lib.rs").is_file() {
            return Ok(candidate);
        }
    }
    Err(format!(
        "{name}'s source is not under {} (set {} to its directory)",
        registry.display(),
        source.source_env
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
fn file_diffs<'p>(name: &str, patch: &'p str) -> Result<Vec<(String, &'p str)>, String> {
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
            .ok_or_else(|| format!("{name}: a file's diff without a --- line"))?;
        let diff = &chunk[minus + 1..];
        let path = diff
            .lines()
            .find_map(|l| l.strip_prefix("+++ b/"))
            .ok_or_else(|| format!("{name}: a file's diff without a +++ line"))?;
        files.push((path.trim().to_string(), diff));
    }
    if files.is_empty() {
        return Err(format!("{name} holds no file's diff"));
    }
    Ok(files)
}

/// Removes `#![…]` and `//!` lines, and the lines of a `#![…]` that spans several.
fn strip_inner_attributes(file: &Path) -> Result<(), String> {
    let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut kept = Vec::new();
    let mut open = 0i32;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if open > 0 || trimmed.starts_with("#![") {
            open += depth(line);
            continue;
        }
        if !trimmed.starts_with("//!") {
            kept.push(line);
        }
    }
    fs::write(file, kept.join("\n") + "\n").map_err(|e| format!("{}: {e}", file.display()))
}

/// How many more `(`/`[` than `)`/`]` a line opens.
fn depth(line: &str) -> i32 {
    line.chars()
        .map(|c| match c {
            '(' | '[' => 1,
            ')' | ']' => -1,
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_is_split_by_file() {
        let patch = "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-x\n+y\n\
                     diff --git a/src/b.rs b/src/b.rs\n--- a/src/b.rs\n+++ b/src/b.rs\n@@ -1 +1 @@\n-p\n+q\n";
        let files = file_diffs("p", patch).unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["src/a.rs", "src/b.rs"]);
        assert!(files[0].1.starts_with("--- a/src/a.rs") && files[0].1.ends_with("+y\n"));
        assert!(file_diffs("p", "no diff here").is_err());
    }

    #[test]
    fn inner_attributes_over_several_lines_are_removed() {
        let dir = std::env::temp_dir().join(format!("partout-patch-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("lib.rs");
        fs::write(
            &file,
            "//! doc\n#![doc(\n    html = \"x\"\n)]\n#![warn(missing_docs)]\npub mod a;\n#[cfg(x)]\nfn f() {}\n",
        )
        .unwrap();
        strip_inner_attributes(&file).unwrap();
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            "pub mod a;\n#[cfg(x)]\nfn f() {}\n"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}

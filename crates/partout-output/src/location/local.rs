//! A directory of the local file system as an output's location. A run writes into a staging
//! directory, a hidden sibling of the output directory, and swaps it into place only when
//! everything succeeded, so a failed or interrupted run never leaves output that looks
//! complete. Leftovers of runs whose process is gone are removed.
//!
//! ```text
//!  staging ─ the run's files ─┬─ (append, overwrite-partitions) named with the run's id;
//!                             │  every file of the output there hard-linked in beside them
//!                             │  but those of the value directories rewritten
//!                             └─ the manifest (merged) ─► swapped with the output directory
//!                                at once (renameat2's exchange) ─► the old one removed
//! ```
//!
//! Until the swap the output there is untouched; after it, the new one is whole: a reader,
//! or a run killed at any moment, sees one or the other, never a mix. Runs adding to one
//! output at once take turns from the merge to the swap (`commit_turn`).

use super::merge::{Merged, merge};
use super::{Commit, Pending, Place, WriteMode, tag_files};
use crate::manifest::{MANIFEST_FILE, Manifest};
use crate::names::run_id;
use crate::{OutputError, Result, io};
use std::path::{Path, PathBuf};

/// A directory of the local file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalDir {
    path: PathBuf,
}

impl LocalDir {
    /// The directory `path` (made by the commit if it does not exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Place for LocalDir {
    fn check(&self, mode: WriteMode) -> Result<Option<Manifest>> {
        check_output(&self.path, mode != WriteMode::Error)?;
        match mode.adds() {
            true => existing(&self.path),
            false => Ok(None),
        }
    }

    fn stage(&self, mode: WriteMode) -> Result<Box<dyn Pending>> {
        Ok(Box::new(Staging::try_new(&self.path, mode)?))
    }

    fn local_path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

/// The output directory `out` must be usable: not a file, and empty unless `overwrite`.
///
/// # Errors
/// [`OutputError::NotEmpty`], or [`OutputError::Invalid`] for a file.
fn check_output(out: &Path, overwrite: bool) -> Result<()> {
    if out.exists() && !out.is_dir() {
        return Err(OutputError::Invalid(format!(
            "{} exists and is not a directory",
            out.display()
        )));
    }
    let non_empty = out.is_dir()
        && std::fs::read_dir(out)
            .map_err(io(format!("reading {}", out.display())))?
            .next()
            .is_some();
    if non_empty && !overwrite {
        return Err(OutputError::NotEmpty(out.display().to_string()));
    }
    Ok(())
}

/// The manifest of the output in `out`: `None` when there is no output (nothing there, or
/// an empty directory).
///
/// # Errors
/// [`OutputError::Invalid`] for files without a manifest: not a partout output to add to.
fn existing(out: &Path) -> Result<Option<Manifest>> {
    if !out.is_dir() || std::fs::read_dir(out).map_or(true, |mut d| d.next().is_none()) {
        return Ok(None);
    }
    if !out.join(MANIFEST_FILE).exists() {
        return Err(OutputError::Invalid(format!(
            "{} holds files but no {MANIFEST_FILE}: a run adds only to a partout output",
            out.display()
        )));
    }
    Manifest::read(out).map(Some).map_err(|e| OutputError::Io {
        context: e.context,
        source: e.source,
    })
}

/// The directory `out` is in (`.` for a bare name).
fn parent_of(out: &Path) -> &Path {
    out.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Held while a run that adds to `out` merges with the output there and swaps its staging
/// in: an exclusive lock on `out`'s parent directory (Linux's `flock`), so that runs adding
/// to one output at once commit in turn, each merging with what the one before it left,
/// and none swaps in a merge that misses another's files. Released when dropped (and by the
/// system when the process dies). Elsewhere, and on a file system without locks, none: one
/// run at a time may add to an output.
fn commit_turn(out: &Path) -> Result<Option<std::fs::File>> {
    #[cfg(target_os = "linux")]
    {
        let parent = parent_of(out);
        let locking = || format!("locking {} for the commit", parent.display());
        let dir = std::fs::File::open(parent).map_err(io(locking()))?;
        match rustix::fs::flock(&dir, rustix::fs::FlockOperation::LockExclusive) {
            Ok(()) => Ok(Some(dir)),
            // A file system without locks: one run at a time, as elsewhere.
            Err(e) if e == rustix::io::Errno::NOLCK || e == rustix::io::Errno::OPNOTSUPP => {
                Ok(None)
            }
            Err(e) => Err(io(locking())(e.into())),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = out;
        Ok(None)
    }
}

/// A fresh temporary directory next to `out`, removed on drop unless published.
#[derive(Debug)]
struct Staging {
    path: PathBuf,
    out: PathBuf,
    mode: WriteMode,
    published: bool,
}

impl Staging {
    /// A fresh directory next to `out` (same file system, so the final rename is atomic),
    /// named `.NAME.partout-PID-N` (N counting this process's runs). Those of earlier runs
    /// whose process is gone (killed mid-run) are removed first.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] when `out` names no directory; [`OutputError::Io`].
    fn try_new(out: &Path, mode: WriteMode) -> Result<Self> {
        let name = out
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty() && *n != "." && *n != "..");
        let Some(name) = name else {
            return Err(OutputError::Invalid(format!(
                "the output must name a directory, got {}",
                out.display()
            )));
        };
        let parent = parent_of(out);
        std::fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
        let prefix = format!(".{name}.partout-");
        remove_stale(parent, &prefix);
        // Each run of this process a directory of its own (runs may add to one output from
        // several threads); one by that name is a dead process's, whose id this one has.
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = parent.join(format!("{prefix}{}-{run}", std::process::id()));
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(io(format!("removing {}", path.display())))?;
        }
        std::fs::create_dir(&path).map_err(io(format!("creating {}", path.display())))?;
        Ok(Self {
            path,
            out: out.to_path_buf(),
            mode,
            published: false,
        })
    }

    /// The run's files renamed with its id, every file of the output there but its manifest
    /// and the `dropped` ones hard-linked beside them: the staging directory holds the output
    /// as it will be, but its manifest.
    fn add_to(&self, old: Manifest, mut new: Manifest, commit: &Commit<'_>) -> Result<Manifest> {
        let run = run_id();
        tag_files(&mut new, &run, &mut |name, tagged| {
            let (from, to) = (self.path.join(name), self.path.join(tagged));
            std::fs::rename(&from, &to).map_err(io(format!("renaming {}", from.display())))
        })?;
        let Merged { manifest, dropped } = merge(old, new, self.mode)?;
        if (commit.cancelled)() {
            return Err(OutputError::Cancelled);
        }
        let dropped: std::collections::HashSet<PathBuf> =
            dropped.iter().map(|name| self.out.join(name)).collect();
        let old_manifest = self.out.join(MANIFEST_FILE);
        link_tree(&self.out, &self.path, &|file| {
            file != old_manifest && !dropped.contains(file)
        })?;
        Ok(manifest)
    }
}

/// Hard-links every file under `from` that `keep` keeps to the same path under `to`, its
/// directories made.
fn link_tree(from: &Path, to: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<()> {
    let mut dirs = vec![from.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let listed = std::fs::read_dir(&dir).map_err(io(format!("reading {}", dir.display())))?;
        for entry in listed {
            let path = entry
                .map_err(io(format!("reading {}", dir.display())))?
                .path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if !keep(&path) {
                continue;
            }
            let Ok(relative) = path.strip_prefix(from) else {
                continue;
            };
            let target = to.join(relative);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(io(format!("creating {}", parent.display())))?;
            }
            std::fs::hard_link(&path, &target).map_err(io(format!(
                "linking {} into the new output",
                path.display()
            )))?;
        }
    }
    Ok(())
}

/// Puts `staged` in place of `out`: renamed when nothing is there; else swapped with it at
/// once (Linux), the old output left at `staged`. Whether the old output is at `staged`.
fn swap_in(staged: &Path, out: &Path) -> std::io::Result<bool> {
    if !out.exists() {
        std::fs::rename(staged, out)?;
        return Ok(false);
    }
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        match renameat_with(CWD, staged, CWD, out, RenameFlags::EXCHANGE) {
            Ok(()) => return Ok(true),
            // A file system without the exchange: renamed in two steps, as elsewhere.
            Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {}
            Err(e) => return Err(e.into()),
        }
    }
    let aside = staged.with_extension("old");
    std::fs::rename(out, &aside)?;
    std::fs::rename(staged, out)?;
    std::fs::rename(&aside, staged)?;
    Ok(true)
}

impl Pending for Staging {
    fn dir(&self) -> &Path {
        &self.path
    }

    /// Writes the manifest (merged with the output there, when the run adds to it) into the
    /// staged output, then swaps it with the output directory; the old one is removed after.
    fn commit(mut self: Box<Self>, manifest: Manifest, commit: &Commit<'_>) -> Result<Manifest> {
        if (commit.cancelled)() {
            return Err(OutputError::Cancelled);
        }
        let _turn = match self.mode.adds() {
            true => commit_turn(&self.out)?,
            false => None,
        };
        let manifest = match self.mode.adds() {
            true => match existing(&self.out)? {
                Some(old) => self.add_to(old, manifest, commit)?,
                None => manifest,
            },
            false => manifest,
        };
        if (commit.cancelled)() {
            return Err(OutputError::Cancelled);
        }
        manifest.write(&self.path).map_err(|e| OutputError::Io {
            context: e.context,
            source: e.source,
        })?;
        if (commit.cancelled)() {
            return Err(OutputError::Cancelled);
        }
        let out = self.out.clone();
        let swapped = swap_in(&self.path, &out)
            .map_err(io(format!("moving the output into {}", out.display())))?;
        self.published = true;
        if swapped {
            // The old output, now where the staging directory was: nothing names it.
            let _ = std::fs::remove_dir_all(&self.path);
        }
        Ok(manifest)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Removes `parent/{prefix}PID` directories whose process is gone, where the system can tell
/// (Linux's `/proc`).
pub(super) fn remove_stale(parent: &Path, prefix: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let pid = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid
            && !Path::new("/proc").join(pid.to_string()).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_staging_leaves_nothing_and_published_staging_replaces_the_output() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let staging = Staging::try_new(&out, WriteMode::Overwrite).unwrap();
        std::fs::write(staging.dir().join("a"), "x").unwrap();
        let path = staging.dir().to_path_buf();
        drop(staging);
        assert!(!path.exists());

        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("old"), "x").unwrap();
        assert!(matches!(
            check_output(&out, false),
            Err(OutputError::NotEmpty(_))
        ));
        check_output(&out, true).unwrap();
        let (manifest, _) = crate::manifest::tests::presto_files();
        // Cancelled, a commit leaves the old output and nothing of the new.
        let cancelled = Box::new(Staging::try_new(&out, WriteMode::Overwrite).unwrap());
        let left = cancelled.dir().to_path_buf();
        let yes = || true;
        let refused = cancelled.commit(
            manifest.clone(),
            &Commit {
                memory: 0,
                cancelled: &yes,
            },
        );
        assert!(matches!(refused, Err(OutputError::Cancelled)));
        assert!(out.join("old").exists() && !left.exists());
        let staging = Box::new(Staging::try_new(&out, WriteMode::Overwrite).unwrap());
        std::fs::write(staging.dir().join("new"), "y").unwrap();
        let no = || false;
        let go_on = Commit {
            memory: 0,
            cancelled: &no,
        };
        let committed = staging.commit(manifest.clone(), &go_on).unwrap();
        assert_eq!(committed, manifest);
        assert!(out.join("new").exists() && !out.join("old").exists());
        assert_eq!(
            Manifest::read(&out).unwrap(),
            manifest,
            "the manifest is written"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn leftovers_of_dead_processes_are_removed() {
        if !Path::new("/proc/self").exists() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // No process has a pid this large (Linux caps them at 2^22).
        let dead = dir.path().join(".out.partout-4294967295");
        std::fs::create_dir(&dead).unwrap();
        let staging = Staging::try_new(&dir.path().join("out"), WriteMode::Error).unwrap();
        assert!(!dead.exists());
        assert!(staging.dir().exists());
    }
}

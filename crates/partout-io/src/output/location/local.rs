//! A directory of the local file system as an output's location. A run writes into a staging
//! directory, a hidden sibling of the output directory, and renames it into place only when
//! everything succeeded, so a failed or interrupted run never leaves output that looks
//! complete. Leftovers of runs whose process is gone are removed.

use super::{Commit, Pending, Place};
use crate::manifest::Manifest;
use crate::output::{OutputError, Result, io};
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
    fn check(&self, overwrite: bool) -> Result<()> {
        check_output(&self.path, overwrite)
    }

    fn stage(&self) -> Result<Box<dyn Pending>> {
        Ok(Box::new(Staging::try_new(&self.path)?))
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

/// A fresh temporary directory next to `out`, removed on drop unless published.
#[derive(Debug)]
struct Staging {
    path: PathBuf,
    out: PathBuf,
    published: bool,
}

impl Staging {
    /// A fresh directory next to `out` (same file system, so the final rename is atomic),
    /// named `.NAME.partout-PID`. Those of earlier runs whose process is gone (killed
    /// mid-run) are removed first.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] when `out` names no directory; [`OutputError::Io`].
    fn try_new(out: &Path) -> Result<Self> {
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
        let parent = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
        let prefix = format!(".{name}.partout-");
        remove_stale(parent, &prefix);
        let path = parent.join(format!("{prefix}{}", std::process::id()));
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(io(format!("removing {}", path.display())))?;
        }
        std::fs::create_dir(&path).map_err(io(format!("creating {}", path.display())))?;
        Ok(Self {
            path,
            out: out.to_path_buf(),
            published: false,
        })
    }
}

impl Pending for Staging {
    fn dir(&self) -> &Path {
        &self.path
    }

    /// Writes the manifest into the staged output, then moves it to the output directory,
    /// replacing what is there.
    fn commit(mut self: Box<Self>, manifest: Manifest, commit: &Commit<'_>) -> Result<Manifest> {
        if (commit.cancelled)() {
            return Err(OutputError::Cancelled);
        }
        manifest.write(&self.path).map_err(|e| OutputError::Io {
            context: e.context,
            source: e.source,
        })?;
        let out = self.out.clone();
        let out = out.as_path();
        if out.exists() {
            std::fs::remove_dir_all(out).map_err(io(format!("replacing {}", out.display())))?;
        }
        std::fs::rename(&self.path, out)
            .map_err(io(format!("moving the output into {}", out.display())))?;
        self.published = true;
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
        let staging = Staging::try_new(&out).unwrap();
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
        let cancelled = Box::new(Staging::try_new(&out).unwrap());
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
        let staging = Box::new(Staging::try_new(&out).unwrap());
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
        let staging = Staging::try_new(&dir.path().join("out")).unwrap();
        assert!(!dead.exists());
        assert!(staging.dir().exists());
    }
}

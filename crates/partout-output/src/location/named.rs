//! A file name pattern applied to the staged files before they are committed: each file
//! renamed in the staging directory, and the manifest naming them by their new names.

use crate::manifest::Manifest;
use crate::names::run_id;
use crate::{FileNamePattern, OutputError, Result};
use std::collections::HashSet;
use std::path::Path;

impl FileNamePattern {
    /// Renames each file `manifest` lists in `dir` (the run's staging directory) after the
    /// pattern, in its directory, and records the pattern in the manifest: destination `p`'s
    /// `{dest}` is `p % destinations_per_directory`, its files' `{part}` their order.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] when two files would share a name (the pattern was not
    /// [`check`](Self::check)ed for this run); [`OutputError::Io`] for a rename that fails.
    pub fn apply(
        &self,
        dir: &Path,
        manifest: &mut Manifest,
        destinations_per_directory: u32,
    ) -> Result<()> {
        let run = run_id();
        let mut seen = HashSet::new();
        let per_directory = destinations_per_directory.max(1) as usize;
        for entry in &mut manifest.destinations {
            let dest = entry.destination as usize % per_directory;
            for (part, file) in entry.files.iter_mut().flatten().enumerate() {
                let (directory, old) = match file.name.rsplit_once('/') {
                    Some((directory, old)) => (Some(directory), old),
                    None => (None, file.name.as_str()),
                };
                let extension = old.rsplit_once('.').map_or("", |(_, e)| e);
                let new = self.name(dest, part, &run, extension);
                let new = match directory {
                    Some(directory) => format!("{directory}/{new}"),
                    None => new,
                };
                if !seen.insert(new.clone()) {
                    return Err(OutputError::Invalid(format!(
                        "file name pattern {:?} gives two files the name {new:?}",
                        self.text
                    )));
                }
                let (from, to) = (dir.join(&file.name), dir.join(&new));
                std::fs::rename(&from, &to).map_err(|source| OutputError::Io {
                    context: format!("naming {} {}", from.display(), to.display()),
                    source,
                })?;
                file.name = new;
            }
        }
        manifest.file_name = Some(self.clone());
        Ok(())
    }
}

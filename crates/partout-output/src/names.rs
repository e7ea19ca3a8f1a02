//! [`FileNamePattern`]: the names of an output's files from a pattern the user gives
//! (`--file-name "data-{dest}-{part}-{uuid}"`), checked at once against what could make two
//! files share a name, and given to the files once the run has written them
//! ([`FileNamePattern::apply`]), before the commit.
//!
//! ```text
//!  pattern ── parse (placeholders known, a name and not a path, not hidden)
//!          ── check (destinations per directory, rollover, runs added to an output)
//!  run ends ─► apply: each file renamed in the staging directory, the manifest naming them
//!              ─► commit (the names kept as they are: no run id added)
//! ```

use crate::{OutputError, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a pattern's `{…}` may name.
const PLACEHOLDERS: &str = "{dest}, {part}, {uuid}, {run}";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    /// The destination's number (in the Hive layout, its bucket within its directory).
    Dest,
    /// The file's number among its destination's files (0 without rollover).
    Part,
    /// A random UUID, one a file.
    Uuid,
    /// The run's id, one a run.
    Run,
}

/// The name of each file an output writes, from a pattern with placeholders: `{dest}` (the
/// destination's number, five digits; in the Hive layout its bucket within its value's
/// directory), `{part}` (the file's number among its destination's files, five digits),
/// `{uuid}` (random, one a file) and `{run}` (the run's id). The format's extension is added
/// unless the pattern ends with it; a Hive layout's files stay in their values' directories.
///
/// ```
/// use partout_output::FileNamePattern;
///
/// let pattern: FileNamePattern = "orders-{dest}-{part}".parse().unwrap();
/// assert_eq!(pattern.name(3, 1, "r1", "parquet"), "orders-00003-00001.parquet");
/// let err = "x-{i}".parse::<FileNamePattern>().unwrap_err();
/// assert!(err.contains("{i}"), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileNamePattern {
    pub(crate) text: String,
    pieces: Vec<Piece>,
}

impl FileNamePattern {
    /// Checks that no two files of a run can share a name: `{dest}` (or `{uuid}`) when a
    /// directory holds more than one destination's files (`destinations_per_directory`),
    /// `{part}` (or `{uuid}`) when files roll over, and `{run}` (or `{uuid}`) when the run
    /// adds files to an output already there or writes to an object store (whose objects are
    /// never replaced in place: another run's of the same name would be).
    ///
    /// # Errors
    /// [`OutputError::Invalid`] naming the placeholder the pattern needs.
    pub fn check(
        &self,
        destinations_per_directory: u32,
        rolls_over: bool,
        beside_others: bool,
    ) -> Result<()> {
        let has = |piece: &Piece| self.pieces.contains(piece) || self.pieces.contains(&Piece::Uuid);
        let needs = |placeholder: &str, why: &str| {
            Err(OutputError::Invalid(format!(
                "file name pattern {:?} would give two files one name: {why}, so it needs \
                 {placeholder} (or {{uuid}})",
                self.text
            )))
        };
        if destinations_per_directory > 1 && !has(&Piece::Dest) {
            return needs(
                "{dest}",
                &format!("a directory holds {destinations_per_directory} destinations' files"),
            );
        }
        if rolls_over && !has(&Piece::Part) {
            return needs("{part}", "a destination's files roll over");
        }
        if beside_others && !has(&Piece::Run) {
            return needs(
                "{run}",
                "the run writes beside the files of other runs (appending, replacing \
                 partitions, or in an object store)",
            );
        }
        Ok(())
    }

    /// The name of destination `dest`'s file `part` in run `run`, with `extension` (added
    /// unless the pattern ends with it).
    pub fn name(&self, dest: usize, part: usize, run: &str, extension: &str) -> String {
        let mut name = String::with_capacity(self.text.len() + 16);
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => name.push_str(text),
                Piece::Dest => name.push_str(&format!("{dest:05}")),
                Piece::Part => name.push_str(&format!("{part:05}")),
                Piece::Uuid => name.push_str(&uuid::Uuid::new_v4().to_string()),
                Piece::Run => name.push_str(run),
            }
        }
        let dotted = format!(".{extension}");
        if !name.ends_with(&dotted) {
            name.push_str(&dotted);
        }
        name
    }
}

/// An id for one run, in the names of the files it adds to an output (and of every object it
/// writes to a store): the time in nanoseconds and the process, in hex.
pub(crate) fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}{:x}", nanos & 0xffff_ffff_ffff, std::process::id())
}

/// Reads a pattern: text and `{dest}`, `{part}`, `{uuid}`, `{run}`.
impl std::str::FromStr for FileNamePattern {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let refuse = |why: &str| Err(format!("file name pattern {text:?}: {why}"));
        if text.is_empty() {
            return refuse("it is empty");
        }
        if text.contains(['/', '\\']) || text == "." || text == ".." {
            return refuse("a file's name, not a path (the layout makes the directories)");
        }
        if text.starts_with(['.', '_']) {
            return refuse(
                "a name starting with '.' or '_' is hidden from readers (Spark, Hive, DuckDB \
                 and pyarrow pass such files over)",
            );
        }
        let mut pieces = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let Some(open) = rest.find(['{', '}']) else {
                pieces.push(Piece::Text(rest.to_string()));
                break;
            };
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_string()));
            }
            if rest[open..].starts_with('}') {
                return refuse("a '}' that closes no placeholder");
            }
            let Some(close) = rest[open..].find('}') else {
                return refuse("a '{' that is never closed");
            };
            pieces.push(match &rest[open..open + close + 1] {
                "{dest}" => Piece::Dest,
                "{part}" => Piece::Part,
                "{uuid}" => Piece::Uuid,
                "{run}" => Piece::Run,
                other => {
                    return refuse(&format!(
                        "unknown placeholder {other} (the placeholders: {PLACEHOLDERS})"
                    ));
                }
            });
            rest = &rest[open + close + 1..];
        }
        Ok(Self {
            text: text.to_string(),
            pieces,
        })
    }
}

impl fmt::Display for FileNamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// In the manifest, the pattern as given.
impl Serialize for FileNamePattern {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for FileNamePattern {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_placeholders_and_refuses_what_is_not_a_file_name() {
        let pattern: FileNamePattern = "d{dest}p{part}-{run}-{uuid}.parquet".parse().unwrap();
        let name = pattern.name(12, 3, "abc", "parquet");
        let (head, uuid) = name.split_at("d00012p00003-abc-".len());
        assert_eq!(head, "d00012p00003-abc-");
        assert_eq!(uuid.len(), 36 + ".parquet".len(), "{name}");
        assert_ne!(pattern.name(12, 3, "abc", "parquet"), name, "a UUID a file");
        assert_eq!(
            "x".parse::<FileNamePattern>()
                .unwrap()
                .name(0, 0, "r", "arrows"),
            "x.arrows"
        );
        for (bad, says) in [
            ("", "empty"),
            ("a/b", "not a path"),
            (".x", "hidden"),
            ("_x{dest}", "hidden"),
            ("x{dest", "never closed"),
            ("x}", "closes no placeholder"),
            ("x{i}", "unknown placeholder {i}"),
        ] {
            let err = bad.parse::<FileNamePattern>().unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
        let json = serde_json::to_string(&pattern).unwrap();
        assert_eq!(
            serde_json::from_str::<FileNamePattern>(&json).unwrap(),
            pattern
        );
    }

    #[test]
    fn a_pattern_that_could_give_two_files_one_name_is_refused() {
        let plain: FileNamePattern = "data".parse().unwrap();
        plain.check(1, false, false).unwrap();
        for (pattern, per_directory, rolls, beside, says) in [
            ("data", 2, false, false, "{dest}"),
            ("data-{dest}", 2, true, false, "{part}"),
            ("data-{dest}-{part}", 2, true, true, "{run}"),
        ] {
            let pattern: FileNamePattern = pattern.parse().unwrap();
            let err = pattern
                .check(per_directory, rolls, beside)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{pattern}: {err}");
        }
        let unique: FileNamePattern = "{uuid}".parse().unwrap();
        unique.check(100, true, true).unwrap();
    }
}

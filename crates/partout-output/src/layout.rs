//! [`Layout`]: how an output's files are laid out — a file per destination, or a shuffle
//! file and index per worker.

use serde::{Deserialize, Serialize};

/// How an output's files are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// One file per destination, written by all workers.
    #[default]
    Files,
    /// One data file and an index of byte ranges per worker (IPC or Presto pages).
    Shuffle,
}

/// Reads `files` and `shuffle`.
impl std::str::FromStr for Layout {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "files" => Ok(Self::Files),
            "shuffle" => Ok(Self::Shuffle),
            _ => Err(format!("unknown layout {text:?} (one of: files, shuffle)")),
        }
    }
}

/// The name [`FromStr`](std::str::FromStr) reads back.
impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Files => "files",
            Self::Shuffle => "shuffle",
        })
    }
}

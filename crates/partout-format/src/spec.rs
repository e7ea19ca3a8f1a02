//! The names of what an output is written as: its [`Format`] and its [`Compression`] (with a
//! [`ZstdLevel`]). The one vocabulary of the workspace: the job's options, the command line,
//! the Python package, the Flight service's `create` action, Ballista's shuffle codec and the
//! manifests all read and write these names, and nothing else spells them.
//!
//! ```text
//!  "parquet" | "ipc" (or "arrow") | "presto"          ─► Format
//!  "none" | "snappy" | "lz4" | "zstd" | "zstd:LEVEL"   ─► Compression
//!  Format × Compression ─► Encoding (streams: ipc, presto)   or Parquet files (partout-output)
//! ```
//!
//! Which compressions a format takes is checked where the two meet: [`Encoding`] for the
//! streams, partout-output's spec for Parquet.
//!
//! [`Encoding`]: crate::Encoding

use crate::{FormatError, Result};
use arrow_schema::DataType;

/// What each destination's output holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum Format {
    /// Parquet files, each written whole (`.parquet`).
    #[default]
    Parquet,
    /// Arrow IPC: a stream per destination (`.arrows`), the schema, a record batch per flush,
    /// the end-of-stream marker; or, partitioning by value, an IPC file per value (`.arrow`).
    Ipc,
    /// Presto SerializedPages, one per flush, back to back (`.presto`; checksummed; with
    /// [`Compression::Lz4`], bodies are raw LZ4 blocks as Presto's exchange sends them).
    Presto,
}

impl Format {
    /// Every format, in the order their names are listed.
    pub const ALL: [Self; 3] = [Self::Parquet, Self::Ipc, Self::Presto];

    /// The compression of outputs in this format when none is asked for: Snappy for Parquet,
    /// as pyarrow, DuckDB and Spark write it; none for IPC and Presto pages.
    ///
    /// ```
    /// use partout_format::{Compression, Format};
    ///
    /// assert_eq!(Format::Parquet.default_compression(), Compression::Snappy);
    /// assert_eq!(Format::Presto.default_compression(), Compression::None);
    /// ```
    pub fn default_compression(self) -> Compression {
        match self {
            Self::Parquet => Compression::Snappy,
            Self::Ipc | Self::Presto => Compression::None,
        }
    }

    /// Whether the format is a stream of messages per destination, written as it is flushed
    /// (an [`Encoding`](crate::Encoding)); Parquet files are written whole.
    pub fn is_stream(self) -> bool {
        !matches!(self, Self::Parquet)
    }

    /// Whether columns of `data_type` can be written in this format by the stream encoders
    /// (Parquet's own limits are the parquet writer's, checked by partout-output).
    ///
    /// ```
    /// use arrow_schema::DataType;
    /// use partout_format::Format;
    ///
    /// assert!(Format::Presto.can_encode(&DataType::Int64));
    /// assert!(!Format::Presto.can_encode(&DataType::UInt64));
    /// assert!(Format::Ipc.can_encode(&DataType::UInt64));
    /// ```
    pub fn can_encode(self, data_type: &DataType) -> bool {
        match self {
            // arrow-rs writes every type it has.
            Self::Ipc | Self::Parquet => true,
            Self::Presto => crate::presto::can_encode(data_type),
        }
    }

    /// The name used in messages: `Parquet`, `Arrow IPC`, `Presto`.
    pub fn title(self) -> &'static str {
        match self {
            Self::Parquet => "Parquet",
            Self::Ipc => "Arrow IPC",
            Self::Presto => "Presto",
        }
    }
}

/// Reads `parquet`, `ipc` (or `arrow`) and `presto`.
///
/// ```
/// use partout_format::Format;
///
/// assert_eq!("arrow".parse::<Format>().unwrap(), Format::Ipc);
/// let err = "csv".parse::<Format>().unwrap_err().to_string();
/// assert!(err.contains("unknown format \"csv\""), "{err}");
/// ```
impl std::str::FromStr for Format {
    type Err = FormatError;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "parquet" => Ok(Self::Parquet),
            "ipc" | "arrow" => Ok(Self::Ipc),
            "presto" => Ok(Self::Presto),
            other => Err(FormatError::InvalidArgument(format!(
                "unknown format {other:?}: expected \"parquet\", \"ipc\" or \"presto\" \
                 (\"arrow\" is ipc too)"
            ))),
        }
    }
}

/// The name [`FromStr`](std::str::FromStr) reads back.
impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Parquet => "parquet",
            Self::Ipc => "ipc",
            Self::Presto => "presto",
        })
    }
}

/// Compression of the outputs: of Parquet pages, of Arrow IPC buffers (the IPC format's own
/// body compression, per buffer, so any Arrow reader decodes it), or of Presto page bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// None (the default of IPC and Presto outputs).
    #[default]
    None,
    /// Snappy (Parquet only; its default).
    Snappy,
    /// LZ4 (Parquet: LZ4_RAW pages; IPC: LZ4_FRAME buffers; Presto: raw LZ4 page bodies).
    Lz4,
    /// Zstandard at a level (Parquet: levels 1 to 22; IPC: any of zstd's, negative ones too;
    /// not Presto pages). `zstd` alone is level 3, zstd's default.
    Zstd(ZstdLevel),
}

impl Compression {
    /// ZSTD at zstd's default level ([`ZstdLevel::DEFAULT`]).
    pub const ZSTD: Self = Self::Zstd(ZstdLevel::DEFAULT);
}

/// Reads the names every front end takes: `none`, `snappy`, `lz4`, `zstd` (level 3) and
/// `zstd:N` (level N, see [`ZstdLevel::from_name`]).
///
/// ```
/// use partout_format::{Compression, ZstdLevel};
///
/// assert_eq!("zstd:-5".parse::<Compression>().unwrap(), Compression::Zstd(ZstdLevel::try_new(-5).unwrap()));
/// assert_eq!("zstd".parse::<Compression>().unwrap().to_string(), "zstd");
/// assert!("gzip".parse::<Compression>().unwrap_err().to_string().contains("\"gzip\""));
/// ```
impl std::str::FromStr for Compression {
    type Err = FormatError;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "none" => Ok(Self::None),
            "snappy" => Ok(Self::Snappy),
            "lz4" => Ok(Self::Lz4),
            _ => match ZstdLevel::from_name(name) {
                Some(level) => level.map(Self::Zstd),
                None => Err(FormatError::InvalidArgument(format!(
                    "unknown compression {name:?}: expected \"none\", \"snappy\", \"lz4\", \
                     \"zstd\" or \"zstd:LEVEL\""
                ))),
            },
        }
    }
}

/// The name [`FromStr`](std::str::FromStr) reads back.
impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Snappy => f.write_str("snappy"),
            Self::Lz4 => f.write_str("lz4"),
            Self::Zstd(level) => level.fmt(f),
        }
    }
}

/// By name, as [`Display`](std::fmt::Display) writes it.
#[cfg(feature = "serde")]
impl serde::Serialize for Compression {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// By name, as [`FromStr`](std::str::FromStr) reads it.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Compression {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <String as serde::Deserialize>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// A Zstandard compression level, checked against the range of the zstd library partout is
/// built with (-131072 to 22 for zstd 1.5): negative levels trade ratio for speed, level 1 is
/// the fastest of the usual ones (Spark's shuffle default), 3 is zstd's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZstdLevel(i32);

impl ZstdLevel {
    /// zstd's default level, 3: the one arrow-ipc writes with when told no level, so plain
    /// `zstd` output is the same bytes as any Arrow writer's (and Ballista's).
    pub const DEFAULT: Self = Self(3);

    /// `level`, when zstd takes it.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] naming the level and the range.
    pub fn try_new(level: i32) -> Result<Self> {
        let range = zstd::compression_level_range();
        if range.contains(&level) {
            Ok(Self(level))
        } else {
            Err(FormatError::InvalidArgument(format!(
                "ZSTD level {level} is outside zstd's levels {} to {}",
                range.start(),
                range.end()
            )))
        }
    }

    /// The level.
    pub fn get(self) -> i32 {
        self.0
    }

    /// The level a compression's name gives: `zstd` is [`DEFAULT`](Self::DEFAULT), `zstd:N`
    /// is level N; `None` for a name that is not ZSTD's.
    ///
    /// ```
    /// use partout_format::ZstdLevel;
    ///
    /// assert_eq!(ZstdLevel::from_name("zstd").unwrap().unwrap(), ZstdLevel::DEFAULT);
    /// assert_eq!(ZstdLevel::from_name("zstd:1").unwrap().unwrap().get(), 1);
    /// assert!(ZstdLevel::from_name("lz4").is_none());
    /// let err = ZstdLevel::from_name("zstd:fast").unwrap().unwrap_err().to_string();
    /// assert!(err.contains("\"fast\" is not a whole number"), "{err}");
    /// ```
    ///
    /// # Errors
    /// (Inside the `Some`) a level that is not a whole number, or not zstd's.
    pub fn from_name(name: &str) -> Option<Result<Self>> {
        let level = match name.strip_prefix("zstd")? {
            "" => return Some(Ok(Self::DEFAULT)),
            suffix => suffix.strip_prefix(':')?,
        };
        Some(match level.parse::<i32>() {
            Ok(level) => Self::try_new(level),
            Err(_) => Err(FormatError::InvalidArgument(format!(
                "ZSTD level {level:?} is not a whole number (zstd:LEVEL, e.g. zstd:1)"
            ))),
        })
    }
}

impl Default for ZstdLevel {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Its name: `zstd` at the default level, `zstd:N` otherwise.
impl std::fmt::Display for ZstdLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == Self::DEFAULT {
            f.write_str("zstd")
        } else {
            write!(f, "zstd:{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for format in Format::ALL {
            assert_eq!(format.to_string().parse::<Format>().unwrap(), format);
        }
        for compression in [
            Compression::None,
            Compression::Snappy,
            Compression::Lz4,
            Compression::ZSTD,
            Compression::Zstd(ZstdLevel::try_new(1).unwrap()),
            Compression::Zstd(ZstdLevel::try_new(-7).unwrap()),
        ] {
            let name = compression.to_string();
            assert_eq!(name.parse::<Compression>().unwrap(), compression, "{name}");
        }
        assert!("zstd:99".parse::<Compression>().is_err());
        assert!("brotli".parse::<Compression>().is_err());
    }
}

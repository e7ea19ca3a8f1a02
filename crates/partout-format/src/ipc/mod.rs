//! Arrow IPC streams per destination, sans-IO.
//!
//! ```text
//!  IpcStreamEncoder::try_new(schema) ─ encode(batch) ─► [schema][dictionaries][batch]
//!                                     ─ encode(batch) ─► [dictionaries][batch]
//!                                     ─ finish()      ─► [end of stream]
//! ```
//!
//! Each call appends the bytes it produced to a caller's buffer: the encoder does no IO and
//! holds nothing between calls but the stream's state (schema sent, dictionaries sent). Body
//! compression is the IPC format's own (LZ4_FRAME or ZSTD, per buffer), so any Arrow reader
//! decodes it.
//!
//! Modules: `encode` (the stream encoders, and the compaction of view columns), `check`
//! (decoding an untrusted stream after checking everything arrow-ipc's reader trusts),
//! [`frame`] (the messages' length prefixes, and the bounds of compressed buffers).
//!
//! View columns (Utf8View, BinaryView) of a destination's slice still point into the whole
//! input batch's data buffers; encoding them as they are would write those buffers whole into
//! every destination's stream. The encoder compacts a view column whose buffers hold more than
//! the bytes its rows reference, keeping the type.

use crate::Result;
use arrow_ipc::CompressionType;
use arrow_ipc::writer::IpcWriteOptions;
use arrow_schema::DataType;

mod check;
mod encode;
pub mod frame;
pub mod runs;

pub use check::{MessageCheck, convert_schema, decode_stream};
pub use encode::IpcStreamEncoder;
pub(crate) use encode::SharedIpcStreams;

/// Body compression of an IPC stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Buffers as they are.
    #[default]
    None,
    /// LZ4 frame format, per buffer.
    Lz4Frame,
    /// Zstandard at a level, per buffer.
    Zstd(ZstdLevel),
}

impl Compression {
    /// ZSTD at zstd's default level ([`ZstdLevel::DEFAULT`]).
    pub const ZSTD: Self = Self::Zstd(ZstdLevel::DEFAULT);
}

/// Reads the names every front end takes: `none`, `lz4`, `zstd` (level 3) and `zstd:N`
/// (level N, see [`ZstdLevel::from_name`]).
///
/// ```
/// use partout_format::ipc::{Compression, ZstdLevel};
///
/// assert_eq!("zstd:-5".parse::<Compression>().unwrap(), Compression::Zstd(ZstdLevel::try_new(-5).unwrap()));
/// assert_eq!("zstd".parse::<Compression>().unwrap().to_string(), "zstd");
/// assert!("gzip".parse::<Compression>().unwrap_err().to_string().contains("\"gzip\""));
/// ```
impl std::str::FromStr for Compression {
    type Err = crate::FormatError;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "none" => Ok(Self::None),
            "lz4" => Ok(Self::Lz4Frame),
            _ => match ZstdLevel::from_name(name) {
                Some(level) => level.map(Self::Zstd),
                None => Err(crate::FormatError::InvalidArgument(format!(
                    "unknown compression {name:?}: expected \"none\", \"lz4\", \"zstd\" or \"zstd:LEVEL\""
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
            Self::Lz4Frame => f.write_str("lz4"),
            Self::Zstd(level) => level.fmt(f),
        }
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
    /// [`FormatError::InvalidArgument`](crate::FormatError::InvalidArgument) naming the
    /// level and the range.
    pub fn try_new(level: i32) -> Result<Self> {
        let range = zstd::compression_level_range();
        if range.contains(&level) {
            Ok(Self(level))
        } else {
            Err(crate::FormatError::InvalidArgument(format!(
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
    /// is level N; `None` for a name that is not ZSTD's. The one reading of ZSTD names, for
    /// every front end (job, CLI, Flight, Python, Ballista's codec setting).
    ///
    /// ```
    /// use partout_format::ipc::ZstdLevel;
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
            Err(_) => Err(crate::FormatError::InvalidArgument(format!(
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

/// The IPC writing options of every stream partout writes: arrow-ipc's defaults, with
/// `compression` (and its ZSTD level).
///
/// # Errors
/// When arrow-ipc was built without the codec.
pub fn ipc_options(compression: Compression) -> Result<IpcWriteOptions> {
    let options = IpcWriteOptions::default();
    Ok(match compression {
        Compression::None => options,
        Compression::Lz4Frame => options.try_with_compression(Some(CompressionType::LZ4_FRAME))?,
        Compression::Zstd(level) => options
            .try_with_compression(Some(CompressionType::ZSTD))?
            .try_with_compression_level(Some(level.get()))?,
    })
}

/// Whether `data_type` or a type nested in it at any depth (list items, map entries, struct
/// and union fields, dictionary values, run ends and run values) is one `is` picks.
///
/// ```
/// use arrow_schema::{DataType, Field};
/// use partout_format::ipc::holds;
/// use std::sync::Arc;
///
/// let list = DataType::List(Arc::new(Field::new("item", DataType::Float16, true)));
/// assert!(holds(&list, &|t| *t == DataType::Float16));
/// assert!(!holds(&list, &|t| *t == DataType::Utf8));
/// ```
pub fn holds(data_type: &DataType, is: &dyn Fn(&DataType) -> bool) -> bool {
    is(data_type)
        || match data_type {
            DataType::Dictionary(_, values) => holds(values, is),
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => holds(f.data_type(), is),
            DataType::Struct(fields) => fields.iter().any(|f| holds(f.data_type(), is)),
            DataType::Union(fields, _) => fields.iter().any(|(_, f)| holds(f.data_type(), is)),
            DataType::RunEndEncoded(runs, values) => {
                holds(runs.data_type(), is) || holds(values.data_type(), is)
            }
            _ => false,
        }
}

/// Whether values of `data_type` hold a dictionary, at any depth.
fn holds_dictionary(data_type: &DataType) -> bool {
    holds(data_type, &|t| matches!(t, DataType::Dictionary(..)))
}

//! [`JobOptions`]: what a repartition job is asked to do, as plain values; checked once by
//! [`Job::try_new`](crate::Job::try_new).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How rows find their destination: partout-core's scheme, named and parsed there
/// (`hash`, `spark`, `round-robin`, `range`).
pub use partout_core::ids::Scheme;

/// What each destination's output holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Parquet (`.parquet`): rows staged, then each destination's file written whole, in
    /// row groups of up to 1Mi rows as the memory limit allows.
    #[default]
    Parquet,
    /// An Arrow IPC stream (`.arrows`).
    Ipc,
    /// Presto SerializedPages, back to back (`.presto`).
    Presto,
}

/// Compression of the outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// None (the default of IPC and Presto outputs).
    #[default]
    None,
    /// Snappy (Parquet only; its default).
    Snappy,
    /// LZ4 (Parquet: LZ4_RAW pages; IPC: LZ4_FRAME buffers; Presto: raw LZ4 page bodies).
    Lz4,
    /// ZSTD (Parquet and IPC).
    Zstd,
}

/// Where the outputs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// One file per destination, written by all workers.
    #[default]
    Files,
    /// One data file and an index of byte ranges per worker (IPC or Presto pages).
    Shuffle,
}

/// `FromStr` and `Display` by the names the command line uses.
macro_rules! named {
    ($type:ident: $($variant:ident = $name:literal),+) => {
        impl std::str::FromStr for $type {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                match text {
                    $($name => Ok(Self::$variant),)+
                    _ => Err(format!(
                        "unknown {} {text:?} (one of: {})",
                        stringify!($type).to_lowercase(),
                        [$($name),+].join(", ")
                    )),
                }
            }
        }

        impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self {
                    $(Self::$variant => $name,)+
                })
            }
        }
    };
}

impl Format {
    /// The compression of outputs in this format when none is asked for: Snappy for Parquet,
    /// as pyarrow, DuckDB and Spark write it (a changed default: partout used to write
    /// uncompressed Parquet, files four times larger); none for IPC and Presto pages.
    pub fn default_compression(self) -> Compression {
        match self {
            Self::Parquet => Compression::Snappy,
            Self::Ipc | Self::Presto => Compression::None,
        }
    }
}

named!(Format: Parquet = "parquet", Ipc = "ipc", Presto = "presto");
named!(Compression: None = "none", Snappy = "snappy", Lz4 = "lz4", Zstd = "zstd");
named!(Layout: Files = "files", Shuffle = "shuffle");

/// The default memory limit: 256 MiB.
pub const DEFAULT_MEMORY_LIMIT: u64 = 256 << 20;

/// What a repartition job is asked to do. Plain values: [`Job::try_new`](crate::Job::try_new)
/// checks them (and the inputs and output they name) and says what cannot work.
///
/// ```
/// use partout_job::{Format, JobOptions, Scheme};
///
/// let options = JobOptions::new(["data/"], "out/", 64)
///     .with_keys(["l_orderkey"])
///     .with_scheme(Scheme::Spark)
///     .with_format(Format::Ipc)
///     .with_threads(2);
/// assert_eq!(options.partitions, 64);
/// assert_eq!(options.keys, ["l_orderkey"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOptions {
    /// Input files or directories of them (Parquet, Arrow IPC file or stream, CSV).
    pub inputs: Vec<PathBuf>,
    /// Key columns, by name (none for round-robin).
    pub keys: Vec<String>,
    /// Number of destinations.
    pub partitions: u32,
    /// How rows find their destination (default hash): [`Scheme::Hash`], partout's fast hash
    /// of the key columns; [`Scheme::Spark`], Spark's Murmur3 hash, `pmod(hash, n)`, Spark's
    /// bucket ids (files named `bucket-…`); [`Scheme::RoundRobin`], rows dealt to
    /// destinations in turn (no key); [`Scheme::Range`], key ranges, ascending, with split
    /// points drawn from a sample of the input (the first batch of up to 64 frames spread
    /// over it), recorded in the manifest.
    pub scheme: Scheme,
    /// Output format (default Parquet).
    pub format: Format,
    /// Output compression; `None`: the format's default ([`Format::default_compression`]:
    /// Snappy for Parquet, none for IPC and Presto).
    pub compression: Option<Compression>,
    /// One file per destination, or a data file and an index per worker (default files).
    pub layout: Layout,
    /// Worker threads (`None`: the machine's cores).
    pub threads: Option<usize>,
    /// Bytes of memory for buffered rows and open outputs (default 256 MiB).
    pub memory_limit: u64,
    /// Replace an existing, non-empty output directory (default off).
    pub overwrite: bool,
    /// The output directory.
    pub output: PathBuf,
}

impl JobOptions {
    /// `inputs` into `partitions` destinations under `output`, with the defaults otherwise.
    pub fn new(
        inputs: impl IntoIterator<Item = impl Into<PathBuf>>,
        output: impl Into<PathBuf>,
        partitions: u32,
    ) -> Self {
        Self {
            inputs: inputs.into_iter().map(Into::into).collect(),
            keys: Vec::new(),
            partitions,
            scheme: Scheme::Hash,
            format: Format::Parquet,
            compression: None,
            layout: Layout::Files,
            threads: None,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            overwrite: false,
            output: output.into(),
        }
    }

    /// Sets [`keys`](Self::keys).
    pub fn with_keys(mut self, keys: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.keys = keys.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`scheme`](Self::scheme).
    pub fn with_scheme(mut self, scheme: Scheme) -> Self {
        self.scheme = scheme;
        self
    }

    /// Sets [`format`](Self::format).
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// Sets [`compression`](Self::compression).
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = Some(compression);
        self
    }

    /// The compression the outputs get: the one asked for, or the format's default.
    pub fn output_compression(&self) -> Compression {
        self.compression
            .unwrap_or_else(|| self.format.default_compression())
    }

    /// Sets [`layout`](Self::layout).
    pub fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Sets [`threads`](Self::threads).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Sets [`memory_limit`](Self::memory_limit).
    pub fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Sets [`overwrite`](Self::overwrite).
    pub fn with_overwrite(mut self, overwrite: bool) -> Self {
        self.overwrite = overwrite;
        self
    }
}

/// `1000`, `64k`, `64KiB`, `256M`, `256MiB`, `1G`, `1GiB` (units of 1024) as bytes.
///
/// # Errors
/// A message naming the text: not a number, an unknown unit, or too large.
///
/// ```
/// assert_eq!(partout_job::parse_bytes("256MiB"), Ok(256 << 20));
/// assert!(partout_job::parse_bytes("12 parsecs").is_err());
/// ```
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (bytes, or a number with K, M or G)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (K, M or G)")),
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for scheme in [
            Scheme::Hash,
            Scheme::Spark,
            Scheme::RoundRobin,
            Scheme::Range,
        ] {
            assert_eq!(scheme.to_string().parse::<Scheme>().unwrap(), scheme);
            let json = serde_json::to_string(&scheme).unwrap();
            assert_eq!(serde_json::from_str::<Scheme>(&json).unwrap(), scheme);
        }
        // Manifests name the schemes in lower case, as they always have.
        assert_eq!(
            serde_json::to_string(&Scheme::RoundRobin).unwrap(),
            "\"roundrobin\""
        );
        for format in [Format::Parquet, Format::Ipc, Format::Presto] {
            assert_eq!(format.to_string().parse::<Format>(), Ok(format));
        }
        for c in [
            Compression::None,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert_eq!(c.to_string().parse::<Compression>(), Ok(c));
        }
        for layout in [Layout::Files, Layout::Shuffle] {
            assert_eq!(layout.to_string().parse::<Layout>(), Ok(layout));
        }
        let err = "gzip".parse::<Compression>().unwrap_err();
        assert!(err.contains("gzip") && err.contains("snappy"), "{err}");
    }

    #[test]
    fn parquet_is_snappy_unless_asked_otherwise() {
        let options = JobOptions::new(["in"], "out", 4);
        assert_eq!(options.compression, None);
        assert_eq!(options.output_compression(), Compression::Snappy);
        let ipc = options.clone().with_format(Format::Ipc);
        assert_eq!(ipc.output_compression(), Compression::None);
        let presto = options.clone().with_format(Format::Presto);
        assert_eq!(presto.output_compression(), Compression::None);
        let plain = options.with_compression(Compression::None);
        assert_eq!(plain.output_compression(), Compression::None);
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("64k"), Ok(64 << 10));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert!(parse_bytes("12 parsecs").unwrap_err().contains("unit"));
        assert!(parse_bytes("lots").is_err());
        assert!(
            parse_bytes("99999999999G")
                .unwrap_err()
                .contains("too large")
        );
    }
}

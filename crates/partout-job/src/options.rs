//! [`JobOptions`]: what a repartition job is asked to do, as plain values; checked once by
//! [`Job::try_new`](crate::Job::try_new).

pub use partout_input::{StorageOption, StorageOptions};
use partout_output::manifest::{Compression, Format, Layout};
pub use partout_output::{
    FileNamePattern, ParquetSettings, Rollover, SortKey, SortOrder, WriteMode,
};
use std::path::PathBuf;

/// How rows find their destination: partout-core's scheme, named and parsed there
/// (`hash`, `spark`, `round-robin`, `range`).
pub use partout_core::ids::Scheme;

/// The default memory limit: 256 MiB.
pub const DEFAULT_MEMORY_LIMIT: u64 = 256 << 20;

/// The default limit on distinct values when partitioning by value: 1000, Hive's and Spark's
/// `hive.exec.max.dynamic.partitions`.
pub const DEFAULT_MAX_PARTITIONS: u32 = 1000;

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
    /// What becomes of an output already there (default [`WriteMode::Error`]: a location
    /// holding anything is refused): replaced, added to, or replaced by value directory.
    pub mode: WriteMode,
    /// Columns to partition by value (none by default): a directory per distinct key in the
    /// Hive layout, `OUT/col=value/…/part-00000.parquet` (`.arrow` for Arrow IPC files); with
    /// [`keys`](Self::keys) each value is cut into [`partitions`](Self::partitions) buckets by
    /// them (Spark's `partitionBy` with `bucketBy`), otherwise `partitions` must be 1.
    pub partition_by: Vec<String>,
    /// Most distinct values partitioning by value takes (default
    /// [`DEFAULT_MAX_PARTITIONS`]): past it the job fails before writing anything.
    pub max_partitions: u32,
    /// Keep the [`partition_by`](Self::partition_by) columns in the files (default off: their
    /// values are in the directory names, as Hive, Spark, DuckDB and pyarrow write them).
    pub keep_partition_columns: bool,
    /// The output: a directory, or an object store's prefix (`s3://bucket/prefix`, `gs://…`,
    /// `az://…`, `abfss://…`, `file://…`).
    pub output: PathBuf,
    /// Options of the output's object store client, after the environment's (none by
    /// default; refused with a local output).
    pub storage_options: StorageOptions,
    /// The Parquet writer's settings (row group rows, page size, dictionaries, statistics,
    /// bloom filters, writer version; none chosen by default; refused for other formats).
    pub parquet: ParquetSettings,
    /// When a destination's file rolls over to its next (default never: one file a
    /// destination): after so many rows, or at about so many bytes, numbered before the
    /// extension (`part-00003-00001.parquet`); refused for the shuffle layout.
    pub rollover: Rollover,
    /// The order of rows within each file (default none: rows as they come). Sorted in
    /// bounded memory, spilling sorted runs beside the staged rows; for Parquet and Arrow IPC
    /// files (an IPC output's files are then IPC files, `.arrow`), refused for the shuffle
    /// layout and Presto pages.
    pub sort_by: SortOrder,
    /// The pattern each file is named after (default none: `part-00003.parquet`, rolling
    /// over `part-00003-00001.parquet`, appended `part-00003-RUN.parquet`): `{dest}`,
    /// `{part}`, `{uuid}`, `{run}`; refused when two files could share a name.
    pub file_name: Option<FileNamePattern>,
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
            mode: WriteMode::Error,
            partition_by: Vec::new(),
            max_partitions: DEFAULT_MAX_PARTITIONS,
            keep_partition_columns: false,
            output: output.into(),
            storage_options: StorageOptions::default(),
            parquet: ParquetSettings::default(),
            rollover: Rollover::default(),
            sort_by: SortOrder::default(),
            file_name: None,
        }
    }

    /// Sets [`file_name`](Self::file_name).
    pub fn with_file_name(mut self, pattern: FileNamePattern) -> Self {
        self.file_name = Some(pattern);
        self
    }

    /// Sets [`sort_by`](Self::sort_by).
    pub fn with_sort_by(mut self, sort_by: SortOrder) -> Self {
        self.sort_by = sort_by;
        self
    }

    /// Sets [`rollover`](Self::rollover).
    pub fn with_rollover(mut self, rollover: Rollover) -> Self {
        self.rollover = rollover;
        self
    }

    /// Sets [`parquet`](Self::parquet).
    pub fn with_parquet_settings(mut self, parquet: ParquetSettings) -> Self {
        self.parquet = parquet;
        self
    }

    /// Sets [`partition_by`](Self::partition_by).
    pub fn with_partition_by(
        mut self,
        columns: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.partition_by = columns.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`max_partitions`](Self::max_partitions).
    pub fn with_max_partitions(mut self, max: u32) -> Self {
        self.max_partitions = max;
        self
    }

    /// Sets [`keep_partition_columns`](Self::keep_partition_columns).
    pub fn with_keep_partition_columns(mut self, keep: bool) -> Self {
        self.keep_partition_columns = keep;
        self
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

    /// Sets [`storage_options`](Self::storage_options).
    pub fn with_storage_options(mut self, options: StorageOptions) -> Self {
        self.storage_options = options;
        self
    }

    /// Sets [`mode`](Self::mode) to replace an output there (`true`), or refuse one.
    pub fn with_overwrite(mut self, overwrite: bool) -> Self {
        self.mode = match overwrite {
            true => WriteMode::Overwrite,
            false => WriteMode::Error,
        };
        self
    }

    /// Sets [`mode`](Self::mode).
    pub fn with_mode(mut self, mode: WriteMode) -> Self {
        self.mode = mode;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

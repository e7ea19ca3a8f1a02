//! [`OutputSpec`]: what an output is — its [`Format`], [`Compression`], [`Layout`] and
//! [`Location`] — checked together once, and against the schema once, before anything is
//! written. Everything else about an output derives from it: the stream [`Encoding`], the
//! Parquet writer's properties, the files' names, the writer that makes them
//! ([`OutputSpec::create`](crate::OutputSpec::create)) and the manifest's record of them.

use crate::Layout;
use crate::location::Location;
use crate::manifest::Manifest;
use crate::{FileNamePattern, OutputError, ParquetSettings, Result, Rollover, SortOrder};
use parquet::basic::{Compression as ParquetCompression, ZstdLevel as ParquetZstdLevel};
use parquet::file::properties::WriterProperties;
use partout_exchange::WriterError;
use partout_format::{Compression, Encoding, Format, FormatError};

/// Why the shuffle layout refuses Parquet.
const SHUFFLE_PARQUET: &str = "the shuffle layout writes ipc or presto, not parquet (its files \
                               cannot be cut into byte ranges)";

/// Most rows a Parquet row group holds: parquet's own default, 1Mi rows (the writer's byte
/// limit, from the memory budget, may end a row group sooner).
const MAX_ROW_GROUP_ROWS: usize = 1 << 20;

/// Data pages of Parquet files end at about this many bytes (parquet's default: 1 MiB). A
/// page's buffers grow by doubling to its size and are freed when it is compressed; at 1 MiB
/// they are memory the allocator (purging freed memory after 2 ms, for the memory limit's
/// sake) hands back to the system and faults in again, page after page. With 64 KiB pages,
/// writing lineitem SF 1 took 9% less time, for 0.5% larger files (Snappy compresses 64 KiB
/// blocks anyway).
const DATA_PAGE_BYTES: usize = 64 << 10;

/// What an output is: the format and compression of each destination's bytes, how they are
/// laid out in files, and where they go. Made by [`try_new`](Self::try_new) (or
/// [`parse`](Self::parse) from the names front ends take), which refuses what cannot go
/// together; a spec that exists can be written.
///
/// ```
/// use partout_output::{Layout, Location, OutputSpec};
/// use partout_format::{Compression, Format};
///
/// let spec = OutputSpec::parse("ipc", Some("zstd:1"), "shuffle", Location::local("out")).unwrap();
/// assert_eq!((spec.format(), spec.layout()), (Format::Ipc, Layout::Shuffle));
/// assert_eq!(spec.encoding().unwrap().compression().to_string(), "zstd:1");
/// let parquet = OutputSpec::parse("parquet", None, "files", Location::local("out")).unwrap();
/// assert_eq!(parquet.compression(), Compression::Snappy);
/// let err = OutputSpec::parse("parquet", None, "shuffle", Location::local("out")).unwrap_err();
/// assert!(err.to_string().contains("shuffle layout writes ipc or presto"), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSpec {
    format: Format,
    compression: Compression,
    layout: Layout,
    location: Location,
    /// The Parquet writer's settings the user chose (none for other formats).
    parquet: ParquetSettings,
    /// When a destination's file rolls over to its next.
    rollover: Rollover,
    /// The order of rows within each file (empty: as they arrive).
    sort: SortOrder,
    /// The pattern the files are named after (none: partout's own names).
    file_names: Option<FileNamePattern>,
}

impl OutputSpec {
    /// `format` compressed with `compression` (`None`: the format's default,
    /// [`Format::default_compression`]) in `layout` at `location`.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for a compression the format does not take (Snappy streams,
    /// ZSTD Presto pages, Parquet ZSTD levels outside 1 to 22), or Parquet in the shuffle
    /// layout.
    pub fn try_new(
        format: Format,
        compression: Option<Compression>,
        layout: Layout,
        location: Location,
    ) -> Result<Self> {
        let compression = compression.unwrap_or_else(|| format.default_compression());
        let spec = Self {
            format,
            compression,
            layout,
            location,
            parquet: ParquetSettings::default(),
            rollover: Rollover::default(),
            sort: SortOrder::default(),
            file_names: None,
        };
        match format {
            Format::Parquet if layout == Layout::Shuffle => {
                return Err(OutputError::Invalid(SHUFFLE_PARQUET.into()));
            }
            Format::Parquet => {
                spec.parquet_codec()?;
            }
            Format::Ipc | Format::Presto => {
                spec.encoding().map_err(invalid)?;
            }
        }
        Ok(spec)
    }

    /// The spec named by a format (`parquet`, `ipc` or `arrow`, `presto`), a compression
    /// (`none`, `snappy`, `lz4`, `zstd`, `zstd:LEVEL`; `None` for the format's default) and a
    /// layout (`files`, `shuffle`): the names the command line, the Python package and the
    /// services take.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] naming what is not a format, compression or layout, and as
    /// [`try_new`](Self::try_new).
    pub fn parse(
        format: &str,
        compression: Option<&str>,
        layout: &str,
        location: Location,
    ) -> Result<Self> {
        let format_name = format;
        let format: Format = format.parse().map_err(invalid)?;
        let compression = match compression {
            None => None,
            Some(name) => match name.parse::<Compression>() {
                Ok(compression) => Some(compression),
                // A stream format names the compressions it takes.
                Err(e) => match format.is_stream() {
                    true => {
                        return Err(invalid(
                            Encoding::parse(format_name, Some(name)).err().unwrap_or(e),
                        ));
                    }
                    false => return Err(invalid(e)),
                },
            },
        };
        let layout = layout.parse().map_err(OutputError::Invalid)?;
        Self::try_new(format, compression, layout, location)
    }

    /// The format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The compression (the format's default when none was asked for).
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Where the output goes.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The same output at `location`.
    pub fn at(self, location: Location) -> Self {
        Self { location, ..self }
    }

    /// The same output, its Parquet files written with the settings `parquet` chooses.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for settings chosen for an output that is not Parquet.
    pub fn with_parquet_settings(self, parquet: ParquetSettings) -> Result<Self> {
        // Arrow IPC files record their statistics as they are written: the one setting
        // they take.
        let options = parquet.clone().with_file_statistics(false);
        let refused = match self.format {
            Format::Parquet => None,
            Format::Ipc if options.is_empty() => None,
            Format::Ipc => Some("Parquet options are for Parquet output, not ipc".to_string()),
            Format::Presto => (!parquet.is_empty()).then(|| {
                "Parquet options and file statistics are for Parquet and Arrow IPC files, not \
                 Presto pages"
                    .to_string()
            }),
        };
        match refused {
            Some(why) => Err(OutputError::Invalid(why)),
            None => Ok(Self { parquet, ..self }),
        }
    }

    /// The Parquet writer's settings the user chose.
    pub fn parquet_settings(&self) -> &ParquetSettings {
        &self.parquet
    }

    /// The same output, each destination's files rolling over as `rollover` says.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for limits set on the shuffle layout, whose files are each
    /// worker's, not each destination's.
    pub fn with_rollover(self, rollover: Rollover) -> Result<Self> {
        if self.layout == Layout::Shuffle && rollover.is_set() {
            return Err(OutputError::Invalid(
                "files roll over at a size in the files layout; the shuffle layout writes one \
                 data file per worker"
                    .into(),
            ));
        }
        Ok(Self { rollover, ..self })
    }

    /// When a destination's file rolls over to its next.
    pub fn rollover(&self) -> Rollover {
        self.rollover
    }

    /// The same output, the rows within each file sorted in `order` (Parquet and Arrow IPC
    /// files, which are then written whole from staged rows: an Arrow IPC output's files are
    /// IPC files, `.arrow`, not streams).
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for the shuffle layout (each worker's data file holds every
    /// destination) and Presto pages (an exchange's messages, sent in the order they come).
    pub fn with_sort_order(self, order: SortOrder) -> Result<Self> {
        if !order.is_empty() {
            if self.layout == Layout::Shuffle {
                return Err(OutputError::Invalid(
                    "rows are sorted within each destination's files in the files layout; the                      shuffle layout writes one data file per worker"
                        .into(),
                ));
            }
            if self.format == Format::Presto {
                return Err(OutputError::Invalid(
                    "rows are sorted within Parquet and Arrow IPC files, not Presto pages (an                      exchange's messages, sent as they come)"
                        .into(),
                ));
            }
        }
        Ok(Self {
            sort: order,
            ..self
        })
    }

    /// The order of rows within each file (empty: as they arrive).
    pub fn sort_order(&self) -> &SortOrder {
        &self.sort
    }

    /// The same output, its files named after `pattern` once written (see
    /// [`FileNamePattern::apply`]; `None`: partout's own names).
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for the shuffle layout, whose files are each worker's.
    pub fn with_file_names(self, pattern: Option<FileNamePattern>) -> Result<Self> {
        if pattern.is_some() && self.layout == Layout::Shuffle {
            return Err(OutputError::Invalid(
                "file name patterns name each destination's files in the files layout; the \
                 shuffle layout's files are each worker's (shuffle-WWW.data, .index)"
                    .into(),
            ));
        }
        Ok(Self {
            file_names: pattern,
            ..self
        })
    }

    /// The pattern the files are named after, if any.
    pub fn file_names(&self) -> Option<&FileNamePattern> {
        self.file_names.as_ref()
    }

    /// The stream encoding of each destination's bytes (Arrow IPC or Presto pages).
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] for Parquet, which is no stream.
    pub fn encoding(&self) -> std::result::Result<Encoding, FormatError> {
        Encoding::try_new(self.format, self.compression)
    }

    /// Whether each destination's file is written whole from rows staged first (Parquet
    /// files; with `by_value`, every file of the Hive layout; sorted files; Arrow IPC files
    /// whose statistics are recorded), rather than as it is flushed.
    pub fn is_staged(&self, by_value: bool) -> bool {
        let whole = self.format == Format::Parquet
            || by_value
            || !self.sort.is_empty()
            || (self.format == Format::Ipc && self.parquet.file_statistics());
        self.layout == Layout::Files && whole
    }

    /// The extension of each destination's file: `parquet`; `arrows` for an Arrow IPC
    /// stream, `arrow` for an Arrow IPC file (written whole, `staged`); `presto`. The
    /// shuffle layout's files are `.data` and `.index` whatever the format.
    pub fn extension(&self, staged: bool) -> &'static str {
        match self.format {
            Format::Ipc if staged => "arrow",
            format => crate::extension(format),
        }
    }

    /// The properties of the Parquet writer for this output's files of `schema`: its
    /// compression, row groups of up to 1Mi rows, 64 KiB data pages; otherwise parquet's
    /// defaults (dictionaries, given up for a column chunk whose dictionary passes 1 MiB and
    /// turned off by the staged writer where a sample says they do not pay; page statistics);
    /// then what the user chose ([`ParquetSettings`]).
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for a ZSTD level Parquet does not take, or settings naming a
    /// column `schema` does not have.
    pub fn parquet_properties(&self, schema: &arrow_schema::Schema) -> Result<WriterProperties> {
        let builder = WriterProperties::builder()
            .set_compression(self.parquet_codec()?)
            .set_max_row_group_row_count(Some(MAX_ROW_GROUP_ROWS))
            .set_data_page_size_limit(DATA_PAGE_BYTES);
        Ok(self.parquet.apply(builder, schema)?.build())
    }

    fn parquet_codec(&self) -> Result<ParquetCompression> {
        Ok(match self.compression {
            Compression::None => ParquetCompression::UNCOMPRESSED,
            Compression::Snappy => ParquetCompression::SNAPPY,
            Compression::Lz4 => ParquetCompression::LZ4_RAW,
            Compression::Zstd(level) => {
                ParquetCompression::ZSTD(ParquetZstdLevel::try_new(level.get()).map_err(|_| {
                    OutputError::Invalid(format!(
                        "Parquet takes ZSTD levels 1 to 22, not {} (negative levels are for \
                         IPC output)",
                        level.get()
                    ))
                })?)
            }
        })
    }

    /// Checks that every column of `schema` can be written in this format, before anything
    /// is: Presto pages carry no unsigned integers, Parquet no unions.
    ///
    /// # Errors
    /// [`WriterError::Encode`] or [`WriterError::Sink`] naming the first column the format
    /// cannot carry.
    pub fn check_schema(
        &self,
        schema: &arrow_schema::Schema,
    ) -> std::result::Result<(), WriterError> {
        match self.format {
            Format::Parquet => {
                crate::staged::StagedFiles::check_schema(schema)?;
                self.parquet
                    .check_schema(schema)
                    .map_err(|e| crate::sink_error(None, e.to_string()))?;
            }
            Format::Ipc | Format::Presto => self.encoding()?.check_schema(schema)?,
        }
        self.sort
            .check_schema(schema)
            .map_err(|e| crate::sink_error(None, e.to_string()))
    }
}

/// An invalid option, in the words of the format crate's error.
fn invalid(e: FormatError) -> OutputError {
    match e {
        FormatError::InvalidArgument(what) => OutputError::Invalid(what),
        other => OutputError::Invalid(other.to_string()),
    }
}

/// A finished output's spec, from the manifest that records it (the manifest itself is a
/// record of plain values, and knows no spec).
impl Manifest {
    /// The spec of the output this manifest records (its format, compression and layout) at
    /// `location`, where the manifest was read: what a reader of a finished output works
    /// from.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] for a manifest that
    /// records what no run writes (Parquet in the shuffle layout, Snappy streams).
    pub fn output_spec(&self, location: Location) -> Result<OutputSpec> {
        OutputSpec::try_new(self.format, Some(self.compression), self.layout, location)
    }
}

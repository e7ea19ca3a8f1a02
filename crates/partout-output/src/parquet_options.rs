//! [`ParquetSettings`]: the Parquet writer's settings a user chooses (`--parquet-option
//! KEY=VALUE`, `--row-group-rows N`; Python's `parquet_options={…}`), each checked when it is
//! given, and against the files' schema before anything is written. What is not chosen stays
//! as partout sets it ([`OutputSpec::parquet_properties`](crate::OutputSpec::parquet_properties)):
//! row groups of up to 1Mi rows, 64 KiB data pages, dictionaries where a sample says they
//! pay, chunk and page statistics, no bloom filters, format 1.0 data pages.
//!
//! | key | value |
//! |---|---|
//! | `row_group_rows` | most rows a row group holds (the memory limit may end one sooner) |
//! | `data_page_size` | bytes a data page ends at, about (`64KiB`, `1MiB`) |
//! | `dictionary` | `true` / `false`: every column (no sampling) |
//! | `dictionary.COL` | `true` / `false`: column COL (sampling judges the others) |
//! | `statistics` | `none` / `chunk` / `page`: every column |
//! | `statistics.COL` | `none` / `chunk` / `page`: column COL |
//! | `bloom_filter` | `COL[,COL…]`: bloom filters for these columns |
//! | `bloom_filter_fpp` | their false positive probability, `0 < p < 1` (parquet's 0.05) |
//! | `bloom_filter_ndv` | the distinct values they are sized for (parquet's 1Mi) |
//! | `writer_version` | `1.0` / `2.0` (data pages v2) |
//!
//! A column is named as in the input; a nested column's settings reach all its leaves.

use crate::{OutputError, Result};
use arrow_schema::Schema;
use parquet::arrow::ArrowSchemaConverter;
use parquet::file::properties::{EnabledStatistics, WriterPropertiesBuilder, WriterVersion};
use parquet::schema::types::ColumnPath;
use std::collections::BTreeMap;

/// The keys, as errors list them.
const KEYS: &str = "row_group_rows, data_page_size, dictionary, dictionary.COL, statistics, \
                    statistics.COL, bloom_filter, bloom_filter_fpp, bloom_filter_ndv, \
                    writer_version";

/// The Parquet writer's settings a user chose; see the module's documentation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParquetSettings {
    row_group_rows: Option<usize>,
    data_page_size: Option<usize>,
    dictionary: Option<bool>,
    column_dictionary: BTreeMap<String, bool>,
    statistics: Option<EnabledStatistics>,
    column_statistics: BTreeMap<String, EnabledStatistics>,
    bloom_filter: Vec<String>,
    bloom_filter_fpp: Option<f64>,
    bloom_filter_ndv: Option<u64>,
    writer_version: Option<WriterVersion>,
    file_statistics: bool,
}

/// Options equal as their values are (no NaN: a probability is checked to be in `0..1`).
impl Eq for ParquetSettings {}

impl ParquetSettings {
    /// The settings `pairs` choose, in order (a later key replaces an earlier one).
    ///
    /// # Errors
    /// [`OutputError::Invalid`] naming the first key partout does not know (and the keys it
    /// does) or the first value its key does not take.
    pub fn parse<K: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        let mut options = Self::default();
        for (key, value) in pairs {
            options.set(key.as_ref(), value.as_ref())?;
        }
        Ok(options)
    }

    /// Sets `key` to `value`.
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let bad = |takes: &str| {
            OutputError::Invalid(format!("Parquet option {key} takes {takes}, not {value:?}"))
        };
        let value = value.trim();
        let boolean = || match value.to_ascii_lowercase().as_str() {
            "true" | "on" | "1" => Ok(true),
            "false" | "off" | "0" => Ok(false),
            _ => Err(bad("true or false")),
        };
        let statistics = || {
            value
                .parse::<EnabledStatistics>()
                .map_err(|_| bad("none, chunk or page"))
        };
        // A whole number, 1 or more, of `what`.
        let count = |what: &str| {
            value
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| bad(&format!("a number of {what}, 1 or more")))
        };
        let column = |name: &str| match name.trim() {
            "" => Err(OutputError::Invalid(format!(
                "Parquet option {key} names no column"
            ))),
            name => Ok(name.to_string()),
        };
        match key {
            "row_group_rows" => {
                let rows = usize::try_from(count("rows")?).map_err(|_| bad("fewer rows"))?;
                self.row_group_rows = Some(rows);
            }
            "data_page_size" => {
                let bytes = partout_input::parse_bytes(value)
                    .ok()
                    .filter(|&b| (1..=1 << 30).contains(&b))
                    .ok_or_else(|| bad("a size from 1 byte to 1GiB (64KiB, 1MiB)"))?;
                self.data_page_size = Some(bytes as usize);
            }
            "dictionary" => self.dictionary = Some(boolean()?),
            "statistics" => self.statistics = Some(statistics()?),
            "bloom_filter" => {
                self.bloom_filter = value.split(',').map(column).collect::<Result<_>>()?;
            }
            "bloom_filter_fpp" => {
                self.bloom_filter_fpp = Some(
                    value
                        .parse::<f64>()
                        .ok()
                        .filter(|p| *p > 0.0 && *p < 1.0)
                        .ok_or_else(|| bad("a probability between 0 and 1"))?,
                )
            }
            "bloom_filter_ndv" => self.bloom_filter_ndv = Some(count("distinct values")?),
            "writer_version" => {
                self.writer_version = Some(match value {
                    "1.0" | "1" => WriterVersion::PARQUET_1_0,
                    "2.0" | "2" => WriterVersion::PARQUET_2_0,
                    _ => return Err(bad("1.0 or 2.0")),
                })
            }
            _ => match key.split_once('.') {
                Some(("dictionary", name)) => {
                    let enabled = boolean()?;
                    self.column_dictionary.insert(column(name)?, enabled);
                }
                Some(("statistics", name)) => {
                    let enabled = statistics()?;
                    self.column_statistics.insert(column(name)?, enabled);
                }
                _ => {
                    return Err(OutputError::Invalid(format!(
                        "{key:?} is not a Parquet option (the options: {KEYS})"
                    )));
                }
            },
        }
        Ok(())
    }

    /// The same settings, each file's column statistics recorded in the manifest or not
    /// (default not: they take memory by the file, outside the memory limit — about 30 MB
    /// for 100,000 files of three columns).
    pub fn with_file_statistics(self, record: bool) -> Self {
        Self {
            file_statistics: record,
            ..self
        }
    }

    /// Whether each file's column statistics are recorded in the manifest.
    pub fn file_statistics(&self) -> bool {
        self.file_statistics
    }

    /// The most rows a row group holds, when chosen.
    pub fn row_group_rows(&self) -> Option<usize> {
        self.row_group_rows
    }

    /// Whether any setting was chosen.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The settings chosen as the `KEY=VALUE` pairs [`parse`](Self::parse) reads back (what
    /// the manifest records; the file statistics are not among them).
    pub fn pairs(&self) -> BTreeMap<String, String> {
        let statistics = |s: &EnabledStatistics| match s {
            EnabledStatistics::None => "none",
            EnabledStatistics::Chunk => "chunk",
            EnabledStatistics::Page => "page",
        };
        let mut pairs = BTreeMap::new();
        let mut put = |key: String, value: String| {
            pairs.insert(key, value);
        };
        if let Some(rows) = self.row_group_rows {
            put("row_group_rows".into(), rows.to_string());
        }
        if let Some(bytes) = self.data_page_size {
            put("data_page_size".into(), bytes.to_string());
        }
        if let Some(on) = self.dictionary {
            put("dictionary".into(), on.to_string());
        }
        for (column, on) in &self.column_dictionary {
            put(format!("dictionary.{column}"), on.to_string());
        }
        if let Some(level) = &self.statistics {
            put("statistics".into(), statistics(level).into());
        }
        for (column, level) in &self.column_statistics {
            put(format!("statistics.{column}"), statistics(level).into());
        }
        if !self.bloom_filter.is_empty() {
            put("bloom_filter".into(), self.bloom_filter.join(","));
        }
        if let Some(p) = self.bloom_filter_fpp {
            put("bloom_filter_fpp".into(), p.to_string());
        }
        if let Some(n) = self.bloom_filter_ndv {
            put("bloom_filter_ndv".into(), n.to_string());
        }
        if let Some(version) = self.writer_version {
            let version = match version {
                WriterVersion::PARQUET_1_0 => "1.0",
                WriterVersion::PARQUET_2_0 => "2.0",
            };
            put("writer_version".into(), version.into());
        }
        pairs
    }

    /// Whether dictionaries for column `name` were chosen (for it, or for every column), so
    /// that no sample judges them.
    pub(crate) fn chooses_dictionary(&self, name: &str) -> bool {
        self.dictionary.is_some() || self.column_dictionary.contains_key(name)
    }

    /// Checks that every column the settings name is one of `schema`'s (the files' columns:
    /// in the Hive layout, the partition columns are not, unless they are kept).
    ///
    /// # Errors
    /// [`OutputError::Invalid`] naming the first column that is not there.
    pub fn check_schema(&self, schema: &Schema) -> Result<()> {
        let named = self
            .column_dictionary
            .keys()
            .chain(self.column_statistics.keys())
            .chain(&self.bloom_filter);
        for name in named {
            if schema.field_with_name(name).is_err() {
                return Err(OutputError::Invalid(format!(
                    "a Parquet option names column {name:?}, which the files do not have \
                     (their columns: {}; partition columns are left out of Hive files unless \
                     kept)",
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        Ok(())
    }

    /// `builder` with these settings for files of `schema`.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] when Parquet cannot carry the schema, or a column named is
    /// not in it ([`check_schema`](Self::check_schema)).
    pub(crate) fn apply(
        &self,
        mut builder: WriterPropertiesBuilder,
        schema: &Schema,
    ) -> Result<WriterPropertiesBuilder> {
        if let Some(rows) = self.row_group_rows {
            builder = builder.set_max_row_group_row_count(Some(rows));
        }
        if let Some(bytes) = self.data_page_size {
            builder = builder.set_data_page_size_limit(bytes);
        }
        if let Some(enabled) = self.dictionary {
            builder = builder.set_dictionary_enabled(enabled);
        }
        if let Some(statistics) = self.statistics {
            builder = builder.set_statistics_enabled(statistics);
        }
        if let Some(version) = self.writer_version {
            builder = builder.set_writer_version(version);
        }
        if self.column_dictionary.is_empty()
            && self.column_statistics.is_empty()
            && self.bloom_filter.is_empty()
        {
            return Ok(builder);
        }
        self.check_schema(schema)?;
        // Each column's leaves, by their paths in the Parquet schema.
        let parquet = ArrowSchemaConverter::new()
            .convert(schema)
            .map_err(|e| OutputError::Invalid(format!("Parquet cannot carry the schema: {e}")))?;
        let leaves = |name: &str| -> Vec<ColumnPath> {
            parquet
                .columns()
                .iter()
                .map(|c| c.path().clone())
                .filter(|path| path.parts().first().map(String::as_str) == Some(name))
                .collect()
        };
        for (name, &enabled) in &self.column_dictionary {
            for path in leaves(name) {
                builder = builder.set_column_dictionary_enabled(path, enabled);
            }
        }
        for (name, &statistics) in &self.column_statistics {
            for path in leaves(name) {
                builder = builder.set_column_statistics_enabled(path, statistics);
            }
        }
        for name in &self.bloom_filter {
            for path in leaves(name) {
                // Per column: parquet's global fpp and ndv would turn filters on everywhere.
                builder = builder.set_column_bloom_filter_enabled(path.clone(), true);
                if let Some(fpp) = self.bloom_filter_fpp {
                    builder = builder.set_column_bloom_filter_fpp(path.clone(), fpp);
                }
                if let Some(ndv) = self.bloom_filter_ndv {
                    builder = builder.set_column_bloom_filter_max_ndv(path, ndv);
                }
            }
        }
        Ok(builder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Fields};
    use parquet::file::properties::WriterProperties;

    fn schema() -> Schema {
        let point = Fields::from(vec![
            Field::new("x", DataType::Float64, true),
            Field::new("y", DataType::Float64, true),
        ]);
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("point", DataType::Struct(point), true),
        ])
    }

    fn properties(pairs: &[(&str, &str)]) -> WriterProperties {
        ParquetSettings::parse(pairs.iter().copied())
            .unwrap()
            .apply(WriterProperties::builder(), &schema())
            .unwrap()
            .build()
    }

    fn path(parts: &[&str]) -> ColumnPath {
        ColumnPath::new(parts.iter().map(|p| p.to_string()).collect())
    }

    #[test]
    fn each_option_reaches_the_writer_properties() {
        let chosen = properties(&[
            ("row_group_rows", "5000"),
            ("data_page_size", "8KiB"),
            ("dictionary", "false"),
            ("dictionary.name", "true"),
            ("statistics", "chunk"),
            ("statistics.point", "none"),
            ("bloom_filter", "id,point"),
            ("bloom_filter_fpp", "0.01"),
            ("bloom_filter_ndv", "1000"),
            ("writer_version", "2.0"),
        ]);
        assert_eq!(chosen.max_row_group_row_count(), Some(5000));
        assert_eq!(chosen.data_page_size_limit(), 8 << 10);
        assert!(!chosen.dictionary_enabled(&path(&["id"])));
        assert!(chosen.dictionary_enabled(&path(&["name"])));
        let id = path(&["id"]);
        assert_eq!(chosen.statistics_enabled(&id), EnabledStatistics::Chunk);
        for leaf in ["x", "y"] {
            let leaf = path(&["point", leaf]);
            assert_eq!(chosen.statistics_enabled(&leaf), EnabledStatistics::None);
            assert!(chosen.bloom_filter_properties(&leaf).is_some());
        }
        let bloom = chosen.bloom_filter_properties(&id).unwrap();
        assert_eq!((bloom.fpp(), bloom.ndv()), (0.01, 1000));
        assert!(chosen.bloom_filter_properties(&path(&["name"])).is_none());
        assert_eq!(chosen.writer_version(), WriterVersion::PARQUET_2_0);
        // Nothing chosen: the builder's defaults, no bloom filter anywhere.
        let plain = properties(&[]);
        assert_eq!(plain.writer_version(), WriterVersion::PARQUET_1_0);
        assert!(plain.bloom_filter_properties(&id).is_none());
        assert!(ParquetSettings::default().is_empty());
    }

    #[test]
    fn the_pairs_read_back_as_the_same_settings() {
        let chosen = [
            ("row_group_rows", "1000"),
            ("data_page_size", "1MiB"),
            ("dictionary", "off"),
            ("dictionary.name", "true"),
            ("statistics", "chunk"),
            ("statistics.id", "none"),
            ("bloom_filter", "id,name"),
            ("bloom_filter_fpp", "0.01"),
            ("bloom_filter_ndv", "5000"),
            ("writer_version", "2.0"),
        ];
        let settings = ParquetSettings::parse(chosen).unwrap();
        let pairs = settings.pairs();
        assert_eq!(pairs.len(), chosen.len());
        assert_eq!(ParquetSettings::parse(&pairs).unwrap(), settings);
        assert!(ParquetSettings::default().pairs().is_empty());
    }

    #[test]
    fn a_bad_key_or_value_is_refused_by_name() {
        for (key, value, said) in [
            (
                "row_group_rows",
                "0",
                "row_group_rows takes a number of rows",
            ),
            ("row_group_rows", "many", "row_group_rows takes"),
            ("data_page_size", "2GiB", "data_page_size takes a size"),
            ("dictionary", "maybe", "dictionary takes true or false"),
            ("dictionary.", "true", "names no column"),
            ("statistics", "all", "statistics takes none, chunk or page"),
            ("bloom_filter", "id,,name", "names no column"),
            ("bloom_filter_fpp", "1.5", "probability"),
            ("bloom_filter_fpp", "NaN", "probability"),
            ("bloom_filter_ndv", "-3", "distinct values"),
            ("writer_version", "3.0", "1.0 or 2.0"),
            (
                "row_group_size",
                "10",
                "\"row_group_size\" is not a Parquet option",
            ),
        ] {
            let e = ParquetSettings::parse([(key, value)])
                .unwrap_err()
                .to_string();
            assert!(e.contains(said), "{key}={value}: {e}");
        }
    }

    #[test]
    fn a_column_the_files_do_not_have_is_refused() {
        for key in ["dictionary.nope", "statistics.nope", "bloom_filter"] {
            let value = match key {
                "bloom_filter" => "id,nope",
                "statistics.nope" => "page",
                _ => "true",
            };
            let options = ParquetSettings::parse([(key, value)]).unwrap();
            let e = options
                .apply(WriterProperties::builder(), &schema())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("\"nope\"") && e.contains("id, name, point"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_chosen_dictionary_is_not_judged_by_a_sample() {
        let options = ParquetSettings::parse([("dictionary.name", "false")]).unwrap();
        assert!(options.chooses_dictionary("name") && !options.chooses_dictionary("id"));
        let every = ParquetSettings::parse([("dictionary", "true")]).unwrap();
        assert!(every.chooses_dictionary("id"));
    }
}

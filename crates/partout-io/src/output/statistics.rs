//! What a written Parquet file holds, column by column, read from the footer partout wrote:
//! each column's smallest and largest value and its nulls ([`ColumnStatistics`]), for the
//! manifest's entry of the file. Values are shown as Arrow displays them (`42`, `2024-01-31`,
//! `a string`), the order their type's.

use arrow_array::{Array, ArrayRef};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, Schema};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::file::metadata::ParquetMetaData;
use serde::{Deserialize, Serialize};

/// One column of a file: its smallest and largest value (absent when it holds no value, or
/// when statistics were not written) and its nulls (absent when not written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnStatistics {
    /// The column's name.
    pub column: String,
    /// Its smallest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<String>,
    /// Its largest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<String>,
    /// Its nulls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_count: Option<u64>,
}

/// Each top-level column's statistics in the file `metadata` describes, whose columns are
/// `schema`'s: over all its row groups, as their footer records them. Nested columns (lists,
/// structs, maps), whose values have no single order, and columns whose bounds the footer
/// records only cut short (long strings) have none.
pub fn of_file(schema: &Schema, metadata: &ParquetMetaData) -> Vec<ColumnStatistics> {
    let parquet = metadata.file_metadata().schema_descr();
    let groups = metadata.row_groups();
    schema
        .fields()
        .iter()
        .filter(|field| !field.data_type().is_nested())
        .filter_map(|field| {
            let converter = StatisticsConverter::try_new(field.name(), schema, parquet).ok()?;
            let exact = |flags: parquet::errors::Result<arrow_array::BooleanArray>| {
                flags.is_ok_and(|f| f.null_count() == 0 && f.true_count() == f.len())
            };
            let bounds = match (
                exact(converter.row_group_is_min_value_exact(groups)),
                exact(converter.row_group_is_max_value_exact(groups)),
            ) {
                (true, true) => (
                    converter.row_group_mins(groups).ok(),
                    converter.row_group_maxes(groups).ok(),
                ),
                _ => (None, None),
            };
            let nulls = converter.row_group_null_counts(groups).ok();
            let null_count = nulls
                .filter(|n| n.null_count() == 0)
                .map(|n| n.values().iter().sum());
            let (min, max) = match bounds {
                (Some(mins), Some(maxes)) => (
                    extreme(&mins, std::cmp::Ordering::Less),
                    extreme(&maxes, std::cmp::Ordering::Greater),
                ),
                _ => (None, None),
            };
            Some(ColumnStatistics {
                column: field.name().clone(),
                min,
                max,
                null_count,
            })
        })
        .collect()
}

/// The least (`Less`) or greatest (`Greater`) value of `values`, nulls passed over, as its
/// text; `None` when all are null or the type has no order.
fn extreme(values: &ArrayRef, wanted: std::cmp::Ordering) -> Option<String> {
    if matches!(values.data_type(), DataType::Null) || values.null_count() == values.len() {
        return None;
    }
    let converter = RowConverter::new(vec![SortField::new(values.data_type().clone())]).ok()?;
    let rows = converter
        .convert_columns(std::slice::from_ref(values))
        .ok()?;
    let best = (0..values.len())
        .filter(|&i| values.is_valid(i))
        .reduce(|best, i| match rows.row(i).cmp(&rows.row(best)) == wanted {
            true => i,
            false => best,
        })?;
    let formatter = ArrayFormatter::try_new(values.as_ref(), &FormatOptions::default()).ok()?;
    Some(formatter.value(best).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};
    use std::sync::Arc;

    fn written(properties: WriterProperties) -> (Arc<Schema>, ParquetMetaData) {
        let batch = RecordBatch::try_from_iter([
            (
                "n",
                Arc::new(Int64Array::from(vec![Some(5), None, Some(-3), Some(12)])) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from(vec!["pear", "apple", "zucchini", "fig"])),
            ),
            ("none", Arc::new(Int64Array::from(vec![None::<i64>; 4]))),
        ])
        .unwrap();
        let schema = batch.schema();
        let mut writer =
            ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties)).unwrap();
        // Two row groups: the bounds are over both.
        writer.write(&batch.slice(0, 2)).unwrap();
        writer.flush().unwrap();
        writer.write(&batch.slice(2, 2)).unwrap();
        (schema, writer.finish().unwrap())
    }

    #[test]
    fn the_bounds_and_nulls_are_over_every_row_group() {
        let (schema, metadata) = written(WriterProperties::default());
        let got = of_file(&schema, &metadata);
        let column = |name: &str, min: Option<&str>, max: Option<&str>, nulls| ColumnStatistics {
            column: name.into(),
            min: min.map(Into::into),
            max: max.map(Into::into),
            null_count: Some(nulls),
        };
        assert_eq!(
            got,
            [
                column("n", Some("-3"), Some("12"), 1),
                column("s", Some("apple"), Some("zucchini"), 0),
                column("none", None, None, 4),
            ]
        );
    }

    #[test]
    fn no_statistics_written_gives_none() {
        let properties = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::None)
            .build();
        let (schema, metadata) = written(properties);
        for column in of_file(&schema, &metadata) {
            assert_eq!((column.min, column.max), (None, None), "{}", column.column);
        }
    }
}

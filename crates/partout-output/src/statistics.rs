//! What a written file holds, column by column: each column's smallest and largest value and
//! its nulls ([`ColumnStatistics`]), for the manifest's entry of the file; read from the footer
//! partout wrote for Parquet ([`of_file`]), computed from the batches as they are written for
//! Arrow IPC files ([`Running`]). Values are shown as Arrow displays them (`42`,
//! `2024-01-31`, `a string`), the order their type's.

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_row::{OwnedRow, RowConverter, SortField};
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

/// Each top-level column's statistics over the batches [`add`](Self::add)ed, as they are
/// written (Arrow IPC files, which keep none of their own): the least and greatest value by
/// their type's order (arrow-row's), kept as their row and their text, and the nulls. Nested
/// columns have none, as in [`of_file`].
pub(crate) struct Running {
    columns: Vec<Option<RunningColumn>>,
    names: Vec<String>,
}

struct RunningColumn {
    converter: RowConverter,
    min: Option<(OwnedRow, String)>,
    max: Option<(OwnedRow, String)>,
    nulls: u64,
}

impl Running {
    /// No rows yet, of `schema`.
    pub(crate) fn new(schema: &Schema) -> Self {
        let columns = schema
            .fields()
            .iter()
            .map(|field| {
                let data_type = field.data_type();
                (!data_type.is_nested())
                    .then(|| RowConverter::new(vec![SortField::new(data_type.clone())]).ok())
                    .flatten()
                    .map(|converter| RunningColumn {
                        converter,
                        min: None,
                        max: None,
                        nulls: 0,
                    })
            })
            .collect();
        let names = schema.fields().iter().map(|f| f.name().clone()).collect();
        Self { columns, names }
    }

    /// Takes `batch`'s values into account.
    ///
    /// # Errors
    /// When a column's values cannot be ordered or shown (arrow-row's, arrow-cast's errors).
    pub(crate) fn add(&mut self, batch: &RecordBatch) -> Result<(), arrow_schema::ArrowError> {
        for (column, values) in self.columns.iter_mut().zip(batch.columns()) {
            let Some(column) = column else { continue };
            column.nulls += values.logical_null_count() as u64;
            if values.logical_null_count() == values.len() {
                continue;
            }
            let rows = column
                .converter
                .convert_columns(std::slice::from_ref(values))?;
            let nulls = values.logical_nulls();
            let valid = |i: &usize| nulls.as_ref().is_none_or(|n| n.is_valid(*i));
            let (mut least, mut greatest) = (None::<usize>, None::<usize>);
            for i in (0..values.len()).filter(valid) {
                if least.is_none_or(|l| rows.row(i) < rows.row(l)) {
                    least = Some(i);
                }
                if greatest.is_none_or(|g| rows.row(i) > rows.row(g)) {
                    greatest = Some(i);
                }
            }
            let formatter = ArrayFormatter::try_new(values.as_ref(), &FormatOptions::default())?;
            if let Some(i) = least
                && column
                    .min
                    .as_ref()
                    .is_none_or(|(m, _)| rows.row(i) < m.row())
            {
                column.min = Some((rows.row(i).owned(), formatter.value(i).to_string()));
            }
            if let Some(i) = greatest
                && column
                    .max
                    .as_ref()
                    .is_none_or(|(m, _)| rows.row(i) > m.row())
            {
                column.max = Some((rows.row(i).owned(), formatter.value(i).to_string()));
            }
        }
        Ok(())
    }

    /// Each top-level column's statistics, nested ones left out.
    pub(crate) fn finish(self) -> Vec<ColumnStatistics> {
        self.columns
            .into_iter()
            .zip(self.names)
            .filter_map(|(column, name)| {
                let column = column?;
                Some(ColumnStatistics {
                    column: name,
                    min: column.min.map(|(_, text)| text),
                    max: column.max.map(|(_, text)| text),
                    null_count: Some(column.nulls),
                })
            })
            .collect()
    }
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

    /// Integers with a null, strings, and a column of nulls alone.
    fn batch() -> RecordBatch {
        RecordBatch::try_from_iter([
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
        .unwrap()
    }

    fn written(properties: WriterProperties) -> (Arc<Schema>, ParquetMetaData) {
        let batch = batch();
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
    fn running_statistics_match_those_of_the_parquet_footer() {
        let (schema, metadata) = written(WriterProperties::default());
        let batch = batch();
        let mut running = Running::new(&schema);
        // In pieces, the least and greatest in different ones.
        for (offset, len) in [(0, 1), (1, 2), (3, 1)] {
            running.add(&batch.slice(offset, len)).unwrap();
        }
        assert_eq!(running.finish(), of_file(&schema, &metadata));
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

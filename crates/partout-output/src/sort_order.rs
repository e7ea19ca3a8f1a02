//! [`SortOrder`]: the order of rows within each output file (`--sort-by`), read from the
//! words users write (`l_shipdate, l_orderkey DESC NULLS FIRST`), checked against the files'
//! schema before anything is written, and turned into what sorts rows (arrow-row's
//! [`SortField`]s) and what tells readers (Parquet's `sorting_columns`).

use crate::OutputError;
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, Schema, SortOptions};
use parquet::file::metadata::SortingColumn;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One column of a [`SortOrder`], with its direction and where its nulls go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SortKey {
    /// The column's name.
    pub column: String,
    /// Largest first.
    pub descending: bool,
    /// Nulls before every value (the default puts them last, as DuckDB and PostgreSQL do for
    /// ascending order).
    pub nulls_first: bool,
}

/// The order of rows within each output file: columns compared in turn, each ascending or
/// descending, nulls last unless asked first. Empty: rows stay in the order they arrive.
///
/// ```
/// use partout_output::SortOrder;
///
/// let order: SortOrder = "l_shipdate, l_orderkey DESC NULLS FIRST".parse().unwrap();
/// assert_eq!(order.keys().len(), 2);
/// assert!(order.keys()[1].descending && order.keys()[1].nulls_first);
/// assert_eq!(order.to_string(), "l_shipdate ASC NULLS LAST, l_orderkey DESC NULLS FIRST");
/// assert!("a SIDEWAYS".parse::<SortOrder>().unwrap_err().contains("SIDEWAYS"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SortOrder {
    keys: Vec<SortKey>,
}

impl SortOrder {
    /// The order of `keys`, compared in turn.
    ///
    /// # Errors
    /// A column named twice.
    pub fn try_new(keys: Vec<SortKey>) -> Result<Self, String> {
        for (i, key) in keys.iter().enumerate() {
            if key.column.is_empty() {
                return Err("a sort key names no column".into());
            }
            if keys[..i].iter().any(|k| k.column == key.column) {
                return Err(format!("column {:?} is named twice to sort by", key.column));
            }
        }
        Ok(Self { keys })
    }

    /// The columns compared, in turn.
    pub fn keys(&self) -> &[SortKey] {
        &self.keys
    }

    /// Whether rows stay in the order they arrive.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks that the files of `schema` have each column and that its values can be
    /// ordered.
    ///
    /// # Errors
    /// [`OutputError::Invalid`] naming a column the files do not have (listing those they
    /// have) or one whose type has no order.
    pub fn check_schema(&self, schema: &Schema) -> Result<(), OutputError> {
        for key in &self.keys {
            let field = schema.field_with_name(&key.column).map_err(|_| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                OutputError::Invalid(format!(
                    "cannot sort by {:?}: the files have no such column (they have: {}; a \
                     Hive dataset's partition columns are in its directory names, one value a \
                     file)",
                    key.column,
                    names.join(", ")
                ))
            })?;
            RowConverter::new(vec![sort_field(field.data_type(), key)]).map_err(|e| {
                OutputError::Invalid(format!(
                    "cannot sort by {:?}: values of type {} have no order ({e})",
                    key.column,
                    field.data_type()
                ))
            })?;
        }
        Ok(())
    }

    /// The sort keys' columns in `schema` (by index) and what orders them.
    ///
    /// # Errors
    /// As [`check_schema`](Self::check_schema).
    pub(crate) fn fields(
        &self,
        schema: &Schema,
    ) -> Result<(Vec<usize>, Vec<SortField>), OutputError> {
        self.check_schema(schema)?;
        Ok(self
            .keys
            .iter()
            .map(|key| {
                let (i, field) = schema.column_with_name(&key.column).expect("checked");
                (i, sort_field(field.data_type(), key))
            })
            .unzip())
    }

    /// What Parquet's row group metadata says of this order (`sorting_columns`: leaf column,
    /// direction, nulls first), when every key is a column of one leaf (not a list, struct
    /// or map: Parquet names leaves). `None` otherwise, or with no keys.
    pub(crate) fn parquet_sorting_columns(&self, schema: &Schema) -> Option<Vec<SortingColumn>> {
        if self.keys.is_empty() {
            return None;
        }
        self.keys
            .iter()
            .map(|key| {
                let (index, field) = schema.column_with_name(&key.column)?;
                if field.data_type().is_nested() {
                    return None;
                }
                let leaf: usize = schema.fields()[..index]
                    .iter()
                    .map(|f| leaves(f.data_type()))
                    .sum();
                Some(SortingColumn {
                    column_idx: i32::try_from(leaf).ok()?,
                    descending: key.descending,
                    nulls_first: key.nulls_first,
                })
            })
            .collect()
    }
}

/// The Parquet leaf columns a column of `data_type` is written as.
fn leaves(data_type: &DataType) -> usize {
    match data_type {
        DataType::Struct(fields) => fields.iter().map(|f| leaves(f.data_type())).sum(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => leaves(f.data_type()),
        DataType::Dictionary(_, value) => leaves(value),
        DataType::RunEndEncoded(_, value) => leaves(value.data_type()),
        _ => 1,
    }
}

fn sort_field(data_type: &DataType, key: &SortKey) -> SortField {
    SortField::new_with_options(
        data_type.clone(),
        SortOptions {
            descending: key.descending,
            nulls_first: key.nulls_first,
        },
    )
}

/// Reads `COL [ASC|DESC] [NULLS FIRST|NULLS LAST]`, comma-separated (words in any case).
impl std::str::FromStr for SortOrder {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let keys = text
            .split(',')
            .map(|part| part.parse::<SortKey>())
            .collect::<Result<Vec<_>, String>>()?;
        Self::try_new(keys)
    }
}

/// Reads `COL [ASC|DESC] [NULLS FIRST|NULLS LAST]`.
impl std::str::FromStr for SortKey {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let Some((&column, rest)) = words.split_first() else {
            return Err(format!("{text:?} names no column to sort by"));
        };
        let upper: Vec<String> = rest.iter().map(|w| w.to_ascii_uppercase()).collect();
        let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
        let (descending, nulls) = match upper.as_slice() {
            ["ASC", nulls @ ..] => (false, nulls),
            ["DESC", nulls @ ..] => (true, nulls),
            nulls => (false, nulls),
        };
        let nulls_first = match nulls {
            [] => false,
            ["NULLS", "FIRST"] => true,
            ["NULLS", "LAST"] => false,
            _ => {
                return Err(format!(
                    "cannot read sort key {:?}: after the column comes ASC or DESC, then NULLS \
                     FIRST or NULLS LAST, not {:?}",
                    text.trim(),
                    rest.join(" ")
                ));
            }
        };
        Ok(Self {
            column: column.to_string(),
            descending,
            nulls_first,
        })
    }
}

impl fmt::Display for SortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} NULLS {}",
            self.column,
            if self.descending { "DESC" } else { "ASC" },
            if self.nulls_first { "FIRST" } else { "LAST" }
        )
    }
}

/// Each key as [`SortKey`]'s `Display` writes it, comma-separated: what `FromStr` reads.
impl fmt::Display for SortOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, key) in self.keys.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{key}")?;
        }
        Ok(())
    }
}

/// In the manifest, a list of keys as `Display` writes them.
impl Serialize for SortOrder {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.keys.iter().map(ToString::to_string))
    }
}

impl<'de> Deserialize<'de> for SortOrder {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let keys = Vec::<String>::deserialize(deserializer)?
            .iter()
            .map(|k| k.parse::<SortKey>())
            .collect::<Result<Vec<_>, String>>()
            .map_err(serde::de::Error::custom)?;
        Self::try_new(keys).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;

    #[test]
    fn reads_what_it_writes_and_refuses_what_it_cannot_read() {
        for text in [
            "a",
            "a desc",
            "a ASC NULLS FIRST, b DESC NULLS LAST",
            " x , y desc ",
        ] {
            let order: SortOrder = text.parse().unwrap();
            assert_eq!(order.to_string().parse::<SortOrder>().unwrap(), order);
            let json = serde_json::to_string(&order).unwrap();
            assert_eq!(serde_json::from_str::<SortOrder>(&json).unwrap(), order);
        }
        let order: SortOrder = "b DESC".parse().unwrap();
        assert!(order.keys()[0].descending && !order.keys()[0].nulls_first);
        for (bad, says) in [
            ("", "names no column"),
            ("a,", "names no column"),
            ("a UP", "UP"),
            ("a DESC NULLS", "NULLS"),
            ("a, a DESC", "twice"),
        ] {
            let err = bad.parse::<SortOrder>().unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn checks_columns_and_names_parquet_leaves() {
        let point = DataType::Struct(
            vec![
                Field::new("x", DataType::Int32, true),
                Field::new("y", DataType::Int32, true),
            ]
            .into(),
        );
        let schema = Schema::new(vec![
            Field::new("s", point, true),
            Field::new("tags", DataType::new_list(DataType::Utf8, true), true),
            Field::new("k", DataType::Int64, true),
        ]);
        let order: SortOrder = "k DESC NULLS FIRST".parse().unwrap();
        order.check_schema(&schema).unwrap();
        // The struct's two leaves and the list's one come before k.
        let columns = order.parquet_sorting_columns(&schema).unwrap();
        assert_eq!(
            columns,
            vec![SortingColumn {
                column_idx: 3,
                descending: true,
                nulls_first: true
            }]
        );
        // Sorting by a struct works; Parquet has no leaf to name for it.
        let nested: SortOrder = "k, s".parse().unwrap();
        nested.check_schema(&schema).unwrap();
        assert_eq!(nested.parquet_sorting_columns(&schema), None);
        let missing: SortOrder = "kk".parse().unwrap();
        let err = missing.check_schema(&schema).unwrap_err().to_string();
        assert!(
            err.contains("\"kk\"") && err.contains("s, tags, k"),
            "{err}"
        );
    }
}

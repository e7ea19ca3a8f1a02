//! Per-destination fingerprints: a destination's schema (column names, exact types,
//! nullability, metadata), its row count and the wrapping sum of its rows' hashes (every
//! column, through arrow-row's byte encoding and XXH3). A fingerprint does not depend on the
//! order of rows or how they are batched; one row in the wrong destination, lost, doubled or
//! changed changes it, and so does a column of another type (a Utf8View column written back
//! as Utf8, a dictionary written as its values), which arrow-row's bytes alone would not tell.
//! The benchmarks check every contender's output with them before reporting its time.

use arrow_array::RecordBatch;
use arrow_row::{RowConverter, SortField};
use arrow_schema::{ArrowError, Schema, SchemaRef};

/// One destination's rows: their schema, how many, and their hashes summed.
///
/// A fingerprint with no schema has seen no batch and no stream header: a destination that
/// holds nothing at all, whose columns there is no way to tell. Fingerprints of the same rows
/// in the same schema are equal ([`PartialEq`]); [`check`] says how two differ.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint {
    /// The schema of the destination's batches (or of its stream or file, when it has none).
    pub schema: Option<SchemaRef>,
    /// Its rows.
    pub rows: u64,
    /// The wrapping sum of its rows' hashes.
    pub sum: u64,
}

impl Fingerprint {
    /// No rows yet, in `schema` (a destination whose stream or file says its schema before
    /// any batch, or holds none).
    pub fn empty(schema: SchemaRef) -> Self {
        Self {
            schema: Some(schema),
            rows: 0,
            sum: 0,
        }
    }

    /// Adds `other`'s rows to these: two parts of one destination, or destinations summed
    /// (the union of several outputs against the whole input).
    ///
    /// # Errors
    /// When both have a schema and the two differ: rows of two schemas are not one output.
    pub fn add(&mut self, other: &Fingerprint) -> Result<(), ArrowError> {
        self.adopt(other.schema.as_ref())?;
        self.rows += other.rows;
        self.sum = self.sum.wrapping_add(other.sum);
        Ok(())
    }

    /// Takes `schema` if this fingerprint has none yet; refuses one that differs from its own.
    fn adopt(&mut self, schema: Option<&SchemaRef>) -> Result<(), ArrowError> {
        match (&self.schema, schema) {
            (_, None) => Ok(()),
            (None, Some(schema)) => {
                self.schema = Some(schema.clone());
                Ok(())
            }
            (Some(mine), Some(theirs)) => match schema_difference(mine, theirs) {
                None => Ok(()),
                Some(difference) => Err(ArrowError::SchemaError(format!(
                    "batches of two schemas in one output: {difference}"
                ))),
            },
        }
    }
}

/// Hashes of every row of `batch`, every column.
fn row_hashes(
    converter: &RowConverter,
    batch: &RecordBatch,
    out: &mut Vec<u64>,
) -> Result<(), ArrowError> {
    let rows = converter.convert_columns(batch.columns())?;
    out.clear();
    out.extend(
        rows.iter()
            .map(|row| xxhash_rust::xxh3::xxh3_64(row.as_ref())),
    );
    Ok(())
}

fn converter(schema: &Schema) -> Result<RowConverter, ArrowError> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    RowConverter::new(fields)
}

/// What `n` destinations must hold of `batches`, each row's destination given by `ids` (the
/// reference partitioner: it fills the ids of a batch). Every destination, empty or not,
/// carries the batches' schema.
///
/// # Errors
/// A column arrow-row cannot encode, batches of more than one schema, or the partitioner's
/// error.
pub fn expected<E: From<ArrowError>>(
    batches: &[RecordBatch],
    n: u32,
    mut ids: impl FnMut(&RecordBatch, &mut Vec<u32>) -> Result<(), E>,
) -> Result<Vec<Fingerprint>, E> {
    let Some(first) = batches.first() else {
        return Ok(vec![Fingerprint::default(); n as usize]);
    };
    let schema = first.schema();
    let mut prints = vec![Fingerprint::empty(schema.clone()); n as usize];
    let converter = converter(&schema)?;
    let (mut destinations, mut hashes) = (Vec::new(), Vec::new());
    for batch in batches {
        if let Some(difference) = schema_difference(&schema, &batch.schema()) {
            return Err(ArrowError::SchemaError(format!(
                "the input holds batches of two schemas: {difference}"
            ))
            .into());
        }
        ids(batch, &mut destinations)?;
        if destinations.len() != batch.num_rows() {
            return Err(ArrowError::ComputeError(format!(
                "the reference partitioner gave {} ids for {} rows",
                destinations.len(),
                batch.num_rows()
            ))
            .into());
        }
        row_hashes(&converter, batch, &mut hashes)?;
        for (&p, &h) in destinations.iter().zip(&hashes) {
            let print = prints.get_mut(p as usize).ok_or_else(|| {
                ArrowError::ComputeError(format!(
                    "the reference partitioner gave destination {p} of {n}"
                ))
            })?;
            print.rows += 1;
            print.sum = print.sum.wrapping_add(h);
        }
    }
    Ok(prints)
}

/// What `batches` hold together (one destination's output). No batches: no schema either
/// ([`Fingerprint::empty`] gives one a schema read from elsewhere).
///
/// # Errors
/// A column arrow-row cannot encode, or batches of more than one schema.
pub fn of_batches(batches: &[RecordBatch]) -> Result<Fingerprint, ArrowError> {
    let mut print = Fingerprint::default();
    for batch in batches {
        add_batch(&mut print, batch)?;
    }
    Ok(print)
}

/// Adds `batch` to a destination's running fingerprint `print` (for outputs read as they
/// come, not kept).
///
/// # Errors
/// A column arrow-row cannot encode, or a batch whose schema differs from the print's.
pub fn add_batch(print: &mut Fingerprint, batch: &RecordBatch) -> Result<(), ArrowError> {
    print.adopt(Some(&batch.schema()))?;
    let mut hashes = Vec::new();
    row_hashes(&converter(&batch.schema())?, batch, &mut hashes)?;
    print.rows += hashes.len() as u64;
    print.sum = hashes.iter().fold(print.sum, |sum, &h| sum.wrapping_add(h));
    Ok(())
}

/// How `got` differs from `want`, in words (`None`: they are the same): the first column
/// whose name, type, nullability or metadata differs, or the schemas' own metadata.
fn schema_difference(want: &Schema, got: &Schema) -> Option<String> {
    let names = |s: &Schema| {
        s.fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if want.fields().len() != got.fields().len() {
        return Some(format!(
            "{} columns ({}) where the input has {} ({})",
            got.fields().len(),
            names(got),
            want.fields().len(),
            names(want)
        ));
    }
    for (i, (w, g)) in want.fields().iter().zip(got.fields()).enumerate() {
        let column = format!("column {i} ({})", w.name());
        if w.name() != g.name() {
            return Some(format!(
                "column {i} is named {:?} where the input's is {:?}",
                g.name(),
                w.name()
            ));
        }
        if w.data_type() != g.data_type() {
            return Some(format!(
                "{column} is {} where the input's is {}",
                g.data_type(),
                w.data_type()
            ));
        }
        if w.is_nullable() != g.is_nullable() {
            let nullable = |yes: bool| if yes { "nullable" } else { "not nullable" };
            return Some(format!(
                "{column} is {} where the input's is {}",
                nullable(g.is_nullable()),
                nullable(w.is_nullable())
            ));
        }
        if w.metadata() != g.metadata() {
            return Some(format!(
                "{column} has metadata {:?} where the input's has {:?}",
                g.metadata(),
                w.metadata()
            ));
        }
    }
    if want.metadata() != got.metadata() {
        return Some(format!(
            "the schema's metadata is {:?} where the input's is {:?}",
            got.metadata(),
            want.metadata()
        ));
    }
    None
}

/// An error naming `who` and the first destination whose schema or rows differ from
/// `expected`. A destination that was given no schema (it held nothing, and nothing told its
/// columns) is checked by its rows alone.
///
/// # Errors
/// That destination: the column and both types (or names, nullability, metadata) where the
/// schemas differ; otherwise rows expected and found, and whether the values differ.
pub fn check(who: &str, expected: &[Fingerprint], got: &[Fingerprint]) -> Result<(), String> {
    if expected.len() != got.len() {
        return Err(format!(
            "{who} wrote {} destinations of {}",
            got.len(),
            expected.len()
        ));
    }
    for (p, (want, have)) in expected.iter().zip(got).enumerate() {
        if let (Some(want), Some(have)) = (&want.schema, &have.schema)
            && let Some(difference) = schema_difference(want, have)
        {
            return Err(format!("{who}: destination {p}'s {difference}"));
        }
        if (want.rows, want.sum) != (have.rows, have.sum) {
            return Err(format!(
                "{who}: destination {p} holds {} rows{} where the reference partitioner puts {}",
                have.rows,
                if want.rows == have.rows {
                    " with other values"
                } else {
                    ""
                },
                want.rows
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int32Type;
    use arrow_array::{ArrayRef, DictionaryArray, Int64Array, StringArray, StringViewArray};
    use arrow_schema::{DataType, Field};
    use std::sync::Arc;

    fn batch(keys: &[i64], names: &[&str]) -> RecordBatch {
        RecordBatch::try_from_iter([
            ("k", Arc::new(Int64Array::from(keys.to_vec())) as ArrayRef),
            ("s", Arc::new(StringArray::from(names.to_vec())) as ArrayRef),
        ])
        .unwrap()
    }

    /// One column `s` of `column`'s type (nullable).
    fn one_column(column: ArrayRef) -> RecordBatch {
        RecordBatch::try_from_iter([("s", column)]).unwrap()
    }

    fn rows_and_sum(print: &Fingerprint) -> (u64, u64) {
        (print.rows, print.sum)
    }

    #[test]
    fn order_and_batching_do_not_matter_but_every_row_and_value_does() {
        let input = [batch(&[1, 2, 3], &["a", "b", "c"]), batch(&[4], &["d"])];
        let whole = of_batches(&input).unwrap();
        let reordered =
            of_batches(&[batch(&[4, 3], &["d", "c"]), batch(&[2, 1], &["b", "a"])]).unwrap();
        assert_eq!(whole, reordered);
        let changed = of_batches(&[batch(&[1, 2, 3, 4], &["a", "b", "c", "e"])]).unwrap();
        assert_eq!(changed.rows, whole.rows);
        assert_ne!(changed, whole);
        let lost = of_batches(&[batch(&[1, 2, 3], &["a", "b", "c"])]).unwrap();
        assert_ne!(lost, whole);
        // The expected prints add up to the whole; a row moved changes two of them.
        let by_key = |b: &RecordBatch, ids: &mut Vec<u32>| -> Result<(), ArrowError> {
            let keys = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            ids.clear();
            ids.extend(keys.values().iter().map(|k| (*k % 3) as u32));
            Ok(())
        };
        let prints = expected(&input, 3, by_key).unwrap();
        let mut total = Fingerprint::default();
        for print in &prints {
            assert_eq!(print.schema, Some(input[0].schema()));
            total.add(print).unwrap();
        }
        assert_eq!(total, whole);
        let mut moved = prints.clone();
        let mut running = Fingerprint::default();
        add_batch(&mut running, &batch(&[3], &["c"])).unwrap();
        moved[0].rows -= 1;
        moved[0].sum = moved[0].sum.wrapping_sub(running.sum);
        moved[1].rows += 1;
        moved[1].sum = moved[1].sum.wrapping_add(running.sum);
        let err = check("x", &prints, &moved).unwrap_err();
        assert!(err.contains("destination 0 holds"), "{err}");
        let schema = Some(input[0].schema());
        let print = |rows, sum| Fingerprint {
            schema: schema.clone(),
            rows,
            sum,
        };
        let err = check(
            "x",
            &[print(1, 5), print(2, 6)],
            &[print(1, 5), print(2, 7)],
        )
        .unwrap_err();
        assert!(
            err.contains("destination 1 holds 2 rows with other values"),
            "{err}"
        );
    }

    /// A Utf8View column and a Utf8 one of the same strings: arrow-row encodes them alike, so
    /// only the schema tells them apart, and it does.
    #[test]
    fn a_view_column_and_a_plain_one_differ() {
        let strings = ["a", "a string longer than twelve bytes", ""];
        let view = one_column(Arc::new(StringViewArray::from(strings.to_vec())));
        let plain = one_column(Arc::new(StringArray::from(strings.to_vec())));
        let (view, plain) = (of_batches(&[view]).unwrap(), of_batches(&[plain]).unwrap());
        assert_eq!(
            rows_and_sum(&view),
            rows_and_sum(&plain),
            "same rows, same bytes"
        );
        assert_ne!(view, plain);
        let err = check("w", std::slice::from_ref(&view), &[plain]).unwrap_err();
        assert_eq!(
            err,
            "w: destination 0's column 0 (s) is Utf8 where the input's is Utf8View"
        );
    }

    /// A dictionary column and its values decoded: different fingerprints, the error naming
    /// both types.
    #[test]
    fn a_dictionary_and_its_values_differ() {
        let values: ArrayRef = Arc::new(StringArray::from(vec!["x", "y"]));
        let keys = arrow_array::Int32Array::from(vec![1, 0, 1]);
        let dictionary = DictionaryArray::<Int32Type>::new(keys, values);
        let decoded = decoded_values(&dictionary);
        let (encoded, decoded) = (
            of_batches(&[one_column(Arc::new(dictionary))]).unwrap(),
            of_batches(&[one_column(decoded)]).unwrap(),
        );
        assert_eq!(encoded.rows, decoded.rows);
        assert_ne!(encoded, decoded);
        let err = check("w", &[encoded], &[decoded]).unwrap_err();
        assert_eq!(
            err,
            "w: destination 0's column 0 (s) is Utf8 where the input's is Dictionary(Int32, Utf8)"
        );
    }

    /// The dictionary's values, gathered through its keys (arrow's `take`).
    fn decoded_values(dictionary: &DictionaryArray<Int32Type>) -> ArrayRef {
        arrow_select::take::take(dictionary.values().as_ref(), dictionary.keys(), None).unwrap()
    }

    /// The same rows in the same types: equal fingerprints, however batched; an empty
    /// destination with the same schema is equal to the expected empty one.
    #[test]
    fn the_same_data_in_the_same_types_is_equal() {
        let make = || {
            one_column(Arc::new(StringViewArray::from(vec![
                "p",
                "a string longer than twelve bytes",
            ])))
        };
        let a = of_batches(&[make()]).unwrap();
        let b = of_batches(&[make().slice(0, 1), make().slice(1, 1)]).unwrap();
        assert_eq!(a, b);
        check("w", std::slice::from_ref(&a), &[b]).unwrap();
        let empty = Fingerprint::empty(make().schema());
        let want = expected(&[make()], 2, |_, ids: &mut Vec<u32>| {
            ids.clear();
            ids.extend([0, 0]);
            Ok::<_, ArrowError>(())
        })
        .unwrap();
        check("w", &want, &[a, empty]).unwrap();
    }

    /// Nullability and metadata are part of the schema: a column made nullable, or its
    /// metadata dropped, is named in the error.
    #[test]
    fn nullability_and_metadata_differ_too() {
        let column: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        let with = |field: Field| {
            RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![column.clone()]).unwrap()
        };
        let want = of_batches(&[with(Field::new("k", DataType::Int64, false))]).unwrap();
        let nullable = of_batches(&[with(Field::new("k", DataType::Int64, true))]).unwrap();
        let err = check("w", std::slice::from_ref(&want), &[nullable]).unwrap_err();
        assert_eq!(
            err,
            "w: destination 0's column 0 (k) is nullable where the input's is not nullable"
        );
        let tagged = Field::new("k", DataType::Int64, false)
            .with_metadata([("unit".to_string(), "m".to_string())].into());
        let err = check(
            "w",
            &[of_batches(&[with(tagged)]).unwrap()],
            std::slice::from_ref(&want),
        )
        .unwrap_err();
        assert!(err.contains("column 0 (k) has metadata {}"), "{err}");
    }

    /// Batches of two schemas in one destination are an error, not a fingerprint.
    #[test]
    fn one_destination_of_two_schemas_is_an_error() {
        let mut print = of_batches(&[one_column(Arc::new(StringArray::from(vec!["a"])))]).unwrap();
        let err = add_batch(
            &mut print,
            &one_column(Arc::new(StringViewArray::from(vec!["a"]))),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("column 0 (s) is Utf8View where the input's is Utf8"),
            "{err}"
        );
    }
}

//! Per-destination fingerprints: a destination's row count and the wrapping sum of its rows'
//! hashes (every column, through arrow-row's byte encoding and XXH3). A fingerprint does not
//! depend on the order of rows or how they are batched; one row in the wrong destination,
//! lost, doubled or changed changes it. The benchmarks check every contender's output with
//! them before reporting its time.

use arrow_array::RecordBatch;
use arrow_row::{RowConverter, SortField};
use arrow_schema::ArrowError;

/// One destination's rows: how many, and their hashes summed.
pub type Fingerprint = (u64, u64);

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

fn converter(batch: &RecordBatch) -> Result<RowConverter, ArrowError> {
    let fields = batch
        .schema()
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    RowConverter::new(fields)
}

/// What `n` destinations must hold of `batches`, each row's destination given by `ids` (the
/// reference partitioner: it fills the ids of a batch).
///
/// # Errors
/// A column arrow-row cannot encode, or the partitioner's error.
pub fn expected<E: From<ArrowError>>(
    batches: &[RecordBatch],
    n: u32,
    mut ids: impl FnMut(&RecordBatch, &mut Vec<u32>) -> Result<(), E>,
) -> Result<Vec<Fingerprint>, E> {
    let mut prints = vec![(0u64, 0u64); n as usize];
    let Some(first) = batches.first() else {
        return Ok(prints);
    };
    let converter = converter(first)?;
    let (mut destinations, mut hashes) = (Vec::new(), Vec::new());
    for batch in batches {
        ids(batch, &mut destinations)?;
        row_hashes(&converter, batch, &mut hashes)?;
        for (&p, &h) in destinations.iter().zip(&hashes) {
            let print = &mut prints[p as usize];
            print.0 += 1;
            print.1 = print.1.wrapping_add(h);
        }
    }
    Ok(prints)
}

/// What `batches` hold together (one destination's output).
///
/// # Errors
/// A column arrow-row cannot encode.
pub fn of_batches(batches: &[RecordBatch]) -> Result<Fingerprint, ArrowError> {
    let mut print = (0u64, 0u64);
    let Some(first) = batches.first() else {
        return Ok(print);
    };
    let converter = converter(first)?;
    let mut hashes = Vec::new();
    for batch in batches {
        row_hashes(&converter, batch, &mut hashes)?;
        print.0 += hashes.len() as u64;
        print.1 = hashes.iter().fold(print.1, |sum, &h| sum.wrapping_add(h));
    }
    Ok(print)
}

/// Adds `batch` to a destination's running fingerprint `print` (for outputs read as they
/// come, not kept).
///
/// # Errors
/// A column arrow-row cannot encode.
pub fn add_batch(print: &mut Fingerprint, batch: &RecordBatch) -> Result<(), ArrowError> {
    let more = of_batches(std::slice::from_ref(batch))?;
    print.0 += more.0;
    print.1 = print.1.wrapping_add(more.1);
    Ok(())
}

/// An error naming `who` and the first destination whose rows differ from `expected`.
///
/// # Errors
/// That destination: rows expected and found, and whether the values differ.
pub fn check(who: &str, expected: &[Fingerprint], got: &[Fingerprint]) -> Result<(), String> {
    if expected.len() != got.len() {
        return Err(format!(
            "{who} wrote {} destinations of {}",
            got.len(),
            expected.len()
        ));
    }
    for (p, (want, have)) in expected.iter().zip(got).enumerate() {
        if want != have {
            return Err(format!(
                "{who}: destination {p} holds {} rows{} where the reference partitioner puts {}",
                have.0,
                if want.0 == have.0 {
                    " with other values"
                } else {
                    ""
                },
                want.0
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;

    fn batch(keys: &[i64], names: &[&str]) -> RecordBatch {
        RecordBatch::try_from_iter([
            ("k", Arc::new(Int64Array::from(keys.to_vec())) as ArrayRef),
            ("s", Arc::new(StringArray::from(names.to_vec())) as ArrayRef),
        ])
        .unwrap()
    }

    #[test]
    fn order_and_batching_do_not_matter_but_every_row_and_value_does() {
        let input = [batch(&[1, 2, 3], &["a", "b", "c"]), batch(&[4], &["d"])];
        let whole = of_batches(&input).unwrap();
        let reordered =
            of_batches(&[batch(&[4, 3], &["d", "c"]), batch(&[2, 1], &["b", "a"])]).unwrap();
        assert_eq!(whole, reordered);
        let changed = of_batches(&[batch(&[1, 2, 3, 4], &["a", "b", "c", "e"])]).unwrap();
        assert_eq!(changed.0, whole.0);
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
        let rows: u64 = prints.iter().map(|p| p.0).sum();
        let sum = prints.iter().fold(0u64, |s, p| s.wrapping_add(p.1));
        assert_eq!((rows, sum), whole);
        let mut moved = prints.clone();
        let mut running = (0, 0);
        add_batch(&mut running, &batch(&[3], &["c"])).unwrap();
        moved[0] = (moved[0].0 - 1, moved[0].1.wrapping_sub(running.1));
        moved[1] = (moved[1].0 + 1, moved[1].1.wrapping_add(running.1));
        let err = check("x", &prints, &moved).unwrap_err();
        assert!(err.contains("destination 0 holds"), "{err}");
        let err = check("x", &[(1, 5), (2, 6)], &[(1, 5), (2, 7)]).unwrap_err();
        assert!(
            err.contains("destination 1 holds 2 rows with other values"),
            "{err}"
        );
    }
}

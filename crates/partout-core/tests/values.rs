//! Partitioning by value ([`ValueIds`] over a shared [`ValueTable`]) against an oracle that
//! knows nothing of arrow-row: rows are numbered in the order their keys first appear, two
//! rows sharing a number exactly when arrow's logical array equality says their key values
//! are equal (nulls equal to nulls). For every key type, one and two key columns, sliced and
//! dictionary-encoded columns, batches cut anywhere; the limit on distinct keys; the keys
//! given back in id order.

use arrow_array::{Array, ArrayRef, DictionaryArray, RecordBatch, UInt32Array, types::Int16Type};
use arrow_schema::{DataType, TimeUnit};
use partout_core::PartoutError;
use partout_core::ids::{ValueIds, ValueTable, is_value_key_type};
use partout_testkit::{batch_of, random_array, rng};
use proptest::prelude::*;
use std::sync::Arc;

/// The key types partitioning by value takes.
fn key_types() -> Vec<DataType> {
    use DataType::*;
    vec![
        Boolean,
        Int8,
        Int16,
        Int32,
        Int64,
        UInt8,
        UInt16,
        UInt32,
        UInt64,
        Decimal32(9, 2),
        Decimal64(18, 3),
        Decimal128(38, 10),
        Decimal256(76, 20),
        Date32,
        Date64,
        Timestamp(TimeUnit::Second, None),
        Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        Timestamp(TimeUnit::Microsecond, Some("+05:30".into())),
        Timestamp(TimeUnit::Nanosecond, None),
        Utf8,
        LargeUtf8,
        Utf8View,
    ]
}

/// A column of `len` rows drawn from a pool of `distinct` random values of `data_type` (a
/// third of them null), so that keys repeat; dictionary-encoded when `dictionary`, sliced
/// by `offset`.
fn column(
    data_type: &DataType,
    len: usize,
    distinct: usize,
    dictionary: bool,
    offset: usize,
    seed: u64,
) -> ArrayRef {
    let mut rng = rng(seed);
    let pool = random_array(data_type, distinct, 0.3, &mut rng);
    let picks: Vec<u32> = (0..len + offset)
        .map(|i| ((seed as usize).wrapping_mul(31).wrapping_add(i * 7919) % distinct) as u32)
        .collect();
    let picks = UInt32Array::from(picks);
    let column = match dictionary {
        false => arrow_select::take::take(pool.as_ref(), &picks, None).unwrap(),
        true => {
            let keys = arrow_array::Int16Array::from_iter(picks.values().iter().map(|&p| {
                // Nulls in the keys as well as in the values.
                (p % 5 != 4).then_some(p as i16)
            }));
            Arc::new(DictionaryArray::<Int16Type>::try_new(keys, pool).unwrap())
        }
    };
    column.slice(offset, len)
}

/// The oracle: each row's number, keys numbered as they first appear; equality by arrow's
/// logical equality of one-row slices, column by column.
fn oracle(batches: &[RecordBatch], keys: &[usize]) -> (Vec<Vec<u32>>, Vec<(usize, usize)>) {
    let mut firsts: Vec<(usize, usize)> = Vec::new();
    let mut ids = Vec::new();
    for (b, batch) in batches.iter().enumerate() {
        let mut batch_ids = Vec::new();
        for row in 0..batch.num_rows() {
            let same = |&(fb, fr): &(usize, usize)| {
                keys.iter().all(|&k| {
                    let a = logical(batches[fb].column(k), fr);
                    let b = logical(batch.column(k), row);
                    a.to_data() == b.to_data()
                })
            };
            let id = match firsts.iter().position(same) {
                Some(id) => id,
                None => {
                    firsts.push((b, row));
                    firsts.len() - 1
                }
            };
            batch_ids.push(id as u32);
        }
        ids.push(batch_ids);
    }
    (ids, firsts)
}

/// Row `row` of `array` as a one-row array of its values' type (a dictionary decoded).
fn logical(array: &ArrayRef, row: usize) -> ArrayRef {
    let one = array.slice(row, 1);
    match one.data_type() {
        DataType::Dictionary(_, value) => arrow_cast::cast(&one, value).unwrap(),
        _ => one,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn ids_number_keys_as_they_first_appear(
        first in 0..22usize,
        second in proptest::option::of(0..22usize),
        len in 1..120usize,
        distinct in 1..12usize,
        dictionary in any::<bool>(),
        offset in 0..3usize,
        cuts in proptest::collection::vec(0..120usize, 0..4),
        seed in any::<u64>(),
    ) {
        let types = key_types();
        let mut columns = vec![column(&types[first], len, distinct, dictionary, offset, seed)];
        if let Some(second) = second {
            columns.push(column(&types[second], len, distinct + 1, false, 0, seed ^ 0x5eed));
        }
        // A column that is not a key, to show only the keys count.
        columns.push(column(&DataType::Int64, len, len.max(2), false, 0, seed.rotate_left(7)));
        let whole = batch_of(columns);
        let keys: Vec<usize> = (0..whole.num_columns() - 1).collect();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (len + 1)).collect();
        cuts.push(0);
        cuts.push(len);
        cuts.sort_unstable();
        cuts.dedup();
        let batches: Vec<RecordBatch> =
            cuts.windows(2).map(|w| whole.slice(w[0], w[1] - w[0])).collect();

        let key_types = keys.iter().map(|&k| whole.schema().field(k).data_type().clone()).collect();
        let table = Arc::new(ValueTable::try_new(key_types, 1000).unwrap());
        let mut ids = ValueIds::try_new(table.clone(), keys.clone(), &whole.schema()).unwrap();
        let mut got = Vec::new();
        for batch in &batches {
            let mut out = vec![99];
            ids.compute(batch, &mut out).unwrap();
            got.push(out);
        }
        let (expected, firsts) = oracle(&batches, &keys);
        prop_assert_eq!(&got, &expected);
        prop_assert_eq!(table.len(), firsts.len());
        // The keys come back in id order, each equal to its first row's.
        let back = table.keys().unwrap();
        prop_assert_eq!(back.len(), keys.len());
        for (id, &(b, row)) in firsts.iter().enumerate() {
            for (c, &k) in keys.iter().enumerate() {
                let want = logical(batches[b].column(k), row);
                let have = logical(&back[c], id);
                prop_assert_eq!(want.to_data(), have.to_data(), "key {} column {}", id, c);
            }
        }
        prop_assert!(table.memory_bytes() >= firsts.len() * 48);
    }
}

#[test]
fn the_key_past_the_limit_is_refused_and_known_keys_still_pass() {
    let batch = batch_of(vec![Arc::new(arrow_array::Int32Array::from(vec![
        Some(5),
        None,
        Some(5),
        Some(7),
    ]))]);
    let table = Arc::new(ValueTable::try_new(vec![DataType::Int32], 2).unwrap());
    let mut ids = ValueIds::try_new(table.clone(), vec![0], &batch.schema()).unwrap();
    let mut out = Vec::new();
    let error = ids.compute(&batch, &mut out).unwrap_err();
    assert!(
        matches!(error, PartoutError::TooManyValues { limit: 2 }),
        "{error}"
    );
    assert!(
        error.to_string().contains("more than 2 distinct values"),
        "{error}"
    );
    // 5 and null took the two ids; 7 took none.
    assert_eq!(table.len(), 2);
    ids.compute(&batch.slice(0, 3), &mut out).unwrap();
    assert_eq!(out, [0, 1, 0]);
}

#[test]
fn two_workers_share_one_numbering() {
    let a = batch_of(vec![Arc::new(arrow_array::StringArray::from(vec![
        "x", "y",
    ]))]);
    let b = batch_of(vec![Arc::new(arrow_array::StringViewArray::from(vec![
        "y", "z",
    ]))]);
    let table = Arc::new(ValueTable::try_new(vec![DataType::Utf8], 10).unwrap());
    let mut first = ValueIds::try_new(table.clone(), vec![0], &a.schema()).unwrap();
    let mut out = Vec::new();
    first.compute(&a, &mut out).unwrap();
    assert_eq!(out, [0, 1]);
    // A worker whose column is of another type than the table's is refused by name.
    let error = ValueIds::try_new(table.clone(), vec![0], &b.schema()).unwrap_err();
    assert!(error.to_string().contains("Utf8View"), "{error}");
    let c = batch_of(vec![Arc::new(arrow_array::StringArray::from(vec![
        "z", "x",
    ]))]);
    let mut second = ValueIds::try_new(table.clone(), vec![0], &c.schema()).unwrap();
    second.compute(&c, &mut out).unwrap();
    assert_eq!(out, [2, 0]);
    first.compute(&c, &mut out).unwrap();
    assert_eq!(out, [2, 0]);
}

#[test]
fn unsupported_keys_and_impossible_options_are_refused_by_name() {
    let error = ValueTable::try_new(vec![DataType::Float64], 10).unwrap_err();
    assert!(error.to_string().contains("Float64"), "{error}");
    assert!(ValueTable::try_new(vec![], 10).is_err());
    assert!(ValueTable::try_new(vec![DataType::Int32], 0).is_err());
    let batch = batch_of(vec![Arc::new(arrow_array::Int32Array::from(vec![1]))]);
    let table = Arc::new(ValueTable::try_new(vec![DataType::Int32], 10).unwrap());
    assert!(ValueIds::try_new(table, vec![1], &batch.schema()).is_err());
    // Every listed key type is taken, and the testkit's types outside it are not.
    for t in key_types() {
        assert!(is_value_key_type(&t), "{t}");
        assert!(is_value_key_type(&DataType::Dictionary(
            Box::new(DataType::Int16),
            Box::new(t.clone())
        )));
    }
    let refused = partout_testkit::flat_types()
        .into_iter()
        .filter(|t| !is_value_key_type(t))
        .count();
    assert!(refused > 10);
}

//! [`PartitioningSpec::resolve`]: every scheme resolved by name, and each impossible
//! partitioning an error that names what is wrong; the schemes' names read back.

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::DataType;
use partout_core::PartoutError;
use partout_core::ids::{PartitionIds, Partitioning, PartitioningSpec, Scheme};
use partout_core::plan::MAX_PARTITIONS;
use std::sync::Arc;

/// `k` (Int64, 0..100), `s` (Utf8), `u` (UInt64), `g` (Int32, `row % 3`).
fn data() -> RecordBatch {
    let k: Vec<i64> = (0..100).collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("k", Arc::new(Int64Array::from(k.clone()))),
        (
            "s",
            Arc::new(StringArray::from_iter_values(
                k.iter().map(|v| v.to_string()),
            )),
        ),
        ("u", Arc::new(UInt64Array::from_iter_values(0..100))),
        (
            "g",
            Arc::new(Int32Array::from_iter_values((0..100).map(|v| v % 3))),
        ),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

fn resolve(
    scheme: Scheme,
    keys: &[&str],
    n: u32,
    sample: Option<&RecordBatch>,
) -> Result<Partitioning, PartoutError> {
    let data = data();
    PartitioningSpec::new(scheme, keys.iter().copied(), n).resolve(&data.schema(), sample)
}

/// The ids of `data()` under `partitioning`.
fn ids_of(partitioning: Partitioning) -> Vec<u32> {
    let data = data();
    let mut ids = PartitionIds::try_new(partitioning, &data.schema()).unwrap();
    let mut out = Vec::new();
    ids.compute(&data, &mut out).unwrap();
    out
}

#[test]
fn every_scheme_resolves_by_name() {
    let hash = resolve(Scheme::Hash, &["s", "k"], 8, None).unwrap();
    assert_eq!(hash, Partitioning::hash([1, 0], 8));
    let spark = resolve(Scheme::Spark, &["k"], 200, None).unwrap();
    assert_eq!(spark, Partitioning::spark([0], 200));
    let round_robin = resolve(Scheme::RoundRobin, &[], 4, None).unwrap();
    assert_eq!(round_robin, Partitioning::round_robin(4));
    let single = resolve(Scheme::Single, &[], 1, None).unwrap();
    assert_eq!(single, Partitioning::single());
    let given = resolve(Scheme::Given, &["g"], 3, None).unwrap();
    assert_eq!(given, Partitioning::given(3, 3));
    assert_eq!(&ids_of(given)[..4], [0, 1, 2, 0]);
}

#[test]
fn range_picks_its_split_points_from_the_sample() {
    let data = data();
    let range = resolve(Scheme::Range, &["k"], 4, Some(&data)).unwrap();
    assert_eq!(range.scheme(), Scheme::Range);
    assert_eq!(range.keys(), [0]);
    assert_eq!(range.num_partitions(), 4);
    let splits = range.bounds().unwrap().splits.column(0).clone();
    assert_eq!(
        splits.as_ref(),
        &Int64Array::from(vec![25, 50, 75]) as &dyn arrow_array::Array
    );
    // Ascending keys, in order: destination p holds the keys above split p - 1 and up to
    // split p.
    let ids = ids_of(range);
    assert!(ids.is_sorted(), "{ids:?}");
    let counts: Vec<usize> = (0..4)
        .map(|p| ids.iter().filter(|&&id| id == p).count())
        .collect();
    assert_eq!(counts, [26, 25, 25, 24]);
    // A sample of the key columns alone, found by name, picks the same split points.
    let keys_only = data.project(&[0]).unwrap();
    let again = resolve(Scheme::Range, &["k"], 4, Some(&keys_only)).unwrap();
    assert_eq!(again.bounds().unwrap().splits.column(0), &splits);
}

/// The error's text, checked to be of the kind `kind` says.
#[track_caller]
fn refused(result: Result<Partitioning, PartoutError>, kind: fn(&PartoutError) -> bool) -> String {
    let err = result.unwrap_err();
    assert!(kind(&err), "{err:?}");
    err.to_string()
}

fn invalid(e: &PartoutError) -> bool {
    matches!(e, PartoutError::InvalidArgument(_))
}

#[test]
fn impossible_partitionings_are_errors_naming_the_problem() {
    let data = data();
    let missing = refused(
        resolve(Scheme::Hash, &["k", "nope"], 4, None),
        |e| matches!(e, PartoutError::MissingKeyColumn { name, .. } if name == "nope"),
    );
    assert!(
        missing.contains("no key column \"nope\"") && missing.contains("k, s, u, g"),
        "{missing}"
    );

    let unhashable = refused(resolve(Scheme::Spark, &["u"], 4, None), |e| {
        matches!(
            e,
            PartoutError::UnsupportedType {
                data_type: DataType::UInt64,
                ..
            }
        )
    });
    assert!(
        unhashable.contains("UInt64") && unhashable.contains("spark"),
        "{unhashable}"
    );
    let not_ids = refused(resolve(Scheme::Given, &["s"], 4, None), |e| {
        matches!(
            e,
            PartoutError::UnsupportedType {
                data_type: DataType::Utf8,
                ..
            }
        )
    });
    assert!(not_ids.contains("integer"), "{not_ids}");

    let zero = refused(resolve(Scheme::Hash, &["k"], 0, None), invalid);
    assert!(
        zero.contains("at least 1") && zero.contains("got 0"),
        "{zero}"
    );
    let many = refused(
        resolve(Scheme::Hash, &["k"], MAX_PARTITIONS + 1, None),
        invalid,
    );
    assert!(
        many.contains("between 1 and 1048576, got 1048577"),
        "{many}"
    );

    let unsampled = refused(resolve(Scheme::Range, &["k"], 4, None), invalid);
    assert!(
        unsampled.contains("range partitioning")
            && unsampled.contains("a sample of the data, and none was given"),
        "{unsampled}"
    );
    let empty = refused(
        resolve(Scheme::Range, &["k"], 4, Some(&data.slice(0, 0))),
        invalid,
    );
    assert!(empty.contains("no rows"), "{empty}");
    let other_sample = data.project(&[1]).unwrap();
    let without_key = refused(
        resolve(Scheme::Range, &["k"], 4, Some(&other_sample)),
        invalid,
    );
    assert!(without_key.contains("no key column \"k\""), "{without_key}");

    let dealt = refused(resolve(Scheme::RoundRobin, &["k"], 4, None), invalid);
    assert!(
        dealt.contains("round-robin takes no key columns"),
        "{dealt}"
    );
    let keyless = refused(resolve(Scheme::Hash, &[], 4, None), invalid);
    assert!(
        keyless.contains("the hash scheme needs key columns"),
        "{keyless}"
    );
    let ranged = refused(resolve(Scheme::Range, &[], 4, Some(&data)), invalid);
    assert!(
        ranged.contains("the range scheme needs key columns"),
        "{ranged}"
    );
    let single = refused(resolve(Scheme::Single, &[], 4, None), invalid);
    assert!(single.contains("1 partition, not 4"), "{single}");
    let two_ids = refused(resolve(Scheme::Given, &["g", "k"], 4, None), invalid);
    assert!(two_ids.contains("exactly one column"), "{two_ids}");
}

#[test]
fn schemes_are_named_once() {
    let named = [
        (Scheme::Hash, "hash"),
        (Scheme::Spark, "spark"),
        (Scheme::RoundRobin, "round-robin"),
        (Scheme::Range, "range"),
    ];
    for (scheme, name) in named {
        assert_eq!(scheme.to_string(), name);
        assert_eq!(name.parse::<Scheme>().unwrap(), scheme);
    }
    assert_eq!("round_robin".parse::<Scheme>().unwrap(), Scheme::RoundRobin);
    assert_eq!(Scheme::Single.to_string(), "single");
    assert_eq!(Scheme::Given.to_string(), "given");
    for bad in ["modulo", "Hash", "single", "given", ""] {
        let err = bad.parse::<Scheme>().unwrap_err();
        assert!(invalid(&err), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("unknown scheme {bad:?}")) && text.contains("\"round-robin\""),
            "{text}"
        );
    }
}

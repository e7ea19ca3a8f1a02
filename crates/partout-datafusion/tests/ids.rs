//! partout's ids are DataFusion's: for random batches of every type partout generates (the
//! key types DataFusion hashes among them), with nulls, slices, -0.0 and NaN, several key
//! columns and 1 to 1000 partitions, every row's partition equals the one DataFusion's own
//! `BatchPartitioner` puts it in; where DataFusion cannot hash a type, both refuse it.

use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use arrow_array::{Array, ArrayRef, Float32Array, Float64Array, RecordBatch};
use arrow_schema::DataType;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::physical_plan::metrics::Time;
use datafusion::physical_plan::repartition::BatchPartitioner;
use partout_datafusion::DataFusionIds;
use partout_testkit::{every_type, random_batch, rng};
use proptest::prelude::*;
use std::sync::Arc;

/// Floats with -0.0, +0.0 and NaNs of both signs mixed in (DataFusion normalises -0.0).
fn with_special_floats(batch: RecordBatch) -> RecordBatch {
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|c| -> ArrayRef {
            match c.data_type() {
                DataType::Float64 => {
                    let values = c.as_primitive::<arrow_array::types::Float64Type>();
                    let specials = [-0.0, 0.0, f64::NAN, -f64::NAN, 1.5];
                    Arc::new(Float64Array::from_iter((0..c.len()).map(|i| {
                        values.is_valid(i).then(|| match i % 3 {
                            0 => specials[(i / 3) % specials.len()],
                            _ => values.value(i),
                        })
                    })))
                }
                DataType::Float32 => {
                    let values = c.as_primitive::<arrow_array::types::Float32Type>();
                    let specials = [-0.0f32, 0.0, f32::NAN, -f32::NAN, 1.5];
                    Arc::new(Float32Array::from_iter((0..c.len()).map(|i| {
                        values.is_valid(i).then(|| match i % 3 {
                            0 => specials[(i / 3) % specials.len()],
                            _ => values.value(i),
                        })
                    })))
                }
                _ => c.clone(),
            }
        })
        .collect();
    RecordBatch::try_new(batch.schema(), columns).unwrap()
}

/// Checks one batch: keys are the columns after the leading row number.
fn check(types: &[DataType], rows: usize, nulls: f64, sliced: bool, n: usize, seed: u64) {
    let mut rng = rng(seed);
    let batch = with_special_floats(random_batch(types, rows, nulls, sliced, &mut rng));
    let exprs: Vec<Arc<dyn PhysicalExpr>> = (1..=types.len())
        .map(|i| Arc::new(Column::new(&format!("c{}", i - 1), i)) as Arc<dyn PhysicalExpr>)
        .collect();
    let mut ids = Vec::new();
    let ours = DataFusionIds::new(exprs.clone(), n).compute(&batch, &mut ids);
    let mut theirs = vec![u32::MAX; rows];
    let mut partitioner = BatchPartitioner::new_hash_partitioner(exprs, n, Time::new()).unwrap();
    let result = partitioner.partition(batch.clone(), |p, part| {
        for row in part.column(0).as_primitive::<UInt32Type>().values() {
            theirs[*row as usize] = p as u32;
        }
        Ok(())
    });
    match (ours, result) {
        (Ok(()), Ok(())) => assert_eq!(ids, theirs, "{types:?} into {n} (seed {seed})"),
        (Err(_), Err(_)) => {}
        (ours, theirs) => panic!(
            "{types:?}: partout {:?}, DataFusion {:?}",
            ours.err(),
            theirs.err()
        ),
    }
}

/// Every type partout generates but zero-size fixed-size lists, which DataFusion hashes but
/// cannot move (arrow 59's `take` returns none of their rows), so its partitioner fails.
fn movable_types() -> Vec<DataType> {
    every_type()
        .into_iter()
        .filter(|t| !matches!(t, DataType::FixedSizeList(_, 0)))
        .collect()
}

/// The types DataFusion hashes among those partout generates (checked by hashing them).
fn hashed_types() -> Vec<DataType> {
    movable_types()
        .into_iter()
        .filter(|t| {
            let mut rng = rng(1);
            let batch = random_batch(std::slice::from_ref(t), 3, 0.5, false, &mut rng);
            let mut ids = Vec::new();
            let key: Arc<dyn PhysicalExpr> = Arc::new(Column::new("c0", 1));
            DataFusionIds::new(vec![key], 7)
                .compute(&batch, &mut ids)
                .is_ok()
        })
        .collect()
}

#[test]
fn every_hashed_type_alone_matches_at_several_counts() {
    let types = hashed_types();
    // The key types the issue lists are among them.
    for wanted in [
        DataType::Int8,
        DataType::UInt64,
        DataType::Float32,
        DataType::Float64,
        DataType::Utf8,
        DataType::LargeUtf8,
        DataType::Utf8View,
        DataType::Binary,
        DataType::Boolean,
        DataType::Date32,
        DataType::Date64,
    ] {
        assert!(types.contains(&wanted), "{wanted} is not hashed");
    }
    assert!(types.iter().any(|t| matches!(t, DataType::Decimal128(..))));
    assert!(types.iter().any(|t| matches!(t, DataType::Decimal256(..))));
    assert!(types.iter().any(|t| matches!(t, DataType::Dictionary(..))));
    assert!(types.iter().any(|t| matches!(t, DataType::Timestamp(..))));
    for (i, t) in movable_types().iter().enumerate() {
        for (j, n) in [1usize, 2, 7, 200, 1000].into_iter().enumerate() {
            let nulls = [0.0, 0.5, 1.0][(i + j) % 3];
            check(
                std::slice::from_ref(t),
                300,
                nulls,
                j % 2 == 1,
                n,
                (i * 10 + j) as u64,
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_keys_go_where_datafusion_puts_them(
        picks in prop::collection::vec(0usize..1000, 1..4),
        rows in 0usize..400,
        nulls in 0usize..3,
        sliced in any::<bool>(),
        n in 1usize..=1000,
        seed in any::<u64>(),
    ) {
        let all = hashed_types();
        let types: Vec<DataType> = picks.iter().map(|&i| all[i % all.len()].clone()).collect();
        check(&types, rows, [0.0, 0.5, 1.0][nulls], sliced, n, seed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The benchmarks' re-creation of DataFusion's ids (`partout_testkit::baseline`) gives
    /// DataFusion's own: what the benchmarks call DataFusion's hash is DataFusion's hash.
    #[test]
    fn the_benchmarks_recreation_of_datafusions_ids_is_exact(
        picks in prop::collection::vec(0usize..3, 1..4),
        rows in 0usize..400,
        nulls in 0usize..3,
        n in 1u32..=1000,
        seed in any::<u64>(),
    ) {
        let kinds = [DataType::Int64, DataType::Utf8, DataType::Utf8View];
        let types: Vec<DataType> = picks.iter().map(|&i| kinds[i].clone()).collect();
        let mut rng = rng(seed);
        let batch = random_batch(&types, rows, [0.0, 0.5, 1.0][nulls], false, &mut rng);
        let keys: Vec<usize> = (1..=types.len()).collect();
        let exprs: Vec<Arc<dyn PhysicalExpr>> = keys
            .iter()
            .map(|&i| Arc::new(Column::new(&format!("c{}", i - 1), i)) as Arc<dyn PhysicalExpr>)
            .collect();
        let (mut theirs, mut recreated) = (Vec::new(), Vec::new());
        DataFusionIds::new(exprs, n as usize).compute(&batch, &mut theirs).unwrap();
        partout_testkit::baseline::DataFusionHash::new().ids(&batch, &keys, n, &mut recreated);
        prop_assert_eq!(recreated, theirs);
    }
}

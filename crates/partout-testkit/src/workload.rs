//! Benchmark workloads: the matrix of Velox's PartitionedVectorBenchmark (10,000-row batches
//! of BOOLEAN, INTEGER, BIGINT, HUGEINT, VARCHAR and a mix, 1 or 10 columns, with or without
//! nulls), built as Arrow batches.

use crate::{TestRng, random_nulls};
use arrow_array::{
    ArrayRef, BooleanArray, Decimal128Array, Int32Array, Int64Array, RecordBatch, StringArray,
    StringViewArray,
};
use arrow_schema::{Field, Schema};
use rand::Rng;
use std::fmt;
use std::sync::Arc;

/// A column type of the benchmark matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Boolean.
    Boolean,
    /// Int32.
    Integer,
    /// Int64.
    BigInt,
    /// Decimal128(38, 0): Velox's HUGEINT.
    HugeInt,
    /// Utf8, 0..=20 ASCII bytes.
    Varchar,
    /// Utf8View, 0..=20 ASCII bytes (about 60% inline).
    VarcharView,
    /// RunEndEncoded BIGINT with Int32 run ends, in runs of 1 to 15 rows (mean 8).
    RunEnd,
    /// Columns cycling through the kinds above (but RUN_END).
    Mixed,
}

impl ColumnKind {
    /// Every kind, in the order the benchmark table lists them.
    pub const ALL: [ColumnKind; 8] = [
        ColumnKind::Boolean,
        ColumnKind::Integer,
        ColumnKind::BigInt,
        ColumnKind::HugeInt,
        ColumnKind::Varchar,
        ColumnKind::VarcharView,
        ColumnKind::RunEnd,
        ColumnKind::Mixed,
    ];

    /// Whether every value has the same width (the ≤ 0.6 ns/row/col target applies).
    pub fn is_fixed_width(self) -> bool {
        matches!(self, Self::Integer | Self::BigInt | Self::HugeInt)
    }
}

impl fmt::Display for ColumnKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Boolean => "BOOLEAN",
            Self::Integer => "INTEGER",
            Self::BigInt => "BIGINT",
            Self::HugeInt => "HUGEINT",
            Self::Varchar => "VARCHAR",
            Self::VarcharView => "VARCHAR_VIEW",
            Self::RunEnd => "RUN_END",
            Self::Mixed => "Mixed",
        })
    }
}

const MIX: [ColumnKind; 6] = [
    ColumnKind::Integer,
    ColumnKind::BigInt,
    ColumnKind::Varchar,
    ColumnKind::Boolean,
    ColumnKind::HugeInt,
    ColumnKind::VarcharView,
];

fn column(kind: ColumnKind, rows: usize, null_density: f64, rng: &mut TestRng) -> ArrayRef {
    let nulls = random_nulls(rows, null_density, rng);
    match kind {
        ColumnKind::Boolean => Arc::new(BooleanArray::new(
            (0..rows).map(|_| rng.random::<bool>()).collect(),
            nulls,
        )),
        ColumnKind::Integer => Arc::new(Int32Array::new(
            (0..rows).map(|_| rng.random()).collect(),
            nulls,
        )),
        ColumnKind::BigInt => Arc::new(Int64Array::new(
            (0..rows).map(|_| rng.random()).collect(),
            nulls,
        )),
        ColumnKind::HugeInt => Arc::new(
            Decimal128Array::new(
                (0..rows)
                    .map(|_| rng.random::<i64>() as i128 * 1_000_003)
                    .collect(),
                nulls,
            )
            .with_precision_and_scale(38, 0)
            .expect("valid decimal"),
        ),
        ColumnKind::Varchar | ColumnKind::VarcharView => {
            let strings: Vec<Option<String>> = (0..rows)
                .map(|i| {
                    let len = rng.random_range(0..=20);
                    let s: String = (0..len)
                        .map(|_| rng.random_range(b'a'..=b'z') as char)
                        .collect();
                    nulls.as_ref().is_none_or(|n| n.is_valid(i)).then_some(s)
                })
                .collect();
            if kind == ColumnKind::Varchar {
                Arc::new(StringArray::from(strings))
            } else {
                Arc::new(StringViewArray::from(strings))
            }
        }
        ColumnKind::RunEnd => {
            let mut ends = Vec::new();
            let mut end = 0;
            while end < rows {
                end = (end + rng.random_range(1..=15)).min(rows);
                ends.push(end as i32);
            }
            let values = Int64Array::new(
                (0..ends.len()).map(|_| rng.random()).collect(),
                random_nulls(ends.len(), null_density, rng),
            );
            Arc::new(
                arrow_array::RunArray::try_new(&Int32Array::from(ends), &values)
                    .expect("valid run array"),
            )
        }
        ColumnKind::Mixed => unreachable!("mixed is a batch of other kinds"),
    }
}

/// A batch of `columns` columns of `kind` (for `Mixed`, cycling through the kinds).
pub fn matrix_batch(
    kind: ColumnKind,
    columns: usize,
    rows: usize,
    null_density: f64,
    rng: &mut TestRng,
) -> RecordBatch {
    let mut fields = Vec::with_capacity(columns);
    let mut arrays = Vec::with_capacity(columns);
    for c in 0..columns {
        let k = if kind == ColumnKind::Mixed {
            MIX[c % MIX.len()]
        } else {
            kind
        };
        let array = column(k, rows, null_density, rng);
        fields.push(Field::new(format!("c{c}"), array.data_type().clone(), true));
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("valid batch")
}

/// The bytes of Arrow data the batch's rows occupy (buffers, not their spare capacity).
pub fn data_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum()
}

//! Partition ids: one destination per row, from the key columns of a batch.
//!
//! ```text
//!  RecordBatch ──► key columns ──► running hash per row ──► reducer ──► ids (u32 per row)
//! ```
//!
//! A [`Partitioning`] describes the scheme, the key columns and the partition count;
//! [`PartitionIds`] checks it against a schema once and then computes ids batch after batch
//! into a caller-owned buffer, reusing its own scratch. A [`PartitioningSpec`] is a
//! partitioning as callers name it (a scheme, key column names, a partition count), resolved
//! against a schema, and for range partitioning a sample of the data, into a [`Partitioning`].
//!
//! | scheme | destination of a row |
//! |---|---|
//! | [`Scheme::Hash`] | [`hash`]'s 64-bit hash of the keys, range-reduced by [`multiply_shift`] |
//! | [`Scheme::Spark`] | Spark's `pmod(murmur3(keys, 42), n)` ([`spark`]), bit for bit |
//! | [`Scheme::RoundRobin`] | `0, 1, ..., n - 1, 0, ...`, continuing across batches |
//! | [`Scheme::Single`] | 0 |
//! | [`Scheme::Given`] | the value of one integer column, checked to be below `n` |
//!
//! Partitioning *by value* ([`ValueIds`] over a shared [`ValueTable`]) has no fixed partition
//! count: each distinct key is a destination, numbered as keys first appear, up to a limit.
//!
//! | [`Scheme::Range`] | the number of split points below the row's key (lexicographic over the key columns, each ascending or descending, nulls first or last), by binary search over arrow-row encodings |
//!
//! Partitioning *by value* ([`ValueIds`] over a shared [`ValueTable`]) has no fixed partition
//! count: each distinct key is a destination, numbered as keys first appear, up to a limit.

pub mod hash;
mod reduce;
pub mod spark;
mod spec;
mod values;

pub use reduce::{Modulo, Modulo64, Pmod, multiply_shift};
pub use spec::PartitioningSpec;
pub use values::{ValueIds, ValueTable, is_value_key_type};

use crate::error::{PartoutError, Result};
use crate::plan::check_partition_count;
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Schema};

/// How rows are assigned to destinations.
///
/// Named by [`name`](Self::name) (also its `Display`) and parsed by `FromStr`, the one
/// spelling of the schemes callers choose by name. With the `serde` feature it is
/// (de)serialized as its variant's name in lower case (`roundrobin`), as job manifests write
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum Scheme {
    /// The fast 64-bit hash of the key columns, multiply-shift reduced.
    Hash,
    /// Spark's `HashPartitioning`: Murmur3_x86_32, seed 42, `pmod(h, n)`.
    Spark,
    /// Rows dealt out in turn, continuing across batches.
    RoundRobin,
    /// Every row to destination 0.
    Single,
    /// The destination is the value of the one key column (an integer column).
    Given,
    /// Sorted split points over the key columns: destination `p` holds the keys above split
    /// point `p - 1` and up to split point `p`.
    Range,
}

impl Scheme {
    /// The scheme's name: `hash`, `spark`, `round-robin`, `range`, `single` or `given`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::Spark => "spark",
            Self::RoundRobin => "round-robin",
            Self::Range => "range",
            Self::Single => "single",
            Self::Given => "given",
        }
    }
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses the name of a scheme a caller chooses: `hash`, `spark`, `round-robin` (or
/// `round_robin`, as Python spells it) or `range`. `single` and `given` are not chosen by name:
/// code that sends every row to one destination, or reads destinations from a column, makes
/// them itself ([`Partitioning::single`], [`Partitioning::given`]).
///
/// ```
/// use partout_core::ids::Scheme;
///
/// assert_eq!("round_robin".parse::<Scheme>().unwrap(), Scheme::RoundRobin);
/// assert_eq!("range".parse::<Scheme>().unwrap().to_string(), "range");
/// let err = "modulo".parse::<Scheme>().unwrap_err().to_string();
/// assert!(err.contains("unknown scheme \"modulo\"") && err.contains("\"spark\""), "{err}");
/// ```
impl std::str::FromStr for Scheme {
    type Err = PartoutError;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "hash" => Ok(Self::Hash),
            "spark" => Ok(Self::Spark),
            "round-robin" | "round_robin" => Ok(Self::RoundRobin),
            "range" => Ok(Self::Range),
            other => Err(PartoutError::InvalidArgument(format!(
                "unknown scheme {other:?}: expected \"hash\", \"spark\", \"round-robin\" (or \"round_robin\") or \"range\""
            ))),
        }
    }
}

/// The split points of range partitioning: `num_partitions - 1` rows of the key columns, in
/// order, with the sort order of each key column.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeBounds {
    /// One column per key column, one row per split point, sorted.
    pub splits: RecordBatch,
    /// Per key column: descending or not, nulls first or not.
    pub options: Vec<arrow_schema::SortOptions>,
}

impl RangeBounds {
    /// Split points for `num_partitions` destinations of about equal rows, from a sample of
    /// the key columns (one column per key, in key order): the sample sorted by `options`,
    /// then the rows at every `1/num_partitions` of it. Repeated keys may repeat a split point
    /// (its destinations between get no rows).
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] for an empty sample, a partition count out of range,
    /// or `options` not one per column; [`PartoutError::UnsupportedType`] for a key type
    /// without a sortable encoding.
    pub fn from_sample(
        sample: &RecordBatch,
        num_partitions: u32,
        options: Vec<arrow_schema::SortOptions>,
    ) -> Result<Self> {
        let invalid = |msg: String| Err(PartoutError::InvalidArgument(msg));
        check_partition_count(num_partitions)?;
        if sample.num_rows() == 0 {
            return invalid("range bounds from an empty sample".into());
        }
        if options.len() != sample.num_columns() {
            return invalid(format!(
                "{} sort options for {} key columns",
                options.len(),
                sample.num_columns()
            ));
        }
        let fields: Vec<arrow_row::SortField> = sample
            .columns()
            .iter()
            .zip(&options)
            .map(|(c, o)| arrow_row::SortField::new_with_options(c.data_type().clone(), *o))
            .collect();
        if let Some((c, _)) = sample
            .columns()
            .iter()
            .zip(&fields)
            .find(|(_, f)| !arrow_row::RowConverter::supports_fields(std::slice::from_ref(*f)))
        {
            return Err(PartoutError::UnsupportedType {
                data_type: c.data_type().clone(),
                context: "range partitioning (no sortable encoding)",
            });
        }
        let converter = arrow_row::RowConverter::new(fields)?;
        let rows = converter.convert_columns(sample.columns())?;
        let mut order: Vec<u32> = (0..sample.num_rows() as u32).collect();
        order.sort_unstable_by(|&a, &b| rows.row(a as usize).cmp(&rows.row(b as usize)));
        let len = order.len() as u64;
        let n = u64::from(num_partitions);
        let picks: Vec<u32> = (1..n)
            .map(|i| order[((i * len / n) as usize).min(order.len() - 1)])
            .collect();
        let splits =
            arrow_select::take::take_record_batch(sample, &arrow_array::UInt32Array::from(picks))?;
        Ok(Self { splits, options })
    }
}

/// A scheme, its key columns (indices into the batch's columns) and the partition count.
#[derive(Debug, Clone, PartialEq)]
pub struct Partitioning {
    scheme: Scheme,
    keys: Vec<usize>,
    num_partitions: u32,
    bounds: Option<RangeBounds>,
}

impl Partitioning {
    /// Hash partitioning on `keys` with the fast hash.
    pub fn hash(keys: impl Into<Vec<usize>>, num_partitions: u32) -> Self {
        Self {
            scheme: Scheme::Hash,
            keys: keys.into(),
            num_partitions,
            bounds: None,
        }
    }

    /// Spark's hash partitioning on `keys`.
    pub fn spark(keys: impl Into<Vec<usize>>, num_partitions: u32) -> Self {
        Self {
            scheme: Scheme::Spark,
            keys: keys.into(),
            num_partitions,
            bounds: None,
        }
    }

    /// Round-robin over `num_partitions` destinations.
    pub fn round_robin(num_partitions: u32) -> Self {
        Self {
            scheme: Scheme::RoundRobin,
            keys: Vec::new(),
            num_partitions,
            bounds: None,
        }
    }

    /// Everything to one destination.
    pub fn single() -> Self {
        Self {
            scheme: Scheme::Single,
            keys: Vec::new(),
            num_partitions: 1,
            bounds: None,
        }
    }

    /// Destinations read from integer column `column`.
    pub fn given(column: usize, num_partitions: u32) -> Self {
        Self {
            scheme: Scheme::Given,
            keys: vec![column],
            num_partitions,
            bounds: None,
        }
    }

    /// Range partitioning of `keys` by `bounds`: `bounds.splits.num_rows() + 1` destinations.
    pub fn range(keys: impl Into<Vec<usize>>, bounds: RangeBounds) -> Self {
        let num_partitions = u32::try_from(bounds.splits.num_rows() + 1).unwrap_or(u32::MAX);
        Self {
            scheme: Scheme::Range,
            keys: keys.into(),
            num_partitions,
            bounds: Some(bounds),
        }
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The split points, for range partitioning.
    pub fn bounds(&self) -> Option<&RangeBounds> {
        self.bounds.as_ref()
    }

    /// The key columns.
    pub fn keys(&self) -> &[usize] {
        &self.keys
    }

    /// The partition count.
    pub fn num_partitions(&self) -> u32 {
        self.num_partitions
    }
}

/// Computes the partition ids of batches of one schema.
///
/// ```
/// use arrow_array::{Int64Array, RecordBatch};
/// use partout_core::ids::{PartitionIds, Partitioning};
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([("k", Arc::new(Int64Array::from(vec![1, 0, -1])) as _)]).unwrap();
/// let mut ids = PartitionIds::try_new(Partitioning::spark([0], 200), &batch.schema()).unwrap();
/// let mut out = Vec::new();
/// ids.compute(&batch, &mut out).unwrap();
/// assert_eq!(out, [69, 5, 193]); // Spark's own pmod(hash(k), 200)
/// ```
#[derive(Debug)]
pub struct PartitionIds {
    partitioning: Partitioning,
    key_types: Vec<DataType>,
    /// Round-robin: the destination of the next row.
    next: u32,
    pmod: Pmod,
    hashes32: Vec<u32>,
    hashes64: Vec<u64>,
    values64: Vec<u64>,
    range: Option<Range>,
}

/// Range partitioning's state: the row encoder, the encoded split points, reused rows.
#[derive(Debug)]
struct Range {
    converter: arrow_row::RowConverter,
    splits: arrow_row::Rows,
    rows: arrow_row::Rows,
}

impl Range {
    fn try_new(key_types: &[DataType], bounds: &RangeBounds) -> Result<Self> {
        let invalid = |msg: String| Err(PartoutError::InvalidArgument(msg));
        if bounds.options.len() != key_types.len() || bounds.splits.num_columns() != key_types.len()
        {
            return invalid(format!(
                "range bounds need one split column and one sort option per key column ({} keys, {} split columns, {} options)",
                key_types.len(),
                bounds.splits.num_columns(),
                bounds.options.len()
            ));
        }
        for (i, (t, c)) in key_types.iter().zip(bounds.splits.columns()).enumerate() {
            if t != c.data_type() {
                return invalid(format!(
                    "split column {i} is {}, its key column {t}",
                    c.data_type()
                ));
            }
        }
        let fields: Vec<arrow_row::SortField> = key_types
            .iter()
            .zip(&bounds.options)
            .map(|(t, o)| arrow_row::SortField::new_with_options(t.clone(), *o))
            .collect();
        if let Some((t, _)) = key_types
            .iter()
            .zip(&fields)
            .find(|(_, f)| !arrow_row::RowConverter::supports_fields(std::slice::from_ref(*f)))
        {
            return Err(PartoutError::UnsupportedType {
                data_type: t.clone(),
                context: "range partitioning (no sortable encoding)",
            });
        }
        let converter = arrow_row::RowConverter::new(fields)?;
        let splits = converter.convert_columns(bounds.splits.columns())?;
        if let Some(i) = (1..splits.num_rows()).find(|&i| splits.row(i - 1) > splits.row(i)) {
            return invalid(format!(
                "range split points are not sorted: split {} comes after split {i}",
                i - 1
            ));
        }
        let rows = converter.empty_rows(0, 0);
        Ok(Self {
            converter,
            splits,
            rows,
        })
    }

    /// For each row, the number of split points strictly below its key.
    fn ids(&mut self, columns: &[arrow_array::ArrayRef], ids: &mut Vec<u32>) -> Result<()> {
        self.rows.clear();
        self.converter.append(&mut self.rows, columns)?;
        let splits = &self.splits;
        ids.extend(self.rows.iter().map(|key| {
            let (mut lo, mut hi) = (0, splits.num_rows());
            while lo < hi {
                let mid = (lo + hi) / 2;
                if splits.row(mid) < key {
                    lo = mid + 1
                } else {
                    hi = mid
                }
            }
            lo as u32
        }));
        Ok(())
    }
}

impl PartitionIds {
    /// Checks `partitioning` against `schema`.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] for a partition count of 0 or above
    /// [`MAX_PARTITIONS`](crate::plan::MAX_PARTITIONS), a key index past the schema, a hash
    /// scheme without keys, a given scheme without exactly one key or with a non-integer key,
    /// or a single scheme over more than one partition; [`PartoutError::UnsupportedType`] for a key type the scheme cannot
    /// hash.
    pub fn try_new(partitioning: Partitioning, schema: &Schema) -> Result<Self> {
        let n = partitioning.num_partitions;
        let invalid = |msg: String| Err(PartoutError::InvalidArgument(msg));
        check_partition_count(n)?;
        if let Some(&k) = partitioning
            .keys
            .iter()
            .find(|&&k| k >= schema.fields().len())
        {
            return invalid(format!(
                "key column {k} is past the schema's {} columns",
                schema.fields().len()
            ));
        }
        let key_types: Vec<DataType> = partitioning
            .keys
            .iter()
            .map(|&k| schema.field(k).data_type().clone())
            .collect();
        match partitioning.scheme {
            Scheme::Hash | Scheme::Spark if key_types.is_empty() => {
                return invalid("hash partitioning needs at least one key column".into());
            }
            Scheme::Hash => key_types.iter().try_for_each(hash::check_type)?,
            Scheme::Spark => key_types.iter().try_for_each(spark::check_type)?,
            Scheme::Given => match key_types.as_slice() {
                [t] if t.is_integer() => {}
                [t] => {
                    return Err(PartoutError::UnsupportedType {
                        data_type: t.clone(),
                        context: "given partition ids (an integer column is needed)",
                    });
                }
                _ => return invalid("given partition ids come from exactly one column".into()),
            },
            Scheme::Single if n != 1 => {
                return invalid(format!("single partitioning has 1 partition, not {n}"));
            }
            Scheme::Range if key_types.is_empty() => {
                return invalid("range partitioning needs at least one key column".into());
            }
            Scheme::RoundRobin | Scheme::Single | Scheme::Range => {}
        }
        let range = match (&partitioning.scheme, &partitioning.bounds) {
            (Scheme::Range, Some(bounds)) => Some(Range::try_new(&key_types, bounds)?),
            (Scheme::Range, None) => {
                return invalid("range partitioning needs split points".into());
            }
            _ => None,
        };
        Ok(Self {
            key_types,
            next: 0,
            pmod: Pmod::new(n),
            hashes32: Vec::new(),
            hashes64: Vec::new(),
            values64: Vec::new(),
            range,
            partitioning,
        })
    }

    /// The partitioning.
    pub fn partitioning(&self) -> &Partitioning {
        &self.partitioning
    }

    /// Writes one id per row of `batch` to `ids` (cleared first).
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] when the batch's key columns are not the types the
    /// partitioning was built for; [`PartoutError::PartitionIdOutOfRange`] for a given id that
    /// is negative, null or not below the partition count.
    pub fn compute(&mut self, batch: &RecordBatch, ids: &mut Vec<u32>) -> Result<()> {
        for (&k, t) in self.partitioning.keys.iter().zip(&self.key_types) {
            let found = batch.columns().get(k).map(|c| c.data_type());
            if found != Some(t) {
                return Err(PartoutError::InvalidArgument(format!(
                    "key column {k} should be {t}, found {}",
                    found.map_or("nothing".to_string(), |f| f.to_string())
                )));
            }
        }
        let rows = batch.num_rows();
        let n = self.partitioning.num_partitions;
        ids.clear();
        match self.partitioning.scheme {
            Scheme::Single => ids.resize(rows, 0),
            Scheme::RoundRobin => {
                let mut next = self.next;
                ids.extend((0..rows).map(|_| {
                    let id = next;
                    next = if next + 1 == n { 0 } else { next + 1 };
                    id
                }));
                self.next = next;
            }
            Scheme::Spark => {
                self.hashes32.clear();
                self.hashes32.resize(rows, spark::SEED);
                for &k in &self.partitioning.keys {
                    spark::update(batch.column(k).as_ref(), &mut self.hashes32)?;
                }
                self.pmod.reduce_all(&self.hashes32, ids);
            }
            Scheme::Hash => {
                // The first key's value hashes are the running hashes; every further key is
                // folded in. (For one key, that is one hash per value and nothing more.)
                let (first, rest) = self
                    .partitioning
                    .keys
                    .split_first()
                    .expect("checked: a key");
                hash::value_hashes(batch.column(*first).as_ref(), &mut self.hashes64)?;
                for &k in rest {
                    hash::value_hashes(batch.column(k).as_ref(), &mut self.values64)?;
                    for (h, &v) in self.hashes64.iter_mut().zip(&self.values64) {
                        *h = hash::combine(*h, v);
                    }
                }
                ids.extend(self.hashes64.iter().map(|&h| multiply_shift(h, n)));
            }
            Scheme::Given => given(batch.column(self.partitioning.keys[0]).as_ref(), n, ids)?,
            Scheme::Range => {
                let columns: Vec<arrow_array::ArrayRef> = self
                    .partitioning
                    .keys
                    .iter()
                    .map(|&k| batch.column(k).clone())
                    .collect();
                self.range
                    .as_mut()
                    .expect("built with the partitioning")
                    .ids(&columns, ids)?;
            }
        }
        Ok(())
    }
}

/// Java's `Float.floatToIntBits` after `-0.0 -> 0.0`: equal floats, equal bits (every NaN
/// the one canonical NaN). Both hashes hash floats through it.
pub(crate) fn float_bits(value: f32) -> i32 {
    if value == 0.0 {
        0
    } else if value.is_nan() {
        0x7fc0_0000
    } else {
        value.to_bits() as i32
    }
}

/// Java's `Double.doubleToLongBits` after `-0.0 -> 0.0` (see [`float_bits`]).
pub(crate) fn double_bits(value: f64) -> i64 {
    if value == 0.0 {
        0
    } else if value.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        value.to_bits() as i64
    }
}

/// Ids read from an integer column, each checked to be a valid destination.
fn given(column: &dyn Array, n: u32, ids: &mut Vec<u32>) -> Result<()> {
    fn read<T: ArrowPrimitiveType>(column: &dyn Array, n: u32, ids: &mut Vec<u32>) -> Result<()>
    where
        T::Native: TryInto<u32> + Copy + std::fmt::Display,
    {
        let values = column.as_primitive::<T>();
        for (row, value) in values.iter().enumerate() {
            let id = value.and_then(|v| v.try_into().ok()).filter(|&id| id < n);
            match id {
                Some(id) => ids.push(id),
                None => {
                    return Err(PartoutError::PartitionIdOutOfRange {
                        row,
                        id: value.and_then(|v| v.try_into().ok()).unwrap_or(u32::MAX),
                        num_partitions: n,
                    });
                }
            }
        }
        Ok(())
    }
    match column.data_type() {
        DataType::Int8 => read::<Int8Type>(column, n, ids),
        DataType::Int16 => read::<Int16Type>(column, n, ids),
        DataType::Int32 => read::<Int32Type>(column, n, ids),
        DataType::Int64 => read::<Int64Type>(column, n, ids),
        DataType::UInt8 => read::<UInt8Type>(column, n, ids),
        DataType::UInt16 => read::<UInt16Type>(column, n, ids),
        DataType::UInt32 => read::<UInt32Type>(column, n, ids),
        DataType::UInt64 => read::<UInt64Type>(column, n, ids),
        other => Err(PartoutError::UnsupportedType {
            data_type: other.clone(),
            context: "given partition ids (an integer column is needed)",
        }),
    }
}

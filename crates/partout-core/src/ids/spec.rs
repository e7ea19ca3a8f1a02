//! [`PartitioningSpec`]: a partitioning as callers name it (a scheme, key column names, a
//! partition count), resolved against a schema into a [`Partitioning`].
//!
//! ```text
//!  scheme + key names + count ──► count checked ──► keys as the scheme wants them
//!      ──► names found in the schema ──► (range) split points from a sample
//!      ──► checked as PartitionIds checks it ──► Partitioning
//! ```

use super::{PartitionIds, Partitioning, RangeBounds, Scheme};
use crate::error::{PartoutError, Result};
use crate::plan::check_partition_count;
use arrow_array::RecordBatch;
use arrow_schema::{Schema, SortOptions};

/// A partitioning by name: the scheme, the key columns' names and the partition count, as a
/// job's options or a Python call give them. [`resolve`](Self::resolve) checks it against a
/// schema and makes the [`Partitioning`].
///
/// ```
/// use arrow_schema::{DataType, Field, Schema};
/// use partout_core::ids::{PartitioningSpec, Scheme};
///
/// let schema = Schema::new(vec![
///     Field::new("id", DataType::Int64, false),
///     Field::new("name", DataType::Utf8, true),
/// ]);
/// let spec = PartitioningSpec::new(Scheme::Spark, ["name"], 200);
/// let partitioning = spec.resolve(&schema, None).unwrap();
/// assert_eq!(partitioning.keys(), [1]);
/// assert_eq!(partitioning.num_partitions(), 200);
/// let err = PartitioningSpec::new(Scheme::Hash, ["nope"], 8).resolve(&schema, None).unwrap_err();
/// assert!(err.to_string().contains("no key column \"nope\""), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitioningSpec {
    /// How rows find their destination.
    pub scheme: Scheme,
    /// The key columns, by name (none for round-robin and single).
    pub keys: Vec<String>,
    /// The number of destinations.
    pub partitions: u32,
}

impl PartitioningSpec {
    /// `scheme` on the columns named `keys` into `partitions` destinations.
    pub fn new(
        scheme: Scheme,
        keys: impl IntoIterator<Item = impl Into<String>>,
        partitions: u32,
    ) -> Self {
        Self {
            scheme,
            keys: keys.into_iter().map(Into::into).collect(),
            partitions,
        }
    }

    /// The key columns' indices in `schema`, in key order.
    ///
    /// # Errors
    /// [`PartoutError::MissingKeyColumn`] for the first name `schema` does not have.
    pub fn key_columns(&self, schema: &Schema) -> Result<Vec<usize>> {
        self.keys
            .iter()
            .map(|name| {
                schema
                    .index_of(name)
                    .map_err(|_| PartoutError::MissingKeyColumn {
                        name: name.clone(),
                        columns: schema.fields().iter().map(|f| f.name().clone()).collect(),
                    })
            })
            .collect()
    }

    /// The partitioning of batches of `schema`. The partition count is checked by
    /// [`check_partition_count`]; round-robin and single take no key columns, every other
    /// scheme at least one; each key is looked up by name in `schema`. Range partitioning's
    /// split points are picked from `sample` (rows of the data holding the key columns, found
    /// by name; other columns are ignored): the sample's keys sorted ascending, nulls first,
    /// then the key at every `1/partitions` of it ([`RangeBounds::from_sample`]). Other schemes
    /// ignore `sample`. The result is checked as [`PartitionIds::try_new`] checks it: key types
    /// the scheme can hash (or sort, or read ids from), one partition for single.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] for a partition count of 0 or above
    /// [`MAX_PARTITIONS`](crate::plan::MAX_PARTITIONS), key columns a scheme does not take or
    /// lacks, range partitioning without a sample or with a sample without rows or without a
    /// key column; [`PartoutError::MissingKeyColumn`] for a key `schema` does not have;
    /// [`PartoutError::UnsupportedType`] for a key type the scheme cannot hash or sort, or a
    /// given id column that is not an integer column.
    pub fn resolve(&self, schema: &Schema, sample: Option<&RecordBatch>) -> Result<Partitioning> {
        let n = check_partition_count(self.partitions)?;
        let scheme = self.scheme;
        let keyless = match scheme {
            Scheme::RoundRobin => Some("it deals rows out in turn"),
            Scheme::Single => Some("every row goes to destination 0"),
            _ => None,
        };
        match (keyless, self.keys.is_empty()) {
            (Some(why), false) => {
                return Err(invalid(format!("{scheme} takes no key columns: {why}")));
            }
            (None, true) => {
                return Err(invalid(format!(
                    "the {scheme} scheme needs key columns to partition by"
                )));
            }
            _ => {}
        }
        let keys = self.key_columns(schema)?;
        let partitioning = match scheme {
            Scheme::Hash => Partitioning::hash(keys, n),
            Scheme::Spark => Partitioning::spark(keys, n),
            Scheme::RoundRobin => Partitioning::round_robin(n),
            Scheme::Range => {
                let bounds = self.bounds(sample, n)?;
                Partitioning::range(keys, bounds)
            }
            // The count as asked, not 1, and every key named: PartitionIds::try_new says
            // what is wrong with them.
            Scheme::Single | Scheme::Given => Partitioning {
                scheme,
                keys,
                num_partitions: n,
                bounds: None,
            },
        };
        PartitionIds::try_new(partitioning.clone(), schema)?;
        Ok(partitioning)
    }

    /// Range split points for `n` destinations from the key columns of `sample`.
    fn bounds(&self, sample: Option<&RecordBatch>, n: u32) -> Result<RangeBounds> {
        let Some(sample) = sample else {
            return Err(invalid(
                "range partitioning picks its split points from a sample of the data, and none was given"
                    .into(),
            ));
        };
        if sample.num_rows() == 0 {
            return Err(invalid(
                "range partitioning samples its split points from the data, which has no rows"
                    .into(),
            ));
        }
        let columns = self
            .keys
            .iter()
            .map(|name| {
                sample.schema_ref().index_of(name).map_err(|_| {
                    invalid(format!(
                        "the sample of the data for range split points has no key column {name:?}"
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let keys = sample.project(&columns)?;
        RangeBounds::from_sample(&keys, n, vec![SortOptions::default(); columns.len()])
    }
}

fn invalid(message: String) -> PartoutError {
    PartoutError::InvalidArgument(message)
}

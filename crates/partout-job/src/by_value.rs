//! Partitioning by value (`--partition-by`): each worker's ids come from one table of the
//! distinct keys shared by all workers (a key's id is `value * buckets + bucket`), the writer
//! runs over as many destinations as values are allowed, and once the input is consumed only
//! the destinations met are written, at their Hive paths (`col=value/part-00000.parquet`;
//! directory names escaped by [`crate::hive`]).

use crate::error::{JobError, Result, writing};
use crate::options::JobOptions;
use crate::partitioning::partitioning;
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_core::PartoutError;
use partout_core::ids::{PartitionIds, Partitioning, ValueIds, ValueTable};
use partout_format::Format;
use partout_input::Frames;
use partout_output::manifest::Layout;
use std::sync::Arc;

/// Bytes the distinct values' table is given per value it may hold, taken from the memory
/// limit: a key's encoding (up to ~80 bytes on average) and its entry.
const VALUE_TABLE_BYTES_PER_VALUE: u64 = 128;

/// Partitioning by value: destination `value * buckets + bucket`, where `value` is the key's
/// id in the shared table and `bucket` its bucket by the key columns (0 without them).
#[derive(Debug)]
pub(crate) struct ByValue {
    /// The columns partitioned by, in the input.
    columns: Vec<usize>,
    /// Their names.
    names: Vec<String>,
    table: Arc<ValueTable>,
    /// Buckets per value.
    buckets: u32,
    /// The buckets' partitioning over the key columns, when there are buckets.
    bucket_partitioning: Option<Partitioning>,
    /// The input's columns written, when the partition columns are left out.
    kept: Option<Vec<usize>>,
    /// Bytes of the memory limit the table may hold.
    pub(crate) table_bytes: u64,
}

/// Checks the options of partitioning by value; the writer's destinations: every value's
/// buckets, for as many values as allowed.
pub(crate) fn check(options: &JobOptions) -> Result<u32> {
    let invalid = |what: String| Err(JobError::InvalidOption(what));
    if !matches!(options.format, Format::Parquet | Format::Ipc) {
        return invalid(format!(
            "partitioning by value writes Parquet or Arrow IPC files, not {}",
            options.format
        ));
    }
    if options.layout != Layout::Files {
        return invalid("partitioning by value writes the files layout".into());
    }
    if options.keys.is_empty() && options.partitions != 1 {
        return invalid(format!(
            "{} buckets per value need key columns to bucket by (--by)",
            options.partitions
        ));
    }
    if options.max_partitions == 0 {
        return invalid("--max-partitions must be at least 1".into());
    }
    if let Some(c) = options
        .partition_by
        .iter()
        .find(|c| options.keys.contains(c))
    {
        return invalid(format!(
            "{c} is both partitioned by value and bucketed by: each value's buckets would hold \
             one key"
        ));
    }
    options
        .max_partitions
        .checked_mul(options.partitions)
        .filter(|&n| partout_core::plan::check_partition_count(n).is_ok())
        .ok_or_else(|| {
            JobError::InvalidOption(format!(
                "{} values x {} buckets is more destinations than partout takes ({})",
                options.max_partitions,
                options.partitions,
                partout_core::plan::MAX_PARTITIONS
            ))
        })
}

/// Bytes of the memory limit set aside for the table of distinct values (0 unless
/// partitioning by value).
///
/// # Errors
/// [`JobError::InvalidOption`] when the table would take half the limit or more.
pub(crate) fn table_bytes(options: &JobOptions) -> Result<u64> {
    if options.partition_by.is_empty() {
        return Ok(0);
    }
    let table_bytes = u64::from(options.max_partitions) * VALUE_TABLE_BYTES_PER_VALUE;
    if table_bytes >= options.memory_limit / 2 {
        return Err(JobError::InvalidOption(format!(
            "a memory limit of {} bytes is too small for {} distinct values (their table \
             alone takes up to {table_bytes} bytes)",
            options.memory_limit, options.max_partitions
        )));
    }
    Ok(table_bytes)
}

impl ByValue {
    /// Partitioning by value over the inputs' schema, and the schema written (without the
    /// partition columns unless kept).
    pub(crate) fn try_new(
        options: &JobOptions,
        frames: &Frames,
        table_bytes: u64,
    ) -> Result<(Self, SchemaRef)> {
        let by_value = value_partitioning(options, frames, table_bytes)?;
        let out_schema = match &by_value.kept {
            Some(kept) => Arc::new(
                frames
                    .schema
                    .project(kept)
                    .map_err(|e| writing("leaving out the partition columns")(e.into()))?,
            ),
            None => frames.schema.clone(),
        };
        Ok((by_value, out_schema))
    }

    /// Destinations met in `batches` (the input's first rows, of `schema`): every bucket of
    /// each distinct value, counted in a table of their own (the run's is left empty).
    /// As many as allowed when they hold more values than that, or cannot be read.
    pub(crate) fn sampled(&self, schema: &arrow_schema::Schema, batches: &[RecordBatch]) -> u64 {
        let allowed = u64::from(self.table.limit()) * u64::from(self.buckets);
        let Ok(table) = ValueTable::try_new(self.table.key_types().to_vec(), self.table.limit())
        else {
            return allowed;
        };
        let table = Arc::new(table);
        let Ok(mut values) = ValueIds::try_new(table.clone(), self.columns.clone(), schema) else {
            return allowed;
        };
        let mut ids = Vec::new();
        for batch in batches {
            if values.compute(batch, &mut ids).is_err() {
                return allowed;
            }
        }
        table.len() as u64 * u64::from(self.buckets)
    }
}

/// Partitioning by value over the inputs' schema: the columns (present, of types a value
/// can be), the buckets' partitioning, the columns written.
fn value_partitioning(options: &JobOptions, frames: &Frames, table_bytes: u64) -> Result<ByValue> {
    let schema = &frames.schema;
    let columns: Vec<usize> = options
        .partition_by
        .iter()
        .map(|name| {
            schema.index_of(name).map_err(|_| {
                JobError::InvalidOption(
                    PartoutError::MissingKeyColumn {
                        name: name.clone(),
                        columns: schema.fields().iter().map(|f| f.name().clone()).collect(),
                    }
                    .to_string(),
                )
            })
        })
        .collect::<Result<_>>()?;
    let context = format!(
        "partitioning by the values of {}",
        options.partition_by.join(",")
    );
    let types = columns
        .iter()
        .map(|&c| schema.field(c).data_type().clone())
        .collect();
    let table = ValueTable::try_new(types, options.max_partitions)
        .map_err(|e| writing(context.clone())(e.into()))?;
    let bucket_partitioning = match options.keys.is_empty() {
        true => None,
        false => Some(partitioning(options, frames, context)?),
    };
    let kept = (!options.keep_partition_columns).then(|| {
        (0..schema.fields().len())
            .filter(|c| !columns.contains(c))
            .collect::<Vec<_>>()
    });
    if kept.as_ref().is_some_and(Vec::is_empty) {
        return Err(JobError::InvalidOption(
            "every column is partitioned by value: the files would have no column (keep them \
             with --keep-partition-columns)"
                .into(),
        ));
    }
    Ok(ByValue {
        columns,
        names: options.partition_by.clone(),
        table: Arc::new(table),
        buckets: options.partitions,
        bucket_partitioning,
        kept,
        table_bytes,
    })
}

/// One worker's ids when partitioning by value: the value's, then the bucket's.
pub(crate) struct WorkerValues<'a> {
    by_value: &'a ByValue,
    values: ValueIds,
    buckets: Option<PartitionIds>,
    ids: Vec<u32>,
    bucket_ids: Vec<u32>,
}

impl<'a> WorkerValues<'a> {
    pub(crate) fn try_new(by_value: &'a ByValue, schema: &arrow_schema::Schema) -> Result<Self> {
        let failed = writing("starting a worker");
        let values = ValueIds::try_new(by_value.table.clone(), by_value.columns.clone(), schema)
            .map_err(|e| failed(e.into()))?;
        let buckets = match &by_value.bucket_partitioning {
            Some(p) => Some(
                PartitionIds::try_new(p.clone(), schema)
                    .map_err(|e| writing("starting a worker")(e.into()))?,
            ),
            None => None,
        };
        Ok(Self {
            by_value,
            values,
            buckets,
            ids: Vec::new(),
            bucket_ids: Vec::new(),
        })
    }

    /// Destinations that may have rows by now: every bucket of each value met, by any
    /// worker.
    pub(crate) fn destinations_met(&self) -> usize {
        self.by_value.table.len() * self.by_value.buckets as usize
    }

    /// `batch`'s columns written and every row's destination.
    pub(crate) fn ids(
        &mut self,
        batch: &RecordBatch,
        options: &JobOptions,
        what: &dyn Fn() -> String,
    ) -> Result<(RecordBatch, &[u32])> {
        self.values
            .compute(batch, &mut self.ids)
            .map_err(|e| match e {
                PartoutError::TooManyValues { limit } => JobError::InvalidOption(format!(
                    "{} has more than {limit} distinct values (--max-partitions {limit}): \
                     raise the limit if that many partitions are meant",
                    options.partition_by.join(",")
                )),
                e => writing(what())(e.into()),
            })?;
        let table = self.by_value.table.memory_bytes() as u64;
        if table > self.by_value.table_bytes {
            return Err(JobError::InvalidOption(format!(
                "the distinct values of {} take {table} bytes, more than the {} bytes of the \
                 memory limit set aside for them (long keys): raise --memory-limit",
                options.partition_by.join(","),
                self.by_value.table_bytes
            )));
        }
        if let Some(buckets) = &mut self.buckets {
            buckets
                .compute(batch, &mut self.bucket_ids)
                .map_err(|e| writing(what())(e.into()))?;
            let n = self.by_value.buckets;
            for (id, bucket) in self.ids.iter_mut().zip(&self.bucket_ids) {
                *id = *id * n + bucket;
            }
        }
        let out = match &self.by_value.kept {
            Some(kept) => batch.project(kept).map_err(|e| writing(what())(e.into()))?,
            None => batch.clone(),
        };
        Ok((out, &self.ids))
    }
}

/// Each destination's file in the Hive layout: `col=value/…/{prefix}-{bucket:05}.{extension}`,
/// for every value met and each of its buckets, in destination order.
pub(crate) fn hive_names(by_value: &ByValue, prefix: &str, extension: &str) -> Result<Vec<String>> {
    let failed =
        |e: arrow_schema::ArrowError| writing("naming the partitions' directories")(e.into());
    let keys = by_value
        .table
        .keys()
        .map_err(|e| writing("naming the partitions' directories")(e.into()))?;
    let texts: Vec<Vec<Option<String>>> = keys
        .iter()
        .map(|k| crate::hive::format_values(k.as_ref()))
        .collect::<Result<_, _>>()
        .map_err(failed)?;
    let values = by_value.table.len();
    // Escaping is one to one, and each type's text tells its values apart: two values share
    // a directory only through a string spelling the null directory, and only then are the
    // directories compared.
    let mut seen = texts
        .iter()
        .flatten()
        .any(|t| t.as_deref() == Some(crate::hive::NULL_DIR))
        .then(|| std::collections::HashSet::with_capacity(values));
    let mut names = Vec::with_capacity(values * by_value.buckets as usize);
    for v in 0..values {
        let dir: Vec<String> = by_value
            .names
            .iter()
            .zip(&texts)
            .map(|(column, text)| crate::hive::partition_segment(column, text[v].as_deref()))
            .collect();
        let dir = dir.join("/");
        if let Some(seen) = &mut seen
            && !seen.insert(dir.clone())
        {
            return Err(JobError::InvalidOption(format!(
                "two distinct values share the directory {dir:?} (a string equal to {}, which \
                 stands for null)",
                crate::hive::NULL_DIR
            )));
        }
        for bucket in 0..by_value.buckets {
            names.push(format!("{dir}/{prefix}-{bucket:05}.{extension}"));
        }
    }
    Ok(names)
}

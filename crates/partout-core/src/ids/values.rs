//! Destinations discovered as values arrive: partitioning *by value*, where every distinct key
//! (the values of one or more key columns in a row, nulls included) is a destination of its
//! own, numbered in the order keys first appear.
//!
//! ```text
//!  RecordBatch ─► key columns ─► arrow-row encoding ─► ValueTable (shared): key → id,
//!                                                      a new key takes the next id
//!                                                      ─► ids (u32 per row)
//! ```
//!
//! A [`ValueTable`] is shared by every worker of a job (one lock taken per batch), so that a
//! key has one id whichever worker meets it first; each worker computes ids with its own
//! [`ValueIds`]. The table refuses a key past its limit on distinct values with
//! [`PartoutError::TooManyValues`] before giving it an id, and counts the bytes it holds
//! ([`ValueTable::memory_bytes`]) for the caller's memory budget. [`ValueTable::keys`] gives
//! the distinct keys back as Arrow arrays, in id order (to name each destination).
//!
//! Keys are compared as arrow-row encodes them: by value, whatever the array's layout
//! (dictionary-encoded or not, sliced, views or offsets), a null equal to a null.

use crate::error::{PartoutError, Result};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_row::{RowConverter, Rows, SortField};
use arrow_schema::{DataType, Schema};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes a key costs in the table beyond its encoding: its boxed slice (16), its id (4),
/// padding and the hash map's slot and control byte at its load factor (28).
const ENTRY_OVERHEAD: usize = 48;

/// Whether a column of type `data_type` can be a key by value: types whose values have one
/// text form that partitioned-dataset readers parse back (integers, decimals, booleans,
/// strings, dates, timestamps), dictionary-encoded or not.
pub fn is_value_key_type(data_type: &DataType) -> bool {
    use DataType::*;
    match data_type {
        Boolean | Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => true,
        Decimal32(..) | Decimal64(..) | Decimal128(..) | Decimal256(..) => true,
        Date32 | Date64 | Timestamp(..) => true,
        Utf8 | LargeUtf8 | Utf8View => true,
        Dictionary(_, value) => is_value_key_type(value),
        _ => false,
    }
}

/// The distinct keys met so far and their ids, shared by the workers of one job.
#[derive(Debug)]
pub struct ValueTable {
    key_types: Vec<DataType>,
    limit: u32,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    ids: HashMap<Box<[u8]>, u32, foldhash::fast::RandomState>,
    bytes: usize,
}

impl ValueTable {
    /// An empty table for keys of `key_types` (in key column order), holding at most `limit`
    /// distinct keys.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] for no key column or a limit of 0;
    /// [`PartoutError::UnsupportedType`] for a type [`is_value_key_type`] refuses.
    pub fn try_new(key_types: Vec<DataType>, limit: u32) -> Result<Self> {
        if key_types.is_empty() {
            return Err(PartoutError::InvalidArgument(
                "partitioning by value needs at least one key column".into(),
            ));
        }
        if limit == 0 {
            return Err(PartoutError::InvalidArgument(
                "partitioning by value needs a limit of at least one distinct value".into(),
            ));
        }
        if let Some(t) = key_types.iter().find(|t| !is_value_key_type(t)) {
            return Err(PartoutError::UnsupportedType {
                data_type: t.clone(),
                context: "partitioning by value (keys are integers, decimals, booleans, \
                          strings, dates or timestamps)",
            });
        }
        Ok(Self {
            key_types,
            limit,
            inner: Mutex::new(Inner {
                ids: HashMap::default(),
                bytes: 0,
            }),
        })
    }

    /// The key columns' types.
    pub fn key_types(&self) -> &[DataType] {
        &self.key_types
    }

    /// The most distinct keys the table takes.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Distinct keys so far: the destinations in use are `0..len()`.
    pub fn len(&self) -> usize {
        self.lock().ids.len()
    }

    /// Whether no key has come yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the table holds: every key's encoding and its entry.
    pub fn memory_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The distinct keys, one array per key column, row `i` the key of destination `i`.
    ///
    /// # Errors
    /// An arrow error decoding them (none expected: they were encoded by the same types).
    pub fn keys(&self) -> Result<Vec<ArrayRef>> {
        let converter = converter(&self.key_types)?;
        let inner = self.lock();
        let mut ordered: Vec<(&[u8], u32)> =
            inner.ids.iter().map(|(k, &id)| (&k[..], id)).collect();
        ordered.sort_unstable_by_key(|&(_, id)| id);
        let parser = converter.parser();
        let rows = ordered.iter().map(|&(key, _)| parser.parse(key));
        Ok(converter.convert_rows(rows)?)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The table is consistent between statements: a panic elsewhere leaves it usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends the id of every row of `rows` to `ids`, giving new keys the next ids. Fails,
    /// giving no id to the key past the limit, when a key would be one too many; the keys
    /// before it in `rows` keep theirs.
    fn assign(&self, rows: &Rows, ids: &mut Vec<u32>) -> Result<()> {
        let mut inner = self.lock();
        let Inner { ids: table, bytes } = &mut *inner;
        for row in rows.iter() {
            let key = row.as_ref();
            if let Some(&id) = table.get(key) {
                ids.push(id);
                continue;
            }
            let id = table.len();
            if id >= self.limit as usize {
                return Err(PartoutError::TooManyValues { limit: self.limit });
            }
            let id = id as u32;
            *bytes += key.len() + ENTRY_OVERHEAD;
            table.insert(key.into(), id);
            ids.push(id);
        }
        Ok(())
    }
}

fn converter(key_types: &[DataType]) -> Result<RowConverter> {
    let fields = key_types
        .iter()
        .map(|t| SortField::new(t.clone()))
        .collect();
    Ok(RowConverter::new(fields)?)
}

/// One worker's partition ids by value: the key columns of each batch, looked up in (and
/// added to) a shared [`ValueTable`].
///
/// ```
/// use arrow_array::{Int32Array, RecordBatch, StringArray};
/// use partout_core::ids::{ValueIds, ValueTable};
/// use std::sync::Arc;
///
/// let batch = RecordBatch::try_from_iter([
///     ("year", Arc::new(Int32Array::from(vec![2024, 2023, 2024, 2023])) as _),
///     ("city", Arc::new(StringArray::from(vec!["Oslo", "Oslo", "Oslo", "Lima"])) as _),
/// ])
/// .unwrap();
/// let table = Arc::new(ValueTable::try_new(vec![batch.schema().field(0).data_type().clone(),
///     batch.schema().field(1).data_type().clone()], 100).unwrap());
/// let mut ids = ValueIds::try_new(table.clone(), vec![0, 1], &batch.schema()).unwrap();
/// let mut out = Vec::new();
/// ids.compute(&batch, &mut out).unwrap();
/// assert_eq!(out, [0, 1, 0, 2]);
/// assert_eq!(table.len(), 3);
/// ```
#[derive(Debug)]
pub struct ValueIds {
    table: Arc<ValueTable>,
    keys: Vec<usize>,
    converter: RowConverter,
    rows: Rows,
}

impl ValueIds {
    /// Ids of the rows' values of columns `keys` (indices into `schema`), in `table`.
    ///
    /// # Errors
    /// [`PartoutError::InvalidArgument`] for a key index past the schema, or key columns
    /// whose types are not the table's.
    pub fn try_new(table: Arc<ValueTable>, keys: Vec<usize>, schema: &Schema) -> Result<Self> {
        if let Some(&k) = keys.iter().find(|&&k| k >= schema.fields().len()) {
            return Err(PartoutError::InvalidArgument(format!(
                "key column {k} is past the schema's {} columns",
                schema.fields().len()
            )));
        }
        let types: Vec<&DataType> = keys.iter().map(|&k| schema.field(k).data_type()).collect();
        if types.len() != table.key_types.len()
            || types.iter().zip(&table.key_types).any(|(a, b)| *a != b)
        {
            return Err(PartoutError::InvalidArgument(format!(
                "the key columns' types ({}) are not the value table's ({})",
                list(types.iter().copied()),
                list(table.key_types.iter())
            )));
        }
        let converter = converter(&table.key_types)?;
        let rows = converter.empty_rows(0, 0);
        Ok(Self {
            table,
            keys,
            converter,
            rows,
        })
    }

    /// The shared table.
    pub fn table(&self) -> &Arc<ValueTable> {
        &self.table
    }

    /// Replaces `ids` with the destination of every row of `batch`.
    ///
    /// # Errors
    /// [`PartoutError::TooManyValues`] when the batch brings a key past the table's limit
    /// (`ids` is then unspecified); an arrow error encoding the keys.
    pub fn compute(&mut self, batch: &RecordBatch, ids: &mut Vec<u32>) -> Result<()> {
        ids.clear();
        let columns: Vec<ArrayRef> = self.keys.iter().map(|&k| batch.column(k).clone()).collect();
        self.rows.clear();
        self.converter.append(&mut self.rows, &columns)?;
        ids.reserve(batch.num_rows());
        self.table.assign(&self.rows, ids)
    }
}

fn list<'a>(types: impl Iterator<Item = &'a DataType>) -> String {
    types
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

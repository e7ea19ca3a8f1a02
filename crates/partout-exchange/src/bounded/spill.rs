//! The spill file: items written past the budget, read back in their turn.
//!
//! One file per exchange, made on the first spill by the [`SpillTarget`] (a temporary file in
//! a directory, or DataFusion's disk manager), written only at its end and read at the offsets
//! it gave; it goes when the exchange goes. Space freed by acknowledged items is not reused:
//! the limit counts every byte ever spilled.

use super::ExchangeError;
use super::state::Spilled;
use arrow_array::RecordBatch;
use arrow_ipc::writer::StreamWriter;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where an exchange spills: how its spill file is made, and how many bytes it may take.
pub struct SpillTarget {
    make: Box<dyn Fn() -> std::io::Result<File> + Send + Sync>,
    limit: u64,
}

impl std::fmt::Debug for SpillTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillTarget")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl SpillTarget {
    /// A temporary file in `dir` (removed when closed, whatever happens), without a limit.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Self::with_file(move || tempfile::tempfile_in(&dir))
    }

    /// The file `make` opens (for reading and writing), without a limit.
    pub fn with_file(make: impl Fn() -> std::io::Result<File> + Send + Sync + 'static) -> Self {
        Self {
            make: Box::new(make),
            limit: u64::MAX,
        }
    }

    /// At most `bytes` spilled; past them the exchange ends in
    /// [`ExchangeError::ResourcesExhausted`].
    pub fn with_limit(mut self, bytes: u64) -> Self {
        self.limit = bytes;
        self
    }
}

/// What spilling did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpillMetrics {
    /// Items written to the spill file.
    pub spill_count: u64,
    /// Bytes written to it.
    pub spilled_bytes: u64,
    /// Time writing.
    pub spill_time: Duration,
    /// Items read back (an item fetched again is read again).
    pub read_count: u64,
}

#[derive(Debug, Default)]
struct Counters {
    count: u64,
    bytes: u64,
    time: Duration,
    reads: u64,
}

/// The spill file and its counters.
pub(crate) struct SpillFile {
    target: SpillTarget,
    file: Mutex<Option<Arc<File>>>,
    end: AtomicU64,
    counters: Mutex<Counters>,
}

impl std::fmt::Debug for SpillFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillFile")
            .field("target", &self.target)
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

fn spill_error(what: &str, e: std::io::Error) -> ExchangeError {
    ExchangeError::Spill(format!("{what} the spill file: {e}"))
}

impl SpillFile {
    pub(crate) fn new(target: SpillTarget) -> Self {
        Self {
            target,
            file: Mutex::new(None),
            end: AtomicU64::new(0),
            counters: Mutex::new(Counters::default()),
        }
    }

    fn file(&self) -> Result<Arc<File>, ExchangeError> {
        let mut slot = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(file) = &*slot {
            return Ok(file.clone());
        }
        let file = Arc::new((self.target.make)().map_err(|e| spill_error("making", e))?);
        *slot = Some(file.clone());
        Ok(file)
    }

    /// Writes `bytes` at the file's end.
    ///
    /// # Errors
    /// [`ExchangeError::ResourcesExhausted`] past the limit; [`ExchangeError::Spill`] for IO.
    pub(crate) fn write(&self, bytes: &[u8]) -> Result<Spilled, ExchangeError> {
        let started = Instant::now();
        let len = bytes.len() as u64;
        let offset = self.end.fetch_add(len, Ordering::Relaxed);
        if offset.saturating_add(len) > self.target.limit {
            return Err(ExchangeError::ResourcesExhausted(format!(
                "spilling {len} more bytes would pass the spill limit of {} bytes",
                self.target.limit
            )));
        }
        self.file()?
            .write_all_at(bytes, offset)
            .map_err(|e| spill_error("writing", e))?;
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        counters.count += 1;
        counters.bytes += len;
        counters.time += started.elapsed();
        Ok(Spilled { offset, len })
    }

    /// Reads back what [`write`](Self::write) put at `at`.
    ///
    /// # Errors
    /// [`ExchangeError::Spill`] for IO.
    pub(crate) fn read(&self, at: Spilled) -> Result<Vec<u8>, ExchangeError> {
        let mut bytes = vec![0; at.len as usize];
        self.file()?
            .read_exact_at(&mut bytes, at.offset)
            .map_err(|e| spill_error("reading", e))?;
        self.counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reads += 1;
        Ok(bytes)
    }

    pub(crate) fn metrics(&self) -> SpillMetrics {
        let counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        SpillMetrics {
            spill_count: counters.count,
            spilled_bytes: counters.bytes,
            spill_time: counters.time,
            read_count: counters.reads,
        }
    }
}

/// Writes `batch` for a spill file as an Arrow IPC stream of its schema and itself: what an
/// [`Item`](super::Item) of record batches writes in [`Item::spill`](super::Item::spill).
///
/// # Errors
/// [`ExchangeError::Spill`] when arrow-ipc cannot encode it.
pub fn spill_batch(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), ExchangeError> {
    let encode = |e: arrow_schema::ArrowError| ExchangeError::Spill(format!("encoding: {e}"));
    let mut writer = StreamWriter::try_new(out, batch.schema_ref()).map_err(encode)?;
    writer.write(batch).map_err(encode)?;
    writer.finish().map_err(encode)
}

/// Reads back what [`spill_batch`] wrote, through partout's checked IPC reader.
///
/// # Errors
/// [`ExchangeError::Spill`] for bytes that are not one batch's stream.
pub fn unspill_batch(bytes: &[u8]) -> Result<RecordBatch, ExchangeError> {
    let (_, mut batches) = partout_format::ipc::decode_stream(bytes)
        .map_err(|e| ExchangeError::Spill(format!("decoding: {e}")))?;
    match (batches.pop(), batches.is_empty()) {
        (Some(batch), true) => Ok(batch),
        _ => Err(ExchangeError::Spill(
            "a spilled item that is not one record batch".into(),
        )),
    }
}

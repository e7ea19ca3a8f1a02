//! What the operator adds to partout's [`BoundedExchange`](partout_exchange::BoundedExchange): its items (record batches with
//! the memory they are charged), the session's memory pool as the exchange's [`Account`], and
//! the session's disk manager as its spill file. The queues, the budget, back-pressure,
//! spilling and failure are the exchange's.

use arrow_array::RecordBatch;
use datafusion::common::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryReservation;
use partout_exchange::{Account, ExchangeError, Item, SpillTarget, spill_batch, unspill_batch};
use std::sync::{Arc, Mutex};

/// A batch for an output, as the output reads it: its rows and the memory it is charged.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub(crate) rows: RecordBatch,
    pub(crate) bytes: usize,
}

impl Item for Queued {
    fn bytes(&self) -> usize {
        self.bytes
    }

    fn rows(&self) -> u64 {
        self.rows.num_rows() as u64
    }

    fn spill(&self, out: &mut Vec<u8>) -> std::result::Result<(), ExchangeError> {
        spill_batch(&self.rows, out)
    }

    fn unspill(bytes: &[u8]) -> std::result::Result<Self, ExchangeError> {
        let rows = unspill_batch(bytes)?;
        Ok(Self {
            bytes: rows.get_array_memory_size(),
            rows,
        })
    }
}

/// The session's memory pool, through the operator's reservation.
#[derive(Debug)]
pub(crate) struct Pool(pub(crate) MemoryReservation);

impl Account for Pool {
    fn try_grow(&self, bytes: usize) -> std::result::Result<(), String> {
        self.0.try_grow(bytes).map_err(|e| e.to_string())
    }

    fn shrink(&self, bytes: usize) {
        self.0.shrink(bytes);
    }
}

/// The session's disk manager as the exchange's spill file, within its temporary-directory
/// limit; `None` when it makes no local files (disabled, or a backend without paths).
pub(crate) fn spill_target(context: &TaskContext, operator: &str) -> Option<SpillTarget> {
    let disks = context.runtime_env().disk_manager.clone();
    if !disks.tmp_files_enabled() {
        return None;
    }
    let limit = disks.max_temp_directory_size();
    // The disk manager's handles keep its files; they go with the exchange.
    let kept = Arc::new(Mutex::new(Vec::new()));
    let description = format!("{operator} spilling batches its consumers have not taken yet");
    let target = SpillTarget::with_file(move || {
        let file = disks
            .create_tmp_file(&description)
            .map_err(std::io::Error::other)?;
        let path = file.path().map(ToOwned::to_owned).ok_or_else(|| {
            std::io::Error::other("the disk manager's spill files have no local path")
        })?;
        kept.lock().unwrap_or_else(|e| e.into_inner()).push(file);
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
    });
    Some(target.with_limit(limit))
}

/// DataFusion's error for an exchange error: resources exhausted naming the operator, the
/// producer's own error as it was, the rest as external errors (whose message DataFusion shows
/// alone: one with a cause is reported with it).
pub(crate) fn to_datafusion(e: ExchangeError, operator: &str) -> DataFusionError {
    if let ExchangeError::Failed {
        cause: Some(cause), ..
    } = &e
        && let Some(Shared(producer)) = cause.downcast_ref::<Shared>()
    {
        return DataFusionError::Shared(producer.clone());
    }
    match e {
        ExchangeError::ResourcesExhausted(why) => {
            DataFusionError::ResourcesExhausted(format!("{operator}: {why}"))
        }
        other if std::error::Error::source(&other).is_some() => {
            DataFusionError::External(other.report().into())
        }
        other => DataFusionError::External(Box::new(other)),
    }
}

/// A producer's DataFusion error, kept whole for every output.
#[derive(Debug)]
pub(crate) struct Shared(pub(crate) Arc<DataFusionError>);

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Shared {}

/// The exchange's error for a producer's.
pub(crate) fn from_datafusion(e: DataFusionError) -> Arc<dyn std::error::Error + Send + Sync> {
    Arc::new(Shared(Arc::new(e)))
}

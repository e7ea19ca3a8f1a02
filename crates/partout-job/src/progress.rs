//! [`Progress`]: how a front end follows a run, and stops it.

/// Told how a run advances; asked whether to stop. Called from every worker thread.
pub trait Progress: Sync {
    /// The run starts; `rows` is the inputs' row count, where their metadata tells it.
    fn start(&self, rows: Option<u64>) {
        let _ = rows;
    }

    /// A worker has partitioned a batch of `rows` rows holding `bytes` bytes of Arrow data.
    fn advance(&self, rows: u64, bytes: u64) {
        let _ = (rows, bytes);
    }

    /// Whether the run should stop (asked between batches); it then ends with
    /// [`JobError::Cancelled`](crate::JobError::Cancelled) and leaves no output.
    fn cancelled(&self) -> bool {
        false
    }
}

/// No progress to show, never cancelled.
impl Progress for () {}

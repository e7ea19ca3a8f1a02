//! partout as the shuffle of Apache DataFusion Ballista: [`PartoutEngine`], the execution
//! engine of a Ballista executor, writes every hash shuffle stage with partout's partitioned
//! writer, into the sort-shuffle files Ballista's own readers and Flight service serve.
//!
//! ```text
//!  Ballista scheduler ─ stage plan: SortShuffleWriterExec(input, Hash(keys, K)) ─► executor
//!    PartoutEngine: the input's partitions, each
//!       ─► DataFusion's partition ids (create_hashes, the repartition seed, % K)
//!       ─► partout's partitioned writer (a buffer per destination, flushed at its target)
//!       ─► each destination's Arrow IPC stream, encoded and compressed as Ballista's
//!          configuration asks; held in memory, spilled past the task's memory limit
//!    ─► {work_dir}/{job}/{stage}/{task}/data.arrow + data.arrow.index (Ballista's layout)
//!    ─► the statistics Ballista's writer reports (rows, batches, Arrow bytes per partition)
//!  other stages ─► Ballista's DefaultExecutionEngine
//! ```
//!
//! **Whoever consumes the partitions decides the hash.** Ballista's readers and its
//! adaptive planner assume rows sit where Ballista's own writer puts them, and stages written
//! by partout and by stock executors meet in joins: every row goes to exactly that partition.
//!
//! The `partout-ballista-executor` binary is Ballista's executor, with its flags, running
//! this engine.

#![forbid(unsafe_code)]

mod engine;
mod file;
mod pool;

pub use engine::{DEFAULT_TASK_MEMORY, EngineCounters, FILE_BYTES_METRIC, PartoutEngine};
pub use file::{PartitionStats, shuffle_files};
pub use pool::SharedClientPool;

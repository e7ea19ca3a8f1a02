//! partout inside Apache DataFusion: [`PartoutRepartitionExec`] does what a hash
//! `RepartitionExec` does, with partout's writer and bounded exchange (one byte budget
//! reserved from DataFusion's memory pool; back-pressure, or spilling to the disk manager when
//! waiting could wait forever); [`PartoutRepartitionRule`] swaps it in for every hash
//! `RepartitionExec`. One that preserves order keeps a queue per input and output and merges
//! an output's queues by the input's ordering; from an unbounded input, rows are handed over
//! with the batch they came in.
//!
//! ```text
//!  input partition i ─► DataFusion's hash ids (create_hashes, REPARTITION_RANDOM_STATE, % n)
//!                    ─► GatheredBatch: the batch laid out in output order, in reused scratch
//!                    ─► OutputBuilder of each output, shared by the producers (a lock per
//!                       output): rows copied once; handed over whole at batch_size rows or
//!                       its share of the budget
//!                    ─► BoundedExchange: output queues within the budget; producers wait, or
//!                       spill when a consumer waits on an output with nothing for it
//!  output partition p ◄─ its queue, batch by batch as they were built
//! ```
//!
//! **Whoever consumes the partitions decides the hash.** DataFusion assumes any two `Hash`
//! partitionings on the same keys are co-partitioned, and pushes `hash % n` filters into
//! scans: every row goes to exactly the partition DataFusion's own `BatchPartitioner` gives
//! ([`DataFusionIds`]), so plans mixing partout's and DataFusion's operators stay right.
//!
//! One line turns it on:
//!
//! ```
//! use datafusion::execution::SessionStateBuilder;
//! use datafusion::prelude::{SessionConfig, SessionContext};
//! use partout_datafusion::SessionStateBuilderExt;
//!
//! let state = SessionStateBuilder::new()
//!     .with_config(SessionConfig::new().with_target_partitions(4))
//!     .with_default_features()
//!     .with_partout() // after with_config: it adds partout's options to the config
//!     .build();
//! let ctx = SessionContext::new_with_state(state);
//! // `SET partout.enabled = false` turns it off for the session.
//! # let _ = ctx;
//! ```

#![forbid(unsafe_code)]

mod builders;
mod config;
mod exchange;
mod exec;
mod execution;
mod ids;
mod output;
mod producer;
mod rule;

pub use config::PartoutConfig;
pub use exec::PartoutRepartitionExec;
pub use ids::DataFusionIds;
pub use rule::{PartoutRepartitionRule, SessionStateBuilderExt};

//! [`PartoutConfig`]: partout's options in a DataFusion session, and how the operator shares
//! its budget.

use datafusion::common::config::ConfigExtension;
use datafusion::common::extensions_options;

extensions_options! {
    /// partout's options in a DataFusion session, under the prefix `partout`
    /// (`SET partout.enabled = false`).
    pub struct PartoutConfig {
        /// Whether hash repartitioning is done by partout (default true).
        pub enabled: bool, default = true
        /// Bytes each repartition holds between its input and its outputs (default 64 MiB),
        /// reserved from the session's memory pool as they are held. Half is the output
        /// batches under construction: one per output (per input and output when order is
        /// preserved), each handed over whole at the session's `batch_size` rows or at its
        /// even share of that half, whichever comes first (the half is shared by the builders
        /// and the one finished batch each producer holds while it queues it) (at 64 MiB, lineitem's ~220-byte
        /// rows fill 8192-row batches up to 16 outputs, ~2,400 rows at 64, ~750 at 200). A
        /// quarter is the batches waiting for consumers; past it, producers wait for room, and
        /// when a consumer waits on an output with nothing for it, they spill to the disk
        /// manager: at once while rows of outputs nobody asked for yet are held, after 100 ms
        /// without room otherwise. The last quarter is the producers' scratch: each input
        /// batch laid out in output order (a larger input batch is laid out in pieces within
        /// it). Not covered: the batches an order-preserving merge holds (reserved apart, as
        /// DataFusion's merge reserves them), a spilled batch while it is read back, and a
        /// batch once handed to its consumer.
        pub buffer_bytes: usize, default = 64 * 1024 * 1024
    }
}

impl ConfigExtension for PartoutConfig {
    const PREFIX: &'static str = "partout";
}

/// How an operator shares its `buffer_bytes` (see [`PartoutConfig::buffer_bytes`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// The output batches under construction.
    pub(crate) builders: usize,
    /// The batches waiting for consumers.
    pub(crate) queued: usize,
    /// The producers' laid-out input batches.
    pub(crate) scratch: usize,
}

impl Budget {
    pub(crate) fn of(bytes: usize) -> Self {
        let bytes = bytes.max(4);
        Self {
            builders: bytes / 2,
            queued: bytes / 4,
            scratch: bytes - bytes / 2 - bytes / 4,
        }
    }
}

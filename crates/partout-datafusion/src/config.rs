//! [`PartoutConfig`]: partout's options in a DataFusion session.

use datafusion::common::config::ConfigExtension;
use datafusion::common::extensions_options;

extensions_options! {
    /// partout's options in a DataFusion session, under the prefix `partout`
    /// (`SET partout.enabled = false`).
    pub struct PartoutConfig {
        /// Whether hash repartitioning is done by partout (default true).
        pub enabled: bool, default = true
        /// Bytes each repartition holds between its input and its outputs (default 64 MiB),
        /// reserved from the session's memory pool: up to 3/4 for its producers' writers
        /// (destination buffers and flushed batches), an eighth for batches waiting for
        /// consumers, an eighth for batches consumers have read, kept for the producers to
        /// reuse their buffers. Past it, producers wait for room; when a consumer waits on an output
        /// with nothing for it, they spill to the disk manager: at once while rows of outputs
        /// nobody asked for yet are held, after 100 ms without room otherwise. Not counted:
        /// the batch each output gathers to `batch_size` rows, the batches an
        /// order-preserving merge holds (reserved apart), and a spilled batch being read back.
        pub buffer_bytes: usize, default = 64 * 1024 * 1024
    }
}

impl ConfigExtension for PartoutConfig {
    const PREFIX: &'static str = "partout";
}

//! [`PartoutConfig`]: partout's options in a DataFusion session.

use datafusion::common::config::ConfigExtension;
use datafusion::common::extensions_options;

extensions_options! {
    /// partout's options in a DataFusion session, under the prefix `partout`
    /// (`SET partout.enabled = false`).
    pub struct PartoutConfig {
        /// Whether hash repartitioning is done by partout (default true).
        pub enabled: bool, default = true
        /// Bytes of rows each repartition holds for its consumers before its producers wait
        /// (default 64 MiB), reserved from the session's memory pool as they are held.
        pub buffer_bytes: usize, default = 64 * 1024 * 1024
    }
}

impl ConfigExtension for PartoutConfig {
    const PREFIX: &'static str = "partout";
}

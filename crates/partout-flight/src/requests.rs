//! What a client sends the Flight service, as JSON: a `DoGet` ticket
//! ([`DestinationTicket`]), and the bodies of the `create`, `cancel` and `drop` actions.

use crate::error::{ExchangeError, Result};
use crate::live::LiveOptions;
use arrow_flight::Ticket;
use partout_format::Encoding;
use serde::{Deserialize, Serialize};

/// What a `DoGet` ticket holds (as JSON): which destination of which exchange, from which
/// batch on. The `ack` action takes the same: it frees the batches before `from_sequence`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestinationTicket {
    /// The exchange's name.
    pub exchange: String,
    /// The destination.
    pub destination: u32,
    /// The first batch wanted: 0 for all, or one past the last batch received. On a live
    /// exchange, asking from a sequence acknowledges every batch before it.
    #[serde(default)]
    pub from_sequence: u64,
    /// Live exchanges: free each batch once it is handed to the stream, without waiting for
    /// an `ack` (a consumer that reconnects can then resume only from what is still held).
    #[serde(default)]
    pub auto_ack: bool,
}

impl DestinationTicket {
    /// Destination `destination` of `exchange`, from the first batch.
    pub fn new(exchange: impl Into<String>, destination: u32) -> Self {
        Self {
            exchange: exchange.into(),
            destination,
            from_sequence: 0,
            auto_ack: false,
        }
    }

    /// From batch `sequence` on.
    pub fn from_sequence(mut self, sequence: u64) -> Self {
        self.from_sequence = sequence;
        self
    }

    /// The ticket's bytes.
    pub fn to_ticket(&self) -> Ticket {
        Ticket::new(serde_json::to_vec(self).expect("a ticket serializes"))
    }

    pub(crate) fn parse(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| {
            ExchangeError::InvalidArgument(format!(
                "a ticket is JSON {{\"exchange\": NAME, \"destination\": N, \"from_sequence\": N}}: {e}"
            ))
        })
    }
}

/// The `create` action's body (JSON): a live exchange fed through `DoPut`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateRequest {
    /// Its name.
    pub exchange: String,
    /// Destinations.
    pub partitions: u32,
    /// Producers (`DoPut` streams) that will feed it.
    pub producers: usize,
    /// The most bytes its queues hold (default 64 MiB).
    #[serde(default)]
    pub budget_bytes: Option<usize>,
    /// `ipc` (default; also `arrow`) or `presto`: how its batches are held
    /// ([`Encoding::parse`]).
    #[serde(default)]
    pub format: Option<String>,
    /// `none` (default), `lz4`, `zstd` or `zstd:LEVEL` (IPC only).
    #[serde(default)]
    pub compression: Option<String>,
    /// Drop the exchange by itself once every producer finished and every destination's
    /// batches were acknowledged (default `false`: until the `drop` action).
    #[serde(default)]
    pub drop_when_done: bool,
}

impl CreateRequest {
    /// The exchange's options, checked: a partition count the kernels take (1 to 2^20) and
    /// at least one producer.
    pub(crate) fn options(&self) -> Result<LiveOptions> {
        partout_core::plan::check_partition_count(self.partitions).map_err(|e| match e {
            partout_core::PartoutError::InvalidArgument(what) => {
                ExchangeError::InvalidArgument(what)
            }
            other => ExchangeError::InvalidArgument(other.to_string()),
        })?;
        if self.producers == 0 {
            return Err(ExchangeError::InvalidArgument(
                "an exchange needs at least one producer".into(),
            ));
        }
        let format = self.format.as_deref().unwrap_or("ipc");
        let encoding = Encoding::parse(format, self.compression.as_deref())?;
        let mut options = LiveOptions::new(self.partitions, self.producers).with_encoding(encoding);
        if let Some(budget) = self.budget_bytes {
            options = options.with_budget(budget);
        }
        Ok(options)
    }
}

/// The `cancel` and `drop` actions' body (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    /// The exchange to end.
    pub exchange: String,
}

//! partout's outputs over the network: one exchange engine behind two protocols, Arrow Flight
//! and Presto's worker exchange protocol.
//!
//! ```text
//!  producers ─► LiveExchange: per-destination queues, one byte budget ─┐
//!  (PartitionedWriters in this process, or Flight DoPut)               ├─► Exchanges ─► Flight: DoGet, ack, cancel, ListFlights
//!  finished repartition output ─► partout-output's FinishedOutput ────────┘             └─► Presto HTTP: GET /v1/task/{exchange}/results/{destination}/{token}
//! ```
//!
//! A destination's output is a sequence of messages (Arrow IPC record batches, or Presto
//! pages), numbered from 0. A Flight consumer gets each batch with its sequence in the
//! message's `app_metadata` and resumes from any sequence it has not acknowledged; a Presto
//! consumer's tokens are the same sequences. Messages held in one format are converted when a
//! protocol wants the other (a live exchange's schema is known; a finished output of Presto
//! pages is served over Presto's protocol only).

#![forbid(unsafe_code)]

mod conn;
mod do_get;
mod error;
mod exchanges;
mod flight;
mod live;
pub mod presto;
mod requests;
pub mod serve;

pub use conn::ConnectionLimits;
pub use error::{Cause, ExchangeError, ProtocolError, Result};
pub use exchanges::{DESTINATION_BYTES, Exchange, Exchanges, Limits, MAX_NAME_BYTES};
pub use flight::ExchangeService;
pub use live::{
    DestinationStatus, ExchangeOutput, FetchedMessages, LiveExchange, LiveOptions, Producer,
};
pub use requests::{CancelRequest, CreateRequest, DestinationTicket};

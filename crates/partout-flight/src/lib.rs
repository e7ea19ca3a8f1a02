//! partout's outputs over Arrow Flight: finished `repartition` outputs (Arrow IPC, files or
//! shuffle layout), each destination a stream of sequenced batches that a consumer can resume.
//!
//! ```text
//!  OutputService ─ serve_directory("orders", out/) ─► exchange "orders": destinations 0..n
//!  DoGet(ticket {exchange, destination, from_sequence})
//!      ─► schema, batch[from_sequence], batch[from_sequence + 1], …   (app_metadata: its sequence)
//!  ListFlights / GetFlightInfo ─► per destination: rows, bytes, complete, its ticket
//! ```
//!
//! A destination's batches are numbered from 0 in the order its output holds them (files
//! layout: its stream file; shuffle layout: every worker's ranges of it, worker by worker), and
//! each batch goes out as one Flight message whose `app_metadata` is its sequence number in
//! decimal ASCII. A consumer that lost its connection asks again from the sequence after the
//! last one it received and gets the rest, nothing twice.

use arrow_array::RecordBatch;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightEndpoint, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaAsIpc, SchemaResult, Ticket,
};
use arrow_ipc::writer::IpcWriteOptions;
use arrow_schema::SchemaRef;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use partout_format::ipc::decode_stream;
use partout_io::read_shuffle_destination;
use partout_job::{Format, Layout, Manifest};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};

/// What a `DoGet` ticket holds (as JSON): which destination of which exchange, from which
/// batch on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestinationTicket {
    /// The exchange's name.
    pub exchange: String,
    /// The destination.
    pub destination: u32,
    /// The first batch wanted: 0 for all, or one past the last batch received.
    #[serde(default)]
    pub from_sequence: u64,
}

impl DestinationTicket {
    /// The ticket's bytes.
    pub fn to_ticket(&self) -> Ticket {
        Ticket::new(serde_json::to_vec(self).expect("a ticket serializes"))
    }

    fn parse(ticket: &Ticket) -> Result<Self, Status> {
        serde_json::from_slice(&ticket.ticket).map_err(|e| {
            Status::invalid_argument(format!(
                "a ticket is JSON {{\"exchange\": NAME, \"destination\": N, \"from_sequence\": N}}: {e}"
            ))
        })
    }
}

/// Why a directory cannot be served.
#[derive(Debug)]
pub struct ServeError(String);

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServeError {}

/// One finished output directory.
#[derive(Debug, Clone)]
struct Exchange {
    dir: PathBuf,
    manifest: Manifest,
    schema: SchemaRef,
}

impl Exchange {
    /// Destination `p`'s IPC streams: its file, or per worker its ranges concatenated.
    fn streams(&self, p: u32) -> Result<Vec<Vec<u8>>, String> {
        let read =
            |path: &Path| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
        match self.manifest.layout {
            Layout::Files => {
                let entry = self
                    .manifest
                    .destinations
                    .get(p as usize)
                    .ok_or_else(|| format!("no destination {p} in the manifest"))?;
                match entry.file.name() {
                    Some(name) => Ok(vec![read(&self.dir.join(name))?]),
                    None => Ok(Vec::new()),
                }
            }
            Layout::Shuffle => {
                let mut streams = Vec::new();
                for files in self.manifest.shuffle_files.iter().flatten() {
                    let bytes = read_shuffle_destination(
                        &self.dir.join(&files.data),
                        &self.dir.join(&files.index),
                        p,
                    )
                    .map_err(|e| e.to_string())?;
                    if !bytes.is_empty() {
                        streams.push(bytes);
                    }
                }
                Ok(streams)
            }
        }
    }

    /// Destination `p`'s batches, in sequence order.
    fn batches(&self, p: u32) -> Result<Vec<RecordBatch>, String> {
        let mut batches = Vec::new();
        for bytes in self.streams(p)? {
            let (_, decoded) = decode_stream(&bytes).map_err(|e| e.to_string())?;
            batches.extend(decoded);
        }
        Ok(batches)
    }
}

/// A Flight service of finished partout outputs, each served as a named exchange.
#[derive(Debug, Default, Clone)]
pub struct OutputService {
    exchanges: Arc<BTreeMap<String, Exchange>>,
}

impl OutputService {
    /// A service of no exchanges yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves the finished `repartition` output in `dir` (Arrow IPC streams, files or shuffle
    /// layout) as the exchange `name`.
    ///
    /// # Errors
    /// When `dir` has no readable manifest, holds another format, or a destination's stream
    /// cannot be read for the schema; when `name` is taken.
    pub fn serve_directory(
        mut self,
        name: impl Into<String>,
        dir: impl AsRef<Path>,
    ) -> Result<Self, ServeError> {
        let name = name.into();
        let dir = dir.as_ref().to_path_buf();
        let manifest =
            Manifest::read(&dir).map_err(|e| ServeError(format!("{}: {e}", dir.display())))?;
        if manifest.format != Format::Ipc {
            return Err(ServeError(format!(
                "{}: a {} output; Flight serves Arrow IPC outputs",
                dir.display(),
                manifest.format
            )));
        }
        let mut exchange = Exchange {
            dir,
            manifest,
            schema: Arc::new(arrow_schema::Schema::empty()),
        };
        // The schema: from the first destination with a stream.
        let mut found = None;
        for p in 0..exchange.manifest.partitions {
            if let Some(bytes) = exchange.streams(p).map_err(ServeError)?.first() {
                let (schema, _) = decode_stream(bytes)
                    .map_err(|e| ServeError(format!("destination {p}: {e}")))?;
                found = Some(schema);
                break;
            }
        }
        exchange.schema = found.ok_or_else(|| {
            ServeError(format!(
                "{}: no destination holds a stream",
                exchange.dir.display()
            ))
        })?;
        let exchanges = Arc::make_mut(&mut self.exchanges);
        if exchanges.contains_key(&name) {
            return Err(ServeError(format!(
                "an exchange named {name:?} is served already"
            )));
        }
        exchanges.insert(name, exchange);
        Ok(self)
    }

    /// The tonic service.
    pub fn into_server(self) -> FlightServiceServer<Self> {
        FlightServiceServer::new(self)
    }

    fn exchange(&self, name: &str) -> Result<&Exchange, Status> {
        self.exchanges.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.exchanges.keys().map(String::as_str).collect();
            Status::not_found(format!(
                "no exchange {name:?} (served: {})",
                names.join(", ")
            ))
        })
    }

    fn destination<'a>(&'a self, name: &str, p: u32) -> Result<&'a Exchange, Status> {
        let exchange = self.exchange(name)?;
        if p >= exchange.manifest.partitions {
            return Err(Status::not_found(format!(
                "no destination {p} in exchange {name:?} of {} destinations",
                exchange.manifest.partitions
            )));
        }
        Ok(exchange)
    }

    fn info(&self, name: &str, p: u32) -> Result<FlightInfo, Status> {
        let exchange = self.destination(name, p)?;
        let entry = &exchange.manifest.destinations[p as usize];
        let ticket = DestinationTicket {
            exchange: name.to_string(),
            destination: p,
            from_sequence: 0,
        };
        let metadata =
            serde_json::json!({"complete": true, "rows": entry.rows, "bytes": entry.bytes});
        FlightInfo::new()
            .try_with_schema(&exchange.schema)
            .map_err(|e| Status::internal(e.to_string()))
            .map(|info| {
                info.with_descriptor(FlightDescriptor::new_path(vec![
                    name.to_string(),
                    p.to_string(),
                ]))
                .with_endpoint(FlightEndpoint::new().with_ticket(ticket.to_ticket()))
                .with_total_records(entry.rows as i64)
                .with_total_bytes(entry.bytes as i64)
                .with_app_metadata(metadata.to_string().into_bytes())
            })
    }
}

/// The exchange and destination a descriptor's path names: `[exchange, destination]`.
fn descriptor_path(descriptor: &FlightDescriptor) -> Result<(String, u32), Status> {
    match descriptor.path.as_slice() {
        [name, p] => p
            .parse()
            .map(|p| (name.clone(), p))
            .map_err(|_| Status::invalid_argument(format!("{p:?} is not a destination number"))),
        _ => Err(Status::invalid_argument(
            "a descriptor's path is [exchange, destination]",
        )),
    }
}

#[tonic::async_trait]
impl FlightService for OutputService {
    type HandshakeStream = BoxStream<'static, Result<HandshakeResponse, Status>>;
    type ListFlightsStream = BoxStream<'static, Result<FlightInfo, Status>>;
    type DoGetStream = BoxStream<'static, Result<FlightData, Status>>;
    type DoPutStream = BoxStream<'static, Result<PutResult, Status>>;
    type DoActionStream = BoxStream<'static, Result<arrow_flight::Result, Status>>;
    type ListActionsStream = BoxStream<'static, Result<ActionType, Status>>;
    type DoExchangeStream = BoxStream<'static, Result<FlightData, Status>>;

    async fn do_get(
        &self,
        request: Request<Ticket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        let ticket = DestinationTicket::parse(request.get_ref())?;
        let exchange = self.destination(&ticket.exchange, ticket.destination)?;
        let schema = exchange.schema.clone();
        let service = self.clone();
        let (name, p) = (ticket.exchange.clone(), ticket.destination);
        let batches = tokio::task::spawn_blocking(move || service.exchanges[&name].batches(p))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| Status::data_loss(format!("destination {}: {e}", ticket.destination)))?;
        let from = ticket.from_sequence.min(batches.len() as u64);
        let batches: Vec<_> = batches.into_iter().skip(from as usize).map(Ok).collect();
        let mut sequence = from;
        let encoded = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            // One message per batch: sequence numbers count batches, whatever their size.
            .with_max_flight_data_size(usize::MAX)
            .build(stream::iter(batches))
            .map_err(|e| Status::internal(e.to_string()))
            .map_ok(move |data| {
                let is_batch = arrow_ipc::root_as_message(&data.data_header)
                    .map(|m| m.header_type() == arrow_ipc::MessageHeader::RecordBatch)
                    .unwrap_or(false);
                if is_batch {
                    let numbered = data.with_app_metadata(sequence.to_string().into_bytes());
                    sequence += 1;
                    numbered
                } else {
                    data
                }
            });
        Ok(Response::new(encoded.boxed()))
    }

    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        let mut infos = Vec::new();
        for (name, exchange) in self.exchanges.iter() {
            for p in 0..exchange.manifest.partitions {
                infos.push(self.info(name, p));
            }
        }
        Ok(Response::new(stream::iter(infos).boxed()))
    }

    async fn get_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let (name, p) = descriptor_path(request.get_ref())?;
        self.info(&name, p).map(Response::new)
    }

    async fn get_schema(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        let (name, p) = descriptor_path(request.get_ref())?;
        let exchange = self.destination(&name, p)?;
        let options = IpcWriteOptions::default();
        SchemaResult::try_from(SchemaAsIpc::new(&exchange.schema, &options))
            .map(Response::new)
            .map_err(|e| Status::internal(e.to_string()))
    }

    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        Err(Status::unimplemented(
            "no handshake: the service needs none",
        ))
    }

    async fn poll_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented(
            "finished outputs need no polling: GetFlightInfo",
        ))
    }

    async fn do_put(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        Err(Status::unimplemented(
            "finished outputs take no new batches",
        ))
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        Err(Status::unimplemented(format!(
            "no action {:?} on finished outputs",
            request.get_ref().r#type
        )))
    }

    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        Ok(Response::new(stream::empty().boxed()))
    }

    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented(
            "DoExchange: use DoGet with a destination's ticket",
        ))
    }
}

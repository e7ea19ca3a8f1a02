//! [`ExchangeService`]: the exchanges over Arrow Flight.
//!
//! ```text
//!  DoGet(ticket {exchange, destination, from_sequence, auto_ack})
//!      ─► schema, [dictionaries] batch[from_sequence], …   (app_metadata: the batch's sequence)
//!  DoAction "create" {exchange, partitions, producers, budget_bytes, format, compression}
//!  DoPut(descriptor [exchange]) ─► one producer: each batch's app_metadata names its destination
//!  DoAction "ack" {exchange, destination, from_sequence} ─► frees the batches before it
//!  DoAction "cancel" {exchange} ─► consumers and producers get CANCELLED
//!  DoAction "drop" {exchange} ─► no longer served; a live one is cancelled, its memory freed
//!  ListFlights / GetFlightInfo ─► per destination: rows, bytes, complete, its ticket
//! ```

use crate::do_get;
use crate::error::{ExchangeError, Result, status};
use crate::exchanges::{DESTINATION_BYTES, Exchange, Exchanges, shown};
use crate::live::LiveExchange;
use crate::requests::{CancelRequest, CreateRequest, DestinationTicket};
use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightEndpoint, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaAsIpc, SchemaResult, Ticket,
};
use arrow_ipc::writer::IpcWriteOptions;
use futures::stream::{self, BoxStream, StreamExt};
use partout_format::ipc::MessageCheck;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// The Flight service of a set of [`Exchanges`].
#[derive(Debug, Clone, Default)]
pub struct ExchangeService {
    exchanges: Exchanges,
}

impl ExchangeService {
    /// A service of `exchanges` (shared: exchanges added later are served too).
    pub fn new(exchanges: Exchanges) -> Self {
        Self { exchanges }
    }

    /// The exchanges.
    pub fn exchanges(&self) -> &Exchanges {
        &self.exchanges
    }

    /// The tonic service.
    pub fn into_server(self) -> FlightServiceServer<Self> {
        FlightServiceServer::new(self)
    }

    fn info(&self, name: &str, exchange: &Exchange, p: u32) -> Result<FlightInfo> {
        exchange.check(name, p)?;
        let (schema, rows, bytes, complete, spill) = match exchange {
            Exchange::Live(live) => {
                let status = live.status(p)?;
                let schema = live.encoder().map(|e| e.schema().clone());
                let spill = live.metrics().spill;
                (schema, status.rows, status.bytes, status.complete, spill)
            }
            Exchange::Finished(finished) => {
                let entry = &finished.manifest().destinations[p as usize];
                let spill = partout_exchange::SpillMetrics::default();
                (
                    finished.schema().cloned(),
                    entry.rows,
                    entry.bytes,
                    true,
                    spill,
                )
            }
        };
        let mut info = FlightInfo::new();
        if let Some(schema) = schema {
            info = info.try_with_schema(&schema)?;
        }
        // The exchange's spilling so far (all destinations together).
        let metadata = serde_json::json!({
            "complete": complete,
            "rows": rows,
            "bytes": bytes,
            "spill_count": spill.spill_count,
            "spilled_bytes": spill.spilled_bytes,
            "spill_time_ms": spill.spill_time.as_secs_f64() * 1e3,
        });
        Ok(info
            .with_descriptor(FlightDescriptor::new_path(vec![
                name.to_string(),
                p.to_string(),
            ]))
            .with_endpoint(
                FlightEndpoint::new().with_ticket(DestinationTicket::new(name, p).to_ticket()),
            )
            .with_total_records(rows as i64)
            .with_total_bytes(bytes as i64)
            .with_app_metadata(metadata.to_string().into_bytes()))
    }

    fn do_action_sync(&self, action: &Action) -> Result<Vec<u8>> {
        let body = &action.body;
        match action.r#type.as_str() {
            "create" => {
                let request: CreateRequest = json(body, "create")?;
                let options = request.options()?;
                // Charged against the server's limits before anything is allocated.
                let bytes = (request.partitions as usize)
                    .saturating_mul(DESTINATION_BYTES)
                    .saturating_add(options.budget_bytes);
                self.exchanges.check_room(&request.exchange, bytes)?;
                let live = LiveExchange::try_new(None, options)?;
                self.exchanges.add_charged(
                    request.exchange.clone(),
                    Exchange::Live(live.clone()),
                    bytes,
                )?;
                if request.drop_when_done {
                    self.exchanges.drop_when_drained(&request.exchange, &live);
                }
                Ok(Vec::new())
            }
            "ack" => {
                let ticket = DestinationTicket::parse(body)?;
                let exchange = self.exchanges.get(&ticket.exchange)?;
                exchange.check(&ticket.exchange, ticket.destination)?;
                if let Exchange::Live(live) = exchange {
                    live.ack(ticket.destination, ticket.from_sequence)?;
                }
                Ok(Vec::new())
            }
            "cancel" => {
                let request: CancelRequest = json(body, "cancel")?;
                match self.exchanges.get(&request.exchange)? {
                    Exchange::Live(live) => {
                        live.cancel("cancelled by a client");
                        Ok(Vec::new())
                    }
                    Exchange::Finished(_) => Err(ExchangeError::InvalidArgument(format!(
                        "exchange {:?} is a finished output: nothing to cancel",
                        request.exchange
                    ))),
                }
            }
            "drop" => {
                let request: CancelRequest = json(body, "drop")?;
                self.exchanges.remove(&request.exchange)?;
                Ok(Vec::new())
            }
            other => Err(ExchangeError::InvalidArgument(format!(
                "no action {}: the actions are create, ack, cancel and drop",
                shown(other, 64)
            ))),
        }
    }
}

/// An error unless every column of `batch`, decoded from a client's bytes, is valid Arrow
/// data (offsets within their values, UTF-8 strings, dictionary keys within their values):
/// the kernels trust what they are given.
fn valid(batch: &arrow_array::RecordBatch) -> Result<()> {
    for (field, column) in batch.schema_ref().fields().iter().zip(batch.columns()) {
        column.to_data().validate_full().map_err(|e| {
            ExchangeError::InvalidArgument(format!("column {:?} is not valid: {e}", field.name()))
        })?;
    }
    Ok(())
}

fn json<T: serde::de::DeserializeOwned>(body: &[u8], action: &str) -> Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| ExchangeError::InvalidArgument(format!("the {action} action's body: {e}")))
}

/// The exchange and destination a descriptor's path names: `[exchange, destination]`.
fn descriptor_path(descriptor: &FlightDescriptor) -> Result<(String, u32)> {
    match descriptor.path.as_slice() {
        [name, p] => p.parse().map(|p| (name.clone(), p)).map_err(|_| {
            ExchangeError::InvalidArgument(format!("{p:?} is not a destination number"))
        }),
        _ => Err(ExchangeError::InvalidArgument(
            "a descriptor's path is [exchange, destination]".into(),
        )),
    }
}

#[tonic::async_trait]
impl FlightService for ExchangeService {
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
        let ticket = DestinationTicket::parse(&request.get_ref().ticket).map_err(status)?;
        let exchange = self.exchanges.get(&ticket.exchange).map_err(status)?;
        let p = ticket.destination;
        exchange.check(&ticket.exchange, p).map_err(status)?;
        let (tx, rx) = mpsc::channel(8);
        match exchange {
            Exchange::Live(live) => {
                if ticket.from_sequence > 0 {
                    live.ack(p, ticket.from_sequence).map_err(status)?;
                }
                tokio::spawn(async move {
                    let context = format!("destination {}", ticket.destination);
                    if let Err(e) = do_get::stream_live(live, ticket, tx.clone()).await {
                        let _ = tx.send(Err(status(e.context(context)))).await;
                    }
                });
            }
            Exchange::Finished(finished) => {
                let schema = finished.schema().cloned().ok_or_else(|| {
                    ExchangeError::InvalidArgument(format!(
                        "exchange {:?} holds Presto pages, which carry no schema: read it over Presto's protocol",
                        ticket.exchange
                    ))
                }).map_err(status)?;
                return Ok(Response::new(
                    do_get::stream_finished(finished, ticket, schema).boxed(),
                ));
            }
        }
        Ok(Response::new(ReceiverStream::new(rx).boxed()))
    }

    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let mut input = request.into_inner();
        let first = input
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("an empty DoPut stream"))?;
        let name = match first.flight_descriptor.as_ref().map(|d| d.path.as_slice()) {
            Some([name]) => name.clone(),
            _ => {
                return Err(Status::invalid_argument(
                    "a DoPut's descriptor is the path [exchange]",
                ));
            }
        };
        let live = match self.exchanges.get(&name).map_err(status)? {
            Exchange::Live(live) => live,
            Exchange::Finished(_) => {
                return Err(Status::invalid_argument(format!(
                    "exchange {name:?} is a finished output: it takes no batches"
                )));
            }
        };
        let mut producer = live.producer().map_err(status)?;
        // Every message is checked before arrow-ipc's decoder sees it (it trusts offsets,
        // counts and sizes, and panics or over-allocates on bad ones).
        let mut check = MessageCheck::new();
        let data = stream::once(async { Ok(first) })
            .chain(input)
            .map(move |r| {
                let data = r.map_err(FlightError::from)?;
                if !data.data_header.is_empty() {
                    check
                        .check(&data.data_header, &data.data_body)
                        .map_err(|e| FlightError::ProtocolError(e.to_string()))?;
                }
                Ok(data)
            });
        let mut decoder = FlightDataDecoder::new(data);
        // Producers wait for room in the queues, asynchronously (no thread is held while a
        // producer waits), and while one waits the client's sends wait too (HTTP/2 flow
        // control).
        let summary: Result<(u64, u64), ExchangeError> = async move {
            let (mut rows, mut batches) = (0u64, 0u64);
            loop {
                let decoded = match decoder.next().await {
                    None => break,
                    Some(Ok(decoded)) => decoded,
                    Some(Err(e)) => {
                        let e = ExchangeError::failed(
                            "a producer's DoPut stream broke",
                            Some(Arc::new(e)),
                        );
                        producer.fail(e.clone());
                        return Err(e);
                    }
                };
                let pushed = match decoded.payload {
                    DecodedPayload::None => Ok(()),
                    DecodedPayload::Schema(schema) => producer.set_schema(schema).map(drop),
                    DecodedPayload::RecordBatch(batch) => {
                        let tag = std::str::from_utf8(&decoded.inner.app_metadata)
                            .ok()
                            .and_then(|t| t.trim().parse::<u32>().ok());
                        match tag {
                            None => Err(ExchangeError::InvalidArgument(
                                "each DoPut batch's app_metadata is its destination number (decimal)"
                                    .into(),
                            )),
                            Some(p) => {
                                rows += batch.num_rows() as u64;
                                batches += 1;
                                match valid(&batch) {
                                    Ok(()) => producer.push_batch_async(p, &batch).await,
                                    Err(e) => Err(e),
                                }
                            }
                        }
                    }
                };
                if let Err(e) = pushed {
                    // A producer sending what cannot be delivered fails the exchange: its
                    // consumers would otherwise miss rows.
                    let e = ExchangeError::failed(
                        "a producer sent a batch that was refused",
                        Some(Arc::new(e)),
                    );
                    producer.fail(e.clone());
                    return Err(e);
                }
            }
            producer.finish();
            Ok((rows, batches))
        }
        .await;
        let summary = summary.map_err(status)?;
        let result = PutResult {
            app_metadata: serde_json::json!({"rows": summary.0, "batches": summary.1})
                .to_string()
                .into_bytes()
                .into(),
        };
        Ok(Response::new(stream::iter([Ok(result)]).boxed()))
    }

    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        let mut infos = Vec::new();
        for (name, exchange) in self.exchanges.all() {
            for p in 0..exchange.partitions() {
                infos.push(self.info(&name, &exchange, p).map_err(status));
            }
        }
        Ok(Response::new(stream::iter(infos).boxed()))
    }

    async fn get_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let (name, p) = descriptor_path(request.get_ref()).map_err(status)?;
        let exchange = self.exchanges.get(&name).map_err(status)?;
        let info = self.info(&name, &exchange, p).map_err(status)?;
        Ok(Response::new(info))
    }

    async fn get_schema(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        let (name, p) = descriptor_path(request.get_ref()).map_err(status)?;
        let exchange = self.exchanges.get(&name).map_err(status)?;
        exchange.check(&name, p).map_err(status)?;
        let schema = match &exchange {
            Exchange::Live(live) => live.wait_encoder().await.map_err(status)?.schema().clone(),
            Exchange::Finished(finished) => finished.schema().cloned().ok_or_else(|| {
                Status::invalid_argument(format!(
                    "exchange {name:?} holds Presto pages, which carry no schema"
                ))
            })?,
        };
        let options = IpcWriteOptions::default();
        SchemaResult::try_from(SchemaAsIpc::new(&schema, &options))
            .map(Response::new)
            .map_err(|e| Status::internal(e.to_string()))
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let body = self.do_action_sync(request.get_ref()).map_err(status)?;
        let result = arrow_flight::Result { body: body.into() };
        Ok(Response::new(stream::iter([Ok(result)]).boxed()))
    }

    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        let actions = [
            (
                "create",
                "a live exchange fed through DoPut: {exchange, partitions, producers, budget_bytes, format, compression}",
            ),
            (
                "ack",
                "frees a live destination's batches before from_sequence: {exchange, destination, from_sequence}",
            ),
            ("cancel", "ends a live exchange: {exchange}"),
            (
                "drop",
                "stops serving an exchange, cancelling a live one and freeing its memory: {exchange}",
            ),
        ];
        Ok(Response::new(
            stream::iter(actions.map(|(kind, description)| {
                Ok(ActionType {
                    r#type: kind.into(),
                    description: description.into(),
                })
            }))
            .boxed(),
        ))
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
            "GetFlightInfo tells whether a destination is complete",
        ))
    }

    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented(
            "DoExchange: use DoPut to produce and DoGet to consume",
        ))
    }
}

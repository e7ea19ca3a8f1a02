//! What a `DoGet` stream sends: a destination's schema, then each batch (numbered by its
//! sequence in `app_metadata`) after the dictionaries it needs, from a finished output's files
//! or a live exchange; partout-format's messages wrapped in `FlightData` here, at the edge.

use crate::error::{ExchangeError, Result, status};
use crate::live::LiveExchange;
use crate::requests::DestinationTicket;
use arrow_flight::{FlightData, SchemaAsIpc};
use arrow_ipc::writer::IpcWriteOptions;
use futures::stream::{self, StreamExt};
use partout_format::{IpcMessage, Message};
use partout_output::{FileCursor, FinishedOutput};
use std::sync::Arc;
use tokio::sync::mpsc;
use tonic::Status;

/// Bytes of a live destination's messages one wait gathers for a stream.
const FETCH_BYTES: usize = 4 << 20;

/// A finished output's destination as a DoGet stream, from the ticket's sequence: the schema,
/// then each batch with its dictionaries. The files are read one message at a time, each on
/// a blocking thread for just that read, when the client asks for more: a stream whose reader
/// stops (never granting HTTP/2 flow control) holds no thread, and a slow disk holds none of
/// the runtime's.
pub(crate) fn stream_finished(
    finished: Arc<FinishedOutput>,
    ticket: DestinationTicket,
    schema: arrow_schema::SchemaRef,
) -> impl futures::Stream<Item = Result<FlightData, Status>> + Send + 'static {
    let context = format!("destination {}", ticket.destination);
    let open = async move {
        let opened = tokio::task::spawn_blocking(move || -> Result<FileCursor> {
            let mut cursor = finished.cursor(ticket.destination)?;
            if !cursor.skip(ticket.from_sequence)? {
                return Err(ExchangeError::InvalidArgument(format!(
                    "from_sequence {} is past the destination's last batch",
                    ticket.from_sequence
                )));
            }
            Ok(cursor)
        })
        .await
        .unwrap_or_else(|e| Err(ExchangeError::corrupt_because("opening the output", e)));
        let options = IpcWriteOptions::default();
        let schema: FlightData = SchemaAsIpc::new(&schema, &options).into();
        opened.map(|cursor| (schema, cursor, ticket.from_sequence))
    };
    stream::once(open).flat_map(move |opened| {
        let context = context.clone();
        match opened {
            Err(e) => stream::iter([Err(status(e.context(context)))]).boxed(),
            Ok((schema, cursor, from)) => {
                let batches = stream::unfold(Some((cursor, from)), move |state| {
                    let context = context.clone();
                    async move {
                        let (mut cursor, sequence) = state?;
                        let read = tokio::task::spawn_blocking(move || {
                            let message = cursor.next_message();
                            (cursor, message)
                        })
                        .await;
                        let (cursor, message) = match read {
                            Ok(read) => read,
                            Err(e) => {
                                let e = ExchangeError::corrupt_because("reading the output", e);
                                return Some((vec![Err(status(e.context(context)))], None));
                            }
                        };
                        match message {
                            Ok(None) => None,
                            Err(e) => Some((vec![Err(status(e.context(context)))], None)),
                            Ok(Some(Message::Ipc {
                                dictionaries,
                                batch,
                                ..
                            })) => {
                                let data = dictionaries
                                    .into_iter()
                                    .map(flight_data)
                                    .chain([numbered(batch, sequence)])
                                    .map(Ok)
                                    .collect();
                                Some((data, Some((cursor, sequence + 1))))
                            }
                            Ok(Some(_)) => {
                                let e = ExchangeError::corrupt(
                                    "an IPC output's file gave a message of another format",
                                );
                                Some((vec![Err(status(e.context(context)))], None))
                            }
                        }
                    }
                })
                .flat_map(stream::iter);
                stream::once(async { Ok(schema) }).chain(batches).boxed()
            }
        }
    })
}

/// An IPC message as Flight carries it.
fn flight_data(message: IpcMessage) -> FlightData {
    FlightData::new()
        .with_data_header(message.header)
        .with_data_body(message.body)
}

/// Batch `message`, numbered as batch `sequence`.
fn numbered(message: IpcMessage, sequence: u64) -> FlightData {
    flight_data(message).with_app_metadata(sequence.to_string().into_bytes())
}

/// Sends `message`'s dictionaries and its batch, numbered `sequence`; false when the
/// consumer has gone.
async fn send(
    tx: &mpsc::Sender<Result<FlightData, Status>>,
    message: Message,
    sequence: u64,
) -> bool {
    let Message::Ipc {
        dictionaries,
        batch,
        ..
    } = message
    else {
        unreachable!("converted to IPC before sending");
    };
    for dictionary in dictionaries {
        if tx.send(Ok(flight_data(dictionary))).await.is_err() {
            return false;
        }
    }
    tx.send(Ok(numbered(batch, sequence))).await.is_ok()
}

/// Streams live destination `ticket.destination` into `tx`.
pub(crate) async fn stream_live(
    live: std::sync::Arc<LiveExchange>,
    ticket: DestinationTicket,
    tx: mpsc::Sender<Result<FlightData, Status>>,
) -> Result<()> {
    let p = ticket.destination;
    let encoder = live.wait_encoder().await?;
    let schema = SchemaAsIpc::new(encoder.schema(), encoder.ipc_options()).into();
    if tx.send(Ok(schema)).await.is_err() {
        return Ok(());
    }
    let mut next = ticket.from_sequence;
    loop {
        let fetched = live.fetch(p, next, FETCH_BYTES, None).await?;
        for message in fetched.messages {
            let message = encoder.to_ipc(message)?;
            if !send(&tx, message, next).await {
                return Ok(());
            }
            next += 1;
            if ticket.auto_ack {
                live.ack(p, next)?;
            }
        }
        if fetched.complete {
            return Ok(());
        }
    }
}

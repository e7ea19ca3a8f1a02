//! Live exchanges over Arrow Flight on 127.0.0.1: producers (partout's own writers in this
//! process, or remote ones through DoPut) fill the queues while consumers read them. Every row
//! arrives once, in its destination, with its values; the queues stay within their budget
//! while a slow consumer holds the producers back; a failed producer and a cancel reach the
//! consumers as errors; a consumer that drops its stream resumes exactly where it stopped.
//! Every test is bounded in time.

mod common;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_flight::decode::DecodedPayload;
use arrow_flight::error::FlightError;
use arrow_flight::{Action, FlightClient, FlightData, FlightDescriptor, SchemaAsIpc};
use common::{batch, channel, fetch, sequence, serve};
use futures::{StreamExt, TryStreamExt};
use partout_core::ids::{PartitionIds, Partitioning};
use partout_exchange::WriterOptions;
use partout_flight::{DestinationTicket, Exchanges, LiveExchange, LiveOptions};
use partout_format::message::{IpcMessage, Message, MessageEncoder, encode_ipc};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::Channel;

/// Runs `test` within `seconds`.
async fn bounded<F: std::future::Future<Output = ()>>(seconds: u64, test: F) {
    tokio::time::timeout(Duration::from_secs(seconds), test)
        .await
        .expect("the test finished within its time bound");
}

/// `live` served as `name` on 127.0.0.1; the servers and a channel to their Flight service.
async fn served(name: &str, live: &Arc<LiveExchange>) -> (partout_flight::serve::Servers, Channel) {
    let exchanges = Exchanges::new();
    exchanges.add_live(name, live.clone()).unwrap();
    let servers = serve(exchanges).await;
    let channel = channel(&servers).await;
    (servers, channel)
}

/// Writer options flushing small batches, so that a destination gets many.
fn small_flushes() -> WriterOptions {
    WriterOptions::default().with_target_bytes(16 << 10)
}

/// `inputs` written by one in-process producer each, on its own thread.
fn produce(
    live: &Arc<LiveExchange>,
    inputs: Vec<Vec<RecordBatch>>,
) -> Vec<std::thread::JoinHandle<Result<(), String>>> {
    inputs
        .into_iter()
        .map(|batches| {
            let live = live.clone();
            std::thread::spawn(move || {
                let schema = batches[0].schema();
                let partitioning = Partitioning::hash(vec![0], live.partitions());
                let mut writer = live
                    .writer(schema, partitioning, small_flushes())
                    .map_err(|e| e.to_string())?;
                for batch in &batches {
                    writer.append(batch).map_err(|e| with_causes(&e))?;
                }
                writer
                    .finish_output()
                    .map(drop)
                    .map_err(|e| with_causes(&e))
            })
        })
        .collect()
}

/// `e` and the errors that caused it.
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(e) = cause {
        out.push_str(&format!(": {e}"));
        cause = e.source();
    }
    out
}

/// Every row of `inputs` by its id.
fn rows_by_id(inputs: &[Vec<RecordBatch>]) -> HashMap<i64, RecordBatch> {
    let mut rows = HashMap::new();
    for batch in inputs.iter().flatten() {
        let ids = batch.column(1).as_primitive::<Int64Type>();
        for (i, id) in ids.values().iter().enumerate() {
            rows.insert(*id, batch.slice(i, 1));
        }
    }
    rows
}

/// Checks that `got` holds each row of `expected` once, with its values, in destination `p`;
/// removes the rows it saw.
fn check_destination(
    expected: &mut HashMap<i64, RecordBatch>,
    got: &[RecordBatch],
    p: u32,
    partitions: u32,
) {
    for batch in got {
        let mut ids =
            PartitionIds::try_new(Partitioning::hash(vec![0], partitions), &batch.schema())
                .unwrap();
        let mut dest = Vec::new();
        ids.compute(batch, &mut dest).unwrap();
        assert!(dest.iter().all(|&d| d == p), "a row out of destination {p}");
        let column = batch.column(1).as_primitive::<Int64Type>();
        for (i, id) in column.values().iter().enumerate() {
            let want = expected
                .remove(id)
                .unwrap_or_else(|| panic!("row {id} unknown or twice"));
            for (a, b) in batch.columns().iter().zip(want.columns()) {
                assert_eq!(&a.slice(i, 1).to_data(), &b.to_data(), "row {id}'s values");
            }
        }
    }
}

/// Reads destination `p` to its end, acknowledging every batch (by action, or with the
/// ticket's `auto_ack`), after `delay` per batch.
async fn consume(
    channel: Channel,
    exchange: &str,
    p: u32,
    auto_ack: bool,
    delay: Duration,
) -> Result<Vec<RecordBatch>, FlightError> {
    let mut ticket = DestinationTicket::new(exchange, p);
    ticket.auto_ack = auto_ack;
    let mut client = FlightClient::new(channel.clone());
    let mut stream = client.do_get(ticket.to_ticket()).await?.into_inner();
    let mut out = Vec::new();
    let mut next = 0;
    while let Some(data) = stream.try_next().await? {
        if let DecodedPayload::RecordBatch(batch) = data.payload {
            assert_eq!(sequence(&data.inner), next, "batches in sequence");
            next += 1;
            out.push(batch);
            tokio::time::sleep(delay).await;
            if !auto_ack {
                let ack = DestinationTicket::new(exchange, p).from_sequence(next);
                let body = serde_json::to_vec(&ack).unwrap();
                let mut client = FlightClient::new(channel.clone());
                client
                    .do_action(Action::new("ack", body))
                    .await?
                    .try_collect::<Vec<_>>()
                    .await?;
            }
        }
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_consumers_get_every_row_once_within_the_budget() {
    bounded(120, async {
        const N: u32 = 64;
        let budget = 512 << 10;
        let live = LiveExchange::try_new(None, LiveOptions::new(N, 2).with_budget(budget)).unwrap();
        let (_servers, channel) = served("orders", &live).await;
        let mut client = FlightClient::new(channel.clone());
        let inputs: Vec<Vec<RecordBatch>> = (0..2)
            .map(|producer| (0..4).map(|i| batch(10_000, producer * 10 + i)).collect())
            .collect();
        let mut expected = rows_by_id(&inputs);
        let consumers: Vec<_> = (0..N)
            .map(|p| {
                let channel = channel.clone();
                // Half acknowledge by action, half with auto_ack.
                tokio::spawn(async move {
                    consume(channel, "orders", p, p % 2 == 0, Duration::ZERO).await
                })
            })
            .collect();
        let producers = produce(&live, inputs);
        for producer in producers {
            tokio::task::spawn_blocking(move || producer.join().unwrap())
                .await
                .unwrap()
                .unwrap();
        }
        for (p, consumer) in consumers.into_iter().enumerate() {
            let got = consumer.await.unwrap().unwrap();
            check_destination(&mut expected, &got, p as u32, N);
        }
        assert!(expected.is_empty(), "{} rows never arrived", expected.len());
        assert!(
            live.peak_buffered_bytes() <= budget,
            "{} bytes held, budget {budget}",
            live.peak_buffered_bytes()
        );
        assert_eq!(
            live.buffered_bytes(),
            0,
            "every batch acknowledged and freed"
        );
        let info = client
            .get_flight_info(FlightDescriptor::new_path(vec![
                "orders".into(),
                "3".into(),
            ]))
            .await
            .unwrap();
        let metadata: serde_json::Value = serde_json::from_slice(&info.app_metadata).unwrap();
        assert_eq!(metadata["complete"], true);
        assert!(info.total_records > 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_keeps_the_exchange_within_the_budget() {
    bounded(120, async {
        let budget = 128 << 10;
        let live = LiveExchange::try_new(None, LiveOptions::new(2, 1).with_budget(budget)).unwrap();
        let (_servers, channel) = served("slow", &live).await;
        // About 3 MB of output, each destination's batches about 30 kB: twenty times the
        // budget.
        let inputs = vec![(0..50).map(|i| batch(1_000, 50 + i)).collect::<Vec<_>>()];
        let mut expected = rows_by_id(&inputs);
        let fast = tokio::spawn(consume(channel.clone(), "slow", 0, false, Duration::ZERO));
        let slow = tokio::spawn(consume(
            channel.clone(),
            "slow",
            1,
            false,
            Duration::from_millis(20),
        ));
        let producer = produce(&live, inputs).pop().unwrap();
        tokio::task::spawn_blocking(move || producer.join().unwrap())
            .await
            .unwrap()
            .unwrap();
        // Whether the producer waited for the slow consumer or spilled (when a consumer's
        // first request comes after the budget filled), memory stayed within the budget.
        check_destination(&mut expected, &fast.await.unwrap().unwrap(), 0, 2);
        check_destination(&mut expected, &slow.await.unwrap().unwrap(), 1, 2);
        assert!(expected.is_empty());
        let metrics = live.metrics();
        assert!(metrics.peak_held_bytes <= budget, "{metrics:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_started_one_after_another_get_every_row_within_the_budget() {
    bounded(120, async {
        let budget = 128 << 10;
        let live = LiveExchange::try_new(None, LiveOptions::new(4, 2).with_budget(budget)).unwrap();
        let (_servers, channel) = served("in-order", &live).await;
        let inputs: Vec<Vec<RecordBatch>> = (0..2)
            .map(|k| (0..25).map(|i| batch(1_000, k * 1_000 + i)).collect())
            .collect();
        let mut expected = rows_by_id(&inputs);
        let producers = produce(&live, inputs);
        // Each destination read to its end before the next consumer starts: the first
        // waits while the others' rows fill the budget many times over.
        for p in 0..4 {
            let got = consume(channel.clone(), "in-order", p, p % 2 == 0, Duration::ZERO)
                .await
                .unwrap();
            check_destination(&mut expected, &got, p, 4);
        }
        assert!(expected.is_empty());
        for producer in producers {
            tokio::task::spawn_blocking(move || producer.join().unwrap())
                .await
                .unwrap()
                .unwrap();
        }
        let metrics = live.metrics();
        assert!(metrics.peak_held_bytes <= budget, "{metrics:?}");
        assert!(metrics.spill.spill_count > 0, "{metrics:?}");
        // GetFlightInfo reports the spilling.
        let mut client = FlightClient::new(channel.clone());
        let info = client
            .get_flight_info(FlightDescriptor::new_path(vec![
                "in-order".into(),
                "0".into(),
            ]))
            .await
            .unwrap();
        let metadata: serde_json::Value = serde_json::from_slice(&info.app_metadata).unwrap();
        assert_eq!(metadata["spill_count"], metrics.spill.spill_count);
        assert_eq!(metadata["spilled_bytes"], metrics.spill.spilled_bytes);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_producer_reaches_every_consumer_as_an_error() {
    bounded(60, async {
        let live = LiveExchange::try_new(None, LiveOptions::new(3, 2)).unwrap();
        let (_servers, channel) = served("failing", &live).await;
        let mut client = FlightClient::new(channel.clone());
        let consumers: Vec<_> = (0..3)
            .map(|p| tokio::spawn(consume(channel.clone(), "failing", p, true, Duration::ZERO)))
            .collect();
        // One producer finishes; the other writes and is dropped before finishing.
        let good = produce(&live, vec![vec![batch(3_000, 70)]]).pop().unwrap();
        tokio::task::spawn_blocking(move || good.join().unwrap())
            .await
            .unwrap()
            .unwrap();
        let schema = batch(1, 71).schema();
        let mut writer = live
            .writer(schema, Partitioning::hash(vec![0], 3), small_flushes())
            .unwrap();
        writer.append(&batch(3_000, 71)).unwrap();
        drop(writer);
        for consumer in consumers {
            let err = consumer.await.unwrap().unwrap_err().to_string();
            assert!(
                err.contains("failed") && err.contains("producer stopped before finishing"),
                "{err}"
            );
        }
        // A consumer arriving later gets the error too, and so does another producer.
        let err = fetch(&mut client, "failing", 0, 0)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("producer stopped"), "{err}");
        assert!(live.producer().is_err());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_drops_its_stream_resumes_exactly_where_it_stopped() {
    bounded(60, async {
        let live = LiveExchange::try_new(None, LiveOptions::new(2, 1)).unwrap();
        let (_servers, channel) = served("resume", &live).await;
        let mut client = FlightClient::new(channel.clone());
        let inputs = vec![(0..12).map(|i| batch(2_000, 80 + i)).collect::<Vec<_>>()];
        let producer = produce(&live, inputs.clone()).pop().unwrap();
        tokio::task::spawn_blocking(move || producer.join().unwrap())
            .await
            .unwrap()
            .unwrap();
        // The whole destination, read without acknowledging (nothing is freed).
        let whole = fetch(&mut client, "resume", 0, 0).await.unwrap();
        assert!(whole.len() > 4, "{} batches", whole.len());
        // Three batches, then the stream is dropped mid-way.
        let ticket = DestinationTicket::new("resume", 0);
        let mut stream = client
            .do_get(ticket.to_ticket())
            .await
            .unwrap()
            .into_inner();
        let mut got = Vec::new();
        while got.len() < 3 {
            let data = stream.next().await.unwrap().unwrap();
            if let DecodedPayload::RecordBatch(batch) = data.payload {
                got.push((sequence(&data.inner), batch));
            }
        }
        drop(stream);
        let held = live.buffered_bytes();
        let rest = fetch(&mut client, "resume", 0, 3).await.unwrap();
        got.extend(rest);
        assert_eq!(got, whole, "resumed: nothing lost, nothing twice");
        // Asking from 3 acknowledged the first three: they are gone.
        let err = fetch(&mut client, "resume", 0, 1)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("acknowledged"), "{err}");
        // ... and their memory is given back.
        let freed = held - live.buffered_bytes();
        assert!(
            freed > 0,
            "{held} bytes held before the acknowledgement, as many after"
        );
        // Unknown exchanges, destinations and actions are clear errors.
        let err = fetch(&mut client, "nope", 0, 0)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("no exchange") && err.contains("nope"), "{err}");
        let err = fetch(&mut client, "resume", 9, 0)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("no destination 9"), "{err}");
        let err = client
            .do_action(Action::new("launch", ""))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("no action") && err.contains("launch"), "{err}");
    })
    .await;
}

/// A DoPut stream of `batches`, each tagged with its destination in `app_metadata`.
fn put_stream(
    exchange: &str,
    batches: Vec<(u32, RecordBatch)>,
) -> impl futures::Stream<Item = Result<FlightData, FlightError>> + Send + 'static {
    let options = arrow_ipc::writer::IpcWriteOptions::default();
    let schema = batches[0].1.schema();
    let first: FlightData = FlightData::from(SchemaAsIpc::new(&schema, &options))
        .with_descriptor(FlightDescriptor::new_path(vec![exchange.to_string()]));
    let mut messages = vec![Ok(first)];
    for (p, batch) in batches {
        let Message::Ipc {
            dictionaries,
            batch,
            ..
        } = encode_ipc(&batch, &options).unwrap()
        else {
            unreachable!()
        };
        let flight = |m: IpcMessage| {
            FlightData::new()
                .with_data_header(m.header)
                .with_data_body(m.body)
        };
        messages.extend(dictionaries.into_iter().map(flight).map(Ok));
        messages.push(Ok(
            flight(batch).with_app_metadata(p.to_string().into_bytes())
        ));
    }
    futures::stream::iter(messages)
}

/// Runs action `kind` with `body`.
async fn action(
    channel: &Channel,
    kind: &str,
    body: impl Into<bytes::Bytes>,
) -> Result<(), FlightError> {
    let mut client = FlightClient::new(channel.clone());
    client
        .do_action(Action::new(kind, body))
        .await?
        .try_collect::<Vec<_>>()
        .await
        .map(drop)
}

/// The error a DoPut of `stream` ends in (empty if none).
async fn put_error(
    channel: &Channel,
    stream: impl futures::Stream<Item = Result<FlightData, FlightError>> + Send + 'static,
) -> String {
    FlightClient::new(channel.clone())
        .do_put(stream)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

/// `batch`'s rows split by destination.
fn split(batch: &RecordBatch, partitions: u32) -> Vec<(u32, RecordBatch)> {
    let mut ids =
        PartitionIds::try_new(Partitioning::hash(vec![0], partitions), &batch.schema()).unwrap();
    let mut dest = Vec::new();
    ids.compute(batch, &mut dest).unwrap();
    (0..partitions)
        .filter_map(|p| {
            let mask: arrow_array::BooleanArray = dest.iter().map(|&d| Some(d == p)).collect();
            let part = arrow_select::filter::filter_record_batch(batch, &mask).unwrap();
            (part.num_rows() > 0).then_some((p, part))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_producers_feed_an_exchange_through_do_put_and_cancel_ends_one() {
    bounded(60, async {
        let servers = serve(Exchanges::new()).await;
        let channel = channel(&servers).await;
        let mut client = FlightClient::new(channel.clone());
        let create = serde_json::json!({"exchange": "remote", "partitions": 4, "producers": 2, "budget_bytes": 1 << 20});
        action(&channel, "create", create.to_string()).await.unwrap();
        let inputs: Vec<Vec<RecordBatch>> = (0..2).map(|i| vec![batch(4_000, 90 + i)]).collect();
        let mut expected = rows_by_id(&inputs);
        let consumers: Vec<_> = (0..4)
            .map(|p| tokio::spawn(consume(channel.clone(), "remote", p, true, Duration::ZERO)))
            .collect();
        for input in &inputs {
            let mut producer = FlightClient::new(channel.clone());
            let tagged = split(&input[0], 4);
            let results: Vec<_> = producer
                .do_put(put_stream("remote", tagged))
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let summary: serde_json::Value =
                serde_json::from_slice(&results[0].app_metadata).unwrap();
            assert_eq!(summary["rows"], 4_000);
        }
        for (p, consumer) in consumers.into_iter().enumerate() {
            check_destination(&mut expected, &consumer.await.unwrap().unwrap(), p as u32, 4);
        }
        assert!(expected.is_empty());
        // A third producer is one too many.
        let err = put_error(&channel, put_stream("remote", split(&batch(10, 99), 4))).await;
        assert!(err.contains("all 2 producers have joined"), "{err}");

        // A batch for a destination the exchange does not have fails it.
        let create = serde_json::json!({"exchange": "bad", "partitions": 2, "producers": 1});
        action(&channel, "create", create.to_string()).await.unwrap();
        let err = put_error(&channel, put_stream("bad", vec![(7, batch(10, 98))])).await;
        assert!(err.contains("no destination 7"), "{err}");
        let err = fetch(&mut client, "bad", 0, 0).await.unwrap_err().to_string();
        assert!(err.contains("refused"), "{err}");

        // Cancel: a waiting consumer gets CANCELLED, and producers can no longer join.
        let create = serde_json::json!({"exchange": "cancelled", "partitions": 2, "producers": 1});
        action(&channel, "create", create.to_string()).await.unwrap();
        let waiting = tokio::spawn(consume(channel.clone(), "cancelled", 1, true, Duration::ZERO));
        tokio::time::sleep(Duration::from_millis(100)).await;
        action(&channel, "cancel", r#"{"exchange": "cancelled"}"#).await.unwrap();
        let err = waiting.await.unwrap().unwrap_err().to_string();
        assert!(err.contains("cancelled"), "{err}");
        let err = put_error(&channel, put_stream("cancelled", split(&batch(10, 97), 2))).await;
        assert!(err.contains("cancelled"), "{err}");
    })
    .await;
}

#[test]
fn impossible_live_options_are_refused() {
    for options in [
        LiveOptions::new(0, 1),
        LiveOptions::new(2, 0),
        LiveOptions::new(2, 1).with_budget(0),
    ] {
        let err = LiveExchange::try_new(None, options)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("needs destinations, producers and a budget"),
            "{err}"
        );
    }
    let live = LiveExchange::try_new(None, LiveOptions::new(2, 1)).unwrap();
    let schema = batch(1, 1).schema();
    let err = live
        .writer(
            schema,
            Partitioning::hash(vec![0], 3),
            WriterOptions::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("3 destinations for an exchange of 2"), "{err}");
}

#[test]
fn spilled_messages_read_back_equal_and_damaged_ones_are_errors() {
    let plain = batch(300, 11);
    for original in [plain.clone(), plain.slice(10, 200)] {
        let schema = original.schema();
        let mut encoder = MessageEncoder::try_new(schema.clone(), Default::default()).unwrap();
        let message = encoder.encode(&original).unwrap();
        let mut bytes = Vec::new();
        message.write_to(&mut bytes);
        let back = Message::read_from(&bytes).unwrap();
        assert_eq!(back.rows(), message.rows());
        assert_eq!(back.size(), message.size());
        assert_eq!(back.to_batch(&schema).unwrap(), original);
        // Every cut and a trailing byte are errors, never a panic.
        for len in 0..bytes.len() {
            assert!(Message::read_from(&bytes[..len]).is_err(), "cut at {len}");
        }
        bytes.push(0);
        assert!(Message::read_from(&bytes).is_err());
    }
    let page = Message::Page {
        page: bytes::Bytes::from_static(b"a page's bytes"),
        rows: 3,
    };
    let mut bytes = Vec::new();
    page.write_to(&mut bytes);
    assert!(
        matches!(Message::read_from(&bytes).unwrap(), Message::Page { rows: 3, page } if &page[..] == b"a page's bytes")
    );
    bytes[0] = 9;
    assert!(Message::read_from(&bytes).is_err());
}

// Dictionary columns, as pyarrow's `dictionary_encode()` gives them: Int32 keys (nulls in the
// keys), a dictionary of Utf8 values; also inside a struct and a list.

/// `Dictionary(Int32, Utf8)`.
fn dictionary_type() -> arrow_schema::DataType {
    use arrow_schema::DataType;
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// A batch of `rows` rows: a key `k`, a unique id `id`, a dictionary column `tag` with nulls,
/// a struct `nested` holding one (`d`) and a list `tags` of them. Each seed has a dictionary
/// of its own (its words and their number), shared by the three columns.
fn dictionary_batch(rows: usize, seed: u64) -> RecordBatch {
    use arrow_array::types::Int32Type;
    use arrow_array::{
        ArrayRef, DictionaryArray, Int32Array, Int64Array, ListArray, StringArray, StructArray,
    };
    use arrow_schema::Field;
    let offset = seed as i64 * 1_000_000_000;
    let words = 3 + (seed % 5) as usize;
    let values: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..words).map(|w| format!("word {w} of dictionary {seed}")),
    ));
    let dictionary = |n: usize, salt: usize| -> ArrayRef {
        let keys = Int32Array::from_iter(
            (0..n).map(|i| ((i + salt) % 7 != 3).then_some(((i * 31 + salt) % words) as i32)),
        );
        Arc::new(DictionaryArray::<Int32Type>::try_new(keys, values.clone()).unwrap())
    };
    let nested = StructArray::from(vec![(
        Arc::new(Field::new("d", dictionary_type(), true)),
        dictionary(rows, 1),
    )]);
    let lengths = (0..rows).map(|i| i % 3);
    let items = lengths.clone().sum::<usize>();
    let tags = ListArray::try_new(
        Arc::new(Field::new_list_field(dictionary_type(), true)),
        arrow_buffer::OffsetBuffer::from_lengths(lengths),
        dictionary(items, 2),
        None,
    )
    .unwrap();
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "k",
            Arc::new(Int64Array::from_iter_values(
                (0..rows as i64).map(|i| (i + offset) * 7919 % 1009),
            )),
        ),
        (
            "id",
            Arc::new(Int64Array::from_iter_values(offset..offset + rows as i64)),
        ),
        ("tag", dictionary(rows, 0)),
        ("nested", Arc::new(nested)),
        ("tags", Arc::new(tags)),
    ];
    RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, c)| (n, c, true)))
        .unwrap()
}

/// `array` with every dictionary replaced by its values (what arrow's `cast` to the value
/// type does: a `take` of the values by the keys), inside structs and lists too.
fn hydrate(array: &arrow_array::ArrayRef) -> arrow_array::ArrayRef {
    use arrow_array::types::Int32Type;
    use arrow_array::{Array, ListArray, StructArray};
    use arrow_schema::{DataType, Field, Fields};
    match array.data_type() {
        DataType::Dictionary(..) => {
            let dictionary = array.as_dictionary::<Int32Type>();
            arrow_select::take::take(dictionary.values(), dictionary.keys(), None).unwrap()
        }
        DataType::Struct(fields) => {
            let array = array.as_struct();
            let columns: Vec<_> = array.columns().iter().map(hydrate).collect();
            let fields: Fields = fields
                .iter()
                .zip(&columns)
                .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), f.is_nullable()))
                .collect();
            Arc::new(StructArray::new(fields, columns, array.nulls().cloned()))
        }
        DataType::List(field) => {
            let array = array.as_list::<i32>();
            let values = hydrate(array.values());
            let field = Field::new(
                field.name(),
                values.data_type().clone(),
                field.is_nullable(),
            );
            Arc::new(ListArray::new(
                Arc::new(field),
                array.offsets().clone(),
                values,
                array.nulls().cloned(),
            ))
        }
        _ => array.clone(),
    }
}

/// `batch` with its dictionaries replaced by their values.
fn hydrate_batch(batch: &RecordBatch) -> RecordBatch {
    RecordBatch::try_from_iter_with_nullable(
        batch
            .schema()
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(f, c)| (f.name().clone(), hydrate(c), f.is_nullable())),
    )
    .unwrap()
}

/// Checks that `got` came with its dictionary columns as dictionaries, then as
/// [`check_destination`] on their values.
fn check_dictionary_destination(
    expected: &mut HashMap<i64, RecordBatch>,
    got: &[RecordBatch],
    p: u32,
    partitions: u32,
) {
    use arrow_schema::{DataType, Field};
    let dictionaries = [
        dictionary_type(),
        DataType::Struct(vec![Field::new("d", dictionary_type(), true)].into()),
        DataType::new_list(dictionary_type(), true),
    ];
    for batch in got {
        let types: Vec<_> = batch.schema().fields()[2..]
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(
            types, dictionaries,
            "dictionary columns arrive as dictionaries"
        );
    }
    let got: Vec<_> = got.iter().map(hydrate_batch).collect();
    check_destination(expected, &got, p, partitions);
}

/// Every row of `inputs` by its id, its dictionaries replaced by their values.
fn hydrated_rows_by_id(inputs: &[Vec<RecordBatch>]) -> HashMap<i64, RecordBatch> {
    let hydrated: Vec<Vec<RecordBatch>> = inputs
        .iter()
        .map(|batches| batches.iter().map(hydrate_batch).collect())
        .collect();
    rows_by_id(&hydrated)
}

/// A DoPut stream of `batches` as an Arrow IPC stream writer (pyarrow's, say) sends them: the
/// schema registers its dictionaries with the stream's tracker, and a dictionary goes before a
/// batch only when it is not the one sent last for its column. The stream, and the number of
/// dictionary messages in it.
fn ipc_put_stream(
    exchange: &str,
    batches: Vec<(u32, RecordBatch)>,
) -> (
    impl futures::Stream<Item = Result<FlightData, FlightError>> + Send + 'static,
    usize,
) {
    use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext};
    let options = arrow_ipc::writer::IpcWriteOptions::default();
    let generator = IpcDataGenerator::default();
    let mut tracker = DictionaryTracker::new(false);
    let mut context = IpcWriteContext::default();
    let schema = batches[0].1.schema();
    let first = FlightData::from(generator.schema_to_bytes_with_dictionary_tracker(
        &schema,
        &mut tracker,
        &options,
    ))
    .with_descriptor(FlightDescriptor::new_path(vec![exchange.to_string()]));
    let mut messages = vec![Ok(first)];
    let mut sent = 0;
    for (p, batch) in batches {
        let (dictionaries, batch) = generator
            .encode(&batch, &mut tracker, &options, &mut context)
            .unwrap();
        sent += dictionaries.len();
        messages.extend(dictionaries.into_iter().map(|d| Ok(FlightData::from(d))));
        messages.push(Ok(
            FlightData::from(batch).with_app_metadata(p.to_string().into_bytes())
        ));
    }
    (futures::stream::iter(messages), sent)
}

/// `batches` split by destination, each destination's rows in slices of up to `rows` rows.
fn tagged(batches: &[RecordBatch], partitions: u32, rows: usize) -> Vec<(u32, RecordBatch)> {
    let mut out = Vec::new();
    for batch in batches {
        for (p, part) in split(batch, partitions) {
            for start in (0..part.num_rows()).step_by(rows) {
                out.push((p, part.slice(start, rows.min(part.num_rows() - start))));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn do_put_producers_carry_dictionary_columns_to_every_consumer() {
    bounded(60, async {
        const N: u32 = 4;
        let servers = serve(Exchanges::new()).await;
        let channel = channel(&servers).await;
        let create = serde_json::json!({"exchange": "dict-put", "partitions": N, "producers": 2, "budget_bytes": 1 << 20});
        action(&channel, "create", create.to_string()).await.unwrap();
        // Each input batch with a dictionary of its own.
        let inputs: Vec<Vec<RecordBatch>> = (0..2)
            .map(|k| (0..3).map(|i| dictionary_batch(1_500, 200 + k * 10 + i)).collect())
            .collect();
        let mut expected = hydrated_rows_by_id(&inputs);
        let consumers: Vec<_> = (0..N)
            .map(|p| {
                let channel = channel.clone();
                tokio::spawn(async move {
                    consume(channel, "dict-put", p, p % 2 == 0, Duration::ZERO).await
                })
            })
            .collect();
        for input in &inputs {
            let mut producer = FlightClient::new(channel.clone());
            let (stream, dictionaries) = ipc_put_stream("dict-put", tagged(input, N, 400));
            // Each input batch's three dictionaries sent once, before the first of its parts.
            assert_eq!(dictionaries, 3 * input.len());
            let results: Vec<_> = producer
                .do_put(stream)
                .await
                .expect("the exchange takes batches with dictionary columns")
                .try_collect()
                .await
                .unwrap();
            let summary: serde_json::Value =
                serde_json::from_slice(&results[0].app_metadata).unwrap();
            assert_eq!(summary["rows"], 4_500);
        }
        for (p, consumer) in consumers.into_iter().enumerate() {
            let got = consumer.await.unwrap().unwrap();
            check_dictionary_destination(&mut expected, &got, p as u32, N);
        }
        assert!(expected.is_empty(), "{} rows never arrived", expected.len());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_carry_dictionary_columns_through_the_queues_and_spill_files() {
    bounded(120, async {
        let budget = 128 << 10;
        let live = LiveExchange::try_new(None, LiveOptions::new(4, 2).with_budget(budget)).unwrap();
        let (_servers, channel) = served("dict-writer", &live).await;
        let inputs: Vec<Vec<RecordBatch>> = (0..2)
            .map(|k| {
                (0..10)
                    .map(|i| dictionary_batch(2_000, 300 + k * 20 + i))
                    .collect()
            })
            .collect();
        let mut expected = hydrated_rows_by_id(&inputs);
        let producers = produce(&live, inputs);
        let join = |producers: Vec<std::thread::JoinHandle<Result<(), String>>>| {
            tokio::task::spawn_blocking(move || {
                producers
                    .into_iter()
                    .map(|producer| producer.join().unwrap())
                    .collect::<Result<Vec<()>, String>>()
            })
        };
        // Destinations read one after another: the others' messages are spilled meanwhile,
        // and read back from the spill file.
        for p in 0..4 {
            match consume(
                channel.clone(),
                "dict-writer",
                p,
                p % 2 == 0,
                Duration::ZERO,
            )
            .await
            {
                Ok(got) => check_dictionary_destination(&mut expected, &got, p, 4),
                Err(e) => {
                    let producers = join(producers).await.unwrap();
                    panic!("destination {p}: {e}; the producers: {producers:?}")
                }
            }
        }
        assert!(expected.is_empty(), "{} rows never arrived", expected.len());
        join(producers).await.unwrap().unwrap();
        let metrics = live.metrics();
        assert!(metrics.peak_held_bytes <= budget, "{metrics:?}");
        assert!(metrics.spill.spill_count > 0, "{metrics:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_resuming_at_any_sequence_decodes_the_dictionary_columns() {
    bounded(60, async {
        let servers = serve(Exchanges::new()).await;
        let channel = channel(&servers).await;
        let mut client = FlightClient::new(channel.clone());
        let create =
            serde_json::json!({"exchange": "dict-resume", "partitions": 2, "producers": 1});
        action(&channel, "create", create.to_string())
            .await
            .unwrap();
        // Two dictionaries, each sent once by the producer before the first of many batches.
        let inputs = vec![vec![
            dictionary_batch(1_200, 400),
            dictionary_batch(1_200, 401),
        ]];
        let mut expected = hydrated_rows_by_id(&inputs);
        let (stream, dictionaries) = ipc_put_stream("dict-resume", tagged(&inputs[0], 2, 100));
        assert_eq!(dictionaries, 6);
        FlightClient::new(channel.clone())
            .do_put(stream)
            .await
            .expect("the exchange takes batches with dictionary columns")
            .try_collect::<Vec<_>>()
            .await
            .unwrap();
        for p in 0..2 {
            // The whole destination, read without acknowledging (nothing is freed).
            let whole = fetch(&mut client, "dict-resume", p, 0).await.unwrap();
            assert!(whole.len() > 6, "{} batches", whole.len());
            // A stream from each later sequence starts with a batch whose dictionaries the
            // producer sent before an earlier one: it decodes all the same.
            for from in 1..whole.len() {
                let rest = fetch(&mut client, "dict-resume", p, from as u64)
                    .await
                    .unwrap_or_else(|e| panic!("resuming destination {p} at {from}: {e}"));
                assert_eq!(rest[..], whole[from..], "destination {p} resumed at {from}");
            }
            let got: Vec<_> = whole.into_iter().map(|(_, batch)| batch).collect();
            check_dictionary_destination(&mut expected, &got, p, 2);
        }
        assert!(expected.is_empty(), "{} rows never arrived", expected.len());
    })
    .await;
}

#[test]
fn dictionary_messages_decode_alone_and_read_back_from_spill() {
    let schema = dictionary_batch(1, 500).schema();
    let mut encoder = MessageEncoder::try_new(schema.clone(), Default::default()).unwrap();
    for (seed, rows) in [(500, 300), (501, 1), (502, 0)] {
        let whole = dictionary_batch(rows, seed);
        for original in [whole.clone(), whole.slice(rows / 3, rows - rows / 3)] {
            let message = encoder
                .encode(&original)
                .expect("a batch with dictionary columns encodes");
            let Message::Ipc { dictionaries, .. } = &message else {
                unreachable!()
            };
            // One dictionary per dictionary column (a top-level one, one in a struct, one in
            // a list), whatever the messages before it.
            assert_eq!(dictionaries.len(), 3);
            let decoded = message
                .to_batch(&schema)
                .expect("the message decodes alone");
            assert_eq!(hydrate_batch(&decoded), hydrate_batch(&original));
            let mut bytes = Vec::new();
            message.write_to(&mut bytes);
            let back = Message::read_from(&bytes).unwrap();
            assert_eq!(back.size(), message.size());
            let decoded = back.to_batch(&schema).expect("read back, it decodes alone");
            assert_eq!(hydrate_batch(&decoded), hydrate_batch(&original));
        }
    }
}

//! Readers that stop reading do not stall the server: 600 DoGet streams of a finished output
//! are opened over 6 connections and never read (their HTTP/2 windows fill and stay full);
//! a correct Flight DoGet and a correct Presto GET on fresh connections are then answered in
//! full within a few seconds. (A server that reads each stream's files on a blocking thread
//! held for the stream's life runs out of blocking threads here, and every later read of a
//! finished output waits forever.) On 127.0.0.1, bounded in time.

mod common;

use arrow_flight::FlightClient;
use common::{DESTINATIONS, ROWS, fetch};
use partout_flight::{DestinationTicket, Exchanges};
use partout_job::{Format, Job, JobOptions, Layout};
use std::time::{Duration, Instant};

/// A correct Flight read of finished output "out"'s destination 0 (giving `whole` again) and
/// a correct Presto read of its destination 1, on fresh connections, both answered within 5 s
/// while `what`; the Flight client.
async fn answered_while(
    servers: &partout_flight::serve::Servers,
    whole: &[(u64, arrow_array::RecordBatch)],
    what: &str,
) -> FlightClient {
    let started = Instant::now();
    let mut fresh: FlightClient = common::client(servers).await;
    let again = tokio::time::timeout(Duration::from_secs(5), fetch(&mut fresh, "out", 0, 0))
        .await
        .unwrap_or_else(|_| panic!("a Flight read answered while {what}"))
        .unwrap();
    assert_eq!(again, whole, "the same batches");
    let base = format!("http://{}", servers.presto.unwrap());
    let reply = reqwest::Client::new()
        .get(format!("{base}/v1/task/out/results/1/0"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap_or_else(|_| panic!("a Presto read answered while {what}"));
    assert_eq!(reply.status(), 200);
    assert!(!reply.bytes().await.unwrap().is_empty());
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    fresh
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_never_read_do_not_stall_other_readers() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        // 20 times the common input, in one file.
        let batch = common::batch(20 * ROWS, 5);
        let file = std::fs::File::create(dir.path().join("input.arrow")).unwrap();
        let mut writer = arrow_ipc::writer::FileWriter::try_new(file, &batch.schema()).unwrap();
        for start in (0..batch.num_rows()).step_by(8192) {
            writer
                .write(&batch.slice(start, 8192.min(batch.num_rows() - start)))
                .unwrap();
        }
        writer.finish().unwrap();
        // A small memory limit: many messages per destination, more than a stream's window
        // and a channel hold.
        let out = dir.path().join("out");
        let options = JobOptions::new([dir.path().join("input.arrow")], &out, DESTINATIONS)
            .with_keys(["k"])
            .with_format(Format::Ipc)
            .with_layout(Layout::Shuffle)
            .with_memory_limit(512 << 10)
            .with_threads(1);
        Job::try_new(options).unwrap().run(&()).unwrap();
        let exchanges = Exchanges::new();
        exchanges.add_directory("out", &out).unwrap();
        let servers = common::serve(exchanges).await;
        // What destination 0 holds, read before anything stalls.
        let mut client = common::client(&servers).await;
        let whole = fetch(&mut client, "out", 0, 0).await.unwrap();
        assert!(
            whole.len() > 20,
            "{} batches: too few to fill a window",
            whole.len()
        );

        // 600 streams opened and never read.
        let mut stalled = Vec::new();
        for _ in 0..6 {
            let mut client = common::client(&servers).await;
            for i in 0..100u32 {
                let ticket = DestinationTicket::new("out", i % DESTINATIONS).to_ticket();
                stalled.push(client.do_get(ticket).await.unwrap());
            }
            stalled.push(
                client
                    .do_get(DestinationTicket::new("out", 0).to_ticket())
                    .await
                    .unwrap(),
            );
        }
        // Let the server fill what it can.
        tokio::time::sleep(Duration::from_millis(500)).await;

        answered_while(&servers, &whole, "600 streams stall").await;
        drop(stalled);
    })
    .await
    .expect("the test finished within its time bound");
}

/// Producers that stop sending do not stall the server: 600 `DoPut` streams (over 6
/// connections) send their schema and then nothing, without ending; reads of a finished output,
/// over Flight and Presto's protocol, are still answered within a few seconds. (A server that
/// reads each `DoPut` stream on a blocking thread held for the stream's life runs out of
/// blocking threads here.) Then each producer sends a batch and ends, and the exchange gives
/// every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_that_stop_sending_do_not_stall_other_requests() {
    use arrow_flight::encode::FlightDataEncoderBuilder;
    use arrow_flight::{Action, FlightDescriptor};
    use futures::{SinkExt, TryStreamExt};
    const PRODUCERS: usize = 600;
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        common::input(dir.path());
        let out = common::repartition(dir.path(), Format::Ipc, Layout::Files);
        let exchanges = Exchanges::new();
        exchanges.add_directory("out", &out).unwrap();
        let servers = common::serve(exchanges).await;
        let mut client = common::client(&servers).await;
        let whole = fetch(&mut client, "out", 0, 0).await.unwrap();
        let body = format!(r#"{{"exchange": "live", "partitions": 2, "producers": {PRODUCERS}}}"#);
        client
            .do_action(Action::new("create", body))
            .await
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap();

        // Each producer's messages: its schema now, its batch later.
        let batch = common::batch(10, 7);
        let messages: Vec<arrow_flight::FlightData> = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(FlightDescriptor::new_path(vec!["live".into()])))
            .build(futures::stream::iter([Ok(batch.clone())]))
            .try_collect()
            .await
            .unwrap();
        let (schema, batch_message) = (messages[0].clone(), messages[1].clone());
        let mut senders = Vec::new();
        let mut puts = Vec::new();
        for _ in 0..6 {
            let channel = common::channel(&servers).await;
            for _ in 0..PRODUCERS / 6 {
                let (mut tx, rx) = futures::channel::mpsc::channel::<arrow_flight::FlightData>(4);
                tx.send(schema.clone()).await.unwrap();
                let mut flight =
                    arrow_flight::flight_service_client::FlightServiceClient::new(channel.clone());
                puts.push(tokio::spawn(async move { flight.do_put(rx).await }));
                senders.push(tx);
            }
        }
        // Let the server take what it has been sent.
        tokio::time::sleep(Duration::from_millis(500)).await;

        let mut fresh = answered_while(&servers, &whole, "600 producers are silent").await;

        // The producers go on: a batch each, then the end of their streams.
        for (i, tx) in senders.iter_mut().enumerate() {
            let mut message = batch_message.clone();
            message.app_metadata = (i % 2).to_string().into_bytes().into();
            tx.send(message).await.unwrap();
        }
        drop(senders);
        for put in puts {
            let response = put.await.unwrap().unwrap();
            response.into_inner().try_collect::<Vec<_>>().await.unwrap();
        }
        let mut rows = 0;
        for p in 0..2 {
            for (_, b) in fetch(&mut fresh, "live", p, 0).await.unwrap() {
                rows += b.num_rows();
            }
        }
        assert_eq!(rows, PRODUCERS * batch.num_rows());
    })
    .await
    .expect("the test finished within its time bound");
}

//! Readers that stop reading do not stall the server: 600 DoGet streams of a finished output
//! are opened over 6 connections and never read (their HTTP/2 windows fill and stay full, as a
//! relay in front of the server counts); a correct Flight DoGet and a correct Presto GET on
//! fresh connections are then answered in full within a few seconds. (A server that reads each
//! stream's files on a blocking thread held for the stream's life runs out of blocking threads
//! here, and every later read of a finished output waits forever.) On 127.0.0.1, bounded in
//! time.

mod common;

use arrow_flight::FlightClient;
use common::{DESTINATIONS, ROWS, fetch};
use partout_flight::{DestinationTicket, Exchange, Exchanges};
use partout_job::{Format, Job, JobOptions, Layout};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// How long the server is given to reach the state a test sets up (normally well under a
/// second): past it, the test fails saying what did not happen.
const SETUP: Duration = Duration::from_secs(30);

/// The HTTP/2 flow-control windows of the connections whose streams are never read, set here so
/// that the test knows how many bytes the server can send on each before it must stop: a
/// stream's, and the whole connection's (shared by its streams).
const STALLED_STREAM_WINDOW: u32 = 1 << 20;
const STALLED_CONNECTION_WINDOW: u32 = 4 << 20;

/// Counts the flow-controlled bytes in one direction of an HTTP/2 connection: the payloads of
/// its DATA frames, read from the frames' headers (9 bytes each: a 24-bit payload length, the
/// type, flags and stream id) as the bytes go by.
#[derive(Default)]
struct DataBytes {
    /// The next frame's header, as much of it as has come.
    header: Vec<u8>,
    /// Payload bytes of the current frame still to come.
    payload_left: usize,
    /// DATA payload bytes so far.
    data: u64,
}

impl DataBytes {
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let skipped = self.payload_left.min(bytes.len());
                self.payload_left -= skipped;
                bytes = &bytes[skipped..];
                continue;
            }
            let taken = (9 - self.header.len()).min(bytes.len());
            self.header.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
            if self.header.len() == 9 {
                let length =
                    u32::from_be_bytes([0, self.header[0], self.header[1], self.header[2]]);
                // Frame type 0 is DATA: its whole payload (padding included) counts against
                // the windows.
                if self.header[3] == 0 {
                    self.data += u64::from(length);
                }
                self.payload_left = length as usize;
                self.header.clear();
            }
        }
    }
}

/// A relay on 127.0.0.1 for one connection to `server`: it passes bytes both ways unchanged
/// and publishes how many DATA payload bytes the server has sent through it.
async fn relay(server: SocketAddr) -> (SocketAddr, watch::Receiver<u64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (sent, counted) = watch::channel(0u64);
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let upstream = tokio::net::TcpStream::connect(server).await.unwrap();
        let (mut from_client, mut to_client) = client.into_split();
        let (mut from_server, mut to_server) = upstream.into_split();
        let requests = async {
            let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
            let _ = to_server.shutdown().await;
        };
        let responses = async {
            let mut frames = DataBytes::default();
            let mut buffer = vec![0u8; 64 << 10];
            while let Ok(n @ 1..) = from_server.read(&mut buffer).await {
                frames.feed(&buffer[..n]);
                sent.send_replace(frames.data);
                if to_client.write_all(&buffer[..n]).await.is_err() {
                    break;
                }
            }
            let _ = to_client.shutdown().await;
        };
        tokio::join!(requests, responses);
    });
    (address, counted)
}

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

        // 600 streams opened and never read, each connection through a relay that counts what
        // the server sends on it.
        let mut stalled = Vec::new();
        let mut sent = Vec::new();
        for _ in 0..6 {
            let (address, counted) = relay(servers.flight.unwrap()).await;
            sent.push(counted);
            let channel = tonic::transport::Channel::from_shared(format!("http://{address}"))
                .unwrap()
                .connect_timeout(Duration::from_secs(5))
                .timeout(Duration::from_secs(60))
                .initial_stream_window_size(STALLED_STREAM_WINDOW)
                .initial_connection_window_size(STALLED_CONNECTION_WINDOW)
                .connect()
                .await
                .unwrap();
            let mut client = FlightClient::new(channel);
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
        // Every connection's window full: the server has sent all that flow control lets it
        // send, and each stream is stalled. (The streams of a connection hold far more than its
        // window.)
        let full = u64::from(STALLED_CONNECTION_WINDOW);
        for (c, counted) in sent.iter_mut().enumerate() {
            let waited = tokio::time::timeout(SETUP, counted.wait_for(|&bytes| bytes >= full));
            let filled = matches!(waited.await, Ok(Ok(_)));
            assert!(
                filled,
                "stalled connection {c}: the server sent {} of the {full} bytes its window \
                 allows within {SETUP:?}",
                *counted.borrow()
            );
        }

        answered_while(&servers, &whole, "600 streams stall").await;
        // Nothing more was sent to the stalled streams meanwhile: they stayed stalled.
        for (c, counted) in sent.iter().enumerate() {
            assert_eq!(*counted.borrow(), full, "stalled connection {c}");
        }
        drop(stalled);
    })
    .await
    .expect("the test finished within its time bound");
}

/// Producers that stop sending do not stall the server: 600 `DoPut` streams (over 6
/// connections) send their schema and a batch and then nothing, without ending; once the server
/// has taken those batches, reads of a finished output, over Flight and Presto's protocol, are
/// still answered within a few seconds. (A server that reads each `DoPut` stream on a blocking
/// thread held for the stream's life runs out of blocking threads here.) Then each producer
/// sends a second batch and ends, and the exchange gives every row.
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
        let servers = common::serve(exchanges.clone()).await;
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
        let Exchange::Live(live) = exchanges.get("live").unwrap() else {
            panic!("create made a live exchange");
        };

        // Each producer's messages: its schema and a first batch now, a second batch later.
        let batch = common::batch(10, 7);
        let messages: Vec<arrow_flight::FlightData> = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(FlightDescriptor::new_path(vec!["live".into()])))
            .build(futures::stream::iter([Ok(batch.clone())]))
            .try_collect()
            .await
            .unwrap();
        let (schema, batch_message) = (messages[0].clone(), messages[1].clone());
        // Producer i's batches go to destination i % 2.
        let tagged = |i: usize| {
            let mut message = batch_message.clone();
            message.app_metadata = (i % 2).to_string().into_bytes().into();
            message
        };
        let mut senders = Vec::new();
        let mut puts = Vec::new();
        for c in 0..6 {
            let channel = common::channel(&servers).await;
            for j in 0..PRODUCERS / 6 {
                let (mut tx, rx) = futures::channel::mpsc::channel::<arrow_flight::FlightData>(4);
                tx.send(schema.clone()).await.unwrap();
                tx.send(tagged(c * PRODUCERS / 6 + j)).await.unwrap();
                let mut flight =
                    arrow_flight::flight_service_client::FlightServiceClient::new(channel.clone());
                puts.push(tokio::spawn(async move { flight.do_put(rx).await }));
                senders.push(tx);
            }
        }
        // The server has taken all it was sent: every producer's first batch is in the
        // exchange, and each DoPut waits for more. The exchange's row counts have no signal to
        // wait on, so they are polled; the pause only paces the polling.
        let first_rows = (PRODUCERS * batch.num_rows()) as u64;
        let taken = || -> u64 { (0..2).map(|p| live.status(p).unwrap().rows).sum() };
        let started = Instant::now();
        while taken() < first_rows {
            assert!(
                started.elapsed() < SETUP,
                "the server took {} of the {first_rows} rows the producers sent within {SETUP:?}",
                taken()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        let mut fresh = answered_while(&servers, &whole, "600 producers are silent").await;

        // The producers go on: a second batch each, then the end of their streams.
        for (i, tx) in senders.iter_mut().enumerate() {
            tx.send(tagged(i)).await.unwrap();
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
        assert_eq!(rows, 2 * PRODUCERS * batch.num_rows());
    })
    .await
    .expect("the test finished within its time bound");
}

//! Clients that connect and never speak, and clients that flood the server with small
//! requests, do not keep correct requests from being answered; silent connections are closed
//! after the idle timeout. Loopback only, every step bounded in time.

mod common;

use common::{DESTINATIONS, ROWS, client, fetch, input, repartition};
use futures::StreamExt;
use partout_flight::presto::headers;
use partout_flight::{ConnectionLimits, Exchanges};
use partout_job::{Format, Layout};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const IDLE: Duration = Duration::from_secs(2);
/// Silent connections opened on each port.
const SILENT: usize = 300;

/// Whether the server has closed `stream` (a read ends or fails rather than waiting).
async fn closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // The server's own greeting (HTTP/2 settings): read on.
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_and_floods_leave_correct_requests_answered() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        input(dir.path());
        let ipc = repartition(dir.path(), Format::Ipc, Layout::Files);
        let exchanges = Exchanges::new();
        exchanges.add_directory("ipc", &ipc).unwrap();
        let limits = ConnectionLimits {
            idle_timeout: IDLE,
            ..ConnectionLimits::default()
        };
        let loopback = "127.0.0.1:0".parse().unwrap();
        let servers =
            partout_flight::serve::start_with(exchanges, Some(loopback), Some(loopback), limits)
                .await
                .unwrap();
        let (flight_addr, presto_addr) = (servers.flight.unwrap(), servers.presto.unwrap());
        let base = format!("http://{presto_addr}");

        // Hundreds of connections on each port that never send a byte.
        let mut silent = Vec::new();
        for _ in 0..SILENT {
            silent.push(TcpStream::connect(flight_addr).await.unwrap());
            silent.push(TcpStream::connect(presto_addr).await.unwrap());
        }
        let opened = Instant::now();

        // A flood of small requests the server refuses, alongside.
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let flood = {
            let http = http.clone();
            let base = base.clone();
            tokio::spawn(async move {
                futures::stream::iter(0..2000)
                    .map(|i| {
                        let http = http.clone();
                        let url = format!("{base}/v1/task/ipc/results/{i}/not-a-token");
                        async move { http.get(url).send().await.map(|r| r.status()) }
                    })
                    .buffer_unordered(64)
                    .collect::<Vec<_>>()
                    .await
            })
        };

        // Correct requests meanwhile: each answered within a second.
        let mut flight = client(&servers).await;
        for p in 0..DESTINATIONS {
            let started = Instant::now();
            let batches = fetch(&mut flight, "ipc", p, 0).await.unwrap();
            assert!(!batches.is_empty());
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "a Flight DoGet took {:?}",
                started.elapsed()
            );
            let started = Instant::now();
            let reply = http
                .get(format!("{base}/v1/task/ipc/results/{p}/0"))
                .header(headers::MAX_SIZE, "1MB")
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status(), reqwest::StatusCode::OK);
            assert!(!reply.bytes().await.unwrap().is_empty());
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "a Presto GET took {:?}",
                started.elapsed()
            );
        }
        // The whole input still arrives, once.
        let mut rows = 0;
        for p in 0..DESTINATIONS {
            rows += fetch(&mut flight, "ipc", p, 0)
                .await
                .unwrap()
                .iter()
                .map(|(_, b)| b.num_rows())
                .sum::<usize>();
        }
        assert_eq!(rows, ROWS);
        for status in flood.await.unwrap() {
            assert_eq!(status.unwrap(), reqwest::StatusCode::BAD_REQUEST);
        }

        // Past the idle timeout the silent connections are closed by the server.
        tokio::time::sleep(
            (opened + IDLE + Duration::from_millis(500)).saturating_duration_since(Instant::now()),
        )
        .await;
        let still_open = futures::future::join_all(silent.iter_mut().map(closed))
            .await
            .into_iter()
            .filter(|closed| !closed)
            .count();
        assert_eq!(
            still_open, 0,
            "silent connections left open past the timeout"
        );
    })
    .await
    .expect("the test finished within its time bound");
}

/// Requests past the limits and malformed ones get 4xx (or a gRPC error), read nothing
/// outside the served directories, and leave the server serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_malformed_requests_are_refused_and_the_server_goes_on() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        input(dir.path());
        let ipc = repartition(dir.path(), Format::Ipc, Layout::Files);
        // A file beside the served directory that no request may reach.
        std::fs::write(dir.path().join("secret"), b"not to be served").unwrap();
        let exchanges = Exchanges::new();
        exchanges.add_directory("ipc", &ipc).unwrap();
        let servers = common::serve(exchanges).await;
        let base = format!("http://{}", servers.presto.unwrap());
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();

        // Headers past 16 KiB: 431.
        let big = "x".repeat(20 << 10);
        let reply = http
            .get(format!("{base}/v1/task/ipc/results/0/0"))
            .header("x-padding", &big)
            .send()
            .await
            .unwrap();
        assert_eq!(
            reply.status(),
            reqwest::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        );

        // Tokens that are no sequence, traversal in names: 4xx, never the secret's bytes.
        for path in [
            "/v1/task/ipc/results/0/-1",
            "/v1/task/ipc/results/0/18446744073709551616",
            "/v1/task/ipc/results/0/0x10",
            "/v1/task/..%2Fsecret/results/0/0/acknowledge",
            "/v1/task/ipc%2F..%2F..%2Fsecret/results/0/0/acknowledge",
            "/v1/task/ipc/results/..%2F..%2Fsecret/0/acknowledge",
        ] {
            let reply = http.get(format!("{base}{path}")).send().await.unwrap();
            let status = reply.status();
            let body = reply.bytes().await.unwrap();
            assert!(status.is_client_error(), "{path}: {status}");
            assert!(
                !body.windows(16).any(|w| w == b"not to be served"),
                "{path}"
            );
        }

        // A 10 MB body where none is expected: refused, the connection's end is the server's.
        let reply = http
            .put(format!("{base}/v1/task/ipc/results/0/0"))
            .body(vec![b'z'; 10 << 20])
            .send()
            .await;
        if let Ok(reply) = reply {
            assert!(reply.status().is_client_error(), "{}", reply.status());
        }

        // Over Flight: metadata far past the header limit is an error, not a crash.
        let channel = common::channel(&servers).await;
        let mut flight = arrow_flight::flight_service_client::FlightServiceClient::new(channel);
        // A first call, so that the connection's settings are in force (HTTP/2 applies them
        // once the client acknowledges them).
        flight
            .list_flights(arrow_flight::Criteria::default())
            .await
            .unwrap();
        // (h2 counts a header list frame by frame: 64 KiB is past the limit however split.)
        let mut request = tonic::Request::new(arrow_flight::Criteria::default());
        request
            .metadata_mut()
            .insert("x-padding", "x".repeat(64 << 10).parse().unwrap());
        assert!(flight.list_flights(request).await.is_err());

        // And the server serves on, over both protocols.
        let mut flight = client(&servers).await;
        let rows: usize = fetch(&mut flight, "ipc", 0, 0)
            .await
            .unwrap()
            .iter()
            .map(|(_, b)| b.num_rows())
            .sum();
        assert!(rows > 0);
        let reply = http
            .get(format!("{base}/v1/task/ipc/results/0/0"))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), reqwest::StatusCode::OK);
    })
    .await
    .expect("the test finished within its time bound");
}

//! A finished `repartition` output served over Arrow Flight on 127.0.0.1, read back with
//! arrow-flight's own client: every destination's rows once, in their destination, in both
//! layouts; a consumer resuming from a sequence number gets exactly the rest; unknown
//! exchanges, destinations and tickets are clear Flight errors. Every call is bounded in time.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_flight::decode::DecodedPayload;
use arrow_flight::{FlightClient, FlightDescriptor, Ticket};
use futures::TryStreamExt;
use partout_core::ids::{PartitionIds, Partitioning};
use partout_flight::{DestinationTicket, OutputService};
use partout_job::{Format, Job, JobOptions, Layout};
use partout_testkit::{random_batch, rng};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const DESTINATIONS: u32 = 5;
const ROWS: usize = 20_000;

/// An input of `ROWS` rows (a key, a unique id, and columns of several types) written as an
/// Arrow IPC file; the batch itself.
fn input(dir: &Path) -> RecordBatch {
    use arrow_schema::DataType;
    let extra = random_batch(
        &[DataType::Utf8, DataType::Float64, DataType::Utf8View],
        ROWS,
        0.2,
        false,
        &mut rng(3),
    );
    let mut columns: Vec<(String, ArrayRef)> = vec![
        (
            "k".into(),
            Arc::new(Int64Array::from_iter_values(
                (0..ROWS as i64).map(|i| i * 7919 % 1009),
            )),
        ),
        (
            "id".into(),
            Arc::new(Int64Array::from_iter_values(0..ROWS as i64)),
        ),
    ];
    for (i, column) in extra.columns().iter().enumerate() {
        columns.push((format!("c{i}"), column.clone()));
    }
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let file = std::fs::File::create(dir.join("input.arrow")).unwrap();
    let mut writer = arrow_ipc::writer::FileWriter::try_new(file, &batch.schema()).unwrap();
    for start in (0..ROWS).step_by(3000) {
        writer
            .write(&batch.slice(start, 3000.min(ROWS - start)))
            .unwrap();
    }
    writer.finish().unwrap();
    batch
}

fn repartition(dir: &Path, layout: Layout) -> std::path::PathBuf {
    let out = dir.join(format!("out-{layout}"));
    let options = JobOptions::new([dir.join("input.arrow")], &out, DESTINATIONS)
        .with_keys(["k"])
        .with_format(Format::Ipc)
        .with_layout(layout)
        .with_threads(2);
    Job::try_new(options).unwrap().run(&()).unwrap();
    out
}

/// Serves `service` on a free port of 127.0.0.1; a client of it.
async fn serve(service: OutputService) -> FlightClient {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service.into_server())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    FlightClient::new(channel)
}

/// Destination `p`'s batches from `from` on, with the sequence numbers they came with.
async fn fetch(
    client: &mut FlightClient,
    exchange: &str,
    p: u32,
    from: u64,
) -> Result<Vec<(u64, RecordBatch)>, arrow_flight::error::FlightError> {
    let ticket = DestinationTicket {
        exchange: exchange.into(),
        destination: p,
        from_sequence: from,
    };
    let mut decoder = client.do_get(ticket.to_ticket()).await?.into_inner();
    let mut out = Vec::new();
    while let Some(data) = decoder.try_next().await? {
        if let DecodedPayload::RecordBatch(batch) = data.payload {
            let sequence = std::str::from_utf8(&data.inner.app_metadata)
                .unwrap()
                .parse()
                .unwrap();
            out.push((sequence, batch));
        }
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_outputs_give_every_row_once_in_its_destination_and_resume_exactly() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let batch = input(dir.path());
        let files = repartition(dir.path(), Layout::Files);
        let shuffle = repartition(dir.path(), Layout::Shuffle);
        let service = OutputService::new()
            .serve_directory("files", &files)
            .unwrap()
            .serve_directory("shuffle", &shuffle)
            .unwrap();
        assert!(
            OutputService::new()
                .serve_directory("x", dir.path())
                .is_err()
        );
        let mut client = serve(service).await;
        let mut ids =
            PartitionIds::try_new(Partitioning::hash(vec![0], DESTINATIONS), &batch.schema())
                .unwrap();
        for exchange in ["files", "shuffle"] {
            let mut seen = BTreeSet::new();
            for p in 0..DESTINATIONS {
                let got = fetch(&mut client, exchange, p, 0).await.unwrap();
                let sequences: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
                assert_eq!(sequences, (0..got.len() as u64).collect::<Vec<_>>());
                let info = client
                    .get_flight_info(FlightDescriptor::new_path(vec![
                        exchange.into(),
                        p.to_string(),
                    ]))
                    .await
                    .unwrap();
                let rows: usize = got.iter().map(|(_, b)| b.num_rows()).sum();
                assert_eq!(info.total_records, rows as i64, "{exchange} {p}");
                for (_, b) in &got {
                    assert_eq!(b.schema(), batch.schema());
                    let mut dest = Vec::new();
                    ids.compute(b, &mut dest).unwrap();
                    assert!(
                        dest.iter().all(|&d| d == p),
                        "{exchange}: a row out of destination {p}"
                    );
                    for id in b.column(1).as_primitive::<Int64Type>().values() {
                        assert!(seen.insert(*id), "{exchange}: row {id} twice");
                    }
                }
                // Resuming after the first batch gives exactly the rest.
                if got.len() > 1 {
                    let rest = fetch(&mut client, exchange, p, 1).await.unwrap();
                    assert_eq!(rest.len(), got.len() - 1);
                    for ((s1, b1), (s2, b2)) in rest.iter().zip(&got[1..]) {
                        assert_eq!((s1, b1), (s2, b2));
                    }
                }
                let past = fetch(&mut client, exchange, p, got.len() as u64 + 5)
                    .await
                    .unwrap();
                assert!(past.is_empty());
            }
            assert_eq!(seen.len(), ROWS, "{exchange}: rows lost");
        }
        let listed: Vec<_> = client
            .list_flights(bytes::Bytes::new())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(listed.len(), 2 * DESTINATIONS as usize);
        assert_eq!(
            listed.iter().map(|i| i.total_records).sum::<i64>(),
            2 * ROWS as i64
        );
        // Clear errors.
        let err = fetch(&mut client, "nope", 0, 0)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("no exchange") && err.contains("nope"), "{err}");
        let err = fetch(&mut client, "files", DESTINATIONS, 0)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("no destination 5"), "{err}");
        let err = client
            .do_get(Ticket::new("not json"))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("a ticket is JSON"), "{err}");
    })
    .await
    .expect("the test finished within its time bound");
}

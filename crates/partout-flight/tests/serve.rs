//! A finished `repartition` output served over Arrow Flight on 127.0.0.1, read back with
//! arrow-flight's own client: every destination's rows once, in their destination, in both
//! layouts; a consumer resuming from a sequence number gets exactly the rest; unknown
//! exchanges, destinations and tickets are clear Flight errors. Every call is bounded in time.

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_flight::{FlightDescriptor, Ticket};
use common::{DESTINATIONS, ROWS, fetch, input, repartition};
use futures::TryStreamExt;
use partout_core::ids::{PartitionIds, Partitioning};
use partout_flight::Exchanges;
use partout_job::{Format, Layout};
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_outputs_give_every_row_once_in_its_destination_and_resume_exactly() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let batch = input(dir.path());
        let files = repartition(dir.path(), Format::Ipc, Layout::Files);
        let shuffle = repartition(dir.path(), Format::Ipc, Layout::Shuffle);
        let exchanges = Exchanges::new();
        exchanges.add_directory("files", &files).unwrap();
        exchanges.add_directory("shuffle", &shuffle).unwrap();
        let err = exchanges.add_directory("x", dir.path()).unwrap_err();
        assert!(err.to_string().contains("not found"), "{err}");
        let err = exchanges.add_directory("files", &files).unwrap_err();
        assert!(err.to_string().contains("served already"), "{err}");
        let servers = common::serve(exchanges).await;
        let mut client = common::client(&servers).await;
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
                let at_end = fetch(&mut client, exchange, p, got.len() as u64)
                    .await
                    .unwrap();
                assert!(at_end.is_empty());
                let err = fetch(&mut client, exchange, p, got.len() as u64 + 5)
                    .await
                    .unwrap_err()
                    .to_string();
                assert!(err.contains("past the destination's last batch"), "{err}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_output_files_give_errors_not_streams() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        input(dir.path());
        let exchanges = Exchanges::new();
        let mut damaged = Vec::new();
        for (format, layout) in [
            (Format::Ipc, Layout::Shuffle),
            (Format::Ipc, Layout::Files),
            (Format::Presto, Layout::Shuffle),
        ] {
            let out = repartition(dir.path(), format, layout);
            // Every output file's bytes after the first 4 kB (the first stream's schema, which
            // serving reads first) replaced by others of the same length (the index still fits
            // the data): headers, lengths and bodies are garbage.
            for entry in std::fs::read_dir(&out).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if name.ends_with(".index") || name.starts_with('_') {
                    continue;
                }
                let mut bytes = std::fs::read(&path).unwrap();
                let mut state = 0x9e37_79b9_u32;
                for b in bytes.iter_mut().skip(4096) {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    *b = state as u8;
                }
                std::fs::write(&path, bytes).unwrap();
            }
            let name = format!("{format}-{layout}");
            if let Err(e) = exchanges.add_directory(&name, &out) {
                // The first stream's schema damaged too: refused at once, naming the file.
                assert!(e.to_string().contains(&*out.to_string_lossy()), "{e}");
                continue;
            }
            damaged.push((name, format));
        }
        let servers = common::serve(exchanges).await;
        let mut client = common::client(&servers).await;
        let http = reqwest::Client::new();
        let base = format!("http://{}", servers.presto.unwrap());
        for (name, format) in damaged {
            for p in 0..DESTINATIONS {
                if format == Format::Ipc {
                    // Damaged headers are the server's error; damaged bodies, the decoder's.
                    let err = fetch(&mut client, &name, p, 0)
                        .await
                        .unwrap_err()
                        .to_string();
                    assert!(
                        err.contains("unreadable output") || err.contains("rror decoding"),
                        "{name} {p}: {err}"
                    );
                }
                let (status, text) =
                    presto_get(&http, format!("{base}/v1/task/{name}/results/{p}/0")).await;
                // Presto pages are checked (header and checksum) before they are served; an
                // IPC body's damage shows when it is converted to pages.
                assert_eq!(status, 500, "{name} {p}: {text}");
                assert!(
                    text.contains("unreadable output") || text.contains("rror decoding"),
                    "{name} {p}: {text}"
                );
            }
        }
    })
    .await
    .expect("the test finished within its time bound");
}

/// A Presto GET of `url`, bounded in time: its status and body as text.
async fn presto_get(http: &reqwest::Client, url: String) -> (reqwest::StatusCode, String) {
    let reply = http
        .get(url)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    let status = reply.status();
    (status, reply.text().await.unwrap())
}

/// An IPC schema message whose schema has no list of fields (arrow-ipc's conversion panics
/// on it), framed as a stream's first message.
fn schema_message_without_fields() -> Vec<u8> {
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let schema = arrow_ipc::SchemaBuilder::new(&mut fbb).finish();
    let mut message = arrow_ipc::MessageBuilder::new(&mut fbb);
    message.add_version(arrow_ipc::MetadataVersion::V5);
    message.add_header_type(arrow_ipc::MessageHeader::Schema);
    message.add_header(schema.as_union_value());
    message.add_bodyLength(0);
    let message = message.finish();
    fbb.finish(message, None);
    let mut header = fbb.finished_data().to_vec();
    header.resize(header.len().next_multiple_of(8), 0);
    let mut framed = u32::MAX.to_le_bytes().to_vec();
    framed.extend_from_slice(&(header.len() as u32).to_le_bytes());
    framed.extend_from_slice(&header);
    framed
}

/// A destination file whose schema message has no fields, served over Flight and over
/// Presto's protocol: each consumer of it gets an error naming the damage, and the server
/// goes on serving the other destinations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_without_fields_is_an_error_and_the_server_goes_on() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        input(dir.path());
        let out = repartition(dir.path(), Format::Ipc, Layout::Files);
        let mut files: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                !name.starts_with('_') && !name.ends_with(".index")
            })
            .collect();
        files.sort();
        assert_eq!(files.len(), DESTINATIONS as usize, "{files:?}");
        // The last destination's schema message replaced (serving reads the first's first).
        let damaged = files.last().unwrap();
        let bytes = std::fs::read(damaged).unwrap();
        assert_eq!(
            bytes[..4],
            u32::MAX.to_le_bytes(),
            "a stream's first message"
        );
        let first = 8 + u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
        let mut changed = schema_message_without_fields();
        changed.extend_from_slice(&bytes[first..]);
        std::fs::write(damaged, changed).unwrap();
        let exchanges = Exchanges::new();
        exchanges.add_directory("out", &out).unwrap();
        let servers = common::serve(exchanges).await;
        let mut client = common::client(&servers).await;
        let http = reqwest::Client::new();
        let base = format!("http://{}", servers.presto.unwrap());
        let last = DESTINATIONS - 1;
        for round in 0..2 {
            let err = fetch(&mut client, "out", last, 0)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains("no fields"), "round {round}, Flight: {err}");
            let (status, text) =
                presto_get(&http, format!("{base}/v1/task/out/results/{last}/0")).await;
            assert_eq!(status, 500, "round {round}, Presto: {text}");
            assert!(text.contains("no fields"), "round {round}, Presto: {text}");
            // The others are still served, in full.
            for p in 0..last {
                let batches = fetch(&mut client, "out", p, 0).await.unwrap();
                assert!(!batches.is_empty(), "round {round}: destination {p}");
            }
        }
    })
    .await
    .expect("the test finished within its time bound");
}

/// An output file whose record batch claims a buffer past its body (arrow-ipc's reader panics
/// on that): served over Presto's protocol, which decodes it to make pages, it is refused by
/// the IPC check, named, before anything decodes it; the other destinations are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffer_past_its_body_is_refused_before_decoding() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        input(dir.path());
        let out = repartition(dir.path(), Format::Ipc, Layout::Files);
        let manifest = partout_job::Manifest::read(&out).unwrap();
        let path = out.join(
            manifest.destinations[0]
                .only_file()
                .map(|f| f.name.as_str())
                .unwrap(),
        );
        let mut bytes = std::fs::read(&path).unwrap();
        // The first record batch message: its second buffer made a petabyte long.
        let mut at = 0;
        loop {
            assert_eq!(bytes[at..at + 4], [0xff; 4]);
            let len = i32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
            let header = at + 8;
            let message = arrow_ipc::root_as_message(&bytes[header..header + len]).unwrap();
            if let Some(batch) = message.header_as_record_batch() {
                let buffer = batch.buffers().unwrap().get(1);
                let field = (buffer as *const arrow_ipc::Buffer as usize) - bytes.as_ptr() as usize;
                bytes[field + 8..field + 16].copy_from_slice(&(1i64 << 50).to_le_bytes());
                break;
            }
            at = header + len + message.bodyLength() as usize;
        }
        std::fs::write(&path, bytes).unwrap();
        let exchanges = Exchanges::new();
        exchanges.add_directory("ipc", &out).unwrap();
        let servers = common::serve(exchanges).await;
        let http = reqwest::Client::new();
        let base = format!("http://{}", servers.presto.unwrap());
        let (status, text) = presto_get(&http, format!("{base}/v1/task/ipc/results/0/0")).await;
        assert_eq!(status, 500, "{text}");
        assert!(
            text.contains("unreadable output") && text.contains("outside a body"),
            "{text}"
        );
        for p in 1..DESTINATIONS {
            let (status, text) =
                presto_get(&http, format!("{base}/v1/task/ipc/results/{p}/0")).await;
            assert_eq!(status, 200, "{p}: {text}");
        }
    })
    .await
    .expect("the test finished within its time bound");
}

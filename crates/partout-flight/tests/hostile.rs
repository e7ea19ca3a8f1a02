//! Producers sending crafted bytes: each IPC stream the fuzzers found panicking arrow-ipc's
//! reader (kept in partout-format's and partout-input's test data), sent as a `DoPut` message by
//! message. Each producer gets an error naming what is wrong, its exchange fails for its
//! consumers with that error, and the server goes on: a new exchange is then fed and read
//! in full. On 127.0.0.1, every call bounded in time.

mod common;

#[path = "../../../fuzz/src/flight.rs"]
#[allow(dead_code, missing_docs)]
mod checks;

use arrow_flight::{Action, FlightData, FlightDescriptor};
use futures::TryStreamExt;
use partout_flight::Exchanges;
use std::time::Duration;

/// The messages of an IPC stream as Flight messages (header and body, split as the
/// `flight_put` fuzz target splits them), the first carrying `descriptor`, each batch's
/// `app_metadata` destination 0.
fn flight_messages(stream: &[u8], descriptor: FlightDescriptor) -> Vec<FlightData> {
    let framed = checks::ipc_stream_to_messages(stream);
    let mut messages: Vec<FlightData> = checks::split_messages(&framed)
        .into_iter()
        .map(|(header, body)| FlightData {
            data_header: header.to_vec().into(),
            data_body: body.to_vec().into(),
            app_metadata: b"0".to_vec().into(),
            ..FlightData::default()
        })
        .collect();
    if let Some(first) = messages.first_mut() {
        first.flight_descriptor = Some(descriptor);
    }
    messages
}

async fn create(client: &mut arrow_flight::FlightClient, name: &str) {
    let body = format!(r#"{{"exchange": "{name}", "partitions": 2, "producers": 1}}"#);
    client
        .do_action(Action::new("create", body))
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crafted_producer_streams_fail_their_exchange_and_the_server_goes_on() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let format = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../partout-format/tests/data/ipc_panics"
        );
        let io = concat!(env!("CARGO_MANIFEST_DIR"), "/../partout-input/tests/data");
        let cases = [
            (
                format!("{format}/field_type_none.arrows"),
                "unknown type NONE",
            ),
            (
                format!("{format}/schema_without_fields.arrows"),
                "schema: no fields",
            ),
            (
                format!("{format}/null_bits_shorter_than_rows.arrows"),
                "bytes of null bits",
            ),
            (
                format!("{format}/offsets_not_whole_i32s.arrows"),
                "for values of 4 bytes",
            ),
            (
                format!("{io}/dictionary-batch-without-data.arrows"),
                "a dictionary batch without data",
            ),
            (format!("{io}/buffer-past-body.arrows"), "outside a body of"),
        ];
        let servers = common::serve(Exchanges::new()).await;
        let mut client = common::client(&servers).await;
        for (i, (path, want)) in cases.iter().enumerate() {
            let name = format!("crafted{i}");
            create(&mut client, &name).await;
            let stream = std::fs::read(path).unwrap();
            let messages = flight_messages(&stream, FlightDescriptor::new_path(vec![name.clone()]));
            assert!(!messages.is_empty(), "{path}");
            let put = client
                .do_put(futures::stream::iter(messages.into_iter().map(Ok)))
                .await;
            let err = match put {
                Err(e) => e.to_string(),
                Ok(results) => results
                    .try_collect::<Vec<_>>()
                    .await
                    .expect_err("a crafted stream refused")
                    .to_string(),
            };
            assert!(err.contains(want), "{path}: {err}");
            // Its consumers get the failure, not a short stream.
            let read = common::fetch(&mut client, &name, 0, 0).await;
            let failed = read.expect_err("the exchange failed").to_string();
            assert!(failed.contains("failed"), "{path}: {failed}");
        }
        // The server goes on: a new exchange fed and read in full.
        create(&mut client, "after").await;
        let batch = common::batch(1000, 7);
        let data = arrow_flight::encode::FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(FlightDescriptor::new_path(vec!["after".into()])))
            .build(futures::stream::iter([Ok(batch.clone())]))
            .map_ok(|mut data| {
                if !data.data_body.is_empty() {
                    data.app_metadata = b"1".to_vec().into();
                }
                data
            });
        let data: Vec<FlightData> = data.try_collect().await.unwrap();
        client
            .do_put(futures::stream::iter(data.into_iter().map(Ok)))
            .await
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap();
        let got = common::fetch(&mut client, "after", 1, 0).await.unwrap();
        let rows: usize = got.iter().map(|(_, b)| b.num_rows()).sum();
        assert_eq!(rows, 1000);
        assert_eq!(got[0].1, batch);
    })
    .await
    .expect("the test finished within its time bound");
}

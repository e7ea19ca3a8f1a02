//! The server's limits on what clients make through Flight's `create` action, on 127.0.0.1,
//! every call bounded in time: partition counts the kernels refuse, budgets past the server's
//! memory limit and more exchanges than it serves are refused with a clear error before
//! anything is allocated; `drop` gives the memory back; names that could become paths, and
//! names of a megabyte, are refused without being echoed whole.

mod common;

use arrow_flight::error::FlightError;
use arrow_flight::{Action, FlightClient};
use futures::TryStreamExt;
use partout_flight::{DESTINATION_BYTES, Exchanges, Limits};
use std::time::Duration;

/// Runs action `kind` with `body`; the error's message if it fails.
async fn action(client: &mut FlightClient, kind: &str, body: String) -> Result<(), String> {
    let run = async {
        client
            .do_action(Action::new(kind.to_string(), body))
            .await?
            .try_collect::<Vec<_>>()
            .await
            .map(drop)
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the action answered within its time bound")
        .map_err(|e: FlightError| e.to_string())
}

fn create(name: &str, partitions: u64, budget: usize) -> String {
    format!(
        r#"{{"exchange": "{name}", "partitions": {partitions}, "producers": 1, "budget_bytes": {budget}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_past_the_limits_are_refused_and_drop_gives_the_memory_back() {
    const MIB: usize = 1 << 20;
    let limits = Limits {
        max_exchanges: 100,
        memory_limit: 64 * MIB,
    };
    let exchanges = Exchanges::with_limits(limits);
    let servers = common::serve(exchanges.clone()).await;
    let mut client = common::client(&servers).await;

    // Partition counts the kernels refuse: nothing made.
    for partitions in [0, (1 << 20) + 1, u64::from(u32::MAX)] {
        let err = action(&mut client, "create", create("big", partitions, MIB))
            .await
            .unwrap_err();
        assert!(
            err.contains("invalid argument: the partition count"),
            "{partitions}: {err}"
        );
    }
    assert_eq!(exchanges.charged_bytes(), 0);

    // A budget past the server's memory: refused, nothing charged.
    let err = action(&mut client, "create", create("big", 4, 65 * MIB))
        .await
        .unwrap_err();
    assert!(err.contains("past the server's limits"), "{err}");
    assert_eq!(exchanges.charged_bytes(), 0);

    // Half the memory each: the third is refused until one is dropped.
    let each = 30 * MIB;
    action(&mut client, "create", create("a", 1000, each))
        .await
        .unwrap();
    action(&mut client, "create", create("b", 1000, each))
        .await
        .unwrap();
    let charged = 2 * (each + 1000 * DESTINATION_BYTES);
    assert_eq!(exchanges.charged_bytes(), charged);
    let err = action(&mut client, "create", create("c", 1000, each))
        .await
        .unwrap_err();
    assert!(err.contains("past the server's limits"), "{err}");
    let body = r#"{"exchange": "a"}"#.to_string();
    action(&mut client, "drop", body.clone()).await.unwrap();
    assert_eq!(exchanges.charged_bytes(), charged / 2);
    action(&mut client, "create", create("c", 1000, each))
        .await
        .unwrap();
    // A dropped exchange is gone: dropping it again is NOT_FOUND.
    let err = action(&mut client, "drop", body).await.unwrap_err();
    assert!(err.contains("not found: no exchange"), "{err}");
    for name in ["b", "c"] {
        action(&mut client, "drop", format!(r#"{{"exchange": "{name}"}}"#))
            .await
            .unwrap();
    }
    assert_eq!(exchanges.charged_bytes(), 0);

    // Many small creates: the 101st is refused, and each drop makes room for one more.
    for i in 0..100 {
        action(&mut client, "create", create(&format!("x{i}"), 2, 1024))
            .await
            .unwrap();
    }
    let err = action(&mut client, "create", create("x100", 2, 1024))
        .await
        .unwrap_err();
    assert!(
        err.contains("past the server's limits: 100 exchanges"),
        "{err}"
    );
    action(&mut client, "drop", r#"{"exchange": "x7"}"#.to_string())
        .await
        .unwrap();
    action(&mut client, "create", create("x100", 2, 1024))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_could_be_paths_or_megabytes_are_refused_briefly() {
    let servers = common::serve(Exchanges::new()).await;
    let mut client = common::client(&servers).await;
    let long = "n".repeat(1 << 20);
    for name in [".", "..", "a/b", "..%2F", "", long.as_str()] {
        let err = action(&mut client, "create", create(name, 2, 1024))
            .await
            .unwrap_err();
        assert!(
            err.contains("invalid argument: an exchange name"),
            "{name:.20}: {err:.200}"
        );
        assert!(
            err.len() < 1000,
            "{name:.20}: the error echoes {} bytes",
            err.len()
        );
    }
    // Reading one that is not there: the name is not echoed whole either.
    let err = action(&mut client, "drop", format!(r#"{{"exchange": "{long}"}}"#))
        .await
        .unwrap_err();
    assert!(
        err.contains("not found: no exchange") && err.len() < 1000,
        "{err:.200}"
    );
}

/// An exchange made with `drop_when_done` is dropped by itself once its producer finished
/// and its consumers acknowledged every batch: its memory is given back, its name is free
/// again, and the reads under way ended complete. One made without it stays until `drop`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exchange_asked_to_drop_when_done_goes_once_read_and_acknowledged() {
    use arrow_flight::encode::FlightDataEncoderBuilder;
    use arrow_flight::{FlightDescriptor, PutResult};
    tokio::time::timeout(Duration::from_secs(60), async {
        let exchanges = Exchanges::new();
        let servers = common::serve(exchanges.clone()).await;
        let mut client = common::client(&servers).await;
        for (name, drop_when_done) in [("kept", false), ("dropped", true)] {
            let body = format!(
                r#"{{"exchange": "{name}", "partitions": 2, "producers": 1, "drop_when_done": {drop_when_done}}}"#
            );
            action(&mut client, "create", body).await.unwrap();
            let charged = exchanges.charged_bytes();
            assert!(charged > 0);
            // One producer: a batch for each destination.
            let batches = [(common::batch(100, 1), 0), (common::batch(50, 2), 1)];
            let messages: Vec<_> = FlightDataEncoderBuilder::new()
                .with_flight_descriptor(Some(FlightDescriptor::new_path(vec![name.into()])))
                .build(futures::stream::iter(
                    batches
                        .iter()
                        .map(|(b, _)| Ok(b.clone()))
                        .collect::<Vec<_>>(),
                ))
                .try_collect()
                .await
                .unwrap();
            let tagged: Vec<_> = messages
                .into_iter()
                .enumerate()
                .map(|(i, mut m)| {
                    if i > 0 {
                        m.app_metadata = batches[i - 1].1.to_string().into_bytes().into();
                    }
                    Ok(m)
                })
                .collect();
            let put: Vec<PutResult> = client
                .do_put(futures::stream::iter(tagged))
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            assert_eq!(put.len(), 1);
            // Destination 0 read with acknowledgements: the exchange is still needed.
            let read = common::fetch(&mut client, name, 0, 0).await.unwrap();
            assert_eq!(read.len(), 1);
            let ack = format!(r#"{{"exchange": "{name}", "destination": 0, "from_sequence": 1}}"#);
            action(&mut client, "ack", ack).await.unwrap();
            assert!(exchanges.get(name).is_ok());
            // Destination 1 read and acknowledged: the last batch.
            let read = common::fetch(&mut client, name, 1, 0).await.unwrap();
            assert_eq!(read[0].1.num_rows(), 50);
            let ack = format!(r#"{{"exchange": "{name}", "destination": 1, "from_sequence": 1}}"#);
            action(&mut client, "ack", ack).await.unwrap();
            if drop_when_done {
                assert!(exchanges.get(name).is_err(), "{name} is dropped");
                assert_eq!(exchanges.charged_bytes(), 0, "its memory given back");
            } else {
                assert!(exchanges.get(name).is_ok(), "{name} stays");
                action(&mut client, "drop", format!(r#"{{"exchange": "{name}"}}"#))
                    .await
                    .unwrap();
                assert_eq!(exchanges.charged_bytes(), 0);
            }
        }
    })
    .await
    .expect("the test finished within its time bound");
}

//! Presto's worker exchange protocol over HTTP on 127.0.0.1, spoken as Presto's exchange client
//! speaks it: tokens, the four headers on every reply, the same pages for a repeated token,
//! acknowledgements, long polls, DELETE and HEAD; finished outputs (Presto pages, and Arrow IPC
//! converted) and a live exchange. Every request is bounded in time.

mod common;

use arrow_array::RecordBatch;
use common::{DESTINATIONS, ROWS, batch, input, repartition, serve};
use partout_core::ids::Partitioning;
use partout_exchange::WriterOptions;
use partout_flight::presto::headers;
use partout_flight::{Exchanges, Limits, LiveExchange, LiveOptions};
use partout_format::Encoding;
use partout_format::presto::decode_pages;
use partout_job::{Format, Layout};
use reqwest::StatusCode;
use std::time::Duration;

/// One reply: status, the protocol's headers, the body.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    token: u64,
    next: u64,
    complete: bool,
    instance: String,
    body: Vec<u8>,
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

async fn get(base: &str, path: &str, max_size: &str, max_wait: &str) -> Reply {
    let response = http()
        .get(format!("{base}{path}"))
        .header(headers::MAX_SIZE, max_size)
        .header(headers::MAX_WAIT, max_wait)
        .send()
        .await
        .unwrap();
    let status = response.status();
    if status != StatusCode::OK && status != StatusCode::NO_CONTENT {
        // An error: its reason in the body, none of the protocol's headers needed.
        let body = response.bytes().await.unwrap().to_vec();
        return Reply {
            status,
            token: 0,
            next: 0,
            complete: false,
            instance: String::new(),
            body,
        };
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .unwrap_or_else(|| panic!("{path}: no {name} on a {status} reply"))
            .to_str()
            .unwrap()
            .to_string()
    };
    let token = header(headers::PAGE_SEQUENCE_ID).parse().unwrap();
    let next = header(headers::PAGE_END_SEQUENCE_ID).parse().unwrap();
    let complete = header(headers::BUFFER_COMPLETE).parse().unwrap();
    let instance = header(headers::TASK_INSTANCE_ID);
    let length = (status == StatusCode::OK).then(|| {
        assert!(
            header("content-type").eq_ignore_ascii_case("application/x-presto-pages"),
            "content type"
        );
        header("content-length").parse::<usize>().unwrap()
    });
    let body = response.bytes().await.unwrap().to_vec();
    assert_eq!(length.unwrap_or(0), body.len());
    Reply {
        status,
        token,
        next,
        complete,
        instance,
        body,
    }
}

/// Pages in `bytes`, back to back.
fn page_count(bytes: &[u8]) -> u64 {
    let (mut at, mut count) = (0, 0);
    while at < bytes.len() {
        let size = i32::from_le_bytes(bytes[at + 9..at + 13].try_into().unwrap()) as usize;
        at += 21 + size;
        count += 1;
    }
    assert_eq!(at, bytes.len(), "whole pages");
    count
}

/// Every page of `exchange`'s buffer `p`, pulled as Presto's client does (a GET at each next
/// token, each page asked twice to check the retry); the instance id seen.
async fn pull(base: &str, exchange: &str, p: u32, max_size: &str) -> (Vec<u8>, String) {
    let mut token = 0;
    let mut pages = Vec::new();
    let mut instance = None::<String>;
    loop {
        let path = format!("/v1/task/{exchange}/results/{p}/{token}");
        let reply = get(base, &path, max_size, "1s").await;
        assert!(
            reply.status == StatusCode::OK || reply.status == StatusCode::NO_CONTENT,
            "{path}: {} {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.token, token);
        assert_eq!(
            instance.get_or_insert(reply.instance.clone()),
            &reply.instance
        );
        let reply = if reply.status == StatusCode::OK {
            let count = page_count(&reply.body);
            assert!(count >= 1);
            assert_eq!(reply.next, token + count);
            // The same token again, as after a lost reply: the same pages from the token on
            // (more of them if more arrived meanwhile on a live exchange).
            let again = get(base, &path, max_size, "1s").await;
            assert_eq!(again.next, token + page_count(&again.body));
            assert!(
                again.body.starts_with(&reply.body),
                "{path}: a retry gave other pages"
            );
            pages.extend_from_slice(&again.body);
            again
        } else {
            assert_eq!(reply.next, token);
            reply
        };
        token = reply.next;
        if reply.complete {
            break;
        }
    }
    // Past the end: 204, complete.
    let end = get(
        base,
        &format!("/v1/task/{exchange}/results/{p}/{token}"),
        max_size,
        "1s",
    )
    .await;
    assert_eq!((end.status, end.complete), (StatusCode::NO_CONTENT, true));
    (pages, instance.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_outputs_are_pulled_page_by_page_as_presto_does() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let batch = input(dir.path());
        let exchanges = Exchanges::new();
        let mut outputs = Vec::new();
        for layout in [Layout::Files, Layout::Shuffle] {
            let out = repartition(dir.path(), Format::Presto, layout);
            let name = format!("pages-{layout}");
            exchanges.add_directory(&name, &out).unwrap();
            outputs.push((name, out));
        }
        let ipc = repartition(dir.path(), Format::Ipc, Layout::Shuffle);
        exchanges.add_directory("ipc", &ipc).unwrap();
        let servers = serve(exchanges).await;
        let base = format!("http://{}", servers.presto.unwrap());
        let mut instances = std::collections::BTreeSet::new();
        for (name, out) in &outputs {
            let mut rows = 0;
            for p in 0..DESTINATIONS {
                let (pages, instance) = pull(&base, name, p, "64kB").await;
                instances.insert(instance);
                // The pages are the destination's bytes as written.
                let written = match name.ends_with("files") {
                    true => file_bytes(out, p),
                    false => shuffle_bytes(out, p),
                };
                assert!(
                    pages == written,
                    "{name} destination {p}: {} bytes pulled, {} written",
                    pages.len(),
                    written.len()
                );
                assert!(!pages.is_empty());
                rows += decode_pages(&pages, &batch.schema())
                    .unwrap()
                    .iter()
                    .map(RecordBatch::num_rows)
                    .sum::<usize>();
            }
            assert_eq!(rows, ROWS, "{name}");
        }
        // An Arrow IPC output, served as pages: the same rows as its IPC streams.
        for p in 0..DESTINATIONS {
            let (pages, instance) = pull(&base, "ipc", p, "1MB").await;
            instances.insert(instance);
            let from_pages = decode_pages(&pages, &batch.schema()).unwrap();
            let stream = shuffle_bytes(&ipc, p);
            let (_, from_ipc) = partout_format::ipc::decode_stream(&stream).unwrap();
            let concat = |b: &[RecordBatch]| {
                arrow_select::concat::concat_batches(&batch.schema(), b).unwrap()
            };
            assert_eq!(
                concat(&from_pages),
                concat(&from_ipc),
                "ipc destination {p}"
            );
        }
        assert_eq!(instances.len(), 1, "one task instance id");

        // Acknowledged pages are gone: asking for them again is an error, not other pages.
        // (DELETE first: the consumer above read this buffer to its end.)
        let path = "/v1/task/pages-files/results/0";
        let delete = http().delete(format!("{base}{path}")).send().await.unwrap();
        assert!(delete.status().is_success());
        let first = get(&base, &format!("{path}/0"), "1B", "0s").await;
        assert_eq!(first.next, 1);
        let ack = http()
            .get(format!("{base}{path}/1/acknowledge"))
            .send()
            .await
            .unwrap();
        assert!(ack.status().is_success());
        let head = http().head(format!("{base}{path}/1")).send().await.unwrap();
        assert_eq!(head.status(), StatusCode::OK);
        assert!(head.headers().contains_key(headers::BUFFER_REMAINING_BYTES));
        let gone = get(&base, &format!("{path}/0"), "1MB", "0s").await;
        assert_eq!(gone.status, StatusCode::GONE);
        assert!(
            String::from_utf8_lossy(&gone.body).contains("acknowledged"),
            "{gone:?}"
        );
        let delete = http().delete(format!("{base}{path}")).send().await.unwrap();
        assert!(delete.status().is_success());

        // A task not served (yet): 204, not complete, with every header.
        let unknown = get(&base, "/v1/task/later/results/0/0", "1MB", "10ms").await;
        assert_eq!(
            (unknown.status, unknown.complete, unknown.next),
            (StatusCode::NO_CONTENT, false, 0)
        );
        // A buffer the exchange does not have, or a token that is not a number: errors
        // naming the problem.
        let missing = get(&base, "/v1/task/ipc/results/9/0", "1MB", "0s").await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert!(String::from_utf8_lossy(&missing.body).contains("no destination 9"));
        let bad = get(&base, "/v1/task/ipc/results/0/x", "1MB", "0s").await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&bad.body).contains("token \"x\""));
    })
    .await
    .expect("the test finished within its time bound");
}

/// Destination `p`'s file in files-layout output `out` (none: no bytes).
fn file_bytes(out: &std::path::Path, p: u32) -> Vec<u8> {
    let manifest = partout_job::Manifest::read(out).unwrap();
    match manifest.destinations[p as usize]
        .only_file()
        .map(|f| f.name.as_str())
    {
        Some(name) => std::fs::read(out.join(name)).unwrap(),
        None => Vec::new(),
    }
}

/// Destination `p`'s bytes in shuffle output `out` (every worker's ranges).
fn shuffle_bytes(out: &std::path::Path, p: u32) -> Vec<u8> {
    let manifest = partout_job::Manifest::read(out).unwrap();
    let mut bytes = Vec::new();
    // Each worker's ranges of `p`, cut from its data file as its index gives them.
    for files in manifest.shuffle_files.iter().flatten() {
        let data = std::fs::read(out.join(&files.data)).unwrap();
        let (_, ranges) =
            partout_output::read_shuffle_index(&out.join(&files.index), data.len() as u64).unwrap();
        for range in ranges.iter().filter(|r| r.destination == p) {
            bytes.extend_from_slice(&data[range.offset as usize..][..range.len as usize]);
        }
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_exchange_is_pulled_with_long_polls_and_a_failure_is_an_error() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let options = LiveOptions::new(3, 1)
            .with_budget(256 << 10)
            .with_encoding(Encoding::presto(true));
        let live = LiveExchange::try_new(None, options).unwrap();
        let failing = LiveExchange::try_new(None, LiveOptions::new(2, 1)).unwrap();
        let exchanges = Exchanges::new();
        exchanges.add_live("live", live.clone()).unwrap();
        exchanges.add_live("failing", failing.clone()).unwrap();
        let servers = serve(exchanges).await;
        let base = format!("http://{}", servers.presto.unwrap());

        // Nothing produced yet: the request waits, then 204, not complete.
        let started = std::time::Instant::now();
        let waited = get(&base, "/v1/task/live/results/0/0", "1MB", "200ms").await;
        assert_eq!(
            (waited.status, waited.complete),
            (StatusCode::NO_CONTENT, false)
        );
        assert!(started.elapsed() >= Duration::from_millis(150));

        let inputs: Vec<RecordBatch> = (0..20).map(|i| batch(1_000, 200 + i)).collect();
        let schema = inputs[0].schema();
        let producer = {
            let live = live.clone();
            let inputs = inputs.clone();
            std::thread::spawn(move || {
                let mut writer = live
                    .writer(
                        inputs[0].schema(),
                        Partitioning::hash(vec![0], 3),
                        WriterOptions::default().with_target_bytes(16 << 10),
                    )
                    .unwrap();
                for batch in &inputs {
                    writer.append(batch).unwrap();
                }
                writer.finish_output().unwrap();
            })
        };
        let consumers: Vec<_> = (0..3)
            .map(|p| {
                let base = base.clone();
                tokio::spawn(async move { pull(&base, "live", p, "32kB").await.0 })
            })
            .collect();
        let mut rows = 0;
        for consumer in consumers {
            let pages = consumer.await.unwrap();
            rows += decode_pages(&pages, &schema)
                .unwrap()
                .iter()
                .map(RecordBatch::num_rows)
                .sum::<usize>();
        }
        tokio::task::spawn_blocking(move || producer.join().unwrap())
            .await
            .unwrap();
        assert_eq!(rows, 20_000);
        assert!(live.peak_buffered_bytes() <= 256 << 10);

        // A producer that fails: the consumer's request is answered with the reason.
        let waiting = {
            let base = base.clone();
            tokio::spawn(
                async move { get(&base, "/v1/task/failing/results/1/0", "1MB", "10s").await },
            )
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        failing
            .producer()
            .unwrap()
            .fail("the input file was truncated");
        let reply = waiting.await.unwrap();
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
        let text = String::from_utf8_lossy(&reply.body);
        assert!(text.contains("the input file was truncated"), "{text}");
    })
    .await
    .expect("the test finished within its time bound");
}

/// A Presto-pages output (files layout) of the test input in a new directory, served as
/// "pages": the directory and the servers (keep them), and the Presto server's base URL.
async fn serve_pages() -> (tempfile::TempDir, partout_flight::serve::Servers, String) {
    let dir = tempfile::tempdir().unwrap();
    let (servers, base) = serve_pages_in(dir.path()).await;
    (dir, servers, base)
}

/// Runs `test`, failing it past 120 s.
async fn within_bound(test: impl std::future::Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(120), test)
        .await
        .expect("the test finished within its time bound");
}

/// The same for the test input in `dir` (its output made once).
async fn serve_pages_in(dir: &std::path::Path) -> (partout_flight::serve::Servers, String) {
    let out = dir.join(format!("out-{}-{}", Format::Presto, Layout::Files));
    if !out.exists() {
        input(dir);
        repartition(dir, Format::Presto, Layout::Files);
    }
    let exchanges = Exchanges::new();
    exchanges.add_directory("pages", &out).unwrap();
    let servers = serve(exchanges).await;
    let base = format!("http://{}", servers.presto.unwrap());
    (servers, base)
}

/// A bare GET (no protocol header wanted): status and body.
async fn get_status(client: &reqwest::Client, url: &str) -> (StatusCode, String) {
    let response = client.get(url).send().await.unwrap();
    let status = response.status();
    (status, response.text().await.unwrap())
}

/// Tokens the server refuses (past the end, not numbers) change nothing: token 0 still gives
/// what a fresh server gives, on a destination read before and on one never read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_changes_nothing_on_a_finished_output() {
    within_bound(async {
        let (dir, _servers, base) = serve_pages().await;
        // What a fresh server gives for token 0.
        let (_fresh_servers, fresh) = serve_pages_in(dir.path()).await;
        let expected = get(&fresh, "/v1/task/pages/results/0/0", "1B", "1s").await;
        assert_eq!(expected.status, StatusCode::OK);
        assert_eq!(expected.next, 1);

        // A consumer reads the first page (its reply lost, say), then asks refused tokens.
        let first = get(&base, "/v1/task/pages/results/0/0", "1B", "1s").await;
        assert_eq!((first.status, first.next), (StatusCode::OK, 1));
        assert_eq!(first.body, expected.body);
        for token in ["18446744073709551615", "2", "x", "-1", "1e3"] {
            let path = format!("/v1/task/pages/results/0/{token}");
            let refused = get(&base, &path, "1B", "0s").await;
            assert_eq!(
                refused.status,
                StatusCode::BAD_REQUEST,
                "{path}: {}",
                String::from_utf8_lossy(&refused.body)
            );
            // Nothing was acknowledged: token 0 is still there, with the same pages.
            let again = get(&base, "/v1/task/pages/results/0/0", "1B", "1s").await;
            assert_eq!(
                again.status,
                StatusCode::OK,
                "after {path}: {}",
                String::from_utf8_lossy(&again.body)
            );
            assert_eq!((again.token, again.next), (0, 1), "after {path}");
            assert!(again.body == expected.body, "after {path}: other bytes");
        }
        // A refused token on a destination never read: it still starts at its first page.
        let refused = get(
            &base,
            "/v1/task/pages/results/1/18446744073709551615",
            "1B",
            "0s",
        )
        .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        let fresh_1 = get(&fresh, "/v1/task/pages/results/1/0", "64kB", "1s").await;
        let read_1 = get(&base, "/v1/task/pages/results/1/0", "64kB", "1s").await;
        assert_eq!((read_1.status, read_1.next), (StatusCode::OK, fresh_1.next));
        assert!(read_1.body == fresh_1.body);
    })
    .await;
}

/// Fetches and acknowledgements of destinations out of range are 404 naming the count, and
/// 10,000 of them leave every real destination as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_out_of_range_are_not_found_and_keep_no_state() {
    use futures::StreamExt;
    within_bound(async {
        let (dir, _servers, base) = serve_pages().await;
        let client = http();
        // The real destination 0, read part way before.
        let before = get(&base, "/v1/task/pages/results/0/0", "64kB", "1s").await;
        assert_eq!(before.status, StatusCode::OK);

        // One of each: 404, naming how many destinations there are.
        for path in [
            format!("/v1/task/pages/results/{DESTINATIONS}/0/acknowledge"),
            format!("/v1/task/pages/results/{DESTINATIONS}/7/acknowledge"),
            "/v1/task/pages/results/4294967295/0/acknowledge".to_string(),
            format!("/v1/task/pages/results/{DESTINATIONS}/0"),
            "/v1/task/pages/results/4294967295/3".to_string(),
        ] {
            let (status, text) = get_status(&client, &format!("{base}{path}")).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {text}");
            assert!(
                text.contains(&format!("of {DESTINATIONS} destinations")),
                "{path}: {text}"
            );
            assert!(text.len() < 200, "{path}: a short message: {text}");
        }
        let delete = client
            .delete(format!("{base}/v1/task/pages/results/{DESTINATIONS}"))
            .send()
            .await
            .unwrap();
        assert_eq!(delete.status(), StatusCode::NOT_FOUND);

        // Many of them, acknowledgements and fetches, each for another destination.
        let statuses: Vec<(String, StatusCode, String)> = futures::stream::iter(0..10_000u32)
            .map(|i| {
                let client = client.clone();
                let p = DESTINATIONS + i / 2;
                let path = match i % 2 {
                    0 => format!("/v1/task/pages/results/{p}/{i}/acknowledge"),
                    _ => format!("/v1/task/pages/results/{p}/{i}"),
                };
                let url = format!("{base}{path}");
                async move {
                    let (status, text) = get_status(&client, &url).await;
                    (path, status, text)
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        for (path, status, text) in &statuses {
            assert_eq!(*status, StatusCode::NOT_FOUND, "{path}: {text}");
        }

        // The real destinations are as they were: destination 0 from token 0 gives the
        // same pages, and every destination reads whole.
        let after = get(&base, "/v1/task/pages/results/0/0", "64kB", "1s").await;
        assert_eq!((after.status, after.next), (StatusCode::OK, before.next));
        assert!(after.body == before.body);
        let out = dir
            .path()
            .join(format!("out-{}-{}", Format::Presto, Layout::Files));
        for p in 0..DESTINATIONS {
            let (pages, _) = pull(&base, "pages", p, "64kB").await;
            assert!(pages == file_bytes(&out, p), "destination {p}");
        }
    })
    .await;
}

/// An acknowledgement past the pages sent is 400 and frees nothing; one within them frees
/// the pages before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_past_the_pages_sent_is_refused_and_frees_nothing() {
    within_bound(async {
        let (dir, _servers, base) = serve_pages().await;
        let client = http();
        let ack =
            |p: u32, token: &str| format!("{base}/v1/task/pages/results/{p}/{token}/acknowledge");

        // A destination not read yet: no page was sent, so none can be acknowledged.
        let (status, text) = get_status(&client, &ack(0, "5")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        let (status, text) = get_status(&client, &ack(0, "0")).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{text}");

        // One page sent: acknowledging past it is refused, and the page stays readable.
        let first = get(&base, "/v1/task/pages/results/0/0", "1B", "1s").await;
        assert_eq!((first.status, first.next), (StatusCode::OK, 1));
        for token in ["1000", "18446744073709551615", "2"] {
            let (status, text) = get_status(&client, &ack(0, token)).await;
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "acknowledge {token}: {text}"
            );
            let again = get(&base, "/v1/task/pages/results/0/0", "1B", "1s").await;
            assert_eq!(
                (again.status, again.next),
                (StatusCode::OK, 1),
                "after acknowledging {token}: {}",
                String::from_utf8_lossy(&again.body)
            );
            assert!(again.body == first.body, "after acknowledging {token}");
        }
        // A token not a number: refused too.
        let (status, _) = get_status(&client, &ack(0, "x")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);

        // Acknowledging the page sent frees it, as before.
        let (status, text) = get_status(&client, &ack(0, "1")).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
        let gone = get(&base, "/v1/task/pages/results/0/0", "1B", "0s").await;
        assert_eq!(gone.status, StatusCode::GONE);
        // The rest from token 1 on: with the first page, the destination's bytes as written.
        let mut pages = first.body.clone();
        let mut token = 1;
        loop {
            let path = format!("/v1/task/pages/results/0/{token}");
            let reply = get(&base, &path, "64kB", "1s").await;
            assert!(
                reply.status == StatusCode::OK || reply.status == StatusCode::NO_CONTENT,
                "{path}: {} {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
            );
            assert_eq!(reply.token, token);
            pages.extend_from_slice(&reply.body);
            token = reply.next;
            if reply.complete {
                break;
            }
        }
        let out = dir
            .path()
            .join(format!("out-{}-{}", Format::Presto, Layout::Files));
        assert!(pages == file_bytes(&out, 0), "destination 0 read whole");
    })
    .await;
}

/// Errors quote client input of 5,000 characters cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_messages_cut_long_client_input() {
    within_bound(async {
        let (_dir, _servers, base) = serve_pages().await;
        let client = http();
        let long = "y".repeat(5_000);
        for path in [
            format!("/v1/task/pages/results/0/{long}"),
            format!("/v1/task/pages/results/0/{long}/acknowledge"),
            format!("/v1/task/pages/results/{long}/0"),
            format!("/v1/task/{long}/results/0/0/acknowledge"),
        ] {
            let (status, text) = get_status(&client, &format!("{base}{path}")).await;
            assert!(status.is_client_error(), "{status}");
            assert!(
                text.len() < 400,
                "{status}: a message of {} bytes",
                text.len()
            );
            assert!(text.contains("yyyy"), "the input's start is named: {text}");
        }
        let delete = client
            .delete(format!("{base}/v1/task/{long}/results/0"))
            .send()
            .await
            .unwrap();
        assert!(delete.status().is_client_error());
        assert!(delete.text().await.unwrap().len() < 400);
    })
    .await;
}

/// Replies nobody acknowledges are held within the server's memory limit: 200 GETs asking
/// for a petabyte each hold at most the limit and a page per destination, the rest are
/// told to retry (503); dropping the exchange gives it all back; and a consumer that
/// acknowledges as it goes still reads every page, in order, within the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_replies_stay_within_the_servers_memory_limit() {
    use futures::StreamExt;
    within_bound(async {
        let dir = tempfile::tempdir().unwrap();
        input(dir.path());
        // Written within a small budget: many small pages per destination.
        let out = dir.path().join("out");
        let options =
            partout_job::JobOptions::new([dir.path().join("input.arrow")], &out, DESTINATIONS)
                .with_keys(["k"])
                .with_format(Format::Presto)
                .with_threads(1)
                .with_memory_limit(1 << 20);
        partout_job::Job::try_new(options)
            .unwrap()
            .run(&())
            .unwrap();
        let files: Vec<Vec<u8>> = (0..DESTINATIONS).map(|p| file_bytes(&out, p)).collect();
        let total: usize = files.iter().map(Vec::len).sum();
        let sizes: Vec<usize> = files.iter().flat_map(|bytes| page_sizes(bytes)).collect();
        let largest_page = *sizes.iter().max().unwrap();
        // Several pages a destination, so that what is read ahead shows against the bound.
        assert!(
            sizes.len() >= 4 * DESTINATIONS as usize,
            "{} pages",
            sizes.len()
        );
        // A quarter of the output: reading it all ahead of acknowledgements cannot fit.
        let limit = total / 4;
        let exchanges = Exchanges::with_limits(Limits {
            max_exchanges: 4,
            memory_limit: limit,
        });
        exchanges.add_directory("pages", &out).unwrap();
        let servers = serve(exchanges.clone()).await;
        let base = format!("http://{}", servers.presto.unwrap());

        let client = http();
        let replies: Vec<(StatusCode, usize)> = futures::stream::iter(0..200u32)
            .map(|i| {
                let client = client.clone();
                let url = format!("{base}/v1/task/pages/results/{}/0", i % DESTINATIONS);
                async move {
                    let response = client
                        .get(url)
                        .header(headers::MAX_SIZE, "1PB")
                        .send()
                        .await
                        .unwrap();
                    let status = response.status();
                    (status, response.bytes().await.unwrap().len())
                }
            })
            .buffer_unordered(50)
            .collect()
            .await;
        let held = exchanges.charged_bytes();
        let bound = limit + DESTINATIONS as usize * largest_page;
        assert!(
            held > 0 && held <= bound,
            "{held} bytes held, bound {bound}"
        );
        for (status, len) in &replies {
            match *status {
                StatusCode::OK => assert!(*len <= bound, "a reply of {len} bytes"),
                StatusCode::SERVICE_UNAVAILABLE => {}
                other => panic!("{other}"),
            }
        }
        assert!(
            replies.iter().any(|r| r.0 == StatusCode::OK),
            "some replies were served"
        );

        // Dropping the exchange frees its replies' pages.
        exchanges.remove("pages").unwrap();
        assert_eq!(exchanges.charged_bytes(), 0);

        // Served again: a consumer acknowledging as it goes reads every destination whole.
        exchanges.add_directory("pages", &out).unwrap();
        for (p, expected) in files.iter().enumerate() {
            let (pages, _) = pull(&base, "pages", p as u32, "1PB").await;
            assert!(pages == *expected, "destination {p}: other bytes");
            assert!(exchanges.charged_bytes() <= bound);
        }
    })
    .await;
}

/// The size of each Presto page in `bytes`, back to back.
fn page_sizes(bytes: &[u8]) -> Vec<usize> {
    let (mut at, mut sizes) = (0, Vec::new());
    while at < bytes.len() {
        let size = i32::from_le_bytes(bytes[at + 9..at + 13].try_into().unwrap()) as usize;
        sizes.push(21 + size);
        at += 21 + size;
    }
    sizes
}

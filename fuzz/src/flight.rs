//! The checks of the network targets (`flight_put`, `flight_requests`): what a client hands
//! `partout serve`. Not part of `lib.rs` (partout-output's corpus test includes that file, and
//! these need partout-flight): the targets and partout-flight's `fuzz_corpus` test include
//! this file by `#[path]`.
//!
//! Errors are fine; panics, hangs and huge allocations are findings.

use arrow_array::{Array, RecordBatch};
use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{Action, FlightData, Ticket};
use futures::{StreamExt, stream};
use partout_flight::{ExchangeService, Exchanges, Limits};
use partout_format::ipc::MessageCheck;

/// The `flight_put` framing: messages one after the other, each a little-endian `u32` header
/// length, the header (an Arrow IPC `Message` flatbuffer, Flight's `data_header`), a `u32`
/// body length and the body (`data_body`). A message cut short ends the sequence (what is
/// left is dropped).
pub fn split_messages(data: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut messages = Vec::new();
    let mut rest = data;
    fn take<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
        let (len, after) = rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let part = after.get(..len)?;
        *rest = &after[len..];
        Some(part)
    }
    while let Some(header) = take(&mut rest) {
        let Some(body) = take(&mut rest) else { break };
        messages.push((header, body));
    }
    messages
}

/// Messages in the `flight_put` framing ([`split_messages`]).
pub fn join_messages<'a>(messages: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (header, body) in messages {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(header);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(body);
    }
    out
}

/// A producer's `DoPut` stream, as `partout serve` reads it (`do_put` in partout-flight's
/// `flight.rs`): every message with a header goes through [`MessageCheck::check`] before
/// arrow-flight's `FlightDataDecoder` sees it (a message refused ends the stream with an error,
/// as the server's does); every batch decoded is validated (`validate_full`, as the server's
/// `valid`). The messages are [`split_messages`] of the input, each batch's `app_metadata`
/// destination 0. The rows of the valid batches decoded, or the first error.
pub fn flight_put(data: &[u8]) -> Result<usize, String> {
    let messages: Vec<Result<FlightData, FlightError>> = split_messages(data)
        .into_iter()
        .map(|(header, body)| {
            Ok(FlightData {
                data_header: header.to_vec().into(),
                data_body: body.to_vec().into(),
                app_metadata: b"0".to_vec().into(),
                ..FlightData::default()
            })
        })
        .collect();
    let mut check = MessageCheck::new();
    let checked = stream::iter(messages).map(move |r| {
        let data = r?;
        if !data.data_header.is_empty() {
            check
                .check(&data.data_header, &data.data_body)
                .map_err(|e| FlightError::ProtocolError(e.to_string()))?;
        }
        Ok(data)
    });
    let mut decoder = FlightDataDecoder::new(checked);
    futures::executor::block_on(async {
        let mut rows = 0;
        while let Some(decoded) = decoder.next().await {
            let decoded = decoded.map_err(|e| e.to_string())?;
            if let DecodedPayload::RecordBatch(batch) = decoded.payload {
                valid(&batch).map_err(|e| e.to_string())?;
                rows += batch.num_rows();
            }
        }
        Ok(rows)
    })
}

/// Every column valid Arrow data, as the server requires of a producer's batch.
fn valid(batch: &RecordBatch) -> Result<(), arrow_schema::ArrowError> {
    for column in batch.columns() {
        column.to_data().validate_full()?;
    }
    Ok(())
}

/// The most memory a `create` may charge in [`flight_requests`]: small, so that a body asking
/// for a million destinations is refused before they are allocated (a server's default is
/// 4 GiB, which a fuzzer's allocation limit would stop at, by design not a finding).
const REQUESTS_MEMORY: usize = 64 << 20;

/// The bytes as everything a Flight client names an exchange with, through the public
/// [`FlightService`] of an [`ExchangeService`] (its own exchanges, limited to
/// [`REQUESTS_MEMORY`]), in this order: the body of a `create` action (`CreateRequest` as JSON
/// and its options check), of an `ack` (a `DestinationTicket`), a `DoGet` ticket (the
/// response's stream is not read), the body of `cancel`, then of `drop`. A body that is valid
/// for one action is often valid for the next (unknown fields are ignored), so a `create`
/// that succeeds has its exchange acknowledged, read, cancelled and dropped. Then an action
/// named by the bytes. Each on a current-thread Tokio runtime of its own (a DoGet of a live
/// exchange spawns a task; the runtime's end drops it).
pub fn flight_requests(data: &[u8]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let service = ExchangeService::new(Exchanges::with_limits(Limits {
        max_exchanges: 4,
        memory_limit: REQUESTS_MEMORY,
    }));
    let action = |kind: &str, body: &[u8]| Action {
        r#type: kind.into(),
        body: body.to_vec().into(),
    };
    runtime.block_on(async {
        let _ = service
            .do_action(tonic::Request::new(action("create", data)))
            .await;
        let _ = service
            .do_action(tonic::Request::new(action("ack", data)))
            .await;
        let ticket = Ticket {
            ticket: data.to_vec().into(),
        };
        drop(service.do_get(tonic::Request::new(ticket)).await);
        for kind in ["cancel", "drop"] {
            let _ = service
                .do_action(tonic::Request::new(action(kind, data)))
                .await;
        }
        // An action's type is a client's string too: the first line names it, the rest is
        // its body.
        let (kind, body) = match data.iter().position(|&b| b == b'\n') {
            Some(at) => (&data[..at], &data[at + 1..]),
            None => (data, &[][..]),
        };
        let kind = String::from_utf8_lossy(kind);
        let _ = service
            .do_action(tonic::Request::new(action(&kind, body)))
            .await;
    });
}

/// Seeds for `flight_put`: valid streams of several types (a dictionary column, nested
/// types, decimals, booleans; uncompressed and LZ4 / Zstandard), each in the framing of
/// [`split_messages`], by name.
pub fn flight_put_seeds() -> Vec<(String, Vec<u8>)> {
    use arrow_array::builder::{Int64Builder, ListBuilder};
    use arrow_array::types::Int32Type;
    use arrow_array::{
        BooleanArray, Decimal128Array, DictionaryArray, Int64Array, StringArray, StructArray,
    };
    use arrow_ipc::CompressionType;
    use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteOptions};
    use arrow_schema::{DataType, Field};
    use std::sync::Arc;

    let batch = |rows: i64| -> RecordBatch {
        let ints = Int64Array::from_iter((0..rows).map(|i| (i % 3 != 0).then_some(i * 7)));
        let strings =
            StringArray::from_iter((0..rows).map(|i| (i % 4 != 1).then(|| i.to_string())));
        let dictionary: DictionaryArray<Int32Type> = (0..rows)
            .map(|i| ["red", "green", "blue"][i as usize % 3])
            .collect();
        let mut list = ListBuilder::new(Int64Builder::new());
        for i in 0..rows {
            for j in 0..i % 3 {
                list.values().append_value(j);
            }
            list.append(i % 5 != 2);
        }
        let list = list.finish();
        let decimals = Decimal128Array::from_iter((0..rows).map(|i| Some(i128::from(i) * 101)))
            .with_precision_and_scale(20, 2)
            .expect("a decimal type");
        let booleans = BooleanArray::from_iter((0..rows).map(|i| Some(i % 2 == 0)));
        let row = StructArray::from(vec![
            (
                Arc::new(Field::new("a", DataType::Int64, true)),
                Arc::new(ints.clone()) as _,
            ),
            (
                Arc::new(Field::new("b", DataType::Utf8, true)),
                Arc::new(strings.clone()) as _,
            ),
        ]);
        RecordBatch::try_from_iter([
            ("ints", Arc::new(ints) as _),
            ("strings", Arc::new(strings) as _),
            ("dictionary", Arc::new(dictionary) as _),
            ("list", Arc::new(list) as _),
            ("decimals", Arc::new(decimals) as _),
            ("booleans", Arc::new(booleans) as _),
            ("row", Arc::new(row) as _),
        ])
        .expect("a batch")
    };
    let stream = |batches: &[RecordBatch], compression: Option<CompressionType>| -> Vec<u8> {
        let options = IpcWriteOptions::default()
            .try_with_compression(compression)
            .expect("IPC options");
        let generator = IpcDataGenerator::default();
        let mut tracker = DictionaryTracker::new(false);
        let mut encoded = vec![generator.schema_to_bytes_with_dictionary_tracker(
            batches[0].schema_ref(),
            &mut tracker,
            &options,
        )];
        for batch in batches {
            #[allow(deprecated)]
            let (dictionaries, batch) = generator
                .encoded_batch(batch, &mut tracker, &options)
                .expect("an encoded batch");
            encoded.extend(dictionaries);
            encoded.push(batch);
        }
        join_messages(
            encoded
                .iter()
                .map(|e| (e.ipc_message.as_slice(), e.arrow_data.as_slice())),
        )
    };
    let one_column = |name: &str| {
        let b = batch(5);
        let i = b.schema().index_of(name).expect("a column");
        b.project(&[i]).expect("a projection")
    };
    let mut seeds = vec![
        (
            "seed-all-types".to_string(),
            stream(&[batch(6), batch(3)], None),
        ),
        ("seed-empty-batch".to_string(), stream(&[batch(0)], None)),
        (
            "seed-lz4".to_string(),
            stream(&[batch(9)], Some(CompressionType::LZ4_FRAME)),
        ),
        (
            "seed-zstd".to_string(),
            stream(&[batch(9)], Some(CompressionType::ZSTD)),
        ),
    ];
    for name in [
        "ints",
        "strings",
        "dictionary",
        "list",
        "decimals",
        "booleans",
        "row",
    ] {
        seeds.push((format!("seed-{name}"), stream(&[one_column(name)], None)));
    }
    seeds
}

/// An Arrow IPC stream (or file, after its 8-byte magic) as `flight_put` messages: each
/// message's header and its body as the header's `bodyLength` says, cut to what is there
/// (crafted lengths lie), as partout-flight's `hostile` test sends them.
pub fn ipc_stream_to_messages(stream: &[u8]) -> Vec<u8> {
    let stream = stream.strip_prefix(b"ARROW1\0\0").unwrap_or(stream);
    let mut messages = Vec::new();
    let mut pos = 0;
    while pos + 8 <= stream.len() {
        let mut len = u32::from_le_bytes(stream[pos..pos + 4].try_into().expect("4 bytes"));
        pos += 4;
        if len == u32::MAX {
            len = u32::from_le_bytes(stream[pos..pos + 4].try_into().expect("4 bytes"));
            pos += 4;
        }
        let len = len as usize;
        if len == 0 || pos + len > stream.len() {
            break;
        }
        let header = &stream[pos..pos + len];
        pos += len;
        let body_len = arrow_ipc::root_as_message(header)
            .map(|m| usize::try_from(m.bodyLength()).unwrap_or(0))
            .unwrap_or(0)
            .min(stream.len() - pos);
        messages.push((header, &stream[pos..pos + body_len]));
        pos += body_len;
    }
    join_messages(messages)
}

/// Seeds for `flight_requests`: tickets and action bodies, valid and nearly.
pub fn flight_requests_seeds() -> Vec<(String, Vec<u8>)> {
    [
        (
            "seed-create",
            r#"{"exchange": "x", "partitions": 2, "producers": 1}"#,
        ),
        (
            "seed-create-all",
            r#"{"exchange": "x", "partitions": 3, "producers": 2, "budget_bytes": 65536, "format": "presto", "compression": "none", "destination": 1, "from_sequence": 2, "auto_ack": true}"#,
        ),
        (
            "seed-create-ipc-zstd",
            r#"{"exchange": "y", "partitions": 1, "producers": 1, "format": "ipc", "compression": "zstd", "destination": 0}"#,
        ),
        (
            "seed-ticket",
            r#"{"exchange": "x", "destination": 0, "from_sequence": 0}"#,
        ),
        (
            "seed-ticket-auto-ack",
            r#"{"exchange": "x", "destination": 1, "from_sequence": 5, "auto_ack": true}"#,
        ),
        ("seed-cancel", r#"{"exchange": "x"}"#),
        (
            "seed-action-line",
            "create\n{\"exchange\": \"z\", \"partitions\": 1048576, \"producers\": 1}",
        ),
        ("seed-unknown-action", "shutdown\n{}"),
    ]
    .into_iter()
    .map(|(name, body)| (name.to_string(), body.as_bytes().to_vec()))
    .collect()
}

/// The routes [`presto_paths`] asks, picked by the input's first byte (low two bits).
const PRESTO_ROUTES: [(&str, &str); 4] = [
    ("GET", ""),
    ("HEAD", ""),
    ("GET", "/acknowledge"),
    ("DELETE", ""),
];

/// The batch [`presto_exchanges`] holds and its messages as a fresh producer of each exchange
/// encodes them (`Producer::push_batch`: a new `MessageEncoder` of the exchange's encoding, the
/// batch encoded in turn), made once per process: encoding them (arrow-ipc's schema and batch
/// encoders, three times) was half of what an input cost, and the bytes are the same every
/// time. Messages share their bytes (`Bytes`), which nothing changes; each input's exchanges,
/// queues and router are still new.
struct PrestoMessages {
    schema: arrow_schema::SchemaRef,
    /// Two Presto pages of the batch (`done`'s destination 0).
    done: [partout_format::Message; 2],
    /// The batch as Arrow IPC (`open`'s destination 1).
    open: partout_format::Message,
}

fn presto_messages() -> &'static PrestoMessages {
    use arrow_array::{Int64Array, StringArray};
    use partout_flight::LiveOptions;
    use partout_format::MessageEncoder;
    use std::sync::{Arc, OnceLock};

    static MESSAGES: OnceLock<PrestoMessages> = OnceLock::new();
    MESSAGES.get_or_init(|| {
        let batch = RecordBatch::try_from_iter([
            (
                "a",
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])) as _,
            ),
            ("b", Arc::new(StringArray::from(vec!["x", "yy", ""])) as _),
        ])
        .expect("a batch");
        let mut done =
            MessageEncoder::try_new(batch.schema(), partout_format::Encoding::presto(false))
                .expect("an encoder");
        let done = [
            done.encode(&batch).expect("a page"),
            done.encode(&batch).expect("a page"),
        ];
        let open = MessageEncoder::try_new(batch.schema(), LiveOptions::new(2, 1).encoding)
            .expect("an encoder")
            .encode(&batch)
            .expect("a message");
        PrestoMessages {
            schema: batch.schema(),
            done,
            open,
        }
    })
}

/// The exchanges [`presto_paths`] asks, new for each input: `done`, a live exchange of Presto
/// pages, three destinations (two batches in 0, none in 1 and 2), its producer finished;
/// `open`, a live exchange of Arrow IPC batches (converted to pages when asked), two
/// destinations (one batch in 1), its producer still sending (returned: it is held while the
/// request runs). The producers push the batch's messages ([`presto_messages`]) as
/// `push_batch` would: the exchange's schema set by the producer, then each message.
fn presto_exchanges() -> (partout_flight::Exchanges, partout_flight::Producer) {
    use partout_flight::{LiveExchange, LiveOptions};

    let messages = presto_messages();
    let exchanges = Exchanges::new();
    let done = LiveExchange::try_new(
        None,
        LiveOptions::new(3, 1).with_encoding(partout_format::Encoding::presto(false)),
    )
    .expect("an exchange");
    let producer = done.producer().expect("a producer");
    producer
        .set_schema(messages.schema.clone())
        .expect("the schema");
    for message in &messages.done {
        producer.push(0, message.clone()).expect("a batch pushed");
    }
    producer.finish();
    exchanges.add_live("done", done).expect("added");
    let open = LiveExchange::try_new(None, LiveOptions::new(2, 1)).expect("an exchange");
    let producer = open.producer().expect("a producer");
    producer
        .set_schema(messages.schema.clone())
        .expect("the schema");
    producer
        .push(1, messages.open.clone())
        .expect("a batch pushed");
    exchanges.add_live("open", open).expect("added");
    (exchanges, producer)
}

/// `text` percent-encoded but for the characters a path segment takes as they are.
fn percent_encoded(text: &[u8]) -> String {
    let mut out = String::new();
    for &b in text {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The bytes as a Presto exchange client's request, through partout-flight's
/// [`router`](partout_flight::presto::router) over [`presto_exchanges`]: the first byte picks
/// the route ([`PRESTO_ROUTES`], low two bits) and whether the path's segments go raw (bit 2,
/// when they make a URI) or percent-encoded (so that any bytes reach the handlers); the rest,
/// split at `\n`, is the task (exchange), the buffer (destination), the token, and the values
/// of `X-Presto-Max-Size` and `X-Presto-Max-Wait`. A max-wait is sent only when it is at most
/// a millisecond (`parse_duration`, itself given the value): a server waits up to 30 s for
/// pages, the default 1 s. The answer must not be a server error (5xx): none of these
/// exchanges failed. On a current-thread Tokio runtime made once.
pub fn presto_paths(data: &[u8]) {
    use axum::body::Body;
    use axum::http::{HeaderValue, Request};
    use partout_flight::presto::{headers, parse_data_size, parse_duration, router};
    use std::sync::OnceLock;
    use std::time::Duration;
    use tonic::codegen::Service;

    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime")
    });
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.split(|&b| b == b'\n');
    let mut part = |default: &'static [u8]| parts.next().unwrap_or(default);
    let (task, buffer, token) = (part(b"done"), part(b"0"), part(b"0"));
    let (max_size, max_wait) = (part(b""), part(b""));
    let (method, suffix) = PRESTO_ROUTES[usize::from(pick & 3)];
    let segment = |s: &[u8]| {
        if pick & 4 != 0 {
            String::from_utf8_lossy(s).into_owned()
        } else {
            percent_encoded(s)
        }
    };
    let path = if method == "DELETE" {
        format!("/v1/task/{}/results/{}", segment(task), segment(buffer))
    } else {
        format!(
            "/v1/task/{}/results/{}/{}{suffix}",
            segment(task),
            segment(buffer),
            segment(token)
        )
    };
    let Ok(mut request) = Request::builder()
        .method(method)
        .uri(&path)
        .body(Body::empty())
    else {
        return;
    };
    if let Ok(value) = HeaderValue::from_bytes(max_size) {
        if let Ok(text) = value.to_str() {
            let _ = parse_data_size(text);
        }
        request.headers_mut().insert(headers::MAX_SIZE, value);
    }
    let short_wait = HeaderValue::from_bytes(max_wait)
        .ok()
        .filter(|v| {
            v.to_str()
                .ok()
                .and_then(parse_duration)
                .is_some_and(|d| d <= Duration::from_millis(1))
        })
        .unwrap_or(HeaderValue::from_static("0ms"));
    request.headers_mut().insert(headers::MAX_WAIT, short_wait);
    let (exchanges, producer) = presto_exchanges();
    let mut service = router(exchanges);
    let (status, body) = runtime.block_on(async {
        futures::future::poll_fn(|cx| {
            <axum::Router as Service<Request<Body>>>::poll_ready(&mut service, cx)
        })
        .await
        .expect("a router is always ready");
        let response = service.call(request).await.expect("a router never fails");
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await;
        (status, body)
    });
    drop(producer);
    assert!(
        !status.is_server_error(),
        "{method} {path}: {status} {:?}",
        body.map(|b| String::from_utf8_lossy(&b).into_owned())
    );
}

/// Seeds for `presto_paths`: requests of every route, valid and nearly.
pub fn presto_paths_seeds() -> Vec<(String, Vec<u8>)> {
    let seeds: [(&str, u8, &str); 10] = [
        ("seed-get-done", 0, "done\n0\n0"),
        ("seed-get-done-1", 0, "done\n0\n1\n1kB\n1ms"),
        ("seed-get-done-empty", 0, "done\n1\n0"),
        ("seed-get-open", 0, "open\n1\n0\n16MB\n0.5ms"),
        ("seed-get-missing", 0, "nothere\n0\n0"),
        ("seed-get-raw", 4, "done\n2\n0"),
        ("seed-head-done", 1, "done\n0\n0"),
        ("seed-ack-done", 2, "done\n0\n2"),
        ("seed-delete-open", 3, "open\n1"),
        (
            "seed-get-bad",
            0,
            "done\n7\n18446744073709551616\n1e400PB\n-1s",
        ),
    ];
    seeds
        .into_iter()
        .map(|(name, pick, rest)| {
            let mut bytes = vec![pick];
            bytes.extend_from_slice(rest.as_bytes());
            (name.to_string(), bytes)
        })
        .collect()
}

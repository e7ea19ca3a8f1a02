//! `partout serve` under load for minutes (`PARTOUT_SOAK_SECONDS`, 60 by default): four
//! slots each create a live exchange of 64 destinations over Flight, fill it from 16 `DoPut`
//! producers while 64 consumers read it with acknowledgements, check it and drop it, in a
//! loop — 64 producers and 256 consumers at once. Some consumers are slow, some vanish
//! mid-stream (their connection closed) and resume from what they acknowledged, and some
//! exchanges are dropped while producers and consumers are still at them. The server is the
//! product binary in a process of its own, its resident memory sampled every second from
//! `/proc`: it stays within the exchanges' memory limit plus a stated constant, and does not
//! grow from the first third of the run to the last; every row of every exchange not dropped
//! arrives exactly once, in its destination.
//!
//! Run by `./run-tests`' soak step (`cargo test --release --test soak`);
//! `./run-tests --soak-minutes 10` runs it for ten minutes.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_flight::decode::DecodedPayload;
use arrow_flight::error::FlightError;
use arrow_flight::{Action, FlightClient, FlightData, FlightDescriptor, SchemaAsIpc};
use arrow_ipc::writer::IpcWriteOptions;
use futures::TryStreamExt;
use partout_flight::DestinationTicket;
use partout_format::message::{Message, encode_ipc};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Exchanges live at once, one per slot.
const SLOTS: usize = 4;
/// Producers of each exchange: 64 in all.
const PRODUCERS: u32 = 16;
/// Destinations of each exchange, a consumer each: 256 in all.
const DESTINATIONS: u32 = 64;
/// Batches each producer sends each destination, and their rows.
const BATCHES: u64 = 6;
const ROWS: u64 = 128;
/// Each exchange's budget.
const BUDGET: usize = 2 << 20;
/// The server's limit on the exchanges' memory: the four slots' budgets and their
/// destinations, and no more (a `create` past it is refused until one is dropped).
const MEMORY_LIMIT: usize = SLOTS * (BUDGET + DESTINATIONS as usize * 512);
/// What the server may hold beyond its memory limit: its binary, runtime and allocator
/// (13-15 MiB idle), the 320 calls' HTTP/2 buffers and the messages in flight on them
/// (measured: peaks 58-62 MiB above idle).
const CONSTANT: u64 = 96 << 20;
/// How much the last third's peak may pass the first third's.
const GROWTH: u64 = 16 << 20;

/// A destination's rows as a count and two order-free sums of their ids: how rows are
/// checked to have arrived once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    rows: u64,
    sum: u64,
    mixed: u64,
}

impl Tally {
    fn add(&mut self, id: u64) {
        let mut z = id.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.rows += 1;
        self.sum = self.sum.wrapping_add(id);
        self.mixed = self.mixed.wrapping_add(z ^ (z >> 31));
    }
}

/// The server: the product binary serving Flight on a free port of 127.0.0.1.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_partout"))
            .args(["serve", "--flight", "127.0.0.1:0"])
            .args(["--memory-limit", &MEMORY_LIMIT.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .strip_prefix("flight: ")
            .unwrap_or_else(|| panic!("the server said {line:?}"))
            .trim()
            .to_string();
        Self { child, addr }
    }
}

/// Process `pid`'s resident memory now, from `/proc`; none once it is gone.
fn vm_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib << 10)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn channel(addr: &str) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(60))
        .connect()
        .await
        .unwrap()
}

async fn action(channel: &Channel, kind: &str, body: String) -> Result<(), FlightError> {
    FlightClient::new(channel.clone())
        .do_action(Action::new(kind, body))
        .await?
        .try_collect::<Vec<_>>()
        .await
        .map(drop)
}

/// The ids of producer `j`'s batch `b` for destination `p`: unique in the exchange, each
/// `p` modulo the destinations.
fn ids(j: u32, b: u64, p: u32) -> impl Iterator<Item = u64> {
    let base = (u64::from(j) * BATCHES + b) * ROWS * u64::from(DESTINATIONS);
    (0..ROWS).map(move |i| base + i * u64::from(DESTINATIONS) + u64::from(p))
}

fn batch(j: u32, b: u64, p: u32) -> RecordBatch {
    let ids: Vec<i64> = ids(j, b, p).map(|id| id as i64).collect();
    let text: StringArray = ids.iter().map(|id| Some(format!("row {id}"))).collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int64Array::from(ids))),
        ("text", Arc::new(text)),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

/// Producer `j` of `exchange`: every destination's batches, each tagged with its
/// destination, made as the stream is read.
async fn produce(channel: Channel, exchange: String, j: u32) -> Result<(), FlightError> {
    let options = IpcWriteOptions::default();
    let schema = batch(0, 0, 0).schema();
    let first = FlightData::from(SchemaAsIpc::new(&schema, &options))
        .with_descriptor(FlightDescriptor::new_path(vec![exchange]));
    let batches = (0..BATCHES).flat_map(move |b| (0..DESTINATIONS).map(move |p| (b, p)));
    let messages = std::iter::once(first).chain(batches.map(move |(b, p)| {
        let Message::Ipc {
            dictionaries,
            batch,
            ..
        } = encode_ipc(&batch(j, b, p), &options).unwrap()
        else {
            unreachable!("an Arrow IPC message")
        };
        assert!(dictionaries.is_empty());
        FlightData::new()
            .with_data_header(batch.header)
            .with_data_body(batch.body)
            .with_app_metadata(p.to_string().into_bytes())
    }));
    FlightClient::new(channel)
        .do_put(futures::stream::iter(messages.map(Ok)))
        .await?
        .try_collect::<Vec<_>>()
        .await
        .map(drop)
}

/// How a consumer reads.
#[derive(Clone, Copy, Debug)]
enum Reader {
    /// Acknowledges by action every few batches.
    Acking,
    /// Lets the server free each batch as it is sent.
    AutoAck,
    /// Waits 2 ms a batch.
    Slow,
    /// Closes its connection after a few batches, some of them not acknowledged, then
    /// reconnects from what it acknowledged.
    Vanishing,
}

/// Reads destination `p` of `exchange` to its end: its tally. Rows are counted once by
/// their sequence, however often the server sends them.
async fn consume(
    shared: Channel,
    addr: String,
    exchange: String,
    p: u32,
    reader: Reader,
    counts: Arc<Counts>,
    first_rows: Arc<tokio::sync::Notify>,
) -> Result<Tally, FlightError> {
    let mut tally = Tally::default();
    // The next sequence not counted yet, and the first not acknowledged.
    let (mut next, mut acked) = (0u64, 0u64);
    let mut vanish_after = matches!(reader, Reader::Vanishing).then_some(3u64);
    loop {
        // A vanishing consumer reads on a connection of its own, and closes it.
        let channel = match vanish_after {
            Some(_) => channel(&addr).await,
            None => shared.clone(),
        };
        let mut ticket = DestinationTicket::new(&exchange, p).from_sequence(acked);
        ticket.auto_ack = matches!(reader, Reader::AutoAck);
        let mut stream = FlightClient::new(channel.clone())
            .do_get(ticket.to_ticket())
            .await?
            .into_inner();
        let mut read_here = 0;
        let mut vanished = false;
        while let Some(data) = stream.try_next().await? {
            let DecodedPayload::RecordBatch(batch) = data.payload else {
                continue;
            };
            let sequence: u64 = std::str::from_utf8(&data.inner.app_metadata)
                .unwrap()
                .parse()
                .unwrap();
            if sequence >= next {
                assert_eq!(sequence, next, "{exchange}/{p}: a sequence skipped");
                if next == 0 {
                    // (A permit kept when nobody waits yet: the wake-up is never lost.)
                    first_rows.notify_one();
                }
                for id in batch.column(0).as_primitive::<Int64Type>().values() {
                    assert_eq!(*id as u64 % u64::from(DESTINATIONS), u64::from(p));
                    tally.add(*id as u64);
                }
                next += 1;
            }
            read_here += 1;
            match reader {
                Reader::AutoAck => acked = next,
                Reader::Slow => tokio::time::sleep(Duration::from_millis(2)).await,
                _ => {}
            }
            // Acknowledged every other batch.
            if !matches!(reader, Reader::AutoAck) && next % 2 == 0 && acked < next {
                let ack = DestinationTicket::new(&exchange, p).from_sequence(next);
                action(&channel, "ack", serde_json::to_string(&ack).unwrap()).await?;
                acked = next;
            }
            if vanish_after == Some(read_here) {
                vanished = true;
                break;
            }
        }
        if !vanished {
            return Ok(tally);
        }
        // Gone: the stream and its connection dropped with rows read but not acknowledged.
        drop(stream);
        drop(channel);
        counts.resumed.fetch_add(1, Ordering::Relaxed);
        vanish_after = Some(vanish_after.unwrap() + 2).filter(|n| *n < 12);
    }
}

/// Drops exchange `name`: a live one is cancelled, and its memory given back.
async fn drop_exchange(channel: &Channel, name: &str) {
    let body = serde_json::json!({ "exchange": name }).to_string();
    action(channel, "drop", body).await.unwrap();
}

/// What the run did.
#[derive(Debug, Default)]
struct Counts {
    exchanges: AtomicU64,
    dropped_live: AtomicU64,
    rows: AtomicU64,
    refused_creates: AtomicU64,
    /// Vanished consumers that came back and read on from what they acknowledged.
    resumed: AtomicU64,
    /// Producers and consumers of exchanges dropped while live that ended in an error.
    ended_by_drop: AtomicU64,
}

/// One exchange, from `create` to `drop`: its rows checked, unless `abandon` drops it while
/// it is still being filled and read (then every producer and consumer ends, in an error or
/// whole).
async fn one_exchange(addr: &str, name: String, round: u64, abandon: bool, counts: &Arc<Counts>) {
    let first_rows = Arc::new(tokio::sync::Notify::new());
    let shared = channel(addr).await;
    let create = serde_json::json!({"exchange": name, "partitions": DESTINATIONS,
        "producers": PRODUCERS, "budget_bytes": BUDGET});
    // Refused while dropped exchanges' memory is being given back: then tried again.
    let started = Instant::now();
    while let Err(e) = action(&shared, "create", create.to_string()).await {
        assert!(
            e.to_string().contains("memory") && started.elapsed() < Duration::from_secs(30),
            "{name}: create: {e}"
        );
        counts.refused_creates.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let consumers: Vec<_> = (0..DESTINATIONS)
        .map(|p| {
            let reader = match (p % 8, round % 2) {
                (0, _) => Reader::Slow,
                (1, 0) => Reader::Vanishing,
                (2 | 3, _) => Reader::AutoAck,
                _ => Reader::Acking,
            };
            tokio::spawn(consume(
                shared.clone(),
                addr.to_string(),
                name.clone(),
                p,
                reader,
                counts.clone(),
                first_rows.clone(),
            ))
        })
        .collect();
    // The producers share a connection of their own: a producer the exchange makes wait
    // stops reading its stream, and on a connection shared with the consumers its unread
    // bytes would take HTTP/2's whole connection window, which the consumers' acknowledgements
    // need (the exchange would wait for acknowledgements that cannot reach it).
    let producing = channel(addr).await;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|j| tokio::spawn(produce(producing.clone(), name.clone(), j)))
        .collect();
    if abandon {
        // Dropped once a consumer has rows: everyone at it ends, none waits forever.
        tokio::time::timeout(Duration::from_secs(60), first_rows.notified())
            .await
            .unwrap_or_else(|_| panic!("{name}: no rows reached a consumer in 60 s"));
        drop_exchange(&shared, &name).await;
        let mut errors = Vec::new();
        for task in producers {
            if let Err(e) = bounded(&name, task).await {
                errors.push(e.to_string());
            }
        }
        for task in consumers {
            match bounded(&name, task).await {
                // A consumer that finished before the drop has every row of its destination.
                Ok(tally) => {
                    assert_eq!(tally.rows, u64::from(PRODUCERS) * BATCHES * ROWS, "{name}")
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        // Each ended by the drop, saying so; not by anything else.
        let mut kinds: Vec<&str> = errors
            .iter()
            .map(|e| match e {
                e if e.contains("the exchange was dropped") => "dropped",
                e if e.contains("no exchange") || e.contains("unknown exchange") => "gone",
                e => panic!("{name}: ended by something else than the drop: {e}"),
            })
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        println!(
            "{name}: dropped live; {} ended in an error ({kinds:?})",
            errors.len()
        );
        counts
            .ended_by_drop
            .fetch_add(errors.len() as u64, Ordering::Relaxed);
        counts.dropped_live.fetch_add(1, Ordering::Relaxed);
        return;
    }
    for (j, task) in producers.into_iter().enumerate() {
        bounded(&name, task)
            .await
            .unwrap_or_else(|e| panic!("{name}: producer {j}: {e}"));
    }
    for (p, task) in consumers.into_iter().enumerate() {
        let got = bounded(&name, task)
            .await
            .unwrap_or_else(|e| panic!("{name}: destination {p}: {e}"));
        let mut want = Tally::default();
        for j in 0..PRODUCERS {
            for b in 0..BATCHES {
                ids(j, b, p as u32).for_each(|id| want.add(id));
            }
        }
        assert_eq!(got, want, "{name}: destination {p}'s rows");
        counts.rows.fetch_add(got.rows, Ordering::Relaxed);
    }
    drop_exchange(&shared, &name).await;
    counts.exchanges.fetch_add(1, Ordering::Relaxed);
}

/// A task's result, failed if it has not finished in 90 s.
async fn bounded<T>(what: &str, task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(Duration::from_secs(90), task)
        .await
        .unwrap_or_else(|_| panic!("{what}: no end within 90 s"))
        .unwrap()
}

#[test]
fn the_server_holds_its_memory_flat_and_every_row_once_under_load() {
    let seconds: u64 = std::env::var("PARTOUT_SOAK_SECONDS")
        .map(|s| s.parse().expect("PARTOUT_SOAK_SECONDS: whole seconds"))
        .unwrap_or(60);
    let server = Server::start();
    let samples = Arc::new(Mutex::new(Vec::<u64>::new()));
    let done = Arc::new(AtomicBool::new(false));
    let pid_rss = {
        let pid = server.child.id();
        let idle = vm_rss(pid).expect("the server's resident memory");
        samples.lock().unwrap().push(idle);
        let (samples, done) = (samples.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(1));
                let Some(rss) = vm_rss(pid) else {
                    return;
                };
                samples.lock().unwrap().push(rss);
            }
        })
    };
    let counts = Arc::new(Counts::default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    runtime.block_on(async {
        let slots: Vec<_> = (0..SLOTS)
            .map(|slot| {
                let (addr, counts) = (server.addr.clone(), counts.clone());
                tokio::spawn(async move {
                    let mut round = 0u64;
                    while Instant::now() < deadline {
                        // One exchange in every six of the last slot is dropped while live.
                        let abandon = slot == SLOTS - 1 && round % 6 == 5;
                        let name = format!("soak-{slot}-{round}");
                        one_exchange(&addr, name, round, abandon, &counts).await;
                        round += 1;
                    }
                })
            })
            .collect();
        for slot in slots {
            slot.await.unwrap();
        }
    });
    done.store(true, Ordering::Relaxed);
    pid_rss.join().unwrap();
    let samples = samples.lock().unwrap().clone();
    let third = samples.len() / 3;
    let first = *samples[1..third.max(2)].iter().max().unwrap();
    let last = *samples[samples.len() - third.max(1)..]
        .iter()
        .max()
        .unwrap();
    let peak = *samples.iter().max().unwrap();
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let counts = Arc::try_unwrap(counts).unwrap();
    let (exchanges, dropped_live, resumed, ended_by_drop) = (
        counts.exchanges.into_inner(),
        counts.dropped_live.into_inner(),
        counts.resumed.into_inner(),
        counts.ended_by_drop.into_inner(),
    );
    println!(
        "{seconds} s: {exchanges} exchanges checked, {dropped_live} dropped while live \
         ({ended_by_drop} producers and consumers ended by it in an error), {} rows once, \
         {resumed} vanished consumers resumed, {} creates refused at the memory limit and \
         retried; server RSS {:.1} MiB idle, peak {:.1} MiB in the first third, {:.1} MiB in \
         the last, {:.1} MiB overall (memory limit {:.1} MiB + constant {:.1} MiB)",
        counts.rows.into_inner(),
        counts.refused_creates.into_inner(),
        mib(samples[0]),
        mib(first),
        mib(last),
        mib(peak),
        mib(MEMORY_LIMIT as u64),
        mib(CONSTANT),
    );
    // What the run claims to have done, it did: exchanges checked whole, some dropped while
    // live (ending those at them), vanished consumers resumed.
    assert!(
        exchanges > 0 && dropped_live > 0,
        "{exchanges} checked, {dropped_live} dropped"
    );
    assert!(
        ended_by_drop > 0,
        "no producer or consumer was ended by a drop"
    );
    assert!(resumed > 0, "no vanished consumer resumed");
    assert!(
        last <= first + GROWTH,
        "the server's RSS grew: {:.1} MiB at the peak of the first third, {:.1} MiB of the last",
        mib(first),
        mib(last)
    );
    assert!(
        peak <= MEMORY_LIMIT as u64 + CONSTANT,
        "the server's RSS peaked at {:.1} MiB, past the {:.1} MiB memory limit + {:.1} MiB",
        mib(peak),
        mib(MEMORY_LIMIT as u64),
        mib(CONSTANT)
    );
}

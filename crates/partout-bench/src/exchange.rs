//! `partout bench exchange`: TPC-H lineitem moved over loopback from producers to consumers
//! through partout's live exchange, beside a bare arrow-flight server that serves the same
//! destinations' batches from memory.
//!
//! ```text
//!  flight (baseline):  batches per destination, in memory ─► arrow-flight DoGet ─► consumers
//!  partout-flight:     producers (PartitionedWriters) ─► LiveExchange ─► Flight DoGet ─► consumers
//!  partout-presto:     producers ─► LiveExchange (Presto pages) ─► HTTP GET /v1/task/… ─► consumers
//! ```
//!
//! Each consumer reads its share of the destinations (destination p goes to consumer p mod
//! consumers), all of them at once, and decodes every batch or page. partout's runs include
//! the producers' partitioning and encoding, with the exchange's budget holding them back;
//! the baseline's batches were partitioned before its clock starts. Every run checks that all
//! rows arrived; a first, untimed run of each contender checks every destination's schema,
//! rows and values as its consumer decoded them, against what the test kit's reference of
//! partout's hash puts there.

use crate::fingerprint::{self, Fingerprint, Reference};
use crate::harness::{alternate, median};
use crate::lineitem;
use crate::report::{outln, print_json};
use anyhow::{Context, Result, bail, ensure};
use arrow_array::RecordBatch;
use arrow_flight::decode::DecodedPayload;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{FlightClient, FlightData, Ticket};
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use partout_core::ids::Partitioning;
use partout_exchange::{BatchSink, PartitionedWriter, WriterOptions};
use partout_flight::{DestinationTicket, Exchanges, LiveExchange, LiveOptions};
use partout_format::Encoding;
use partout_format::presto::decode_pages;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status};

/// Options of `partout bench exchange`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExchangeBenchOptions {
    /// One JSON object per contender instead of a table.
    #[arg(long)]
    pub json: bool,
    /// TPC-H scale factor of the generated lineitem table.
    #[arg(long, default_value_t = 0.1)]
    pub sf: f64,
    /// Destinations.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub partitions: u32,
    /// Producers, each with its share of the input.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub producers: u32,
    /// Consumers, each reading its share of the destinations at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub consumers: u32,
    /// The exchange's byte budget.
    #[arg(long, default_value_t = 64 << 20)]
    pub budget: usize,
    /// Rounds: every contender runs once per round, in alternation; figures are medians.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Contenders to run (flight, partout-flight, partout-presto, and partout-flight-given:
    /// the baseline's partitioned batches pushed through the exchange by the producers, the
    /// exchange's own cost without the partitioning); all by default.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

const CONTENDERS: [&str; 4] = [
    "flight",
    "partout-flight",
    "partout-presto",
    "partout-flight-given",
];

/// What one run moved.
#[derive(Debug, Clone, Default)]
struct Moved {
    seconds: f64,
    rows: u64,
    bytes: u64,
    /// Each destination's fingerprint, when the run was checked.
    prints: Option<Vec<Fingerprint>>,
}

/// What consumers read: rows and wire bytes, and, when checking, each destination read's
/// fingerprint.
#[derive(Debug, Default)]
struct Consumed {
    rows: u64,
    bytes: u64,
    prints: Vec<(u32, Fingerprint)>,
}

impl Consumed {
    /// Adds what one destination's read gave.
    fn add(&mut self, p: u32, (rows, bytes, print): (u64, u64, Option<Fingerprint>)) {
        self.rows += rows;
        self.bytes += bytes;
        self.prints.extend(print.map(|print| (p, print)));
    }

    /// The fingerprints of destinations `0..n`, when the run was checked: a destination read
    /// twice or never is an error.
    fn prints(mut self, n: u32, check: bool) -> Result<Option<Vec<Fingerprint>>> {
        if !check {
            return Ok(None);
        }
        self.prints.sort_by_key(|(p, _)| *p);
        let order: Vec<u32> = self.prints.iter().map(|(p, _)| *p).collect();
        ensure!(
            order == (0..n).collect::<Vec<_>>(),
            "the consumers read destinations {order:?}, not each of 0 to {} once",
            n - 1
        );
        Ok(Some(
            self.prints.into_iter().map(|(_, print)| print).collect(),
        ))
    }
}

/// Collects each destination's flushed batches (the baseline's data, partitioned as partout's
/// producers partition it).
struct Collect(Vec<Vec<RecordBatch>>);

impl BatchSink for Collect {
    fn write_batch(&mut self, p: usize, batch: &RecordBatch) -> partout_exchange::Result<u64> {
        self.0[p].push(batch.clone());
        Ok(batch.get_array_memory_size() as u64)
    }

    fn finish(&mut self, _: &mut [u64]) -> partout_exchange::Result<()> {
        Ok(())
    }
}

/// The bare arrow-flight server of the baseline: destination p's batches, from memory,
/// encoded by arrow-flight's own encoder at each DoGet (ticket: the destination's number).
#[derive(Clone)]
struct BareFlight {
    destinations: Arc<Vec<Vec<RecordBatch>>>,
}

#[tonic::async_trait]
impl FlightService for BareFlight {
    type HandshakeStream = BoxStream<'static, Result<arrow_flight::HandshakeResponse, Status>>;
    type ListFlightsStream = BoxStream<'static, Result<arrow_flight::FlightInfo, Status>>;
    type DoGetStream = BoxStream<'static, Result<FlightData, Status>>;
    type DoPutStream = BoxStream<'static, Result<arrow_flight::PutResult, Status>>;
    type DoActionStream = BoxStream<'static, Result<arrow_flight::Result, Status>>;
    type ListActionsStream = BoxStream<'static, Result<arrow_flight::ActionType, Status>>;
    type DoExchangeStream = BoxStream<'static, Result<FlightData, Status>>;

    async fn do_get(
        &self,
        request: Request<Ticket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        let p: usize = std::str::from_utf8(&request.get_ref().ticket)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| Status::invalid_argument("a destination number"))?;
        let batches = self
            .destinations
            .get(p)
            .cloned()
            .ok_or_else(|| Status::not_found("no such destination"))?;
        let schema = batches
            .first()
            .map(RecordBatch::schema)
            .ok_or_else(|| Status::not_found("an empty destination"))?;
        let stream = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .with_max_flight_data_size(usize::MAX)
            .build(stream::iter(batches.into_iter().map(Ok)))
            .map_err(Status::from);
        Ok(Response::new(stream.boxed()))
    }

    async fn handshake(
        &self,
        _: Request<tonic::Streaming<arrow_flight::HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        Err(Status::unimplemented("handshake"))
    }
    async fn list_flights(
        &self,
        _: Request<arrow_flight::Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        Err(Status::unimplemented("list_flights"))
    }
    async fn get_flight_info(
        &self,
        _: Request<arrow_flight::FlightDescriptor>,
    ) -> Result<Response<arrow_flight::FlightInfo>, Status> {
        Err(Status::unimplemented("get_flight_info"))
    }
    async fn poll_flight_info(
        &self,
        _: Request<arrow_flight::FlightDescriptor>,
    ) -> Result<Response<arrow_flight::PollInfo>, Status> {
        Err(Status::unimplemented("poll_flight_info"))
    }
    async fn get_schema(
        &self,
        _: Request<arrow_flight::FlightDescriptor>,
    ) -> Result<Response<arrow_flight::SchemaResult>, Status> {
        Err(Status::unimplemented("get_schema"))
    }
    async fn do_put(
        &self,
        _: Request<tonic::Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        Err(Status::unimplemented("do_put"))
    }
    async fn do_action(
        &self,
        _: Request<arrow_flight::Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        Err(Status::unimplemented("do_action"))
    }
    async fn list_actions(
        &self,
        _: Request<arrow_flight::Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        Err(Status::unimplemented("list_actions"))
    }
    async fn do_exchange(
        &self,
        _: Request<tonic::Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented("do_exchange"))
    }
}

/// Serves `server` on a free port of 127.0.0.1; its address.
async fn serve_bare(server: BareFlight) -> Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(FlightServiceServer::new(server))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    Ok(addr)
}

async fn connect(addr: std::net::SocketAddr) -> Result<tonic::transport::Channel> {
    Ok(
        tonic::transport::Channel::from_shared(format!("http://{addr}"))?
            .connect()
            .await?,
    )
}

/// Reads a DoGet stream to its end, decoding every batch: rows and wire bytes, and with
/// `check` the fingerprint of what it held (its schema from the stream's schema message).
async fn drain(
    mut client: FlightClient,
    ticket: Ticket,
    check: bool,
) -> std::result::Result<(u64, u64, Option<Fingerprint>), FlightError> {
    let mut decoder = client.do_get(ticket).await?.into_inner();
    let (mut rows, mut bytes) = (0, 0);
    let mut print = check.then(Fingerprint::default);
    while let Some(data) = decoder.try_next().await? {
        bytes += (data.inner.data_header.len() + data.inner.data_body.len()) as u64;
        match (data.payload, &mut print) {
            (DecodedPayload::RecordBatch(batch), print) => {
                rows += batch.num_rows() as u64;
                if let Some(print) = print {
                    partout_testkit::fingerprint::add_batch(print, &batch)?;
                }
            }
            (DecodedPayload::Schema(schema), Some(print)) => {
                print.add(&Fingerprint::empty(schema))?;
            }
            _ => {}
        }
    }
    Ok((rows, bytes, print))
}

/// Consumers over Flight: consumer c reads destinations c, c + consumers, … at once, each on
/// the consumer's own connection.
async fn flight_consumers(
    addr: std::net::SocketAddr,
    partitions: u32,
    consumers: u32,
    ticket: impl Fn(u32) -> Ticket,
    check: bool,
) -> Result<Consumed> {
    let mut tasks = Vec::new();
    for c in 0..consumers {
        let channel = connect(addr).await?;
        let destinations: Vec<u32> = (c..partitions).step_by(consumers as usize).collect();
        let reads: Vec<_> = destinations
            .iter()
            .map(|&p| drain(FlightClient::new(channel.clone()), ticket(p), check))
            .collect();
        tasks.push((
            destinations,
            tokio::spawn(futures::future::try_join_all(reads)),
        ));
    }
    let mut consumed = Consumed::default();
    for (destinations, task) in tasks {
        for (p, read) in destinations.into_iter().zip(task.await??) {
            consumed.add(p, read);
        }
    }
    Ok(consumed)
}

/// Pulls destination `p` over Presto's protocol to its end, decoding every page: rows and
/// bytes, and with `check` the fingerprint of what it held.
async fn pull_presto(
    http: reqwest::Client,
    base: String,
    exchange: String,
    p: u32,
    schema: arrow_schema::SchemaRef,
    check: bool,
) -> Result<(u64, u64, Option<Fingerprint>)> {
    let (mut rows, mut bytes, mut token) = (0, 0, 0u64);
    // Presto pages carry no schema: the consumer decodes them in the one it was told.
    let mut print = check.then(|| Fingerprint::empty(schema.clone()));
    loop {
        let url = format!("{base}/v1/task/{exchange}/results/{p}/{token}");
        let reply = http
            .get(&url)
            .header("X-Presto-Max-Size", "4MB")
            .header("X-Presto-Max-Wait", "1s")
            .send()
            .await?;
        let status = reply.status();
        let header = |name: &str| -> Result<String> {
            Ok(reply
                .headers()
                .get(name)
                .with_context(|| format!("{url}: no {name}"))?
                .to_str()?
                .to_string())
        };
        let next: u64 = header("X-Presto-Page-End-Sequence-Id")?.parse()?;
        let complete = header("X-Presto-Buffer-Complete")? == "true";
        if status == reqwest::StatusCode::OK {
            let body = reply.bytes().await?;
            bytes += body.len() as u64;
            let schema = schema.clone();
            let mut running = print.take();
            let (read, running) = tokio::task::spawn_blocking(move || -> Result<_> {
                let batches = decode_pages(&body, &schema)?;
                if let Some(print) = &mut running {
                    for batch in &batches {
                        partout_testkit::fingerprint::add_batch(print, batch)?;
                    }
                }
                Ok((
                    batches.iter().map(|b| b.num_rows() as u64).sum::<u64>(),
                    running,
                ))
            })
            .await??;
            rows += read;
            print = running;
        } else if status != reqwest::StatusCode::NO_CONTENT {
            bail!("{url}: {status} {}", reply.text().await.unwrap_or_default());
        }
        token = next;
        if complete {
            break;
        }
    }
    http.delete(format!("{base}/v1/task/{exchange}/results/{p}"))
        .send()
        .await?;
    Ok((rows, bytes, print))
}

/// Feeds `live` from `inputs` (one producer thread each).
fn producers(
    live: &Arc<LiveExchange>,
    inputs: &[Vec<RecordBatch>],
) -> Vec<std::thread::JoinHandle<Result<()>>> {
    inputs
        .iter()
        .map(|batches| {
            let live = live.clone();
            let batches = batches.clone();
            std::thread::spawn(move || {
                let schema = batches[0].schema();
                let partitioning = Partitioning::hash(vec![0], live.partitions());
                let mut writer = live.writer(schema, partitioning, WriterOptions::default())?;
                for batch in &batches {
                    writer.append(batch)?;
                }
                writer.finish_output()?;
                Ok(())
            })
        })
        .collect()
}

/// Feeds `live` with `destinations`' batches as they are, without partitioning them: producer
/// i pushes destinations i, i + producers, ….
fn given_producers(
    live: &Arc<LiveExchange>,
    destinations: &Arc<Vec<Vec<RecordBatch>>>,
    producers: usize,
) -> Vec<std::thread::JoinHandle<Result<()>>> {
    (0..producers)
        .map(|i| {
            let live = live.clone();
            let destinations = destinations.clone();
            std::thread::spawn(move || {
                let mut producer = live.producer()?;
                // Round-robin over its destinations, batch by batch, as a writer flushes.
                let mine: Vec<usize> = (i..destinations.len()).step_by(producers).collect();
                let most = mine
                    .iter()
                    .map(|&p| destinations[p].len())
                    .max()
                    .unwrap_or(0);
                for k in 0..most {
                    for &p in &mine {
                        if let Some(batch) = destinations[p].get(k) {
                            producer.push_batch(p as u32, batch)?;
                        }
                    }
                }
                producer.finish();
                Ok(())
            })
        })
        .collect()
}

/// One run of `contender`; with `check`, its consumers fingerprint every destination they
/// read (untimed runs only: the hashing would fall on the clock).
async fn run_once(
    contender: &str,
    options: &ExchangeBenchOptions,
    inputs: &[Vec<RecordBatch>],
    destinations: &Arc<Vec<Vec<RecordBatch>>>,
    bare: std::net::SocketAddr,
    name: &str,
    check: bool,
) -> Result<Moved> {
    let n = options.partitions;
    let started = Instant::now();
    let consumed = match contender {
        "flight" => {
            let ticket = |p: u32| Ticket::new(p.to_string());
            flight_consumers(bare, n, options.consumers, ticket, check).await?
        }
        "partout-flight" | "partout-presto" | "partout-flight-given" => {
            let presto = contender == "partout-presto";
            let encoding = if presto {
                Encoding::presto(false)
            } else {
                Encoding::default()
            };
            let live = LiveExchange::try_new(
                None,
                LiveOptions::new(n, inputs.len())
                    .with_budget(options.budget)
                    .with_encoding(encoding),
            )?;
            let exchanges = Exchanges::new();
            let name = name.to_string();
            exchanges.add_live(&name, live.clone())?;
            let loopback = "127.0.0.1:0".parse()?;
            let (flight, http) = if presto {
                (None, Some(loopback))
            } else {
                (Some(loopback), None)
            };
            let servers = partout_flight::serve::start(exchanges, flight, http)
                .await
                .map_err(anyhow::Error::msg)?;
            let started_producers = match contender {
                "partout-flight-given" => given_producers(&live, destinations, inputs.len()),
                _ => producers(&live, inputs),
            };
            let moved = if presto {
                let base = format!("http://{}", servers.presto.context("presto address")?);
                let schema = inputs[0][0].schema();
                let mut tasks = Vec::new();
                for c in 0..options.consumers {
                    let http = reqwest::Client::new();
                    let mine: Vec<u32> = (c..n).step_by(options.consumers as usize).collect();
                    let reads: Vec<_> = mine
                        .iter()
                        .map(|&p| {
                            let (base, name) = (base.clone(), name.clone());
                            pull_presto(http.clone(), base, name, p, schema.clone(), check)
                        })
                        .collect();
                    tasks.push((mine, tokio::spawn(futures::future::try_join_all(reads))));
                }
                let mut consumed = Consumed::default();
                for (mine, task) in tasks {
                    for (p, read) in mine.into_iter().zip(task.await??) {
                        consumed.add(p, read);
                    }
                }
                consumed
            } else {
                let addr = servers.flight.context("flight address")?;
                let name = name.clone();
                let ticket = move |p| {
                    let mut ticket = DestinationTicket::new(name.clone(), p);
                    ticket.auto_ack = true;
                    ticket.to_ticket()
                };
                flight_consumers(addr, n, options.consumers, ticket, check).await?
            };
            for producer in started_producers {
                tokio::task::spawn_blocking(move || producer.join())
                    .await?
                    .map_err(|_| anyhow::anyhow!("a producer panicked"))??;
            }
            ensure!(
                live.peak_buffered_bytes() <= options.budget,
                "the exchange held {} bytes, past its budget",
                live.peak_buffered_bytes()
            );
            moved
        }
        other => bail!("no contender {other:?} (expected one of {CONTENDERS:?})"),
    };
    let seconds = started.elapsed().as_secs_f64();
    Ok(Moved {
        seconds,
        rows: consumed.rows,
        bytes: consumed.bytes,
        prints: consumed.prints(n, check)?,
    })
}

/// `partout bench exchange`.
///
/// # Errors
/// Generation, serving or consuming errors; a run that lost rows.
pub fn run(options: &ExchangeBenchOptions) -> Result<()> {
    let contenders: Vec<&str> = if options.only.is_empty() {
        CONTENDERS.to_vec()
    } else {
        CONTENDERS
            .iter()
            .copied()
            .filter(|c| options.only.iter().any(|o| o == c))
            .collect()
    };
    ensure!(
        !contenders.is_empty(),
        "--only names none of {CONTENDERS:?}"
    );
    let batches = lineitem::generate(options.sf, 8192)?;
    let total_rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    // What each destination must hold: partout's hash of l_orderkey (the first column), by the
    // test kit's reference.
    let expected = fingerprint::expected(&batches, Reference::PartoutHash, options.partitions)?;
    // The producers' shares: batches dealt in turn.
    let mut inputs: Vec<Vec<RecordBatch>> = vec![Vec::new(); options.producers as usize];
    for (i, batch) in batches.iter().enumerate() {
        inputs[i % options.producers as usize].push(batch.clone());
    }
    inputs.retain(|share| !share.is_empty());
    // The baseline's data: each destination's batches as partout's writer flushes them.
    let mut collect = PartitionedWriter::with_output(
        batches[0].schema(),
        Partitioning::hash(vec![0], options.partitions),
        WriterOptions::default(),
        Collect(vec![Vec::new(); options.partitions as usize]),
    )?;
    for batch in &batches {
        collect.append(batch)?;
    }
    let (Collect(destinations), _) = collect.finish_output()?;
    let destinations = Arc::new(destinations);
    drop(batches);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let bare = runtime.block_on(serve_bare(BareFlight {
        destinations: destinations.clone(),
    }))?;
    // A first run of each contender, untimed, checked destination by destination.
    for (round, contender) in contenders.iter().enumerate() {
        let name = format!("check{round}");
        let moved = runtime.block_on(run_once(
            contender,
            options,
            &inputs,
            &destinations,
            bare,
            &name,
            true,
        ))?;
        let got = moved.prints.expect("a checked run fingerprints");
        fingerprint::check(contender, &expected, &got)?;
    }
    let mut round = 0;
    let samples = alternate(options.rounds as usize, contenders.len(), |i| {
        round += 1;
        let moved = runtime.block_on(run_once(
            contenders[i],
            options,
            &inputs,
            &destinations,
            bare,
            &format!("run{round}"),
            false,
        ))?;
        ensure!(
            moved.rows == total_rows,
            "{}: {} rows arrived of {total_rows}",
            contenders[i],
            moved.rows
        );
        Ok::<_, anyhow::Error>(moved)
    })?;
    let cpu = partout_testkit::machine();
    let baseline = contenders
        .iter()
        .position(|c| *c == "flight")
        .map(|i| median(samples[i].iter().map(|m| m.seconds).collect()));
    if !options.json {
        outln!(
            "lineitem SF {} ({total_rows} rows): {} producers -> {} destinations -> {} consumers over loopback; {cpu}; medians of {} rounds",
            options.sf,
            inputs.len(),
            options.partitions,
            options.consumers,
            options.rounds
        );
        outln!(
            "{:<16} {:>9} {:>9} {:>11} {:>10}",
            "contender",
            "seconds",
            "GB/s",
            "Mrows/s",
            "÷ flight"
        );
    }
    for (contender, runs) in contenders.iter().zip(&samples) {
        let seconds = median(runs.iter().map(|m| m.seconds).collect());
        let bytes = runs[0].bytes;
        let ratio = baseline.map(|b| seconds / b);
        if options.json {
            print_json(&json!({
                "suite": "exchange", "contender": contender, "seconds": seconds,
                "bytes": bytes, "rows": total_rows, "partitions": options.partitions,
                "producers": inputs.len(), "consumers": options.consumers,
                "time_over_flight": ratio, "cpu": cpu,
            }))?;
        } else {
            outln!(
                "{:<16} {:>9.3} {:>9.2} {:>11.1} {:>10}",
                contender,
                seconds,
                bytes as f64 / seconds / 1e9,
                total_rows as f64 / seconds / 1e6,
                ratio.map_or("-".to_string(), |r| format!("{r:.2}x"))
            );
        }
    }
    Ok(())
}

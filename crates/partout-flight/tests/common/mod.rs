//! What the exchange's tests share: an input, its repartitioned outputs, servers on
//! 127.0.0.1 and clients of them.
#![allow(dead_code)]

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_flight::FlightClient;
use arrow_flight::decode::DecodedPayload;
use futures::TryStreamExt;
use partout_flight::{DestinationTicket, Exchanges};
use partout_job::{Format, Job, JobOptions, Layout};
use partout_testkit::{random_batch, rng};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub const DESTINATIONS: u32 = 5;
pub const ROWS: usize = 20_000;

/// A batch of `rows` rows: a key `k`, a unique id `id`, and columns of several types.
pub fn batch(rows: usize, seed: u64) -> RecordBatch {
    use arrow_schema::DataType;
    let extra = random_batch(
        &[DataType::Utf8, DataType::Float64, DataType::Utf8View],
        rows,
        0.2,
        false,
        &mut rng(seed),
    );
    let offset = seed as i64 * 1_000_000_000;
    let mut columns: Vec<(String, ArrayRef)> = vec![
        (
            "k".into(),
            Arc::new(Int64Array::from_iter_values(
                (0..rows as i64).map(|i| (i + offset) * 7919 % 1009),
            )),
        ),
        (
            "id".into(),
            Arc::new(Int64Array::from_iter_values(offset..offset + rows as i64)),
        ),
    ];
    // The columns Presto pages can carry too.
    let carried = extra
        .columns()
        .iter()
        .filter(|c| partout_format::Format::Presto.can_encode(c.data_type()));
    for (i, column) in carried.enumerate() {
        columns.push((format!("c{i}"), column.clone()));
    }
    // Every column nullable, whether or not this batch has nulls: one schema for every batch.
    RecordBatch::try_from_iter_with_nullable(
        columns
            .into_iter()
            .map(|(name, column)| (name, column, true)),
    )
    .unwrap()
}

/// An input of `ROWS` rows written as an Arrow IPC file in `dir`; the batch itself.
pub fn input(dir: &Path) -> RecordBatch {
    let batch = batch(ROWS, 3);
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

/// The input in `dir` repartitioned by `k` into `DESTINATIONS` destinations.
pub fn repartition(dir: &Path, format: Format, layout: Layout) -> PathBuf {
    let out = dir.join(format!("out-{format}-{layout}"));
    let options = JobOptions::new([dir.join("input.arrow")], &out, DESTINATIONS)
        .with_keys(["k"])
        .with_format(format)
        .with_layout(layout)
        .with_threads(2);
    Job::try_new(options).unwrap().run(&()).unwrap();
    out
}

/// Serves `exchanges` over Flight and Presto's protocol on free ports of 127.0.0.1.
pub async fn serve(exchanges: Exchanges) -> partout_flight::serve::Servers {
    let loopback = "127.0.0.1:0".parse().unwrap();
    partout_flight::serve::start(exchanges, Some(loopback), Some(loopback))
        .await
        .unwrap()
}

/// A channel to `servers`' Flight service, every call on it bounded in time.
pub async fn channel(servers: &partout_flight::serve::Servers) -> tonic::transport::Channel {
    let addr = servers.flight.unwrap();
    tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(60))
        .connect()
        .await
        .unwrap()
}

/// A Flight client of `servers`, every call bounded in time.
pub async fn client(servers: &partout_flight::serve::Servers) -> FlightClient {
    FlightClient::new(channel(servers).await)
}

/// The sequence number a batch came with.
pub fn sequence(data: &arrow_flight::FlightData) -> u64 {
    std::str::from_utf8(&data.app_metadata)
        .unwrap()
        .parse()
        .unwrap()
}

/// Destination `p`'s batches from `from` on, with the sequence numbers they came with.
pub async fn fetch(
    client: &mut FlightClient,
    exchange: &str,
    p: u32,
    from: u64,
) -> Result<Vec<(u64, RecordBatch)>, arrow_flight::error::FlightError> {
    let ticket = DestinationTicket::new(exchange, p).from_sequence(from);
    let mut decoder = client.do_get(ticket.to_ticket()).await?.into_inner();
    let mut out = Vec::new();
    while let Some(data) = decoder.try_next().await? {
        if let DecodedPayload::RecordBatch(batch) = data.payload {
            out.push((sequence(&data.inner), batch));
        }
    }
    Ok(out)
}

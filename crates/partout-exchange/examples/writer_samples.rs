//! Partitions the sample table (`partout_testkit::sample_batch`) with the partitioned writer
//! into one Arrow IPC stream file per destination, for other readers to check (the Python tests
//! read them with pyarrow): `cargo run -p partout-exchange --example writer_samples -- DIR`.
//!
//! 10,000 rows in batches of 1,000, hash-partitioned on `id` into 7 destinations, small flush
//! targets (several record batches per stream), once per compression, into `DIR/{none,lz4,zstd}/`.
//! `DIR/destinations.json` lists the ids each destination must hold, in order.

use partout_core::ids::{PartitionIds, Partitioning};
use partout_exchange::{FileSink, PartitionedWriter, WriterOptions};
use partout_format::Encoding;
use partout_format::ipc::Compression;
use partout_testkit::sample_batch;

const ROWS: usize = 10_000;
const BATCH: usize = 1000;
const DESTINATIONS: u32 = 7;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).ok_or("usage: writer_samples DIR")?);
    let schema = sample_batch(0, 0).schema();
    let partitioning = Partitioning::hash(vec![0], DESTINATIONS);
    for (name, compression) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::ZSTD),
    ] {
        let sink = FileSink::try_new(dir.join(name), "arrows", DESTINATIONS as usize)?;
        let options = WriterOptions::default().with_target_bytes(16 << 10);
        let mut writer = PartitionedWriter::try_new(
            schema.clone(),
            partitioning.clone(),
            options,
            Encoding::ipc(compression),
            sink,
        )?;
        for start in (0..ROWS).step_by(BATCH) {
            writer.append(&sample_batch(start, BATCH))?;
        }
        writer.finish()?;
    }
    // Where each row must be, from the ids the writer computed.
    let mut ids = PartitionIds::try_new(partitioning, &schema)?;
    let mut destinations = vec![Vec::new(); DESTINATIONS as usize];
    let mut buffer = Vec::new();
    for start in (0..ROWS).step_by(BATCH) {
        ids.compute(&sample_batch(start, BATCH), &mut buffer)?;
        for (k, &p) in buffer.iter().enumerate() {
            destinations[p as usize].push(start + k);
        }
    }
    std::fs::write(
        dir.join("destinations.json"),
        serde_json::to_string(&destinations)?,
    )?;
    Ok(())
}

//! Writes Arrow IPC streams with partout's encoder for other readers to check (the Python
//! tests read them with pyarrow): `cargo run -p partout-format --example ipc_samples -- DIR`.
//!
//! Every value is a function of its row number, so a reader can recompute what it should find:
//! `id = i`, `name = "row-{i}"` (null when `i % 7 == 3`), `label` = the same as Utf8View with
//! every fifth value longer than 12 bytes, `score = i * 0.5`, `tags = [i, i + 1]` (Int32),
//! in batches of 1000 rows, 2500 rows per stream; one file per compression.

use partout_format::ipc::{Compression, IpcStreamEncoder};
use partout_testkit::sample_batch as batch;

const ROWS: usize = 2500;
const BATCH: usize = 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: ipc_samples DIR")?;
    std::fs::create_dir_all(&dir)?;
    for (name, compression) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::ZSTD),
    ] {
        let schema = batch(0, 0).schema();
        let mut encoder = IpcStreamEncoder::try_new(schema, compression)?;
        let mut bytes = Vec::new();
        for start in (0..ROWS).step_by(BATCH) {
            // Slices of a larger batch, as a partitioner's destinations are.
            let whole = batch(start, BATCH.min(ROWS - start) + 10);
            encoder.encode(&whole.slice(0, BATCH.min(ROWS - start)), &mut bytes)?;
        }
        encoder.finish(&mut bytes)?;
        std::fs::write(format!("{dir}/samples.{name}.arrows"), bytes)?;
    }
    Ok(())
}

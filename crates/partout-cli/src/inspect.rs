//! `partout inspect`: what partout wrote, described and checked — a finished output
//! directory, a file of Presto pages, an Arrow IPC stream or a shuffle index. Outputs and
//! streams are read through the output layer's reader ([`FinishedOutput`], [`FileCursor`]),
//! as the servers and Python's `read` read them.

use anyhow::{Context, Result, bail};
use partout_format::Format;
use partout_format::presto::{BlockInfo, inspect_pages};
use partout_output::manifest::{Layout, Manifest};
use partout_output::{FileCursor, FinishedOutput};
use std::io::Read;
use std::path::Path;

/// `partout inspect PATH`.
pub(crate) fn run(path: &Path) -> Result<()> {
    if path.is_dir() {
        return output(path);
    }
    let mut start = [0u8; 8];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut start))
        .with_context(|| format!("reading {}", path.display()))?;
    let start = &start[..read];
    if start.starts_with(partout_output::SHUFFLE_INDEX_MAGIC) {
        shuffle_index(path)
    } else if start.starts_with(&[0xFF; 4]) {
        // Every IPC stream message begins with the continuation marker; a Presto page
        // begins with its row count, never negative.
        ipc_stream(path)
    } else {
        pages(path)
    }
}

/// A finished output directory: its manifest, and each destination read back.
fn output(dir: &Path) -> Result<()> {
    let manifest = Manifest::read(dir)?;
    let recorded: u64 = manifest.destinations.iter().map(|d| d.rows).sum();
    outln!(
        "{}: {} output ({}), {} layout, {} destinations, {recorded} rows recorded",
        dir.display(),
        manifest.format.title(),
        manifest.compression,
        match manifest.layout {
            Layout::Files => "files",
            Layout::Shuffle => "shuffle",
        },
        manifest.partitions,
    );
    if manifest.format == Format::Parquet {
        // Parquet files are read with a Parquet reader, not as messages.
        for entry in &manifest.destinations {
            let names: Vec<&str> = entry
                .files
                .iter()
                .flatten()
                .map(|f| f.name.as_str())
                .collect();
            let names = match names.is_empty() {
                true => "(no file)".to_string(),
                false => names.join(", "),
            };
            outln!(
                "destination {}: {names}, {} rows recorded",
                entry.destination,
                entry.rows
            );
        }
        return Ok(());
    }
    let finished = FinishedOutput::open(dir).map_err(reported)?;
    let mut total = 0u64;
    for p in 0..finished.partitions() {
        let mut cursor = finished.cursor(p).map_err(reported)?;
        let (mut messages, mut rows, mut bytes) = (0u64, 0u64, 0u64);
        while let Some(message) = cursor
            .next_message()
            .map_err(|e| anyhow::anyhow!("destination {p}: {}", e.report()))?
        {
            messages += 1;
            rows += message.rows();
            bytes += message.size() as u64;
        }
        let expected = manifest.destinations.get(p as usize).map(|d| d.rows);
        if expected != Some(rows) {
            bail!(
                "destination {p}: its files hold {rows} rows, the manifest records {}",
                expected.map_or("none".to_string(), |r| r.to_string())
            );
        }
        total += rows;
        outln!("destination {p}: {messages} messages, {rows} rows, {bytes} bytes of messages");
    }
    outln!("{total} rows read back, as recorded");
    Ok(())
}

/// A reader's error with its causes, as one message.
fn reported(e: partout_flight::ExchangeError) -> anyhow::Error {
    anyhow::anyhow!(e.report())
}

/// An Arrow IPC stream: its schema, messages and rows (every message checked as it is
/// read).
fn ipc_stream(path: &Path) -> Result<()> {
    let mut cursor = FileCursor::file(path, Format::Ipc).map_err(reported)?;
    let (mut batches, mut rows, mut bytes) = (0u64, 0u64, 0u64);
    while let Some(message) = cursor.next_message().map_err(reported)? {
        batches += 1;
        rows += message.rows();
        bytes += message.size() as u64;
    }
    outln!(
        "{}: Arrow IPC stream, {batches} record batches, {rows} rows, {bytes} bytes of messages",
        path.display()
    );
    if let Some(schema) = cursor.schema() {
        for field in schema.fields() {
            let null = if field.is_nullable() { "" } else { " not null" };
            outln!("  {}: {}{null}", field.name(), field.data_type());
        }
    }
    Ok(())
}

/// A file of Presto pages, page by page and column by column.
fn pages(file: &Path) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let pages = inspect_pages(&bytes).with_context(|| format!("{}", file.display()))?;
    fn describe(block: &BlockInfo) -> String {
        if block.children.is_empty() {
            block.encoding.clone()
        } else {
            let children: Vec<String> = block.children.iter().map(describe).collect();
            format!("{}({})", block.encoding, children.join(", "))
        }
    }
    let rows: usize = pages.iter().map(|p| p.rows).sum();
    outln!(
        "{}: {} Presto pages, {rows} rows, {} bytes",
        file.display(),
        pages.len(),
        bytes.len()
    );
    for (i, page) in pages.iter().enumerate() {
        let checksum = if page.checksummed {
            "checksum ok"
        } else {
            "no checksum"
        };
        let compression = if page.compressed {
            "lz4"
        } else {
            "uncompressed"
        };
        outln!(
            "page {i} at byte {}: {} rows, {} columns, {} bytes ({compression}, {} before), {checksum}",
            page.offset,
            page.rows,
            page.columns.len(),
            page.size,
            page.uncompressed_size
        );
        for (c, block) in page.columns.iter().enumerate() {
            outln!("  column {c}: {} ({} bytes)", describe(block), block.bytes);
        }
    }
    Ok(())
}

/// A shuffle index, checked against its data file.
fn shuffle_index(index: &Path) -> Result<()> {
    let data = index.with_extension("data");
    let data_len = std::fs::metadata(&data)
        .with_context(|| format!("the data file of {}: {}", index.display(), data.display()))?
        .len();
    let (destinations, ranges) = partout_output::read_shuffle_index(index, data_len)?;
    let mut per_destination = vec![(0u64, 0u64, 0u64); destinations as usize];
    for range in &ranges {
        let entry = &mut per_destination[range.destination as usize];
        *entry = (entry.0 + 1, entry.1 + range.rows, entry.2 + range.len);
    }
    let rows: u64 = ranges.iter().map(|r| r.rows).sum();
    let with_rows = per_destination.iter().filter(|d| d.1 > 0).count();
    outln!(
        "{}: shuffle index of {} ({data_len} bytes): {} ranges, {rows} rows, {with_rows} of {destinations} destinations with rows",
        index.display(),
        data.display(),
        ranges.len()
    );
    for (p, (count, rows, bytes)) in per_destination.iter().enumerate() {
        if *count > 0 {
            outln!("destination {p}: {count} ranges, {rows} rows, {bytes} bytes");
        }
    }
    Ok(())
}

//! `partout bench presto`: lineitem batches encoded as Presto pages (with and without checksum
//! and LZ4) beside the same batches encoded as Arrow IPC, each contender writing into one
//! reused buffer.

use crate::harness::{alternate, medians, time};
use crate::lineitem;
use crate::report::{outln, print_json};
use anyhow::Result;
use arrow_array::RecordBatch;
use partout_format::ipc::{Compression, IpcStreamEncoder};
use partout_format::presto::{PageOptions, encode_page};
use serde_json::json;

/// Options of `partout bench presto`.
#[derive(Debug, Clone, clap::Args)]
pub struct PrestoBenchOptions {
    /// One JSON object per case instead of a table.
    #[arg(long)]
    pub json: bool,
    /// TPC-H scale factor of the generated lineitem table.
    #[arg(long, default_value_t = 0.1)]
    pub sf: f64,
    /// Rows per page (lineitem is cut into batches of this size).
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..))]
    pub rows: u32,
    /// Rounds; figures are medians.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
}

/// One encoding of a batch, appended to the buffer.
type Encode = Box<dyn FnMut(&RecordBatch, &mut Vec<u8>) -> Result<()>>;

/// A contender: format, variant (its checks and compression), and how it encodes.
struct Case {
    format: &'static str,
    variant: &'static str,
    encode: Encode,
}

/// `partout bench presto`: every case encodes every batch once per round, in alternation.
///
/// # Errors
/// A bad scale factor, an encoder's error, or a closed stdout.
pub fn run(options: &PrestoBenchOptions) -> Result<()> {
    let batches = lineitem::generate(options.sf, options.rows as usize)?;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let bytes_in = lineitem::buffer_bytes(&batches);
    let mib = bytes_in as f64 / f64::from(1 << 20);
    let schema = batches[0].schema();
    let page = |variant, checksum, lz4| Case {
        format: "presto page",
        variant,
        encode: Box::new(move |batch, out| {
            Ok(encode_page(batch, PageOptions { checksum, lz4 }, out)?)
        }),
    };
    let ipc = |variant, compression| -> Result<Case> {
        let mut encoder = IpcStreamEncoder::try_new(schema.clone(), compression)?;
        Ok(Case {
            format: "arrow ipc",
            variant,
            encode: Box::new(move |batch, out| Ok(encoder.encode(batch, out)?)),
        })
    };
    let mut cases = [
        page("none", false, false),
        page("crc32", true, false),
        page("crc32+lz4", true, true),
        ipc("none", Compression::None)?,
        ipc("lz4", Compression::Lz4)?,
    ];
    let mut out = Vec::new();
    // (seconds, bytes out) of each run.
    let samples = alternate(options.rounds as usize, cases.len(), |i| {
        time(|| {
            let mut bytes = 0;
            for batch in &batches {
                out.clear();
                (cases[i].encode)(batch, &mut out)?;
                bytes += out.len();
            }
            anyhow::Ok(bytes)
        })
    })?;
    let medians = medians(&samples, |&(seconds, _)| seconds);
    if !options.json {
        outln!(
            "presto: lineitem SF {} ({rows} rows, {mib:.0} MiB) encoded {}-row batch by batch; median of {} rounds",
            options.sf,
            options.rows,
            options.rounds
        );
        outln!(
            "{:<12} {:>10} {:>9} {:>10} {:>9} {:>9}",
            "format",
            "checks",
            "time ms",
            "M rows/s",
            "MiB/s",
            "out MiB"
        );
    }
    for (i, case) in cases.iter().enumerate() {
        let seconds = medians[i];
        // Every run encodes the same bytes: the last one's.
        let bytes_out = samples[i].last().map_or(0, |&(_, bytes)| bytes);
        if options.json {
            print_json(&json!({
                "suite": "presto",
                "format": case.format,
                "variant": case.variant,
                "sf": options.sf,
                "rows": rows,
                "bytes_in": bytes_in,
                "bytes_out": bytes_out,
                "seconds": (seconds * 1e4).round() / 1e4,
                "rows_per_s": (rows as f64 / seconds).round(),
                "mib_per_s": (mib / seconds * 10.0).round() / 10.0,
            }))?;
        } else {
            outln!(
                "{:<12} {:>10} {:>9.1} {:>10.2} {:>9.0} {:>9.1}",
                case.format,
                case.variant,
                seconds * 1e3,
                rows as f64 / seconds / 1e6,
                mib / seconds,
                bytes_out as f64 / f64::from(1 << 20)
            );
        }
    }
    Ok(())
}

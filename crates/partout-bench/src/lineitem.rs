//! The suites' TPC-H lineitem: generated in process, measured, written as a Parquet file.

use anyhow::{Context, Result, ensure};
use arrow_array::RecordBatch;

/// Generates lineitem at scale factor `sf` in batches of `batch_size` rows; refuses an empty
/// table.
pub(crate) fn generate(sf: f64, batch_size: usize) -> Result<Vec<RecordBatch>> {
    ensure!(
        sf > 0.0 && sf.is_finite(),
        "the scale factor must be positive, got {sf}"
    );
    let generator = tpchgen::generators::LineItemGenerator::new(sf, 1, 1);
    let batches = tpchgen_arrow::LineItemArrow::new(generator)
        .with_batch_size(batch_size)
        .collect::<Result<Vec<_>, _>>()
        .context("generating lineitem")?;
    ensure!(!batches.is_empty(), "no rows generated at SF {sf}");
    Ok(batches)
}

/// Bytes of the batches' buffers (what is moved).
pub(crate) fn buffer_bytes(batches: &[RecordBatch]) -> usize {
    batches
        .iter()
        .map(partout_testkit::workload::data_bytes)
        .sum()
}

/// Writes `batches` as one Parquet file (row groups of 128K rows, Snappy).
pub(crate) fn write_parquet(path: &std::path::Path, batches: &[RecordBatch]) -> Result<()> {
    let properties = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_max_row_group_row_count(Some(128 << 10))
        .build();
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), Some(properties))?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.close()?;
    Ok(())
}

//! What the job's tests share: an input Parquet file made of a function's row ranges.

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use std::path::{Path, PathBuf};

/// `dir/in.parquet`: rows `0..total` as `rows(start, len)` makes them, in row groups of
/// 10,000 rows (frames for two workers).
pub fn parquet_input(dir: &Path, total: i64, rows: impl Fn(i64, i64) -> RecordBatch) -> PathBuf {
    let path = dir.join("in.parquet");
    let file = std::fs::File::create(&path).unwrap();
    let mut writer = ArrowWriter::try_new(file, rows(0, 1).schema(), None).unwrap();
    for start in (0..total).step_by(10_000) {
        writer
            .write(&rows(start, 10_000.min(total - start)))
            .unwrap();
        writer.flush().unwrap();
    }
    writer.close().unwrap();
    path
}

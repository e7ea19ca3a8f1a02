//! The benchmarks' check of every contender's output ([`partout_testkit::fingerprint`]):
//! what it must have written, computed from the input by the reference partitioner of its
//! scheme, against what it wrote, decoded or read back. partout's own hash is referenced by
//! the test kit's independent re-implementation ([`partout_testkit::fast_hash`]), never by
//! partout's ids.

use anyhow::{Context, Result, anyhow, bail, ensure};
use arrow_array::RecordBatch;
use partout_job::{Format, Manifest};
use partout_testkit::baseline::DataFusionHash;
use partout_testkit::fast_hash;
pub use partout_testkit::fingerprint::Fingerprint;
use partout_testkit::fingerprint::{self as prints};
use std::path::Path;

/// The partitioner whose destinations a contender's output must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// partout's fast hash (`Partitioning::hash`), by the test kit's reference.
    PartoutHash,
    /// DataFusion 55's hash, `% n` (its `RepartitionExec`'s ids).
    DataFusionHash,
}

/// What `n` destinations must hold of `batches` partitioned by `reference` on the first
/// column.
///
/// # Errors
/// A column the fingerprint cannot encode, or ids that cannot be computed.
pub fn expected(batches: &[RecordBatch], reference: Reference, n: u32) -> Result<Vec<Fingerprint>> {
    expected_on(batches, reference, &[0], n)
}

/// What `n` destinations must hold of `batches` partitioned by `reference` on the columns
/// `keys`.
///
/// # Errors
/// A column the fingerprint cannot encode, or ids that cannot be computed.
pub fn expected_on(
    batches: &[RecordBatch],
    reference: Reference,
    keys: &[usize],
    n: u32,
) -> Result<Vec<Fingerprint>> {
    match reference {
        Reference::PartoutHash => prints::expected(batches, n, |batch, out| -> Result<()> {
            Ok(fast_hash::ids(batch, keys, n, out)?)
        }),
        Reference::DataFusionHash => {
            let mut hash = DataFusionHash::new();
            prints::expected(batches, n, |batch, out| -> Result<()> {
                hash.ids(batch, keys, n, out);
                Ok(())
            })
        }
    }
}

/// Adds `more` to `into`, destination by destination (one input read in parts).
///
/// # Errors
/// Parts of other destination counts or schemas.
pub fn add_all(into: &mut [Fingerprint], more: &[Fingerprint]) -> Result<()> {
    ensure!(
        into.len() == more.len(),
        "{} destinations added to {}",
        more.len(),
        into.len()
    );
    for (print, more) in into.iter_mut().zip(more) {
        print.add(more)?;
    }
    Ok(())
}

/// What each destination's Arrow IPC stream in `outputs` holds (its schema from the stream's
/// header, even when it holds no batch).
///
/// # Errors
/// A stream that does not decode.
pub fn of_streams(outputs: &[Vec<u8>]) -> Result<Vec<Fingerprint>> {
    outputs
        .iter()
        .enumerate()
        .map(|(p, bytes)| {
            let (schema, batches) = partout_format::ipc::decode_stream(bytes)
                .with_context(|| format!("decoding destination {p}"))?;
            let mut print = Fingerprint::empty(schema);
            for batch in &batches {
                prints::add_batch(&mut print, batch).with_context(|| format!("destination {p}"))?;
            }
            Ok(print)
        })
        .collect()
}

/// What a Parquet file holds: its schema (as arrow-rs reads it back) and rows.
///
/// # Errors
/// A file that does not read.
pub fn of_parquet_file(path: &Path) -> Result<Fingerprint> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .with_context(|| format!("reading {}", path.display()))?;
    let mut print = Fingerprint::empty(reader.schema().clone());
    for batch in reader.build()? {
        let batch = batch.with_context(|| format!("reading {}", path.display()))?;
        prints::add_batch(&mut print, &batch).with_context(|| path.display().to_string())?;
    }
    Ok(print)
}

/// What each destination of a job's Parquet output under `dir` holds, read back from the
/// files its manifest names for it (in order). Every file under `dir` must be one the
/// manifest names (besides the manifest itself): rows in a file no destination claims are
/// an error, not rows quietly left out.
///
/// # Errors
/// Another format than Parquet, a destination without its files, a file that does not read,
/// or one the manifest does not name.
pub fn of_job_output(dir: &Path, manifest: &Manifest) -> Result<Vec<Fingerprint>> {
    ensure!(
        manifest.format == Format::Parquet,
        "only Parquet outputs are read back, not {:?}",
        manifest.format
    );
    let mut named = std::collections::BTreeSet::new();
    let mut got = Vec::with_capacity(manifest.destinations.len());
    for (p, entry) in manifest.destinations.iter().enumerate() {
        ensure!(
            entry.destination as usize == p,
            "the manifest lists destination {} in place {p}",
            entry.destination
        );
        let files = entry
            .files
            .as_deref()
            .ok_or_else(|| anyhow!("the manifest names no files for destination {p}"))?;
        let mut print = Fingerprint::default();
        for file in files {
            let path = dir.join(&file.name);
            print
                .add(&of_parquet_file(&path)?)
                .with_context(|| format!("destination {p}"))?;
            named.insert(path);
        }
        got.push(print);
    }
    for path in files_under(dir)? {
        let manifest_file = path.file_name() == Some(partout_job::MANIFEST_FILE.as_ref());
        if !manifest_file && !named.contains(&path) {
            bail!(
                "{} is in the output but the manifest names it for no destination",
                path.display()
            );
        }
    }
    Ok(got)
}

/// Every file under `dir`, at any depth.
pub(crate) fn files_under(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The destinations found as `expected` says (all of them); else an error naming `who` and
/// the first destination whose schema or rows differ.
///
/// # Errors
/// That destination.
pub fn check(who: &str, expected: &[Fingerprint], got: &[Fingerprint]) -> Result<usize> {
    prints::check(who, expected, got).map_err(|e| anyhow!(e))?;
    Ok(expected.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineitem;
    use arrow_array::{ArrayRef, StringViewArray};
    use partout_job::{JobOptions, repartition};
    use std::path::PathBuf;
    use std::sync::Arc;

    /// The batches of a Parquet file.
    fn read(path: &Path) -> Vec<RecordBatch> {
        let file = std::fs::File::open(path).unwrap();
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Writes `batches` over the Parquet file at `path`.
    fn write(path: &Path, batches: &[RecordBatch]) {
        let file = std::fs::File::create(path).unwrap();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), None).unwrap();
        for batch in batches {
            writer.write(batch).unwrap();
        }
        writer.close().unwrap();
    }

    /// `batch` with column `c` replaced by `column`, in a schema of its type.
    fn with_column(batch: &RecordBatch, c: usize, column: ArrayRef) -> RecordBatch {
        let mut fields: Vec<_> = batch.schema().fields().iter().cloned().collect();
        fields[c] = Arc::new(
            fields[c]
                .as_ref()
                .clone()
                .with_data_type(column.data_type().clone()),
        );
        let mut columns = batch.columns().to_vec();
        columns[c] = column;
        RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns).unwrap()
    }

    /// A job's Parquet output read back passes against the reference of partout's hash, and
    /// fails, naming the destination, when a file is tampered with: two destinations swapped,
    /// a row dropped, a value changed, a column written in another type, a file no destination
    /// claims.
    #[test]
    fn a_job_output_is_checked_destination_by_destination() {
        let batches = lineitem::generate(0.001, 1000).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("lineitem.parquet");
        lineitem::write_parquet(&input, &batches).unwrap();
        let out = dir.path().join("out");
        let n = 4;
        let report = repartition(
            JobOptions::new([&input], &out, n)
                .with_keys(["l_orderkey"])
                .with_threads(2),
        )
        .unwrap();
        let manifest = &report.manifest;
        let expected = expected(&batches, Reference::PartoutHash, n).unwrap();
        let check_output = || check("job", &expected, &of_job_output(&out, manifest)?);
        check_output().unwrap();

        let file =
            |p: usize| -> PathBuf { out.join(&manifest.destinations[p].only_file().unwrap().name) };
        let kept: Vec<Vec<u8>> = (0..n as usize)
            .map(|p| std::fs::read(file(p)).unwrap())
            .collect();
        let restore = || {
            for (p, bytes) in kept.iter().enumerate() {
                std::fs::write(file(p), bytes).unwrap();
            }
            check_output().unwrap();
        };
        let error = || check_output().unwrap_err().to_string();

        // Destinations 0 and 1 swapped.
        std::fs::write(file(0), &kept[1]).unwrap();
        std::fs::write(file(1), &kept[0]).unwrap();
        let err = error();
        assert!(err.starts_with("job: destination 0 holds"), "{err}");
        restore();

        // One row of destination 2 dropped.
        let rows = read(&file(2));
        let last = rows.last().unwrap();
        let mut fewer = rows[..rows.len() - 1].to_vec();
        fewer.push(last.slice(0, last.num_rows() - 1));
        write(&file(2), &fewer);
        let want = expected[2].rows;
        assert_eq!(
            error(),
            format!(
                "job: destination 2 holds {} rows where the reference partitioner puts {want}",
                want - 1
            )
        );
        restore();

        // One value of destination 3 changed (its first l_comment).
        let mut rows = read(&file(3));
        let comment = rows[0].schema().index_of("l_comment").unwrap();
        let mut comments: Vec<String> = rows[0]
            .column(comment)
            .as_any()
            .downcast_ref::<StringViewArray>()
            .unwrap()
            .iter()
            .map(|s| s.unwrap().to_string())
            .collect();
        comments[0].push('!');
        rows[0] = with_column(&rows[0], comment, Arc::new(StringViewArray::from(comments)));
        write(&file(3), &rows);
        assert_eq!(
            error(),
            format!(
                "job: destination 3 holds {} rows with other values where the reference \
                 partitioner puts {0}",
                expected[3].rows
            )
        );
        restore();

        // Destination 1's l_comment written as Utf8 rather than Utf8View: the same strings.
        let rows: Vec<RecordBatch> = read(&file(1))
            .iter()
            .map(|batch| {
                let plain =
                    arrow_cast::cast(batch.column(comment), &arrow_schema::DataType::Utf8).unwrap();
                with_column(batch, comment, plain)
            })
            .collect();
        write(&file(1), &rows);
        assert_eq!(
            error(),
            "job: destination 1's column 15 (l_comment) is Utf8 where the input's is Utf8View"
        );
        restore();

        // A file no destination claims.
        let stray = out.join("part-00009.parquet");
        std::fs::write(&stray, &kept[0]).unwrap();
        let err = error();
        assert!(
            err.ends_with(
                "part-00009.parquet is in the output but the manifest names it for no destination"
            ),
            "{err}"
        );
        std::fs::remove_file(stray).unwrap();
        check_output().unwrap();
    }
}

//! Parquet files written from staged rows: every staged row once, in its destination's file,
//! in row groups as large as asked; scratch files gone after success and after a failure,
//! which names the damaged file.

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use partout_exchange::BatchSink;
use partout_format::ipc::Compression;
use partout_output::{ParquetWriterConfig, StagedFiles};
use partout_testkit::error_chain;
use std::path::Path;
use std::sync::Arc;

/// Rows `start..start + len`: `id = i`, `name = "n{i}"` (null for every seventh).
pub(crate) fn rows(start: i64, len: i64) -> RecordBatch {
    let ids = start..start + len;
    RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
        ),
        (
            "name",
            Arc::new(StringArray::from_iter(
                ids.map(|i| (i % 7 != 0).then(|| format!("n{i}"))),
            )) as ArrayRef,
        ),
    ])
    .unwrap()
}

fn options(row_group_rows: usize) -> ParquetWriterConfig {
    ParquetWriterConfig {
        properties: WriterProperties::builder()
            .set_max_row_group_row_count(Some(row_group_rows))
            .build(),
        row_group_bytes: 64 << 20,
        staging: Compression::None,
        chosen: Default::default(),
    }
}

/// The files in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Stages rows `0..total` over `destinations` destinations (row `i` to `i % destinations`) by
/// two workers (even and odd batches of `batch` rows).
fn stage(staged: &StagedFiles, total: i64, batch: i64, destinations: usize) {
    let mut workers = [staged.scratch(0).unwrap(), staged.scratch(1).unwrap()];
    for (b, start) in (0..total).step_by(batch as usize).enumerate() {
        let rows = rows(start, batch.min(total - start));
        for p in 0..destinations {
            let take: Vec<u32> = (0..rows.num_rows() as u32)
                .filter(|&r| (start as usize + r as usize) % destinations == p)
                .collect();
            let slice =
                arrow_select::take::take_record_batch(&rows, &arrow_array::UInt32Array::from(take))
                    .unwrap();
            if slice.num_rows() > 0 {
                workers[b % 2].write_batch(p, &slice).unwrap();
            }
        }
    }
    for w in &mut workers {
        w.finish(&mut vec![0; destinations]).unwrap();
    }
}

#[test]
fn every_staged_row_lands_once_in_large_row_groups_and_the_scratch_is_removed() {
    for staging in [Compression::None, Compression::Lz4] {
        staged_rows_land_once(ParquetWriterConfig {
            staging,
            ..options(50_000)
        });
    }
}

fn staged_rows_land_once(options: ParquetWriterConfig) {
    let dir = tempfile::tempdir().unwrap();
    let destinations = 3;
    let staged = StagedFiles::try_new(
        dir.path(),
        "part",
        rows(0, 1).schema(),
        destinations + 1,
        options,
    )
    .unwrap();
    // 210,000 rows in runs of a few hundred: 70,000 a destination, the last gets none.
    let total = 210_000;
    stage(&staged, total, 900, destinations);
    assert!(names(dir.path()).iter().any(|n| n.starts_with(".scratch")));
    let files = staged.finish(2, &|| false).unwrap();
    assert_eq!(
        names(dir.path()),
        [
            "part-00000.parquet",
            "part-00001.parquet",
            "part-00002.parquet",
            "part-00003.parquet"
        ],
        "scratch and partial files removed"
    );
    let mut seen = vec![false; total as usize];
    for (p, file) in files.iter().enumerate() {
        let [file] = file.as_slice() else {
            panic!("one file a destination: {file:?}");
        };
        let name = file.name.as_str();
        let path = dir.path().join(name);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            file.bytes,
            "{name}"
        );
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
        let row_groups: Vec<u64> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|rg| rg.num_rows() as u64)
            .collect();
        assert_eq!(file.row_groups.as_ref(), Some(&row_groups), "{name}");
        // Runs of a few hundred rows gathered into row groups of the most rows asked for.
        let want: &[u64] = if p < destinations {
            &[50_000, 20_000]
        } else {
            &[]
        };
        assert_eq!(row_groups, want, "{name}");
        for batch in reader.build().unwrap() {
            let batch = batch.unwrap();
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let names = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            for r in 0..batch.num_rows() {
                let i = ids.value(r);
                assert_eq!(i as usize % destinations, p, "row {i} in {name}");
                assert!(!seen[i as usize], "row {i} twice");
                seen[i as usize] = true;
                let want = (i % 7 != 0).then(|| format!("n{i}"));
                assert_eq!(names.is_valid(r).then(|| names.value(r)), want.as_deref());
            }
        }
    }
    assert!(seen.iter().all(|&s| s), "a row lost");
}

#[test]
fn a_damaged_scratch_file_is_an_error_naming_it_and_leaves_no_scratch() {
    let dir = tempfile::tempdir().unwrap();
    let staged =
        StagedFiles::try_new(dir.path(), "part", rows(0, 1).schema(), 2, options(1 << 20)).unwrap();
    stage(&staged, 20_000, 1000, 2);
    // Worker 1's data, overwritten past its first bytes (the schema message stays whole).
    let (data, _) = staged.scratch_paths(1);
    let len = std::fs::metadata(&data).unwrap().len() as usize;
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[len / 3..].fill(0xAB);
    std::fs::write(&data, bytes).unwrap();
    let err = staged.finish(1, &|| false).unwrap_err();
    let chain = error_chain(&err);
    assert!(
        chain.contains(".scratch-001.data") && chain.contains("destination"),
        "{chain}"
    );
    assert!(
        names(dir.path())
            .iter()
            .all(|n| !n.starts_with(".scratch") && !n.ends_with(".partial")),
        "{:?}",
        names(dir.path())
    );
}

/// Scratch files are read back without arrow's validation (partout's own bytes), then checked
/// but for UTF-8 (`read_back`): a string's view pointing past its data, in a file that still
/// decodes as a stream, is an error naming the file, not a read out of bounds.
#[test]
fn a_view_damaged_in_a_scratch_file_that_still_decodes_is_an_error_naming_it() {
    use arrow_array::StringViewArray;
    let dir = tempfile::tempdir().unwrap();
    let string = |i: i64| format!("row {i:06} of the scratch file, past 12 bytes");
    let batch = |start: i64, len: i64| {
        RecordBatch::try_from_iter([(
            "s",
            Arc::new(StringViewArray::from_iter_values(
                (start..start + len).map(string),
            )) as ArrayRef,
        )])
        .unwrap()
    };
    let staged = StagedFiles::try_new(
        dir.path(),
        "part",
        batch(0, 1).schema(),
        1,
        options(1 << 20),
    )
    .unwrap();
    let mut worker = staged.scratch(0).unwrap();
    for start in (0..4000).step_by(1000) {
        worker.write_batch(0, &batch(start, 1000)).unwrap();
    }
    worker.finish(&mut [0; 1]).unwrap();
    // A view: its length and first 4 bytes, then its buffer's index and its offset. The
    // offset of row 1000's view moved past every buffer.
    let (data, _) = staged.scratch_paths(0);
    let mut bytes = std::fs::read(&data).unwrap();
    let target = string(1000);
    let mut view = (target.len() as u32).to_le_bytes().to_vec();
    view.extend_from_slice(&target.as_bytes()[..4]);
    let found: Vec<usize> = bytes
        .windows(8)
        .enumerate()
        .filter(|(_, w)| *w == view.as_slice())
        .map(|(at, _)| at)
        .collect();
    // Every row's view starts alike ("row "): the one of row 1000 is the 1001st.
    assert_eq!(found.len(), 4000, "views found");
    let at = found[1000];
    bytes[at + 12..at + 16].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    std::fs::write(&data, bytes).unwrap();
    let err = staged.finish(1, &|| false).unwrap_err();
    let chain = error_chain(&err);
    assert!(
        chain.contains(".scratch-000.data")
            && chain.contains("damaged scratch file")
            && chain.contains("Invalid buffer slice"),
        "{chain}"
    );
}

#[test]
fn cancelled_writing_stops_and_leaves_no_scratch() {
    let dir = tempfile::tempdir().unwrap();
    let staged =
        StagedFiles::try_new(dir.path(), "part", rows(0, 1).schema(), 4, options(1 << 20)).unwrap();
    stage(&staged, 8_000, 1000, 4);
    let err = staged.finish(2, &|| true).unwrap_err();
    assert!(
        matches!(err, partout_exchange::WriterError::Failed),
        "{err}"
    );
    assert!(
        names(dir.path()).iter().all(|n| !n.starts_with(".scratch")),
        "{:?}",
        names(dir.path())
    );
}

#[test]
fn a_schema_parquet_cannot_carry_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
        "nothing",
        arrow_schema::DataType::Struct(arrow_schema::Fields::empty()),
        true,
    )]));
    let err = StagedFiles::try_new(dir.path(), "part", schema, 2, options(1 << 20)).unwrap_err();
    let chain = error_chain(&err);
    assert!(chain.contains("empty struct"), "{chain}");
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
}

/// What the parquet crate's writer cannot write is refused by column before anything is
/// written: unions (top-level or nested; its schema conversion would panic on them) and
/// month-day-nano intervals (its writer would fail only once it met values); a struct without
/// fields has no Parquet group either. Every other type partout generates is taken.
#[test]
fn types_parquet_cannot_carry_are_refused_by_column() {
    use arrow_schema::{DataType, Field, Fields, IntervalUnit, Schema};
    let union = partout_testkit::nested_types()
        .into_iter()
        .find(|t| matches!(t, DataType::Union(..)))
        .unwrap();
    for data_type in [
        union.clone(),
        DataType::Struct(Fields::from(vec![Field::new("u", union.clone(), true)])),
        DataType::LargeListView(Arc::new(Field::new("item", union, true))),
        DataType::Interval(IntervalUnit::MonthDayNano),
        partout_testkit::run_end_encoded(
            DataType::Int32,
            DataType::Interval(IntervalUnit::MonthDayNano),
        ),
    ] {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("bad", data_type.clone(), true),
        ]);
        let err = error_chain(&StagedFiles::check_schema(&schema).unwrap_err());
        assert!(
            err.contains("Parquet files cannot carry column \"bad\""),
            "{data_type}: {err}"
        );
    }
    for data_type in partout_testkit::every_type() {
        let carried = match &data_type {
            DataType::Union(..) | DataType::Interval(IntervalUnit::MonthDayNano) => false,
            DataType::Struct(fields) => !fields.is_empty(),
            _ => true,
        };
        let schema = Schema::new(vec![Field::new("c", data_type.clone(), true)]);
        assert_eq!(
            StagedFiles::check_schema(&schema).is_ok(),
            carried,
            "{data_type}"
        );
    }
}

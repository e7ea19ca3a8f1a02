//! `partout repartition` under faults from outside: the process killed (SIGKILL) at moments
//! spread over its run, for every output layout and write mode, and once in its commit; a
//! disk that fills up under it (as root, on a small tmpfs); an input truncated, rewritten or
//! replaced while it is read; and Ctrl-C, SIGTERM and SIGHUP. None of them may leave a wrong
//! or partial output.
//!
//! Outputs are read back here with arrow-rs's own readers (Parquet, Arrow IPC streams and
//! files; partout-format's decoder for Presto pages, which arrow-rs does not read), and every
//! row is checked against the data that made it: each row once, in the destination
//! partout-core's hash gives its key (or, in a Hive dataset, under its value's directory).

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use partout_core::ids::{PartitionIds, Partitioning};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests of this file run one at a time: each times runs of the binary (to place kills,
/// to catch a run while it reads), which runs beside them would slow down.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ---------------------------------------------------------------------------------------------
// The data: every value of a row follows from its `i`, so a row read back can be checked alone.
// ---------------------------------------------------------------------------------------------

/// The first `i` of the rows of the output already there before a run (the "old" rows, of an
/// earlier run): far above the new input's `0..n`, so each row read back says which it is.
const OLD_BASE: i64 = 1 << 40;

/// The key of row `i` (`k`): 100,003 values, spread.
fn key(i: i64) -> i64 {
    i * 7919 % 100_003
}

/// The string of row `i` (`s`).
fn text(i: i64) -> String {
    let mut text = String::new();
    write_text(i, &mut text);
    text
}

/// Appends the string of row `i` to `out`.
fn write_text(i: i64, out: &mut String) {
    write!(out, "row {i}").unwrap();
}

/// The Hive partition value of row `i` (`y`): 0 to 4 for new rows, 3 to 7 for old ones, so that
/// a new run writes two values the old dataset has (3 and 4) and leaves three alone (5 to 7).
fn value(i: i64) -> i64 {
    i % 5 + if i >= OLD_BASE { 3 } else { 0 }
}

/// The values a new run writes (what `value` gives rows below `OLD_BASE`).
const NEW_VALUES: Range<i64> = 0..5;

/// The string of row `i` in an input rewritten in place with as many bytes: `text(i)` in
/// capitals, as long.
fn other_text(i: i64) -> String {
    text(i).to_uppercase()
}

/// Rows `range`: `i`, `k = key(i)`, `s = text(i)`, `y = value(i)`.
fn rows(range: Range<i64>) -> RecordBatch {
    rows_with(range, text)
}

/// Rows `range`, their strings made by `text`.
fn rows_with(range: Range<i64>, text: fn(i64) -> String) -> RecordBatch {
    RecordBatch::try_from_iter([
        (
            "i",
            Arc::new(Int64Array::from_iter_values(range.clone())) as ArrayRef,
        ),
        (
            "k",
            Arc::new(Int64Array::from_iter_values(range.clone().map(key))) as ArrayRef,
        ),
        (
            "s",
            Arc::new(StringArray::from_iter_values(range.clone().map(text))) as ArrayRef,
        ),
        (
            "y",
            Arc::new(Int64Array::from_iter_values(range.map(value))) as ArrayRef,
        ),
    ])
    .unwrap()
}

/// The input file formats the faults are tried on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InputFormat {
    Parquet,
    IpcFile,
}

/// Rows `range` as a file of `format` in memory: Parquet in row groups of 50,000 rows, an
/// Arrow IPC file in batches of 8,192 (so the job cuts either into many frames).
fn file_bytes(format: InputFormat, range: Range<i64>) -> Vec<u8> {
    file_bytes_with(format, range, text)
}

/// As [`file_bytes`], the strings made by `text`.
fn file_bytes_with(format: InputFormat, range: Range<i64>, text: fn(i64) -> String) -> Vec<u8> {
    let mut bytes = Vec::new();
    let batches = range
        .clone()
        .step_by(8192)
        .map(|start| rows_with(start..(start + 8192).min(range.end), text));
    let schema = rows(0..1).schema();
    match format {
        InputFormat::Parquet => {
            let props = parquet::file::properties::WriterProperties::builder()
                .set_max_row_group_row_count(Some(50_000))
                .build();
            let mut w =
                parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, Some(props)).unwrap();
            batches.for_each(|b| w.write(&b).unwrap());
            w.close().unwrap();
        }
        InputFormat::IpcFile => {
            let mut w = arrow_ipc::writer::FileWriter::try_new(&mut bytes, &schema).unwrap();
            batches.for_each(|b| w.write(&b).unwrap());
            w.finish().unwrap();
        }
    }
    bytes
}

// ---------------------------------------------------------------------------------------------
// Running the binary, every wait bounded.
// ---------------------------------------------------------------------------------------------

/// `partout repartition --quiet ARGS`, its stderr into `log` (a file: a pipe nobody reads
/// while waiting could fill and stall the run).
fn repartition(args: &[String], log: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_partout"));
    command
        .args(["repartition", "--quiet"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    command
}

/// Waits for `child` at most `limit`; past it, kills it and fails naming `what`.
fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A run to its end (at most two minutes): its exit status, stderr and wall time.
struct Finished {
    status: ExitStatus,
    stderr: String,
    seconds: f64,
}

fn run_to_end(args: &[String], log: &Path) -> Finished {
    let started = Instant::now();
    let mut child = repartition(args, log).spawn().unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(120), &format!("{args:?}"));
    Finished {
        status,
        stderr: std::fs::read_to_string(log).unwrap(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

fn assert_success(run: &Finished, what: &str) {
    assert!(run.status.success(), "{what}: {}", run.stderr);
}

/// Arguments, owned.
fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// A path as an argument (the tests' paths are UTF-8).
fn path_arg(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Every file under `dir`, as paths relative to it with `/` between parts, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(at) = dirs.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap();
                found.push(relative.to_str().unwrap().replace('\\', "/"));
            }
        }
    }
    found.sort();
    found
}

/// Copies the tree `from` to `to` (which must not exist).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// A seeded generator of moments (splitmix64): the same fractions of a run on every run of
/// the test.
struct Moments(u64);

impl Moments {
    /// A fraction in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

// ---------------------------------------------------------------------------------------------
// Reading an output back, independently of partout's reader.
// ---------------------------------------------------------------------------------------------

/// How an output places rows: `n` destinations by partout's hash of `k`, or a directory per
/// value of `y` (a Hive dataset, its partition column left out of the files).
#[derive(Debug, Clone, Copy)]
enum Shape {
    Hashed { n: u32 },
    Hive,
}

/// How many times each row of the new input (`0..new`) and of the old one (`OLD_BASE..`) was
/// read back.
struct Counts {
    new: Vec<u8>,
    old: Vec<u8>,
}

impl Counts {
    fn new(new: i64, old: i64) -> Self {
        Self {
            new: vec![0; new as usize],
            old: vec![0; old as usize],
        }
    }

    fn add(&mut self, i: i64) {
        let slot = match i >= OLD_BASE {
            true => self.old.get_mut((i - OLD_BASE) as usize),
            false => usize::try_from(i).ok().and_then(|i| self.new.get_mut(i)),
        };
        let slot = slot.unwrap_or_else(|| panic!("row {i} is in no input"));
        *slot = slot.saturating_add(1);
    }

    /// Rows read more than once, new rows read, old rows read: for messages.
    fn summary(&self) -> String {
        let twice = self.new.iter().chain(&self.old).filter(|&&c| c > 1).count();
        let new = self.new.iter().filter(|&&c| c > 0).count();
        let old = self.old.iter().filter(|&&c| c > 0).count();
        format!(
            "{new} of {} new rows, {old} of {} old rows, {twice} rows more than once",
            self.new.len(),
            self.old.len()
        )
    }
}

/// A set of rows an output may hold: every new row (or none), and the old rows `old_kept`
/// keeps (or none).
#[derive(Debug, Clone, Copy)]
struct RowSet {
    new: bool,
    old: bool,
    old_kept: fn(i64) -> bool,
}

impl RowSet {
    const NEW: Self = Self {
        new: true,
        old: false,
        old_kept: |_| true,
    };
    const OLD: Self = Self {
        new: false,
        old: true,
        old_kept: |_| true,
    };
    const BOTH: Self = Self {
        new: true,
        old: true,
        old_kept: |_| true,
    };
    /// The new rows, and the old ones of the values the new run does not write.
    const REPLACED_VALUES: Self = Self {
        new: true,
        old: true,
        old_kept: |i| !NEW_VALUES.contains(&value(i)),
    };

    /// Whether `counts` holds exactly these rows, each once.
    fn holds(&self, counts: &Counts) -> bool {
        let new_ok = counts.new.iter().all(|&c| c == u8::from(self.new));
        let old_ok = counts.old.iter().enumerate().all(|(j, &c)| {
            let wanted = self.old && (self.old_kept)(OLD_BASE + j as i64);
            c == u8::from(wanted)
        });
        new_ok && old_ok
    }
}

/// The `_manifest.json` in `out`.
fn manifest(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("_manifest.json"))
        .unwrap_or_else(|e| panic!("{}: no readable manifest: {e}", out.display()));
    serde_json::from_str(&text).unwrap()
}

/// The schema of the rows as they were written (before a Hive layout drops `y`).
fn schema() -> SchemaRef {
    rows(0..1).schema()
}

/// The batches of one data file, by its name's extension.
fn decode_file(path: &Path) -> Vec<RecordBatch> {
    let file = || std::fs::File::open(path).unwrap();
    let what = path.display();
    match path.extension().and_then(|e| e.to_str()) {
        Some("parquet") => {
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file())
                .unwrap_or_else(|e| panic!("{what}: {e}"))
                .build()
                .unwrap()
                .map(|b| b.unwrap_or_else(|e| panic!("{what}: {e}")))
                .collect()
        }
        Some("arrows") => decode_stream(&std::fs::read(path).unwrap(), &what.to_string()),
        Some("arrow") => arrow_ipc::reader::FileReader::try_new(file(), None)
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .map(|b| b.unwrap_or_else(|e| panic!("{what}: {e}")))
            .collect(),
        Some("presto") => {
            partout_format::presto::decode_pages(&std::fs::read(path).unwrap(), &schema())
                .unwrap_or_else(|e| panic!("{what}: {e}"))
        }
        other => panic!("{what}: a file of no format the output writes ({other:?})"),
    }
}

/// An Arrow IPC stream's batches, by arrow-rs's reader.
fn decode_stream(bytes: &[u8], what: &str) -> Vec<RecordBatch> {
    arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .map(|b| b.unwrap_or_else(|e| panic!("{what}: {e}")))
        .collect()
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> &'a Int64Array {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
}

/// Checks each row of `batches` (its values, and its place: `place` is the destination of a
/// hashed output, or the value whose directory holds the file in a Hive dataset) and counts
/// it; the rows checked.
fn check_rows(
    batches: &[RecordBatch],
    shape: Shape,
    place: i64,
    counts: &mut Counts,
    what: &str,
) -> u64 {
    let mut ids_of_rows = Vec::new();
    let mut read = 0;
    for batch in batches {
        let i = column(batch, "i");
        let k = column(batch, "k");
        let s = batch
            .column_by_name("s")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(
            i.null_count() + k.null_count() + s.null_count(),
            0,
            "{what}"
        );
        match shape {
            Shape::Hashed { n } => {
                let key_column = batch.schema().index_of("k").unwrap();
                let mut ids =
                    PartitionIds::try_new(Partitioning::hash(vec![key_column], n), &batch.schema())
                        .unwrap();
                ids.compute(batch, &mut ids_of_rows).unwrap();
                assert!(
                    ids_of_rows.iter().all(|&id| i64::from(id) == place),
                    "{what}: a row that belongs in another destination than {place}"
                );
                let y = column(batch, "y");
                for r in 0..batch.num_rows() {
                    assert_eq!(y.value(r), value(i.value(r)), "{what}");
                }
            }
            Shape::Hive => {
                assert!(
                    batch.column_by_name("y").is_none(),
                    "{what}: the partition column in the file"
                );
                for r in 0..batch.num_rows() {
                    assert_eq!(
                        value(i.value(r)),
                        place,
                        "{what}: row {} under the directory of another value",
                        i.value(r)
                    );
                }
            }
        }
        let mut wanted = String::new();
        for r in 0..batch.num_rows() {
            let row = i.value(r);
            assert_eq!(k.value(r), key(row), "{what}: row {row}");
            // (`text(row)`, without a string made per row.)
            wanted.clear();
            write_text(row, &mut wanted);
            assert_eq!(s.value(r), wanted, "{what}: row {row}");
            counts.add(row);
        }
        read += batch.num_rows() as u64;
    }
    read
}

/// Reads the whole output in `out` back, checking every row's values and place, and counts
/// the rows into `counts`. Fails for anything a whole output does not hold: no manifest, a
/// file on disk the manifest does not list (a partial or hidden file), a file it lists that
/// is missing or unreadable, row counts other than the manifest's.
fn read_output(out: &Path, shape: Shape, counts: &mut Counts) {
    let manifest = manifest(out);
    let mut listed = BTreeSet::from(["_manifest.json".to_string()]);
    let destinations = manifest["destinations"].as_array().unwrap();
    let mut total = 0;
    match manifest["layout"].as_str().unwrap() {
        "files" => {
            for (p, entry) in destinations.iter().enumerate() {
                let mut rows_of_destination = 0;
                for file in entry["files"].as_array().unwrap() {
                    let name = file["name"].as_str().unwrap();
                    assert!(listed.insert(name.to_string()), "{name} listed twice");
                    let place = match shape {
                        Shape::Hashed { .. } => p as i64,
                        Shape::Hive => {
                            let dir = name.split('/').next().unwrap();
                            let v = dir.strip_prefix("y=").unwrap_or_else(|| panic!("{name}"));
                            v.parse().unwrap()
                        }
                    };
                    let what = format!("{}/{name}", out.display());
                    let batches = decode_file(&out.join(name));
                    let read = check_rows(&batches, shape, place, counts, &what);
                    if let Some(rows) = file["rows"].as_u64() {
                        assert_eq!(read, rows, "{what}: rows against the manifest's");
                    }
                    rows_of_destination += read;
                }
                assert_eq!(
                    entry["rows"].as_u64().unwrap(),
                    rows_of_destination,
                    "{}: destination {p}",
                    out.display()
                );
                total += rows_of_destination;
            }
        }
        "shuffle" => {
            let Shape::Hashed { n } = shape else {
                panic!("a shuffle layout partitioned by value");
            };
            let format = manifest["format"].as_str().unwrap();
            for worker in manifest["shuffle_files"].as_array().unwrap() {
                let data_name = worker["data"].as_str().unwrap();
                let index_name = worker["index"].as_str().unwrap();
                listed.insert(data_name.to_string());
                listed.insert(index_name.to_string());
                let data = std::fs::read(out.join(data_name)).unwrap();
                let (count, ranges) =
                    partout_output::read_shuffle_index(&out.join(index_name), data.len() as u64)
                        .unwrap();
                assert_eq!(count, n);
                // A destination's ranges of one worker, concatenated, are its stream.
                let mut streams = vec![Vec::new(); n as usize];
                for r in ranges {
                    let range = r.offset as usize..(r.offset + r.len) as usize;
                    streams[r.destination as usize].extend_from_slice(&data[range]);
                }
                for (p, stream) in streams.iter().enumerate() {
                    if stream.is_empty() {
                        continue;
                    }
                    let what = format!("{}/{data_name}, destination {p}", out.display());
                    let batches = match format {
                        "ipc" => decode_stream(stream, &what),
                        "presto" => partout_format::presto::decode_pages(stream, &schema())
                            .unwrap_or_else(|e| panic!("{what}: {e}")),
                        other => panic!("a shuffle of {other}"),
                    };
                    total += check_rows(&batches, shape, p as i64, counts, &what);
                }
            }
            let listed_rows: u64 = destinations
                .iter()
                .map(|d| d["rows"].as_u64().unwrap())
                .sum();
            assert_eq!(listed_rows, total, "{}", out.display());
        }
        other => panic!("layout {other}"),
    }
    assert_eq!(
        manifest["output_rows"].as_u64().unwrap(),
        total,
        "{}",
        out.display()
    );
    // Nothing on disk but what the manifest lists: no partial, hidden or stray file.
    let on_disk: BTreeSet<String> = files_under(out).into_iter().collect();
    assert_eq!(
        on_disk,
        listed,
        "{}: files on disk against the manifest's",
        out.display()
    );
}

/// What `out` holds: `None` for nothing there, else the name of the one of `sets` its rows
/// are, each once. Fails for anything else: a partial output, or a mix of two.
fn output_state(
    out: &Path,
    shape: Shape,
    sizes: (i64, i64),
    sets: &[(&'static str, RowSet)],
) -> Option<&'static str> {
    if !out.exists() {
        return None;
    }
    let mut counts = Counts::new(sizes.0, sizes.1);
    read_output(out, shape, &mut counts);
    let found = sets.iter().find(|(_, set)| set.holds(&counts));
    match found {
        Some((name, _)) => Some(name),
        None => panic!(
            "{} holds {}: neither of {:?}",
            out.display(),
            counts.summary(),
            sets.iter().map(|s| s.0).collect::<Vec<_>>()
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// 1. SIGKILL at seeded moments, every layout and write mode.
// ---------------------------------------------------------------------------------------------

/// Rows of the new input of the kill test: 0.15 to 0.6 s a run on two threads of an idle
/// 2-vCPU machine (three times that on a busy one), so that 20 kills of each of 8 cases fit in
/// well under a minute.
const KILL_ROWS: i64 = 4_000_000;
/// Rows of the output already there before a killed run.
const KILL_OLD_ROWS: i64 = 100_000;
/// Kills per case.
const KILLS: usize = 20;

/// Where a kill landed, judged by what it left: no staging directory yet; a staging directory
/// without a manifest (the workers writing); the manifest written or the output swapped in
/// but the staging directory still there (the commit); the new output in place and nothing
/// else (after the commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Landed {
    BeforeStaging,
    Writing,
    Committing,
    AfterCommit,
}

/// One output layout and write mode to kill runs of.
struct KillCase {
    name: &'static str,
    args: &'static [&'static str],
    /// `--mode`; with `error`, the run starts from nothing, else from an old output.
    mode: &'static str,
    shape: Shape,
    /// What the output holds once the run has committed.
    after: RowSet,
}

#[test]
fn a_run_killed_at_any_moment_leaves_the_old_output_or_the_new_one_whole() {
    let _serial = serial();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("new.parquet");
    std::fs::write(&input, file_bytes(InputFormat::Parquet, 0..KILL_ROWS)).unwrap();
    let old_input = dir.path().join("old.parquet");
    let old_rows = OLD_BASE..OLD_BASE + KILL_OLD_ROWS;
    std::fs::write(&old_input, file_bytes(InputFormat::Parquet, old_rows)).unwrap();
    // (A limit that makes the workers flush often: runs long enough to kill at many moments.)
    let common = ["--threads", "2", "--memory-limit", "32MiB"];
    let cases = [
        KillCase {
            name: "ipc-stream",
            args: &["--format", "ipc", "--by", "k", "-n", "64"],
            mode: "error",
            shape: Shape::Hashed { n: 64 },
            after: RowSet::NEW,
        },
        KillCase {
            name: "ipc-file",
            args: &[
                "--format",
                "ipc",
                "--file-statistics",
                "--by",
                "k",
                "-n",
                "64",
            ],
            mode: "overwrite",
            shape: Shape::Hashed { n: 64 },
            after: RowSet::NEW,
        },
        KillCase {
            name: "presto",
            args: &["--format", "presto", "--by", "k", "-n", "64"],
            mode: "overwrite",
            shape: Shape::Hashed { n: 64 },
            after: RowSet::NEW,
        },
        KillCase {
            // 300 Parquet writers do not fit 32 MiB: rows staged, each file written whole.
            name: "parquet",
            args: &["--format", "parquet", "--by", "k", "-n", "300"],
            mode: "overwrite",
            shape: Shape::Hashed { n: 300 },
            after: RowSet::NEW,
        },
        KillCase {
            name: "shuffle",
            args: &[
                "--format", "ipc", "--layout", "shuffle", "--by", "k", "-n", "64",
            ],
            mode: "overwrite",
            shape: Shape::Hashed { n: 64 },
            after: RowSet::NEW,
        },
        KillCase {
            name: "hive-overwrite",
            args: &["--partition-by", "y"],
            mode: "overwrite",
            shape: Shape::Hive,
            after: RowSet::NEW,
        },
        KillCase {
            name: "hive-append",
            args: &["--partition-by", "y", "--format", "ipc"],
            mode: "append",
            shape: Shape::Hive,
            after: RowSet::BOTH,
        },
        KillCase {
            name: "hive-overwrite-partitions",
            args: &["--partition-by", "y"],
            mode: "overwrite-partitions",
            shape: Shape::Hive,
            after: RowSet::REPLACED_VALUES,
        },
    ];
    let sizes = (KILL_ROWS, KILL_OLD_ROWS);
    let mut moments = Moments(7);
    let mut landed_all: Vec<(&str, Landed)> = Vec::new();
    let mut leftovers_cleared = 0;
    for case in &cases {
        let base = dir.path().join(case.name);
        std::fs::create_dir(&base).unwrap();
        let log = base.join("stderr");
        let args_for = |input: &Path, out: &Path, mode: &str| {
            let mut args = vec![path_arg(input)];
            args.extend(strings(case.args));
            args.extend(strings(&common));
            args.extend(strings(&["--mode", mode, "-o"]));
            args.push(path_arg(out));
            args
        };
        // The output there before each killed run: none, or an earlier run's of the old rows.
        let prior = (case.mode != "error").then(|| {
            let prior = base.join("prior");
            let made = run_to_end(&args_for(&old_input, &prior, "error"), &log);
            assert_success(&made, case.name);
            let state = output_state(&prior, case.shape, sizes, &[("old", RowSet::OLD)]);
            assert_eq!(state, Some("old"));
            prior
        });
        let mut sets = vec![("new", case.after)];
        if prior.is_some() {
            sets.push(("old", RowSet::OLD));
        }
        // One whole run, into a directory of its own (from the same old output), timed.
        let timing = base.join("timing");
        std::fs::create_dir(&timing).unwrap();
        let timed_out = timing.join("out");
        if let Some(prior) = &prior {
            copy_tree(prior, &timed_out);
        }
        let whole = run_to_end(&args_for(&input, &timed_out, case.mode), &log);
        assert_success(&whole, case.name);
        assert_eq!(
            output_state(&timed_out, case.shape, sizes, &sets),
            Some("new"),
            "{}: the whole run's output",
            case.name
        );
        std::fs::remove_dir_all(&timing).unwrap();

        // The killed runs, each from the output there before: a moment in each twentieth of
        // the whole run's time.
        let parent = base.join("runs");
        std::fs::create_dir(&parent).unwrap();
        let out = parent.join("out");
        let restore = |out: &Path| {
            if out.exists() {
                std::fs::remove_dir_all(out).unwrap();
            }
            if let Some(prior) = &prior {
                copy_tree(prior, out);
            }
        };
        restore(&out);
        let args = args_for(&input, &out, case.mode);
        let mut landed = Vec::new();
        for k in 0..KILLS {
            let at = whole.seconds * (k as f64 + moments.next()) / KILLS as f64;
            let mut child = repartition(&args, &log).spawn().unwrap();
            let pid = child.id();
            std::thread::sleep(Duration::from_secs_f64(at));
            // SIGKILL: nothing of the process runs after it.
            let _ = child.kill();
            let status = wait_bounded(&mut child, Duration::from_secs(30), case.name);
            let state = output_state(&out, case.shape, sizes, &sets);
            let staging = parent.join(format!(".out.partout-{pid}-0"));
            let where_ = match (state, staging.exists()) {
                (Some("new"), true) => Landed::Committing,
                (Some("new"), false) => Landed::AfterCommit,
                (_, false) => Landed::BeforeStaging,
                (_, true) if staging.join("_manifest.json").exists() => Landed::Committing,
                (_, true) => Landed::Writing,
            };
            match state {
                Some("new") => {}
                Some(_) => assert!(prior.is_some(), "{}: an output from nothing", case.name),
                None => assert!(prior.is_none(), "{}: the old output gone", case.name),
            }
            if status.success() {
                assert_eq!(
                    state,
                    Some("new"),
                    "{}: exited 0 without its output",
                    case.name
                );
            }
            landed.push(where_);
            if state == Some("new") {
                // Committed: the next kill starts from the old output again.
                restore(&out);
            }
        }
        // And a kill aimed at the commit, the window "old or new, whole" is about: as soon as
        // the run's manifest is in its staging directory (the swap and the old output's
        // removal follow), until one lands there.
        let mut aimed = 0;
        let mut at_commit = landed.contains(&Landed::Committing);
        while !at_commit {
            aimed += 1;
            assert!(
                aimed <= 10,
                "{}: no kill of 10 landed in the commit",
                case.name
            );
            let mut child = repartition(&args, &log).spawn().unwrap();
            let staging = parent.join(format!(".out.partout-{}-0", child.id()));
            let deadline = Instant::now() + Duration::from_secs(60);
            while !staging.join("_manifest.json").exists() && Instant::now() < deadline {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            let _ = child.kill();
            wait_bounded(&mut child, Duration::from_secs(30), case.name);
            let state = output_state(&out, case.shape, sizes, &sets);
            match state {
                Some("new") | None if prior.is_none() => {}
                Some("new") | Some("old") if prior.is_some() => {}
                _ => panic!("{}: a kill at the commit left {state:?}", case.name),
            }
            // (After the swap the staging directory holds the old output, being removed.)
            at_commit = staging.exists()
                && (state == Some("new") || staging.join("_manifest.json").exists());
            if state == Some("new") {
                restore(&out);
            }
        }
        // The next run clears what the dead ones left, and finishes.
        let left: Vec<String> = names_in(&parent)
            .into_iter()
            .filter(|n| n.contains("partout"))
            .collect();
        leftovers_cleared += left.len();
        let last = run_to_end(&args, &log);
        assert_success(&last, case.name);
        assert_eq!(output_state(&out, case.shape, sizes, &sets), Some("new"));
        assert_eq!(
            names_in(&parent),
            vec!["out".to_string()],
            "{}: left beside the output (before the last run: {left:?})",
            case.name
        );
        let count = |l: Landed| landed.iter().filter(|&&x| x == l).count();
        eprintln!(
            "{:<26} whole run {:.2} s; kills: {} before staging, {} writing, {} committing, \
             {} after the commit; {aimed} aimed at the commit; {} leftovers cleared by the \
             next run",
            case.name,
            whole.seconds,
            count(Landed::BeforeStaging),
            count(Landed::Writing),
            count(Landed::Committing),
            count(Landed::AfterCommit),
            left.len()
        );
        landed_all.extend(landed.into_iter().map(|l| (case.name, l)));
    }
    let count = |l: Landed| landed_all.iter().filter(|x| x.1 == l).count();
    eprintln!(
        "{} kills: {} before staging, {} while writing, {} during the commit, {} after it; \
         {} leftovers cleared; {:.1} s",
        landed_all.len(),
        count(Landed::BeforeStaging),
        count(Landed::Writing),
        count(Landed::Committing),
        count(Landed::AfterCommit),
        leftovers_cleared,
        started.elapsed().as_secs_f64()
    );
    // The kills must have caught runs at work, not only before or after them.
    assert!(
        count(Landed::Writing) >= landed_all.len() / 2,
        "too few kills landed while the runs wrote: the runs are too short"
    );
    assert!(
        leftovers_cleared > 0,
        "no killed run left a staging directory"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. A disk that fills up mid-run.
// ---------------------------------------------------------------------------------------------

/// Fails, saying so, unless the test runs as root (it mounts a tmpfs).
fn assert_root(what: &str) {
    // SAFETY: geteuid takes nothing and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "{what} needs root: it mounts a small tmpfs to fill (run the tests as root)"
    );
}

/// A tmpfs of a given size mounted on a directory the test made, unmounted when dropped,
/// also when the test fails.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, bytes: u64) -> Self {
        std::fs::create_dir(path).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(path)
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mounting a tmpfs on {} failed",
            path.display()
        );
        Self {
            path: path.to_path_buf(),
        }
    }

    /// Bytes in use on it.
    fn used(&self) -> u64 {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(self.path.as_os_str().as_bytes()).unwrap();
        let mut stat = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
        // SAFETY: `path` is a NUL-terminated string and `stat` points to a statvfs to fill.
        let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
        assert_eq!(rc, 0, "statvfs: {}", std::io::Error::last_os_error());
        // SAFETY: statvfs succeeded, so it filled `stat` (which was zeroed besides).
        let stat = unsafe { stat.assume_init() };
        (stat.f_blocks - stat.f_bfree) * stat.f_frsize
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Busy (a process of a failed test still in it): detached now, gone when free.
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
    }
}

/// A run to its end (at most two minutes), and its peak resident memory.
struct Measured {
    code: Option<i32>,
    stderr: String,
    peak_rss: u64,
}

/// The high-water mark of process `pid`'s resident memory (`VmHWM`), while it runs.
fn resident_peak(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Runs to the end, sampling the process's `VmHWM` every millisecond: a high-water mark, so
/// the last sample before the exit holds the peak of all but the run's last millisecond.
/// (`wait4`'s `ru_maxrss` would not do: it keeps the peak of the image before `exec`, which
/// after `fork` is this test's own.)
fn run_measured(args: &[String], env: &[(&str, &Path)], log: &Path) -> Measured {
    let mut command = repartition(args, log);
    command.envs(env.iter().map(|(k, v)| (k, v.as_os_str())));
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut peak = 0;
    let status = loop {
        if let Some(high) = resident_peak(child.id()) {
            peak = peak.max(high);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?}: still running after two minutes");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    Measured {
        code: status.code(),
        stderr: std::fs::read_to_string(log).unwrap(),
        peak_rss: peak,
    }
}

/// An S3 endpoint holding an empty bucket: a GET (a listing) answers that nothing is there;
/// anything else (an upload, a delete) is refused. Each request's first line is kept.
struct EmptyBucket {
    endpoint: String,
    requests: Arc<Mutex<Vec<String>>>,
}

/// A listing of nothing, as S3 answers ListObjectsV2.
const EMPTY_LISTING: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>bucket</Name>\
<Prefix>out/</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys>\
<IsTruncated>false</IsTruncated></ListBucketResult>";

impl EmptyBucket {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        // (Serves until the test process ends.)
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || serve_s3_connection(stream, &seen));
            }
        });
        Self { endpoint, requests }
    }
}

/// Answers the HTTP/1.1 requests of one connection until the client closes it.
fn serve_s3_connection(stream: std::net::TcpStream, seen: &Mutex<Vec<String>>) {
    use std::io::{BufRead, Read, Write};
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = std::io::BufReader::new(clone);
    let mut writer = stream;
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, v)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        seen.lock().unwrap().push(first.trim_end().to_string());
        let (status, body) = match first.starts_with("GET ") {
            true => ("200 OK", EMPTY_LISTING),
            false => (
                "403 Forbidden",
                "<Error><Code>AccessDenied</Code><Message>refused</Message></Error>",
            ),
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// Size of the tmpfs that fills.
const DISK_BYTES: u64 = 8 << 20;
/// The memory limit of the runs that fill it.
const DISK_RUN_LIMIT: u64 = 32 << 20;
/// What a run's resident memory may take above `--memory-limit`: the program and reading the
/// input, which the test measures (into one destination under a 1 MiB limit: 24 to 26 MiB
/// here) and holds within this too.
const OVER_THE_LIMIT: u64 = 32 << 20;
/// Rows of the input written onto the full disk: its every output is several times the disk.
const DISK_ROWS: i64 = 1_000_000;

#[test]
fn a_disk_that_fills_up_fails_the_run_naming_it_and_leaves_nothing_on_it() {
    let _serial = serial();
    assert_root("a_disk_that_fills_up_fails_the_run_naming_it_and_leaves_nothing_on_it");
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    std::fs::write(&input, file_bytes(InputFormat::Parquet, 0..DISK_ROWS)).unwrap();
    let log = dir.path().join("stderr");
    // (Declared after `dir`: unmounted before the directory is removed.)
    let disk = Tmpfs::mount(&dir.path().join("full"), DISK_BYTES);
    let empty = disk.used();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;

    // What reading the input takes alone: one destination, a tiny limit, a roomy disk.
    let roomy = dir.path().join("roomy");
    let mut alone = vec![path_arg(&input)];
    alone.extend(strings(&["--format", "ipc", "--by", "k", "-n", "1"]));
    alone.extend(strings(&["--memory-limit", "1MiB", "--threads", "2", "-o"]));
    alone.push(path_arg(&roomy));
    let reading = run_measured(&alone, &[], &log);
    assert_eq!(reading.code, Some(0), "{}", reading.stderr);
    std::fs::remove_dir_all(&roomy).unwrap();
    eprintln!("reading alone: peak {:.1} MiB", mib(reading.peak_rss));
    assert!(
        reading.peak_rss <= OVER_THE_LIMIT,
        "reading alone peaks at {} bytes, past the {OVER_THE_LIMIT} allowed over the limit",
        reading.peak_rss
    );

    let cases: [(&str, &[&str]); 6] = [
        ("parquet, written as flushed", &["--by", "k", "-n", "8"]),
        ("parquet, rows staged first", &["--by", "k", "-n", "300"]),
        (
            "arrow ipc streams",
            &["--format", "ipc", "--by", "k", "-n", "64"],
        ),
        (
            "arrow ipc files, sorted runs spilled",
            &["--format", "ipc", "--by", "k", "-n", "4", "--sort-by", "s"],
        ),
        (
            "presto pages, shuffle layout",
            &[
                "--format", "presto", "--layout", "shuffle", "--by", "k", "-n", "64",
            ],
        ),
        ("hive dataset", &["--partition-by", "y"]),
    ];
    let limit = DISK_RUN_LIMIT.to_string();
    for (name, case) in cases {
        let args_to = |out: &Path| {
            let mut args = vec![path_arg(&input)];
            args.extend(strings(case));
            args.extend(strings(&["--threads", "2", "--memory-limit", &limit, "-o"]));
            args.push(path_arg(out));
            args
        };
        // On a roomy disk the same run succeeds, and writes more than the small disk holds.
        let run = run_measured(&args_to(&roomy), &[], &log);
        assert_eq!(run.code, Some(0), "{name}: {}", run.stderr);
        let written = manifest(&roomy)["output_bytes"].as_u64().unwrap();
        assert!(written > DISK_BYTES, "{name}: only {written} bytes out");
        std::fs::remove_dir_all(&roomy).unwrap();

        // Three times: which worker meets the full disk first, and what the others meet
        // after it (a destination's file failed by another worker), varies from run to run.
        for _ in 0..3 {
            let out = disk.path.join("out");
            let run = run_measured(&args_to(&out), &[], &log);
            eprintln!(
                "{name}: {:.1} MiB out on a roomy disk; on the full one exit {:?}, peak \
                 {:.1} MiB (limit {:.0} MiB): {}",
                mib(written),
                run.code,
                mib(run.peak_rss),
                mib(DISK_RUN_LIMIT),
                run.stderr.trim()
            );
            assert_disk_failure(&run, &disk, empty, name);
        }
    }

    // An output in an object store is staged under TMPDIR before it is uploaded: that disk
    // full, the run fails the same way, and uploads nothing.
    let bucket = EmptyBucket::start();
    let mut args = vec![path_arg(&input)];
    args.extend(strings(&["--format", "ipc", "--by", "k", "-n", "64"]));
    args.extend(strings(&["--threads", "2", "--memory-limit", &limit]));
    args.extend(strings(&["-o", "s3://bucket/out"]));
    for option in [
        format!("aws_endpoint={}", bucket.endpoint),
        "aws_allow_http=true".into(),
        "aws_access_key_id=testing".into(),
        "aws_secret_access_key=testing".into(),
        "aws_region=us-east-1".into(),
    ] {
        args.extend(["--storage-option".to_string(), option]);
    }
    let run = run_measured(&args, &[("TMPDIR", &disk.path)], &log);
    let requests = bucket.requests.lock().unwrap().clone();
    eprintln!(
        "to a store, staged under TMPDIR on the full disk: exit {:?}, peak {:.1} MiB, \
         requests {requests:?}: {}",
        run.code,
        mib(run.peak_rss),
        run.stderr.trim()
    );
    assert_disk_failure(&run, &disk, empty, "to a store, staged under TMPDIR");
    assert!(
        requests.iter().any(|r| r.starts_with("GET ")),
        "the store was never asked what the prefix holds: {requests:?}"
    );
    assert!(
        requests.iter().all(|r| r.starts_with("GET ")),
        "a failed run sent the store more than listings: {requests:?}"
    );
    eprintln!("the full disk: {:.1} s", started.elapsed().as_secs_f64());
}

/// The run on the full disk failed as a failed run must: exit code 2, one line naming the
/// disk's path and its being full, nothing left on the disk, and within its memory limit.
fn assert_disk_failure(run: &Measured, disk: &Tmpfs, empty: u64, name: &str) {
    assert_eq!(run.code, Some(2), "{name}: {}", run.stderr);
    let err = run.stderr.trim();
    assert_eq!(err.lines().count(), 1, "{name}: {err}");
    assert!(
        err.contains("No space left on device"),
        "{name}: the error does not say the disk is full: {err}"
    );
    assert!(
        err.contains(disk.path.to_str().unwrap()),
        "{name}: the error does not name the full disk's path ({}): {err}",
        disk.path.display()
    );
    assert!(
        !err.contains("panicked") && !err.contains("failed unexpectedly"),
        "{name}: {err}"
    );
    let left = files_under(&disk.path);
    assert!(left.is_empty(), "{name}: files left on the disk: {left:?}");
    let dirs = names_in(&disk.path);
    assert!(dirs.is_empty(), "{name}: left on the disk: {dirs:?}");
    assert_eq!(disk.used(), empty, "{name}: space still in use on the disk");
    assert!(
        run.peak_rss <= DISK_RUN_LIMIT + OVER_THE_LIMIT,
        "{name}: peak resident memory {} bytes passes the limit {DISK_RUN_LIMIT} plus {OVER_THE_LIMIT}",
        run.peak_rss
    );
}

// ---------------------------------------------------------------------------------------------
// 3. An input truncated, rewritten or replaced while it is read.
// ---------------------------------------------------------------------------------------------

/// What becomes of the input while the run reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Cut to half its length.
    Truncated,
    /// Written over, in place, with other rows (as many).
    Rewritten,
    /// Written over in place, not truncated first, with as many bytes laid out alike: the
    /// same rows, their strings in capitals. Only its modification time tells the change.
    RewrittenAlike,
    /// Another file renamed over it: as many bytes laid out alike (as `RewrittenAlike`), and
    /// the same modification time. Only its inode tells the change; a run that holds the file
    /// open reads it whole as it was.
    Replaced,
}

/// Whether process `pid` holds `file` open.
fn holds_open(pid: u32, file: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == file))
}

/// The run's error for an input it could not read whole: exit code 2, one line naming the
/// file, no panic, nothing at the output and no staging left beside it.
fn assert_input_failure(status: ExitStatus, stderr: &str, input: &Path, out: &Path, what: &str) {
    assert_eq!(status.code(), Some(2), "{what}: {stderr}");
    let err = stderr.trim();
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    assert!(
        err.contains(input.to_str().unwrap()),
        "{what}: the error does not name {}: {err}",
        input.display()
    );
    assert!(
        !err.contains("panicked") && !err.contains("failed unexpectedly"),
        "{what}: {err}"
    );
    assert!(!out.exists(), "{what}: an output at {}", out.display());
    let parent = out.parent().unwrap();
    let left: Vec<String> = names_in(parent)
        .into_iter()
        .filter(|n| n.contains("partout"))
        .collect();
    assert!(left.is_empty(), "{what}: left beside the output: {left:?}");
}

/// The output's arguments of the input tests: 16 Arrow IPC streams.
fn reading_args(input: &Path, out: &Path) -> Vec<String> {
    let mut args = vec![path_arg(input)];
    args.extend(strings(&["--format", "ipc", "--by", "k", "-n", "16"]));
    args.extend(strings(&[
        "--threads",
        "2",
        "--memory-limit",
        "64MiB",
        "-o",
    ]));
    args.push(path_arg(out));
    args
}

/// Runs the job on a file of `format`, and does `fault` to the file once the run is reading
/// it (its staging directory made and the file open in the process). A run that ends well
/// anyway read everything before the fault: its output must be whole, and the attempt is
/// made again with twice the rows. What the failed run said.
fn fault_mid_run(dir: &Path, format: InputFormat, fault: Fault) -> String {
    let what = format!("{format:?} input {fault:?}");
    let mut rows = 1_000_000;
    for attempt in 0..4 {
        let base = dir.join(format!("{format:?}-{fault:?}-{attempt}"));
        std::fs::create_dir(&base).unwrap();
        let input = base.join(match format {
            InputFormat::Parquet => "in.parquet",
            InputFormat::IpcFile => "in.arrow",
        });
        let first = file_bytes(format, 0..rows);
        std::fs::write(&input, &first).unwrap();
        let other = match fault {
            Fault::Rewritten => file_bytes(format, OLD_BASE..OLD_BASE + rows),
            Fault::RewrittenAlike | Fault::Replaced => file_bytes_with(format, 0..rows, other_text),
            Fault::Truncated => Vec::new(),
        };
        if matches!(fault, Fault::RewrittenAlike | Fault::Replaced) {
            assert_eq!(other.len(), first.len(), "{what}: not as many bytes");
        }
        let input = input.canonicalize().unwrap();
        let out = base.join("out");
        let log = base.join("stderr");
        let mut child = repartition(&reading_args(&input, &out), &log)
            .spawn()
            .unwrap();
        let pid = child.id();
        let staging = base.join(format!(".out.partout-{pid}-0"));
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut struck = false;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: still running after 60 s, never seen reading");
            }
            if staging.exists() && holds_open(pid, &input) {
                match fault {
                    Fault::Truncated => {
                        let file = std::fs::OpenOptions::new()
                            .write(true)
                            .open(&input)
                            .unwrap();
                        let len = file.metadata().unwrap().len();
                        file.set_len(len / 2).unwrap();
                    }
                    Fault::Rewritten => std::fs::write(&input, &other).unwrap(),
                    Fault::RewrittenAlike => {
                        use std::os::unix::fs::FileExt;
                        let file = std::fs::OpenOptions::new()
                            .write(true)
                            .open(&input)
                            .unwrap();
                        file.write_all_at(&other, 0).unwrap();
                    }
                    Fault::Replaced => {
                        let modified = std::fs::metadata(&input).unwrap().modified().unwrap();
                        let beside = base.join("replacement");
                        std::fs::write(&beside, &other).unwrap();
                        let file = std::fs::File::options().write(true).open(&beside).unwrap();
                        file.set_modified(modified).unwrap();
                        drop(file);
                        std::fs::rename(&beside, &input).unwrap();
                    }
                }
                struck = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let status = wait_bounded(&mut child, Duration::from_secs(60), &what);
        let stderr = std::fs::read_to_string(&log).unwrap();
        if !struck || status.success() {
            // The run read all it needed before the fault: then its output is whole, of the
            // rows it was given first (never a mix with the rewritten ones, never short).
            assert!(status.success(), "{what}: {stderr}");
            let mut counts = Counts::new(rows, rows);
            read_output(&out, Shape::Hashed { n: 16 }, &mut counts);
            assert!(
                RowSet::NEW.holds(&counts),
                "{what}: the run succeeded with {}",
                counts.summary()
            );
            if struck && fault == Fault::Replaced {
                // The run reads the file it opened, which a rename does not touch: the rows it
                // was given, whole (the version check is held to a rename in partout-input's
                // frames tests).
                return format!("{what} ({rows} rows): the file opened read whole");
            }
            match struck {
                true => eprintln!("{what}: {rows} rows read before the fault; again with more"),
                false => eprintln!("{what}: {rows} rows read before the run was seen reading"),
            }
            rows *= 2;
            continue;
        }
        assert_input_failure(status, &stderr, &input, &out, &what);
        // Where only the check of the file's version can tell (the checked readers find
        // every byte well formed), its words: what changed, and that the rows are not trusted.
        let said = match fault {
            Fault::RewrittenAlike => Some("changed while the run read it (written over)"),
            Fault::Replaced => {
                Some("changed while the run read it (another file was put in its place)")
            }
            Fault::Truncated | Fault::Rewritten => None,
        };
        if let Some(said) = said {
            assert!(stderr.contains(said), "{what}: {stderr}");
        }
        return format!(
            "{what} ({rows} rows, attempt {}): {}",
            attempt + 1,
            stderr.trim()
        );
    }
    panic!("{what}: the fault never struck while the run read, in 4 attempts")
}

#[test]
fn an_input_cut_short_or_rewritten_while_read_ends_the_run_with_an_error_naming_it() {
    let _serial = serial();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    for format in [InputFormat::Parquet, InputFormat::IpcFile] {
        // Cut short before the run: at half, and by its last byte.
        let whole = file_bytes(format, 0..100_000);
        for cut in [whole.len() / 2, whole.len() - 1] {
            let base = dir.path().join(format!("{format:?}-cut-{cut}"));
            std::fs::create_dir(&base).unwrap();
            let input = base.join(match format {
                InputFormat::Parquet => "cut.parquet",
                InputFormat::IpcFile => "cut.arrow",
            });
            std::fs::write(&input, &whole[..cut]).unwrap();
            let out = base.join("out");
            let run = run_to_end(&reading_args(&input, &out), &base.join("stderr"));
            let what = format!("{format:?} input cut to {cut} of {} bytes", whole.len());
            eprintln!("{what}: {}", run.stderr.trim());
            assert_input_failure(run.status, &run.stderr, &input, &out, &what);
        }
        for fault in [
            Fault::Truncated,
            Fault::Rewritten,
            Fault::RewrittenAlike,
            Fault::Replaced,
        ] {
            eprintln!("{}", fault_mid_run(dir.path(), format, fault));
        }
    }
    eprintln!("inputs: {:.1} s", started.elapsed().as_secs_f64());
}

// ---------------------------------------------------------------------------------------------
// 4. Signals: Ctrl-C, SIGTERM and SIGHUP stop the run and undo it (a second one quitting at
//    once is the handler's decision, tested beside it in src/repartition.rs).
// ---------------------------------------------------------------------------------------------

/// A run of `rows` rows of a Parquet file into `n` Arrow IPC streams under `base`, seen at
/// work: its staging directory made and the input open. The child, its output, its staging
/// directory and its stderr; `None` when the run ended first.
fn run_seen_writing(base: &Path, rows: i64, n: u32) -> Option<(Child, PathBuf, PathBuf, PathBuf)> {
    std::fs::create_dir_all(base).unwrap();
    let input = base.join("in.parquet");
    std::fs::write(&input, file_bytes(InputFormat::Parquet, 0..rows)).unwrap();
    let input = input.canonicalize().unwrap();
    let out = base.join("out");
    let log = base.join("stderr");
    let mut args = vec![path_arg(&input)];
    args.extend(strings(&["--format", "ipc", "--by", "k", "-n"]));
    args.push(n.to_string());
    args.extend(strings(&["--threads", "2", "-o"]));
    args.push(path_arg(&out));
    let mut child = repartition(&args, &log).spawn().unwrap();
    let staging = base.join(format!(".out.partout-{}-0", child.id()));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        if staging.exists() && holds_open(child.id(), &input) {
            return Some((child, out, staging, log));
        }
        assert!(Instant::now() < deadline, "never seen writing");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Sends the signal named `signal` (`INT`, `TERM`, `HUP`) to `child`, by the shell's `kill`.
fn signal(child: &Child, signal: &str) {
    let sent = Command::new("sh")
        .args(["-c", &format!("kill -{signal} {}", child.id())])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal} {}", child.id());
}

#[test]
fn ctrl_c_sigterm_and_sighup_each_stop_the_run_leave_nothing_and_exit_130() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    for (name, sig) in [("SIGINT", "INT"), ("SIGTERM", "TERM"), ("SIGHUP", "HUP")] {
        let mut rows = 1_000_000;
        let stderr = loop {
            let base = dir.path().join(format!("{name}-{rows}"));
            let Some((mut child, out, staging, log)) = run_seen_writing(&base, rows, 64) else {
                // Ended before it was seen at work: again, with more rows.
                assert!(
                    rows < 16_000_000,
                    "{name}: every run ended before it was seen"
                );
                rows *= 2;
                continue;
            };
            signal(&child, sig);
            let status = wait_bounded(&mut child, Duration::from_secs(60), name);
            let stderr = std::fs::read_to_string(&log).unwrap();
            assert_eq!(status.code(), Some(130), "{name}: {stderr}");
            assert!(!out.exists(), "{name}: an output was left");
            assert!(!staging.exists(), "{name}: its staging directory was left");
            assert_eq!(names_in(&base), ["in.parquet", "stderr"], "{name}");
            break stderr;
        };
        assert!(
            stderr.contains("partout: interrupted, undoing what was written")
                && stderr.contains("interrupted: nothing was written"),
            "{name}: {stderr}"
        );
    }
}

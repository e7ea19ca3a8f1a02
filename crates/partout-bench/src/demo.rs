//! `partout demo`: the main job on built-in data. Generates TPC-H lineitem in-process,
//! partitions it in memory by `l_orderkey` into Arrow IPC streams with partout and with
//! DataFusion's way (DataFusion 55's foldhash ids, re-created, a grouped take per batch, an IPC writer per destination),
//! checks every destination's schema, rows and values, then repartitions it on disk (a Parquet
//! file in, one Parquet file per destination out) with one thread and with every core, beside
//! DuckDB's `COPY ... PARTITION_BY` of the same job when DuckDB is installed (its `duckdb`
//! command, or its Python module), and prints the throughput of each beside its baseline.
//! Contenders run in alternation, round after round, and the figures are medians, so that a
//! busy machine slows them alike.
//!
//! Every on-disk run is read back, untimed: partout's files destination by destination
//! against the test kit's reference of its hash (schema, rows and values); DuckDB's, which has
//! its own hash and its own Parquet types, by value (cast back to the input's types): its
//! destinations together are the input exactly, and DuckDB's own `hash(l_orderkey) % n` puts
//! every row where it is.

use crate::fingerprint::{self, Fingerprint, Reference};
use crate::harness::{alternate, medians, time};
use crate::lineitem;
use crate::report::outln;
use crate::writer::{Codec, Contender, Hash, Setup, run_once};
use anyhow::{Context, Result, ensure};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_job::{Compression, JobOptions, repartition};
use std::path::Path;

/// Options of `partout demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoOptions {
    /// TPC-H scale factor of the generated lineitem table.
    #[arg(long, default_value_t = 0.1)]
    pub sf: f64,
    /// Destinations.
    #[arg(short = 'n', long, default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(partout_core::plan::MAX_PARTITIONS)))]
    pub partitions: u32,
    /// Rounds of every contender (alternating); figures are medians.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Times the table streams through each in-memory contender per round (a run long enough
    /// to measure, without a longer generation).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub passes: u32,
}

/// How DuckDB can be run here, if at all.
#[derive(Debug, Clone, Copy)]
enum DuckDb {
    /// The `duckdb` command.
    Cli,
    /// Python with the `duckdb` module: `$PARTOUT_PYTHON`, or `python3`.
    Python,
}

/// The Python the demo runs DuckDB's module with: `$PARTOUT_PYTHON` if set, else `python3`.
fn python() -> String {
    std::env::var("PARTOUT_PYTHON").unwrap_or_else(|_| "python3".into())
}

impl DuckDb {
    /// The DuckDB found on this machine: the `duckdb` command first, then the Python module
    /// (of `$PARTOUT_PYTHON`, or `python3`).
    fn find() -> Option<Self> {
        let runs = |program: &str, args: &[&str]| {
            std::process::Command::new(program)
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        };
        if runs("duckdb", &["-c", "SELECT 1"]) {
            Some(Self::Cli)
        } else if runs(&python(), &["-c", "import duckdb"]) {
            Some(Self::Python)
        } else {
            None
        }
    }

    /// Runs `sql` and gives its output; a failure is an error with DuckDB's message.
    fn run(self, sql: &str) -> Result<String> {
        let output = match self {
            Self::Cli => std::process::Command::new("duckdb")
                .args(["-csv", "-noheader", "-c", sql])
                .output(),
            Self::Python => std::process::Command::new(python())
                .args([
                    "-c",
                    "import duckdb, sys\n\
                     con = duckdb.connect()\n\
                     for statement in sys.argv[1].split(';'):\n\
                     \x20   if statement.strip():\n\
                     \x20       rows = con.execute(statement).fetchall()\n\
                     for row in rows:\n\
                     \x20   print(','.join(map(str, row)))",
                    sql,
                ])
                .output(),
        }
        .context("starting DuckDB")?;
        ensure!(
            output.status.success(),
            "DuckDB failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// DuckDB's way of the on-disk job: `input` hash-partitioned by `l_orderkey` into `n`
    /// directories of Snappy Parquet under `output`, on `threads` threads; the seconds the
    /// command took, less `startup` (what starting DuckDB alone takes).
    fn repartition(
        self,
        input: &Path,
        output: &Path,
        n: u32,
        threads: usize,
        startup: f64,
    ) -> Result<f64> {
        let _ = std::fs::remove_dir_all(output);
        let started = std::time::Instant::now();
        self.run(&format!(
            "SET threads={threads}; \
             COPY (SELECT *, hash(l_orderkey) % {n} AS p FROM read_parquet('{}')) \
             TO '{}' (FORMAT parquet, PARTITION_BY (p), COMPRESSION snappy);",
            quote(input),
            quote(output)
        ))?;
        Ok((started.elapsed().as_secs_f64() - startup).max(0.0))
    }

    /// The first destination of DuckDB's output under `output` holding rows that DuckDB's own
    /// `hash(l_orderkey) % n` sends elsewhere, and how many (`None`: every row is where its
    /// hash says).
    fn misplaced(self, output: &Path, n: u32) -> Result<Option<(u32, u64)>> {
        let found = self.run(&format!(
            "SELECT p, count(*) FROM read_parquet('{}/*/*.parquet', hive_partitioning = true) \
             WHERE hash(l_orderkey) % {n} <> p GROUP BY p ORDER BY p LIMIT 1;",
            quote(output)
        ))?;
        let Some(line) = found.lines().find(|l| !l.trim().is_empty()) else {
            return Ok(None);
        };
        let parse = || -> Option<(u32, u64)> {
            let (p, count) = line.trim().split_once(',')?;
            Some((p.parse().ok()?, count.parse().ok()?))
        };
        parse()
            .map(Some)
            .with_context(|| format!("DuckDB's misplaced rows: {found:?}"))
    }

    /// What starting DuckDB and running nothing takes: the median of three runs.
    fn startup(self) -> Result<f64> {
        let mut seconds = (0..3)
            .map(|_| {
                let started = std::time::Instant::now();
                self.run("SELECT 1;")?;
                Ok(started.elapsed().as_secs_f64())
            })
            .collect::<Result<Vec<f64>>>()?;
        seconds.sort_by(f64::total_cmp);
        Ok(seconds[1])
    }
}

/// `path` quoted as an SQL string's contents.
fn quote(path: &Path) -> String {
    path.display().to_string().replace('\'', "''")
}

/// Checks DuckDB's output under `output` (a directory `p=K` per destination `K`), by value:
/// its files read back and cast to the input's `schema` (DuckDB writes its own Parquet types:
/// plain strings for views, nullable columns), destination by destination. Together they
/// must be `whole`, the input, every row once; and DuckDB's own hash must put every row where
/// it is. Then every destination holds exactly the rows DuckDB's partitioning gives it.
fn check_duckdb_output(
    duckdb: DuckDb,
    output: &Path,
    n: u32,
    schema: &SchemaRef,
    whole: &Fingerprint,
) -> Result<()> {
    let mut destinations = vec![Fingerprint::empty(schema.clone()); n as usize];
    for path in fingerprint::files_under(output)? {
        let directory = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        let p = directory
            .strip_prefix("p=")
            .and_then(|p| p.parse::<u32>().ok())
            .filter(|&p| p < n)
            .with_context(|| {
                format!(
                    "DuckDB wrote {}, outside the directories p=0 to p={}",
                    path.display(),
                    n - 1
                )
            })?;
        let file = std::fs::File::open(&path)?;
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)?
            .build()?;
        for batch in reader {
            let batch = batch?;
            // Columns by name and in order: the input's, no more, no fewer.
            let names = |s: &arrow_schema::Schema| -> Vec<String> {
                s.fields().iter().map(|f| f.name().clone()).collect()
            };
            ensure!(
                names(&batch.schema()) == names(schema),
                "DuckDB's {} has columns {:?}, the input {:?}",
                path.display(),
                names(&batch.schema()),
                names(schema)
            );
            let columns = schema
                .fields()
                .iter()
                .zip(batch.columns())
                .map(|(field, column)| arrow_cast::cast(column, field.data_type()))
                .collect::<Result<Vec<_>, _>>()?;
            let batch = RecordBatch::try_new(schema.clone(), columns)
                .with_context(|| format!("DuckDB's {} in the input's types", path.display()))?;
            partout_testkit::fingerprint::add_batch(&mut destinations[p as usize], &batch)?;
        }
    }
    let mut together = Fingerprint::empty(schema.clone());
    for print in &destinations {
        together.add(print)?;
    }
    ensure!(
        together == *whole,
        "DuckDB: its destinations together hold {} rows{} where the input has {}",
        together.rows,
        if together.rows == whole.rows {
            " with other values"
        } else {
            ""
        },
        whole.rows
    );
    if let Some((p, rows)) = duckdb.misplaced(output, n)? {
        anyhow::bail!(
            "DuckDB: destination {p} holds {rows} rows whose hash(l_orderkey) % {n} is not {p}"
        );
    }
    Ok(())
}

/// `partout demo`.
///
/// # Errors
/// A bad scale factor, a contender that failed or lost rows, or a closed stdout.
pub fn run(options: &DemoOptions) -> Result<()> {
    let n = options.partitions;
    let rounds = options.rounds as usize;
    let (seconds, batches) = time(|| lineitem::generate(options.sf, 8192))?;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let bytes: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
    outln!(
        "partout demo: TPC-H lineitem SF {} ({rows} rows, 16 columns, {:.0} MiB, generated in {seconds:.1} s), hash-partitioned by l_orderkey into {n} destinations",
        options.sf,
        bytes as f64 / (1 << 20) as f64,
    );

    // In memory: one Arrow IPC stream per destination. Every row decoded back first.
    // Every contender places rows by DataFusion's hash (partout given its ids), so that the
    // comparison is of the writers alone.
    let setup = Setup {
        codec: Codec::NONE,
        memory_limit: 64 << 20,
        hash: Hash::Datafusion,
    };
    let contenders = [
        Contender::Partout,
        Contender::DataFusion,
        Contender::PerSlice,
    ];
    for contender in contenders {
        // Every destination's rows and values, against the contender's reference partitioner.
        let run = run_once(contender, setup, &batches, n, true)?;
        let reference = contender
            .reference(setup.hash)
            .expect("all three write destinations");
        let expected = fingerprint::expected(&batches, reference, n)?;
        fingerprint::check(
            contender.name(),
            &expected,
            &fingerprint::of_streams(&run.outputs)?,
        )?;
    }
    let passes = options.passes as usize;
    let long: Vec<RecordBatch> = batches
        .iter()
        .cycle()
        .take(batches.len() * passes)
        .cloned()
        .collect();
    let samples = alternate(rounds, contenders.len(), |i| {
        time(|| run_once(contenders[i], setup, &long, n, false)).map(|(seconds, _)| seconds)
    })?;
    let [ours, coalescing, per_slice]: [f64; 3] = medians(&samples, |&s| s)
        .try_into()
        .expect("three contenders");
    // The headline is against the faster of the two ways.
    let (theirs, baseline) = if coalescing <= per_slice {
        (coalescing, "DataFusion's way")
    } else {
        (per_slice, "the per-slice writer")
    };

    // On disk: lineitem as one Parquet file, repartitioned into one Parquet file per
    // destination, with one thread and with every core.
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let input = dir.path().join("lineitem.parquet");
    lineitem::write_parquet(&input, &batches)?;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut counts = vec![1, cores];
    counts.dedup();
    let duckdb = DuckDb::find();
    let startup = duckdb.map(DuckDb::startup).transpose()?.unwrap_or(0.0);
    let jobs = counts.len() + usize::from(duckdb.is_some());
    // What each destination must hold: partout's hash of l_orderkey (the first column) by the
    // test kit's reference; and the whole input, for DuckDB's destinations together.
    let on_disk = fingerprint::expected(&batches, Reference::PartoutHash, n)?;
    let whole = partout_testkit::fingerprint::of_batches(&batches)?;
    let schema = batches[0].schema();
    let samples = alternate(rounds, jobs, |i| {
        let Some(&threads) = counts.get(i) else {
            // DuckDB, on every core, its start-up taken off; its files checked after.
            let duckdb = duckdb.expect("a DuckDB job only when DuckDB was found");
            let out = dir.path().join("out-duckdb");
            let seconds = duckdb.repartition(&input, &out, n, cores, startup)?;
            check_duckdb_output(duckdb, &out, n, &schema, &whole)?;
            return Ok(seconds);
        };
        let out = dir.path().join(format!("out-{threads}"));
        let report = repartition(
            JobOptions::new([&input], &out, n)
                .with_keys(["l_orderkey"])
                .with_threads(threads)
                .with_compression(Compression::Snappy)
                .with_overwrite(true),
        )?;
        ensure!(
            report.manifest.output_rows == rows as u64,
            "the repartitioned files hold {} rows of {rows}",
            report.manifest.output_rows
        );
        // Every destination's file read back, untimed: its schema, rows and values.
        let got = fingerprint::of_job_output(&out, &report.manifest)?;
        let who = match threads {
            1 => "the on-disk job on 1 thread".to_string(),
            _ => format!("the on-disk job on {threads} threads"),
        };
        fingerprint::check(&who, &on_disk, &got)?;
        Ok(report.seconds)
    })?;
    let times = medians(&samples, |&s| s);
    let disk: Vec<(usize, f64)> = counts.iter().copied().zip(times.iter().copied()).collect();
    let duckdb_seconds = duckdb.map(|_| times[counts.len()]);

    // Each in-memory run streams the table `passes` times; each on-disk run reads it once.
    let streamed = rows * passes;
    let memory_rate = |seconds: f64| streamed as f64 / seconds / 1e6;
    let rate = |seconds: f64| rows as f64 / seconds / 1e6;
    outln!();
    outln!(
        "{:<52} {:>14} {:>16} {:>8}",
        "job",
        "partout Mrow/s",
        "baseline Mrow/s",
        "speedup"
    );
    outln!(
        "{:<52} {:>14.1} {:>16.1} {:>7.2}x",
        format!("in memory: {n} Arrow IPC streams"),
        memory_rate(ours),
        memory_rate(theirs),
        theirs / ours
    );
    let one = disk[0].1;
    for &(threads, seconds) in &disk[1..] {
        outln!(
            "{:<52} {:>14.1} {:>16.1} {:>7.2}x",
            format!("on disk: Parquet -> {n} Parquet files, {threads} threads"),
            rate(seconds),
            rate(one),
            one / seconds
        );
    }
    if disk.len() == 1 {
        outln!(
            "{:<52} {:>14.1} {:>16} {:>8}",
            format!("on disk: Parquet -> {n} Parquet files, 1 thread"),
            rate(one),
            "-",
            "-"
        );
    }
    let all = disk.last().expect("at least one thread count");
    match duckdb_seconds {
        Some(theirs) => outln!(
            "{:<52} {:>14.1} {:>16.1} {:>7.2}x",
            format!("on disk: vs DuckDB COPY ... PARTITION_BY, {cores} threads"),
            rate(all.1),
            rate(theirs),
            theirs / all.1
        ),
        None => outln!(
            "(DuckDB not found - neither the duckdb command nor python3's duckdb module - so \
             the on-disk job is not compared with DuckDB's COPY ... PARTITION_BY.)"
        ),
    }
    let duckdb_baseline = match duckdb {
        Some(_) => format!(
            ", and DuckDB hashing l_orderkey into {n} directories (its start-up, {startup:.2} s, \
             taken off)"
        ),
        None => String::new(),
    };
    outln!(
        "(in memory, every contender hashing with DataFusion 55's foldhash (partout given the ids); baseline: the faster ({baseline}) of DataFusion's way re-created - a grouped take per batch, each destination coalesced to 8192 rows, an IPC writer per destination: {:.1} Mrow/s - and the per-slice writer, which writes each batch's slices at once: {:.1} Mrow/s; every contender's destinations checked row by row and value by value; each run streams the table {} times, {streamed} rows, in partout's median of {ours:.3} s. On disk, baselines: partout on one thread{duckdb_baseline}; Snappy; every run's files read back and checked by value, partout's destination by destination, DuckDB's against its own hash. Medians of {} rounds, contenders alternating.)",
        memory_rate(coalescing),
        memory_rate(per_slice),
        options.passes,
        options.rounds
    );
    Ok(())
}

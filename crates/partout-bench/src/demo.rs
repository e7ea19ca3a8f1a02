//! `partout demo`: the main job on built-in data. Generates TPC-H lineitem in-process,
//! partitions it in memory by `l_orderkey` into Arrow IPC streams with partout and with
//! DataFusion's way (DataFusion 55's foldhash ids, re-created, a grouped take per batch, an IPC writer per destination),
//! checks that every row arrived, then repartitions it on disk (a Parquet file in, one Parquet
//! file per destination out) with one thread and with every core, beside DuckDB's
//! `COPY ... PARTITION_BY` of the same job when DuckDB is installed (its `duckdb` command, or
//! its Python module), and prints the throughput of each beside its baseline. Contenders run in
//! alternation, round after round, and the figures are medians, so that a busy machine slows
//! them alike.

use crate::fingerprint;
use crate::harness::{alternate, medians, time};
use crate::lineitem;
use crate::report::outln;
use crate::writer::{Codec, Contender, Hash, Setup, run_once};
use anyhow::{Context, Result, ensure};
use arrow_array::RecordBatch;
use partout_job::{Compression, JobOptions, repartition};

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
    /// command took, less `startup` (what starting DuckDB alone takes), and the rows written
    /// (counted afterwards, untimed).
    fn repartition(
        self,
        input: &std::path::Path,
        output: &std::path::Path,
        n: u32,
        threads: usize,
        startup: f64,
    ) -> Result<(f64, u64)> {
        let quote = |path: &std::path::Path| path.display().to_string().replace('\'', "''");
        let _ = std::fs::remove_dir_all(output);
        let started = std::time::Instant::now();
        self.run(&format!(
            "SET threads={threads}; \
             COPY (SELECT *, hash(l_orderkey) % {n} AS p FROM read_parquet('{}')) \
             TO '{}' (FORMAT parquet, PARTITION_BY (p), COMPRESSION snappy);",
            quote(input),
            quote(output)
        ))?;
        let seconds = (started.elapsed().as_secs_f64() - startup).max(0.0);
        let counted = self.run(&format!(
            "SELECT count(*) FROM read_parquet('{}/*/*.parquet');",
            quote(output)
        ))?;
        let rows = counted
            .trim()
            .parse()
            .with_context(|| format!("DuckDB's row count: {counted:?}"))?;
        Ok((seconds, rows))
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
    let samples = alternate(rounds, jobs, |i| {
        let Some(&threads) = counts.get(i) else {
            // DuckDB, on every core, its start-up taken off.
            let duckdb = duckdb.expect("a DuckDB job only when DuckDB was found");
            let out = dir.path().join("out-duckdb");
            let (seconds, written) = duckdb.repartition(&input, &out, n, cores, startup)?;
            ensure!(
                written == rows as u64,
                "DuckDB's files hold {written} rows of {rows}"
            );
            return Ok(seconds);
        };
        let report = repartition(
            JobOptions::new([&input], dir.path().join(format!("out-{threads}")), n)
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
        Ok(report.seconds)
    })?;
    let times = medians(&samples, |&s| s);
    let disk: Vec<(usize, f64)> = counts.iter().copied().zip(times.iter().copied()).collect();
    let duckdb_seconds = duckdb.map(|_| times[counts.len()]);

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
        rate(ours),
        rate(theirs),
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
        "(in memory, every contender hashing with DataFusion 55's foldhash (partout given the ids); baseline: the faster ({baseline}) of DataFusion's way re-created - a grouped take per batch, each destination coalesced to 8192 rows, an IPC writer per destination: {:.1} Mrow/s - and the per-slice writer, which writes each batch's slices at once: {:.1} Mrow/s; every contender's destinations checked row by row and value by value; each run streams the table {} times. On disk, baselines: partout on one thread{duckdb_baseline}; Snappy, every row counted. Medians of {} rounds, contenders alternating.)",
        rate(coalescing),
        rate(per_slice),
        options.passes,
        options.rounds
    );
    Ok(())
}

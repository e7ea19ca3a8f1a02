//! `partout`: repartition Arrow data by key, inspect what it wrote, serve it; and, built with
//! the `bench` feature, run the demo and the benchmark suites (their work is `partout-bench`'s,
//! which links the test kit and TPC-H's generator, so the product binary leaves it out).
#![forbid(unsafe_code)]

/// `println!` to stdout, returning the write error (a closed pipe) instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

mod inspect;
mod repartition;

use anyhow::Result;
use clap::{Parser, Subcommand};
#[cfg(feature = "bench")]
use partout_bench::{demo, e2e, exchange, ids, plan, presto, scatter, writer};
use std::process::ExitCode;

// A partitioner allocates its output columns batch after batch; glibc's allocator hands large
// blocks back to the kernel and page-faults them in again on the next batch, which dominated
// both partout's and the baselines' times. mimalloc keeps them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "partout",
    version,
    about = "Columnar repartitioning for Apache Arrow"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Partition TPC-H lineitem in memory and on disk; print throughput beside the baseline.
    #[cfg(feature = "bench")]
    Demo(demo::DemoOptions),
    /// The demo: not in this build (build partout with `--features bench`).
    #[cfg(not(feature = "bench"))]
    #[command(disable_help_flag = true)]
    Demo(NotBuilt),
    /// Repartition Parquet, Arrow IPC or CSV files by key into one file per destination (or a
    /// shuffle file and index per worker), in parallel, within a memory limit.
    Repartition(repartition::RepartitionArgs),
    /// Describe what partout wrote: a finished output directory (each destination read back
    /// through its manifest and index, its rows checked against the manifest's), a file of
    /// Presto pages (pages, rows, columns and their encodings, sizes, checksums; every
    /// checksum is verified, a bad one is an error), an Arrow IPC stream (messages, rows,
    /// schema), or a shuffle index (each destination's ranges, rows and bytes, checked
    /// against its data file).
    Inspect {
        /// The output directory, or the file: Presto pages back to back, an Arrow IPC stream,
        /// or a `.index` file.
        file: std::path::PathBuf,
    },
    /// Serve finished output directories (Arrow IPC or Presto pages) over Arrow Flight and
    /// Presto's worker exchange protocol, and live exchanges made through Flight; prints each
    /// address it listens on, then serves until interrupted.
    Serve(partout_flight::serve::ServeOptions),
    /// Run a benchmark suite: ours beside the baseline, in the same run.
    #[cfg(feature = "bench")]
    Bench {
        #[command(subcommand)]
        suite: Suite,
    },
    /// The benchmark suites: not in this build (build partout with `--features bench`).
    #[cfg(not(feature = "bench"))]
    #[command(disable_help_flag = true)]
    Bench(NotBuilt),
}

/// `demo` or `bench` in a build without the `bench` feature: whatever follows is taken, so
/// that the command (its `--help` too) says how to get it instead of clap's usage error.
#[cfg(not(feature = "bench"))]
#[derive(clap::Args)]
struct NotBuilt {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    args: Vec<std::ffi::OsString>,
}

/// The error of `partout COMMAND` (`demo` or `bench`) in a build without the `bench` feature.
#[cfg(not(feature = "bench"))]
fn not_built(command: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "`partout {command}` is not in this build: it comes with partout-cli's `bench` feature \
         (`cargo run --release -p partout-cli --features bench -- {command} ...`, or \
         `cargo build --release -p partout-cli --features bench`)"
    )
}

#[cfg(feature = "bench")]
#[derive(Subcommand)]
enum Suite {
    /// The scatter kernels on Velox's PartitionedVectorBenchmark matrix.
    Scatter(scatter::ScatterOptions),
    /// Partition ids: the fast and the Spark hash beside DataFusion's and a plain Murmur3.
    Ids(ids::IdsOptions),
    /// The partitioned writer on TPC-H lineitem beside DataFusion's and Comet's ways.
    Writer(writer::WriterBenchOptions),
    /// lineitem as Parquet -> N Parquet files through `repartition`, at each thread count,
    /// beside reading and writing the same files unpartitioned.
    E2e(e2e::E2eBenchOptions),
    /// Encoding lineitem as Presto pages beside Arrow IPC.
    Presto(presto::PrestoBenchOptions),
    /// The scatter plan alone, for every fan-out (to choose the automatic one).
    Plan(plan::PlanOptions),
    /// lineitem from producers to consumers over loopback through a live exchange (Flight and
    /// Presto's protocol), beside a bare arrow-flight server of the same batches.
    Exchange(exchange::ExchangeBenchOptions),
}

/// `partout repartition` (and `bench e2e`, which times it) keeps its peak memory under
/// `--memory-limit`, which takes an allocator that gives freed memory back soon: mimalloc by
/// default keeps it 10 ms and commits its arenas eagerly, which on a 24 MiB limit made peaks
/// of 100+ MiB. A 2 ms delay and lazy arenas keep the peaks within the limit (0 ms did too,
/// 20-40% slower on lineitem). But memory given back is faulted in again, zeroed, by the next
/// batch: under the default 256 MiB, lineitem SF 1 into 64 Parquet files spent a quarter of its
/// time so. From 256 MiB the delay is 100 ms ([`purge_delay_ms`]). Its options are read from
/// the environment when it starts, before `main`, so the process sets them and runs itself
/// again (same process id, same arguments), once; options already in the environment are left
/// as they are.
#[cfg(unix)]
fn with_allocator_options() {
    use std::os::unix::process::CommandExt;
    // The commands that hold to a memory limit: `repartition`, and `bench e2e`, which times
    // it. (Not `demo`: its in-memory writer runs 30-60% slower with these options, and its
    // on-disk run promises no memory bound.)
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).take(2).collect();
    let files = match args.first().and_then(|a| a.to_str()) {
        Some("repartition") => true,
        Some("bench") => cfg!(feature = "bench") && args.get(1).is_some_and(|a| a == "e2e"),
        _ => false,
    };
    // Each option not already in the environment (after the run again, none).
    let unset = |name: &str| std::env::var_os(name).is_none();
    let (delay_unset, arenas_unset) = (
        unset("MIMALLOC_PURGE_DELAY"),
        unset("MIMALLOC_ARENA_EAGER_COMMIT"),
    );
    if !files || !(delay_unset || arenas_unset) {
        return;
    }
    // The memory limit the run holds to (arguments that do not parse are reported by `main`,
    // after the run again with the defaults).
    let limit = match Cli::try_parse() {
        Ok(Cli {
            command: Command::Repartition(args),
        }) => args.memory_limit,
        #[cfg(feature = "bench")]
        Ok(Cli {
            command: Command::Bench {
                suite: Suite::E2e(_),
            },
        }) => e2e::MEMORY_LIMIT,
        _ => 0,
    };
    let delay = purge_delay_ms(limit).to_string();
    let options = [
        ("MIMALLOC_PURGE_DELAY", delay.as_str(), delay_unset),
        ("MIMALLOC_ARENA_EAGER_COMMIT", "0", arenas_unset),
    ]
    .into_iter()
    .filter_map(|(name, value, unset)| unset.then_some((name, value)));
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    // `exec` returns only when it failed: then the run goes on with the defaults.
    let _ = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .envs(options)
        .exec();
}

/// How long mimalloc keeps freed memory before it gives it back (ms), for a run under a
/// memory limit of `limit` bytes: 2 below 256 MiB, where what it keeps would be a large part
/// of the limit; 100 from 256 MiB (lineitem SF 1 into 64 Parquet files: 0.80x the time, peak
/// 174 MiB where 2 ms peaked at 103; the peak stays far within the limit over what reading
/// takes, 44 MiB).
fn purge_delay_ms(limit: u64) -> u32 {
    match limit >= 256 << 20 {
        true => 100,
        false => 2,
    }
}

#[cfg(not(unix))]
fn with_allocator_options() {}

fn main() -> ExitCode {
    with_allocator_options();
    // A worker's panic is caught and reported as the run's one-line error; the default hook
    // would print it (and a backtrace hint) first.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let worker = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("partout-worker-"));
        if !worker {
            default_hook(info);
        }
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`partout bench ... | head`): not an error.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) if e.downcast_ref::<repartition::Interrupted>().is_some() => {
            eprintln!("partout: {e:#}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("partout: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// A command line clap refuses: one line on stderr, like every other error, and exit code 2.
/// Help and version go out as clap writes them.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    eprintln!("partout: {first} (see --help)");
    ExitCode::from(2)
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        #[cfg(feature = "bench")]
        Command::Demo(options) => demo::run(&options),
        #[cfg(not(feature = "bench"))]
        Command::Demo(_) => Err(not_built("demo")),
        Command::Inspect { file } => inspect::run(&file),
        Command::Repartition(options) => repartition::run(&options),
        Command::Serve(options) => partout_flight::serve::run(options).map_err(anyhow::Error::msg),
        #[cfg(not(feature = "bench"))]
        Command::Bench(_) => Err(not_built("bench")),
        #[cfg(feature = "bench")]
        Command::Bench { suite } => match suite {
            Suite::Scatter(options) => scatter::run(&options),
            Suite::Ids(options) => ids::run(&options),
            Suite::Writer(options) => writer::run(&options),
            Suite::Presto(options) => presto::run(&options),
            Suite::E2e(options) => e2e::run(&options),
            Suite::Plan(options) => plan::run(&options),
            Suite::Exchange(options) => exchange::run(&options),
        },
    }
}

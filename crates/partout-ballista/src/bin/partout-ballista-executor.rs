//! Ballista's executor process, with Ballista's own flags, whose hash shuffles partout
//! writes ([`PartoutEngine`]). Start Ballista's scheduler, then one of these per machine:
//!
//! ```text
//! partout-ballista-executor --scheduler-host SCHEDULER --bind-host 0.0.0.0 \
//!     --external-host THIS_HOST --work-dir /var/lib/ballista
//! ```

use ballista_core::config::LogRotationPolicy;
use ballista_core::error::BallistaError;
use ballista_core::object_store::{runtime_env_with_s3_support, session_config_with_s3_support};
use ballista_executor::config::Config;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_executor::health::spawn_health_server;
use clap::Parser;
use partout_ballista::PartoutEngine;
use std::net::SocketAddr;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;

/// Ballista's executor flags, and partout's.
#[derive(Parser, Debug)]
#[command(
    name = "partout-ballista-executor",
    version,
    about = "Ballista's executor, with partout writing its hash shuffles"
)]
struct Args {
    #[command(flatten)]
    ballista: Config,
    /// Memory each shuffle-write task may hold (bytes), whatever the job's
    /// `ballista.shuffle.sort_based.memory_limit_per_task_bytes` says.
    #[arg(long)]
    partout_task_memory: Option<usize>,
    /// Who writes hash shuffles: partout, or Ballista's own writer (to compare the two on
    /// one cluster).
    #[arg(long, value_enum, default_value_t = Writer::Partout)]
    shuffle_writer: Writer,
}

/// Who writes hash shuffles.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Writer {
    /// partout's engine.
    Partout,
    /// Ballista's own engine.
    Ballista,
}

#[tokio::main]
async fn main() -> ballista_core::error::Result<()> {
    let args = Args::parse();
    let bind_host = args.ballista.bind_host.clone();
    let bind_health_port = args.ballista.bind_health_port;
    let mut config: ExecutorProcessConfig = args.ballista.try_into()?;
    config.override_config_producer = Some(Arc::new(session_config_with_s3_support));
    config.override_runtime_producer = Some(Arc::new(runtime_env_with_s3_support));
    let engine = match args.partout_task_memory {
        Some(bytes) => PartoutEngine::new().with_task_memory(bytes),
        None => PartoutEngine::new(),
    };
    if args.shuffle_writer == Writer::Partout {
        config.override_execution_engine = Some(Arc::new(engine));
    }

    let filter = EnvFilter::new(
        std::env::var(EnvFilter::DEFAULT_ENV)
            .unwrap_or_else(|_| config.special_mod_log_level.clone()),
    );
    let tracing = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_thread_names(config.print_thread_info)
        .with_thread_ids(config.print_thread_info)
        .with_env_filter(filter);
    match &config.log_dir {
        Some(dir) => {
            let prefix = config.log_file_name_prefix();
            let file = match config.log_rotation_policy {
                LogRotationPolicy::Minutely => tracing_appender::rolling::minutely(dir, prefix),
                LogRotationPolicy::Hourly => tracing_appender::rolling::hourly(dir, prefix),
                LogRotationPolicy::Daily => tracing_appender::rolling::daily(dir, prefix),
                LogRotationPolicy::Never => tracing_appender::rolling::never(dir, prefix),
            };
            tracing.with_writer(file).init();
        }
        None => tracing.init(),
    }

    let health_addr: SocketAddr = format!("{bind_host}:{bind_health_port}")
        .parse()
        .map_err(|e| BallistaError::General(format!("invalid --bind-health-port address: {e}")))?;
    let (stop_health, health_stopped) = tokio::sync::oneshot::channel();
    let health = spawn_health_server(health_addr, config.health.clone(), health_stopped);
    let result = start_executor_process(Arc::new(config)).await;
    let _ = stop_health.send(());
    let _ = health.await;
    result
}

//! `partout serve`: finished output directories (and live exchanges made through Flight's
//! `create` action) over Arrow Flight and Presto's exchange protocol.
//!
//! ```text
//! partout serve out/ [NAME=DIR ...] --flight 127.0.0.1:8815 --presto 127.0.0.1:8080
//! ```
//!
//! Prints `flight: ADDRESS` and `presto: ADDRESS` once each listens (with port 0, the port
//! the system chose), then serves until interrupted.

use crate::conn::{self, ConnectionLimits};
use crate::exchanges::{Exchanges, Limits};
use crate::flight::ExchangeService;
use partout_input::{StorageOption, StorageOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// What `partout serve` serves, and where.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeOptions {
    /// Finished `repartition` outputs (Arrow IPC or Presto pages): DIR, served under its
    /// directory's name, or NAME=DIR; DIR may be an object store's prefix (`s3://bucket/out`,
    /// …), read by ranged GETs.
    #[arg(value_parser = parse_exchange)]
    pub dirs: Vec<(String, PathBuf)>,
    /// An option of the object store's client, for outputs in a store (`aws_endpoint`,
    /// `aws_region`, …), after the environment's; repeatable. Values are never shown.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_options: Vec<StorageOption>,
    /// Serve Arrow Flight on this address (bind loopback unless the network should reach it).
    #[arg(long)]
    pub flight: Option<SocketAddr>,
    /// Serve Presto's worker exchange protocol (HTTP) on this address.
    #[arg(long)]
    pub presto: Option<SocketAddr>,
    /// The most memory the live exchanges clients create (Flight's `create`) may hold
    /// together, in bytes: each is charged its budget and 512 bytes per destination, and a
    /// `create` past it is refused (RESOURCE_EXHAUSTED) until one is dropped. Pages read for
    /// Presto consumers and not yet acknowledged count too (past it: HTTP 503, retry).
    #[arg(long, default_value_t = Limits::default().memory_limit)]
    pub memory_limit: usize,
    /// The most exchanges served at once, finished and live.
    #[arg(long, default_value_t = Limits::default().max_exchanges)]
    pub max_exchanges: usize,
}

fn parse_exchange(text: &str) -> Result<(String, PathBuf), String> {
    if let Some((name, dir)) = text.split_once('=')
        && !partout_input::is_store_url(text)
    {
        return Ok((name.to_string(), PathBuf::from(dir)));
    }
    if partout_input::is_store_url(text) {
        // Served under the prefix's last part.
        let name = text
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default();
        return match name.is_empty() || name.contains(':') {
            true => Err(format!(
                "{text:?}: no name to serve it under (use NAME=URL)"
            )),
            false => Ok((name.to_string(), PathBuf::from(text))),
        };
    }
    let dir = PathBuf::from(text);
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .ok_or_else(|| format!("{text:?}: no directory name to serve it under (use NAME=DIR)"))?;
    Ok((name, dir))
}

/// Serves until interrupted.
///
/// # Errors
/// A directory that cannot be served, an address that cannot be bound, or a server's error,
/// as one line.
pub fn run(options: ServeOptions) -> Result<(), String> {
    if options.flight.is_none() && options.presto.is_none() {
        return Err("nothing to serve on: give --flight ADDRESS, --presto ADDRESS or both".into());
    }
    let exchanges = Exchanges::with_limits(Limits {
        max_exchanges: options.max_exchanges,
        memory_limit: options.memory_limit,
    });
    let storage: StorageOptions = options.storage_options.iter().cloned().collect();
    for (name, dir) in &options.dirs {
        exchanges
            .add_output(name, dir, &storage)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(serve(exchanges, options.flight, options.presto))
}

async fn serve(
    exchanges: Exchanges,
    flight: Option<SocketAddr>,
    presto: Option<SocketAddr>,
) -> Result<(), String> {
    let servers = start(exchanges, flight, presto).await?;
    for (protocol, addr) in [("flight", servers.flight), ("presto", servers.presto)] {
        if let Some(addr) = addr {
            println!("{protocol}: {addr}");
        }
    }
    // Let whoever started the server read the addresses now.
    use std::io::Write;
    let _ = std::io::stdout().flush();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        ended = servers.wait() => ended,
    }
}

/// Running servers: their addresses. Dropped, they stop.
#[derive(Debug)]
pub struct Servers {
    /// Where Arrow Flight listens.
    pub flight: Option<SocketAddr>,
    /// Where Presto's protocol listens.
    pub presto: Option<SocketAddr>,
    tasks: tokio::task::JoinSet<Result<(), String>>,
}

impl Servers {
    /// Runs until a server ends (in error).
    ///
    /// # Errors
    /// The server's error.
    pub async fn wait(mut self) -> Result<(), String> {
        match self.tasks.join_next().await {
            Some(ended) => ended.map_err(|e| e.to_string())?,
            None => Ok(()),
        }
    }
}

/// Starts serving `exchanges` over Flight on `flight` and Presto's protocol on `presto`
/// (either may be left out), on the current tokio runtime, within the default
/// [`ConnectionLimits`].
///
/// # Errors
/// An address that cannot be bound.
pub async fn start(
    exchanges: Exchanges,
    flight: Option<SocketAddr>,
    presto: Option<SocketAddr>,
) -> Result<Servers, String> {
    start_with(exchanges, flight, presto, ConnectionLimits::default()).await
}

/// As [`start`], within `limits`.
///
/// # Errors
/// An address that cannot be bound.
pub async fn start_with(
    exchanges: Exchanges,
    flight: Option<SocketAddr>,
    presto: Option<SocketAddr>,
    limits: ConnectionLimits,
) -> Result<Servers, String> {
    let bind = |addr: SocketAddr| async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        Ok::<_, String>((listener, local))
    };
    let mut servers = Servers {
        flight: None,
        presto: None,
        tasks: tokio::task::JoinSet::new(),
    };
    if let Some(addr) = flight {
        let (listener, local) = bind(addr).await?;
        servers.flight = Some(local);
        let service = ExchangeService::new(exchanges.clone()).into_server();
        let places = Arc::new(Semaphore::new(limits.max_connections));
        // Connections within the limit; one silent past the idle timeout before its first
        // byte (no HTTP/2 preface) is closed.
        let incoming = futures::stream::unfold(listener, move |listener| {
            let places = places.clone();
            async move {
                let accepted = conn::accept(&listener, &places, Some(limits.idle_timeout)).await;
                Some((Ok::<_, std::io::Error>(accepted), listener))
            }
        });
        let header_bytes = u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX);
        servers.tasks.spawn(async move {
            tonic::transport::Server::builder()
                .max_concurrent_streams(limits.max_streams_per_connection)
                .http2_max_header_list_size(header_bytes)
                // A peer that stops answering pings is gone: its streams end.
                .http2_keepalive_interval(Some(Duration::from_secs(30)))
                .http2_keepalive_timeout(Some(Duration::from_secs(20)))
                .add_service(service)
                .serve_with_incoming(incoming)
                .await
                .map_err(|e| format!("flight: {e}"))
        });
    }
    if let Some(addr) = presto {
        let (listener, local) = bind(addr).await?;
        servers.presto = Some(local);
        let router = crate::presto::router(exchanges);
        servers.tasks.spawn(serve_http(listener, router, limits));
    }
    Ok(servers)
}

/// Serves `router` over HTTP/1.1 on `listener` within `limits`: a connection waiting for a
/// request's headers past the idle timeout is closed, and headers past the size limit are
/// answered 431. Connections end with the server.
async fn serve_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
) -> Result<(), String> {
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = conn::accept(&listener, &places, None) => {
                let service = hyper_util::service::TowerToHyperService::new(router.clone());
                connections.spawn(async move {
                    let mut http = hyper::server::conn::http1::Builder::new();
                    http.timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(limits.idle_timeout)
                        .max_header_size(limits.max_header_bytes);
                    // A connection's error (a peer gone, a timeout) is its own.
                    let _ = http
                        .serve_connection(hyper_util::rt::TokioIo::new(accepted), service)
                        .await;
                });
            }
            Some(_) = connections.join_next() => {}
        }
    }
}

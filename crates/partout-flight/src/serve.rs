//! `partout serve`: finished output directories (and live exchanges made through Flight's
//! `create` action) over Arrow Flight and Presto's exchange protocol.
//!
//! ```text
//! partout serve out/ [NAME=DIR ...] --flight 127.0.0.1:8815 --presto 127.0.0.1:8080
//! ```
//!
//! Prints `flight: ADDRESS` and `presto: ADDRESS` once each listens (with port 0, the port
//! the system chose), then serves until interrupted.

use crate::exchanges::{Exchanges, Limits};
use crate::flight::ExchangeService;
use std::net::SocketAddr;
use std::path::PathBuf;

/// What `partout serve` serves, and where.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeOptions {
    /// Finished `repartition` output directories (Arrow IPC or Presto pages): DIR, served
    /// under its directory's name, or NAME=DIR.
    #[arg(value_parser = parse_exchange)]
    pub dirs: Vec<(String, PathBuf)>,
    /// Serve Arrow Flight on this address (bind loopback unless the network should reach it).
    #[arg(long)]
    pub flight: Option<SocketAddr>,
    /// Serve Presto's worker exchange protocol (HTTP) on this address.
    #[arg(long)]
    pub presto: Option<SocketAddr>,
    /// The most memory the live exchanges clients create (Flight's `create`) may hold
    /// together, in bytes: each is charged its budget and 512 bytes per destination, and a
    /// `create` past it is refused (RESOURCE_EXHAUSTED) until one is dropped.
    #[arg(long, default_value_t = Limits::default().memory_limit)]
    pub memory_limit: usize,
    /// The most exchanges served at once, finished and live.
    #[arg(long, default_value_t = Limits::default().max_exchanges)]
    pub max_exchanges: usize,
}

fn parse_exchange(text: &str) -> Result<(String, PathBuf), String> {
    if let Some((name, dir)) = text.split_once('=') {
        return Ok((name.to_string(), PathBuf::from(dir)));
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
    for (name, dir) in &options.dirs {
        exchanges
            .add_directory(name, dir)
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
/// (either may be left out), on the current tokio runtime.
///
/// # Errors
/// An address that cannot be bound.
pub async fn start(
    exchanges: Exchanges,
    flight: Option<SocketAddr>,
    presto: Option<SocketAddr>,
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
        servers.tasks.spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .map_err(|e| format!("flight: {e}"))
        });
    }
    if let Some(addr) = presto {
        let (listener, local) = bind(addr).await?;
        servers.presto = Some(local);
        let router = crate::presto::router(exchanges);
        servers.tasks.spawn(async move {
            axum::serve(listener, router)
                .await
                .map_err(|e| format!("presto: {e}"))
        });
    }
    Ok(servers)
}

//! `partout-serve`: finished `repartition` outputs (Arrow IPC) over Arrow Flight.
//!
//! ```text
//! partout-serve --exchange orders=out/ [--exchange NAME=DIR ...] --flight 127.0.0.1:8815
//! ```
//!
//! Prints `flight: ADDRESS` once it listens (with port 0, the port the system chose), then
//! serves until it is stopped.

use clap::Parser;
use partout_flight::OutputService;
use std::path::PathBuf;

/// Serves finished partout outputs over Arrow Flight.
#[derive(Parser)]
#[command(name = "partout-serve")]
struct Args {
    /// An output directory to serve, as NAME=DIR (repeatable).
    #[arg(long = "exchange", value_parser = parse_exchange, required = true)]
    exchanges: Vec<(String, PathBuf)>,
    /// The address to listen on (bind loopback unless the network should reach it).
    #[arg(long)]
    flight: std::net::SocketAddr,
}

fn parse_exchange(text: &str) -> Result<(String, PathBuf), String> {
    let (name, dir) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected NAME=DIR"))?;
    Ok((name.to_string(), PathBuf::from(dir)))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let mut service = OutputService::new();
    for (name, dir) in args.exchanges {
        service = match service.serve_directory(name, dir) {
            Ok(service) => service,
            Err(e) => {
                eprintln!("partout-serve: {e}");
                return std::process::ExitCode::from(2);
            }
        };
    }
    let listener = match tokio::net::TcpListener::bind(args.flight).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("partout-serve: cannot listen on {}: {e}", args.flight);
            return std::process::ExitCode::from(2);
        }
    };
    match listener.local_addr() {
        Ok(addr) => println!("flight: {addr}"),
        Err(e) => {
            eprintln!("partout-serve: {e}");
            return std::process::ExitCode::from(2);
        }
    }
    let served = tonic::transport::Server::builder()
        .add_service(service.into_server())
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
        .await;
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("partout-serve: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

//! An S3 server on 127.0.0.1 for tests outside Rust (`tests/python`): s3s-fs, its buckets the
//! directories of `ROOT`, credentials `KEY` / `SECRET`. Prints `s3: http://127.0.0.1:PORT` once
//! it listens (port 0: the one the system chose), then serves until killed.
//!
//! `cargo run --release -p partout-job --example s3_server -- ROOT [PORT] [KEY SECRET]`
//!
//! Objects put through it keep their ETag beside them, so a ranged GET reads only its range
//! (moto copies the whole object for each; s3s-fs hashes a file put in its directory by hand).

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let root = args
        .next()
        .ok_or("usage: s3_server ROOT [PORT] [KEY SECRET]")?;
    let port: u16 = args.next().map_or(Ok(0), |p| p.parse())?;
    let key = args.next().unwrap_or_else(|| "test-access-key".into());
    let secret = args.next().unwrap_or_else(|| "test-secret".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let fs = s3s_fs::FileSystem::new(&root).map_err(|e| format!("{root}: {e:?}"))?;
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(key, secret));
        let service = builder.build();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        println!("s3: http://{}", listener.local_addr()?);
        std::io::stdout().flush()?;
        let http = Builder::new(TokioExecutor::new());
        loop {
            let (socket, _) = listener.accept().await?;
            // (Without it a small response waits for the client's delayed ACK: ~40 ms each.)
            socket.set_nodelay(true)?;
            let connection = http
                .serve_connection(TokioIo::new(socket), service.clone())
                .into_owned();
            tokio::spawn(connection);
        }
    })
}

//! A TCP sink and source for the self-tests and for measuring shaped links, run inside a
//! cluster's namespaces:
//!
//! ```text
//! netns-tcp sink PORT                      # prints "ready", then for each connection reads
//!                                          # to EOF and answers the byte count
//! netns-tcp source HOST:PORT BYTES [MS]    # sends BYTES, waits for the count; prints
//!                                          # "BYTES SECONDS" (MS: connect timeout, 5000)
//! netns-tcp probe PREFIX                   # Cluster::new(PREFIX, 1): "ok", or its error
//! ```

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

const CHUNK: usize = 256 << 10;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["sink", port] => sink(port),
        ["source", addr, bytes] => source(addr, bytes, "5000"),
        ["source", addr, bytes, ms] => source(addr, bytes, ms),
        ["probe", prefix] => match partout_testkit::netns::Cluster::new(prefix, 1) {
            Ok(_) => {
                println!("ok");
                Ok(())
            }
            Err(e) => Err(e),
        },
        _ => Err(io::Error::other(
            "usage: netns-tcp sink PORT | source HOST:PORT BYTES [MS] | probe PREFIX",
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("netns-tcp: {e}");
            ExitCode::FAILURE
        }
    }
}

fn number<T: std::str::FromStr>(s: &str) -> io::Result<T> {
    s.parse()
        .map_err(|_| io::Error::other(format!("not a number: {s}")))
}

fn sink(port: &str) -> io::Result<()> {
    let listener = TcpListener::bind(("0.0.0.0", number::<u16>(port)?))?;
    println!("ready");
    io::stdout().flush()?;
    for stream in listener.incoming() {
        let mut stream = stream?;
        thread::spawn(move || -> io::Result<()> {
            let mut buf = vec![0; CHUNK];
            let mut total = 0u64;
            loop {
                match stream.read(&mut buf)? {
                    0 => break,
                    n => total += n as u64,
                }
            }
            writeln!(stream, "{total}")
        });
    }
    Ok(())
}

fn source(addr: &str, bytes: &str, ms: &str) -> io::Result<()> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|_| io::Error::other(format!("not an address: {addr}")))?;
    let bytes: u64 = number(bytes)?;
    let start = Instant::now();
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(number(ms)?))?;
    let buf = vec![0x5a; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        stream.write_all(&buf[..n])?;
        left -= n as u64;
    }
    stream.shutdown(Shutdown::Write)?;
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer)?;
    let seconds = start.elapsed().as_secs_f64();
    if answer.trim() != bytes.to_string() {
        return Err(io::Error::other(format!(
            "the sink got {:?} bytes of {bytes}",
            answer.trim()
        )));
    }
    println!("{bytes} {seconds:.6}");
    Ok(())
}

//! The connections a server accepts: how many at once, and how long one may stay silent
//! before its first request. Both protocols accept through [`accept`].

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// What one client's connections may take from a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// The most connections open at once on each port (default 4096); past it, new ones wait
    /// in the listener's backlog until one closes.
    pub max_connections: usize,
    /// How long a connection may stay silent (default 10 s): a Flight connection before its
    /// first byte, an HTTP connection before each request's headers are in. Then it is closed.
    pub idle_timeout: Duration,
    /// The most Flight calls at once on one connection (HTTP/2 streams; default 256).
    pub max_streams_per_connection: u32,
    /// The most bytes of request headers (default 16 KiB): over HTTP, a request past it is
    /// answered 431; over Flight it is the HTTP/2 header list size the server announces (h2
    /// enforces it per frame of the list, so a list a few times larger is refused).
    pub max_header_bytes: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            idle_timeout: Duration::from_secs(10),
            max_streams_per_connection: 256,
            max_header_bytes: 16 << 10,
        }
    }
}

/// A connection accepted within the limits: it holds its place among
/// [`ConnectionLimits::max_connections`], and fails its reads once it has been silent
/// past its first-byte deadline, if it has one.
#[derive(Debug)]
pub(crate) struct Accepted {
    stream: TcpStream,
    /// Set until the first byte arrives.
    first_byte: Option<Pin<Box<Sleep>>>,
    _place: OwnedSemaphorePermit,
}

impl Accepted {
    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

/// The next connection on `listener`, once fewer than the limit are open (waiting for one to
/// close otherwise). Errors accepting (a peer that reset, no file descriptors left) are
/// retried after a pause: they end no server.
pub(crate) async fn accept(
    listener: &TcpListener,
    places: &Arc<Semaphore>,
    first_byte: Option<Duration>,
) -> Accepted {
    let place = places
        .clone()
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                return Accepted {
                    stream,
                    first_byte: first_byte.map(|d| Box::pin(tokio::time::sleep(d))),
                    _place: place,
                };
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

impl AsyncRead for Accepted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.first_byte = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let expired = match &mut this.first_byte {
                    Some(deadline) => deadline.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                match expired {
                    true => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client sent nothing in time",
                    ))),
                    false => Poll::Pending,
                }
            }
            ready => ready,
        }
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Accepted {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream().connect_info()
    }
}

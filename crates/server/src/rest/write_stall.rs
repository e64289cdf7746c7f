//! A connection of the management port whose client stops reading: the answer's write waits on a full socket
//! buffer forever, holding the connection and the answer. [`WriteStallGuard`] wraps each accepted connection and
//! fails a write that makes no progress for the write timeout (`--rest-write-timeout-secs`), which ends the
//! connection with a log line. A slow client that keeps reading, and a streaming answer that simply has nothing to
//! send (the bucket streaming endpoints), are never cut off: only a write the socket refuses that long counts.
//! A connection that sends nothing at all for the same time after it is accepted is closed too (axum's server
//! sets no header-read timeout); once a client has sent a byte, its idle keep-alive connection stays.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

/// The accepted connections of `listener`, each with TCP_NODELAY and a [`WriteStallGuard`].
pub(crate) struct GuardedListener {
    pub(crate) listener: TcpListener,
    pub(crate) write_timeout: Duration,
    /// Closes what the `strict` encryption level refuses on a plain port.
    pub(crate) links: std::sync::Arc<crate::cluster::peer_links::PeerLinks>,
}

impl axum::serve::Listener for GuardedListener {
    type Io = WriteStallGuard;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = loop {
            let (stream, addr) = axum::serve::Listener::accept(&mut self.listener).await;
            if !self.links.refuses_plain(&stream, addr) {
                break (stream, addr);
            }
        };
        // See `super::PlainListener`.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on an accepted connection");
        }
        let limit = self.write_timeout;
        let silent = Some(Box::pin(tokio::time::sleep(limit)));
        (WriteStallGuard { stream, peer: addr, limit, stalled: None, silent }, addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// A connection whose writes fail once one made no progress for `limit`.
pub(crate) struct WriteStallGuard {
    stream: TcpStream,
    peer: SocketAddr,
    limit: Duration,
    /// Since the socket last refused a write: fires after `limit`.
    stalled: Option<Pin<Box<Sleep>>>,
    /// Until the client sends its first byte: fires `limit` after the connection was accepted.
    silent: Option<Pin<Box<Sleep>>>,
}

impl WriteStallGuard {
    /// The node's end of the connection.
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.stream.local_addr().ok()
    }

    /// The socket refused a write: starts (or checks) the stall timer; an error once it ran out.
    fn refused(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if timer.as_mut().poll(cx).is_ready() {
            tracing::warn!(peer = %self.peer, "closing rest connection: the client took none of its answer for the write timeout");
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client stopped reading")));
        }
        Poll::Pending
    }
}

impl AsyncRead for WriteStallGuard {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        if read.is_ready() && buf.filled().len() > before {
            self.silent = None;
        }
        if read.is_pending() {
            if let Some(timer) = self.silent.as_mut() {
                if timer.as_mut().poll(cx).is_ready() {
                    tracing::info!(peer = %self.peer, "closing rest connection: nothing was sent on it for the write timeout");
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client sent nothing")));
                }
            }
        }
        read
    }
}

impl AsyncWrite for WriteStallGuard {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            Poll::Pending => self.refused(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.refused(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

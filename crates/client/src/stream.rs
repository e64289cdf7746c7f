//! The byte stream a KV connection runs over: plain TCP, or TLS on TCP (the KV TLS port, 11207).
//!
//! Hot path: every read and write of a connection goes through [`KvStream`]; the plain arm forwards to the socket
//! with one branch and no allocation, so a plain connection costs what it did before TLS existed.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A connected KV socket, plain or TLS.
#[derive(Debug)]
pub enum KvStream {
    Plain(TcpStream),
    /// Boxed: a TLS session holds ~1 KiB of state and buffers, which plain connections should not carry around.
    Tls(Box<TlsStream<TcpStream>>),
}

impl KvStream {
    /// Whether the bytes travel encrypted.
    pub fn is_tls(&self) -> bool {
        matches!(self, KvStream::Tls(_))
    }

    /// The TCP socket under the stream (for addresses and socket options).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            KvStream::Plain(s) => s,
            KvStream::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for KvStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            KvStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            KvStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for KvStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            KvStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            KvStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            KvStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            KvStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            KvStream::Plain(s) => s.is_write_vectored(),
            KvStream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            KvStream::Plain(s) => Pin::new(s).poll_flush(cx),
            KvStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            KvStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            KvStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

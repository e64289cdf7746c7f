//! Opening a TCP connection, optionally from a chosen local address.

use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpSocket, TcpStream};

/// Connects to `addr`, from `source` (any port) when one is given, else from the address the kernel picks. A
/// node whose peer traffic must carry its own address (`settee server --bind-peer-connections`) dials this way.
pub async fn dial(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let Some(ip) = source else { return TcpStream::connect(addr).await };
    let socket = if ip.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.bind(SocketAddr::new(ip, 0))?;
    socket.connect(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A connection dialled from a source address arrives from that address; without one the kernel's choice
    /// stands (on loopback, 127.0.0.1).
    #[tokio::test]
    async fn dial_connects_from_the_source_address_when_given() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let source: IpAddr = "127.0.0.7".parse().unwrap();
        let _bound = dial(addr, Some(source)).await.unwrap();
        let (_, peer) = listener.accept().await.unwrap();
        assert_eq!(peer.ip(), source);
        let _unbound = dial(addr, None).await.unwrap();
        let (_, peer) = listener.accept().await.unwrap();
        assert_eq!(peer.ip(), "127.0.0.1".parse::<IpAddr>().unwrap());
    }
}

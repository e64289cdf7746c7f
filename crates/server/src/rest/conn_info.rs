//! The two addresses of a management connection (the client's and the node's), recorded as each connection is
//! accepted so the audit log can name them (`remote`, `local`) in REST events, as ns_server's do.

use std::net::SocketAddr;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;

use super::write_stall::GuardedListener;
use crate::audit::Addrs;
use crate::tls::http_listener::TlsListener;

/// The addresses of one accepted management connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnAddrs(pub(crate) Addrs);

impl Connected<IncomingStream<'_, GuardedListener>> for ConnAddrs {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> Self {
        let remote: SocketAddr = *stream.remote_addr();
        ConnAddrs(Addrs { remote: Some(remote), local: stream.io().local_addr() })
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for ConnAddrs {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        let remote: SocketAddr = *stream.remote_addr();
        ConnAddrs(Addrs { remote: Some(remote), local: stream.io().get_ref().0.local_addr().ok() })
    }
}

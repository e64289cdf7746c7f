//! The two addresses of a management or query connection (the client's and the node's), recorded as each
//! connection is accepted so the audit log can name them (`remote`, `local`) in REST events, as ns_server's do; and,
//! on the TLS ports, the names of the client's certificate, which `/settings/clientCertAuth` may map to a user.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;

use super::write_stall::GuardedListener;
use crate::audit::Addrs;
use crate::auth::CertNames;
use crate::tls::http_listener::TlsListener;

/// The addresses of one accepted connection, and the names in its client certificate if it gave one.
#[derive(Clone, Debug)]
pub(crate) struct ConnAddrs(pub(crate) Addrs, pub(crate) Option<Arc<CertNames>>);

impl Connected<IncomingStream<'_, GuardedListener>> for ConnAddrs {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> Self {
        let remote: SocketAddr = *stream.remote_addr();
        ConnAddrs(Addrs { remote: Some(remote), local: stream.io().local_addr() }, None)
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for ConnAddrs {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        let remote: SocketAddr = *stream.remote_addr();
        let (tcp, tls) = stream.io().get_ref();
        let names = crate::tls::client_cert_names(tls.peer_certificates()).map(Arc::new);
        ConnAddrs(Addrs { remote: Some(remote), local: tcp.local_addr().ok() }, names)
    }
}

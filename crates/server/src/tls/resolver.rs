//! The certificate every TLS handshake presents, replaceable while the node runs (`reloadCertificate`).

use std::sync::Arc;

use parking_lot::RwLock;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Hands each handshake the node's current certificate. A reload swaps it; handshakes already past resolution
/// keep the one they took.
#[derive(Debug)]
pub(crate) struct CertResolver {
    /// A leaf lock: held to clone or replace the `Arc`, never across anything else.
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertResolver {
    pub(crate) fn new(key: Arc<CertifiedKey>) -> CertResolver {
        CertResolver { current: RwLock::new(key) }
    }

    pub(crate) fn current(&self) -> Arc<CertifiedKey> {
        self.current.read().clone()
    }

    pub(crate) fn replace(&self, key: Arc<CertifiedKey>) {
        *self.current.write() = key;
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

//! The client side of TLS: which CAs a connection trusts and which name it checks the server's certificate for.
//!
//! rustls with the `ring` provider and TLS 1.2 and 1.3 only, as the server's ports offer them. No ALPN is offered
//! (the KV TLS port lists none, as Couchbase's); a client certificate is sent only when one is given
//! ([`TlsClient::with_identity_pem`]: another cluster's XDCR authenticating by certificate).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// Why a TLS client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("no CA certificate to trust: {0}")]
    NoRoots(String),
    #[error("not a server name: {0}")]
    BadName(String),
    #[error("client certificate or key: {0}")]
    BadIdentity(String),
    #[error("tls: {0}")]
    Rustls(#[from] rustls::Error),
}

/// What a TLS connection trusts, shared by every connection made with it (cheap to clone).
#[derive(Clone)]
pub struct TlsClient {
    connector: TlsConnector,
    /// The name the server's certificate must carry; None checks the address dialled (an IP address SAN), which is
    /// what a node's generated certificate names.
    server_name: Option<ServerName<'static>>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient").field("server_name", &self.server_name).finish()
    }
}

impl TlsClient {
    /// A client trusting exactly `roots` (DER certificates), TLS 1.2 and 1.3.
    pub fn with_roots(roots: &[CertificateDer<'static>]) -> Result<TlsClient, TlsSetupError> {
        TlsClient::build(roots, None)
    }

    fn build(
        roots: &[CertificateDer<'static>],
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> Result<TlsClient, TlsSetupError> {
        let mut store = rustls::RootCertStore::empty();
        let (added, ignored) = store.add_parsable_certificates(roots.iter().cloned());
        if added == 0 {
            return Err(TlsSetupError::NoRoots(format!("{ignored} certificate(s) given, none usable as a root")));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_root_certificates(store);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => builder.with_client_auth_cert(chain, key)?,
        };
        Ok(TlsClient { connector: TlsConnector::from(Arc::new(config)), server_name: None })
    }

    /// A client trusting the CAs of `ca_pem` that presents the certificate chain of `cert_pem` with the private key
    /// of `key_pem` (PKCS#8, PKCS#1 or SEC1) when the server asks for one.
    pub fn with_identity_pem(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<TlsClient, TlsSetupError> {
        use rustls::pki_types::pem::PemObject;
        let roots = CertificateDer::pem_slice_iter(ca_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsSetupError::NoRoots(format!("bad PEM: {e}")))?;
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsSetupError::BadIdentity(format!("certificate: {e}")))?;
        if chain.is_empty() {
            return Err(TlsSetupError::BadIdentity("no certificate in the PEM".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| TlsSetupError::BadIdentity(format!("key: {e}")))?;
        TlsClient::build(&roots, Some((chain, key)))
    }

    /// A client trusting the certificates of `pem` (one or more PEM CA certificates).
    pub fn with_roots_pem(pem: &str) -> Result<TlsClient, TlsSetupError> {
        use rustls::pki_types::pem::PemObject;
        let roots = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsSetupError::NoRoots(format!("bad PEM: {e}")))?;
        TlsClient::with_roots(&roots)
    }

    /// Checks the server's certificate for `name` (a DNS name or an IP address) instead of the address dialled.
    pub fn with_server_name(mut self, name: &str) -> Result<TlsClient, TlsSetupError> {
        let name = ServerName::try_from(name.to_owned()).map_err(|_| TlsSetupError::BadName(name.to_owned()))?;
        self.server_name = Some(name);
        Ok(self)
    }

    /// The rustls connector under this client (for HTTP clients that dial TLS themselves).
    pub fn connector(&self) -> TlsConnector {
        self.connector.clone()
    }

    /// Runs the client handshake on `tcp`, connected to `addr`.
    pub async fn handshake(&self, tcp: TcpStream, addr: SocketAddr) -> std::io::Result<TlsStream<TcpStream>> {
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => ServerName::IpAddress(ip_of(addr).into()),
        };
        self.connector.connect(name, tcp).await
    }
}

/// The address as a certificate names it: an IPv4-mapped IPv6 address is the IPv4 one.
fn ip_of(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

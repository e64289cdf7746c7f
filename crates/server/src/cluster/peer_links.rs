//! Node-to-node encryption: which of this node's connections to its peers run over TLS, and where each peer's TLS
//! ports are. Couchbase's model: every node has `nodeEncryption` on or off (`setupNetConfig`), and the cluster's
//! `clusterEncryptionLevel` applies only while all of them have it on:
//!
//! | level | over TLS |
//! |---|---|
//! | (a node without node encryption) | nothing |
//! | `control` | Raft and the node-to-node REST calls |
//! | `all` | also DCP replication (and rebalance's copies) and the query service's peer calls |
//! | `strict` | as `all`; the plain client ports also refuse every connection not made to 127.0.0.1 or ::1 |
//!
//! The TLS ports are the ones each node records in the cluster metadata (`NodeInfo::tls_ports`), and a peer's
//! certificate must chain to a CA this node trusts (its own, which a joining node adopts from the cluster, and
//! those loaded with `loadTrustedCAs`) and name the address the peer is known by. The reconcile recomputes the
//! [`Links`] whenever the metadata changes; callers read them per connection, so a change applies to the next
//! connection: pooled HTTP connections of the old transport idle out, replication feeds reconnect.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::pki_types::CertificateDer;
use settee_client::TlsClient;
use settee_cluster::{ClusterMetadata, NodeId, NodeInfo, PeerTls};

use crate::auth::{EncryptionLevel, SecuritySettings};

/// What node-to-node traffic is encrypted now, and how to reach the peers' TLS ports.
#[derive(Default)]
pub struct Links {
    /// The level in force: None while some node has node encryption off (ns_server's `none`).
    pub level: Option<EncryptionLevel>,
    /// Verifies peers against the node's trusted CAs; None when nothing is encrypted or the roots are unusable.
    tls: Option<TlsClient>,
    /// "host:mgmtport" -> "host:mgmttlsport", for the control plane.
    mgmt: HashMap<String, String>,
    /// "host:queryport" -> "host:querytlsport", for the query service's peer calls (`all` and up).
    query: HashMap<String, String>,
    /// Each node's KV TLS port (`all` and up).
    kv: HashMap<NodeId, u16>,
}

/// The node's [`Links`], replaced whole by [`PeerLinks::update`]. The lock is a leaf: held only to clone the Arc.
pub struct PeerLinks {
    /// The local address peer connections come from (`--bind-peer-connections`), or none.
    source: Option<IpAddr>,
    links: RwLock<Arc<Links>>,
    /// Whether the level in force is `strict`: one relaxed load per KV batch on plain connections.
    strict: AtomicBool,
}

impl PeerLinks {
    pub fn new(source: Option<IpAddr>) -> PeerLinks {
        PeerLinks { source, links: RwLock::new(Arc::default()), strict: AtomicBool::new(false) }
    }

    pub fn source(&self) -> Option<IpAddr> {
        self.source
    }

    pub fn current(&self) -> Arc<Links> {
        self.links.read().clone()
    }

    /// The level in force (None: node encryption is not on on every node).
    pub fn level(&self) -> Option<EncryptionLevel> {
        self.current().level
    }

    /// Recomputes the links from the metadata, the security settings and the CAs the node trusts. Answers whether
    /// the level in force changed.
    pub fn update(
        &self,
        meta: &ClusterMetadata,
        settings: &SecuritySettings,
        roots: &[CertificateDer<'static>],
    ) -> bool {
        let next = Links::of(meta, settings, roots);
        let mut links = self.links.write();
        let changed = links.level != next.level;
        self.strict.store(next.level == Some(EncryptionLevel::Strict), Ordering::Relaxed);
        *links = Arc::new(next);
        changed
    }

    /// Where a node-to-node REST call to `addr` (a peer's plain "host:mgmtport") goes: its TLS port with the TLS
    /// client at `control` and up, else `addr` as it is.
    pub fn mgmt(&self, addr: &str) -> (String, Option<TlsClient>) {
        let links = self.current();
        match (links.mgmt.get(addr), &links.tls) {
            (Some(tls_addr), Some(tls)) => (tls_addr.clone(), Some(named(tls, tls_addr))),
            _ => (addr.to_owned(), None),
        }
    }

    /// The TLS routes of the control plane (Raft), or None when it is plain.
    pub fn control_plane(&self) -> Option<Arc<PeerTls>> {
        let links = self.current();
        let tls = links.tls.as_ref()?;
        Some(Arc::new(PeerTls { connector: tls.connector(), routes: links.mgmt.clone() }))
    }

    /// The TLS routes of the query service's peer calls, or None when they are plain (below `all`).
    pub fn query(&self) -> Option<Arc<PeerTls>> {
        let links = self.current();
        let tls = links.tls.as_ref().filter(|_| links.level >= Some(EncryptionLevel::All))?;
        Some(Arc::new(PeerTls { connector: tls.connector(), routes: links.query.clone() }))
    }

    /// Where a replication connection to `info`'s KV service goes: its KV TLS port with a TLS client checking the
    /// certificate for the node's host name at `all` and up; None when it stays plain.
    pub fn kv(&self, info: &NodeInfo, plain: SocketAddr) -> Option<(SocketAddr, TlsClient)> {
        let links = self.current();
        let tls = links.tls.as_ref().filter(|_| links.level >= Some(EncryptionLevel::All))?;
        let port = *links.kv.get(&info.id)?;
        Some((SocketAddr::new(plain.ip(), port), named(tls, &info.addr_with(port))))
    }

    /// Whether the `strict` level closes `stream`, just accepted on a plain port from `peer` (logged when it does).
    pub fn refuses_plain(&self, stream: &tokio::net::TcpStream, peer: SocketAddr) -> bool {
        let Ok(local) = stream.local_addr() else { return false };
        let refused = self.plain_port_refuses(local);
        if refused {
            tracing::info!(%peer, %local, "closing a connection to a plain port: the cluster encryption level is strict (use the TLS port)");
        }
        refused
    }

    /// Whether a connection accepted on a plain client port to `local` (the address the client dialled) is refused:
    /// at `strict`, only connections to 127.0.0.1 and ::1 stay, as Couchbase binds its plain ports to localhost.
    pub fn plain_port_refuses(&self, local: SocketAddr) -> bool {
        self.is_strict() && self.plain_port_refuses_at_strict(local)
    }

    /// Whether a plain connection to `local` is one the `strict` level closes (it was not made to 127.0.0.1 or ::1).
    pub fn plain_port_refuses_at_strict(&self, local: SocketAddr) -> bool {
        !is_localhost(local.ip())
    }

    /// Whether the level in force is `strict`.
    pub fn is_strict(&self) -> bool {
        self.strict.load(Ordering::Relaxed)
    }
}

impl Links {
    fn of(meta: &ClusterMetadata, settings: &SecuritySettings, roots: &[CertificateDer<'static>]) -> Links {
        let everyone = !meta.nodes.is_empty() && meta.nodes.values().all(|n| n.node_encryption);
        if !everyone {
            return Links::default();
        }
        let level = settings.cluster_encryption_level;
        // Every node's CA besides this node's own: nodes with certificates from different CAs verify each other.
        let mut roots = roots.to_vec();
        for n in meta.nodes.values().filter(|n| !n.tls_ca.is_empty()) {
            use rustls::pki_types::pem::PemObject;
            match CertificateDer::pem_slice_iter(n.tls_ca.as_bytes()).collect::<Result<Vec<_>, _>>() {
                Ok(certs) => roots.extend(certs),
                Err(e) => tracing::warn!(node = n.id, error = %e, "a node's CA in the metadata does not parse"),
            }
        }
        let tls = match TlsClient::with_roots(&roots) {
            Ok(tls) => Some(tls),
            Err(e) => {
                tracing::error!(error = %e, "node-to-node encryption is on but the node's CAs cannot verify peers: peer connections stay plain");
                None
            }
        };
        let mut links = Links { level: Some(level), tls, ..Links::default() };
        for n in meta.nodes.values() {
            if n.tls_ports.mgmt != 0 {
                links.mgmt.insert(n.mgmt_addr(), n.addr_with(n.tls_ports.mgmt));
            }
            if n.tls_ports.query != 0 {
                links.query.insert(n.addr_with(n.query_port), n.addr_with(n.tls_ports.query));
            }
            if n.tls_ports.kv != 0 {
                links.kv.insert(n.id, n.tls_ports.kv);
            }
        }
        links
    }
}

/// `tls` checking the certificate for the host of `addr` ("host:port" or "[v6]:port").
fn named(tls: &TlsClient, addr: &str) -> TlsClient {
    tls.clone().with_server_name(settee_client::host_of(addr)).unwrap_or_else(|e| {
        tracing::warn!(%addr, error = %e, "peer host is not a certificate name; checking the address dialled");
        tls.clone()
    })
}

fn is_localhost(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4 == std::net::Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => {
            v6 == std::net::Ipv6Addr::LOCALHOST || v6.to_ipv4_mapped() == Some(std::net::Ipv4Addr::LOCALHOST)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_cluster::TlsPorts;

    fn node(id: NodeId, encrypted: bool) -> NodeInfo {
        let tls_ports = TlsPorts { kv: 11207, mgmt: 18091, query: 18093 };
        NodeInfo { tls_ports, node_encryption: encrypted, ..NodeInfo::new(id, &format!("127.0.0.{id}"), 8091) }
    }

    fn meta(encrypted: &[bool]) -> ClusterMetadata {
        let mut meta = ClusterMetadata::default();
        for (i, e) in encrypted.iter().enumerate() {
            let id = i as NodeId + 1;
            meta.nodes.insert(id, node(id, *e));
        }
        meta
    }

    /// Proves the level applies only once every node has node encryption on, and what each level encrypts: the
    /// control plane from `control`, replication and query calls from `all`, the plain ports' refusal at `strict`
    /// (127.0.0.1 and ::1 still accepted).
    #[test]
    fn each_level_encrypts_its_traffic_once_every_node_has_node_encryption() {
        let config = crate::config::ServerConfig::for_tests();
        let roots = crate::tls::NodeTls::open(&config).expect("certificates").peer_roots();
        let at = |level| SecuritySettings { cluster_encryption_level: level, ..SecuritySettings::default() };
        let links = PeerLinks::new(None);
        let plain_kv: SocketAddr = "127.0.0.2:11210".parse().expect("addr");

        links.update(&meta(&[true, false]), &at(EncryptionLevel::Strict), &roots);
        assert_eq!(links.level(), None, "one node without node encryption: nothing is encrypted");
        let (addr, tls) = links.mgmt("127.0.0.2:8091");
        assert_eq!((addr.as_str(), tls.is_some()), ("127.0.0.2:8091", false));
        assert!(links.control_plane().is_none() && !links.plain_port_refuses("127.0.0.2:11210".parse().unwrap()));

        assert!(links.update(&meta(&[true, true]), &at(EncryptionLevel::Control), &roots));
        let (addr, tls) = links.mgmt("127.0.0.2:8091");
        assert_eq!((addr.as_str(), tls.is_some()), ("127.0.0.2:18091", true));
        assert!(links.control_plane().is_some_and(|t| t.routes["127.0.0.1:8091"] == "127.0.0.1:18091"));
        assert!(links.query().is_none() && links.kv(&node(2, true), plain_kv).is_none(), "data stays plain");

        links.update(&meta(&[true, true]), &at(EncryptionLevel::All), &roots);
        let (kv, _) = links.kv(&node(2, true), plain_kv).expect("replication over TLS");
        assert_eq!(kv, "127.0.0.2:11207".parse().unwrap());
        assert!(links.query().is_some_and(|t| t.routes["127.0.0.2:8093"] == "127.0.0.2:18093"));
        assert!(!links.plain_port_refuses("127.0.0.2:11210".parse().unwrap()));

        links.update(&meta(&[true, true]), &at(EncryptionLevel::Strict), &roots);
        assert!(links.plain_port_refuses("127.0.0.2:11210".parse().unwrap()));
        assert!(!links.plain_port_refuses("127.0.0.1:11210".parse().unwrap()));
        assert!(!links.plain_port_refuses("[::1]:11210".parse().unwrap()));
        let _ = std::fs::remove_dir_all(config.data_dir);
    }

    /// A TLS server on 127.0.0.1 presenting a certificate from a CA of its own; answers its address and the CA PEM.
    async fn server_with_own_ca() -> (SocketAddr, String) {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).expect("CA");
        let issuer = rcgen::Issuer::new(ca, &ca_key);
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
        let cert = cert.signed_by(&key, &issuer).expect("certificate");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move { drop(acceptor.accept(tcp).await) });
            }
        });
        (addr, ca_cert.pem())
    }

    /// Proves a peer whose certificate comes from another CA than this node's (a node given its own certificates
    /// with `--tls-cert`) is trusted once the metadata carries that node's CA, and refused before.
    #[tokio::test]
    async fn a_peer_certified_by_another_ca_is_trusted_through_its_ca_in_the_metadata() {
        let config = crate::config::ServerConfig::for_tests();
        let roots = crate::tls::NodeTls::open(&config).expect("certificates").peer_roots();
        let (server, ca_pem) = server_with_own_ca().await;
        let mut meta = meta(&[true, true]);
        let peer = meta.nodes.get_mut(&2).expect("node 2");
        (peer.hostname, peer.mgmt_port, peer.tls_ports.mgmt) = ("127.0.0.1".into(), 1, server.port());
        let links = PeerLinks::new(None);
        let handshake = |links: &PeerLinks| {
            let (addr, tls) = links.mgmt("127.0.0.1:1");
            async move {
                let addr: SocketAddr = addr.parse().expect("the TLS address");
                let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
                tls.expect("encrypted at control").handshake(tcp, addr).await
            }
        };
        links.update(&meta, &SecuritySettings::default(), &roots);
        assert!(handshake(&links).await.is_err(), "a CA this node does not know");
        meta.nodes.get_mut(&2).expect("node 2").tls_ca = ca_pem;
        links.update(&meta, &SecuritySettings::default(), &roots);
        handshake(&links).await.expect("trusted through the metadata");
        let _ = std::fs::remove_dir_all(config.data_dir);
    }
}

//! The smart client: bootstrap from a seed node (HELLO, SASL PLAIN, SELECT_BUCKET, GET_CLUSTER_CONFIG), a
//! connection to every KV node of the map ([`NodeConnections`]), newer configs from the server, and the
//! reconciliation of the connections with a new node list.

use std::net::SocketAddr;
use std::time::Duration;

use settee_mcbp::{Feature, Opcode};

use crate::config::ClusterConfig;
use crate::connection::{ClientError, Connection};
use crate::node_connections::{NodeConnections, Reconciled};

/// How long opening a connection to a node that joined the map may take (connect, HELLO, SASL, SELECT_BUCKET)
/// before it counts as unreachable.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// What every connection of a smart client negotiates.
#[derive(Clone, Debug)]
pub struct BootstrapOptions {
    pub user: String,
    pub password: String,
    pub bucket: String,
    pub features: Vec<Feature>,
    /// The HELLO agent string, shown in the server's logs.
    pub agent: String,
    /// TLS for every connection (the seeds are then TLS ports, and each node is reached on its `kvSSL` port).
    pub tls: Option<crate::TlsClient>,
    /// How every connection authenticates (PLAIN unless told otherwise).
    pub auth: crate::Auth,
}

/// The features the official SDKs ask for that change what goes over the wire for KV operations. Duplex with brief
/// cluster-map notifications, as the current SDKs do: a node pushes (magic 0x82, opcode 0x01) the revision of every
/// new config, and the client fetches the config with GET_CLUSTER_CONFIG when it is newer than its own.
pub const SDK_FEATURES: &[Feature] = &[
    Feature::TcpNoDelay,
    Feature::MutationSeqno,
    Feature::Xattr,
    Feature::Xerror,
    Feature::SelectBucket,
    Feature::Json,
    Feature::UnorderedExecution,
    Feature::AltRequestSupport,
    Feature::SyncReplication,
    Feature::Collections,
    Feature::PreserveTtl,
    Feature::Duplex,
    Feature::ClustermapChangeNotificationBrief,
];

/// A bootstrapped cluster: the options to open more connections with, and the current map.
#[derive(Clone, Debug)]
pub struct Cluster {
    options: BootstrapOptions,
    seed_host: String,
    config: ClusterConfig,
}

/// What applying a config from the server changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigChange {
    /// Not newer than the current one (or unparsable): nothing changed.
    Ignored,
    /// A newer map over the same nodes: routing changed, connections stay.
    Map,
    /// The node list changed: the connections must follow with [`Cluster::reconcile`].
    Nodes,
}

impl Cluster {
    /// Bootstraps from the first of `seeds` (`host:port` of a KV service) that answers, returning the cluster and
    /// the handshaken connection to that seed.
    /// With `options.tls` the seeds are TLS ports; the config's `kv_nodes` stay the plain endpoints the bucket
    /// config names, and every node is dialled on its TLS port (`ClusterConfig::dial_addr`).
    pub async fn bootstrap(seeds: &[String], options: BootstrapOptions) -> Result<(Cluster, Connection), ClientError> {
        let mut last = ClientError::Config("no seed nodes".into());
        for seed in seeds {
            match Cluster::bootstrap_one(seed, &options).await {
                Ok(found) => return Ok(found),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn bootstrap_one(seed: &str, options: &BootstrapOptions) -> Result<(Cluster, Connection), ClientError> {
        let mut conn = handshake(seed, options).await?;
        let r = conn.call(Opcode::GetClusterConfig as u8, &[], &[], &[], 0, 0).await?;
        if r.status != 0 {
            return Err(ClientError::Status { what: "GET_CLUSTER_CONFIG", status: r.status });
        }
        let seed_host = host_of(seed).to_owned();
        let config = ClusterConfig::parse(&r.value, &seed_host)?;
        Ok((Cluster { options: options.clone(), seed_host, config }, conn))
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub fn options(&self) -> &BootstrapOptions {
        &self.options
    }

    /// Applies a config the server sent (a NOT_MY_VBUCKET body, a push, a GET_CLUSTER_CONFIG reply) if it is newer
    /// than the current one.
    pub fn apply_config(&mut self, body: &[u8]) -> ConfigChange {
        let Ok(next) = ClusterConfig::parse(body, &self.seed_host) else { return ConfigChange::Ignored };
        if !next.is_newer_than(&self.config) {
            return ConfigChange::Ignored;
        }
        let nodes_changed = next.kv_nodes != self.config.kv_nodes;
        self.config = next;
        if nodes_changed {
            ConfigChange::Nodes
        } else {
            ConfigChange::Map
        }
    }

    /// A handshaken connection to every KV node of the current map, in map order.
    pub async fn connect_all(&self) -> Result<NodeConnections, ClientError> {
        let mut conns = Vec::with_capacity(self.config.kv_nodes.len());
        for node in 0..self.config.kv_nodes.len() {
            let addr = self.config.dial_addr(node, self.options.tls.is_some())?;
            conns.push(Some(handshake(addr, &self.options).await?));
        }
        Ok(NodeConnections::new(conns, self.config.clone()))
    }

    /// Brings `nodes` in line with the current config (after [`ConfigChange::Nodes`]): the connections to nodes
    /// still listed are kept as they are, with whatever they have in flight; a connection is opened to every new
    /// node (and to a listed node whose connection failed); connections to nodes no longer listed are closed. A node
    /// that cannot be reached within a few seconds keeps an empty slot and is reported.
    pub async fn reconcile(&self, nodes: &mut NodeConnections) -> Reconciled {
        let mut opened = Vec::new();
        for (index, _) in nodes.to_open(&self.config) {
            let addr = match self.config.dial_addr(index, self.options.tls.is_some()) {
                Ok(addr) => addr,
                Err(e) => {
                    opened.push((index, Err(e)));
                    continue;
                }
            };
            let attempt = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(addr, &self.options)).await {
                Ok(r) => r,
                Err(_) => Err(ClientError::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no handshake with {addr} within {HANDSHAKE_TIMEOUT:?}"),
                ))),
            };
            opened.push((index, attempt));
        }
        nodes.replace(&self.config, opened)
    }

    /// Resolves `scope.collection` to its collection id (GET_COLLECTION_ID).
    pub async fn collection_id(conn: &mut Connection, path: &str) -> Result<u32, ClientError> {
        let r = conn.call(Opcode::GetCollectionId as u8, &[], &[], path.as_bytes(), 0, 0).await?;
        if r.status != 0 {
            return Err(ClientError::Status { what: "GET_COLLECTION_ID", status: r.status });
        }
        let e = r.extras.get(8..12).ok_or_else(|| ClientError::Protocol("GET_COLLECTION_ID extras".into()))?;
        Ok(u32::from_be_bytes([e[0], e[1], e[2], e[3]]))
    }
}

/// Opens a connection to `host:port` and runs HELLO, authentication (`options.auth`) and SELECT_BUCKET.
async fn handshake(addr: &str, options: &BootstrapOptions) -> Result<Connection, ClientError> {
    let sock = resolve(addr).await?;
    let mut conn = Connection::connect_raw_with(sock, None, options.tls.as_ref()).await?;
    conn.hello(&options.agent, &options.features).await?;
    conn.authenticate(options.auth, &options.user, &options.password).await?;
    conn.select_bucket(&options.bucket).await?;
    Ok(conn)
}

/// The first address `host:port` resolves to.
pub async fn resolve(addr: &str) -> Result<SocketAddr, ClientError> {
    tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| ClientError::Config(format!("{addr} does not resolve to an address")))
}

/// The host part of `host:port`, `[v6]:port` or a bare host, without brackets (the name a certificate is checked
/// for, the host a config's `$HOST` stands for).
pub fn host_of(addr: &str) -> &str {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) && !host.is_empty() => host,
        _ => addr,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_connections::Route;
    use settee_mcbp::{decode_request, encode_response, Request};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn options() -> BootstrapOptions {
        BootstrapOptions {
            user: "u".into(),
            password: "p".into(),
            bucket: "b".into(),
            features: vec![],
            agent: "t".into(),
            tls: None,
            auth: crate::Auth::Plain,
        }
    }

    fn body(rev: i64, list: &str, map: &str) -> Vec<u8> {
        format!(r#"{{"rev":{rev},"vBucketServerMap":{{"serverList":{list},"vBucketMap":{map}}}}}"#).into_bytes()
    }

    /// A fake KV node: counts the connections it accepts and those that closed, and answers every request with
    /// success and an empty body (enough for HELLO, SASL and SELECT_BUCKET, and for a GET).
    struct FakeNode {
        addr: String,
        accepted: Arc<AtomicUsize>,
        closed: Arc<AtomicUsize>,
    }

    async fn fake_node() -> FakeNode {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (accepted, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, c) = (accepted.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let c = c.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let n = s.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            c.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let mut out = Vec::new();
                        while let Ok(Some((r, used))) = decode_request(&buf, 1 << 20) {
                            encode_response(&mut out, r.opcode, 0, r.opaque, 0, 0, &[], &[], &[], &[]);
                            buf.drain(..used);
                        }
                        let _ = s.write_all(&out).await;
                    }
                });
            }
        });
        FakeNode { addr, accepted, closed }
    }

    fn list(nodes: &[&str]) -> String {
        format!("[{}]", nodes.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(","))
    }

    /// From [a, b] to [b, c]: the connection to b is kept (a request sent on it before gets its reply after, at
    /// b's new index), c gets a new connection, a's is closed; then a node that refuses connections gets an empty,
    /// reported slot while the others stay as they are.
    #[tokio::test]
    async fn reconcile_keeps_connections_to_nodes_that_stay() {
        let (a, b, c) = (fake_node().await, fake_node().await, fake_node().await);
        let config = ClusterConfig::parse(&body(1, &list(&[&a.addr, &b.addr]), "[[0],[1]]"), "s").unwrap();
        let mut cluster = Cluster { options: options(), seed_host: "s".into(), config };
        let mut nodes = cluster.connect_all().await.unwrap();
        let get = Request::client(0, b"k");
        let opaque = nodes.queue(Route { node: 1, vbucket: 1 }, &get).unwrap();
        nodes.flush().await.unwrap();

        let change = cluster.apply_config(&body(2, &list(&[&b.addr, &c.addr]), "[[0],[1]]"));
        assert_eq!(change, ConfigChange::Nodes);
        let r = cluster.reconcile(&mut nodes).await;
        assert_eq!(r.moved, [None, Some(0)]);
        assert!(r.unreachable.is_empty());
        assert_eq!((nodes.len(), nodes.addr(0), nodes.addr(1)), (2, Some(b.addr.as_str()), Some(c.addr.as_str())));
        let reply = nodes.node(0).unwrap().read_response().await.unwrap();
        assert_eq!(reply.opaque, opaque, "the request sent to b before is answered on the kept connection");
        let counts = |n: &FakeNode| (n.accepted.load(Ordering::SeqCst), n.closed.load(Ordering::SeqCst));
        assert_eq!((counts(&b), counts(&c).0), ((1, 0), 1));
        for _ in 0..200 {
            if counts(&a) == (1, 1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(counts(&a), (1, 1), "the connection to a was closed");

        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        cluster.apply_config(&body(3, &list(&[&b.addr, &c.addr, &refused]), "[[0],[1]]"));
        let r = cluster.reconcile(&mut nodes).await;
        assert_eq!(r.moved, [Some(0), Some(1)]);
        assert_eq!(r.unreachable.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [2]);
        assert!(nodes.is_up(0) && nodes.is_up(1) && !nodes.is_up(2));
        assert_eq!((counts(&b).0, counts(&c).0), (1, 1), "no new connection to nodes that stay");
        assert_eq!(nodes.queue(Route { node: 2, vbucket: 0 }, &get), None, "nothing is queued on an empty slot");
    }

    /// The seed's host is what `$HOST` stands for, with IPv6 brackets removed.
    #[test]
    fn host_of_strips_port_and_brackets() {
        assert_eq!(host_of("127.0.0.1:11210"), "127.0.0.1");
        assert_eq!(host_of("[::1]:11210"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
        assert_eq!(host_of("node-a.example:8091"), "node-a.example");
    }

    /// A newer config over the same nodes changes the map only; a new node list asks for reconnection; an older
    /// or unparsable body is ignored.
    #[test]
    fn apply_config_reports_what_changed() {
        let config = ClusterConfig::parse(&body(5, r#"["a:1","b:1"]"#, "[[0],[1]]"), "s").unwrap();
        let mut c = Cluster { options: options(), seed_host: "s".into(), config };
        assert_eq!(c.apply_config(&body(4, r#"["a:1","b:1"]"#, "[[1],[1]]")), ConfigChange::Ignored);
        assert_eq!(c.apply_config(b"{"), ConfigChange::Ignored);
        assert_eq!(c.apply_config(&body(6, r#"["a:1","b:1"]"#, "[[1],[1]]")), ConfigChange::Map);
        assert_eq!(c.config().active_node(0), Some(1));
        assert_eq!(c.apply_config(&body(7, r#"["a:1"]"#, "[[0],[0]]")), ConfigChange::Nodes);
    }
}

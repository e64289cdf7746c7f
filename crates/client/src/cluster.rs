//! The smart client: bootstrap from a seed node (HELLO, SASL PLAIN, SELECT_BUCKET, GET_CLUSTER_CONFIG), a
//! connection to every KV node of the map, and routing of each key to the node holding its vBucket active.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use settee_mcbp::{Feature, Opcode, Request};

use crate::config::ClusterConfig;
use crate::connection::{ClientError, Connection};

/// What every connection of a smart client negotiates.
#[derive(Clone, Debug)]
pub struct BootstrapOptions {
    pub user: String,
    pub password: String,
    pub bucket: String,
    pub features: Vec<Feature>,
    /// The HELLO agent string, shown in the server's logs.
    pub agent: String,
}

/// The features the official SDKs ask for that change what goes over the wire for KV operations.
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
];

/// A bootstrapped cluster: the options to open more connections with, and the current map.
#[derive(Clone, Debug)]
pub struct Cluster {
    options: BootstrapOptions,
    seed_host: String,
    config: ClusterConfig,
}

/// Where a key goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Index of the node connection.
    pub node: usize,
    pub vbucket: u16,
}

/// What applying a config from the server changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigChange {
    /// Not newer than the current one (or unparsable): nothing changed.
    Ignored,
    /// A newer map over the same nodes: routing changed, connections stay.
    Map,
    /// The node list changed: connections must be reopened with [`Cluster::connect_all`].
    Nodes,
}

impl Cluster {
    /// Bootstraps from the first of `seeds` (`host:port` of a KV service) that answers, returning the cluster and
    /// the handshaken connection to that seed.
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
        let seed_host = host_of(seed);
        let config = ClusterConfig::parse(&r.value, &seed_host)?;
        Ok((Cluster { options: options.clone(), seed_host, config }, conn))
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub fn options(&self) -> &BootstrapOptions {
        &self.options
    }

    /// Applies a config the server sent (a NOT_MY_VBUCKET body) if it is newer than the current one.
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
        for node in &self.config.kv_nodes {
            conns.push(handshake(node, &self.options).await?);
        }
        Ok(NodeConnections { conns, config: self.config.clone() })
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

/// One connection per KV node, and the map they were opened for.
pub struct NodeConnections {
    conns: Vec<Connection>,
    config: ClusterConfig,
}

impl NodeConnections {
    /// Where `key` (without its collection prefix) goes; None when its vBucket has no active node.
    pub fn route(&self, key: &[u8]) -> Option<Route> {
        let vbucket = self.config.vbucket_of(key);
        self.config.active_node(vbucket).map(|node| Route { node, vbucket })
    }

    /// Takes a newer map over the same nodes (see [`Cluster::apply_config`]).
    pub fn set_config(&mut self, config: &ClusterConfig) {
        if config.kv_nodes == self.config.kv_nodes {
            self.config = config.clone();
        }
    }

    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    pub fn node(&mut self, node: usize) -> &mut Connection {
        &mut self.conns[node]
    }

    /// Queues `req` on the node of `route` with the route's vBucket; returns the opaque.
    pub fn queue(&mut self, route: Route, req: &Request<'_>) -> u32 {
        self.conns[route.node].queue(&Request { vbucket: route.vbucket, ..*req })
    }

    /// Flushes every node connection with queued requests.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        for c in &mut self.conns {
            c.flush().await?;
        }
        Ok(())
    }

    /// Waits until any of the nodes in `waiting` (indexes) sends bytes; returns that node's index.
    pub async fn fill_any(&mut self, waiting: &[usize]) -> Result<usize, ClientError> {
        poll_fn(|cx| self.poll_fill_any(cx, waiting)).await
    }

    fn poll_fill_any(&mut self, cx: &mut Context<'_>, waiting: &[usize]) -> Poll<Result<usize, ClientError>> {
        for &i in waiting {
            if let Poll::Ready(r) = self.conns[i].poll_fill(cx) {
                return Poll::Ready(r.map(|_| i));
            }
        }
        Poll::Pending
    }
}

/// Opens a connection to `host:port` and runs HELLO, SASL PLAIN and SELECT_BUCKET.
async fn handshake(addr: &str, options: &BootstrapOptions) -> Result<Connection, ClientError> {
    let sock = resolve(addr).await?;
    let mut conn = Connection::connect_raw(sock).await?;
    conn.hello(&options.agent, &options.features).await?;
    conn.sasl_plain(&options.user, &options.password).await?;
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

/// The host part of `host:port` or `[v6]:port`.
fn host_of(addr: &str) -> String {
    let host = match addr.rsplit_once(':') {
        Some((h, _)) => h,
        None => addr,
    };
    host.trim_start_matches('[').trim_end_matches(']').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's host is what `$HOST` stands for, with IPv6 brackets removed.
    #[test]
    fn host_of_strips_port_and_brackets() {
        assert_eq!(host_of("127.0.0.1:11210"), "127.0.0.1");
        assert_eq!(host_of("[::1]:11210"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }

    /// A newer config over the same nodes changes the map only; a new node list asks for reconnection; an older
    /// or unparsable body is ignored.
    #[test]
    fn apply_config_reports_what_changed() {
        let body = |rev: i64, list: &str, map: &str| {
            format!(r#"{{"rev":{rev},"vBucketServerMap":{{"serverList":{list},"vBucketMap":{map}}}}}"#).into_bytes()
        };
        let opts = BootstrapOptions {
            user: "u".into(),
            password: "p".into(),
            bucket: "b".into(),
            features: vec![],
            agent: "t".into(),
        };
        let config = ClusterConfig::parse(&body(5, r#"["a:1","b:1"]"#, "[[0],[1]]"), "s").unwrap();
        let mut c = Cluster { options: opts, seed_host: "s".into(), config };
        assert_eq!(c.apply_config(&body(4, r#"["a:1","b:1"]"#, "[[1],[1]]")), ConfigChange::Ignored);
        assert_eq!(c.apply_config(b"{"), ConfigChange::Ignored);
        assert_eq!(c.apply_config(&body(6, r#"["a:1","b:1"]"#, "[[1],[1]]")), ConfigChange::Map);
        assert_eq!(c.config().active_node(0), Some(1));
        assert_eq!(c.apply_config(&body(7, r#"["a:1"]"#, "[[0],[0]]")), ConfigChange::Nodes);
    }
}

//! One benchmark connection to the target: a smart-client connection set for `couchbase://` (one socket per KV
//! node, keys routed by vBucket, following the cluster map as it changes), or one plain socket for `memcached://`.
//! Both encode the same GET and SET requests; only the routing, the collection prefix, the datatype and the
//! durability frame differ.

use settee_client::{ClientError, Cluster, ConfigChange, Connection, NodeConnections, NodeError, Reconciled, Route};
use settee_mcbp::{encode_leb128, Feature, Opcode, Request, Response};

/// Request extras of a SET: flags and expiry, both zero.
const SET_EXTRAS: [u8; 8] = [0; 8];
/// The JSON datatype bit.
const DATATYPE_JSON: u8 = 0x01;
/// Frame info id of a durability requirement (the level follows in one byte).
const FRAME_DURABILITY_ONE_BYTE: u8 = 0x11;

/// How to open links; shared by every connection of a run.
#[derive(Clone, Debug)]
pub(crate) enum LinkFactory {
    Couchbase {
        cluster: Box<Cluster>,
        /// The collection id keys go to (0: the default collection).
        cid: u32,
        /// The durability level byte, or none.
        durability: Option<u8>,
    },
    Memcached {
        addr: std::net::SocketAddr,
    },
}

impl LinkFactory {
    pub(crate) async fn open(&self) -> Result<Link, ClientError> {
        match self {
            LinkFactory::Memcached { addr } => Ok(Link::Memcached(Connection::connect_raw(*addr).await?, *addr)),
            LinkFactory::Couchbase { cluster, cid, durability } => {
                let mut nodes = cluster.connect_all().await?;
                let (collections, json) = match nodes.node(0) {
                    None => (false, false),
                    Some(c) => (c.collections(), c.has(Feature::Json)),
                };
                if *cid != 0 && !collections {
                    return Err(ClientError::Config("the server did not agree to Collections".into()));
                }
                let mut prefix = Vec::new();
                if collections {
                    encode_leb128(*cid, &mut prefix);
                }
                let framing = durability.map(|level| vec![FRAME_DURABILITY_ONE_BYTE, level]).unwrap_or_default();
                Ok(Link::Couchbase(Box::new(CouchbaseLink {
                    nodes,
                    cluster: (**cluster).clone(),
                    prefix,
                    json,
                    framing,
                    reconcile: false,
                })))
            }
        }
    }
}

pub(crate) struct CouchbaseLink {
    nodes: NodeConnections,
    cluster: Cluster,
    /// LEB128 collection id in front of every key (empty without Collections).
    prefix: Vec<u8>,
    /// Whether JSON was negotiated, so JSON bodies may be flagged as such.
    json: bool,
    framing: Vec<u8>,
    /// The node list changed: the connections must be reconciled with it before routing by the new map.
    reconcile: bool,
}

pub(crate) enum Link {
    Couchbase(Box<CouchbaseLink>),
    Memcached(Connection, std::net::SocketAddr),
}

/// Where a request went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Queued {
    pub node: usize,
    pub opaque: u32,
    pub vbucket: u16,
}

/// Why a request could not be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueError {
    /// The key's vBucket has no active node in the current map.
    NoActiveNode,
    /// The node holding the key's vBucket has no connection (it failed, or could not be opened).
    NodeDown,
}

/// What the map says of a node, by endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeState {
    /// Not in the node list.
    Unlisted,
    /// Listed, with an open connection.
    Up,
    /// Listed, without a connection.
    Down,
}

impl Link {
    pub(crate) fn node_count(&self) -> usize {
        match self {
            Link::Couchbase(c) => c.nodes.len(),
            Link::Memcached(..) => 1,
        }
    }

    /// The bytes that go in front of every key on the wire (the collection prefix), written into `key` before the
    /// caller appends the key itself.
    pub(crate) fn key_prefix(&self) -> &[u8] {
        match self {
            Link::Couchbase(c) => &c.prefix,
            Link::Memcached(..) => &[],
        }
    }

    /// Queues a GET (`value` None) or SET of `wire_key` (prefix included; the bare key starts at `prefix_len`).
    pub(crate) fn queue(
        &mut self,
        wire_key: &[u8],
        prefix_len: usize,
        value: Option<(&[u8], bool)>,
    ) -> Result<Queued, QueueError> {
        let (opcode, extras, body) = match value {
            Some((v, _)) => (Opcode::Set as u8, &SET_EXTRAS[..], v),
            None => (Opcode::Get as u8, &[][..], &[][..]),
        };
        let mut req = Request { extras, value: body, ..Request::client(opcode, wire_key) };
        match self {
            Link::Memcached(c, _) => Ok(Queued { node: 0, opaque: c.queue(&req), vbucket: 0 }),
            Link::Couchbase(c) => {
                let route: Route = c.nodes.route(&wire_key[prefix_len..]).ok_or(QueueError::NoActiveNode)?;
                if let Some((_, is_json)) = value {
                    req.framing = &c.framing;
                    if is_json && c.json {
                        req.datatype = DATATYPE_JSON;
                    }
                }
                let opaque = c.nodes.queue(route, &req).ok_or(QueueError::NodeDown)?;
                Ok(Queued { node: route.node, opaque, vbucket: route.vbucket })
            }
        }
    }

    pub(crate) async fn flush(&mut self) -> Result<(), NodeError> {
        match self {
            Link::Couchbase(c) => c.nodes.flush().await,
            Link::Memcached(c, addr) => c.flush().await.map_err(|source| memcached_error(*addr, source)),
        }
    }

    /// Waits until one of the `waiting` nodes sends bytes. Cancel-safe.
    pub(crate) async fn fill_any(&mut self, waiting: &[usize]) -> Result<usize, NodeError> {
        match self {
            Link::Couchbase(c) => c.nodes.fill_any(waiting).await,
            Link::Memcached(c, addr) => c.fill().await.map(|_| 0).map_err(|source| memcached_error(*addr, source)),
        }
    }

    /// The next frame already received from `node` (a reply or a server push); None when there is none, or when
    /// the node has no connection.
    pub(crate) fn next_response(&mut self, node: usize) -> Result<Option<Response<'_>>, ClientError> {
        match self {
            Link::Couchbase(c) => match c.nodes.node(node) {
                Some(conn) => conn.next_response(),
                None => Ok(None),
            },
            Link::Memcached(c, _) => c.next_response(),
        }
    }

    /// Takes a config from the server (a NOT_MY_VBUCKET body, a push, a GET_CLUSTER_CONFIG reply) if it is newer
    /// than the current one. A newer map over the same nodes routes the following requests at once; a new node
    /// list is followed at the driver's next [`Link::reconcile`], which keeps the connections to the nodes that stay
    /// (and what is in flight on them), opens connections to the new ones and closes the others.
    pub(crate) fn apply_config(&mut self, body: &[u8]) -> ConfigChange {
        match self {
            Link::Couchbase(c) => {
                let change = c.cluster.apply_config(body);
                match change {
                    ConfigChange::Map => c.nodes.set_config(c.cluster.config()),
                    ConfigChange::Nodes => c.reconcile = true,
                    ConfigChange::Ignored => {}
                }
                change
            }
            Link::Memcached(..) => ConfigChange::Ignored,
        }
    }

    /// The (epoch, revision) of the config the link holds.
    pub(crate) fn config_rev(&self) -> (i64, i64) {
        match self {
            Link::Couchbase(c) => (c.cluster.config().rev_epoch, c.cluster.config().rev),
            Link::Memcached(..) => (i64::MAX, i64::MAX),
        }
    }

    /// The node holding `vbucket` active in the map requests are routed by.
    pub(crate) fn active_node(&self, vbucket: u16) -> Option<usize> {
        match self {
            Link::Couchbase(c) => c.nodes.active_node(vbucket),
            Link::Memcached(..) => Some(0),
        }
    }

    /// Whether the connections must follow a new node list (or retry nodes without a connection) before more
    /// requests are routed.
    pub(crate) fn needs_reconcile(&self) -> bool {
        matches!(self, Link::Couchbase(c) if c.reconcile)
    }

    /// Asks for a reconciliation even though the node list did not change: it reopens connections to listed nodes
    /// whose connection failed.
    pub(crate) fn request_reconcile(&mut self) {
        if let Link::Couchbase(c) = self {
            c.reconcile = true;
        }
    }

    /// Brings the connections in line with the current config (see [`settee_client::Cluster::reconcile`]).
    pub(crate) async fn reconcile(&mut self) -> Reconciled {
        match self {
            Link::Couchbase(c) => {
                c.reconcile = false;
                c.cluster.reconcile(&mut c.nodes).await
            }
            Link::Memcached(..) => Reconciled { moved: vec![Some(0)], unreachable: Vec::new() },
        }
    }

    /// Queues a GET_CLUSTER_CONFIG on `node`; returns its opaque, or None when the node has no connection.
    pub(crate) fn request_config(&mut self, node: usize) -> Option<u32> {
        let Link::Couchbase(c) = self else { return None };
        let req = Request::client(Opcode::GetClusterConfig as u8, &[]);
        c.nodes.node(node).map(|conn| conn.queue(&req))
    }

    /// The endpoint of node `node`.
    pub(crate) fn node_addr(&self, node: usize) -> String {
        match self {
            Link::Couchbase(c) => c.nodes.addr(node).unwrap_or_default().to_owned(),
            Link::Memcached(_, addr) => addr.to_string(),
        }
    }

    /// Whether `node` has an open connection.
    pub(crate) fn is_up(&self, node: usize) -> bool {
        match self {
            Link::Couchbase(c) => c.nodes.is_up(node),
            Link::Memcached(..) => node == 0,
        }
    }

    /// The first node with an open connection, to ask for the config; None with memcached, which has one node and
    /// no config.
    pub(crate) fn first_up_node(&self) -> Option<usize> {
        match self {
            Link::Couchbase(c) => (0..c.nodes.len()).find(|&n| c.nodes.is_up(n)),
            Link::Memcached(..) => None,
        }
    }

    /// What the current config says of the node at `addr`.
    pub(crate) fn node_state(&self, addr: &str) -> NodeState {
        let Link::Couchbase(c) = self else { return NodeState::Up };
        // The cluster's config is the newest; the connections may not have followed it yet.
        if !c.cluster.config().kv_nodes.iter().any(|n| n == addr) {
            return NodeState::Unlisted;
        }
        match (0..c.nodes.len()).find(|&n| c.nodes.addr(n) == Some(addr)) {
            Some(n) if c.nodes.is_up(n) => NodeState::Up,
            _ => NodeState::Down,
        }
    }
}

fn memcached_error(addr: std::net::SocketAddr, source: ClientError) -> NodeError {
    NodeError { node: 0, addr: addr.to_string(), source }
}

//! One benchmark connection to the target: a smart-client connection set for `couchbase://` (one socket per KV
//! node, keys routed by vBucket), or one plain socket for `memcached://`. Both encode the same GET and SET
//! requests; only the routing, the collection prefix, the datatype and the durability frame differ.

use settee_client::{ClientError, Cluster, ConfigChange, Connection, NodeConnections, Route};
use settee_mcbp::{encode_leb128, Feature, Magic, Opcode, Request, Response};

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
            LinkFactory::Memcached { addr } => Ok(Link::Memcached(Connection::connect_raw(*addr).await?)),
            LinkFactory::Couchbase { cluster, cid, durability } => {
                let mut nodes = cluster.connect_all().await?;
                let (collections, json) = match nodes.len() {
                    0 => (false, false),
                    _ => {
                        let c = nodes.node(0);
                        (c.collections(), c.has(Feature::Json))
                    }
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
}

pub(crate) enum Link {
    Couchbase(Box<CouchbaseLink>),
    Memcached(Connection),
}

/// Why a request could not be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueError {
    /// The key's vBucket has no active node in the current map.
    NoActiveNode,
}

impl Link {
    pub(crate) fn node_count(&self) -> usize {
        match self {
            Link::Couchbase(c) => c.nodes.len(),
            Link::Memcached(_) => 1,
        }
    }

    /// The bytes that go in front of every key on the wire (the collection prefix), written into `key` before the
    /// caller appends the key itself.
    pub(crate) fn key_prefix(&self) -> &[u8] {
        match self {
            Link::Couchbase(c) => &c.prefix,
            Link::Memcached(_) => &[],
        }
    }

    /// Queues a GET (`value` None) or SET of `wire_key` (prefix included; the bare key starts at `prefix_len`).
    /// Returns the node and the opaque.
    pub(crate) fn queue(
        &mut self,
        wire_key: &[u8],
        prefix_len: usize,
        value: Option<(&[u8], bool)>,
    ) -> Result<(usize, u32), QueueError> {
        let (opcode, extras, body) = match value {
            Some((v, _)) => (Opcode::Set as u8, &SET_EXTRAS[..], v),
            None => (Opcode::Get as u8, &[][..], &[][..]),
        };
        let mut req = Request {
            magic: Magic::ClientRequest,
            opcode,
            datatype: 0,
            vbucket: 0,
            opaque: 0,
            cas: 0,
            framing: &[],
            extras,
            key: wire_key,
            value: body,
        };
        match self {
            Link::Memcached(c) => Ok((0, c.queue(&req))),
            Link::Couchbase(c) => {
                let route: Route = c.nodes.route(&wire_key[prefix_len..]).ok_or(QueueError::NoActiveNode)?;
                if let Some((_, is_json)) = value {
                    req.framing = &c.framing;
                    if is_json && c.json {
                        req.datatype = DATATYPE_JSON;
                    }
                }
                Ok((route.node, c.nodes.queue(route, &req)))
            }
        }
    }

    pub(crate) async fn flush(&mut self) -> Result<(), ClientError> {
        match self {
            Link::Couchbase(c) => c.nodes.flush().await,
            Link::Memcached(c) => c.flush().await,
        }
    }

    /// Waits until one of the `waiting` nodes sends bytes. Cancel-safe.
    pub(crate) async fn fill_any(&mut self, waiting: &[usize]) -> Result<usize, ClientError> {
        match self {
            Link::Couchbase(c) => c.nodes.fill_any(waiting).await,
            Link::Memcached(c) => c.fill().await.map(|_| 0),
        }
    }

    /// The next reply already received from `node`.
    pub(crate) fn next_response(&mut self, node: usize) -> Result<Option<Response<'_>>, ClientError> {
        match self {
            Link::Couchbase(c) => c.nodes.node(node).next_response(),
            Link::Memcached(c) => c.next_response(),
        }
    }

    /// Takes the config in a NOT_MY_VBUCKET reply, if newer, for the following requests. A change of the node
    /// list is not followed (the run reports NOT_MY_VBUCKET errors instead).
    pub(crate) fn apply_config(&mut self, body: &[u8]) -> ConfigChange {
        match self {
            Link::Couchbase(c) => {
                let change = c.cluster.apply_config(body);
                if change == ConfigChange::Map {
                    c.nodes.set_config(c.cluster.config());
                }
                change
            }
            Link::Memcached(_) => ConfigChange::Ignored,
        }
    }
}

//! The client side of the node-to-node calls (`settee_cluster::peer`): each call sends its typed request to a
//! node's management port with the administrator's credentials and decodes its typed reply. Graceful failover and
//! rebalance ask other nodes how far their copies are (`/settee/node/seqnos`) and to hold or release active
//! vBuckets for a takeover (`/settee/node/drain`); the health monitor probes; `addNode` asks the newcomer to join.

use std::collections::BTreeMap;
use std::time::Duration;

use settee_cluster::peer::{HoldReply, HoldRequest, PeerCall, SeqnoReport, SeqnosRequest};
use settee_cluster::{ClusterMetadata, NodeId};

use super::peer_links::PeerLinks;
use super::rest_client;

const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// A hold answers once the held vBuckets finished their durable writes in flight (up to 10 s, `TAKEOVER_SETTLE`)
/// and their bucket its warmup (up to 5 s): its caller waits longer than that, so a slow but successful hold is not
/// taken for a failed one.
const HOLD_CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a call to another node failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("node {0} is not in the cluster metadata")]
    UnknownNode(NodeId),
    /// No answer (refused connection, timeout, a broken exchange).
    #[error("{0}")]
    Unreachable(String),
    #[error("{addr} answered {status} to {path}: {body}")]
    Refused { addr: String, path: &'static str, status: u16, body: String },
    #[error("{addr} answered {path} with a body that is not its reply: {error}")]
    BadReply { addr: String, path: &'static str, error: serde_json::Error },
}

/// Sends `request` to `addr` (the peer's plain "host:mgmtport") and decodes its reply: from the links' source
/// address, to the peer's TLS port when the links encrypt the control plane.
pub async fn call<C: PeerCall>(
    addr: &str,
    links: &PeerLinks,
    credentials: Option<(&str, &str)>,
    request: &C,
    timeout: Duration,
) -> Result<C::Reply, PeerError> {
    let (addr, tls) = links.mgmt(addr);
    let addr = addr.as_str();
    let reply = rest_client::call(
        addr,
        links.source(),
        tls.as_ref(),
        C::METHOD,
        C::PATH,
        credentials,
        &request.body(),
        timeout,
    )
    .await
    .map_err(|e| PeerError::Unreachable(format!("{e:#}")))?;
    if reply.status != 200 {
        return Err(PeerError::Refused {
            addr: addr.to_owned(),
            path: C::PATH,
            status: reply.status,
            body: reply.body,
        });
    }
    C::decode_reply(reply.body.as_bytes()).map_err(|error| PeerError::BadReply {
        addr: addr.to_owned(),
        path: C::PATH,
        error,
    })
}

/// The administrator's view of the other nodes, through one metadata state.
pub struct Peers<'a> {
    meta: &'a ClusterMetadata,
    creds: (String, String),
    links: &'a PeerLinks,
}

impl<'a> Peers<'a> {
    pub fn new(credentials: (String, String), links: &'a PeerLinks, meta: &'a ClusterMetadata) -> Self {
        Peers { meta, creds: credentials, links }
    }

    /// The high seqno of every active or replica vBucket on `node`, and the dead ones it keeps data for.
    pub async fn seqnos(&self, node: NodeId) -> Result<SeqnoReport, PeerError> {
        self.call(node, &SeqnosRequest, CALL_TIMEOUT).await
    }

    /// Sends a hold or release to `node`; answers the seqnos the covered vBuckets stopped at.
    pub async fn hold(&self, node: NodeId, request: &HoldRequest) -> Result<HoldReply, PeerError> {
        self.call(node, request, HOLD_CALL_TIMEOUT).await
    }

    /// Asks each of `nodes` for its seqno report, all at once; a node that does not answer gets why.
    pub async fn poll(&self, nodes: &[NodeId]) -> BTreeMap<NodeId, Result<SeqnoReport, String>> {
        let asked = nodes.iter().map(|n| async move { (*n, self.seqnos(*n).await.map_err(|e| e.to_string())) });
        futures_util::future::join_all(asked).await.into_iter().collect()
    }

    async fn call<C: PeerCall>(&self, node: NodeId, request: &C, timeout: Duration) -> Result<C::Reply, PeerError> {
        let addr = self.meta.nodes.get(&node).map(|n| n.mgmt_addr()).ok_or(PeerError::UnknownNode(node))?;
        call(&addr, self.links, Some((self.creds.0.as_str(), self.creds.1.as_str())), request, timeout).await
    }
}

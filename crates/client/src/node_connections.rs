//! The connection set of a smart client: one connection per KV node of the map, routing by vBucket, and the
//! reconciliation that follows a new node list (rebalance in or out, failover) while keeping the connections to the
//! nodes that stay, so requests already sent to them still get their replies.

use std::future::poll_fn;
use std::task::{Context, Poll};

use settee_mcbp::Request;

use crate::config::ClusterConfig;
use crate::connection::{ClientError, Connection};

/// Where a key goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Index of the node connection.
    pub node: usize,
    pub vbucket: u16,
}

/// A failure of one node's connection: the connection is closed and its slot stays empty until a reconciliation
/// opens a new one.
#[derive(Debug, thiserror::Error)]
#[error("{addr}: {source}")]
pub struct NodeError {
    /// Index of the node.
    pub node: usize,
    /// Its KV endpoint (`host:port`).
    pub addr: String,
    pub source: ClientError,
}

/// What [`crate::Cluster::reconcile`] did.
#[derive(Debug)]
pub struct Reconciled {
    /// For each node index before, its index after; None when the new config no longer lists the node (its
    /// connection was closed).
    pub moved: Vec<Option<usize>>,
    /// Nodes of the new list no connection could be opened to (new nodes, or listed nodes whose connection had
    /// failed), by index after, with why; their slots are empty.
    pub unreachable: Vec<(usize, ClientError)>,
}

/// One connection per KV node, and the map they were opened for.
pub struct NodeConnections {
    /// One slot per entry of `config.kv_nodes`, in that order; None once the connection failed or could not be
    /// opened.
    conns: Vec<Option<Connection>>,
    config: ClusterConfig,
}

impl NodeConnections {
    pub(crate) fn new(conns: Vec<Option<Connection>>, config: ClusterConfig) -> NodeConnections {
        assert_eq!(conns.len(), config.kv_nodes.len(), "one slot per node of the map");
        NodeConnections { conns, config }
    }

    /// Where `key` (without its collection prefix) goes; None when its vBucket has no active node.
    pub fn route(&self, key: &[u8]) -> Option<Route> {
        let vbucket = self.config.vbucket_of(key);
        self.config.active_node(vbucket).map(|node| Route { node, vbucket })
    }

    /// The index of the node holding `vbucket` active in the map these connections follow.
    pub fn active_node(&self, vbucket: u16) -> Option<usize> {
        self.config.active_node(vbucket)
    }

    /// The map these connections follow.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Takes a newer map over the same nodes (see [`crate::Cluster::apply_config`]); a map over other nodes needs
    /// [`crate::Cluster::reconcile`].
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

    /// The KV endpoint of node `node`.
    pub fn addr(&self, node: usize) -> Option<&str> {
        self.config.kv_nodes.get(node).map(String::as_str)
    }

    /// Whether node `node` has an open connection.
    pub fn is_up(&self, node: usize) -> bool {
        self.conns.get(node).is_some_and(Option::is_some)
    }

    /// The connection to node `node`; None once it failed.
    pub fn node(&mut self, node: usize) -> Option<&mut Connection> {
        self.conns.get_mut(node).and_then(Option::as_mut)
    }

    /// Queues `req` on the node of `route` with the route's vBucket; returns the opaque, or None when that node
    /// has no connection.
    pub fn queue(&mut self, route: Route, req: &Request<'_>) -> Option<u32> {
        let c = self.node(route.node)?;
        Some(c.queue(&Request { vbucket: route.vbucket, ..*req }))
    }

    /// Flushes every open connection with queued requests. A connection that fails is closed (its slot emptied)
    /// and reported; the others after it are flushed on the next call.
    pub async fn flush(&mut self) -> Result<(), NodeError> {
        for node in 0..self.conns.len() {
            let Some(c) = self.conns[node].as_mut() else { continue };
            if let Err(source) = c.flush().await {
                return Err(self.fail(node, source));
            }
        }
        Ok(())
    }

    /// Waits until any of the open connections in `waiting` (indexes) sends bytes; returns that node's index. A
    /// connection that fails (closed by the node, reset) is closed here and reported. Cancel-safe.
    pub async fn fill_any(&mut self, waiting: &[usize]) -> Result<usize, NodeError> {
        poll_fn(|cx| self.poll_fill_any(cx, waiting)).await
    }

    fn poll_fill_any(&mut self, cx: &mut Context<'_>, waiting: &[usize]) -> Poll<Result<usize, NodeError>> {
        for &i in waiting {
            let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else { continue };
            match c.poll_fill(cx) {
                Poll::Ready(Ok(_)) => return Poll::Ready(Ok(i)),
                Poll::Ready(Err(source)) => return Poll::Ready(Err(self.fail(i, source))),
                Poll::Pending => {}
            }
        }
        Poll::Pending
    }

    /// Closes node `node`'s connection after `source` and describes the failure.
    fn fail(&mut self, node: usize, source: ClientError) -> NodeError {
        self.conns[node] = None;
        NodeError { node, addr: self.addr(node).unwrap_or_default().to_owned(), source }
    }

    /// Replaces the node list with `config`'s: `opened` holds a connection attempt for every node of the new list
    /// that needs one (see [`NodeConnections::to_open`]); every other node keeps its slot. Connections to nodes the
    /// new list does not name are closed.
    pub(crate) fn replace(
        &mut self,
        config: &ClusterConfig,
        opened: Vec<(usize, Result<Connection, ClientError>)>,
    ) -> Reconciled {
        let kept = keep_plan(&self.config.kv_nodes, &config.kv_nodes);
        let mut old: Vec<Option<Option<Connection>>> = std::mem::take(&mut self.conns).into_iter().map(Some).collect();
        let mut moved = vec![None; old.len()];
        let mut conns: Vec<Option<Connection>> = Vec::with_capacity(kept.len());
        for (new, from) in kept.iter().enumerate() {
            let slot = from.and_then(|o| {
                moved[o] = Some(new);
                old[o].take().flatten()
            });
            conns.push(slot);
        }
        let mut unreachable = Vec::new();
        for (new, attempt) in opened {
            match attempt {
                Ok(c) if conns[new].is_none() => conns[new] = Some(c),
                Ok(_) => {}
                Err(e) => unreachable.push((new, e)),
            }
        }
        // The connections left in `old` belong to nodes the new list does not name: dropping them closes them.
        drop(old);
        self.conns = conns;
        self.config = config.clone();
        Reconciled { moved, unreachable }
    }

    /// The nodes of `config` (indexes into its list, with their endpoints) that need a new connection: those not
    /// in the current list, and those in it whose connection failed.
    pub(crate) fn to_open<'c>(&self, config: &'c ClusterConfig) -> Vec<(usize, &'c str)> {
        keep_plan(&self.config.kv_nodes, &config.kv_nodes)
            .into_iter()
            .enumerate()
            .filter(|(_, from)| from.is_none_or(|o| self.conns[o].is_none()))
            .map(|(new, _)| (new, config.kv_nodes[new].as_str()))
            .collect()
    }
}

/// For each node of `new`, its index in `old` if it is there. Nodes are named by their KV endpoint; a list never
/// names one twice (the parser takes serverList as it is, so the first occurrence wins if it did).
fn keep_plan(old: &[String], new: &[String]) -> Vec<Option<usize>> {
    new.iter().map(|n| old.iter().position(|o| o == n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// Nodes are matched by endpoint wherever they sit in the lists: a node added in front shifts the others, a
    /// removed node has no place, an added one has no origin.
    #[test]
    fn keep_plan_matches_nodes_by_endpoint() {
        let old = names(&["a:1", "b:1", "c:1"]);
        assert_eq!(keep_plan(&old, &names(&["d:1", "a:1", "c:1"])), [None, Some(0), Some(2)]);
        assert_eq!(keep_plan(&old, &old), [Some(0), Some(1), Some(2)]);
        assert_eq!(keep_plan(&old, &[]), Vec::<Option<usize>>::new());
        assert_eq!(keep_plan(&[], &names(&["a:1"])), [None]);
    }

    /// A connection the node closes is reported once, with its index and endpoint, and leaves an empty slot that
    /// is no longer waited on and that a reconciliation with the same list reopens.
    #[tokio::test]
    async fn a_closed_connection_empties_its_slot() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let live = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (closing, open) = (listener.local_addr().unwrap(), live.local_addr().unwrap());
        tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            drop(s);
        });
        let body =
            format!(r#"{{"rev":1,"vBucketServerMap":{{"serverList":["{open}","{closing}"],"vBucketMap":[[0],[1]]}}}}"#);
        let config = ClusterConfig::parse(body.as_bytes(), "s").unwrap();
        let conns = vec![
            Some(Connection::connect_raw(open).await.unwrap()),
            Some(Connection::connect_raw(closing).await.unwrap()),
        ];
        let mut nodes = NodeConnections::new(conns, config.clone());
        let e = nodes.fill_any(&[0, 1]).await.unwrap_err();
        assert_eq!((e.node, e.addr.as_str()), (1, closing.to_string().as_str()));
        assert!(matches!(e.source, ClientError::Closed));
        assert!(nodes.is_up(0) && !nodes.is_up(1) && nodes.node(1).is_none());
        assert_eq!(nodes.to_open(&config), [(1, closing.to_string().as_str())]);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), nodes.fill_any(&[1])).await;
        assert!(waited.is_err(), "an empty slot is not waited on");
        drop(live);
    }
}

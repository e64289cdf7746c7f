//! Keyspaces over the whole cluster: the query engine on any node reads and writes every vBucket, sending what
//! belongs to other nodes to their query ports (`peer`), and scans every node's part of an index, merged in index
//! order (or counts each node's part of a range and sums the counts). On a single node (or when every vBucket is active here) the calls go straight to the local keyspace.
//!
//! Routing follows the cluster map; a peer that no longer holds a vBucket says so, and the call is sent again
//! where the newest map says it went (for at most `ROUTE_RETRY_MAX` in total), so a rebalance moves documents and
//! index parts under a running query without losing or repeating them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use settee_cluster::NodeId;
use settee_query::datastore::{Consistency, Document, Keyspace, KeyspaceName, Mutation, MutationOutcome};
use settee_query::index::{IndexDef, IndexEntry, IndexState, ScanRange};
use settee_query::QueryError;
use settee_types::limits::NUM_VBUCKETS;
use settee_types::vbucket_for_key;

use super::datastore::BucketKeyspace;
use super::peer::{self, PeerClient};
use crate::node::Node;

/// How long a call keeps looking for a vBucket that moved before failing.
const ROUTE_RETRY_MAX: Duration = Duration::from_secs(30);
/// The pause before asking again after a peer said it does not hold a vBucket (yet).
const ROUTE_RETRY_PAUSE: Duration = Duration::from_millis(20);
/// One peer call's time limit.
const PEER_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The keyspace a query reads: local only on a single node, routed in a cluster.
pub(crate) fn routed(local: BucketKeyspace, node: &Arc<Node>, runtime: tokio::runtime::Handle) -> Arc<dyn Keyspace> {
    let Some(cluster) = node.cluster() else { return Arc::new(local) };
    let meta = cluster.metadata();
    let multi = meta.nodes.len() > 1;
    if !multi {
        return Arc::new(local);
    }
    Arc::new(RoutedKeyspace { local, node: node.clone(), me: cluster.me, runtime })
}

pub(crate) fn peers(node: &Node) -> Arc<PeerClient> {
    node.query
        .peers
        .get_or_init(|| {
            let (user, password) = node.peer_credentials();
            Arc::new(PeerClient::new(&user, &password))
        })
        .clone()
}

/// Whether index `id` is online on every other node of the cluster.
pub(crate) fn online_on_peers(node: &Arc<Node>, runtime: &tokio::runtime::Handle, bucket: &str, id: &str) -> bool {
    let Some(cluster) = node.cluster() else { return true };
    let meta = cluster.metadata();
    let client = peers(node);
    for (nid, info) in &meta.nodes {
        if *nid == cluster.me || info.membership != settee_cluster::Membership::Active {
            continue;
        }
        let addr = format!("{}:{}", info.hostname, info.query_port);
        let req = peer::IndexStateRequest { bucket: bucket.into(), id: id.into() };
        let r: Result<peer::IndexStateReply, _> =
            runtime.block_on(client.call(&addr, "index_state", &req, PEER_CALL_TIMEOUT));
        if !r.is_ok_and(|r| r.online) {
            return false;
        }
    }
    true
}

struct RoutedKeyspace {
    local: BucketKeyspace,
    node: Arc<Node>,
    me: NodeId,
    runtime: tokio::runtime::Handle,
}

/// Where each vBucket's active copy is, by the newest map.
struct Routes {
    owner: Vec<Option<NodeId>>,
    addrs: BTreeMap<NodeId, String>,
}

impl RoutedKeyspace {
    fn routes(&self) -> Routes {
        let meta = self.node.cluster().map(|c| c.metadata()).unwrap_or_default();
        let owner = match meta.buckets.get(&self.local.name.bucket) {
            Some(b) => (0..NUM_VBUCKETS).map(|vb| b.map.active(vb)).collect(),
            None => vec![None; usize::from(NUM_VBUCKETS)],
        };
        let addrs = meta.nodes.iter().map(|(id, n)| (*id, format!("{}:{}", n.hostname, n.query_port))).collect();
        Routes { owner, addrs }
    }

    fn call<Req: serde::Serialize, Resp: serde::de::DeserializeOwned>(
        &self,
        addr: &str,
        what: &str,
        req: &Req,
    ) -> Result<Resp, QueryError> {
        let client = peers(&self.node);
        self.runtime.block_on(client.call(addr, what, req, PEER_CALL_TIMEOUT))
    }

    fn give_up(&self, what: &str) -> QueryError {
        QueryError::Datastore(format!(
            "{what} of {}: some vBuckets were not found on the nodes the cluster map names (rebalance or failover \
             under way); retry",
            self.local.name.display_path()
        ))
    }

    /// The vBuckets of every node that holds actives, by the newest map.
    fn vbs_by_node(routes: &Routes, vbs: impl Iterator<Item = u16>) -> BTreeMap<NodeId, Vec<u16>> {
        let mut out: BTreeMap<NodeId, Vec<u16>> = BTreeMap::new();
        for vb in vbs {
            if let Some(Some(n)) = routes.owner.get(usize::from(vb)) {
                out.entry(*n).or_default().push(vb);
            }
        }
        out
    }
}

fn vb_of(key: &str) -> u16 {
    vbucket_for_key(key.as_bytes(), NUM_VBUCKETS).0
}

impl Keyspace for RoutedKeyspace {
    fn name(&self) -> &KeyspaceName {
        &self.local.name
    }

    fn fetch(&self, keys: &[Arc<str>]) -> Result<Vec<Option<Document>>, QueryError> {
        let mut out: Vec<Option<Document>> = vec![None; keys.len()];
        let mut pending: Vec<usize> = (0..keys.len()).collect();
        let started = Instant::now();
        while !pending.is_empty() {
            let routes = self.routes();
            let mut by_node: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
            let mut unrouted = Vec::new();
            for i in pending.drain(..) {
                match routes.owner.get(usize::from(vb_of(&keys[i]))).copied().flatten() {
                    Some(n) => by_node.entry(n).or_default().push(i),
                    None => unrouted.push(i),
                }
            }
            for (n, idx) in by_node {
                if n == self.me {
                    for i in idx {
                        if self.local.holds_key(&keys[i]) {
                            out[i] = self.local.get(&keys[i])?;
                        } else {
                            pending.push(i);
                        }
                    }
                    continue;
                }
                let Some(addr) = routes.addrs.get(&n) else {
                    pending.extend(idx);
                    continue;
                };
                let req = peer::FetchRequest {
                    target: (&self.local.name).into(),
                    keys: idx.iter().map(|&i| keys[i].to_string()).collect(),
                };
                match self.call::<_, peer::FetchReply>(addr, "fetch", &req) {
                    Ok(reply) => {
                        for (pos, doc) in reply.docs.into_iter().enumerate() {
                            let i = idx[pos];
                            if reply.not_here.contains(&pos) {
                                pending.push(i);
                            } else {
                                out[i] = doc.map(|d| d.into_doc(keys[i].clone()));
                            }
                        }
                    }
                    Err(e) if started.elapsed() > ROUTE_RETRY_MAX => return Err(e),
                    Err(_) => pending.extend(idx),
                }
            }
            pending.extend(unrouted);
            if !pending.is_empty() {
                if started.elapsed() > ROUTE_RETRY_MAX {
                    return Err(self.give_up("fetch"));
                }
                std::thread::sleep(ROUTE_RETRY_PAUSE);
            }
        }
        Ok(out)
    }

    fn count(&self) -> Result<u64, QueryError> {
        let index = self
            .local
            .indexes_local()
            .into_iter()
            .find(|(d, s)| d.is_primary && *s == IndexState::Online)
            .map(|(d, _)| d.name)
            .ok_or_else(|| QueryError::NoPrimaryIndex(self.local.name.display_path()))?;
        let started = Instant::now();
        loop {
            let routes = self.routes();
            let mut total = 0u64;
            let mut missing = false;
            for (n, vbs) in Self::vbs_by_node(&routes, 0..NUM_VBUCKETS) {
                let (count, unavailable) = if n == self.me {
                    self.local.count_vbs(&index, &vbs)?
                } else {
                    let addr = routes.addrs.get(&n).cloned().unwrap_or_default();
                    let req = peer::CountRequest { target: (&self.local.name).into(), index: index.clone(), vbs };
                    match self.call::<_, peer::CountReply>(&addr, "count", &req) {
                        Ok(r) => (r.count, r.unavailable),
                        Err(_) => (0, vec![0]),
                    }
                };
                total += count;
                missing |= !unavailable.is_empty();
            }
            if !missing {
                return Ok(total);
            }
            if started.elapsed() > ROUTE_RETRY_MAX {
                return Err(self.give_up("count"));
            }
            std::thread::sleep(ROUTE_RETRY_PAUSE);
        }
    }

    /// Each node counts its part of the range (the vBuckets active there), and the counts are summed; a node
    /// that cannot answer for some vBuckets yet makes the whole count start again.
    fn count_range(&self, index: &str, range: &ScanRange) -> Result<u64, QueryError> {
        let started = Instant::now();
        loop {
            let routes = self.routes();
            let mut total = 0u64;
            let mut missing = false;
            for (n, vbs) in Self::vbs_by_node(&routes, 0..NUM_VBUCKETS) {
                let (count, unavailable) = if n == self.me {
                    self.local.count_range_vbs(index, range, &vbs)?
                } else {
                    let addr = routes.addrs.get(&n).cloned().unwrap_or_default();
                    let req = peer::CountRangeRequest {
                        target: (&self.local.name).into(),
                        index: index.to_string(),
                        spans: peer::range_to_wire(range),
                        vbs,
                    };
                    match self.call::<_, peer::CountReply>(&addr, "count_range", &req) {
                        Ok(r) => (r.count, r.unavailable),
                        Err(e) if started.elapsed() > ROUTE_RETRY_MAX => return Err(e),
                        Err(_) => (0, vec![0]),
                    }
                };
                total += count;
                missing |= !unavailable.is_empty();
            }
            if !missing {
                return Ok(total);
            }
            if started.elapsed() > ROUTE_RETRY_MAX {
                return Err(self.give_up("an index count"));
            }
            std::thread::sleep(ROUTE_RETRY_PAUSE);
        }
    }

    fn mutate(&self, m: &Mutation) -> Result<MutationOutcome, QueryError> {
        let started = Instant::now();
        let vb = vb_of(&m.key);
        let op = match m.kind {
            settee_query::datastore::MutationKind::Insert => "INSERT",
            settee_query::datastore::MutationKind::Upsert => "UPSERT",
            settee_query::datastore::MutationKind::Replace { .. } => "UPDATE",
            settee_query::datastore::MutationKind::Delete { .. } => "DELETE",
        };
        loop {
            let routes = self.routes();
            let owner = routes.owner.get(usize::from(vb)).copied().flatten();
            if owner == Some(self.me) && self.local.holds_key(&m.key) {
                return self.local.write(m);
            }
            if let Some(addr) = owner.filter(|n| *n != self.me).and_then(|n| routes.addrs.get(&n)) {
                let req = peer::mutation_to_wire(&self.local.name, m);
                match self.call::<_, peer::MutateReply>(addr, "mutate", &req)? {
                    peer::MutateReply::Done { cas } => return Ok(MutationOutcome { cas }),
                    peer::MutateReply::Refused { reason } => return Err(peer::refusal_error((op, &m.key), &reason)),
                    peer::MutateReply::Failed { message } => return Err(QueryError::Datastore(message)),
                    peer::MutateReply::NotHere => {}
                }
            }
            if started.elapsed() > ROUTE_RETRY_MAX {
                return Err(self.give_up("a write"));
            }
            std::thread::sleep(ROUTE_RETRY_PAUSE);
        }
    }

    fn indexes(&self) -> Vec<(IndexDef, IndexState)> {
        self.local.indexes_local()
    }

    fn scan(
        &self,
        index: &str,
        range: &ScanRange,
        after: Option<&IndexEntry>,
        limit: usize,
    ) -> Result<Vec<IndexEntry>, QueryError> {
        let started = Instant::now();
        let mut todo: BTreeSet<u16> = (0..NUM_VBUCKETS).collect();
        let mut merged: Vec<IndexEntry> = Vec::new();
        while !todo.is_empty() {
            let routes = self.routes();
            let by_node = Self::vbs_by_node(&routes, todo.iter().copied());
            for (n, vbs) in by_node {
                let (entries, unavailable) = if n == self.me {
                    self.local.scan_vbs(index, range, after, limit, &vbs)?
                } else {
                    let addr = routes.addrs.get(&n).cloned().unwrap_or_default();
                    let req = peer::ScanRequest {
                        target: (&self.local.name).into(),
                        index: index.to_string(),
                        spans: peer::range_to_wire(range),
                        after: after.map(peer::entry_to_wire),
                        limit,
                        vbs: vbs.clone(),
                        reverse: range.reverse,
                    };
                    match self.call::<_, peer::ScanReply>(&addr, "scan", &req) {
                        Ok(r) => (r.entries.into_iter().map(peer::entry_from_wire).collect(), r.unavailable),
                        Err(e) if started.elapsed() > ROUTE_RETRY_MAX => return Err(e),
                        Err(_) => (Vec::new(), vbs.clone()),
                    }
                };
                for vb in vbs {
                    if !unavailable.contains(&vb) {
                        todo.remove(&vb);
                    }
                }
                merged.extend(entries);
            }
            if !todo.is_empty() {
                if started.elapsed() > ROUTE_RETRY_MAX {
                    return Err(self.give_up("an index scan"));
                }
                std::thread::sleep(ROUTE_RETRY_PAUSE);
            }
        }
        // Each node's entries come in the scan's order; merged, they keep it: ascending, or from the top down.
        merged.sort();
        merged.dedup();
        if range.reverse {
            merged.reverse();
        }
        merged.truncate(limit);
        Ok(merged)
    }

    fn wait_for(&self, index: &str, consistency: &Consistency, deadline_nanos: i64) -> Result<(), QueryError> {
        let now = settee_types::Clock::now_nanos(&settee_types::SystemClock) as i64;
        let timeout = Duration::from_nanos(deadline_nanos.saturating_sub(now).max(0) as u64);
        self.local.wait_local(index, consistency, timeout)?;
        let routes = self.routes();
        let nodes: BTreeSet<NodeId> = routes.owner.iter().flatten().copied().filter(|n| *n != self.me).collect();
        for n in nodes {
            let Some(addr) = routes.addrs.get(&n) else { continue };
            let at = match consistency {
                Consistency::NotBounded => return Ok(()),
                Consistency::RequestPlus => None,
                Consistency::AtPlus(v) => Some(
                    v.iter()
                        .filter(|(b, vb, ..)| {
                            (b.is_empty() || *b == self.local.name.bucket)
                                && routes.owner.get(usize::from(*vb)).copied().flatten() == Some(n)
                        })
                        .map(|(_, vb, s, _)| (*vb, *s))
                        .collect(),
                ),
            };
            let req = peer::WaitRequest {
                target: (&self.local.name).into(),
                index: index.to_string(),
                at,
                timeout_ms: timeout.as_millis() as u64,
            };
            let r: peer::WaitReply = self.call(addr, "wait", &req)?;
            if !r.caught_up {
                return Err(QueryError::IndexScanTimeout);
            }
        }
        Ok(())
    }
}

//! Asking other nodes, over their management port with the administrator's credentials, how far their copies of
//! vBuckets are (`/settee/node/seqnos`) and to hold or release active vBuckets for a takeover
//! (`/settee/node/drain`). Graceful failover and rebalance both move actives this way: hold them on the old node,
//! wait until the new copies reach the seqnos they stopped at, then change the map.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use settee_cluster::{ClusterMetadata, NodeId};
use tokio::time::Instant;

use super::rest_client;
use crate::node::Node;

const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// A hold answers once the held vBuckets finished their durable writes in flight (up to 10 s, `TAKEOVER_SETTLE`)
/// and their bucket its warmup (up to 5 s): its caller waits longer than that, so a slow but successful hold is not
/// taken for a failed one.
const HOLD_CALL_TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(100);

/// One copy of a vBucket: (bucket, vBucket, node).
pub type Copy = (String, u16, NodeId);

/// The administrator's view of the other nodes, through one metadata state.
pub struct Peers<'a> {
    meta: &'a ClusterMetadata,
    creds: (&'a str, &'a str),
}

impl<'a> Peers<'a> {
    pub fn new(node: &'a Node, meta: &'a ClusterMetadata) -> Self {
        Peers { meta, creds: (node.config.username.as_str(), node.config.password.as_str()) }
    }

    /// `{"buckets": {name: {vb: high_seqno}}}` of every active or replica vBucket on `node`.
    pub async fn seqnos(&self, node: NodeId) -> anyhow::Result<Value> {
        self.call(node, "GET", "/settee/node/seqnos", "", CALL_TIMEOUT).await
    }

    /// Holds (`on`) or releases `vbs` of `bucket` on `node`, or all its actives when `bucket` is None; answers the
    /// seqnos they stopped at, in the shape of [`Peers::seqnos`].
    pub async fn hold(&self, node: NodeId, bucket: Option<&str>, vbs: &[u16], on: bool) -> anyhow::Result<Value> {
        let mut form = format!("on={on}");
        if let Some(bucket) = bucket {
            let list: Vec<String> = vbs.iter().map(u16::to_string).collect();
            form.push_str(&format!("&bucket={bucket}&vbs={}", list.join(",")));
        }
        self.call(node, "POST", "/settee/node/drain", &form, HOLD_CALL_TIMEOUT).await
    }

    /// Polls until every copy reports at least its wanted seqno, or fails after `timeout`.
    pub async fn wait_until_reached(&self, wanted: &BTreeMap<Copy, u64>, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut reports = Reports::new(self);
            let mut behind = 0;
            for ((bucket, vb, node), seqno) in wanted {
                reports.load_or_skip(*node).await;
                behind += usize::from(reports.seqno(*node, bucket, *vb).is_none_or(|have| have < *seqno));
            }
            if behind == 0 {
                return Ok(());
            }
            anyhow::ensure!(Instant::now() < deadline, "{behind} copies did not catch up within {timeout:?}");
            tokio::time::sleep(POLL).await;
        }
    }

    async fn call(
        &self,
        node: NodeId,
        method: &str,
        path: &str,
        form: &str,
        timeout: Duration,
    ) -> anyhow::Result<Value> {
        let addr = self.meta.nodes.get(&node).map(|n| n.mgmt_addr()).context("unknown node")?;
        let reply = rest_client::call(&addr, method, path, Some(self.creds), form, timeout).await?;
        anyhow::ensure!(reply.status == 200, "{addr} answered {} to {path}: {}", reply.status, reply.body);
        Ok(serde_json::from_str(&reply.body)?)
    }
}

/// The [`Peers::seqnos`] reports of one polling round: each node is asked at most once per round.
pub struct Reports<'p, 'a> {
    peers: &'p Peers<'a>,
    got: BTreeMap<NodeId, Value>,
}

impl<'p, 'a> Reports<'p, 'a> {
    pub fn new(peers: &'p Peers<'a>) -> Self {
        Reports { peers, got: BTreeMap::new() }
    }

    /// Asks `node` unless this round already has its report; an error is returned and nothing kept.
    pub async fn load(&mut self, node: NodeId) -> anyhow::Result<()> {
        if !self.got.contains_key(&node) {
            let report = self.peers.seqnos(node).await?;
            self.got.insert(node, report);
        }
        Ok(())
    }

    /// As [`Reports::load`], but a node that does not answer counts as reporting nothing this round.
    pub async fn load_or_skip(&mut self, node: NodeId) {
        if self.load(node).await.is_err() {
            self.got.insert(node, Value::Null);
        }
    }

    /// The seqno `node` reported for `vb` of `bucket`, if loaded and present.
    pub fn seqno(&self, node: NodeId, bucket: &str, vb: u16) -> Option<u64> {
        self.got.get(&node).and_then(|r| seqno_in(r, bucket, vb))
    }
}

/// The seqno a [`Peers::seqnos`] report gives `vb` of `bucket`.
pub fn seqno_in(report: &Value, bucket: &str, vb: u16) -> Option<u64> {
    report["buckets"][bucket][vb.to_string()].as_u64()
}

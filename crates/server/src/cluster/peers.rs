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
        self.call(node, "GET", "/settee/node/seqnos", "").await
    }

    /// Holds (`on`) or releases `vbs` of `bucket` on `node`, or all its actives when `bucket` is None; answers the
    /// seqnos they stopped at, in the shape of [`Peers::seqnos`].
    pub async fn hold(&self, node: NodeId, bucket: Option<&str>, vbs: &[u16], on: bool) -> anyhow::Result<Value> {
        let mut form = format!("on={on}");
        if let Some(bucket) = bucket {
            let list: Vec<String> = vbs.iter().map(u16::to_string).collect();
            form.push_str(&format!("&bucket={bucket}&vbs={}", list.join(",")));
        }
        self.call(node, "POST", "/settee/node/drain", &form).await
    }

    /// Polls until every copy reports at least its wanted seqno, or fails after `timeout`.
    pub async fn wait_until_reached(&self, wanted: &BTreeMap<Copy, u64>, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut reports: BTreeMap<NodeId, Value> = BTreeMap::new();
            let mut behind = 0;
            for ((bucket, vb, node), seqno) in wanted {
                let report = match reports.get(node) {
                    Some(r) => r,
                    None => {
                        let r = self.seqnos(*node).await.unwrap_or(Value::Null);
                        reports.entry(*node).or_insert(r)
                    }
                };
                behind += usize::from(seqno_in(report, bucket, *vb).is_none_or(|have| have < *seqno));
            }
            if behind == 0 {
                return Ok(());
            }
            anyhow::ensure!(Instant::now() < deadline, "{behind} copies did not catch up within {timeout:?}");
            tokio::time::sleep(POLL).await;
        }
    }

    async fn call(&self, node: NodeId, method: &str, path: &str, form: &str) -> anyhow::Result<Value> {
        let addr = self.meta.nodes.get(&node).map(|n| n.mgmt_addr()).context("unknown node")?;
        let reply = rest_client::call(&addr, method, path, Some(self.creds), form, CALL_TIMEOUT).await?;
        anyhow::ensure!(reply.status == 200, "{addr} answered {} to {path}: {}", reply.status, reply.body);
        Ok(serde_json::from_str(&reply.body)?)
    }
}

/// The seqno a [`Peers::seqnos`] report gives `vb` of `bucket`.
pub fn seqno_in(report: &Value, bucket: &str, vb: u16) -> Option<u64> {
    report["buckets"][bucket][vb.to_string()].as_u64()
}

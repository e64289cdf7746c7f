//! A restarted member takes its persistent buckets' active copies back only where no replica is ahead of them
//! (the decision is `settee_cluster::control::restart`; this is its driver). Runs while the node's metadata is not
//! yet current, so its actives are still dead here: no client and no replica stream sees the restarted copies
//! before the comparison, and the replicas cannot move meanwhile.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use settee_cluster::control::restart::Takeback;
use settee_cluster::{BucketMeta, ClusterMetadata, MetaCommand, NodeId};
use settee_types::VbId;

use super::driver::ClusterDriver;
use super::peers::Peers;

/// How long a restarted node waits for replicas that do not report before it takes back the vBuckets they copy
/// anyway: a replica that is down cannot be ahead of anything it acknowledged to a client (a `majority` write
/// needs it), but one that is merely slow could be, so it gets this long to answer.
pub(super) const SILENT_REPLICA_WAIT: Duration = Duration::from_secs(10);

/// Why the comparison must be tried again.
#[derive(Debug, thiserror::Error)]
pub(super) enum TakebackError {
    #[error("bucket {0} is still warming up here")]
    WarmingUp(String),
    #[error("bucket {bucket}: replicas of {vbuckets} vBuckets have not reported their seqnos yet")]
    Silent { bucket: String, vbuckets: usize },
    #[error(transparent)]
    Propose(#[from] settee_cluster::ProposeError),
}

impl ClusterDriver {
    /// Hands over, bucket by bucket, the active copies this restarted node came back behind on to the replicas
    /// ahead of them, and returns the metadata to apply. Until `give_up_on_silence`, a replica that does not
    /// report makes the caller try again; after it, the vBuckets it copies are taken back (and logged).
    pub(super) async fn take_back(
        &self,
        mut meta: Arc<ClusterMetadata>,
        give_up_on_silence: bool,
    ) -> Result<Arc<ClusterMetadata>, TakebackError> {
        let me = self.me();
        let buckets: Vec<BucketMeta> =
            meta.buckets.values().filter(|b| !b.spec.ephemeral && !b.map.actives_of(me).is_empty()).cloned().collect();
        for b in buckets {
            let name = &b.spec.name;
            let Some(mine) = self.restored_seqnos(&b)? else { continue };
            let replicas = Takeback::replicas_to_ask(&b.map, me);
            let reports = self.replica_seqnos(&meta, name, &replicas).await;
            let decision = Takeback::decide(&b.map, me, &mine, &reports);
            if !decision.unknown.is_empty() {
                if !give_up_on_silence {
                    return Err(TakebackError::Silent { bucket: name.clone(), vbuckets: decision.unknown.len() });
                }
                tracing::warn!(
                    bucket = %name,
                    vbuckets = decision.unknown.len(),
                    "replicas did not report within {SILENT_REPLICA_WAIT:?}: taking back their vBuckets unchecked"
                );
            }
            if decision.promote.is_empty() {
                continue;
            }
            let handed = decision.promote.len();
            let cmd = MetaCommand::PromoteReplicas { bucket: name.clone(), node: me, promote: decision.promote };
            meta = self.handle.store().propose(cmd).await?;
            tracing::warn!(
                bucket = %name,
                vbuckets = handed,
                "restarted behind replicas that hold later writes: those vBuckets were handed over to them, this \
                 node keeps them as a replica; rebalance to even out the actives"
            );
        }
        Ok(meta)
    }

    /// The high seqno each of this node's active vBuckets of `b` came back with; None when the bucket is not
    /// here (or another bucket of that name is: what it holds is not these copies, and the reconcile replaces it).
    fn restored_seqnos(&self, b: &BucketMeta) -> Result<Option<BTreeMap<u16, u64>>, TakebackError> {
        let Some(handle) = self.node.bucket(&b.spec.name).filter(|h| h.config().uuid == b.spec.uuid) else {
            return Ok(None);
        };
        if handle.is_warming_up() {
            return Err(TakebackError::WarmingUp(b.spec.name.clone()));
        }
        let mine = b
            .map
            .actives_of(self.me())
            .into_iter()
            .filter_map(|vb| handle.vbucket(VbId(vb)).map(|v| (vb, v.high_seqno())))
            .collect();
        Ok(Some(mine))
    }

    /// What each of `nodes` reports for `bucket`: its copies, and the dead ones it keeps data for (the higher
    /// of the two where both list a vBucket). A node that does not answer is left out.
    async fn replica_seqnos(
        &self,
        meta: &ClusterMetadata,
        bucket: &str,
        nodes: &[NodeId],
    ) -> BTreeMap<NodeId, BTreeMap<u16, u64>> {
        let peers = Peers::new(self.credentials(), &self.node.peer_links, meta);
        let mut out = BTreeMap::new();
        for (node, report) in peers.poll(nodes).await {
            let report = match report {
                Ok(r) => r,
                Err(e) => {
                    tracing::info!(node, error = %e, "a replica did not report its seqnos to this restarted node");
                    continue;
                }
            };
            let mut seqnos: BTreeMap<u16, u64> = BTreeMap::new();
            for section in [&report.kept, &report.buckets] {
                for (vb, seqno) in section.0.get(bucket).into_iter().flatten() {
                    let at = seqnos.entry(*vb).or_default();
                    *at = (*at).max(*seqno);
                }
            }
            out.insert(node, seqnos);
        }
        out
    }
}

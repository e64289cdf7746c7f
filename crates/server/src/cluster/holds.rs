//! The driver's side of takeover holds (`settee_cluster::control::holds`): holding or releasing this node's
//! active vBuckets when an orchestrator asks (`/settee/node/drain`), ending holds whose map moved on, and expiring
//! holds whose lease ran out.

use std::time::Duration;

use settee_cluster::control::HOLD_LEASE;
use settee_cluster::peer::{HoldRequest, HoldScope};
use settee_types::VbId;

use super::ClusterDriver;

/// How long a vBucket held for a takeover may take to finish the durable writes it had prepared.
const TAKEOVER_SETTLE: Duration = Duration::from_secs(10);

impl ClusterDriver {
    /// Holds or releases what `request` covers: listed vBuckets of one bucket, or (scope `All`) every vBucket the
    /// map makes active here (hold; graceful failover) or every one held (release); and applies it at once. A hold
    /// returns once the held vBuckets finished their durable writes in flight (or after [`TAKEOVER_SETTLE`]).
    /// Returns the (bucket, vBucket) pairs it covered.
    pub(super) async fn hold_actives(&self, request: &HoldRequest) -> Vec<(String, u16)> {
        let meta = self.metadata();
        let me = self.me();
        let covered: Vec<(String, u16)> = match &request.scope {
            HoldScope::Some { bucket, vbs } => vbs.iter().map(|vb| (bucket.clone(), *vb)).collect(),
            // Releasing everything covers whatever is held, even vBuckets the map no longer makes active here.
            HoldScope::All if !request.hold => self.held.lock().all(),
            HoldScope::All => meta
                .buckets
                .iter()
                .flat_map(|(name, b)| b.map.actives_of(me).into_iter().map(move |vb| (name.clone(), vb)))
                .collect(),
        };
        {
            let mut held = self.held.lock();
            let now = self.now();
            for (b, vb) in &covered {
                if request.hold {
                    held.hold_until(b, *vb, now, request.until_chains.get(vb).cloned());
                } else {
                    held.release(b, *vb);
                }
            }
        }
        self.reconcile(&meta).await;
        if request.hold {
            // Durable writes already prepared finish here (a pending vBucket still commits them), so the copy that
            // takes over receives their outcome instead of their writers hearing "ambiguous".
            let deadline = tokio::time::Instant::now() + TAKEOVER_SETTLE;
            while tokio::time::Instant::now() < deadline
                && covered.iter().any(|(b, vb)| self.node.bucket(b).is_some_and(|h| h.sync_writes_in_flight(VbId(*vb))))
            {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        covered
    }

    /// Ends the holds of `bucket`'s vBuckets that the applied `map` committed: a takeover (or graceful failover)
    /// that committed needs no release, so the held copy goes from pending straight to replica or dead and never
    /// serves again after the map moved on, and a move of replicas ends its hold once the new chain is applied (a
    /// release that arrived before this node applied the new map would have made it active for a moment, with its
    /// old chain).
    pub(super) fn end_committed_holds(&self, bucket: &str, map: &settee_cluster::VbMap) {
        self.held.lock().end_committed(bucket, map, self.me());
    }

    /// The vBuckets of `bucket` held for a takeover.
    pub(super) fn held_vbuckets(&self, bucket: &str) -> std::collections::BTreeSet<u16> {
        self.held.lock().of(bucket)
    }

    /// Ends the holds whose lease ran out (their orchestrator is gone or its release was lost), so those vBuckets
    /// serve again; called once a second.
    pub(super) async fn expire_holds(&self) {
        let expired = self.held.lock().expire(self.now());
        if !expired.is_empty() {
            let lease_secs = HOLD_LEASE.as_secs();
            tracing::warn!(
                ?expired,
                lease_secs,
                "takeover holds expired without a commit or release; the vBuckets serve again"
            );
            self.reconcile(&self.metadata()).await;
        }
    }
}

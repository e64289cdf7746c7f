//! The active vBuckets a node holds for a takeover (a rebalance step, or a graceful failover of the node): pending
//! there, so clients are refused while the copies that take over catch up with a history that no longer moves.
//!
//! A hold ends when the map the move commits is applied on the node (`Holds::end_committed`: the vBucket is no
//! longer active here, or its chain is the one the hold was taken for), when the orchestrator releases it, or when
//! its lease runs out: an orchestrator that died, or a release that was lost, must not leave a vBucket refusing
//! clients forever. Pure: times are the driver's monotonic clock readings.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::vbmap::{NodeId, VbMap};

/// How long a hold lasts unless the takeover that asked for it commits or releases it first. It outlasts every
/// bound of the orchestrators, counted from the hold: the hold's own reply (at most 20 s), then a rebalance's
/// takeover gives up after 20 s, a graceful failover's catch-up after 60 s followed by at most two proposals of
/// 10 s each; so no orchestrator commits a takeover whose hold has already run out.
pub const HOLD_LEASE: Duration = Duration::from_secs(120);

/// One held vBucket: when it was (last) held, and the chain whose map ends the hold while the vBucket stays active
/// here (a rebalance that changes only its replicas).
#[derive(Clone, Debug)]
struct Held {
    since: Duration,
    until_chain: Option<Vec<Option<NodeId>>>,
}

/// Held vBuckets by bucket.
#[derive(Clone, Debug, Default)]
pub struct Holds {
    by_bucket: BTreeMap<String, BTreeMap<u16, Held>>,
}

impl Holds {
    /// The vBuckets of `bucket` held now.
    pub fn of(&self, bucket: &str) -> BTreeSet<u16> {
        self.by_bucket.get(bucket).map(|vbs| vbs.keys().copied().collect()).unwrap_or_default()
    }

    /// Every held (bucket, vBucket).
    pub fn all(&self) -> Vec<(String, u16)> {
        self.by_bucket.iter().flat_map(|(b, vbs)| vbs.keys().map(move |vb| (b.clone(), *vb))).collect()
    }

    /// Holds `vb` of `bucket` from `now` (a second hold renews the lease).
    pub fn hold(&mut self, bucket: &str, vb: u16, now: Duration) {
        self.hold_until(bucket, vb, now, None);
    }

    /// Holds `vb` of `bucket` from `now`; with `until_chain`, also until a map gives the vBucket that chain (a
    /// move that keeps the active here and changes its replicas: the map that commits it leaves it active here).
    pub fn hold_until(&mut self, bucket: &str, vb: u16, now: Duration, until_chain: Option<Vec<Option<NodeId>>>) {
        self.by_bucket.entry(bucket.to_owned()).or_default().insert(vb, Held { since: now, until_chain });
    }

    pub fn release(&mut self, bucket: &str, vb: u16) {
        if let Some(vbs) = self.by_bucket.get_mut(bucket) {
            vbs.remove(&vb);
        }
    }

    /// Ends the holds of `bucket` that the applied `map` committed: the vBucket is no longer active on `me`, or has
    /// the chain its hold was taken for.
    pub fn end_committed(&mut self, bucket: &str, map: &VbMap, me: NodeId) {
        if let Some(vbs) = self.by_bucket.get_mut(bucket) {
            vbs.retain(|vb, held| {
                let chain = map.chains.get(usize::from(*vb));
                map.active(*vb) == Some(me) && (held.until_chain.is_none() || chain != held.until_chain.as_ref())
            });
        }
    }

    /// Ends and returns the holds whose lease ran out by `now`.
    pub fn expire(&mut self, now: Duration) -> Vec<(String, u16)> {
        let mut expired = Vec::new();
        for (bucket, vbs) in &mut self.by_bucket {
            vbs.retain(|vb, held| {
                let live = now.saturating_sub(held.since) < HOLD_LEASE;
                if !live {
                    expired.push((bucket.clone(), *vb));
                }
                live
            });
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hold nobody commits or releases ends by itself once its lease runs out, so a vBucket whose takeover
    /// orchestrator died serves again; holding again renews the lease, and releases and committed moves end holds
    /// at once.
    #[test]
    fn a_hold_nobody_ends_expires_after_its_lease() {
        let start = Duration::from_secs(1000);
        let mut holds = Holds::default();
        holds.hold("b", 1, start);
        holds.hold("b", 2, start);
        holds.hold("c", 3, start);
        holds.hold("b", 2, start + HOLD_LEASE / 2);
        assert!(holds.expire(start + HOLD_LEASE / 2).is_empty());
        assert!(holds.expire(start + HOLD_LEASE - Duration::from_millis(1)).is_empty());
        let mut expired = holds.expire(start + HOLD_LEASE);
        expired.sort();
        assert_eq!(expired, vec![("b".to_owned(), 1), ("c".to_owned(), 3)]);
        assert_eq!(holds.of("b"), BTreeSet::from([2]), "the renewed hold lasts");
        holds.hold("b", 4, start);
        let map = VbMap { chains: (0..5).map(|vb| vec![Some(if vb == 4 { 2 } else { 1 }), None]).collect() };
        holds.end_committed("b", &map, 1);
        holds.release("b", 2);
        assert!(holds.all().is_empty());
    }

    /// Proves a hold taken for a move that keeps the vBucket active here (its replicas change) lasts through maps
    /// that do not yet carry the move's chain (an older one applied late included) and ends with the map that does;
    /// a takeover's hold ends once the vBucket is active elsewhere.
    #[test]
    fn a_replica_move_hold_lasts_until_the_committed_chain_is_applied() {
        let now = Duration::from_secs(1);
        let mut holds = Holds::default();
        holds.hold_until("b", 0, now, Some(vec![Some(1), Some(3)]));
        holds.hold("b", 1, now);
        let map = |c0: Vec<Option<NodeId>>, c1: Vec<Option<NodeId>>| VbMap { chains: vec![c0, c1] };
        holds.end_committed("b", &map(vec![Some(1), Some(2)], vec![Some(1), Some(2)]), 1);
        assert_eq!(holds.of("b"), BTreeSet::from([0, 1]), "the old chain ends neither");
        holds.end_committed("b", &map(vec![Some(1), Some(4)], vec![Some(1), Some(2)]), 1);
        assert_eq!(holds.of("b"), BTreeSet::from([0, 1]), "another chain (an older map applied late) ends nothing");
        holds.end_committed("b", &map(vec![Some(1), Some(3)], vec![Some(2), Some(1)]), 1);
        assert!(holds.of("b").is_empty(), "the committed chain ends the first, the active moving away the second");
    }
}

//! The active vBuckets a node holds for a takeover (a rebalance step, or a graceful failover of the node): pending
//! there, so clients are refused while the copies that take over catch up with a history that no longer moves.
//!
//! A hold ends when the map that moves the vBucket is applied on the node (`Holds::end_moved`), when the
//! orchestrator releases it, or when its lease runs out: an orchestrator that died, or a release that was lost, must
//! not leave a vBucket refusing clients forever. Pure: times are the driver's monotonic clock readings.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long a hold lasts unless the takeover that asked for it commits or releases it first. It outlasts every
/// bound of the orchestrators, counted from the hold: the hold's own reply (at most 20 s), then a rebalance's
/// takeover gives up after 20 s, a graceful failover's catch-up after 60 s followed by at most two proposals of
/// 10 s each; so no orchestrator commits a takeover whose hold has already run out.
pub const HOLD_LEASE: Duration = Duration::from_secs(120);

/// Held vBuckets by bucket, each with the time it was (last) held.
#[derive(Clone, Debug, Default)]
pub struct Holds {
    by_bucket: BTreeMap<String, BTreeMap<u16, Duration>>,
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
        self.by_bucket.entry(bucket.to_owned()).or_default().insert(vb, now);
    }

    pub fn release(&mut self, bucket: &str, vb: u16) {
        if let Some(vbs) = self.by_bucket.get_mut(bucket) {
            vbs.remove(&vb);
        }
    }

    /// Ends the holds of `bucket` that `still_active` says the applied map no longer makes active here.
    pub fn end_moved(&mut self, bucket: &str, still_active: impl Fn(u16) -> bool) {
        if let Some(vbs) = self.by_bucket.get_mut(bucket) {
            vbs.retain(|vb, _| still_active(*vb));
        }
    }

    /// Ends and returns the holds whose lease ran out by `now`.
    pub fn expire(&mut self, now: Duration) -> Vec<(String, u16)> {
        let mut expired = Vec::new();
        for (bucket, vbs) in &mut self.by_bucket {
            vbs.retain(|vb, since| {
                let live = now.saturating_sub(*since) < HOLD_LEASE;
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
        holds.end_moved("b", |vb| vb != 4);
        holds.release("b", 2);
        assert!(holds.all().is_empty());
    }
}

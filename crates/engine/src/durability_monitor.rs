//! The durability monitor of one vBucket: the sync writes (prepares) it holds and, while the vBucket is active,
//! the replication chain and the replicas' acknowledgements that decide when each prepare may commit.
//!
//! Bookkeeping only, under the vBucket lock: the bucket (`sync_write.rs`) takes seqnos, installs committed values
//! and calls the waiters. On a replica the same structure holds the prepares received from the active (no
//! waiters, no acknowledgements) until their commit or abort arrives.
//!
//! The commit rule per level, with `copies` = replicas + 1 configured and `majority` = copies / 2 + 1:
//! - `Majority`: the active (which holds the prepare from the start) plus the replicas of the chain that
//!   acknowledged it make a majority;
//! - `MajorityAndPersistActive`: that, and the active's persisted seqno reached the prepare;
//! - `PersistToMajority`: the copies that persisted it make a majority: the active once its persisted seqno
//!   reached the prepare, a replica by its acknowledgement (a replica acknowledges a persist-level prepare only
//!   once its own flusher passed it).
//!
//! Prepares commit in seqno order: one that is satisfied waits for every earlier one of the vBucket.

use std::collections::{BTreeMap, VecDeque};

use hashbrown::HashMap;
use settee_types::{DurabilityLevel, Seqno};

use crate::item::StoredItem;
use crate::vbucket::PersistWaiter;

/// Outcomes kept for prepares that completed before their writer registered its waiter; the writer registers
/// right after its write returns, so this only has to cover that moment.
const UNCLAIMED_OUTCOMES_MAX: usize = 1024;
/// Nodes whose acknowledgements a vBucket remembers: its chain (at most 3 replicas) and copies being built.
const ACKED_NODES_MAX: usize = 8;

/// One pending sync write.
pub(crate) struct Prepare {
    pub key: Box<[u8]>,
    /// The prepared document (a tombstone for a durable delete); its `seqno` is the prepare's.
    pub item: StoredItem<'static>,
    pub level: DurabilityLevel,
    /// Told the outcome; None until the writer registers (and always on a replica).
    pub waiter: Option<PersistWaiter>,
}

impl Prepare {
    /// The bytes the prepare is charged to the bucket while it is held.
    pub(crate) fn footprint(&self) -> isize {
        self.item.footprint(self.key.len()) as isize
    }
}

/// How a prepare nobody waited for yet ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Committed; the writer may be told at once.
    Committed,
    /// Committed; the writer must wait until the active persisted this (commit) seqno.
    PersistAt(Seqno),
}

#[derive(Default)]
pub(crate) struct DurabilityMonitor {
    /// Pending prepares by seqno.
    prepares: BTreeMap<Seqno, Prepare>,
    /// The pending prepare of each key (at most one: a second writer gets SYNC_WRITE_IN_PROGRESS).
    by_key: HashMap<Box<[u8]>, Seqno>,
    /// The replicas of the vBucket in chain order; None is a copy that does not exist right now.
    chain: Vec<Option<u64>>,
    /// For each node that acknowledged anything: the highest prepared seqno it acknowledged. Nodes outside the
    /// chain are kept too (a copy being built for a rebalance, which may join the chain while prepares are in
    /// flight), but only the chain's count.
    acked: Vec<(u64, Seqno)>,
    /// Outcomes of completed prepares whose writer has not registered yet, oldest first.
    unclaimed: VecDeque<(Seqno, Outcome)>,
}

impl DurabilityMonitor {
    pub(crate) fn is_empty(&self) -> bool {
        self.prepares.is_empty()
    }
    pub(crate) fn len(&self) -> usize {
        self.prepares.len()
    }

    /// The seqno of the key's pending prepare.
    pub(crate) fn pending_for(&self, key: &[u8]) -> Option<Seqno> {
        if self.by_key.is_empty() {
            return None;
        }
        self.by_key.get(key).copied()
    }

    pub(crate) fn get(&self, seqno: Seqno) -> Option<&Prepare> {
        self.prepares.get(&seqno)
    }

    /// Pending prepares above `after`, in seqno order.
    pub(crate) fn prepares_after(&self, after: Seqno) -> impl Iterator<Item = (&Seqno, &Prepare)> {
        self.prepares.range(after.saturating_add(1)..)
    }

    /// Starts tracking a prepare; the key must have none pending.
    pub(crate) fn track(&mut self, seqno: Seqno, prepare: Prepare) {
        debug_assert!(self.prepares.keys().next_back().is_none_or(|last| *last < seqno), "prepares in seqno order");
        let previous = self.by_key.insert(prepare.key.clone(), seqno);
        debug_assert!(previous.is_none(), "two pending prepares for one key");
        self.prepares.insert(seqno, prepare);
    }

    /// Stops tracking the prepare at `seqno`.
    pub(crate) fn remove(&mut self, seqno: Seqno) -> Option<Prepare> {
        let prepare = self.prepares.remove(&seqno)?;
        self.by_key.remove(&prepare.key);
        Some(prepare)
    }

    /// Stops tracking the key's pending prepare, if any.
    pub(crate) fn remove_key(&mut self, key: &[u8]) -> Option<(Seqno, Prepare)> {
        let seqno = self.by_key.remove(key)?;
        self.prepares.remove(&seqno).map(|p| (seqno, p))
    }

    /// Every pending prepare, in seqno order, leaving the monitor empty (chain and acknowledgements stay).
    pub(crate) fn take_all(&mut self) -> Vec<(Seqno, Prepare)> {
        self.by_key.clear();
        std::mem::take(&mut self.prepares).into_iter().collect()
    }

    /// Takes every registered waiter (the prepares stay, as a replica keeps them).
    pub(crate) fn take_waiters(&mut self) -> Vec<PersistWaiter> {
        self.unclaimed.clear();
        self.prepares.values_mut().filter_map(|p| p.waiter.take()).collect()
    }

    /// Registers the writer's waiter for the prepare at `seqno`; gives it back if the prepare is not pending.
    pub(crate) fn set_waiter(&mut self, seqno: Seqno, waiter: PersistWaiter) -> Result<(), PersistWaiter> {
        match self.prepares.get_mut(&seqno) {
            Some(p) => {
                p.waiter = Some(waiter);
                Ok(())
            }
            None => Err(waiter),
        }
    }

    /// Remembers how a prepare without a waiter ended, for a writer that registers late.
    pub(crate) fn record_unclaimed(&mut self, seqno: Seqno, outcome: Outcome) {
        if self.unclaimed.len() == UNCLAIMED_OUTCOMES_MAX {
            // Its writer, if it ever asks, is told the outcome is unknown (ambiguous), never a false success.
            self.unclaimed.pop_front();
        }
        self.unclaimed.push_back((seqno, outcome));
    }

    pub(crate) fn take_unclaimed(&mut self, seqno: Seqno) -> Option<Outcome> {
        let at = self.unclaimed.iter().position(|(s, _)| *s == seqno)?;
        self.unclaimed.remove(at).map(|(_, o)| o)
    }

    // ---- topology and acknowledgements (active vBuckets) ----

    /// Replaces the chain. Acknowledgements already received from a node that joins it count from now on.
    pub(crate) fn set_chain(&mut self, replicas: &[Option<u64>]) {
        self.chain = replicas.to_vec();
    }

    /// The copies that exist among the `copies` configured: the active and the replicas present in the chain.
    pub(crate) fn copies_present(&self, copies: u64) -> u64 {
        let replicas = usize::try_from(copies.saturating_sub(1)).unwrap_or(usize::MAX);
        1 + self.chain.iter().take(replicas).filter(|n| n.is_some()).count() as u64
    }

    /// Records that `replica` holds every prepare up to `seqno`. True when the node is a replica in the chain (its
    /// acknowledgement counts now); a node outside the chain is remembered in case it joins, up to
    /// [`ACKED_NODES_MAX`] nodes (the oldest outsider is forgotten first).
    pub(crate) fn ack(&mut self, replica: u64, seqno: Seqno) -> bool {
        match self.acked.iter_mut().find(|(node, _)| *node == replica) {
            Some(entry) => entry.1 = entry.1.max(seqno),
            None => {
                if self.acked.len() >= ACKED_NODES_MAX {
                    let chain = &self.chain;
                    if let Some(at) = self.acked.iter().position(|(n, _)| !chain.contains(&Some(*n))) {
                        self.acked.remove(at);
                    }
                }
                self.acked.push((replica, seqno));
            }
        }
        self.chain.contains(&Some(replica))
    }

    /// Forgets every acknowledgement (the vBucket stopped being active).
    pub(crate) fn clear_acks(&mut self) {
        self.acked.clear();
    }

    /// Whether the prepare at `seqno` met its level's requirement (see the module documentation);
    /// `active_persisted` is the active's persisted seqno.
    pub(crate) fn is_satisfied(
        &self,
        seqno: Seqno,
        level: DurabilityLevel,
        copies: u64,
        active_persisted: Seqno,
    ) -> bool {
        let majority = copies / 2 + 1;
        let chain = &self.chain;
        let replicas =
            self.acked.iter().filter(|(node, acked)| *acked >= seqno && chain.contains(&Some(*node))).count() as u64;
        let active_on_disk = active_persisted >= seqno;
        match level {
            DurabilityLevel::Majority => 1 + replicas >= majority,
            DurabilityLevel::MajorityAndPersistActive => 1 + replicas >= majority && active_on_disk,
            DurabilityLevel::PersistToMajority => u64::from(active_on_disk) + replicas >= majority,
        }
    }

    /// Takes the prepares that may commit now, in seqno order, stopping at the first one that may not.
    pub(crate) fn take_ready(&mut self, copies: u64, active_persisted: Seqno) -> Vec<(Seqno, Prepare)> {
        let mut ready = Vec::new();
        while let Some((&seqno, p)) = self.prepares.first_key_value() {
            if !self.is_satisfied(seqno, p.level, copies, active_persisted) {
                break;
            }
            if let Some(p) = self.remove(seqno) {
                ready.push((seqno, p));
            }
        }
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_types::Datatype;

    fn prepare(key: &str, level: DurabilityLevel) -> Prepare {
        let item = StoredItem {
            value: Default::default(),
            cas: 1,
            seqno: 0,
            rev: 1,
            flags: 0,
            expiry: 0,
            datatype: Datatype::RAW,
            deleted: false,
            locked_until: 0,
            resident: true,
            referenced: false,
        };
        Prepare { key: key.as_bytes().into(), item, level, waiter: None }
    }

    /// With one replica (two copies) majority needs the replica's acknowledgement; acknowledgements from nodes
    /// outside the chain are not recorded.
    #[test]
    fn majority_of_two_copies_needs_the_replica() {
        let mut m = DurabilityMonitor::default();
        m.set_chain(&[Some(7)]);
        m.track(5, prepare("a", DurabilityLevel::Majority));
        assert!(m.take_ready(2, 0).is_empty());
        assert!(!m.ack(8, 5), "node 8 is not in the chain");
        assert!(m.take_ready(2, 0).is_empty());
        assert!(m.ack(7, 4));
        assert!(m.take_ready(2, 0).is_empty(), "an acknowledgement below the prepare does not count");
        assert!(m.ack(7, 5));
        assert_eq!(m.take_ready(2, 0).into_iter().map(|(s, _)| s).collect::<Vec<_>>(), vec![5]);
        assert!(m.is_empty() && m.pending_for(b"a").is_none());
    }

    /// Each level's rule: the active's persistence counts for the persist levels, a replica's acknowledgement for
    /// everything; three copies need two.
    #[test]
    fn level_rules() {
        let mut m = DurabilityMonitor::default();
        m.set_chain(&[Some(2), Some(3)]);
        use DurabilityLevel::*;
        assert!(!m.is_satisfied(10, Majority, 3, 0));
        assert!(m.is_satisfied(10, Majority, 1, 0), "one copy: the active alone");
        assert!(!m.is_satisfied(10, MajorityAndPersistActive, 1, 9));
        assert!(m.is_satisfied(10, MajorityAndPersistActive, 1, 10));
        assert!(m.ack(3, 10));
        assert!(m.is_satisfied(10, Majority, 3, 0));
        assert!(!m.is_satisfied(10, MajorityAndPersistActive, 3, 0));
        assert!(m.is_satisfied(10, MajorityAndPersistActive, 3, 10));
        assert!(!m.is_satisfied(10, PersistToMajority, 3, 0), "only one copy persisted");
        assert!(m.is_satisfied(10, PersistToMajority, 3, 10));
        assert!(m.ack(2, 10));
        assert!(m.is_satisfied(10, PersistToMajority, 3, 0), "two replicas persisted it");
    }

    /// A satisfied prepare waits for every earlier one.
    #[test]
    fn commits_in_seqno_order() {
        let mut m = DurabilityMonitor::default();
        m.track(3, prepare("slow", DurabilityLevel::PersistToMajority));
        m.track(4, prepare("fast", DurabilityLevel::Majority));
        assert!(m.take_ready(1, 0).is_empty(), "seqno 4 is satisfied but 3 is not");
        let ready: Vec<Seqno> = m.take_ready(1, 3).into_iter().map(|(s, _)| s).collect();
        assert_eq!(ready, vec![3, 4]);
    }

    /// Missing copies in the chain lower the copies present; the chain beyond the configured replicas is ignored.
    #[test]
    fn copies_present_counts_the_chain() {
        let mut m = DurabilityMonitor::default();
        assert_eq!(m.copies_present(2), 1, "no chain set: only the active");
        m.set_chain(&[None, Some(4)]);
        assert_eq!(m.copies_present(3), 2);
        assert_eq!(m.copies_present(2), 1, "only the first replica is configured");
        m.set_chain(&[Some(4)]);
        assert!(m.ack(4, 1));
        m.set_chain(&[Some(5)]);
        assert!(!m.is_satisfied(1, DurabilityLevel::Majority, 2, 0), "node 4's acknowledgement left with it");
    }

    /// A copy being built (outside the chain) acknowledges a prepare; when a rebalance puts it in the chain while
    /// the prepare is in flight, that acknowledgement counts, as the copy will not send it again.
    #[test]
    fn an_acknowledgement_from_outside_the_chain_counts_once_the_node_joins() {
        let mut m = DurabilityMonitor::default();
        m.set_chain(&[Some(4)]);
        m.track(1, prepare("k", DurabilityLevel::Majority));
        assert!(!m.ack(5, 1), "node 5 is not in the chain yet");
        assert!(!m.is_satisfied(1, DurabilityLevel::Majority, 2, 0));
        m.set_chain(&[Some(5)]);
        assert!(m.is_satisfied(1, DurabilityLevel::Majority, 2, 0));
        for outsider in 10..20 {
            m.ack(outsider, 1);
        }
        assert!(m.acked.len() <= ACKED_NODES_MAX && m.acked.iter().any(|(n, _)| *n == 5), "the chain's ack stays");
    }
}

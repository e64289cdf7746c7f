//! A simulated node's disk: the real in-memory store ([`MemoryStore`]) for what the node reads and writes, and a
//! journal of every change that tells what a crash keeps. A change is durable once a sync follows it; a crash keeps
//! every synced change and a seeded prefix of those written since the last sync (an LSM journal reaches the disk in
//! order, so what survives a crash without fsync is some prefix of it). Disk faults through the real store's seam
//! (`settee_store::FaultInjector`), handled as `FjallStore` handles them: a failed write or sync poisons the store
//! until the node restarts, a full disk fails every write and sync, and a slow disk is the driver's business (the
//! sync lands later).

use std::sync::Mutex;

use settee_store::{FaultInjector, MemoryStore, Record, StoreError, VbStateRecord, VbStore, VbWrite};
use settee_types::{Seqno, VbId};

use crate::rng::SimRng;

/// One change as the journal keeps it.
#[derive(Clone, Debug)]
enum Change {
    Write(Vec<(VbId, Vec<Record>, Option<VbStateRecord>)>),
    Clear(VbId),
    Rollback(VbId, Seqno),
}

#[derive(Default)]
struct Journal {
    synced: Vec<Change>,
    unsynced: Vec<Change>,
    poisoned: bool,
}

/// The disk of one simulated node; it outlives the node's crashes.
#[derive(Default)]
pub struct SimDisk {
    live: MemoryStore,
    journal: Mutex<Journal>,
    faults: FaultInjector,
}

impl SimDisk {
    fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The faults the nemesis switches on.
    pub fn faults(&self) -> &FaultInjector {
        &self.faults
    }

    /// Whether a failed write or sync poisoned the store (until the node restarts).
    pub fn poisoned(&self) -> bool {
        self.journal().poisoned
    }

    /// The process crashed: what the disk holds afterwards is every synced change and a prefix (drawn from `rng`)
    /// of the changes written since the last sync. Returns how many unsynced changes were lost. The store opens
    /// again unpoisoned (a restart reopens it); a full disk stays full.
    pub fn crash(&mut self, rng: &mut SimRng) -> usize {
        let journal = self.journal.get_mut().unwrap_or_else(|p| p.into_inner());
        let unsynced = std::mem::take(&mut journal.unsynced);
        let kept = rng.below(unsynced.len() as u64 + 1) as usize;
        journal.synced.extend(unsynced.iter().take(kept).cloned());
        journal.poisoned = false;
        let full = self.faults.is_disk_full();
        self.faults.clear();
        self.faults.set_disk_full(full);
        let live = MemoryStore::default();
        for change in &journal.synced {
            // Every change replayed was accepted once, by a store in the same state.
            let _ = apply(&live, change);
        }
        self.live = live;
        unsynced.len() - kept
    }

    /// Before a write or a sync: a poisoned store refuses; an injected failure poisons it (as `FjallStore`).
    fn before_io(&self, sync: bool) -> Result<(), StoreError> {
        let mut j = self.journal();
        if j.poisoned {
            return Err(StoreError::Poisoned);
        }
        let injected = if sync { self.faults.before_sync() } else { self.faults.before_write() };
        injected.map_err(|e| {
            j.poisoned = true;
            StoreError::Io(e.to_string())
        })
    }

    fn record(&self, change: Change) {
        self.journal().unsynced.push(change);
    }
}

fn apply(store: &MemoryStore, change: &Change) -> Result<(), StoreError> {
    match change {
        Change::Write(parts) => {
            let views: Vec<VbWrite<'_>> = parts
                .iter()
                .map(|(vb, records, state)| VbWrite { vb: *vb, records, on_disk: &[], state: state.as_ref() })
                .collect();
            store.write_many(&views)
        }
        Change::Clear(vb) => store.clear_vbucket(*vb).map(|_| ()),
        Change::Rollback(vb, to) => store.rollback_vbucket(*vb, *to).map(|_| ()),
    }
}

impl VbStore for SimDisk {
    fn write_many(&self, parts: &[VbWrite<'_>]) -> Result<(), StoreError> {
        self.before_io(false)?;
        self.live.write_many(parts)?;
        let change =
            Change::Write(parts.iter().map(|p| (p.vb, p.records.to_vec(), p.state.cloned())).collect::<Vec<_>>());
        self.record(change);
        Ok(())
    }

    fn write_batch_with_state(
        &self,
        vb: VbId,
        batch: &[Record],
        state: Option<&VbStateRecord>,
    ) -> Result<(), StoreError> {
        self.write_many(&[VbWrite { vb, records: batch, on_disk: &[], state }])
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.before_io(true)?;
        let mut j = self.journal();
        let done = std::mem::take(&mut j.unsynced);
        j.synced.extend(done);
        Ok(())
    }

    fn get(&self, vb: VbId, key: &[u8]) -> Result<Option<Record>, StoreError> {
        self.live.get(vb, key)
    }

    fn scan_seqnos_while(
        &self,
        vb: VbId,
        from: Seqno,
        to: Seqno,
        f: &mut dyn FnMut(Record) -> bool,
    ) -> Result<(), StoreError> {
        self.live.scan_seqnos_while(vb, from, to, f)
    }

    fn scan_keys(&self, vb: VbId, with_values: bool, f: &mut dyn FnMut(Record) -> bool) -> Result<(), StoreError> {
        self.live.scan_keys(vb, with_values, f)
    }

    fn high_seqno(&self, vb: VbId) -> Result<Seqno, StoreError> {
        self.live.high_seqno(vb)
    }

    fn vb_state(&self, vb: VbId) -> Result<Option<VbStateRecord>, StoreError> {
        self.live.vb_state(vb)
    }

    fn purge_tombstones(&self, _vb: VbId, _deleted_before_secs: u32) -> Result<u64, StoreError> {
        // The simulation never compacts.
        Ok(0)
    }

    fn clear_vbucket(&self, vb: VbId) -> Result<u64, StoreError> {
        self.before_io(false)?;
        let removed = self.live.clear_vbucket(vb)?;
        self.record(Change::Clear(vb));
        Ok(removed)
    }

    fn rollback_vbucket(&self, vb: VbId, to: Seqno) -> Result<u64, StoreError> {
        self.before_io(false)?;
        let removed = self.live.rollback_vbucket(vb, to)?;
        self.record(Change::Rollback(vb, to));
        Ok(removed)
    }

    fn compact(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn disk_bytes(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &[u8], seqno: u64) -> Record {
        settee_store::conformance::record(key, b"v", seqno, false)
    }

    fn seqnos(disk: &SimDisk, vb: VbId) -> Vec<u64> {
        let mut out = Vec::new();
        disk.scan_seqnos(vb, 0, u64::MAX, &mut |r| out.push(r.meta.seqno)).expect("scan");
        out
    }

    /// What was synced survives a crash; of what was written after the last sync, a prefix survives, never a
    /// later change without the earlier ones.
    #[test]
    fn a_crash_keeps_what_was_synced_and_a_prefix_of_the_rest() {
        let vb = VbId(3);
        let mut lost_some = false;
        for seed in 0..20 {
            let mut disk = SimDisk::default();
            disk.write_batch(vb, &[record(b"a", 1)]).expect("write");
            disk.sync().expect("sync");
            for s in 2..=5 {
                disk.write_batch(vb, &[record(format!("k{s}").as_bytes(), s)]).expect("write");
            }
            let lost = disk.crash(&mut SimRng::new(seed));
            let kept = seqnos(&disk, vb);
            assert_eq!(kept, (1..=5 - lost as u64).collect::<Vec<_>>(), "seed {seed}");
            lost_some |= lost > 0;
        }
        assert!(lost_some, "some seed lost unsynced writes");
    }

    /// An injected write or sync failure poisons the store: nothing more is accepted until the node restarts
    /// (a crash reopens it); a full disk fails every write.
    #[test]
    fn a_failed_write_or_sync_poisons_until_restart() {
        let vb = VbId(1);
        let mut disk = SimDisk::default();
        disk.faults().fail_next_sync();
        disk.write_batch(vb, &[record(b"a", 1)]).expect("the write itself succeeds");
        assert!(matches!(disk.sync(), Err(StoreError::Io(_))));
        assert_eq!(disk.write_batch(vb, &[record(b"b", 2)]), Err(StoreError::Poisoned));
        assert!(disk.poisoned());
        disk.crash(&mut SimRng::new(1));
        assert!(!disk.poisoned());
        disk.write_batch(vb, &[record(b"b", 2)]).expect("reopened");
        disk.faults().set_disk_full(true);
        assert!(disk.write_batch(vb, &[record(b"c", 3)]).is_err());
    }
}

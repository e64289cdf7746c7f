use std::collections::BTreeMap;

use parking_lot::RwLock;
use settee_types::{limits::NUM_VBUCKETS, Seqno, VbId};

use crate::record::{check_batch, check_vb};
use crate::vb_state::check_state;
use crate::{Record, StoreError, VbStateRecord, VbStore, VbWrite};

#[derive(Default)]
struct VbData {
    by_key: BTreeMap<Vec<u8>, Record>,
    by_seqno: BTreeMap<Seqno, Vec<u8>>,
    high_seqno: Seqno,
    state: Option<VbStateRecord>,
}

/// The in-memory [`VbStore`]: the reference the conformance suite is checked against, and the store of ephemeral
/// buckets' tests.
pub struct MemoryStore {
    vbuckets: Vec<RwLock<VbData>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore { vbuckets: (0..NUM_VBUCKETS).map(|_| RwLock::new(VbData::default())).collect() }
    }
}

impl MemoryStore {
    fn vb(&self, vb: VbId) -> Result<&RwLock<VbData>, StoreError> {
        check_vb(vb)?;
        self.vbuckets.get(usize::from(vb.0)).ok_or(StoreError::Io(format!("no vBucket {}", vb.0)))
    }

    /// Test seam: flips a bit of a stored value without fixing its checksum, as a bad disk would.
    pub fn corrupt_for_test(&self, vb: VbId, key: &[u8]) {
        if let Ok(lock) = self.vb(vb) {
            if let Some(r) = lock.write().by_key.get_mut(key) {
                r.value.push(0xff);
            }
        }
    }
}

fn checked(vb: VbId, r: &Record) -> Result<Record, StoreError> {
    if r.is_intact() {
        Ok(r.clone())
    } else {
        Err(StoreError::Corrupt { vb, seqno: r.meta.seqno })
    }
}

impl VbStore for MemoryStore {
    fn write_batch_with_state(
        &self,
        vb: VbId,
        batch: &[Record],
        state: Option<&VbStateRecord>,
    ) -> Result<(), StoreError> {
        self.write_many(&[VbWrite { vb, records: batch, on_disk: &[], state }])
    }

    /// Every part is checked under its vBucket's write lock (taken in ascending vBucket order) before any is
    /// applied, so a refused part leaves the others unwritten too.
    fn write_many(&self, parts: &[VbWrite<'_>]) -> Result<(), StoreError> {
        let mut order: Vec<&VbWrite<'_>> = parts.iter().collect();
        order.sort_by_key(|p| p.vb);
        if let Some(w) = order.windows(2).find(|w| w[0].vb == w[1].vb) {
            return Err(StoreError::Rejected { vb: w[0].vb, seqno: 0, reason: "a vBucket appears twice in one write" });
        }
        let mut locked = Vec::with_capacity(order.len());
        for part in &order {
            locked.push(self.vb(part.vb)?.write());
        }
        let mut highs = Vec::with_capacity(order.len());
        for (part, data) in order.iter().zip(&locked) {
            if let Some(s) = part.state {
                check_state(part.vb, s)?;
            }
            highs.push(check_batch(part.vb, part.records, data.high_seqno)?);
            if cfg!(debug_assertions) {
                crate::check_on_disk(part, |key| Ok(data.by_key.get(key).map(|r| r.meta.seqno)))?;
            }
        }
        for ((part, data), high) in order.iter().zip(locked.iter_mut()).zip(highs) {
            data.high_seqno = high;
            for r in part.records {
                if let Some(old) = data.by_key.insert(r.key.clone(), r.clone()) {
                    data.by_seqno.remove(&old.meta.seqno);
                }
                data.by_seqno.insert(r.meta.seqno, r.key.clone());
            }
            if let Some(s) = part.state {
                data.state = Some(s.clone());
            }
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn get(&self, vb: VbId, key: &[u8]) -> Result<Option<Record>, StoreError> {
        let data = self.vb(vb)?.read();
        data.by_key.get(key).map(|r| checked(vb, r)).transpose()
    }

    fn scan_seqnos_while(
        &self,
        vb: VbId,
        from: Seqno,
        to: Seqno,
        f: &mut dyn FnMut(Record) -> bool,
    ) -> Result<(), StoreError> {
        if from > to {
            return Ok(());
        }
        let data = self.vb(vb)?.read();
        for key in data.by_seqno.range(from..=to).map(|(_, k)| k) {
            if let Some(r) = data.by_key.get(key) {
                if !f(checked(vb, r)?) {
                    break;
                }
            }
        }
        Ok(())
    }

    fn scan_keys(&self, vb: VbId, with_values: bool, f: &mut dyn FnMut(Record) -> bool) -> Result<(), StoreError> {
        let data = self.vb(vb)?.read();
        if with_values {
            for r in data.by_seqno.values().filter_map(|k| data.by_key.get(k)) {
                if !f(checked(vb, r)?) {
                    break;
                }
            }
            return Ok(());
        }
        for r in data.by_key.values() {
            let meta_only = Record { key: r.key.clone(), value: Vec::new(), meta: r.meta, crc32c: r.crc32c };
            if !f(meta_only) {
                break;
            }
        }
        Ok(())
    }

    fn high_seqno(&self, vb: VbId) -> Result<Seqno, StoreError> {
        Ok(self.vb(vb)?.read().high_seqno)
    }

    fn vb_state(&self, vb: VbId) -> Result<Option<VbStateRecord>, StoreError> {
        Ok(self.vb(vb)?.read().state.clone())
    }

    fn purge_tombstones(&self, vb: VbId, deleted_before_secs: u32) -> Result<u64, StoreError> {
        let mut data = self.vb(vb)?.write();
        let doomed: Vec<(Vec<u8>, Seqno)> = data
            .by_key
            .values()
            .filter(|r| r.meta.deleted && r.meta.expiry < deleted_before_secs)
            .map(|r| (r.key.clone(), r.meta.seqno))
            .collect();
        for (key, seqno) in &doomed {
            data.by_key.remove(key);
            data.by_seqno.remove(seqno);
        }
        Ok(doomed.len() as u64)
    }

    fn clear_vbucket(&self, vb: VbId) -> Result<u64, StoreError> {
        let mut data = self.vb(vb)?.write();
        let removed = data.by_key.len() as u64;
        *data = VbData::default();
        Ok(removed)
    }

    fn rollback_vbucket(&self, vb: VbId, to: Seqno) -> Result<u64, StoreError> {
        let mut data = self.vb(vb)?.write();
        let doomed = data.by_seqno.split_off(&(to + 1));
        for key in doomed.values() {
            data.by_key.remove(key);
        }
        data.high_seqno = data.high_seqno.min(to);
        if let Some(state) = &mut data.state {
            crate::vb_state::roll_back(state, to);
        }
        Ok(doomed.len() as u64)
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
    use crate::conformance;

    /// The in-memory store passes the whole conformance suite.
    #[test]
    fn memory_store_conforms() {
        conformance::run_all(MemoryStore::default);
    }

    /// A corrupted record is reported as corrupt on read, never returned.
    #[test]
    fn corruption_is_detected_on_read() {
        let s = MemoryStore::default();
        s.write_batch(VbId(2), &[conformance::record(b"k", b"v", 1, false)]).unwrap();
        s.corrupt_for_test(VbId(2), b"k");
        assert_eq!(s.get(VbId(2), b"k"), Err(StoreError::Corrupt { vb: VbId(2), seqno: 1 }));
    }
}

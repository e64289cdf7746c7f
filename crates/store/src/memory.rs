use std::collections::{BTreeMap, HashMap};

use parking_lot::RwLock;
use settee_types::{limits::NUM_VBUCKETS, Seqno, VbId};

use crate::{Record, StoreError, VbStore};

#[derive(Default)]
struct VbData {
    by_key: HashMap<Vec<u8>, Record>,
    by_seqno: BTreeMap<Seqno, Vec<u8>>,
    high_seqno: Seqno,
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
    fn write_batch(&self, vb: VbId, batch: &[Record]) -> Result<(), StoreError> {
        let mut data = self.vb(vb)?.write();
        for r in batch {
            if let Some(old) = data.by_key.insert(r.key.clone(), r.clone()) {
                data.by_seqno.remove(&old.meta.seqno);
            }
            data.by_seqno.insert(r.meta.seqno, r.key.clone());
            data.high_seqno = data.high_seqno.max(r.meta.seqno);
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

    fn scan_seqnos(&self, vb: VbId, from: Seqno, to: Seqno, f: &mut dyn FnMut(Record)) -> Result<(), StoreError> {
        let data = self.vb(vb)?.read();
        for key in data.by_seqno.range(from..=to).map(|(_, k)| k) {
            if let Some(r) = data.by_key.get(key) {
                f(checked(vb, r)?);
            }
        }
        Ok(())
    }

    fn high_seqno(&self, vb: VbId) -> Result<Seqno, StoreError> {
        Ok(self.vb(vb)?.read().high_seqno)
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

//! The [`VbStore`] operations of [`FjallStore`]: the write path (read-before-write on the key index, one fjall
//! batch per call) and the read paths, each verifying every value it returns.

use std::sync::atomic::Ordering;

use fjall::{PersistMode, Readable, UserKey};
use settee_types::{OnDisk, Seqno, VbId};

use super::{layout, FjallStore};
use crate::record::check_batch;
use crate::vb_state::check_state;
use crate::{Record, RecordMeta, StoreError, VbStateRecord, VbStore, VbWrite};

/// The batch's last record of each key. A round of the flusher holds tens of thousands of records, and std's
/// SipHash showed in its profile; hashbrown's default (foldhash, randomly seeded per map) is a fraction of its cost
/// and still keyed, since document keys are the clients' choice.
type LastOfKey<'a> = hashbrown::HashMap<&'a [u8], usize>;

/// Tombstones removed per fjall batch by a purge, which bounds the batch held in memory.
const PURGE_BATCH_RECORDS_MAX: usize = 4096;

impl FjallStore {
    fn cached_high_seqno(&self, vb: VbId) -> Seqno {
        self.high_seqnos[usize::from(vb.0)].load(Ordering::Acquire)
    }

    /// The seqno the current version of `key` is stored at, from the key index. The caller holds the vBucket's
    /// write lock, so the answer stays true until its batch commits.
    fn stored_seqno(&self, vb: VbId, key: &[u8]) -> Result<Option<Seqno>, StoreError> {
        let kk = layout::key_index_key(vb, key);
        let Some(v) = self.by_key.get(&kk).map_err(|e| self.read_failed(vb, e))? else { return Ok(None) };
        let (meta, _) = layout::decode_key_entry(&kk, &v).ok_or(StoreError::Corrupt { vb, seqno: 0 })?;
        Ok(Some(meta.seqno))
    }

    /// Removes every record of `vb` whose metadata `doomed` picks, from both indexes, in batches of at most
    /// [`PURGE_BATCH_RECORDS_MAX`]. The caller holds the vBucket's write lock.
    fn remove_where(
        &self,
        vb: VbId,
        op: &'static str,
        doomed: impl Fn(&RecordMeta) -> bool,
    ) -> Result<u64, StoreError> {
        let mut removed = 0;
        let mut batch_keys = Vec::new();
        let flush = |keys: &mut Vec<(UserKey, Seqno)>| -> Result<u64, StoreError> {
            if keys.is_empty() {
                return Ok(0);
            }
            let mut batch = self.db.batch();
            let count = keys.len() as u64;
            for (kk, seqno) in keys.drain(..) {
                batch.remove(&self.by_key, kk);
                batch.remove(&self.by_seqno, layout::seqno_index_key(vb, seqno));
            }
            self.commit(batch, op)?;
            Ok(count)
        };
        for guard in self.by_key.prefix(layout::vb_prefix(vb)) {
            let (k, v) = guard.into_inner().map_err(|e| self.read_failed(vb, e))?;
            let (meta, _) = layout::decode_key_entry(&k, &v).ok_or(StoreError::Corrupt { vb, seqno: 0 })?;
            if doomed(&meta) {
                batch_keys.push((k, meta.seqno));
            }
            if batch_keys.len() >= PURGE_BATCH_RECORDS_MAX {
                removed += flush(&mut batch_keys)?;
            }
        }
        Ok(removed + flush(&mut batch_keys)?)
    }
}

impl VbStore for FjallStore {
    fn write_batch_with_state(
        &self,
        vb: VbId,
        batch: &[Record],
        state: Option<&VbStateRecord>,
    ) -> Result<(), StoreError> {
        self.write_many(&[VbWrite { vb, records: batch, on_disk: &[], state }])
    }

    /// One fjall batch (one commit) for every vBucket part. The vBuckets' write locks are taken in ascending
    /// vBucket order, so concurrent callers cannot deadlock.
    ///
    /// A record whose key's version on disk the writer knows ([`VbWrite::on_disk`]) retires that version's
    /// by-seqno entry without reading the by-key index; the others pay one point read.
    fn write_many(&self, parts: &[VbWrite<'_>]) -> Result<(), StoreError> {
        let mut order: Vec<usize> =
            (0..parts.len()).filter(|i| !parts[*i].records.is_empty() || parts[*i].state.is_some()).collect();
        order.sort_by_key(|i| parts[*i].vb);
        if order.windows(2).any(|w| parts[w[0]].vb == parts[w[1]].vb) {
            return Err(StoreError::Rejected {
                vb: parts[order[0]].vb,
                seqno: 0,
                reason: "a vBucket appears twice in one write",
            });
        }
        for &i in &order {
            self.usable(parts[i].vb)?;
            if let Some(s) = parts[i].state {
                check_state(parts[i].vb, s)?;
            }
        }
        if order.is_empty() {
            return Ok(());
        }
        let _locks: Vec<_> = order.iter().map(|&i| self.write_locks[usize::from(parts[i].vb.0)].lock()).collect();
        // Sized up front: up to three fjall entries per record (key index, seqno index, the retired seqno entry)
        // and two per vBucket, so the batch's item list is allocated once instead of doubling through a round.
        // `PersistMode::Buffer` is what `Database::batch` sets: the journal reaches the OS at commit.
        let records: usize = order.iter().map(|&i| parts[i].records.len()).sum();
        let mut fjall_batch = fjall::OwnedWriteBatch::with_capacity(self.db.clone(), 3 * records + 2 * order.len())
            .durability(Some(PersistMode::Buffer));
        let mut highs = Vec::with_capacity(order.len());
        // Reused for every record: fjall copies what it is given into its own buffers.
        let (mut kk, mut entry) = (Vec::new(), Vec::new());
        let mut last_of_key = LastOfKey::default();
        for &i in &order {
            let part = &parts[i];
            let (vb, batch, state) = (part.vb, part.records, part.state);
            let high = check_batch(vb, batch, self.cached_high_seqno(vb))?;
            if cfg!(debug_assertions) {
                crate::check_on_disk(part, |key| self.stored_seqno(vb, key))?;
            }
            // Only the last record of a key in the batch is written: an earlier one would be superseded within the
            // same fjall batch, and one fjall batch must not write and remove the same fjall key (both would carry
            // the same fjall seqno, leaving their order to the memtable).
            last_of_key.clear();
            last_of_key.extend(batch.iter().enumerate().map(|(i, r)| (&r.key[..], i)));
            for (j, r) in batch.iter().enumerate() {
                if last_of_key.get(&r.key[..]) != Some(&j) {
                    continue;
                }
                let previous = match part.on_disk(j) {
                    OnDisk::Unknown => self.stored_seqno(vb, &r.key)?,
                    OnDisk::Absent => None,
                    OnDisk::At(seqno) => Some(seqno),
                };
                if let Some(previous) = previous {
                    fjall_batch.remove(&self.by_seqno, layout::seqno_index_key(vb, previous));
                }
                layout::key_index_key_into(&mut kk, vb, &r.key);
                layout::encode_key_entry_into(&mut entry, &kk, r);
                fjall_batch.insert(&self.by_key, &kk[..], &entry[..]);
                let sk = layout::seqno_index_key(vb, r.meta.seqno);
                layout::encode_seqno_entry_into(&mut entry, &sk, r);
                fjall_batch.insert(&self.by_seqno, sk, &entry[..]);
            }
            if !batch.is_empty() {
                let hk = layout::high_seqno_key(vb);
                fjall_batch.insert(&self.vb_meta, hk, layout::encode_high_seqno(&hk, high));
            }
            if let Some(s) = state {
                let sk = layout::vb_state_key(vb);
                fjall_batch.insert(&self.vb_meta, sk, layout::encode_vb_state(&sk, s));
            }
            highs.push((vb, high));
        }
        self.commit(fjall_batch, "write_batch")?;
        for (vb, high) in highs {
            self.high_seqnos[usize::from(vb.0)].store(high, Ordering::Release);
        }
        Ok(())
    }

    /// Group commit across callers: the flushers of a bucket share one journal, and fjall holds the journal's lock
    /// through an fsync, so a flusher whose commit landed while another's fsync was pending finds it covered and
    /// skips its own. `fdatasync`: the journal's data and size, without timestamps.
    fn sync(&self) -> Result<(), StoreError> {
        let target = self.commits.load(Ordering::Acquire);
        let mut synced = self.synced.lock();
        if *synced >= target {
            return self.check_open();
        }
        // Every commit counted by now has finished writing the journal, so this fsync covers it.
        let covering = self.commits.load(Ordering::Acquire);
        self.before_io("sync", true)?;
        self.db.persist(PersistMode::SyncData).map_err(|e| self.poison("sync", e))?;
        *synced = covering;
        Ok(())
    }

    fn get(&self, vb: VbId, key: &[u8]) -> Result<Option<Record>, StoreError> {
        self.usable(vb)?;
        self.before_read()?;
        // One snapshot for both lookups, so a concurrent write superseding this version in between cannot make
        // the key index point at a seqno entry that is already gone.
        let snapshot = self.db.snapshot();
        let kk = layout::key_index_key(vb, key);
        let Some(ke) = snapshot.get(&self.by_key, &kk).map_err(|e| self.read_failed(vb, e))? else {
            return Ok(None);
        };
        let (meta, crc) = layout::decode_key_entry(&kk, &ke).ok_or(StoreError::Corrupt { vb, seqno: 0 })?;
        let corrupt = StoreError::Corrupt { vb, seqno: meta.seqno };
        let sk = layout::seqno_index_key(vb, meta.seqno);
        let se = snapshot.get(&self.by_seqno, sk).map_err(|e| self.read_failed(vb, e))?.ok_or(corrupt.clone())?;
        let record = layout::decode_seqno_entry(&sk, &se).ok_or(corrupt.clone())?;
        if record.key != key || record.meta != meta || record.crc32c != crc {
            return Err(corrupt);
        }
        Ok(Some(record))
    }

    fn scan_seqnos_while(
        &self,
        vb: VbId,
        from: Seqno,
        to: Seqno,
        f: &mut dyn FnMut(Record) -> bool,
    ) -> Result<(), StoreError> {
        self.usable(vb)?;
        self.before_read()?;
        if from > to {
            return Ok(());
        }
        let range = layout::seqno_index_key(vb, from)..=layout::seqno_index_key(vb, to);
        for guard in self.by_seqno.range(range) {
            let (k, v) = guard.into_inner().map_err(|e| self.read_failed(vb, e))?;
            let record = layout::decode_seqno_entry(&k, &v)
                .ok_or(StoreError::Corrupt { vb, seqno: layout::seqno_of_index_key(&k) })?;
            if !f(record) {
                break;
            }
        }
        Ok(())
    }

    fn scan_keys(&self, vb: VbId, with_values: bool, f: &mut dyn FnMut(Record) -> bool) -> Result<(), StoreError> {
        self.usable(vb)?;
        if with_values {
            for guard in self.by_seqno.prefix(layout::vb_prefix(vb)) {
                let (k, v) = guard.into_inner().map_err(|e| self.read_failed(vb, e))?;
                let record = layout::decode_seqno_entry(&k, &v)
                    .ok_or(StoreError::Corrupt { vb, seqno: layout::seqno_of_index_key(&k) })?;
                if !f(record) {
                    break;
                }
            }
            return Ok(());
        }
        for guard in self.by_key.prefix(layout::vb_prefix(vb)) {
            let (k, v) = guard.into_inner().map_err(|e| self.read_failed(vb, e))?;
            let (meta, crc32c) = layout::decode_key_entry(&k, &v).ok_or(StoreError::Corrupt { vb, seqno: 0 })?;
            let key = k.get(2..).unwrap_or_default().to_vec();
            if !f(Record { key, value: Vec::new(), meta, crc32c }) {
                break;
            }
        }
        Ok(())
    }

    fn high_seqno(&self, vb: VbId) -> Result<Seqno, StoreError> {
        self.usable(vb)?;
        Ok(self.cached_high_seqno(vb))
    }

    fn vb_state(&self, vb: VbId) -> Result<Option<VbStateRecord>, StoreError> {
        self.usable(vb)?;
        let key = layout::vb_state_key(vb);
        let Some(v) = self.vb_meta.get(key).map_err(|e| self.read_failed(vb, e))? else { return Ok(None) };
        layout::decode_vb_state(&key, &v).map(Some).ok_or(StoreError::Corrupt { vb, seqno: 0 })
    }

    fn purge_tombstones(&self, vb: VbId, deleted_before_secs: u32) -> Result<u64, StoreError> {
        self.usable(vb)?;
        let _vb_writer = self.write_locks[usize::from(vb.0)].lock();
        self.remove_where(vb, "purge_tombstones", |m| m.deleted && m.expiry < deleted_before_secs)
    }

    fn clear_vbucket(&self, vb: VbId) -> Result<u64, StoreError> {
        self.usable(vb)?;
        let _vb_writer = self.write_locks[usize::from(vb.0)].lock();
        let removed = self.remove_where(vb, "clear_vbucket", |_| true)?;
        let mut batch = self.db.batch();
        batch.remove(&self.vb_meta, layout::high_seqno_key(vb));
        batch.remove(&self.vb_meta, layout::vb_state_key(vb));
        self.commit(batch, "clear_vbucket")?;
        self.high_seqnos[usize::from(vb.0)].store(0, std::sync::atomic::Ordering::Release);
        Ok(removed)
    }

    fn rollback_vbucket(&self, vb: VbId, to: Seqno) -> Result<u64, StoreError> {
        self.usable(vb)?;
        let _vb_writer = self.write_locks[usize::from(vb.0)].lock();
        let removed = self.remove_where(vb, "rollback_vbucket", |m| m.seqno > to)?;
        let high = self.cached_high_seqno(vb).min(to);
        let mut batch = self.db.batch();
        let hk = layout::high_seqno_key(vb);
        batch.insert(&self.vb_meta, hk, layout::encode_high_seqno(&hk, high));
        let sk = layout::vb_state_key(vb);
        if let Some(v) = self.vb_meta.get(sk).map_err(|e| self.read_failed(vb, e))? {
            let mut state = layout::decode_vb_state(&sk, &v).ok_or(StoreError::Corrupt { vb, seqno: 0 })?;
            crate::vb_state::roll_back(&mut state, to);
            batch.insert(&self.vb_meta, sk, layout::encode_vb_state(&sk, &state));
        }
        self.commit(batch, "rollback_vbucket")?;
        self.high_seqnos[usize::from(vb.0)].store(high, Ordering::Release);
        Ok(removed)
    }

    fn compact(&self) -> Result<(), StoreError> {
        self.before_io("compact", false)?;
        self.compact_all()
    }

    fn disk_bytes(&self) -> u64 {
        FjallStore::walk_bytes(&self.path)
    }
}

//! Storage for vBuckets behind one trait, [`VbStore`], so the engine can persist through fjall ([`FjallStore`])
//! or keep everything in memory ([`MemoryStore`]), and every implementation is held to the same [`conformance`]
//! suite.
//!
//! Every record carries a CRC32C of its key, value and metadata (CAS and seqno included), checked on every read:
//! a mismatch is [`StoreError::Corrupt`], never a value. A failed write or sync poisons a [`FjallStore`]: every
//! later call returns [`StoreError::Poisoned`] until the store is reopened, so nothing is ever reported durable
//! that may not be. [`FaultInjector`] is the seam through which tests make writes and syncs fail.
//! The byte layout on disk is in `docs/on-disk-format.md`.
//!
//! Must not depend on the engine or the server.

pub mod conformance;
mod fault_injector;
mod fjall_store;
mod memory;
mod record;
mod vb_state;

pub use fault_injector::FaultInjector;
pub use fjall_store::{FjallConfig, FjallStore};
pub use memory::MemoryStore;
pub use record::{Record, RecordMeta, KEY_BYTES_MAX};
pub use vb_state::VbStateRecord;

use settee_types::{OnDisk, Seqno, VbId};

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    /// Stored bytes do not match their checksum (or an index points at the wrong record); the vBucket must be
    /// taken out of service. `seqno` is 0 when the damaged bytes hold no trustworthy seqno (vBucket metadata).
    #[error("checksum mismatch in vBucket {vb:?} at seqno {seqno}")]
    Corrupt { vb: VbId, seqno: Seqno },
    /// An earlier write or sync failed; nothing more is accepted until the store is reopened.
    #[error("store is poisoned after a failed write or sync")]
    Poisoned,
    /// A batch broke a precondition (damaged record, key too long, seqno not increasing); nothing was written and
    /// the store is not poisoned. This is a caller bug, reported instead of silently corrupting an index.
    #[error("rejected record in vBucket {vb:?} at seqno {seqno}: {reason}")]
    Rejected { vb: VbId, seqno: Seqno, reason: &'static str },
    #[error("i/o error: {0}")]
    Io(String),
}

/// One vBucket's part of [`VbStore::write_many`]: its records, what the writer knows of their keys on disk, and
/// optionally its state.
#[derive(Clone, Copy, Debug)]
pub struct VbWrite<'a> {
    pub vb: VbId,
    pub records: &'a [Record],
    /// For the record at the same index, what the writer knows of its key's version on disk before this write (a
    /// record without an entry: unknown). A store may trust it instead of reading its by-key index. A wrong hint
    /// would leave a stale by-seqno entry behind, so debug builds check each one against the store and reject the
    /// write when one is wrong (every test and compatibility suite runs a debug build).
    pub on_disk: &'a [OnDisk],
    pub state: Option<&'a VbStateRecord>,
}

impl VbWrite<'_> {
    /// The hint for the record at `index`.
    pub fn on_disk(&self, index: usize) -> OnDisk {
        self.on_disk.get(index).copied().unwrap_or_default()
    }
}

/// Checks every hint of `part` against `stored` (the seqno the store holds for a key): a hint that disagrees is a
/// writer's bug, rejected before anything is written. Only debug builds pay for the reads.
pub(crate) fn check_on_disk(
    part: &VbWrite<'_>,
    mut stored: impl FnMut(&[u8]) -> Result<Option<Seqno>, StoreError>,
) -> Result<(), StoreError> {
    for (i, r) in part.records.iter().enumerate() {
        let hint = part.on_disk(i);
        if hint != OnDisk::Unknown && !hint.agrees_with(stored(&r.key)?) {
            return Err(StoreError::Rejected {
                vb: part.vb,
                seqno: r.meta.seqno,
                reason: "the writer's knowledge of the key's version on disk is wrong",
            });
        }
    }
    Ok(())
}

/// Per-vBucket storage: a by-key index and a by-seqno index over the same records, plus per-vBucket state.
///
/// Writes become durable only at the next successful [`VbStore::sync`]. Reads see every completed write.
pub trait VbStore: Send + Sync {
    /// Writes a batch atomically (all or nothing, for readers and across a crash); later records for a key replace
    /// earlier ones. Seqnos must be strictly increasing and above [`VbStore::high_seqno`], records intact.
    fn write_batch(&self, vb: VbId, batch: &[Record]) -> Result<(), StoreError> {
        self.write_batch_with_state(vb, batch, None)
    }
    /// Several vBuckets' batches (each with its optional state) at once, all or nothing: when a part breaks a
    /// precondition the error names its vBucket ([`StoreError::Rejected`], or [`StoreError::Corrupt`] for a
    /// vBucket taken out of service) and no part is written, so the caller can write the others again without the
    /// one refused. A store may commit them all in one atomic batch, which the flusher uses to pay one commit per
    /// round instead of one per vBucket.
    fn write_many(&self, parts: &[VbWrite<'_>]) -> Result<(), StoreError>;
    /// [`VbStore::write_batch`], plus the vBucket state in the same atomic batch when `state` is given.
    fn write_batch_with_state(
        &self,
        vb: VbId,
        batch: &[Record],
        state: Option<&VbStateRecord>,
    ) -> Result<(), StoreError>;
    /// Makes every written batch durable (fsync).
    fn sync(&self) -> Result<(), StoreError>;
    /// The latest record of a key (tombstones included, until purged).
    fn get(&self, vb: VbId, key: &[u8]) -> Result<Option<Record>, StoreError>;
    /// Records with `from <= seqno <= to`, in seqno order, each key at its latest seqno only.
    fn scan_seqnos(&self, vb: VbId, from: Seqno, to: Seqno, f: &mut dyn FnMut(Record)) -> Result<(), StoreError> {
        self.scan_seqnos_while(vb, from, to, &mut |r| {
            f(r);
            true
        })
    }
    /// As [`VbStore::scan_seqnos`], stopping as soon as `f` returns false, so a reader can take a bounded piece of a
    /// long range (a DCP backfill) without the store reading the rest.
    fn scan_seqnos_while(
        &self,
        vb: VbId,
        from: Seqno,
        to: Seqno,
        f: &mut dyn FnMut(Record) -> bool,
    ) -> Result<(), StoreError>;
    /// Every key of the vBucket once, at its latest version (tombstones included), for warmup; stops early when
    /// `f` returns false. With values: full records in ascending seqno order. Without values (value-eviction
    /// warmup loads keys and metadata first): ascending key order, `value` empty and `crc32c` the stored checksum
    /// of the full record (so `is_intact()` holds only for empty values); the metadata was verified by its own
    /// checksum on the way out.
    fn scan_keys(&self, vb: VbId, with_values: bool, f: &mut dyn FnMut(Record) -> bool) -> Result<(), StoreError>;
    /// The highest seqno ever written to the vBucket (0 when empty); purging tombstones never lowers it.
    fn high_seqno(&self, vb: VbId) -> Result<Seqno, StoreError>;
    /// Stores the vBucket state on its own (durable at the next sync).
    fn set_vb_state(&self, vb: VbId, state: &VbStateRecord) -> Result<(), StoreError> {
        self.write_batch_with_state(vb, &[], Some(state))
    }
    /// The last stored vBucket state, if any.
    fn vb_state(&self, vb: VbId) -> Result<Option<VbStateRecord>, StoreError>;
    /// Removes tombstones whose deletion time (`meta.expiry`) is before `deleted_before_secs` from both indexes;
    /// returns how many were removed. Live documents and newer tombstones stay.
    fn purge_tombstones(&self, vb: VbId, deleted_before_secs: u32) -> Result<u64, StoreError>;
    /// Removes every record and the state of a vBucket (a replica that must start over); returns how many records
    /// went. Durable at the next [`VbStore::sync`].
    fn clear_vbucket(&self, vb: VbId) -> Result<u64, StoreError>;
    /// Removes every record of the vBucket above `to` (a replica rolled back to it), then lowers its high seqno
    /// to `to` and its state's too (dropping failover entries above `to`); returns how many records went. Durable
    /// at the next [`VbStore::sync`]. The records go first: a crash in between leaves the old state, whose
    /// history still diverges from the active's, so the replica is told to roll back again.
    fn rollback_vbucket(&self, vb: VbId, to: Seqno) -> Result<u64, StoreError>;
    /// Reclaims the space held by superseded versions, purged tombstones and dead values, blocking until done.
    fn compact(&self) -> Result<(), StoreError>;
    /// Bytes the store occupies on disk now (0 for memory).
    fn disk_bytes(&self) -> u64;
}

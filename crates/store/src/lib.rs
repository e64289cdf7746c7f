//! Storage for vBuckets behind one trait, [`VbStore`], so the engine can persist through fjall (persistence issue)
//! or keep everything in memory, and every implementation is held to the same [`conformance`] suite.
//!
//! Every record carries a CRC32C of its contents, checked on every read: a mismatch is an error, never a value.
//! The on-disk implementation arrives with the persistence issue; today only [`MemoryStore`] exists.
//! Must not depend on the engine or the server.

pub mod conformance;
mod memory;
mod record;

pub use memory::MemoryStore;
pub use record::{Record, RecordMeta};

use settee_types::{Seqno, VbId};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    /// A record's checksum does not match its contents; the vBucket must be taken out of service.
    #[error("checksum mismatch in vBucket {vb:?} at seqno {seqno}")]
    Corrupt { vb: VbId, seqno: Seqno },
    /// An earlier write or sync failed; nothing more is accepted until restart.
    #[error("store is poisoned after a failed write or sync")]
    Poisoned,
    #[error("i/o error: {0}")]
    Io(String),
}

/// Per-vBucket storage: a by-key index and a by-seqno index over the same records.
pub trait VbStore: Send + Sync {
    /// Writes a batch atomically with respect to readers; later records for a key replace earlier ones.
    fn write_batch(&self, vb: VbId, batch: &[Record]) -> Result<(), StoreError>;
    /// Makes every written batch durable.
    fn sync(&self) -> Result<(), StoreError>;
    /// The latest record of a key (tombstones included).
    fn get(&self, vb: VbId, key: &[u8]) -> Result<Option<Record>, StoreError>;
    /// Records with `from <= seqno <= to`, in seqno order, each key at its latest seqno only.
    fn scan_seqnos(&self, vb: VbId, from: Seqno, to: Seqno, f: &mut dyn FnMut(Record)) -> Result<(), StoreError>;
    /// The highest seqno written to the vBucket (0 when empty).
    fn high_seqno(&self, vb: VbId) -> Result<Seqno, StoreError>;
}

//! The KV operations, one file per family. Every operation validates, then takes exactly one vBucket lock.

mod arithmetic;
mod read;
mod subdoc;
mod with_meta;
mod write;

use settee_types::{Cas, Datatype, DurabilityLevel, Seqno, VbId, VbUuid};

use crate::expiry::is_expired;
use crate::item::StoredItem;
use crate::table::Item;
use crate::vbucket::VbInner;

pub use arithmetic::{ArithmeticOp, ArithmeticRequest, ArithmeticResult};
pub use read::GetMeta;
pub use subdoc::{DocFlags, LookupResult, MutateInOptions, SubdocMutationResult};
pub use with_meta::{MetaWrite, MetaWriteKind};
pub use write::{StoreMode, StoreRequest};

/// Options every mutation carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// 0 = no CAS check.
    pub cas: Cas,
    pub durability: Option<DurabilityLevel>,
    /// Keep the document's current expiry instead of the one in the request.
    pub preserve_ttl: bool,
}

/// What a successful mutation reports: the new CAS and the mutation token.
///
/// For a durable write these are the prepare's: the committed document keeps the prepare's CAS, and the mutation
/// token carries the prepare's seqno, as Couchbase's replies do (the commit takes a later seqno).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MutationResult {
    pub vb: VbId,
    pub cas: Cas,
    pub seqno: Seqno,
    pub vbuuid: VbUuid,
    /// A durable write still pending (a prepare at `seqno`): it must not be acknowledged before
    /// [`crate::Bucket::when_sync_write_completes`] says so. False for a durable write that was complete at once
    /// (majority with no replicas configured).
    pub sync_write: bool,
}

impl crate::Bucket {
    /// Expiry on access: an expired item becomes a tombstone before any operation looks at it.
    pub(crate) fn expire_lazily(&self, inner: &mut VbInner, key: &crate::DocKey<'_>, now_nanos: u64, now_secs: u32) {
        let delta = expire_in_place(inner, key.encoded(), now_nanos, now_secs);
        self.charge(delta);
    }
}

/// If the item under `key` is live but expired, replaces it with a tombstone (a new seqno, as Couchbase records an
/// expiration) and returns the change in charged bytes.
pub(crate) fn expire_in_place(inner: &mut VbInner, key: &[u8], now_nanos: u64, now_secs: u32) -> isize {
    let Some(item) = inner.table.get(key) else { return 0 };
    if item.deleted() || !is_expired(item.expiry(), now_secs) {
        return 0;
    }
    let tomb = tombstone_of(item, now_secs);
    let mut tomb = tomb;
    tomb.cas = inner.next_cas(now_nanos);
    inner.install(key, tomb)
}

/// The tombstone a live item leaves: system xattrs survive deletion, the body and user xattrs do not.
pub(crate) fn tombstone_of(item: &Item, now_secs: u32) -> StoredItem<'static> {
    let (value, has_xattr) = if item.datatype().has_xattr() {
        match settee_doc::split_value(item.value(), true) {
            Ok((mut x, _)) => {
                x.retain_system();
                settee_doc::join_value(&x, &[])
            }
            Err(_) => (Vec::new(), false),
        }
    } else {
        (Vec::new(), false)
    };
    StoredItem {
        value: value.into(),
        cas: item.cas(),
        seqno: item.seqno(),
        rev: item.rev() + 1,
        flags: item.flags(),
        expiry: now_secs,
        datatype: if has_xattr { Datatype::XATTR } else { Datatype::RAW },
        deleted: true,
        locked_until: 0,
        resident: true,
        referenced: true,
    }
}

/// Checks lock and CAS for a mutation of an existing live item.
pub(crate) fn check_cas_and_lock(item: &Item, cas: Cas, now_secs: u32) -> Result<(), crate::EngineError> {
    if item.is_locked(now_secs) && cas != item.cas() {
        return Err(crate::EngineError::Locked);
    }
    if cas != 0 && cas != item.cas() {
        return Err(crate::EngineError::CasMismatch);
    }
    Ok(())
}

#[cfg(test)]
mod tests;

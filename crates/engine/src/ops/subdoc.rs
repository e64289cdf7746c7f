//! SUBDOC_MULTI_LOOKUP and SUBDOC_MULTI_MUTATION (and the single-path opcodes, which the server turns into one-spec
//! requests). The JSON work is the doc crate's; this file owns existence, CAS, locks, document flags and commit.

use settee_doc::{DocMeta, LookupSpec, MutationContext, MutationSpec, SpecResult};
use settee_types::{limits, Datatype, Status, VbId, LOCKED_CAS};

use super::{check_cas_and_lock, MutationResult, WriteOptions};
use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::expiry::{absolute_expiry, cap_expiry};
use crate::item::{DocKey, StoredItem};
use crate::stats::BucketStats;
use crate::table::Item;
use crate::vbucket::VbInner;
use crate::VbState;

/// Sub-document document flags (the last extras byte).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DocFlags(pub u8);

impl DocFlags {
    pub const MKDOC: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const ACCESS_DELETED: u8 = 0x04;
    pub const CREATE_AS_DELETED: u8 = 0x08;
    pub const REVIVE: u8 = 0x10;
    pub const REPLICA_READ: u8 = 0x20;
    const KNOWN: u8 = 0x3f;

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupResult {
    pub cas: u64,
    /// The lookup ran against a tombstone (status SUBDOC_SUCCESS_DELETED / MULTI_PATH_FAILURE_DELETED).
    pub deleted: bool,
    pub results: Vec<SpecResult>,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct MutateInOptions {
    pub doc_flags: DocFlags,
    /// Protocol expiry.
    pub expiry: u32,
    /// New user flags, if the request carried them.
    pub user_flags: Option<u32>,
    pub write: WriteOptions,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubdocMutationResult {
    pub mutation: MutationResult,
    /// (spec index, value) for specs that return a value, e.g. counters.
    pub results: Vec<(u8, Vec<u8>)>,
    /// The document is a tombstone after the mutation.
    pub deleted: bool,
}

fn meta_of(item: &Item, uuid: u64) -> DocMeta {
    let (body, _) = crate::ItemView::of(item, item.cas()).body();
    DocMeta {
        cas: item.cas(),
        seqno: item.seqno(),
        vbuuid: uuid,
        revid: item.rev(),
        exptime: if item.deleted() { 0 } else { item.expiry() },
        flags: item.flags(),
        deleted: item.deleted(),
        datatype: item.datatype().0,
        value_bytes: body.len() as u32,
        crc32c: crc32c::crc32c(body),
    }
}

impl Bucket {
    pub fn lookup_in(
        &self,
        vb: VbId,
        key: &DocKey<'_>,
        specs: &[LookupSpec<'_>],
        flags: DocFlags,
    ) -> Result<LookupResult, EngineError> {
        if flags.0 & !DocFlags::KNOWN != 0 || flags.has(DocFlags::MKDOC | DocFlags::ADD) {
            return Err(EngineError::Invalid("lookup doc flags"));
        }
        self.collection_ttl(key.cid())?;
        BucketStats::bump(&self.stats.cmd_lookup);
        let (now_ns, now) = self.now();
        if flags.has(DocFlags::REPLICA_READ) {
            return self.lookup_in_replica(vb, key, specs, flags, now);
        }
        self.with_active(vb, |inner| {
            self.prepare_key(inner, key, now_ns, now, true)?;
            let item = inner.table.get(key.encoded()).ok_or(EngineError::NotFound)?;
            if item.deleted() && !flags.has(DocFlags::ACCESS_DELETED) {
                return Err(EngineError::NotFound);
            }
            let meta = meta_of(item, inner.uuid());
            let results = settee_doc::lookup(item.value(), item.datatype().has_xattr(), &meta, specs, now)
                .map_err(EngineError::Subdoc)?;
            let cas = if item.is_locked(now) { LOCKED_CAS } else { item.cas() };
            Ok(LookupResult { cas, deleted: item.deleted(), results })
        })
    }

    /// A lookup with the replica-read flag: served by a replica vBucket only (NOT_MY_VBUCKET anywhere else), as
    /// GET_REPLICA is; an expired document reads as absent without being expired here (the active does that).
    fn lookup_in_replica(
        &self,
        vb: VbId,
        key: &DocKey<'_>,
        specs: &[LookupSpec<'_>],
        flags: DocFlags,
        now: u32,
    ) -> Result<LookupResult, EngineError> {
        self.with_vbucket(vb, &[VbState::Replica], |inner| {
            let item = match inner.table.get(key.encoded()) {
                Some(item) if !item.resident() => return Err(EngineError::NeedFetch),
                Some(item) => item,
                None if inner.ejected_items > 0 => return Err(EngineError::NeedFetch),
                None => return Err(EngineError::NotFound),
            };
            let gone = item.deleted() && !flags.has(DocFlags::ACCESS_DELETED);
            if gone || (!item.deleted() && crate::expiry::is_expired(item.expiry(), now)) {
                return Err(EngineError::NotFound);
            }
            let meta = meta_of(item, inner.uuid());
            let results = settee_doc::lookup(item.value(), item.datatype().has_xattr(), &meta, specs, now)
                .map_err(EngineError::Subdoc)?;
            Ok(LookupResult { cas: item.cas(), deleted: item.deleted(), results })
        })
    }

    pub fn mutate_in(
        &self,
        vb: VbId,
        key: &DocKey<'_>,
        specs: &[MutationSpec<'_>],
        opts: MutateInOptions,
    ) -> Result<SubdocMutationResult, EngineError> {
        let f = opts.doc_flags;
        let bad_combo = f.0 & !DocFlags::KNOWN != 0
            || f.has(DocFlags::REPLICA_READ)
            || (f.has(DocFlags::MKDOC) && f.has(DocFlags::ADD))
            || (f.has(DocFlags::ADD) && opts.write.cas != 0)
            || (f.has(DocFlags::CREATE_AS_DELETED)
                && (!f.has(DocFlags::ACCESS_DELETED) || !(f.has(DocFlags::MKDOC) || f.has(DocFlags::ADD))))
            || (f.has(DocFlags::REVIVE) && !f.has(DocFlags::ACCESS_DELETED));
        if bad_combo {
            return Err(EngineError::Invalid("mutation doc flags"));
        }
        let ttl_cap = self.collection_ttl(key.cid())?;
        let level = self.check_durability(opts.write.durability)?;
        BucketStats::bump(&self.stats.cmd_mutation);
        let (now_ns, now) = self.now();
        self.with_active_write(vb, level, |inner| {
            self.prepare_key(inner, key, now_ns, now, true)?;
            Self::check_sync_write(inner, key)?;
            self.mutate_locked(inner, key, specs, opts, (ttl_cap, level), now_ns, now)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn mutate_locked(
        &self,
        inner: &mut VbInner,
        key: &DocKey<'_>,
        specs: &[MutationSpec<'_>],
        opts: MutateInOptions,
        (ttl_cap, level): (Option<u32>, Option<settee_types::DurabilityLevel>),
        now_ns: u64,
        now: u32,
    ) -> Result<SubdocMutationResult, EngineError> {
        let f = opts.doc_flags;
        let creating = f.has(DocFlags::MKDOC) || f.has(DocFlags::ADD);
        // Taken before the item is borrowed; a failed mutation just leaves an unused CAS value.
        let cas = inner.next_cas(now_ns);
        let found = inner.table.get(key.encoded());
        // `base` is the document the specs apply to; None means "create a new one".
        let base: Option<&Item> = match found {
            Some(item) if !item.deleted() => {
                if f.has(DocFlags::ADD) {
                    return Err(EngineError::Exists);
                }
                if f.has(DocFlags::REVIVE) {
                    return Err(EngineError::Subdoc(Status::SubdocCanOnlyReviveDeletedDocuments));
                }
                check_cas_and_lock(item, opts.write.cas, now)?;
                Some(item)
            }
            Some(tomb) if f.has(DocFlags::ACCESS_DELETED) => {
                // Insert semantics see a tombstone as an existing document when deleted documents are visible,
                // which is how transactions detect a concurrent staged insert.
                if f.has(DocFlags::ADD) {
                    return Err(EngineError::Exists);
                }
                if opts.write.cas != 0 && opts.write.cas != tomb.cas() {
                    return Err(EngineError::CasMismatch);
                }
                Some(tomb)
            }
            _ if creating && opts.write.cas == 0 => None,
            _ => return Err(EngineError::NotFound),
        };
        let was_deleted = base.is_some_and(|b| b.deleted());
        let meta = match base {
            Some(item) => meta_of(item, inner.uuid()),
            None => DocMeta { vbuuid: inner.uuid(), datatype: Datatype::JSON.0, ..DocMeta::default() },
        };
        let ctx = MutationContext { new_cas: cas, new_seqno: inner.next_seqno(), now_secs: now, doc_flags: f.0 };
        let existing = base.map(|b| (b.value(), b.datatype().has_xattr()));
        let outcome = settee_doc::mutate(existing, &meta, specs, &ctx).map_err(|e| match e.index {
            Some(index) => EngineError::SubdocSpec { index, status: e.status },
            None => EngineError::Subdoc(e.status),
        })?;
        if outcome.value.len() > limits::VALUE_BYTES_MAX {
            return Err(EngineError::TooBig);
        }
        let deleted = outcome.delete_document
            || (base.is_none() && f.has(DocFlags::CREATE_AS_DELETED))
            || (was_deleted && !f.has(DocFlags::REVIVE));
        let (_, body) = settee_doc::split_value(&outcome.value, outcome.has_xattr)
            .map_err(|_| EngineError::Subdoc(Status::XattrEinval))?;
        if deleted && !body.is_empty() && !outcome.delete_document {
            return Err(EngineError::Subdoc(Status::SubdocDeletedDocumentCantHaveValue));
        }
        let old_bytes = found.map_or(0, |o| o.footprint());
        self.check_quota((outcome.value.len() + key.encoded().len()).saturating_sub(old_bytes))?;
        let expiry = match base {
            _ if deleted => now,
            Some(b) if opts.write.preserve_ttl && !b.deleted() => b.expiry(),
            _ => cap_expiry(absolute_expiry(opts.expiry, now), ttl_cap, now),
        };
        let datatype = Datatype::of(outcome.is_json, outcome.has_xattr);
        let item = StoredItem {
            value: outcome.value.into(),
            cas,
            seqno: 0,
            rev: found.map_or(1, |o| o.rev() + 1),
            flags: opts.user_flags.unwrap_or(base.map_or(0, |b| b.flags())),
            expiry,
            datatype,
            deleted,
            locked_until: 0,
            resident: true,
            referenced: true,
        };
        Ok(SubdocMutationResult {
            mutation: self.apply_mutation(inner, key, item, level),
            results: outcome.results,
            deleted,
        })
    }
}

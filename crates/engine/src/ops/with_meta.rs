//! SET_WITH_META, ADD_WITH_META and DEL_WITH_META: writes that install a version of a document with the metadata
//! the caller gives (CAS, revision seqno, flags, expiry, xattrs) instead of making new metadata, after conflict
//! resolution against the version the vBucket holds ([`crate::conflict`]). Restores and XDCR write with them, so a
//! restored or replicated document keeps its CAS and revision. The seqno is always the vBucket's next one.

use settee_types::{Cas, Datatype, VbId};

use super::MutationResult;
use crate::bucket::Bucket;
use crate::conflict::{incoming_wins, ConflictMode, VersionMeta};
use crate::error::EngineError;
use crate::item::{is_json, DocKey, StoredItem};
use crate::stats::BucketStats;

/// Which with-meta write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaWriteKind {
    /// SET_WITH_META: create or replace.
    Set,
    /// ADD_WITH_META: fails with `Exists` when a live document exists (a tombstone is resolved as for Set).
    Add,
    /// DEL_WITH_META: install a tombstone (created even when the key is unknown, so the deletion is recorded).
    Delete,
}

/// A with-meta write as the protocol carries it.
#[derive(Clone, Copy, Debug)]
pub struct MetaWrite<'a> {
    pub kind: MetaWriteKind,
    /// The whole value, decompressed: an xattr section first when `datatype` has XATTR. For a deletion only an
    /// xattr section (or nothing).
    pub value: &'a [u8],
    /// The request's datatype bits (Snappy already removed).
    pub datatype: Datatype,
    pub cas: Cas,
    pub rev: u64,
    pub flags: u32,
    /// Absolute expiry (0 = never); for a deletion its delete time (0 = now).
    pub expiry: u32,
    /// Compare with the header CAS of the request (0 = no check).
    pub expect_cas: Cas,
    pub mode: ConflictMode,
    /// SKIP_CONFLICT_RESOLUTION: the write wins whatever the vBucket holds (restore `--force-updates`).
    pub skip_conflict_resolution: bool,
    /// REGENERATE_CAS: the document gets a new CAS from the vBucket's clock instead of `cas`.
    pub regenerate_cas: bool,
}

impl Bucket {
    /// Installs `w` under `key` if it wins conflict resolution (else `Exists`, as kv_engine's KEY_EEXISTS). The
    /// vBucket's CAS clock moves past the installed CAS, so later local writes still get higher CAS values.
    pub fn write_with_meta(&self, vb: VbId, key: &DocKey<'_>, w: MetaWrite<'_>) -> Result<MutationResult, EngineError> {
        if w.value.len() > settee_types::limits::VALUE_BYTES_MAX {
            return Err(EngineError::TooBig);
        }
        if w.regenerate_cas && !w.skip_conflict_resolution {
            return Err(EngineError::Invalid("REGENERATE_CAS needs SKIP_CONFLICT_RESOLUTION"));
        }
        let has_xattr = w.datatype.has_xattr();
        let body = match settee_doc::split_value(w.value, has_xattr) {
            Ok((_, body)) => body,
            Err(_) => return Err(EngineError::Invalid("malformed xattr section")),
        };
        if w.kind == MetaWriteKind::Delete && !body.is_empty() {
            return Err(EngineError::Invalid("a deletion carries only xattrs"));
        }
        self.collection_ttl(key.cid())?;
        BucketStats::bump(&self.stats.cmd_set);
        let (now_ns, now) = self.now();
        let json = w.kind != MetaWriteKind::Delete && is_json(body);
        self.with_active_write(vb, None, |inner| {
            self.prepare_key(inner, key, now_ns, now, false)?;
            Self::check_sync_write(inner, key)?;
            let found = inner.table.get(key.encoded());
            if let Some(old) = found {
                if w.kind == MetaWriteKind::Add && !old.deleted() {
                    return Err(EngineError::Exists);
                }
                if w.expect_cas != 0 && w.expect_cas != old.cas() {
                    return Err(EngineError::CasMismatch);
                }
                if !old.deleted() && old.is_locked(now) {
                    return Err(EngineError::Locked);
                }
                let local = VersionMeta {
                    rev: old.rev(),
                    cas: old.cas(),
                    expiry: old.expiry(),
                    flags: old.flags(),
                    xattr: old.datatype().has_xattr(),
                };
                let incoming =
                    VersionMeta { rev: w.rev, cas: w.cas, expiry: w.expiry, flags: w.flags, xattr: has_xattr };
                let deletion = w.kind == MetaWriteKind::Delete;
                if !w.skip_conflict_resolution && !incoming_wins(w.mode, &local, &incoming, deletion) {
                    return Err(EngineError::Exists);
                }
            } else if w.expect_cas != 0 {
                return Err(EngineError::NotFound);
            }
            let old_bytes = found.map_or(0, |o| o.footprint());
            self.check_quota((w.value.len() + key.encoded().len()).saturating_sub(old_bytes))?;
            let cas = if w.regenerate_cas { inner.next_cas(now_ns) } else { w.cas };
            inner.hlc.observe(cas);
            let deleted = w.kind == MetaWriteKind::Delete;
            let item = StoredItem {
                value: w.value.into(),
                cas,
                seqno: 0,
                rev: w.rev,
                flags: w.flags,
                expiry: if deleted && w.expiry == 0 { now } else { w.expiry },
                datatype: Datatype::of(json, has_xattr),
                deleted,
                locked_until: 0,
                resident: true,
                referenced: true,
            };
            Ok(self.apply_mutation(inner, key, item, None))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use settee_types::{ManualClock, VbId};

    use super::*;
    use crate::{BucketConfig, BucketKind, EvictionPolicy, StoreMode, StoreRequest, WriteOptions};

    const NOW: u32 = 1_700_000_000;
    const VB: VbId = VbId(3);

    fn bucket() -> Bucket {
        let config = BucketConfig {
            name: "b".into(),
            uuid: "00112233445566778899aabbccddeeff".into(),
            kind: BucketKind::Ephemeral,
            ram_quota_bytes: 64 << 20,
            replicas: 0,
            eviction: EvictionPolicy::NoEviction,
            max_ttl: 0,
            flush_enabled: true,
            durability_min_level: None,
            conflict_resolution: Default::default(),
        };
        Bucket::new(config, Arc::new(ManualClock::new(NOW)))
    }

    fn write(kind: MetaWriteKind, value: &'static [u8], cas: Cas, rev: u64) -> MetaWrite<'static> {
        MetaWrite {
            kind,
            value,
            datatype: Datatype::RAW,
            cas,
            rev,
            flags: 7,
            expiry: NOW + 100,
            expect_cas: 0,
            mode: ConflictMode::RevisionSeqno,
            skip_conflict_resolution: false,
            regenerate_cas: false,
        }
    }

    /// Proves a SET_WITH_META installs the given CAS, revision, flags and expiry unchanged, and that the vBucket's
    /// clock then hands out a higher CAS to an ordinary write (CAS stays monotonic per vBucket).
    #[test]
    fn set_with_meta_keeps_the_given_metadata_when_the_key_is_new() {
        let b = bucket();
        let key = DocKey::new(0, b"k");
        let far_cas = u64::from(NOW + 1000) * 1_000_000_000;
        let m = b.write_with_meta(VB, &key, write(MetaWriteKind::Set, br#"{"a":1}"#, far_cas, 42)).unwrap();
        assert_eq!(m.cas, far_cas);
        let meta = b.get_meta(VB, &key).unwrap();
        assert_eq!((meta.cas, meta.rev, meta.flags, meta.expiry, meta.deleted), (far_cas, 42, 7, NOW + 100, false));
        assert!(meta.datatype.is_json());
        let next = b
            .store(
                VB,
                &DocKey::new(0, b"other"),
                StoreRequest { mode: StoreMode::Set, value: b"x", flags: 0, expiry: 0, opts: WriteOptions::default() },
            )
            .unwrap();
        assert!(next.cas > far_cas);
    }

    /// Proves conflict resolution guards an existing document: an older revision is refused with `Exists` and
    /// leaves the document unchanged; a newer one replaces it; SKIP_CONFLICT_RESOLUTION forces the older one in.
    #[test]
    fn set_with_meta_is_refused_when_the_local_version_wins() {
        let b = bucket();
        let key = DocKey::new(0, b"k");
        b.write_with_meta(VB, &key, write(MetaWriteKind::Set, b"v5", 500, 5)).unwrap();
        let older = write(MetaWriteKind::Set, b"v4", 900, 4);
        assert_eq!(b.write_with_meta(VB, &key, older), Err(EngineError::Exists));
        assert_eq!(b.get_meta(VB, &key).unwrap().rev, 5);
        b.write_with_meta(VB, &key, write(MetaWriteKind::Set, b"v6", 400, 6)).unwrap();
        assert_eq!(b.get_meta(VB, &key).unwrap().cas, 400);
        let forced = MetaWrite { skip_conflict_resolution: true, ..older };
        b.write_with_meta(VB, &key, forced).unwrap();
        let meta = b.get_meta(VB, &key).unwrap();
        assert_eq!((meta.rev, meta.cas), (4, 900));
    }

    /// Proves DEL_WITH_META records a tombstone with the given metadata even for an unknown key, that the
    /// document then reads as absent, and that ADD_WITH_META refuses a live key but resolves against a tombstone.
    #[test]
    fn del_with_meta_leaves_a_tombstone_and_add_with_meta_resolves_against_it() {
        let b = bucket();
        let key = DocKey::new(0, b"gone");
        b.write_with_meta(VB, &key, write(MetaWriteKind::Delete, b"", 300, 3)).unwrap();
        let meta = b.get_meta(VB, &key).unwrap();
        assert_eq!((meta.deleted, meta.rev, meta.cas), (true, 3, 300));
        assert_eq!(b.get(VB, &key, |_| ()), Err(EngineError::NotFound));
        assert_eq!(b.write_with_meta(VB, &key, write(MetaWriteKind::Add, b"old", 200, 2)), Err(EngineError::Exists));
        b.write_with_meta(VB, &key, write(MetaWriteKind::Add, b"new", 400, 4)).unwrap();
        assert_eq!(b.write_with_meta(VB, &key, write(MetaWriteKind::Add, b"x", 500, 9)), Err(EngineError::Exists));
        assert_eq!(b.get(VB, &key, |v| v.value.to_vec()).unwrap(), b"new");
    }

    /// Proves the request checks: a deletion with a body, REGENERATE_CAS without SKIP, and a header CAS that does
    /// not match are refused; REGENERATE_CAS with SKIP gives the document a fresh CAS.
    #[test]
    fn with_meta_rejects_invalid_combinations_when_options_conflict() {
        let b = bucket();
        let key = DocKey::new(0, b"k");
        let del = write(MetaWriteKind::Delete, b"body", 1, 1);
        assert!(matches!(b.write_with_meta(VB, &key, del), Err(EngineError::Invalid(_))));
        let regen = MetaWrite { regenerate_cas: true, ..write(MetaWriteKind::Set, b"v", 5, 1) };
        assert!(matches!(b.write_with_meta(VB, &key, regen), Err(EngineError::Invalid(_))));
        b.write_with_meta(VB, &key, write(MetaWriteKind::Set, b"v", 5, 1)).unwrap();
        let wrong_cas = MetaWrite { expect_cas: 6, ..write(MetaWriteKind::Set, b"v", 50, 2) };
        assert_eq!(b.write_with_meta(VB, &key, wrong_cas), Err(EngineError::CasMismatch));
        let regen = MetaWrite { regenerate_cas: true, skip_conflict_resolution: true, ..regen };
        let m = b.write_with_meta(VB, &key, regen).unwrap();
        assert!(m.cas > 5);
    }
}

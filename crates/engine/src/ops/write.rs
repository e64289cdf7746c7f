//! Hot path: SET, ADD, REPLACE, DELETE, APPEND, PREPEND.

use std::borrow::Cow;

use settee_types::{limits, Datatype, VbId};

use super::{check_cas_and_lock, tombstone_of, MutationResult, WriteOptions};
use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::expiry::{absolute_expiry, cap_expiry};
use crate::item::{is_json, DocKey, StoredItem};
use crate::stats::BucketStats;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    /// Upsert: create or replace (with a CAS: replace only if it matches).
    Set,
    /// Insert: fail if the document exists.
    Add,
    /// Replace: fail if the document does not exist.
    Replace,
}

#[derive(Clone, Copy, Debug)]
pub struct StoreRequest<'a> {
    pub mode: StoreMode,
    /// The body, already decompressed.
    pub value: &'a [u8],
    pub flags: u32,
    /// Protocol expiry (relative or absolute).
    pub expiry: u32,
    pub opts: WriteOptions,
}

impl Bucket {
    pub fn store(&self, vb: VbId, key: &DocKey<'_>, req: StoreRequest<'_>) -> Result<MutationResult, EngineError> {
        if req.value.len() > limits::VALUE_BYTES_MAX {
            return Err(EngineError::TooBig);
        }
        if req.mode == StoreMode::Add && req.opts.cas != 0 {
            return Err(EngineError::Invalid("ADD with a CAS"));
        }
        let ttl_cap = self.collection_ttl(key.cid())?;
        let level = self.check_durability(req.opts.durability)?;
        BucketStats::bump(&self.stats.cmd_set);
        let (now_ns, now) = self.now();
        let json = is_json(req.value);
        self.with_active_write(vb, level, |inner| {
            self.prepare_key(inner, key, now_ns, now, true)?;
            Self::check_sync_write(inner, key)?;
            let found = inner.table.get(key.encoded());
            let existing = found.filter(|i| !i.deleted());
            match (req.mode, existing) {
                (StoreMode::Add, Some(_)) => return Err(EngineError::Exists),
                (StoreMode::Replace, None) => return Err(EngineError::NotFound),
                (StoreMode::Set, None) if req.opts.cas != 0 => return Err(EngineError::NotFound),
                (_, Some(old)) => check_cas_and_lock(old, req.opts.cas, now)?,
                _ => {}
            }
            // A full-document write replaces the body and user xattrs; system xattrs survive, as in Couchbase.
            let (value, has_xattr): (Cow<'_, [u8]>, bool) = match existing {
                Some(old) if old.datatype().has_xattr() => {
                    let (value, has_xattr) = with_system_xattrs_of(old.value(), req.value);
                    (value.into(), has_xattr)
                }
                _ => (Cow::Borrowed(req.value), false),
            };
            let expiry = match existing {
                Some(old) if req.opts.preserve_ttl => old.expiry(),
                _ => cap_expiry(absolute_expiry(req.expiry, now), ttl_cap, now),
            };
            let rev = found.map_or(1, |old| old.rev() + 1);
            let old_bytes = existing.map_or(0, |o| o.footprint());
            self.check_quota((value.len() + key.encoded().len()).saturating_sub(old_bytes))?;
            let datatype = Datatype::of(json, has_xattr);
            let cas = inner.next_cas(now_ns);
            let item = StoredItem {
                value,
                cas,
                seqno: 0,
                rev,
                flags: req.flags,
                expiry,
                datatype,
                deleted: false,
                locked_until: 0,
                resident: true,
                referenced: true,
            };
            Ok(self.apply_mutation(inner, key, item, level))
        })
    }

    pub fn delete(&self, vb: VbId, key: &DocKey<'_>, opts: WriteOptions) -> Result<MutationResult, EngineError> {
        self.collection_ttl(key.cid())?;
        let level = self.check_durability(opts.durability)?;
        let (now_ns, now) = self.now();
        let r = self.with_active_write(vb, level, |inner| {
            self.prepare_key(inner, key, now_ns, now, true)?;
            Self::check_sync_write(inner, key)?;
            let old = inner.table.get(key.encoded()).filter(|i| !i.deleted()).ok_or(EngineError::NotFound)?;
            check_cas_and_lock(old, opts.cas, now)?;
            let mut tomb = tombstone_of(old, now);
            tomb.cas = inner.next_cas(now_ns);
            Ok(self.apply_mutation(inner, key, tomb, level))
        });
        BucketStats::bump(if r.is_ok() { &self.stats.delete_hits } else { &self.stats.delete_misses });
        r
    }

    /// APPEND (`prepend` false) and PREPEND: extend the body of an existing document; xattrs, flags and expiry stay.
    pub fn concat(
        &self,
        vb: VbId,
        key: &DocKey<'_>,
        data: &[u8],
        prepend: bool,
        opts: WriteOptions,
    ) -> Result<MutationResult, EngineError> {
        self.collection_ttl(key.cid())?;
        let level = self.check_durability(opts.durability)?;
        let (now_ns, now) = self.now();
        self.with_active_write(vb, level, |inner| {
            self.prepare_key(inner, key, now_ns, now, true)?;
            Self::check_sync_write(inner, key)?;
            let old = inner.table.get(key.encoded()).filter(|i| !i.deleted()).ok_or(EngineError::NotStored)?;
            check_cas_and_lock(old, opts.cas, now)?;
            let (xattrs, body) = settee_doc::split_value(old.value(), old.datatype().has_xattr())
                .map_err(|_| EngineError::Invalid("stored xattrs are corrupt"))?;
            if body.len() + data.len() > limits::VALUE_BYTES_MAX {
                return Err(EngineError::TooBig);
            }
            let mut new_body = Vec::with_capacity(body.len() + data.len());
            if prepend {
                new_body.extend_from_slice(data);
                new_body.extend_from_slice(body);
            } else {
                new_body.extend_from_slice(body);
                new_body.extend_from_slice(data);
            }
            self.check_quota(data.len())?;
            let json = is_json(&new_body);
            let (value, has_xattr) = settee_doc::join_value(&xattrs, &new_body);
            let datatype = Datatype::of(json, has_xattr);
            let mut next = old.to_stored().with_value(value.into());
            next.datatype = datatype;
            next.rev += 1;
            next.locked_until = 0;
            next.cas = inner.next_cas(now_ns);
            Ok(self.apply_mutation(inner, key, next, level))
        })
    }
}

/// The system xattrs of `old` (a value with an xattr section) in front of a new body.
fn with_system_xattrs_of(old: &[u8], body: &[u8]) -> (Vec<u8>, bool) {
    match settee_doc::split_value(old, true) {
        Ok((mut x, _)) => {
            x.retain_system();
            settee_doc::join_value(&x, body)
        }
        Err(_) => (body.to_vec(), false),
    }
}

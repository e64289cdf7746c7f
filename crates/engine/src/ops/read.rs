//! Hot path: GET, GET_META, GET_LOCKED, UNLOCK, TOUCH/GAT, GET_RANDOM_KEY.

use settee_types::{limits, CollectionId, Datatype, VbId, LOCKED_CAS};

use super::MutationResult;
use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::eviction::{absent, access, Access};
use crate::expiry::{absolute_expiry, cap_expiry};
use crate::item::{DocKey, ItemView};
use crate::stats::BucketStats;

/// GET_META's answer (format v2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetMeta {
    pub deleted: bool,
    pub flags: u32,
    pub expiry: u32,
    /// The revision seqno, as kv_engine reports it.
    pub rev: u64,
    pub datatype: Datatype,
    pub cas: u64,
}

impl Bucket {
    /// Reads a live document; `f` sees it under the vBucket lock (so the caller can encode without copying).
    /// A locked document reads with CAS `LOCKED_CAS`.
    pub fn get<R>(&self, vb: VbId, key: &DocKey<'_>, f: impl FnOnce(ItemView<'_>) -> R) -> Result<R, EngineError> {
        self.collection_ttl(key.cid())?;
        BucketStats::bump(&self.stats.cmd_get);
        let (now_ns, now) = self.now();
        let r = self.with_active(vb, |inner| {
            // One lookup: `prepare_key`'s rules applied to the item the reply is read from (only an expired item
            // pays a second lookup, to become a tombstone).
            match inner.table.get_mut(key.encoded()) {
                Some(item) => match access(item, true, now)? {
                    Access::Usable if item.deleted() => Err(EngineError::NotFound),
                    Access::Usable => {
                        let cas = if item.is_locked(now) { LOCKED_CAS } else { item.cas() };
                        Ok(f(ItemView::of(item, cas)))
                    }
                    Access::Expired => {
                        self.expire_lazily(inner, key, now_ns, now);
                        Err(EngineError::NotFound)
                    }
                },
                None => absent(inner, key).and(Err(EngineError::NotFound)),
            }
        });
        BucketStats::bump(if r.is_ok() { &self.stats.get_hits } else { &self.stats.get_misses });
        r
    }

    /// Metadata of a document or of its tombstone.
    pub fn get_meta(&self, vb: VbId, key: &DocKey) -> Result<GetMeta, EngineError> {
        self.collection_ttl(key.cid())?;
        let (now_ns, now) = self.now();
        self.with_active(vb, |inner| {
            self.prepare_key(inner, key, now_ns, now, false)?;
            let item = inner.table.get(key.encoded()).ok_or(EngineError::NotFound)?;
            Ok(GetMeta {
                deleted: item.deleted(),
                flags: item.flags(),
                expiry: item.expiry(),
                rev: item.rev(),
                datatype: item.datatype(),
                cas: item.cas(),
            })
        })
    }

    /// Locks a document for `lock_secs` (0 or more than the maximum means the default) and reads it; the returned
    /// CAS is the lock CAS, which a later mutation or UNLOCK must present.
    pub fn get_locked<R>(
        &self,
        vb: VbId,
        key: &DocKey<'_>,
        lock_secs: u32,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<R, EngineError> {
        self.collection_ttl(key.cid())?;
        let secs =
            if lock_secs == 0 || lock_secs > limits::LOCK_SECS_MAX { limits::LOCK_SECS_DEFAULT } else { lock_secs };
        let (now_ns, now) = self.now();
        self.with_active(vb, |inner| {
            self.prepare_key(inner, key, now_ns, now, true)?;
            let cas = inner.next_cas(now_ns);
            let item = inner.table.get_mut(key.encoded()).filter(|i| !i.deleted()).ok_or(EngineError::NotFound)?;
            if item.is_locked(now) {
                return Err(EngineError::Locked);
            }
            item.set_cas(cas);
            inner.table.set_locked_until(key.encoded(), now + secs);
            let item = inner.table.get(key.encoded()).ok_or(EngineError::NotFound)?;
            Ok(f(ItemView::of(item, cas)))
        })
    }

    pub fn unlock(&self, vb: VbId, key: &DocKey<'_>, cas: u64) -> Result<(), EngineError> {
        self.collection_ttl(key.cid())?;
        let now = self.clock.now_secs();
        self.with_active(vb, |inner| {
            let item = inner.table.get_mut(key.encoded()).filter(|i| !i.deleted()).ok_or(EngineError::NotFound)?;
            if !item.is_locked(now) {
                return Err(EngineError::NotLocked);
            }
            if item.cas() != cas {
                return Err(EngineError::Locked);
            }
            inner.table.set_locked_until(key.encoded(), 0);
            Ok(())
        })
    }

    /// TOUCH (when `f` is None) and GAT: sets a new expiry (0 clears it) as a mutation with a new CAS and seqno.
    pub fn touch<R>(
        &self,
        vb: VbId,
        key: &DocKey<'_>,
        expiry: u32,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<(MutationResult, R), EngineError> {
        let ttl_cap = self.collection_ttl(key.cid())?;
        let (now_ns, now) = self.now();
        let r = self.with_active(vb, |inner| {
            self.prepare_key(inner, key, now_ns, now, true)?;
            Self::check_sync_write(inner, key)?;
            let item = inner.table.get(key.encoded()).filter(|i| !i.deleted()).ok_or(EngineError::NotFound)?;
            if item.is_locked(now) {
                return Err(EngineError::Locked);
            }
            let mut next = item.to_stored().into_owned();
            next.expiry = cap_expiry(absolute_expiry(expiry, now), ttl_cap, now);
            next.cas = inner.next_cas(now_ns);
            next.rev += 1;
            let m = self.apply_mutation(inner, key, next, None);
            let item = inner.table.get(key.encoded()).ok_or(EngineError::NotFound)?;
            let out = f(ItemView::of(item, m.cas));
            Ok((m, out))
        });
        BucketStats::bump(if r.is_ok() { &self.stats.touch_hits } else { &self.stats.touch_misses });
        r
    }

    /// A random live document of collection `cid`, for GET_RANDOM_KEY. Starts at a vBucket chosen from the clock
    /// and walks on, so the cost is bounded by the number of vBuckets plus one table scan.
    pub fn random_key<R>(&self, cid: CollectionId, f: impl FnOnce(&[u8], ItemView<'_>) -> R) -> Result<R, EngineError> {
        self.collection_ttl(cid)?;
        let now = self.clock.now_secs();
        let n = usize::from(self.num_vbuckets());
        let start = (self.clock.now_nanos() >> 10) as usize % n;
        for i in 0..n {
            let Some(vb) = self.vbucket(VbId(((start + i) % n) as u16)) else { continue };
            let inner = vb.inner.lock();
            let found = inner.table.iter().find(|item| {
                !item.deleted()
                    && item.resident()
                    && !crate::expiry::is_expired(item.expiry(), now)
                    && settee_mcbp::decode_leb128(item.key()).is_some_and(|(c, _)| c == cid)
            });
            if let Some(item) = found {
                let cas = if item.is_locked(now) { LOCKED_CAS } else { item.cas() };
                return Ok(f(item.key(), ItemView::of(item, cas)));
            }
        }
        Err(EngineError::NotFound)
    }
}

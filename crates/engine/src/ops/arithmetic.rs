//! INCREMENT and DECREMENT on documents whose body is an ASCII decimal number.

use settee_types::{Datatype, VbId};

use super::{check_cas_and_lock, MutationResult, WriteOptions};
use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::expiry::{absolute_expiry, cap_expiry};
use crate::item::{DocKey, StoredItem};
use crate::stats::BucketStats;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithmeticOp {
    Increment,
    Decrement,
}

/// An INCREMENT or DECREMENT as the protocol carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArithmeticRequest {
    pub op: ArithmeticOp,
    pub delta: u64,
    /// The value a missing document is created with.
    pub initial: u64,
    /// Protocol expiry for a created document; 0xFFFFFFFF means "do not create".
    pub expiry: u32,
    pub opts: WriteOptions,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArithmeticResult {
    pub value: u64,
    pub mutation: MutationResult,
}

/// The expiry value that means "do not create the document if it is missing".
pub const NO_CREATE_EXPIRY: u32 = 0xFFFF_FFFF;

impl Bucket {
    /// Adds or subtracts `delta`. Increment wraps at 2^64, decrement stops at 0. A missing document is created
    /// with `initial` unless `expiry` is 0xFFFFFFFF.
    pub fn arithmetic(
        &self,
        vb: VbId,
        key: &DocKey<'_>,
        req: ArithmeticRequest,
    ) -> Result<ArithmeticResult, EngineError> {
        let ArithmeticRequest { op, delta, initial, expiry, opts } = req;
        let ttl_cap = self.collection_ttl(key.cid())?;
        let level = self.check_durability(opts.durability)?;
        let (now_ns, now) = self.now();
        let r = self.with_active_write(vb, level, |inner| {
            self.prepare_key(inner, key, now_ns, now, true)?;
            Self::check_sync_write(inner, key)?;
            let found = inner.table.get(key.encoded());
            let existing = found.filter(|i| !i.deleted());
            let (value, next) = match existing {
                None if expiry == NO_CREATE_EXPIRY || opts.cas != 0 => return Err(EngineError::NotFound),
                None => {
                    let rev = found.map_or(1, |old| old.rev() + 1);
                    let item = StoredItem {
                        value: Default::default(),
                        cas: 0,
                        seqno: 0,
                        rev,
                        flags: 0,
                        expiry: cap_expiry(absolute_expiry(expiry, now), ttl_cap, now),
                        datatype: Datatype::JSON,
                        deleted: false,
                        locked_until: 0,
                        resident: true,
                        referenced: true,
                    };
                    (initial, item)
                }
                Some(old) => {
                    check_cas_and_lock(old, opts.cas, now)?;
                    let (_, body) = settee_doc::split_value(old.value(), old.datatype().has_xattr())
                        .map_err(|_| EngineError::DeltaBadval)?;
                    let current = parse_counter(body).ok_or(EngineError::DeltaBadval)?;
                    let value = match op {
                        ArithmeticOp::Increment => current.wrapping_add(delta),
                        ArithmeticOp::Decrement => current.saturating_sub(delta),
                    };
                    let mut next = old.to_stored().with_value(Default::default());
                    next.rev += 1;
                    next.locked_until = 0;
                    (value, next)
                }
            };
            let mut next = next;
            let xattrs = match existing {
                Some(old) => settee_doc::split_value(old.value(), old.datatype().has_xattr())
                    .map(|(x, _)| x)
                    .unwrap_or_else(|_| settee_doc::Xattrs::new()),
                None => settee_doc::Xattrs::new(),
            };
            let digits = value.to_string();
            let (bytes, has_xattr) = settee_doc::join_value(&xattrs, digits.as_bytes());
            self.check_quota(bytes.len())?;
            next.value = bytes.into();
            next.datatype = Datatype::of(true, has_xattr);
            next.cas = inner.next_cas(now_ns);
            Ok(ArithmeticResult { value, mutation: self.apply_mutation(inner, key, next, level) })
        });
        let (hit, miss) = match op {
            ArithmeticOp::Increment => (&self.stats.incr_hits, &self.stats.incr_misses),
            ArithmeticOp::Decrement => (&self.stats.decr_hits, &self.stats.decr_misses),
        };
        BucketStats::bump(if r.is_ok() { hit } else { miss });
        r
    }
}

/// An unsigned decimal number, optionally surrounded by whitespace (a JSON number such as `100` qualifies).
fn parse_counter(body: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(body).ok()?.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::parse_counter;

    /// Counters accept decimal digits only.
    #[test]
    fn counter_parsing() {
        assert_eq!(parse_counter(b"100"), Some(100));
        assert_eq!(parse_counter(b" 7 "), Some(7));
        assert_eq!(parse_counter(b"-1"), None);
        assert_eq!(parse_counter(b"1.5"), None);
        assert_eq!(parse_counter(b"abc"), None);
        assert_eq!(parse_counter(b"99999999999999999999999"), None);
    }
}

//! A process-wide memory of PLAIN passwords that have already been verified, so that logging in again with the
//! same password skips the PBKDF2 derivation.
//!
//! One PLAIN check is PBKDF2-HMAC-SHA512 at 4096 iterations: about 5 ms of CPU in a release build. Every KV
//! connection that authenticates with PLAIN pays it, on the worker thread that also serves that worker's other
//! connections, and so does every REST or query request with Basic credentials (the REST layer probes this cache
//! first and derives on the blocking pool only on a miss). A thousand SDK clients reconnecting at once would cost
//! seconds of CPU; with this cache each distinct (verifier, password) pair pays once.
//!
//! What makes it safe:
//! - Only successes are remembered. A wrong password always pays the full derivation, which is what makes
//!   guessing expensive, and a hit (fast) only ever answers "correct", which the caller learns anyway.
//! - The key is an HMAC-SHA-256 under a random per-process secret over the verifier's salt, iteration count and
//!   stored hash and the candidate password. Nothing stored lets anyone recover a password more cheaply than by
//!   attacking the PBKDF2 verifier itself, and the digests mean nothing outside this process.
//! - Because the key covers the verifier, a password change (fresh salt, fresh verifier) never matches an old
//!   entry, so nothing has to be invalidated. A deleted user cannot log in through it either: callers only reach
//!   `PlainVerifier::verify` with a verifier they have just looked up, and an unknown user gets the decoy's.
//!
//! The secret comes from the OS RNG rather than a seeded `Rng`: it decides no behaviour (whether an entry hits
//! depends only on the verifier and the password), so the simulator's determinism does not depend on it.

use std::collections::HashSet;
use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use rand::RngCore;
use sha2::Sha256;

/// Most remembered verifications; when full the set is emptied and refills from the next logins. 4096 entries of
/// 32 bytes is about 200 KiB with the set's overhead, and far more (user, password) pairs than a node has in use:
/// past that, logins cost what they did without the cache.
pub(crate) const PLAIN_CACHE_ENTRIES_MAX: usize = 4096;

/// HMAC-SHA-256 digests of verified (verifier, password) pairs.
pub(crate) struct PlainCache {
    /// The HMAC key: random per process, so the digests cannot be precomputed or checked elsewhere.
    secret: [u8; 32],
    /// Held for one set probe or insert, never across the derivation, and no other lock is taken under it.
    verified: Mutex<HashSet<[u8; 32]>>,
    /// How many times `check` ran the derivation, so tests can tell a hit from a miss without timing.
    #[cfg(test)]
    derivations: std::sync::atomic::AtomicU64,
}

impl PlainCache {
    /// The cache every `PlainVerifier::verify` consults.
    pub(crate) fn global() -> &'static PlainCache {
        static CACHE: OnceLock<PlainCache> = OnceLock::new();
        CACHE.get_or_init(PlainCache::new)
    }

    /// An empty cache under a fresh secret from the operating system's CSPRNG.
    pub(crate) fn new() -> PlainCache {
        let mut secret = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut secret);
        PlainCache {
            secret,
            verified: Mutex::new(HashSet::new()),
            #[cfg(test)]
            derivations: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The key for checking `password` against the verifier made of `salt`, `iterations` and `hash`. Every
    /// variable-length field is length-prefixed, so two different inputs never feed the MAC the same bytes; in
    /// particular `pw\0` and `pw` get different keys even though PBKDF2 cannot tell them apart.
    pub(crate) fn key(&self, salt: &[u8], iterations: u32, hash: &[u8], password: &[u8]) -> [u8; 32] {
        // HMAC is defined for keys of every length, so this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret).expect("HMAC accepts keys of any length");
        for field in [salt, &iterations.to_be_bytes(), hash, password] {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field);
        }
        mac.finalize().into_bytes().into()
    }

    /// True when `key` was verified before.
    pub(crate) fn contains(&self, key: &[u8; 32]) -> bool {
        self.verified.lock().contains(key)
    }

    /// True when `key` was verified before; otherwise runs `verify` (the full derivation and comparison) and
    /// remembers the key only if it succeeded.
    pub(crate) fn check(&self, key: &[u8; 32], verify: impl FnOnce() -> bool) -> bool {
        if self.contains(key) {
            return true;
        }
        #[cfg(test)]
        self.derivations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The lock is not held here: a derivation takes milliseconds and other logins must not queue behind it.
        let verified = verify();
        if verified {
            let mut set = self.verified.lock();
            if set.len() >= PLAIN_CACHE_ENTRIES_MAX {
                set.clear();
            }
            set.insert(*key);
        }
        verified
    }

    #[cfg(test)]
    pub(crate) fn derivations(&self) -> u64 {
        self.derivations.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.verified.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_successes_are_remembered_and_the_bound_holds() {
        // Proves a failed check runs again next time, a successful one is answered from memory, and that
        // inserting past the bound empties the set instead of growing it.
        let cache = PlainCache::new();
        let key = cache.key(b"salt", 1, b"hash", b"pw");
        assert!(!cache.check(&key, || false));
        assert!(!cache.check(&key, || false));
        assert_eq!((cache.derivations(), cache.len()), (2, 0));
        assert!(cache.check(&key, || true));
        assert!(cache.check(&key, || panic!("a remembered key must not be derived again")));
        assert_eq!(cache.derivations(), 3);

        for i in 0..PLAIN_CACHE_ENTRIES_MAX as u32 * 2 {
            assert!(cache.check(&cache.key(b"salt", 1, b"hash", &i.to_be_bytes()), || true));
            assert!(cache.len() <= PLAIN_CACHE_ENTRIES_MAX);
        }
        assert!(cache.len() > 0);
    }

    #[test]
    fn keys_differ_for_every_field_and_between_processes() {
        // Proves each of salt, iterations, stored hash and password changes the key, that moving bytes from one
        // field to the next does too (length prefixes), and that another secret gives other keys.
        let cache = PlainCache::new();
        let base = cache.key(b"salt", 4096, b"hash", b"pw");
        let variants = [
            cache.key(b"salT", 4096, b"hash", b"pw"),
            cache.key(b"salt", 4097, b"hash", b"pw"),
            cache.key(b"salt", 4096, b"hasH", b"pw"),
            cache.key(b"salt", 4096, b"hash", b"pW"),
            cache.key(b"salt", 4096, b"hash", b"pw\0"),
            cache.key(b"salt", 4096, b"has", b"hpw"),
            PlainCache::new().key(b"salt", 4096, b"hash", b"pw"),
        ];
        for variant in variants {
            assert_ne!(variant, base);
        }
        assert_eq!(cache.key(b"salt", 4096, b"hash", b"pw"), base);
    }
}

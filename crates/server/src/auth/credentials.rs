//! What settee keeps instead of a password: per-hash SCRAM keys (RFC 5802 §3) and a salted PLAIN verifier.
//!
//! The password itself is used once, in `Credentials::from_password`, and dropped. Everything here can be
//! serialized (bytes as standard base64) so that the user store can be saved and reloaded.
//!
//! Checking a PLAIN password costs a PBKDF2 derivation (milliseconds of CPU); successful checks are remembered
//! as keyed digests in `PlainCache`, so repeated logins with the same password pay it once.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use rand::{CryptoRng, RngCore};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::plain_cache::PlainCache;
use super::ScramHash;

/// PBKDF2 iterations for new credentials; the value Couchbase and gocaves use.
pub const DEFAULT_ITERATIONS: u32 = 4096;
/// Length of every freshly generated salt.
pub const SALT_BYTES: usize = 16;
/// Bounds on values read back from disk: a corrupt or hostile file must not make one login run for minutes.
const ITERATIONS_MAX: u32 = 1_000_000;
const SALT_BYTES_MAX: usize = 256;

/// The server's half of SCRAM for one hash: enough to verify a ClientProof and to sign, never enough to log in.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramKeys {
    #[serde(with = "base64_bytes")]
    pub(crate) salt: Vec<u8>,
    pub(crate) iterations: u32,
    /// StoredKey = H(HMAC(SaltedPassword, "Client Key")).
    #[serde(with = "base64_bytes")]
    pub(crate) stored_key: Vec<u8>,
    /// ServerKey = HMAC(SaltedPassword, "Server Key").
    #[serde(with = "base64_bytes")]
    pub(crate) server_key: Vec<u8>,
}

impl ScramKeys {
    pub(crate) fn derive(hash: ScramHash, password: &[u8], salt: Vec<u8>, iterations: u32) -> ScramKeys {
        let salted = hash.salted_password(password, &salt, iterations);
        let client_key = hash.hmac(&salted, b"Client Key");
        ScramKeys {
            stored_key: hash.digest(&client_key),
            server_key: hash.hmac(&salted, b"Server Key"),
            salt,
            iterations,
        }
    }

    pub fn salt(&self) -> &[u8] {
        &self.salt
    }

    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    fn check(&self, hash: ScramHash) -> Result<(), String> {
        check_salt_and_iterations(&self.salt, self.iterations)?;
        if self.stored_key.len() != hash.output_bytes() || self.server_key.len() != hash.output_bytes() {
            return Err(format!("{hash:?} keys must be {} bytes", hash.output_bytes()));
        }
        Ok(())
    }
}

/// Verifies a PLAIN password: PBKDF2-HMAC-SHA512 of it under its own salt, compared in constant time.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlainVerifier {
    #[serde(with = "base64_bytes")]
    salt: Vec<u8>,
    iterations: u32,
    #[serde(with = "base64_bytes")]
    hash: Vec<u8>,
}

impl PlainVerifier {
    fn derive(password: &[u8], salt: Vec<u8>, iterations: u32) -> PlainVerifier {
        let hash = ScramHash::Sha512.salted_password(password, &salt, iterations);
        PlainVerifier { salt, iterations, hash }
    }

    /// True when `password` is the one this verifier was made from. A wrong password always costs one full
    /// PBKDF2 derivation, whose work does not depend on where the candidate differs; a right one is remembered in
    /// the process-wide `PlainCache`, so the same password against the same verifier is answered without the
    /// derivation next time (see `plain_cache` for why that is safe).
    ///
    /// HMAC pads its key with zero bytes, so PBKDF2 cannot tell `pw` from `pw\0`; a candidate containing NUL
    /// is therefore refused outright (PLAIN cannot carry one, and `UserStore` refuses such passwords). It is
    /// never remembered, and its cache key differs from the NUL-free password's, so it cannot hit either.
    pub fn verify(&self, password: &[u8]) -> bool {
        self.verify_with(password, PlainCache::global())
    }

    /// Whether `password` was verified against this verifier before (a cache probe, no derivation): callers that
    /// must move the derivation off their thread skip that when this is true.
    pub fn remembered(&self, password: &[u8]) -> bool {
        let cache = PlainCache::global();
        cache.contains(&cache.key(&self.salt, self.iterations, &self.hash, password))
    }

    /// As `verify`, remembering successes in `cache`; tests pass their own to observe hits.
    fn verify_with(&self, password: &[u8], cache: &PlainCache) -> bool {
        let key = cache.key(&self.salt, self.iterations, &self.hash, password);
        cache.check(&key, || {
            let candidate = ScramHash::Sha512.salted_password(password, &self.salt, self.iterations);
            let matches: bool = candidate.ct_eq(&self.hash).into();
            matches && !password.contains(&0)
        })
    }

    fn check(&self) -> Result<(), String> {
        check_salt_and_iterations(&self.salt, self.iterations)?;
        if self.hash.len() != ScramHash::Sha512.output_bytes() {
            return Err("plain hash must be 64 bytes".to_owned());
        }
        Ok(())
    }
}

/// One user's credentials for every mechanism settee offers.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "CredentialsUnchecked")]
pub struct Credentials {
    sha1: ScramKeys,
    sha256: ScramKeys,
    sha512: ScramKeys,
    plain: PlainVerifier,
}

impl Credentials {
    /// Derives fresh credentials with random salts from the operating system's CSPRNG.
    pub fn from_password(password: &str) -> Credentials {
        Credentials::from_password_with_rng(password, &mut rand::rngs::OsRng)
    }

    /// As `from_password`, with salts from `rng`; the simulator passes its seeded generator here.
    pub fn from_password_with_rng<R: RngCore + CryptoRng>(password: &str, rng: &mut R) -> Credentials {
        let mut salt = || {
            let mut bytes = vec![0u8; SALT_BYTES];
            rng.fill_bytes(&mut bytes);
            bytes
        };
        let password = password.as_bytes();
        Credentials {
            sha1: ScramKeys::derive(ScramHash::Sha1, password, salt(), DEFAULT_ITERATIONS),
            sha256: ScramKeys::derive(ScramHash::Sha256, password, salt(), DEFAULT_ITERATIONS),
            sha512: ScramKeys::derive(ScramHash::Sha512, password, salt(), DEFAULT_ITERATIONS),
            plain: PlainVerifier::derive(password, salt(), DEFAULT_ITERATIONS),
        }
    }

    /// Credentials with one given salt for every hash, so that tests can reproduce published SCRAM vectors.
    #[cfg(test)]
    pub(crate) fn from_password_with_salt(password: &str, salt: &[u8], iterations: u32) -> Credentials {
        let password = password.as_bytes();
        Credentials {
            sha1: ScramKeys::derive(ScramHash::Sha1, password, salt.to_vec(), iterations),
            sha256: ScramKeys::derive(ScramHash::Sha256, password, salt.to_vec(), iterations),
            sha512: ScramKeys::derive(ScramHash::Sha512, password, salt.to_vec(), iterations),
            plain: PlainVerifier::derive(password, salt.to_vec(), iterations),
        }
    }

    /// The SCRAM keys for one hash.
    pub fn scram(&self, hash: ScramHash) -> &ScramKeys {
        match hash {
            ScramHash::Sha1 => &self.sha1,
            ScramHash::Sha256 => &self.sha256,
            ScramHash::Sha512 => &self.sha512,
        }
    }

    /// Checks a password sent with SASL PLAIN or HTTP Basic; see `PlainVerifier::verify` for what it costs.
    pub fn verify_plain(&self, password: &[u8]) -> bool {
        self.plain.verify(password)
    }

    /// Whether [`Credentials::verify_plain`] would answer `password` from the cache (true: it is right).
    pub fn plain_remembered(&self, password: &[u8]) -> bool {
        self.plain.remembered(password)
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys are password-equivalent for impersonating the server; keep them out of logs.
        f.write_str("Credentials { .. }")
    }
}

/// The serialized form before its lengths and bounds are checked.
#[derive(Deserialize)]
struct CredentialsUnchecked {
    sha1: ScramKeys,
    sha256: ScramKeys,
    sha512: ScramKeys,
    plain: PlainVerifier,
}

impl TryFrom<CredentialsUnchecked> for Credentials {
    type Error = String;

    fn try_from(raw: CredentialsUnchecked) -> Result<Credentials, String> {
        raw.sha1.check(ScramHash::Sha1)?;
        raw.sha256.check(ScramHash::Sha256)?;
        raw.sha512.check(ScramHash::Sha512)?;
        raw.plain.check()?;
        Ok(Credentials { sha1: raw.sha1, sha256: raw.sha256, sha512: raw.sha512, plain: raw.plain })
    }
}

fn check_salt_and_iterations(salt: &[u8], iterations: u32) -> Result<(), String> {
    if salt.is_empty() || salt.len() > SALT_BYTES_MAX {
        return Err(format!("salt must be 1..={SALT_BYTES_MAX} bytes"));
    }
    if iterations == 0 || iterations > ITERATIONS_MAX {
        return Err(format!("iterations must be 1..={ITERATIONS_MAX}"));
    }
    Ok(())
}

/// Serde adapter: bytes as a standard base64 string.
mod base64_bytes {
    use super::{Engine, BASE64};
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&BASE64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        BASE64.decode(text).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_verifier_accepts_only_the_original_password() {
        // Proves PLAIN verification succeeds for the password the credentials came from and fails otherwise.
        let creds = Credentials::from_password("s3cret");
        assert!(creds.verify_plain(b"s3cret"));
        assert!(!creds.verify_plain(b"s3creT"));
        assert!(!creds.verify_plain(b""));
    }

    #[test]
    fn plain_verifier_rejects_trailing_nul_that_hmac_key_padding_would_accept() {
        // Regression: HMAC zero-pads keys, so PBKDF2("s3cret\0") equals PBKDF2("s3cret"); verify must still refuse.
        let creds = Credentials::from_password("s3cret");
        assert!(!creds.verify_plain(b"s3cret\0"));
        assert!(!creds.verify_plain(b"s3cret\0\0"));
    }

    /// Credentials with few iterations, so the cache tests below spend their time on what they check.
    fn quick(password: &str, salt: &[u8]) -> Credentials {
        Credentials::from_password_with_salt(password, salt, 16)
    }

    #[test]
    fn verified_password_is_answered_from_the_cache_without_deriving_again() {
        // Proves the second check of a right password succeeds without a PBKDF2 derivation (the cache counts them).
        let (cache, creds) = (PlainCache::new(), quick("s3cret", b"salt-a"));
        assert!(creds.plain.verify_with(b"s3cret", &cache));
        assert_eq!(cache.derivations(), 1);
        assert!(creds.plain.verify_with(b"s3cret", &cache));
        assert_eq!(cache.derivations(), 1);
    }

    #[test]
    fn wrong_password_is_never_cached_and_fails_every_time() {
        // Proves a wrong password pays the derivation on every attempt, also once the right one is cached, and
        // leaves nothing behind.
        let (cache, creds) = (PlainCache::new(), quick("s3cret", b"salt-a"));
        assert!(!creds.plain.verify_with(b"s3creT", &cache));
        assert!(!creds.plain.verify_with(b"s3creT", &cache));
        assert_eq!((cache.derivations(), cache.len()), (2, 0));
        assert!(creds.plain.verify_with(b"s3cret", &cache));
        assert!(!creds.plain.verify_with(b"s3creT", &cache));
        assert!(!creds.plain.verify_with(b"", &cache));
        assert_eq!((cache.derivations(), cache.len()), (5, 1));
    }

    #[test]
    fn password_change_refuses_the_cached_old_password_and_accepts_the_new_one() {
        // Proves entries are bound to the verifier: new credentials for the same user (fresh salt) do not match
        // the old password's entry, which is still in the cache, and the new password works at once.
        let cache = PlainCache::new();
        let old = quick("old-password", b"salt-old");
        assert!(old.plain.verify_with(b"old-password", &cache));
        let new = quick("new-password", b"salt-new");
        assert!(!new.plain.verify_with(b"old-password", &cache));
        assert!(new.plain.verify_with(b"new-password", &cache));
        assert!(new.plain.verify_with(b"new-password", &cache));
        assert_eq!(cache.derivations(), 3);
    }

    #[test]
    fn password_with_nul_fails_even_when_the_password_without_it_is_cached() {
        // Regression guard for the NUL rule: PBKDF2 equates `s3cret\0` with `s3cret`, so a cache keyed loosely, or
        // consulted before the rule, would let the padded form in once the real password had logged in.
        let (cache, creds) = (PlainCache::new(), quick("s3cret", b"salt-a"));
        assert!(creds.plain.verify_with(b"s3cret", &cache));
        for candidate in [&b"s3cret\0"[..], b"s3cret\0\0", b"\0s3cret"] {
            assert!(!creds.plain.verify_with(candidate, &cache), "{candidate:?}");
        }
        assert_eq!((cache.derivations(), cache.len()), (4, 1));
    }

    #[test]
    fn from_password_uses_distinct_random_salts() {
        // Proves each hash gets its own 16-byte salt and two users with one password share no keys.
        let a = Credentials::from_password("same");
        let b = Credentials::from_password("same");
        assert_eq!(a.scram(ScramHash::Sha1).salt().len(), SALT_BYTES);
        assert_ne!(a.scram(ScramHash::Sha1).salt(), a.scram(ScramHash::Sha256).salt());
        assert_ne!(a.scram(ScramHash::Sha512).stored_key, b.scram(ScramHash::Sha512).stored_key);
        for hash in ScramHash::ALL {
            assert_eq!(a.scram(hash).iterations(), DEFAULT_ITERATIONS);
            assert_eq!(a.scram(hash).stored_key.len(), hash.output_bytes());
        }
    }

    #[test]
    fn serde_round_trips_without_the_password() {
        // Proves credentials survive JSON and that neither the JSON nor Debug output contains the password.
        let creds = Credentials::from_password("hunter2-password");
        let json = serde_json::to_string(&creds).unwrap();
        assert!(!json.contains("hunter2"));
        assert!(!format!("{creds:?}").contains("hunter2"));
        let back: Credentials = serde_json::from_str(&json).unwrap();
        assert_eq!(back, creds);
        assert!(back.verify_plain(b"hunter2-password"));
    }

    #[test]
    fn deserialize_rejects_wrong_key_lengths_and_absurd_iterations() {
        // Proves a damaged file is refused at load time instead of failing every login or stalling it.
        let creds = Credentials::from_password("pw");
        let mut value = serde_json::to_value(&creds).unwrap();
        value["sha256"]["stored_key"] = serde_json::json!(BASE64.encode([0u8; 20]));
        assert!(serde_json::from_value::<Credentials>(value).is_err());

        let mut value = serde_json::to_value(&creds).unwrap();
        value["plain"]["iterations"] = serde_json::json!(u32::MAX);
        assert!(serde_json::from_value::<Credentials>(value).is_err());

        let mut value = serde_json::to_value(&creds).unwrap();
        value["sha1"]["salt"] = serde_json::json!("not base64!");
        assert!(serde_json::from_value::<Credentials>(value).is_err());
    }
}

//! SASL mechanism names as Couchbase spells them, and the hash primitives each SCRAM variant is built from.

use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

use super::AuthError;

/// The hash behind one SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramHash {
    Sha1,
    Sha256,
    Sha512,
}

/// A SASL mechanism settee accepts in SASL_AUTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Scram(ScramHash),
    Plain,
}

/// Every mechanism with its wire name, in the server's order of preference; defined once so that parsing,
/// printing and LIST_MECHS cannot disagree.
const MECHANISMS: [(Mechanism, &str); 4] = [
    (Mechanism::Scram(ScramHash::Sha512), "SCRAM-SHA512"),
    (Mechanism::Scram(ScramHash::Sha256), "SCRAM-SHA256"),
    (Mechanism::Scram(ScramHash::Sha1), "SCRAM-SHA1"),
    (Mechanism::Plain, "PLAIN"),
];

impl Mechanism {
    /// Every mechanism, strongest first (SASL_LIST_MECHS's order).
    pub const ALL: [Mechanism; 4] = [MECHANISMS[0].0, MECHANISMS[1].0, MECHANISMS[2].0, MECHANISMS[3].0];

    /// Parses the key of a SASL_AUTH or SASL_STEP request. Names are matched exactly: the clients send them in
    /// upper case and the RFC spellings (`SCRAM-SHA-256`) are not what Couchbase lists.
    pub fn parse(name: &[u8]) -> Result<Mechanism, AuthError> {
        MECHANISMS
            .iter()
            .find(|(_, wire)| wire.as_bytes() == name)
            .map(|(mech, _)| *mech)
            .ok_or(AuthError::UnknownMechanism)
    }

    /// The wire name, e.g. `SCRAM-SHA512`.
    pub fn name(self) -> &'static str {
        MECHANISMS
            .iter()
            .find(|(mech, _)| *mech == self)
            .map(|(_, wire)| *wire)
            .expect("every Mechanism value appears in MECHANISMS")
    }
}

impl ScramHash {
    pub const ALL: [ScramHash; 3] = [ScramHash::Sha1, ScramHash::Sha256, ScramHash::Sha512];

    /// Length in bytes of the digest, and so of StoredKey, ServerKey, ClientProof and ServerSignature.
    pub fn output_bytes(self) -> usize {
        match self {
            ScramHash::Sha1 => 20,
            ScramHash::Sha256 => 32,
            ScramHash::Sha512 => 64,
        }
    }

    /// H(data).
    pub(crate) fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha1 => Sha1::digest(data).to_vec(),
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// HMAC(key, data).
    pub(crate) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            // HMAC is defined for keys of every length (long keys are hashed first), so this cannot fail.
            let mut mac = <M as Mac>::new_from_slice(key).expect("HMAC accepts keys of any length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            ScramHash::Sha1 => run::<Hmac<Sha1>>(key, data),
            ScramHash::Sha256 => run::<Hmac<Sha256>>(key, data),
            ScramHash::Sha512 => run::<Hmac<Sha512>>(key, data),
        }
    }

    /// SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations), `output_bytes` long (RFC 5802 `Hi`).
    pub(crate) fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        #[cfg(test)]
        DERIVATIONS_ON_THIS_THREAD.with(|n| n.set(n.get() + 1));
        let mut out = vec![0u8; self.output_bytes()];
        match self {
            ScramHash::Sha1 => pbkdf2::pbkdf2_hmac::<Sha1>(password, salt, iterations, &mut out),
            ScramHash::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
            ScramHash::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_the_advertised_list() {
        // Proves every mechanism parses from its own name and that LIST_MECHS advertises exactly the table.
        let names: Vec<&str> = MECHANISMS.iter().map(|(m, _)| m.name()).collect();
        assert_eq!(names.join(" "), crate::auth::SecuritySettings::default().mechanisms(false));
        for (mech, name) in MECHANISMS {
            assert_eq!(Mechanism::parse(name.as_bytes()).unwrap(), mech);
        }
    }

    #[test]
    fn parse_rejects_rfc_spellings_and_unknown_names() {
        // Proves names outside Couchbase's spelling give UnknownMechanism rather than a guess.
        for bad in [&b"SCRAM-SHA-256"[..], b"scram-sha512", b"CRAM-MD5", b"", b"PLAIN "] {
            assert_eq!(Mechanism::parse(bad), Err(AuthError::UnknownMechanism));
        }
    }

    #[test]
    fn hmac_and_digest_match_known_answers() {
        // Proves the primitives with RFC 4231 test case 2 (HMAC-SHA256) and the SHA-1 digest of "abc".
        let mac = ScramHash::Sha256.hmac(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let sha1: String = ScramHash::Sha1.digest(b"abc").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
    }
}

#[cfg(test)]
thread_local! {
    /// PBKDF2 derivations run on the current thread, so a test can prove a code path runs none.
    pub(crate) static DERIVATIONS_ON_THIS_THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

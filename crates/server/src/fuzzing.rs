//! What the fuzz targets in `fuzz/` check on arbitrary bytes, kept here so each target is one call and the seed
//! corpus (`fuzz/seeds/<target>/`) replays in the ordinary test suite on every run. Each function panics only when
//! a property fails; bad input must come back as an error, never a panic.

use std::sync::OnceLock;

use crate::auth::{ClientCertAuth, Credentials, PasswordPolicy, ScramHash, ScramServer, SecuritySettings};
use crate::rest::form::Form;

/// The one user the SCRAM target knows; its credentials are derived once (PBKDF2 is slow on purpose).
const SCRAM_USER: &str = "fuzz-user";

fn scram_credentials() -> &'static Credentials {
    static CREDENTIALS: OnceLock<Credentials> = OnceLock::new();
    CREDENTIALS.get_or_init(|| Credentials::from_password("fuzz-password"))
}

/// SASL SCRAM: the first byte picks the hash, the rest is client-first and client-final split at the first newline.
/// Neither message may panic the server; a server-first answer starts with the client's nonce; and a client-final
/// made of arbitrary bytes never authenticates.
pub fn scram_exchange(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else { return };
    let hash = ScramHash::ALL[usize::from(pick) % ScramHash::ALL.len()];
    let (first, last) = match rest.iter().position(|b| *b == b'\n') {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let lookup = |user: &str| (user == SCRAM_USER).then(|| scram_credentials().clone());
    let Ok((server, reply)) = ScramServer::start(hash, first, lookup) else { return };
    assert!(reply.starts_with(b"r="), "server-first starts with the combined nonce");
    assert!(server.step(last).is_err(), "arbitrary bytes authenticated");
}

/// The REST form parser: never panics, and what it reads survives being written and read again unchanged.
pub fn rest_form(data: &[u8]) {
    let pairs = Form::parse(data).into_pairs();
    let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let settee_cluster::peer::Body::Form(written) = settee_cluster::peer::form(&borrowed) else {
        unreachable!("peer::form makes a form body")
    };
    let again = Form::parse(written.as_bytes()).into_pairs();
    // Empty keys with empty values vanish (`&=&` is an empty pair both times), so compare the non-empty ones.
    let kept = |p: &Vec<(String, String)>| {
        p.iter().filter(|(k, v)| !k.is_empty() || !v.is_empty()).cloned().collect::<Vec<_>>()
    };
    assert_eq!(kept(&pairs), kept(&again), "{written}");
}

/// The security settings' parsers on arbitrary bodies: `/settings/clientCertAuth`'s JSON, and the forms of
/// `/settings/security` and `/settings/passwordPolicy`. None panics; accepted settings read back unchanged from
/// what they write; an accepted password policy judges any password without panicking.
pub fn security_settings(data: &[u8]) {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) {
        if let Ok(auth) = ClientCertAuth::from_request(&json) {
            assert_eq!(ClientCertAuth::from_request(&auth.to_json()), Ok(auth));
        }
    }
    let pairs = Form::parse(data).into_pairs();
    if let Ok(settings) = SecuritySettings::default().edited(&pairs) {
        assert_eq!(SecuritySettings::from_metadata(&settings.to_metadata()), settings);
    }
    if let Ok(policy) = PasswordPolicy::from_form(&pairs) {
        let _ = policy.violation(&String::from_utf8_lossy(data));
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// Every file of `fuzz/seeds/<target>`, read.
    fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds").join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no seeds in {}", dir.display());
        files.into_iter().map(|p| (p.clone(), std::fs::read(&p).expect("seed"))).collect()
    }

    /// The seed corpus of the three server-side fuzz targets holds their properties, on every test run.
    #[test]
    fn replays_the_seed_corpus() {
        for (target, check) in [
            ("scram_exchange", scram_exchange as fn(&[u8])),
            ("rest_form", rest_form),
            ("security_settings", security_settings),
        ] {
            for (path, data) in seeds(target) {
                let outcome = std::panic::catch_unwind(|| check(&data));
                assert!(outcome.is_ok(), "{target} fails on {}", path.display());
            }
        }
    }

    /// The SCRAM property can fail: a well-formed client-first for the known user reaches the step, and the form
    /// property reads the escapes ns_server's clients send.
    #[test]
    fn the_properties_reach_the_parsers() {
        let (server, reply) =
            ScramServer::start(ScramHash::Sha512, format!("n,,n={SCRAM_USER},r=abc").as_bytes(), |u| {
                (u == SCRAM_USER).then(|| scram_credentials().clone())
            })
            .expect("a well-formed client-first");
        assert!(reply.starts_with(b"r=abc"));
        assert!(server.step(b"c=biws,r=abc,p=AAAA").is_err());
        rest_form(b"name=a%2Bb+c&roles=data_reader%5Bdefault%5D&&flag&x=%zz%4");
    }
}

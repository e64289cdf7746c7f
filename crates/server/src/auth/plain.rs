//! SASL PLAIN (RFC 4616): `[authzid] NUL user NUL password` in one SASL_AUTH, answered SUCCESS or AUTH_ERROR.
//!
//! The SDKs use PLAIN over TLS by default, and over plain TCP only when the user asks for it.

use std::sync::OnceLock;

use super::{AuthError, Credentials, SASL_MESSAGE_BYTES_MAX};

/// A PLAIN message's user and password, borrowed from the message.
#[derive(Debug, PartialEq, Eq)]
pub struct PlainMessage<'a> {
    pub user: &'a str,
    pub password: &'a [u8],
}

impl<'a> PlainMessage<'a> {
    /// Checks the grammar (`[authzid] NUL user NUL password`, bounded length, UTF-8 non-empty user) and the
    /// authzid, which may only name the user itself; costs no derivation.
    pub fn parse(message: &'a [u8]) -> Result<PlainMessage<'a>, AuthError> {
        if message.len() > SASL_MESSAGE_BYTES_MAX {
            return Err(AuthError::Malformed("PLAIN message is too long"));
        }
        let mut parts = message.split(|&b| b == 0);
        let (Some(authzid), Some(user), Some(password), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Malformed("PLAIN needs exactly three NUL-separated fields"));
        };
        let user = std::str::from_utf8(user).map_err(|_| AuthError::Malformed("PLAIN user name is not UTF-8"))?;
        if user.is_empty() {
            return Err(AuthError::Malformed("PLAIN user name is empty"));
        }
        // Acting on behalf of another user is not supported; naming oneself is harmless.
        if !authzid.is_empty() && authzid != user.as_bytes() {
            return Err(AuthError::Failed);
        }
        Ok(PlainMessage { user, password })
    }
}

/// Checks a PLAIN message and returns the authenticated user name, deriving on the calling thread (a KV connection
/// parses with [`PlainMessage::parse`] and derives with `run_derivation` instead).
///
/// An unknown user costs the same PBKDF2 work as a known one with a wrong password, so response time does not
/// reveal which users exist. Only a right password can be answered faster (from `PlainCache`), and that answer is
/// SUCCESS anyway. The user is looked up before any password is checked, so a deleted user fails against the
/// decoy whatever was verified for it before.
pub fn authenticate_plain(message: &[u8], lookup: impl Fn(&str) -> Option<Credentials>) -> Result<String, AuthError> {
    let PlainMessage { user, password } = PlainMessage::parse(message)?;
    if verify_password(lookup(user).as_ref(), password) {
        Ok(user.to_owned())
    } else {
        Err(AuthError::Failed)
    }
}

/// Checks a password sent with SASL PLAIN or HTTP Basic against a user's credentials, or, for a user that does not
/// exist (`None`), against a decoy made with the same PBKDF2 parameters, so that the answer takes as long for an
/// unknown user as for a known one with a wrong password and response times do not reveal which users exist. The
/// decoy never verifies. Costs one derivation unless `PlainCache` remembers the (right) password.
pub fn verify_password(credentials: Option<&Credentials>, password: &[u8]) -> bool {
    match credentials {
        Some(credentials) => credentials.verify_plain(password),
        None => {
            #[cfg(test)]
            DECOY_CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = decoy().verify_plain(password);
            false
        }
    }
}

/// How many times `verify_password` checked against the decoy, so tests can tell that an unknown user paid the
/// derivation without measuring time.
#[cfg(test)]
static DECOY_CHECKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(test)]
pub(crate) fn decoy_checks() -> u64 {
    DECOY_CHECKS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Credentials made from a random password nobody knows, checked against when the user does not exist. They are
/// derived like every user's (`Credentials::from_password`: same hash, salt length and iterations).
fn decoy() -> &'static Credentials {
    static DECOY: OnceLock<Credentials> = OnceLock::new();
    DECOY.get_or_init(|| {
        let mut secret = [0u8; 24];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut secret);
        let password: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        Credentials::from_password(&password)
    })
}

#[cfg(test)]
mod tests {
    use super::super::UserStore;
    use super::*;

    fn lookup() -> impl Fn(&str) -> Option<Credentials> {
        let credentials = Credentials::from_password("pw");
        move |user| (user == "alice").then(|| credentials.clone())
    }

    #[test]
    fn good_password_authenticates_with_or_without_authzid() {
        // Proves the SDKs' `\0user\0password` form and the same-user authzid form both succeed.
        let lookup = lookup();
        assert_eq!(authenticate_plain(b"\0alice\0pw", &lookup).unwrap(), "alice");
        assert_eq!(authenticate_plain(b"alice\0alice\0pw", &lookup).unwrap(), "alice");
    }

    #[test]
    fn wrong_password_unknown_user_or_foreign_authzid_fail() {
        // Proves every credential mismatch is Failed, indistinguishable from one another.
        let lookup = lookup();
        assert_eq!(authenticate_plain(b"\0alice\0pW", &lookup), Err(AuthError::Failed));
        assert_eq!(authenticate_plain(b"\0alice\0", &lookup), Err(AuthError::Failed));
        assert_eq!(authenticate_plain(b"\0bob\0pw", &lookup), Err(AuthError::Failed));
        assert_eq!(authenticate_plain(b"bob\0alice\0pw", &lookup), Err(AuthError::Failed));
    }

    #[test]
    fn deleted_user_cannot_log_in_with_a_password_verified_before() {
        // Proves the lookup gates the process-wide cache: after a successful (so cached) login and a delete, the
        // same message fails, and a user re-created with the same password logs in again.
        let store = UserStore::new();
        store.upsert("plain-deleted", "", Some("pw-deleted"), vec![]).unwrap();
        let lookup = |user: &str| store.credentials(user);
        assert_eq!(authenticate_plain(b"\0plain-deleted\0pw-deleted", lookup).unwrap(), "plain-deleted");
        assert!(store.delete("plain-deleted"));
        assert_eq!(authenticate_plain(b"\0plain-deleted\0pw-deleted", lookup), Err(AuthError::Failed));
        store.upsert("plain-deleted", "", Some("pw-deleted"), vec![]).unwrap();
        assert_eq!(authenticate_plain(b"\0plain-deleted\0pw-deleted", lookup).unwrap(), "plain-deleted");
    }

    #[test]
    fn changed_password_refuses_the_old_one_after_it_was_verified() {
        // Proves a password change through the store takes effect at once for PLAIN, although the old password's
        // successful check is still in the process-wide cache.
        let store = UserStore::new();
        store.upsert("plain-changed", "", Some("old-pw"), vec![]).unwrap();
        let lookup = |user: &str| store.credentials(user);
        assert!(authenticate_plain(b"\0plain-changed\0old-pw", lookup).is_ok());
        store.upsert("plain-changed", "", Some("new-pw"), vec![]).unwrap();
        assert_eq!(authenticate_plain(b"\0plain-changed\0old-pw", lookup), Err(AuthError::Failed));
        assert_eq!(authenticate_plain(b"\0plain-changed\0new-pw", lookup).unwrap(), "plain-changed");
    }

    #[test]
    fn malformed_plain_messages_give_malformed() {
        // Proves missing or extra fields, an empty or non-UTF-8 user and oversize input are Malformed.
        let lookup = lookup();
        let too_long = [b'a'; SASL_MESSAGE_BYTES_MAX + 1];
        for case in [&b""[..], b"alice", b"\0alice", b"\0alice\0pw\0", b"\0\0pw", b"\0\xff\0pw", &too_long] {
            assert!(matches!(authenticate_plain(case, &lookup), Err(AuthError::Malformed(_))), "{case:?}");
        }
    }
}

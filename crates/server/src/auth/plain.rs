//! SASL PLAIN (RFC 4616): `[authzid] NUL user NUL password` in one SASL_AUTH, answered SUCCESS or AUTH_ERROR.
//!
//! The SDKs use PLAIN over TLS by default, and over plain TCP only when the user asks for it.

use std::sync::OnceLock;

use super::{AuthError, Credentials, SASL_MESSAGE_BYTES_MAX};

/// Checks a PLAIN message and returns the authenticated user name.
///
/// An unknown user costs the same PBKDF2 work as a known one, so response time does not reveal which users exist.
pub fn authenticate_plain(message: &[u8], lookup: impl Fn(&str) -> Option<Credentials>) -> Result<String, AuthError> {
    if message.len() > SASL_MESSAGE_BYTES_MAX {
        return Err(AuthError::Malformed("PLAIN message is too long"));
    }
    let mut parts = message.split(|&b| b == 0);
    let (Some(authzid), Some(user), Some(password), None) = (parts.next(), parts.next(), parts.next(), parts.next())
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
    let verified = match lookup(user) {
        Some(credentials) => credentials.verify_plain(password),
        None => {
            let _ = decoy().verify_plain(password);
            false
        }
    };
    if verified {
        Ok(user.to_owned())
    } else {
        Err(AuthError::Failed)
    }
}

/// Credentials made from a random password nobody knows, checked against when the user does not exist.
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
    fn malformed_plain_messages_give_malformed() {
        // Proves missing or extra fields, an empty or non-UTF-8 user and oversize input are Malformed.
        let lookup = lookup();
        let too_long = [b'a'; SASL_MESSAGE_BYTES_MAX + 1];
        for case in [&b""[..], b"alice", b"\0alice", b"\0alice\0pw\0", b"\0\0pw", b"\0\xff\0pw", &too_long] {
            assert!(matches!(authenticate_plain(case, &lookup), Err(AuthError::Malformed(_))), "{case:?}");
        }
    }
}

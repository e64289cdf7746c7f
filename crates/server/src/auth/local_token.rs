//! The node's local token: what `couchbase-cli reset-admin-password` logs in with as `@localtoken`.
//!
//! As ns_server's `menelaus_local_auth`, the node writes a random token to `<data-dir>/localtoken` at every start;
//! only someone who can read that file (mode 0600: the account the node runs as, or root) can use it, and the
//! node accepts it only from a loopback peer and only for `POST /controller/resetAdminPassword`, so it recovers a
//! lost administrator password without granting anything else. ns_server also replaces its token every minute,
//! keeping the previous one valid; settee's lives as long as the process.

use std::path::Path;

use subtle::ConstantTimeEq;

/// The user name the token authenticates, as Couchbase spells it.
pub const LOCAL_TOKEN_USER: &str = "@localtoken";
/// The file's name in the data directory (couchbase-cli reads `<--config-path>/localtoken`).
pub const LOCAL_TOKEN_FILE: &str = "localtoken";

/// A random 128-bit token, as 32 hex digits (the shape of ns_server's `couch_uuids:random()`).
#[derive(Clone)]
pub struct LocalToken {
    token: String,
}

impl std::fmt::Debug for LocalToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalToken(..)")
    }
}

impl LocalToken {
    /// Makes a new token and writes it, followed by a newline, to `<dir>/localtoken` with mode 0600, replacing the
    /// previous start's by rename so a reader never sees half a token.
    pub fn create(dir: &Path) -> std::io::Result<LocalToken> {
        let token = crate::node::random_hex32(0);
        crate::tls::write_replacing(&dir.join(LOCAL_TOKEN_FILE), format!("{token}\n").as_bytes(), true)?;
        Ok(LocalToken { token })
    }

    /// Whether `candidate` is the token, compared in constant time.
    pub fn matches(&self, candidate: &str) -> bool {
        self.token.as_bytes().ct_eq(candidate.as_bytes()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_is_private_and_holds_the_token_that_matches() {
        // Proves the file holds 32 hex digits and a newline, mode 0600, that the token matches itself only, and
        // that a second start replaces it with a different token.
        let dir = std::env::temp_dir().join(format!("settee-localtoken-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let first = LocalToken::create(&dir).expect("create");
        let text = std::fs::read_to_string(dir.as_path().join(LOCAL_TOKEN_FILE)).expect("read");
        let token = text.strip_suffix('\n').expect("newline");
        assert_eq!(token.len(), 32);
        assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
        assert!(first.matches(token));
        assert!(!first.matches(&token[..31]) && !first.matches("") && !first.matches(&format!("{token}0")));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.as_path().join(LOCAL_TOKEN_FILE)).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let second = LocalToken::create(dir.as_path()).expect("create again");
        assert!(!second.matches(token), "a new start makes a new token");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

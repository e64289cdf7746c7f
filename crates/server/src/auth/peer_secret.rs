//! The cluster's node-to-node secret: what nodes authenticate each other with, instead of the administrator's
//! password, so that the administrator's password can change (`/controller/resetAdminPassword`) without cutting
//! the nodes off from each other.
//!
//! A node forming a new cluster makes one (`<data-dir>/cluster-secret`, mode 0600, 32 random bytes as hex); a
//! joining node takes its seed's before it joins (`settee_cluster::peer::PeerSecretRequest`, with the
//! administrator's credentials), as it takes the cluster's CA. Node-to-node calls then carry the administrator's
//! user name with the secret as password (REST Basic, KV SASL PLAIN), which every node accepts for the
//! administrator beside the administrator's own password. A node of a cluster formed by an older settee has no
//! secret and keeps calling its peers with the administrator's password (and refuses to reset it).

use std::path::Path;

/// The file's name in the data directory.
pub const PEER_SECRET_FILE: &str = "cluster-secret";

/// Reads `<dir>/cluster-secret`; None when there is none. An empty or unreadable file is an error.
pub fn load(dir: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(dir.join(PEER_SECRET_FILE)) {
        Ok(text) => {
            let secret = text.trim();
            if secret.is_empty() {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "the cluster secret file is empty"));
            }
            Ok(Some(secret.to_owned()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A new random secret: 256 bits as 64 hex digits.
pub fn generate() -> String {
    format!("{}{}", crate::node::random_hex32(0), crate::node::random_hex32(0))
}

/// Makes `secret` this node's (None: the node has none, and calls its peers with the administrator's password).
pub fn store(dir: &Path, secret: Option<&str>) -> std::io::Result<()> {
    match secret {
        Some(secret) => {
            crate::tls::write_replacing(&dir.join(PEER_SECRET_FILE), format!("{secret}\n").as_bytes(), true)
        }
        None => match std::fs::remove_file(dir.join(PEER_SECRET_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_secret_loads_back_and_removal_leaves_none() {
        // Proves a stored secret reads back (trimmed of its newline), a removed one reads as None, and an empty
        // file is refused rather than taken as a secret everyone knows.
        let dir = std::env::temp_dir().join(format!("settee-peer-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(load(&dir).expect("load"), None);
        let secret = generate();
        assert_eq!(secret.len(), 64);
        store(&dir, Some(&secret)).expect("store");
        assert_eq!(load(&dir).expect("load"), Some(secret));
        store(&dir, None).expect("remove");
        assert_eq!(load(&dir).expect("load"), None);
        std::fs::write(dir.join(PEER_SECRET_FILE), "\n").expect("write");
        assert!(load(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

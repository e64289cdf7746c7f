//! Users and groups in a backup, with cbbackupmgr's flags: only with `--enable-users` (backup and restore), and
//! on restore existing users are left alone unless `--overwrite-users`.
//!
//! A backup saves the cluster's `GET /settings/rbac/backup` (every local user with its roles, groups and password
//! hashes, never a password in clear, and every group) as `users.json` at the top of the backup directory,
//! checksummed in `backup.json` like the buckets' files. A restore hands it to `PUT /settings/rbac/backup`, which
//! creates the missing groups and users (their old passwords keep working) and reports the existing ones.

use crate::error::BackupError;
use crate::rest::Rest;

/// The users and groups of the cluster, as `users.json` keeps them, with their counts.
pub(crate) async fn fetch(rest: &Rest) -> Result<(serde_json::Value, u64, u64), BackupError> {
    let doc = rest.get_json("/settings/rbac/backup").await?;
    let count = |f: &str| doc[f].as_array().map_or(0, |a| a.len() as u64);
    let (users, groups) = (count("users"), count("groups"));
    Ok((doc, users, groups))
}

/// What a restore did: the ids created, replaced (`--overwrite-users`) and left as they were.
#[derive(Debug, Default)]
pub(crate) struct UsersRestored {
    pub created: Vec<String>,
    pub replaced: Vec<String>,
    pub skipped: Vec<String>,
    pub groups_created: u64,
}

/// Installs the saved users and groups; `overwrite` replaces existing ones.
pub(crate) async fn restore(rest: &Rest, doc: &[u8], overwrite: bool) -> Result<UsersRestored, BackupError> {
    let text = std::str::from_utf8(doc).map_err(|e| BackupError::Damaged(format!("users.json: {e}")))?;
    let form = [("backup", text), ("canOverwrite", if overwrite { "true" } else { "false" })];
    let (status, body) = rest.put_form("/settings/rbac/backup", &form).await?;
    if status != 200 {
        return Err(BackupError::Cluster(format!(
            "restoring users: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    let answer: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| BackupError::Cluster(format!("restoring users: {e}: {}", String::from_utf8_lossy(&body))))?;
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|x| x.as_str().map(str::to_string)).collect()
    };
    Ok(UsersRestored {
        created: ids(&answer["users"]["created"]),
        replaced: ids(&answer["users"]["replaced"]),
        skipped: ids(&answer["users"]["skipped"]),
        groups_created: answer["groups"]["created"].as_array().map_or(0, |a| a.len() as u64),
    })
}

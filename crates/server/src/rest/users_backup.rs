//! `GET` / `PUT /settings/rbac/backup`: every local user (with its password hashes, never a password) and group
//! in one document, and that document installed again, as ns_server's endpoint of that name serves cbbackupmgr's
//! `--enable-users`. `settee backup` uses it.
//!
//! The document is settee's own: `{"users": [...], "groups": [...]}`, each user as the store keeps it (id, name,
//! roles, groups, the SCRAM and PLAIN verifiers with their salts, the password's date). A restore creates the
//! groups, then the users; one that exists is left alone and listed as skipped, or replaced with `canOverwrite=true`.
//! Both calls need the security-admin privilege (the hashes are secrets), and a restore may only grant roles the
//! caller may grant. The built-in administrator is never part of it.

use std::collections::HashSet;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::auth::{Group, User, UserError};

/// Users and groups one restore may carry.
const ENTRIES_MAX: usize = 100_000;

#[derive(Deserialize)]
struct Backup {
    #[serde(default)]
    users: Vec<User>,
    #[serde(default)]
    groups: Vec<Group>,
}

/// `GET /settings/rbac/backup`.
pub(crate) async fn get(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security.local!write".to_owned())?;
    let admin = &state.node.config.username;
    let users: Vec<Value> = state
        .node
        .users
        .list()
        .iter()
        .filter(|u| &u.id != admin)
        .map(|u| serde_json::to_value(&**u).unwrap_or(Value::Null))
        .collect();
    let groups: Vec<Value> =
        state.node.users.groups().iter().map(|g| serde_json::to_value(&**g).unwrap_or(Value::Null)).collect();
    if users.iter().chain(&groups).any(Value::is_null) {
        return Err(RestError::global(StatusCode::INTERNAL_SERVER_ERROR, "a user could not be encoded"));
    }
    Ok(Json(json!({"users": users, "groups": groups})))
}

/// `PUT /settings/rbac/backup` with form `backup` (the document `GET` answered) and `canOverwrite` (`true` to
/// replace existing users and groups); answers what was created, replaced and skipped.
pub(crate) async fn put(State(state): State<RestState>, caller: Caller, body: Bytes) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security.local!write".to_owned())?;
    let form = Form::parse(&body);
    let overwrite = form.get("canOverwrite") == Some("true");
    let backup: Backup = serde_json::from_str(form.get("backup").unwrap_or_default())
        .map_err(|e| RestError::field("backup", format!("not a users backup: {e}")))?;
    if backup.users.len() + backup.groups.len() > ENTRIES_MAX {
        return Err(RestError::field("backup", format!("more than {ENTRIES_MAX} users and groups")));
    }
    let admin = state.node.config.username.clone();
    if backup.users.iter().any(|u| u.id == admin) {
        return Err(RestError::field("backup", "the built-in administrator cannot be restored"));
    }
    let roles = backup.groups.iter().flat_map(|g| &g.roles).chain(backup.users.iter().flat_map(|u| &u.roles));
    caller.require_grantable(roles)?;
    let unavailable = |e| RestError::global(StatusCode::SERVICE_UNAVAILABLE, format!("restoring users failed: {e}"));

    let existing: HashSet<String> = state.node.users.groups().iter().map(|g| g.id.clone()).collect();
    let (groups_created, groups_replaced, groups_skipped) =
        split(backup.groups.iter().map(|g| &g.id), &existing, overwrite);
    let wanted: Vec<Group> = backup.groups.into_iter().filter(|g| overwrite || !existing.contains(&g.id)).collect();
    if !wanted.is_empty() {
        let stored = state.node.propose_group_change(move |groups| {
            for g in wanted {
                groups.retain(|x| x.id != g.id);
                groups.push(g);
            }
            groups.sort_by(|a, b| a.id.cmp(&b.id));
            Ok::<(), ()>(())
        });
        let _ = stored.await.map_err(unavailable)?;
    }

    let existing: HashSet<String> = state.node.users.list().iter().map(|u| u.id.clone()).collect();
    let (users_created, users_replaced, users_skipped) =
        split(backup.users.iter().map(|u| &u.id), &existing, overwrite);
    let wanted: Vec<User> = backup.users.into_iter().filter(|u| overwrite || !existing.contains(&u.id)).collect();
    if !wanted.is_empty() {
        let stored = state.node.propose_user_change(move |users| {
            for u in wanted {
                users.install(u)?;
            }
            Ok::<(), UserError>(())
        });
        stored.await.map_err(unavailable)?.map_err(|e| RestError::field("backup", e.to_string()))?;
    }
    tracing::info!(
        users = users_created.len() + users_replaced.len(),
        groups = groups_created.len() + groups_replaced.len(),
        "users and groups restored"
    );
    Ok(Json(json!({
        "users": {"created": users_created, "replaced": users_replaced, "skipped": users_skipped},
        "groups": {"created": groups_created, "replaced": groups_replaced, "skipped": groups_skipped},
    })))
}

/// The ids of `ids` that are new, that replace an existing one, and that an existing one keeps out.
fn split<'a>(
    ids: impl Iterator<Item = &'a String>,
    existing: &HashSet<String>,
    overwrite: bool,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut created, mut replaced, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    for id in ids {
        match (existing.contains(id), overwrite) {
            (false, _) => created.push(id.clone()),
            (true, true) => replaced.push(id.clone()),
            (true, false) => skipped.push(id.clone()),
        }
    }
    (created, replaced, skipped)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{TestApp, ADMIN};
    use super::*;

    /// Proves a users backup carries a user's roles, groups and password hashes (never the password) from one node to
    /// another, where the user logs in with its old password; a second restore skips what exists unless
    /// `canOverwrite=true`; the built-in administrator is neither exported nor accepted.
    #[tokio::test]
    async fn users_backup_restores_hashes_and_skips_existing_users_when_not_overwriting() {
        let src = TestApp::new();
        let put = src.call("PUT", "/settings/rbac/groups/readers", Some(ADMIN), Some("roles=ro_admin")).await;
        assert_eq!(put.status, StatusCode::OK, "{}", put.text);
        let form = "name=Bob&password=bobsecret&roles=data_reader%5Bdefault%5D&groups=readers";
        let put = src.call("PUT", "/settings/rbac/users/local/bob", Some(ADMIN), Some(form)).await;
        assert_eq!(put.status, StatusCode::OK, "{}", put.text);
        let doc = src.get_ok("/settings/rbac/backup").await;
        let text = doc.to_string();
        assert!(!text.contains("bobsecret") && !text.contains("Administrator"), "{text}");
        assert_eq!(doc["users"].as_array().unwrap().len(), 1);

        let dst = TestApp::new();
        let body = |overwrite: bool| {
            let encoded: String = url_encode(&text);
            format!("backup={encoded}&canOverwrite={overwrite}")
        };
        let first = dst.call("PUT", "/settings/rbac/backup", Some(ADMIN), Some(&body(false))).await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.text);
        let answer: Value = serde_json::from_str(&first.text).unwrap();
        assert_eq!(answer["users"]["created"], json!(["bob"]));
        assert_eq!(answer["groups"]["created"], json!(["readers"]));
        assert_eq!(dst.call("GET", "/pools/default", Some(("bob", "bobsecret")), None).await.status, StatusCode::OK);
        let bob = dst.get_ok("/settings/rbac/users/local/bob").await;
        assert_eq!(bob["groups"], json!(["readers"]));
        let again = dst.call("PUT", "/settings/rbac/backup", Some(ADMIN), Some(&body(false))).await;
        let answer: Value = serde_json::from_str(&again.text).unwrap();
        assert_eq!(
            (answer["users"]["skipped"].clone(), answer["groups"]["skipped"].clone()),
            (json!(["bob"]), json!(["readers"]))
        );
        let forced = dst.call("PUT", "/settings/rbac/backup", Some(ADMIN), Some(&body(true))).await;
        let answer: Value = serde_json::from_str(&forced.text).unwrap();
        assert_eq!(answer["users"]["replaced"], json!(["bob"]));

        let mut admin = doc["users"][0].clone();
        admin["id"] = json!(ADMIN.0);
        let admin_doc = json!({"users": [admin]}).to_string();
        let refused = dst
            .call("PUT", "/settings/rbac/backup", Some(ADMIN), Some(&format!("backup={}", url_encode(&admin_doc))))
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
        assert!(refused.text.contains("built-in administrator"), "{}", refused.text);
        let bob_call = dst.call("GET", "/settings/rbac/backup", Some(("bob", "bobsecret")), None).await;
        assert_eq!(bob_call.status, StatusCode::FORBIDDEN);
    }

    fn url_encode(s: &str) -> String {
        s.bytes()
            .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect()
    }
}

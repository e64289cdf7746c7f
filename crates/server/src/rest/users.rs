//! Local users and the rest of `/settings/rbac`: what the SDKs' user managers call.
//!
//! Only the `local` domain exists. The administrator named on the command line is Couchbase's built-in admin
//! (domain "admin"): it is not listed among local users and cannot be changed here, so no REST call can lock the
//! operator out. Groups are not supported: the list is always empty, a user may not name groups, and creating a
//! group is refused.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::roles::{catalogue, role_json};
use super::RestState;
use crate::audit::events;
use crate::auth::{Role, User, UserError};
use crate::node::Node;

const UNKNOWN_USER: &str = "Unknown user.";
const USER_NOT_FOUND: &str = "User was not found.";

/// `GET /settings/rbac/users` and `/settings/rbac/users/local`.
pub(crate) async fn list(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    let users: Vec<Value> =
        state.node.users.list().iter().filter(|u| u.id != state.node.config.username).map(|u| user_json(u)).collect();
    Ok(Json(Value::Array(users)))
}

/// `GET /settings/rbac/users/local/<u>`.
pub(crate) async fn get(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    match state.node.users.get(&id) {
        Some(user) if id != state.node.config.username => Ok(Json(user_json(&user))),
        _ => Err(RestError::text(StatusCode::NOT_FOUND, UNKNOWN_USER)),
    }
}

/// `PUT /settings/rbac/users/local/<u>` with form `name`, `password` (optional when the user exists), `roles`.
pub(crate) async fn upsert(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security.local!write".to_owned())?;
    refuse_builtin(&state.node, &id)?;
    let form = Form::parse(&body);
    let roles = parse_roles(&state.node, form.get("roles").unwrap_or_default())?;
    if form.get("groups").is_some_and(|g| !g.trim().is_empty()) {
        return Err(RestError::field("groups", "Groups are not supported by this server"));
    }
    let password = form.get("password").map(str::to_owned);
    if let Some(p) = &password {
        check_password(&state.node, p)?;
    }
    let name = form.get("name").unwrap_or_default().to_owned();
    let existed = state.node.users.get(&id).is_some();
    let audited = crate::audit_fields![
        ("identity", json!({"domain": "local", "user": id})),
        ("roles", roles.iter().map(|r| r.to_string()).collect::<Vec<_>>()),
        ("full_name", name),
        ("groups", Vec::<String>::new()),
        ("reason", if existed { "updated" } else { "added" }),
    ];
    let user_id = id.clone();
    let stored =
        state.node.propose_user_change(move |users| users.upsert(&user_id, &name, password.as_deref(), roles)).await;
    match stored {
        Ok(Ok(())) => {
            tracing::info!(user = %id, "user saved");
            caller.audit(&state, events::SET_USER, audited);
            Ok(StatusCode::OK)
        }
        Ok(Err(UserError::PasswordRequired)) => Err(RestError::field("password", "Password is required")),
        Ok(Err(e @ UserError::InvalidPassword(_))) => Err(RestError::field("password", e.to_string())),
        Ok(Err(e @ UserError::InvalidId(_))) => Err(RestError::global(StatusCode::BAD_REQUEST, e.to_string())),
        Err(e) => Err(RestError::global(StatusCode::SERVICE_UNAVAILABLE, format!("saving the user failed: {e}"))),
    }
}

/// `DELETE /settings/rbac/users/local/<u>`.
pub(crate) async fn delete(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security.local!write".to_owned())?;
    refuse_builtin(&state.node, &id)?;
    if state.node.users.get(&id).is_none() {
        return Err(RestError::text(StatusCode::NOT_FOUND, USER_NOT_FOUND));
    }
    let user_id = id.clone();
    let deleted = state.node.propose_user_change(move |users| if users.delete(&user_id) { Ok(()) } else { Err(()) });
    match deleted.await {
        Ok(Ok(())) => {
            tracing::info!(user = %id, "user deleted");
            let fields = crate::audit_fields![("identity", json!({"domain": "local", "user": id}))];
            caller.audit(&state, events::DELETE_USER, fields);
            Ok(StatusCode::OK)
        }
        Ok(Err(())) => Err(RestError::text(StatusCode::NOT_FOUND, USER_NOT_FOUND)),
        Err(e) => Err(RestError::global(StatusCode::SERVICE_UNAVAILABLE, format!("deleting the user failed: {e}"))),
    }
}

/// `GET /settings/rbac/roles`.
pub(crate) async fn roles(caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    Ok(Json(catalogue()))
}

/// `GET /settings/rbac/groups`: always empty, groups are not supported.
pub(crate) async fn groups(caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    Ok(Json(json!([])))
}

/// `GET` or `DELETE /settings/rbac/groups/<g>`: no group exists (gocb maps "Unknown group." to GroupNotFound).
pub(crate) async fn group(caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    Err(RestError::text(StatusCode::NOT_FOUND, "Unknown group."))
}

/// `PUT /settings/rbac/groups/<g>`: refused, groups are not supported.
pub(crate) async fn put_group(caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security.local!write".to_owned())?;
    Err(RestError::global(StatusCode::BAD_REQUEST, "Groups are not supported by this server"))
}

/// `POST /controller/changePassword`: the caller's own password.
pub(crate) async fn change_password(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let form = Form::parse(&body);
    let password = form.get("password").ok_or_else(|| RestError::field("password", "Password is required"))?;
    check_password(&state.node, password)?;
    let (user, password) = (caller.user.clone(), password.to_owned());
    let stored = if caller.builtin {
        // The command line's administrator is per node and never shared.
        let users = state.node.users.clone();
        tokio::task::spawn_blocking(move || users.upsert(&user.id, &user.name, Some(&password), user.roles.clone()))
            .await
            .map_err(|e| e.to_string())
    } else {
        state
            .node
            .propose_user_change(move |users| users.upsert(&user.id, &user.name, Some(&password), user.roles.clone()))
            .await
            .map_err(|e| e.to_string())
    };
    match stored {
        Ok(Ok(())) => {
            let fields = crate::audit_fields![("identity", caller.identity_json())];
            caller.audit(&state, events::PASSWORD_CHANGE, fields);
            Ok(StatusCode::OK)
        }
        Ok(Err(e)) => Err(RestError::field("password", e.to_string())),
        Err(e) => {
            Err(RestError::global(StatusCode::INTERNAL_SERVER_ERROR, format!("changing the password failed: {e}")))
        }
    }
}

fn refuse_builtin(node: &Node, id: &str) -> Result<(), RestError> {
    if id == node.config.username {
        return Err(RestError::global(
            StatusCode::BAD_REQUEST,
            "The built-in administrator cannot be changed through this API",
        ));
    }
    Ok(())
}

/// Refuses a password the cluster's password policy (`/settings/passwordPolicy`) does not allow.
fn check_password(node: &Node, password: &str) -> Result<(), RestError> {
    match node.security().password_policy.violation(password) {
        Some(message) => Err(RestError::field("password", message)),
        None => Ok(()),
    }
}

/// Parses a comma-separated role list. Like ns_server, a role naming a bucket, scope or collection that does
/// not exist is refused along with unknown and malformed ones, all listed in one message.
fn parse_roles(node: &Node, list: &str) -> Result<Vec<Role>, RestError> {
    let mut roles = Vec::new();
    let mut refused = Vec::new();
    for text in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match text.parse::<Role>() {
            Ok(role) if target_exists(node, &role) => roles.push(role),
            _ => refused.push(text),
        }
    }
    if refused.is_empty() {
        return Ok(roles);
    }
    Err(RestError::field(
        "roles",
        format!(
            "Cannot assign roles to user because the following roles are unknown, malformed or role parameters are \
             undefined: [{}]",
            refused.join(",")
        ),
    ))
}

fn target_exists(node: &Node, role: &Role) -> bool {
    let Role::Bucket(_, target) = role else { return true };
    if target.bucket == "*" {
        return true;
    }
    let Some(bucket) = node.bucket(&target.bucket) else { return false };
    let manifest = bucket.manifest();
    let Some(scope_name) = target.scope.as_deref().filter(|s| *s != "*") else { return true };
    let Some(scope) = manifest.scope(scope_name) else { return false };
    match target.collection.as_deref().filter(|c| *c != "*") {
        None => true,
        Some(c) => scope.collections.iter().any(|coll| coll.name == c),
    }
}

/// A user as the RBAC API shows it; every role's origin is the user itself (no groups).
fn user_json(user: &User) -> Value {
    let roles: Vec<Value> = user
        .roles
        .iter()
        .map(|r| {
            let mut v = role_json(r);
            v["origins"] = json!([{"type": "user"}]);
            v
        })
        .collect();
    let mut out = json!({
        "id": user.id,
        "domain": "local",
        "roles": roles,
        "groups": [],
        "external_groups": [],
        "name": user.name,
    });
    if let Some(secs) = user.password_change_date_secs {
        out["password_change_date"] = json!(iso8601_utc(secs));
    }
    out
}

/// `YYYY-MM-DDTHH:MM:SS.000Z` for seconds since the Unix epoch (gocb parses it as RFC 3339), using the
/// days-to-civil-date conversion of the proleptic Gregorian calendar.
fn iso8601_utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468; // Days since 0000-03-01.
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z", rem / 3_600, rem % 3_600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{TestApp, ADMIN};
    use super::*;

    const ALICE: &str = "/settings/rbac/users/local/alice";

    #[tokio::test]
    async fn user_upsert_get_list_delete_round_trip() {
        // Proves PUT creates a user who can log in, GET shows the SDK-parsed shape, list has it, DELETE removes it.
        let app = TestApp::new();
        let form = "name=Alice&password=secret1&roles=data_reader%5Bdefault%5D%2Cro_admin";
        let put = app.call("PUT", ALICE, Some(ADMIN), Some(form)).await;
        assert_eq!(put.status, StatusCode::OK, "{}", put.text);
        let user = app.get_ok(ALICE).await;
        assert_eq!(
            (user["id"].as_str(), user["domain"].as_str(), user["name"].as_str()),
            (Some("alice"), Some("local"), Some("Alice"))
        );
        assert_eq!(
            user["roles"][0],
            json!({"bucket_name": "default", "scope_name": "*", "collection_name": "*", "role": "data_reader",
                   "origins": [{"type": "user"}]})
        );
        assert_eq!(user["roles"][1]["role"], "ro_admin");
        assert_eq!((user["groups"].clone(), user["external_groups"].clone()), (json!([]), json!([])));
        assert!(user["password_change_date"].as_str().unwrap().ends_with(".000Z"));
        assert_eq!(app.call("GET", "/pools/default", Some(("alice", "secret1")), None).await.status, StatusCode::OK);
        for uri in ["/settings/rbac/users", "/settings/rbac/users/local"] {
            let ids: Vec<Value> = app.get_ok(uri).await.as_array().unwrap().iter().map(|u| u["id"].clone()).collect();
            assert_eq!(ids, vec![json!("alice")], "the built-in admin is not a local user");
        }
        let update = app.call("PUT", ALICE, Some(ADMIN), Some("name=A&roles=admin")).await;
        assert_eq!(update.status, StatusCode::OK, "password is optional on update");
        assert_eq!(
            app.call("GET", "/whoami", Some(("alice", "secret1")), None).await.json["roles"][0]["role"],
            "admin"
        );
        assert_eq!(app.call("DELETE", ALICE, Some(ADMIN), None).await.status, StatusCode::OK);
        let gone = app.call("GET", ALICE, Some(ADMIN), None).await;
        assert_eq!((gone.status, gone.json), (StatusCode::NOT_FOUND, json!("Unknown user.")));
        let again = app.call("DELETE", ALICE, Some(ADMIN), None).await;
        assert_eq!((again.status, again.json), (StatusCode::NOT_FOUND, json!("User was not found.")));
    }

    #[tokio::test]
    async fn bad_roles_passwords_and_groups_are_refused_with_field_errors() {
        // Proves the unknown-role message lists every bad role (including undefined buckets), and the other 400s.
        let app = TestApp::new();
        let bad = app
            .call("PUT", ALICE, Some(ADMIN), Some("password=secret1&roles=admin,nope,data_reader%5Bmissing%5D"))
            .await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            bad.json["errors"]["roles"],
            "Cannot assign roles to user because the following roles are unknown, malformed or role parameters are \
             undefined: [nope,data_reader[missing]]"
        );
        let scoped =
            app.call("PUT", ALICE, Some(ADMIN), Some("password=secret1&roles=data_reader%5Bdefault:nope%5D")).await;
        assert_eq!(scoped.status, StatusCode::BAD_REQUEST);
        let short = app.call("PUT", ALICE, Some(ADMIN), Some("password=abc&roles=admin")).await;
        assert!(short.json["errors"]["password"].is_string());
        let missing = app.call("PUT", ALICE, Some(ADMIN), Some("roles=admin")).await;
        assert_eq!(missing.json["errors"]["password"], "Password is required");
        let groups = app.call("PUT", ALICE, Some(ADMIN), Some("password=secret1&groups=g1")).await;
        assert!(groups.json["errors"]["groups"].is_string());
        let builtin = app.call("DELETE", "/settings/rbac/users/local/Administrator", Some(ADMIN), None).await;
        assert_eq!(builtin.status, StatusCode::BAD_REQUEST);
        assert!(app.state.node.users.get("alice").is_none());
    }

    #[tokio::test]
    async fn groups_are_empty_and_non_admins_cannot_manage_users() {
        // Proves the group endpoints' answers and 403 for a data-only user on user management.
        let app = TestApp::new();
        assert_eq!(app.get_ok("/settings/rbac/groups").await, json!([]));
        let group = app.call("GET", "/settings/rbac/groups/g", Some(ADMIN), None).await;
        assert_eq!((group.status, group.json), (StatusCode::NOT_FOUND, json!("Unknown group.")));
        assert_eq!(
            app.call("PUT", "/settings/rbac/groups/g", Some(ADMIN), Some("roles=admin")).await.status,
            StatusCode::BAD_REQUEST
        );
        app.add_user("app", "password", "bucket_full_access[default]");
        let me = Some(("app", "password"));
        assert_eq!(app.call("GET", "/settings/rbac/users", me, None).await.status, StatusCode::FORBIDDEN);
        assert_eq!(app.call("PUT", ALICE, me, Some("password=secret1")).await.status, StatusCode::FORBIDDEN);
    }

    #[tokio::test]
    async fn change_password_changes_the_callers_password() {
        // Proves POST /controller/changePassword replaces the caller's password and keeps their roles.
        let app = TestApp::new();
        app.add_user("bob", "password", "data_reader[default]");
        let reply =
            app.call("POST", "/controller/changePassword", Some(("bob", "password")), Some("password=newpass")).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(app.call("GET", "/whoami", Some(("bob", "password")), None).await.status, StatusCode::UNAUTHORIZED);
        let me = app.call("GET", "/whoami", Some(("bob", "newpass")), None).await;
        assert_eq!(me.json["roles"][0]["role"], "data_reader");
    }

    #[test]
    fn dates_format_as_rfc3339_utc() {
        // Proves the civil-date conversion on the epoch, a leap day and a date past 2100.
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_utc(951_782_400 + 3_661), "2000-02-29T01:01:01.000Z");
        assert_eq!(iso8601_utc(4_107_542_400), "2100-03-01T00:00:00.000Z");
    }
}

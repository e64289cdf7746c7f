//! Local users and the rest of `/settings/rbac`: what the SDKs' user managers call.
//!
//! Only the `local` domain exists. The administrator named on the command line is Couchbase's built-in admin
//! (domain "admin"): it is not listed among local users and cannot be changed here, so no REST call can lock the
//! operator out. Groups (`/settings/rbac/groups`) give their roles to the users that name them; they are kept
//! cluster-wide beside the users, and a change to a group reaches its members' open connections at their next
//! request.

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
use crate::auth::{Group, Role, User, UserError, UserLimits};
use crate::node::Node;

const UNKNOWN_USER: &str = "Unknown user.";
const UNKNOWN_GROUP: &str = "Unknown group.";
const GROUP_NOT_FOUND: &str = "Group was not found.";
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
    let groups: Vec<String> = form
        .get("groups")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(str::to_owned)
        .collect();
    // The roles given, those the groups named give, and those the user held: all must be the caller's to touch.
    let group_roles: Vec<Role> =
        groups.iter().filter_map(|g| state.node.users.group(g)).flat_map(|g| g.roles.clone()).collect();
    let held = state.node.users.get(&id).map(|u| u.all_roles().cloned().collect::<Vec<_>>()).unwrap_or_default();
    caller.require_grantable(roles.iter().chain(&group_roles).chain(&held))?;
    let password = form.get("password").map(str::to_owned);
    if let Some(p) = &password {
        check_password(&state.node, p)?;
    }
    // `limits` absent keeps the user's limits, `{}` removes them (ns_server's rule).
    let limits = match form.get("limits") {
        Some(text) => Some(UserLimits::parse(text).map_err(|why| RestError::field("limits", why))?),
        None => None,
    };
    let name = form.get("name").unwrap_or_default().to_owned();
    let existed = state.node.users.get(&id).is_some();
    let audited = crate::audit_fields![
        ("identity", json!({"domain": "local", "user": id})),
        ("roles", roles.iter().map(|r| r.to_string()).collect::<Vec<_>>()),
        ("full_name", name),
        ("groups", groups.clone()),
        ("reason", if existed { "updated" } else { "added" }),
        ("limits", limits.as_ref().map_or(Value::Null, |l| serde_json::to_value(l).unwrap_or(Value::Null))),
    ];
    let user_id = id.clone();
    let stored = state
        .node
        .propose_user_change(move |users| {
            users.upsert_member(&user_id, &name, password.as_deref(), roles, Some(groups))?;
            if let Some(limits) = limits {
                users.set_limits(&user_id, limits);
            }
            Ok(())
        })
        .await;
    match stored {
        Ok(Ok(())) => {
            tracing::info!(user = %id, "user saved");
            caller.audit(&state, events::SET_USER, audited);
            Ok(StatusCode::OK)
        }
        Ok(Err(UserError::PasswordRequired)) => Err(RestError::field("password", "Password is required")),
        Ok(Err(e @ UserError::InvalidPassword(_))) => Err(RestError::field("password", e.to_string())),
        Ok(Err(e @ UserError::InvalidId(_))) => Err(RestError::global(StatusCode::BAD_REQUEST, e.to_string())),
        Ok(Err(e @ UserError::UnknownGroups(_))) => Err(RestError::field("groups", e.to_string())),
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
    let Some(user) = state.node.users.get(&id) else {
        return Err(RestError::text(StatusCode::NOT_FOUND, USER_NOT_FOUND));
    };
    caller.require_grantable(user.all_roles())?;
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

/// `GET /settings/rbac/groups`.
pub(crate) async fn groups(State(state): State<RestState>, caller: Caller) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    Ok(Json(Value::Array(state.node.users.groups().iter().map(|g| group_json(g)).collect())))
}

/// `GET /settings/rbac/groups/<g>` (gocb maps "Unknown group." to GroupNotFound).
pub(crate) async fn group(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    caller.require(caller.can_read_security(), || "cluster.admin.security!read".to_owned())?;
    match state.node.users.group(&id) {
        Some(g) => Ok(Json(group_json(&g))),
        None => Err(RestError::text(StatusCode::NOT_FOUND, UNKNOWN_GROUP)),
    }
}

/// `PUT /settings/rbac/groups/<g>` with form `roles` (required, may be empty) and `description`; replaces the group
/// whole, as ns_server does.
pub(crate) async fn put_group(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security.local!write".to_owned())?;
    if let Err(UserError::InvalidId(why)) = crate::auth::validate_id(&id) {
        // Group names follow the user-id rules, as in ns_server.
        return Err(RestError::global(StatusCode::BAD_REQUEST, format!("invalid group name: {why}")));
    }
    let form = Form::parse(&body);
    let Some(roles) = form.get("roles") else { return Err(RestError::field("roles", "The value must be supplied")) };
    let roles = parse_roles(&state.node, roles)?;
    if let Some(key) = form.keys().find(|k| !matches!(*k, "roles" | "description")) {
        return Err(RestError::field(key, "Unsupported key"));
    }
    let held = state.node.users.group(&id).map(|g| g.roles.clone()).unwrap_or_default();
    caller.require_grantable(roles.iter().chain(&held))?;
    let group = Group { id: id.clone(), description: form.get("description").unwrap_or_default().to_owned(), roles };
    let existed = state.node.users.group(&id).is_some();
    let fields = crate::audit_fields![
        ("group_name", id.clone()),
        ("roles", group.roles.iter().map(|r| r.to_string()).collect::<Vec<_>>()),
        ("group_description", group.description.clone()),
        ("reason", if existed { "updated" } else { "added" }),
    ];
    let stored = state.node.propose_group_change(move |groups| {
        groups.retain(|g| g.id != group.id);
        groups.push(group);
        groups.sort_by(|a, b| a.id.cmp(&b.id));
        Ok::<(), ()>(())
    });
    if let Err(e) = stored.await {
        return Err(RestError::global(StatusCode::SERVICE_UNAVAILABLE, format!("saving the group failed: {e}")));
    }
    tracing::info!(group = %id, "group saved");
    caller.audit(&state, events::SET_USER_GROUP, fields);
    Ok(StatusCode::OK)
}

/// `DELETE /settings/rbac/groups/<g>`: the group goes, and so does every user's membership of it.
pub(crate) async fn delete_group(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, RestError> {
    caller.require(caller.can_write_security(), || "cluster.admin.security.local!write".to_owned())?;
    let Some(group) = state.node.users.group(&id) else {
        return Err(RestError::text(StatusCode::NOT_FOUND, GROUP_NOT_FOUND));
    };
    caller.require_grantable(&group.roles)?;
    let unavailable = |e| RestError::global(StatusCode::SERVICE_UNAVAILABLE, format!("deleting the group failed: {e}"));
    // The memberships go first: should the second step fail, no user is left naming a group that is gone (which a
    // group created later with the same name would silently extend).
    let group_id = id.clone();
    let members = state.node.propose_user_change(move |users| {
        for user in users.list().into_iter().filter(|u| u.groups.contains(&group_id)) {
            let groups = user.groups.iter().filter(|g| **g != group_id).cloned().collect();
            users.upsert_member(&user.id, &user.name, None, user.roles.clone(), Some(groups))?;
        }
        Ok::<(), UserError>(())
    });
    members
        .await
        .map_err(unavailable)?
        .map_err(|e| RestError::global(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let group_id = id.clone();
    let removed = state.node.propose_group_change(move |groups| {
        let before = groups.len();
        groups.retain(|g| g.id != group_id);
        if groups.len() == before {
            Err(())
        } else {
            Ok(())
        }
    });
    if removed.await.map_err(unavailable)?.is_err() {
        return Err(RestError::text(StatusCode::NOT_FOUND, GROUP_NOT_FOUND));
    }
    tracing::info!(group = %id, "group deleted");
    caller.audit(&state, events::DELETE_USER_GROUP, crate::audit_fields![("group_name", id)]);
    Ok(StatusCode::OK)
}

/// A group as the RBAC API shows it.
fn group_json(group: &Group) -> Value {
    let roles: Vec<Value> = group.roles.iter().map(role_json).collect();
    json!({"id": group.id, "roles": roles, "description": group.description})
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
    let stored = if caller.builtin && state.node.has_peer_secret() {
        // The administrator's password is the cluster's, as a reset makes it (`resetAdminPassword`).
        state.node.propose_admin_password(&password).await.map(Ok).map_err(|e| e.to_string())
    } else if caller.builtin {
        // A cluster formed by an older settee: its nodes call each other with the command line's password, so the
        // administrator's stays per node.
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

/// A user as the RBAC API shows it: each role once, with its origins (the user itself and/or the groups giving it).
fn user_json(user: &User) -> Value {
    let mut roles: Vec<(Role, Vec<Value>)> = Vec::new();
    let origins = user.roles.iter().map(|r| (r, json!({"type": "user"})));
    let from_groups = user.group_roles.iter().map(|(g, r)| (r, json!({"type": "group", "name": g})));
    for (role, origin) in origins.chain(from_groups) {
        match roles.iter_mut().find(|(r, _)| r == role) {
            Some((_, list)) => list.push(origin),
            None => roles.push((role.clone(), vec![origin])),
        }
    }
    let roles: Vec<Value> = roles
        .into_iter()
        .map(|(r, origins)| {
            let mut v = role_json(&r);
            v["origins"] = Value::Array(origins);
            v
        })
        .collect();
    let mut out = json!({
        "id": user.id,
        "domain": "local",
        "roles": roles,
        "groups": user.groups,
        "external_groups": [],
        "name": user.name,
    });
    if let Some(secs) = user.password_change_date_secs {
        out["password_change_date"] = json!(iso8601_utc(secs));
    }
    if let Some(limits) = &user.limits {
        out["limits"] = serde_json::to_value(limits).unwrap_or(Value::Null);
    }
    out
}

/// `YYYY-MM-DDTHH:MM:SS.000Z` for seconds since the Unix epoch (gocb parses it as RFC 3339).
fn iso8601_utc(secs: u64) -> String {
    settee_types::UtcTime::from_unix_nanos(secs.saturating_mul(1_000_000_000)).iso8601_millis()
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
    async fn groups_round_trip_and_non_admins_cannot_manage_users() {
        // Proves the group endpoints' answers (empty list, 404 texts, 400s for a missing `roles` and an unknown
        // key, PUT then GET and list, DELETE), and 403 for a data-only user on user management.
        let app = TestApp::new();
        assert_eq!(app.get_ok("/settings/rbac/groups").await, json!([]));
        let group = app.call("GET", "/settings/rbac/groups/g", Some(ADMIN), None).await;
        assert_eq!((group.status, group.json), (StatusCode::NOT_FOUND, json!("Unknown group.")));
        let no_roles = app.call("PUT", "/settings/rbac/groups/g", Some(ADMIN), Some("description=x")).await;
        assert_eq!(no_roles.status, StatusCode::BAD_REQUEST);
        let odd = app.call("PUT", "/settings/rbac/groups/g", Some(ADMIN), Some("roles=admin&ldap=x")).await;
        assert_eq!(odd.status, StatusCode::BAD_REQUEST);
        let put = app.call("PUT", "/settings/rbac/groups/g", Some(ADMIN), Some("roles=ro_admin&description=d")).await;
        assert_eq!(put.status, StatusCode::OK);
        let expected = json!({"id": "g", "roles": [{"role": "ro_admin"}], "description": "d"});
        assert_eq!(app.get_ok("/settings/rbac/groups/g").await, expected);
        assert_eq!(app.get_ok("/settings/rbac/groups").await, json!([expected]));
        let gone = app.call("DELETE", "/settings/rbac/groups/g", Some(ADMIN), None).await;
        assert_eq!(gone.status, StatusCode::OK);
        let again = app.call("DELETE", "/settings/rbac/groups/g", Some(ADMIN), None).await;
        assert_eq!((again.status, again.json), (StatusCode::NOT_FOUND, json!("Group was not found.")));
        app.add_user("app", "password", "bucket_full_access[default]");
        let me = Some(("app", "password"));
        assert_eq!(app.call("GET", "/settings/rbac/users", me, None).await.status, StatusCode::FORBIDDEN);
        assert_eq!(app.call("PUT", ALICE, me, Some("password=secret1")).await.status, StatusCode::FORBIDDEN);
        assert_eq!(
            app.call("PUT", "/settings/rbac/groups/h", me, Some("roles=admin")).await.status,
            StatusCode::FORBIDDEN
        );
    }

    #[tokio::test]
    async fn a_local_security_admin_cannot_hand_out_or_touch_administrative_roles() {
        // Regression (issue 17): security_admin_local could create a user with the admin role (itself included),
        // or a group giving it. Proves only a full administrator touches the administrative roles, directly or
        // through a group, while a local security admin still manages ordinary users and groups.
        let app = TestApp::new();
        app.add_user("sec", "password", "security_admin_local");
        let sec = Some(("sec", "password"));
        let forbidden = |status: StatusCode| assert_eq!(status, StatusCode::FORBIDDEN);
        forbidden(app.call("PUT", ALICE, sec, Some("password=secret1&roles=admin")).await.status);
        forbidden(app.call("PUT", "/settings/rbac/users/local/sec", sec, Some("roles=admin")).await.status);
        forbidden(app.call("PUT", "/settings/rbac/groups/admins", sec, Some("roles=admin")).await.status);
        let admins = app.call("PUT", "/settings/rbac/groups/admins", Some(ADMIN), Some("roles=admin")).await;
        assert_eq!(admins.status, StatusCode::OK);
        forbidden(app.call("PUT", ALICE, sec, Some("password=secret1&groups=admins")).await.status);
        forbidden(app.call("DELETE", "/settings/rbac/groups/admins", sec, None).await.status);
        app.add_user("root2", "password", "admin");
        forbidden(app.call("DELETE", "/settings/rbac/users/local/root2", sec, None).await.status);
        let ok = app.call("PUT", ALICE, sec, Some("password=secret1&roles=data_reader%5Bdefault%5D")).await;
        assert_eq!(ok.status, StatusCode::OK);
        assert!(!app.state.node.users.is_admin("alice"));
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

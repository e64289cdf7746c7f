//! Roles as the RBAC REST API shows them: `{"role","bucket_name","scope_name","collection_name"}` objects, and
//! the catalogue `GET /settings/rbac/roles` lists.
//!
//! Which roles exist and what they allow is decided in `crate::auth::role`; this file only adds what REST shows
//! about them (display name, description, how many of bucket/scope/collection they take). A test checks that the
//! two lists agree.

use serde_json::{json, Map, Value};

use crate::auth::Role;

/// One role as `GET /settings/rbac/roles` describes it.
pub(crate) struct RoleInfo {
    pub(crate) name: &'static str,
    display_name: &'static str,
    description: &'static str,
    /// 0 for cluster roles; else how many of `bucket:scope:collection` the role is qualified by.
    pub(crate) depth: u8,
}

const fn role(name: &'static str, display_name: &'static str, description: &'static str, depth: u8) -> RoleInfo {
    RoleInfo { name, display_name, description, depth }
}

/// Every role settee accepts, in Couchbase's display order.
pub(crate) const ROLES: &[RoleInfo] = &[
    role("admin", "Full Admin", "Manages every cluster feature, security included, and reads and writes all data.", 0),
    role("ro_admin", "Read-Only Admin", "Reads cluster settings and statistics; cannot change them.", 0),
    role("cluster_admin", "Cluster Admin", "Manages every cluster feature except security; no data access.", 0),
    role("security_admin", "Security Admin", "Manages users, roles and security settings.", 0),
    role("security_admin_local", "Local User Security Admin", "Manages local users and their roles.", 0),
    role("security_admin_external", "External User Security Admin", "Manages external users and their roles.", 0),
    role("replication_admin", "XDCR Admin", "Manages cross data center replication.", 0),
    role("analytics_admin", "Analytics Admin", "Manages the analytics service.", 0),
    role("analytics_reader", "Analytics Reader", "Queries analytics datasets.", 0),
    role("query_system_catalog", "Query System Catalog", "Reads the query system catalog.", 0),
    role("query_external_access", "Query CURL Access", "Runs CURL() in queries.", 0),
    role("eventing_admin", "Eventing Full Admin", "Manages eventing functions.", 0),
    role("backup_admin", "Full Backup Admin", "Manages backups.", 0),
    role("external_stats_reader", "External Stats Reader", "Reads statistics through the Prometheus endpoint.", 0),
    role("bucket_admin", "Bucket Admin", "Manages a bucket's settings, scopes and collections.", 1),
    role("bucket_full_access", "Application Access", "Reads and writes all data of a bucket.", 1),
    role("scope_admin", "Manage Scopes", "Manages the collections of a scope.", 2),
    role("data_reader", "Data Reader", "Reads documents.", 3),
    role("data_writer", "Data Writer", "Writes documents.", 3),
    role("data_dcp_reader", "Data DCP Reader", "Reads documents and streams changes over DCP.", 3),
    role("data_backup", "Data Backup & Restore", "Backs up and restores a bucket's data.", 1),
    role("data_monitoring", "Data Monitor", "Reads data statistics.", 3),
    role("views_admin", "Views Admin", "Manages views.", 1),
    role("views_reader", "Views Reader", "Reads views.", 1),
    role("replication_target", "XDCR Inbound", "Receives cross data center replication.", 1),
    role("fts_admin", "Search Admin", "Manages search indexes.", 1),
    role("fts_searcher", "Search Reader", "Queries search indexes.", 3),
    role("query_select", "Query Select", "Runs SELECT statements.", 3),
    role("query_insert", "Query Insert", "Runs INSERT statements.", 3),
    role("query_update", "Query Update", "Runs UPDATE statements.", 3),
    role("query_delete", "Query Delete", "Runs DELETE statements.", 3),
    role("query_manage_index", "Query Manage Index", "Manages query indexes.", 3),
    role("mobile_sync_gateway", "Sync Gateway", "Lets Sync Gateway use a bucket.", 1),
    role("analytics_manager", "Analytics Manager", "Manages analytics links and datasets of a bucket.", 1),
    role("analytics_select", "Analytics Select", "Queries analytics datasets of a bucket.", 3),
];

/// The role's name without its parameter: `data_reader` for `data_reader[b]`.
pub(crate) fn role_name(role: &Role) -> String {
    let text = role.to_string();
    match text.split_once('[') {
        Some((name, _)) => name.to_owned(),
        None => text,
    }
}

fn info(name: &str) -> Option<&'static RoleInfo> {
    ROLES.iter().find(|r| r.name == name)
}

/// A granted role as user JSON shows it; unqualified levels are `*`, as ns_server prints them.
pub(crate) fn role_json(role: &Role) -> Value {
    let name = role_name(role);
    let mut out = Map::new();
    if let Role::Bucket(_, target) = role {
        let depth = info(&name).map_or(1, |r| r.depth);
        out.insert("bucket_name".into(), json!(target.bucket));
        if depth >= 2 {
            out.insert("scope_name".into(), json!(target.scope.as_deref().unwrap_or("*")));
        }
        if depth >= 3 {
            out.insert("collection_name".into(), json!(target.collection.as_deref().unwrap_or("*")));
        }
    }
    out.insert("role".into(), json!(name));
    Value::Object(out)
}

/// The body of `GET /settings/rbac/roles`.
pub(crate) fn catalogue() -> Value {
    let roles: Vec<Value> = ROLES
        .iter()
        .map(|r| {
            let mut v = json!({"role": r.name});
            for (level, key) in ["bucket_name", "scope_name", "collection_name"].iter().enumerate() {
                if usize::from(r.depth) > level {
                    v[*key] = json!("*");
                }
            }
            v["name"] = json!(r.display_name);
            v["desc"] = json!(r.description);
            v
        })
        .collect();
    Value::Array(roles)
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::super::testing::TestApp;
    use super::*;

    #[test]
    fn catalogue_and_auth_roles_agree() {
        // Proves every catalogued role parses with exactly its depth of qualifiers and no deeper.
        for r in ROLES {
            let params = ["*", "*:*", "*:*:*"];
            if r.depth == 0 {
                assert!(r.name.parse::<Role>().is_ok(), "{}", r.name);
                continue;
            }
            let full = format!("{}[{}]", r.name, params[usize::from(r.depth) - 1]);
            assert!(full.parse::<Role>().is_ok(), "{full}");
            if let Some(deeper) = params.get(usize::from(r.depth)) {
                assert!(format!("{}[{deeper}]", r.name).parse::<Role>().is_err(), "{} deeper", r.name);
            }
        }
    }

    #[test]
    fn role_json_fills_unqualified_levels_with_stars() {
        // Proves the user-JSON shape for cluster, bucket, scope-level and collection-level roles.
        let j = |s: &str| role_json(&s.parse::<Role>().unwrap());
        assert_eq!(j("admin"), json!({"role": "admin"}));
        assert_eq!(j("bucket_admin[b]"), json!({"bucket_name": "b", "role": "bucket_admin"}));
        assert_eq!(
            j("data_reader[b]"),
            json!({"bucket_name": "b", "scope_name": "*", "collection_name": "*", "role": "data_reader"})
        );
        assert_eq!(j("data_writer[b:s:c]")["collection_name"], "c");
        assert_eq!(j("scope_admin[b:s]"), json!({"bucket_name": "b", "scope_name": "s", "role": "scope_admin"}));
    }

    #[tokio::test]
    async fn roles_endpoint_lists_descriptors_the_sdks_parse() {
        // Proves GET /settings/rbac/roles answers 200 with role/name/desc on every entry and `*` parameters.
        let app = TestApp::new();
        let roles = app.get_ok("/settings/rbac/roles").await;
        let list = roles.as_array().unwrap();
        assert_eq!(list.len(), ROLES.len());
        assert!(list.iter().all(|r| r["role"].is_string() && r["name"].is_string() && r["desc"].is_string()));
        let reader = list.iter().find(|r| r["role"] == "data_reader").unwrap();
        assert_eq!(reader["collection_name"], "*");
        app.add_user("app", "password", "data_reader[default]");
        let reply = app.call("GET", "/settings/rbac/roles", Some(("app", "password")), None).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN);
    }
}

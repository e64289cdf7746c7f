//! Couchbase RBAC roles as strings (`admin`, `data_reader[travel-sample]`, `data_reader[b:s:c]`) and what each
//! one allows settee to do.
//!
//! A role on a whole bucket (`data_reader[b]`, `[*]`) counts in [`Role::bucket_access`]; one narrowed to a scope or
//! a collection (`data_reader[b:s]`, `[b:s:c]`) counts only in [`Role::scoped_grant`], for the documents of that
//! scope or collection: the KV port checks it per request against the collection the request names, as kv_engine
//! checks collection privileges. Privileges that are about the whole bucket (DCP, STAT, the bucket's settings)
//! come only from roles on the whole bucket.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A role that applies to the whole cluster and takes no `[...]` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClusterRole {
    Admin,
    RoAdmin,
    ClusterAdmin,
    SecurityAdmin,
    SecurityAdminLocal,
    SecurityAdminExternal,
    ReplicationAdmin,
    AnalyticsAdmin,
    AnalyticsReader,
    QuerySystemCatalog,
    QueryExternalAccess,
    EventingAdmin,
    BackupAdmin,
    ExternalStatsReader,
}

/// A role that applies to one bucket (or `*`), written `name[bucket]` and for some `name[bucket:scope:coll]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BucketRole {
    BucketAdmin,
    BucketFullAccess,
    ScopeAdmin,
    DataReader,
    DataWriter,
    DataDcpReader,
    DataBackup,
    DataMonitoring,
    ViewsAdmin,
    ViewsReader,
    ReplicationTarget,
    FtsAdmin,
    FtsSearcher,
    QuerySelect,
    QueryInsert,
    QueryUpdate,
    QueryDelete,
    QueryManageIndex,
    MobileSyncGateway,
    AnalyticsManager,
    AnalyticsSelect,
}

impl BucketRole {
    /// What the role allows on its bucket, following ns_server's role definitions (see [`Role::bucket_access`]).
    fn access(self) -> BucketAccess {
        const fn access(read: bool, write: bool, dcp: bool, stats: bool) -> BucketAccess {
            BucketAccess { read, write, manage: false, dcp, stats, meta_write: false }
        }
        let stats_only = access(false, false, false, true);
        match self {
            // No data access, as Couchbase's bucket_admin since 5.0: the bucket's settings, its scopes and
            // collections, and its statistics.
            BucketRole::BucketAdmin => BucketAccess { manage: true, ..stats_only },
            BucketRole::BucketFullAccess | BucketRole::DataBackup | BucketRole::MobileSyncGateway => {
                BucketAccess { meta_write: true, ..access(true, true, true, true) }
            }
            BucketRole::DataReader => access(true, false, false, false),
            BucketRole::DataDcpReader => access(true, false, true, false),
            BucketRole::DataWriter => access(false, true, false, false),
            BucketRole::DataMonitoring => stats_only,
            // XDCR's inbound writes: `data.meta!write` and stats, no plain document access.
            BucketRole::ReplicationTarget => BucketAccess { meta_write: true, ..stats_only },
            _ => BucketAccess::NONE,
        }
    }
}

/// Every cluster role with its Couchbase name; the only place names are written.
const CLUSTER_ROLES: &[(ClusterRole, &str)] = &[
    (ClusterRole::Admin, "admin"),
    (ClusterRole::RoAdmin, "ro_admin"),
    (ClusterRole::ClusterAdmin, "cluster_admin"),
    (ClusterRole::SecurityAdmin, "security_admin"),
    (ClusterRole::SecurityAdminLocal, "security_admin_local"),
    (ClusterRole::SecurityAdminExternal, "security_admin_external"),
    (ClusterRole::ReplicationAdmin, "replication_admin"),
    (ClusterRole::AnalyticsAdmin, "analytics_admin"),
    (ClusterRole::AnalyticsReader, "analytics_reader"),
    (ClusterRole::QuerySystemCatalog, "query_system_catalog"),
    (ClusterRole::QueryExternalAccess, "query_external_access"),
    (ClusterRole::EventingAdmin, "eventing_admin"),
    (ClusterRole::BackupAdmin, "backup_admin"),
    (ClusterRole::ExternalStatsReader, "external_stats_reader"),
];

/// Every bucket role with its name and how many of `bucket:scope:collection` it may name (1 to 3).
const BUCKET_ROLES: &[(BucketRole, &str, usize)] = &[
    (BucketRole::BucketAdmin, "bucket_admin", 1),
    (BucketRole::BucketFullAccess, "bucket_full_access", 1),
    (BucketRole::ScopeAdmin, "scope_admin", 2),
    (BucketRole::DataReader, "data_reader", 3),
    (BucketRole::DataWriter, "data_writer", 3),
    (BucketRole::DataDcpReader, "data_dcp_reader", 3),
    (BucketRole::DataBackup, "data_backup", 1),
    (BucketRole::DataMonitoring, "data_monitoring", 3),
    (BucketRole::ViewsAdmin, "views_admin", 1),
    (BucketRole::ViewsReader, "views_reader", 1),
    (BucketRole::ReplicationTarget, "replication_target", 1),
    (BucketRole::FtsAdmin, "fts_admin", 1),
    (BucketRole::FtsSearcher, "fts_searcher", 3),
    (BucketRole::QuerySelect, "query_select", 3),
    (BucketRole::QueryInsert, "query_insert", 3),
    (BucketRole::QueryUpdate, "query_update", 3),
    (BucketRole::QueryDelete, "query_delete", 3),
    (BucketRole::QueryManageIndex, "query_manage_index", 3),
    (BucketRole::MobileSyncGateway, "mobile_sync_gateway", 1),
    (BucketRole::AnalyticsManager, "analytics_manager", 1),
    (BucketRole::AnalyticsSelect, "analytics_select", 3),
];

/// What a role parameter names. `*` in the bucket position means every bucket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RoleTarget {
    pub bucket: String,
    pub scope: Option<String>,
    pub collection: Option<String>,
}

impl RoleTarget {
    /// A whole bucket, or every bucket when `bucket` is `*`.
    pub fn bucket(bucket: impl Into<String>) -> RoleTarget {
        RoleTarget { bucket: bucket.into(), scope: None, collection: None }
    }

    pub fn matches_bucket(&self, bucket: &str) -> bool {
        self.bucket == "*" || self.bucket == bucket
    }

    /// Whether the target is a whole bucket (no scope named).
    pub fn is_whole_bucket(&self) -> bool {
        self.scope.is_none()
    }

    /// Whether the target reaches collection `collection` of scope `scope` in `bucket`.
    pub fn covers(&self, bucket: &str, scope: &str, collection: &str) -> bool {
        self.matches_bucket(bucket)
            && admits(self.scope.as_deref(), scope)
            && admits(self.collection.as_deref(), collection)
    }
}

/// Whether a granted name (`*` for any) admits `name`; none granted (a wider target) admits every name.
fn admits(granted: Option<&str>, name: &str) -> bool {
    granted.is_none_or(|g| g == "*" || g == name)
}

/// What a role narrowed to a scope or a collection of one bucket allows on the documents there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedGrant {
    pub scope: String,
    /// None: every collection of the scope.
    pub collection: Option<String>,
    pub access: BucketAccess,
}

impl ScopedGrant {
    /// Whether the grant covers collection `collection` of scope `scope` (`*` matches any name).
    pub fn covers(&self, scope: &str, collection: &str) -> bool {
        admits(Some(&self.scope), scope) && admits(self.collection.as_deref(), collection)
    }
}

/// One role as granted to a user.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    Cluster(ClusterRole),
    Bucket(BucketRole, RoleTarget),
}

/// What a user may do with one bucket's data and settings: the memcached privileges ns_server derives from the
/// roles (`Read`, `Upsert`..., `DcpProducer`, `SimpleStats`), folded into the checks settee makes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketAccess {
    pub read: bool,
    pub write: bool,
    /// Change the bucket's settings, flush it, manage its scopes and collections.
    pub manage: bool,
    /// Open a DCP producer on the bucket (`data.dcp!read`, memcached's `DcpProducer`): streaming every document
    /// of a bucket is a privilege of its own, not implied by reading documents one key at a time.
    pub dcp: bool,
    /// Read the bucket's statistics with STAT (`stats!read`, memcached's `SimpleStats`).
    pub stats: bool,
    /// Write documents with the metadata the caller gives (SET/ADD/DEL_WITH_META: `data.meta!write`, memcached's
    /// `MetaWrite`): what restores and XDCR need, not implied by writing documents.
    pub meta_write: bool,
}

impl BucketAccess {
    pub const NONE: BucketAccess =
        BucketAccess { read: false, write: false, manage: false, dcp: false, stats: false, meta_write: false };
    pub const ALL: BucketAccess =
        BucketAccess { read: true, write: true, manage: true, dcp: true, stats: true, meta_write: true };

    pub fn union(self, other: BucketAccess) -> BucketAccess {
        BucketAccess {
            read: self.read || other.read,
            write: self.write || other.write,
            manage: self.manage || other.manage,
            dcp: self.dcp || other.dcp,
            stats: self.stats || other.stats,
            meta_write: self.meta_write || other.meta_write,
        }
    }

    /// Whether the user holds any privilege on the bucket, which is what SELECT_BUCKET asks (kv_engine lets a
    /// connection select a bucket it has any privilege on; each command then checks its own).
    pub fn any(self) -> bool {
        self.read || self.write || self.manage || self.dcp || self.stats
    }
}

/// Why a role string was refused; the REST layer answers 400 for either.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    #[error("unknown role: {0}")]
    Unknown(String),
    #[error("malformed role: {0}")]
    Malformed(String),
}

impl Role {
    /// Parses a comma-separated list as the REST API takes it (`admin,data_reader[b]`), ignoring blanks around
    /// entries. An empty string is an empty list.
    pub fn parse_list(list: &str) -> Result<Vec<Role>, RoleError> {
        list.split(',').map(str::trim).filter(|r| !r.is_empty()).map(str::parse).collect()
    }

    /// What this role allows on `bucket`, following ns_server's role definitions: DCP (`data.dcp!read`) comes
    /// with admin, bucket_full_access, data_backup, mobile_sync_gateway and data_dcp_reader, never with
    /// data_reader; STAT (`stats!read`) with the administrators, bucket_full_access, data_backup,
    /// mobile_sync_gateway, data_monitoring and replication_target, never with data_reader, data_writer or
    /// data_dcp_reader; the with-meta writes (`data.meta!write`) with admin, bucket_full_access, data_backup,
    /// mobile_sync_gateway and replication_target, never with data_writer. Roles about query, search, views or analytics grant no KV access.
    /// Only a role on the whole bucket counts here; see [`Role::scoped_grant`] for narrower ones.
    pub fn bucket_access(&self, bucket: &str) -> BucketAccess {
        let stats_only = BucketAccess { stats: true, ..BucketAccess::NONE };
        match self {
            Role::Cluster(ClusterRole::Admin) => BucketAccess::ALL,
            Role::Cluster(ClusterRole::ClusterAdmin) => BucketAccess { manage: true, ..stats_only },
            Role::Cluster(ClusterRole::RoAdmin) => stats_only,
            Role::Cluster(_) => BucketAccess::NONE,
            Role::Bucket(role, target) if target.matches_bucket(bucket) && target.is_whole_bucket() => role.access(),
            Role::Bucket(..) => BucketAccess::NONE,
        }
    }

    /// What a role narrowed to a scope or collection of `bucket` allows on the documents there: read and write
    /// only (the privileges a collection can carry; DCP, STAT and settings are about the whole bucket). None for
    /// other roles, other buckets, and roles on a whole bucket.
    pub fn scoped_grant(&self, bucket: &str) -> Option<ScopedGrant> {
        let Role::Bucket(role, target) = self else { return None };
        let scope = target.scope.as_ref().filter(|_| target.matches_bucket(bucket))?;
        let full = role.access();
        let access = BucketAccess { read: full.read, write: full.write, ..BucketAccess::NONE };
        access.any().then(|| ScopedGrant { scope: scope.clone(), collection: target.collection.clone(), access })
    }

    /// True for roles that may read cluster-wide settings (pools, bucket list, RBAC listings).
    pub fn can_read_settings(&self) -> bool {
        matches!(self, Role::Cluster(ClusterRole::Admin | ClusterRole::RoAdmin | ClusterRole::ClusterAdmin))
    }
}

impl FromStr for Role {
    type Err = RoleError;

    fn from_str(text: &str) -> Result<Role, RoleError> {
        let (name, parameter) = match text.split_once('[') {
            Some((name, rest)) => {
                let inner = rest.strip_suffix(']').ok_or_else(|| RoleError::Malformed(text.to_owned()))?;
                (name, Some(inner))
            }
            None => (text, None),
        };
        if let Some((role, _)) = CLUSTER_ROLES.iter().find(|(_, n)| *n == name) {
            return match parameter {
                None => Ok(Role::Cluster(*role)),
                Some(_) => Err(RoleError::Malformed(text.to_owned())),
            };
        }
        let (role, _, depth_max) =
            BUCKET_ROLES.iter().find(|(_, n, _)| *n == name).ok_or_else(|| RoleError::Unknown(name.to_owned()))?;
        let parameter = parameter.ok_or_else(|| RoleError::Malformed(text.to_owned()))?;
        let parts: Vec<&str> = parameter.split(':').collect();
        if parts.len() > *depth_max || !parts.iter().all(|p| is_valid_name(p)) {
            return Err(RoleError::Malformed(text.to_owned()));
        }
        let target = RoleTarget {
            bucket: parts[0].to_owned(),
            scope: parts.get(1).map(|s| (*s).to_owned()),
            collection: parts.get(2).map(|s| (*s).to_owned()),
        };
        Ok(Role::Bucket(*role, target))
    }
}

/// A bucket, scope or collection name as Couchbase allows them, or the `*` wildcard.
fn is_valid_name(name: &str) -> bool {
    name == "*"
        || (!name.is_empty()
            && name.len() <= 251
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'%' | b'.')))
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Cluster(role) => {
                let name = CLUSTER_ROLES.iter().find(|(r, _)| r == role).map(|(_, n)| *n);
                f.write_str(name.expect("every ClusterRole appears in CLUSTER_ROLES"))
            }
            Role::Bucket(role, target) => {
                let name = BUCKET_ROLES.iter().find(|(r, _, _)| r == role).map(|(_, n, _)| *n);
                write!(f, "{}[{}", name.expect("every BucketRole appears in BUCKET_ROLES"), target.bucket)?;
                for part in [&target.scope, &target.collection].into_iter().flatten() {
                    write!(f, ":{part}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Role, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_name_round_trips() {
        // Proves each table entry parses from its printed form and prints back byte for byte.
        for (role, name) in CLUSTER_ROLES {
            assert_eq!(name.parse::<Role>().unwrap(), Role::Cluster(*role));
            assert_eq!(Role::Cluster(*role).to_string(), *name);
        }
        for (role, name, _) in BUCKET_ROLES {
            let text = format!("{name}[travel-sample]");
            assert_eq!(text.parse::<Role>().unwrap(), Role::Bucket(*role, RoleTarget::bucket("travel-sample")));
            assert_eq!(text.parse::<Role>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn scope_and_collection_qualifiers_are_kept() {
        // Proves Couchbase 7 qualifiers parse into the target and print back unchanged.
        let role: Role = "data_reader[b:inventory:airline]".parse().unwrap();
        let expected = RoleTarget {
            bucket: "b".to_owned(),
            scope: Some("inventory".to_owned()),
            collection: Some("airline".to_owned()),
        };
        assert_eq!(role, Role::Bucket(BucketRole::DataReader, expected));
        assert_eq!(role.to_string(), "data_reader[b:inventory:airline]");
        assert_eq!("scope_admin[b:s]".parse::<Role>().unwrap().to_string(), "scope_admin[b:s]");
        assert_eq!("data_writer[*]".parse::<Role>().unwrap().to_string(), "data_writer[*]");
    }

    #[test]
    fn bad_role_strings_are_refused_with_the_right_kind() {
        // Proves unknown names are Unknown and bad brackets, parameters or qualifiers are Malformed.
        assert!(matches!("superuser".parse::<Role>(), Err(RoleError::Unknown(_))));
        assert!(matches!("superuser[b]".parse::<Role>(), Err(RoleError::Unknown(_))));
        assert!(matches!("".parse::<Role>(), Err(RoleError::Unknown(_))));
        for bad in [
            "admin[b]",
            "data_reader",
            "data_reader[]",
            "data_reader[b",
            "data_reader[b]x",
            "bucket_admin[b:s]",
            "scope_admin[b:s:c]",
            "data_reader[b:s:c:d]",
            "data_reader[b::c]",
            "data_reader[b c]",
            "data_reader[[b]]",
        ] {
            assert!(matches!(bad.parse::<Role>(), Err(RoleError::Malformed(_))), "{bad}");
        }
    }

    #[test]
    fn role_lists_parse_like_the_rest_api_sends_them() {
        // Proves comma lists with spaces parse in order, an empty list is empty, and one bad entry fails all.
        let roles = Role::parse_list("admin, data_reader[b] ,ro_admin").unwrap();
        assert_eq!(roles.iter().map(Role::to_string).collect::<Vec<_>>(), ["admin", "data_reader[b]", "ro_admin"]);
        assert!(Role::parse_list("").unwrap().is_empty());
        assert!(Role::parse_list("admin,nope").is_err());
        let json = serde_json::to_string(&roles).unwrap();
        assert_eq!(json, r#"["admin","data_reader[b]","ro_admin"]"#);
        assert_eq!(serde_json::from_str::<Vec<Role>>(&json).unwrap(), roles);
    }

    #[test]
    fn bucket_access_follows_role_and_target() {
        // Proves the access table: admin all, bucket_admin its bucket's settings and stats but no data (as
        // Couchbase since 5.0), data roles per flag, `*` wildcard, and a narrowed role nothing bucket-wide.
        let access = |role: &str, bucket: &str| role.parse::<Role>().unwrap().bucket_access(bucket);
        let rwm = |read, write, manage| BucketAccess { read, write, manage, ..BucketAccess::NONE };
        let stats = BucketAccess { stats: true, ..BucketAccess::NONE };
        let full = BucketAccess { manage: false, ..BucketAccess::ALL };
        assert_eq!(access("admin", "any"), BucketAccess::ALL);
        assert_eq!(access("ro_admin", "any"), stats);
        assert_eq!(access("cluster_admin", "any"), BucketAccess { manage: true, ..stats });
        assert_eq!(access("bucket_admin[b]", "b"), BucketAccess { manage: true, ..stats });
        assert_eq!(access("bucket_admin[b]", "c"), BucketAccess::NONE);
        assert_eq!(access("bucket_full_access[b]", "b"), full);
        assert_eq!(access("bucket_full_access[*]", "zzz"), full);
        assert_eq!(access("data_backup[b]", "b"), full);
        assert_eq!(access("data_reader[b:s:c]", "b"), BucketAccess::NONE);
        assert_eq!(access("data_reader[b]", "b"), rwm(true, false, false));
        assert_eq!(access("data_writer[b]", "b"), rwm(false, true, false));
        assert_eq!(access("data_monitoring[b]", "b"), stats);
        assert_eq!(access("query_select[b]", "b"), BucketAccess::NONE);
        assert_eq!(access("views_admin[b]", "b"), BucketAccess::NONE);
        assert!(access("data_reader[B]", "b") == BucketAccess::NONE, "bucket names are case-sensitive");
    }

    #[test]
    fn dcp_needs_a_role_that_grants_the_dcp_privilege() {
        // Regression (issue 17): data_reader could open a DCP producer and stream the whole bucket. Proves only
        // the roles ns_server gives `data.dcp!read` grant it, with scope/collection qualifiers parsed alike.
        let dcp = |role: &str| role.parse::<Role>().unwrap().bucket_access("b").dcp;
        for allowed in ["admin", "bucket_full_access[b]", "data_backup[b]", "data_dcp_reader[b]", "data_dcp_reader[*]"]
        {
            assert!(dcp(allowed), "{allowed}");
        }
        // A narrowed DCP reader cannot stream the whole bucket (Couchbase would filter its streams instead).
        for refused in ["data_dcp_reader[b:s]", "data_dcp_reader[b:s:c]", "bucket_admin[b]", "data_dcp_reader[c]"] {
            assert!(!dcp(refused), "{refused}");
        }
        for refused in ["data_reader[b]", "data_writer[b]", "ro_admin", "cluster_admin"] {
            assert!(!dcp(refused), "{refused}");
        }
    }

    #[test]
    fn stat_needs_a_role_that_grants_the_stats_privilege() {
        // Regression (issue 17): STAT answered any connection with a bucket selected. Proves the data roles do not
        // carry `stats!read` and the monitoring and administrative ones do, as in ns_server.
        let stats = |role: &str| role.parse::<Role>().unwrap().bucket_access("b").stats;
        for allowed in ["admin", "ro_admin", "cluster_admin", "bucket_admin[b]", "bucket_full_access[b]"] {
            assert!(stats(allowed), "{allowed}");
        }
        for allowed in ["data_monitoring[b]", "data_backup[b]", "replication_target[b]"] {
            assert!(stats(allowed), "{allowed}");
        }
        for refused in ["data_reader[b]", "data_writer[b]", "data_dcp_reader[b]", "query_select[b]"] {
            assert!(!stats(refused), "{refused}");
        }
    }

    #[test]
    fn narrowed_roles_grant_their_scope_or_collection_only() {
        // Regression (issue 17): `data_reader[b:s:c]` read every collection of `b`. Proves a narrowed role grants
        // read or write on exactly its scope or collection of its bucket, and nothing for other roles or buckets.
        let grant = |role: &str, bucket: &str| role.parse::<Role>().unwrap().scoped_grant(bucket);
        let reader = grant("data_reader[b:s:c]", "b").expect("a grant");
        assert!(reader.access.read && !reader.access.write && !reader.access.dcp);
        assert!(reader.covers("s", "c") && !reader.covers("s", "d") && !reader.covers("t", "c"));
        let writer = grant("data_writer[b:s]", "b").expect("a grant");
        assert!(writer.access.write && !writer.access.read);
        assert!(writer.covers("s", "c") && writer.covers("s", "d") && !writer.covers("_default", "c"));
        assert!(grant("data_reader[b:s:c]", "other").is_none());
        assert!(grant("data_reader[*:s:c]", "any").is_some());
        assert!(grant("data_reader[b]", "b").is_none(), "whole-bucket roles count in bucket_access");
        assert!(grant("data_monitoring[b:s]", "b").is_none(), "no document privilege to narrow");
        assert!(grant("query_select[b:s:c]", "b").is_none(), "query roles grant no KV access");
    }

    #[test]
    fn with_meta_writes_need_a_role_that_grants_meta_write() {
        // Proves SET/DEL_WITH_META's privilege follows ns_server's `data.meta!write`: the backup, XDCR-target and
        // full-access roles hold it, data_writer (plain document writes) does not.
        let meta = |role: &str| role.parse::<Role>().unwrap().bucket_access("b").meta_write;
        for allowed in ["admin", "bucket_full_access[b]", "data_backup[b]", "replication_target[b]"] {
            assert!(meta(allowed), "{allowed}");
        }
        for refused in ["data_writer[b]", "data_reader[b]", "data_dcp_reader[b]", "ro_admin", "data_backup[c]"] {
            assert!(!meta(refused), "{refused}");
        }
    }
}

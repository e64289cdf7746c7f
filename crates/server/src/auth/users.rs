//! Local users: who exists, their display names, roles and credentials, and the privilege checks built on them.
//!
//! `UserStore` is shared by the KV listener and the REST layer. Every check takes a read lock on one map, so a
//! connection should not call it per request: resolve `bucket_access` once (at SELECT_BUCKET) and re-resolve
//! only when `generation()` has moved, which every change to the store bumps.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use settee_types::{Clock, SystemClock};

use super::{BucketAccess, Credentials, Role};

/// Longest user id Couchbase accepts, in characters.
const USER_ID_CHARS_MAX: usize = 128;

/// One local user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    /// Display name; may be empty.
    pub name: String,
    /// The roles given to the user itself.
    pub roles: Vec<Role>,
    /// The groups the user belongs to (`/settings/rbac/groups`), each adding its roles.
    #[serde(default)]
    pub groups: Vec<String>,
    /// The roles the user's groups give, with the group giving each: filled by the store from the current groups,
    /// never stored (a group's change reaches its members at once).
    #[serde(skip)]
    pub group_roles: Vec<(String, Role)>,
    pub credentials: Credentials,
    /// When the password was last set, in seconds since the Unix epoch.
    pub password_change_date_secs: Option<u64>,
    /// The user's per-service limits (`auth::limits`); None when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<super::UserLimits>,
}

/// A group of users (`/settings/rbac/groups`): roles its members get besides their own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub id: String,
    #[serde(default)]
    pub description: String,
    pub roles: Vec<Role>,
}

impl User {
    /// Every role the user holds: its own, then its groups'.
    pub fn all_roles(&self) -> impl Iterator<Item = &Role> {
        self.roles.iter().chain(self.group_roles.iter().map(|(_, role)| role))
    }

    /// The union of what each of the user's roles allows on `bucket`.
    pub fn bucket_access(&self, bucket: &str) -> BucketAccess {
        self.all_roles().fold(BucketAccess::NONE, |acc, role| acc.union(role.bucket_access(bucket)))
    }

    /// What the user's roles narrowed to a scope or collection of `bucket` allow there.
    pub fn scoped_grants(&self, bucket: &str) -> Vec<super::ScopedGrant> {
        self.all_roles().filter_map(|role| role.scoped_grant(bucket)).collect()
    }

    /// What the user may do with the documents of collection `collection` in scope `scope` of `bucket`: the
    /// whole-bucket roles, and those narrowed to that scope or collection.
    pub fn collection_access(&self, bucket: &str, scope: &str, collection: &str) -> BucketAccess {
        let narrowed = self.all_roles().filter_map(|role| role.scoped_grant(bucket));
        narrowed
            .filter(|grant| grant.covers(scope, collection))
            .fold(self.bucket_access(bucket), |acc, grant| acc.union(grant.access))
    }

    /// Whether the user may do anything with `bucket` or part of it (SELECT_BUCKET, seeing the bucket listed).
    pub fn any_access(&self, bucket: &str) -> bool {
        self.bucket_access(bucket).any() || self.all_roles().any(|role| role.scoped_grant(bucket).is_some())
    }

    /// Full administrator: every bucket, every setting, user management.
    pub fn is_admin(&self) -> bool {
        self.all_roles().any(|role| *role == Role::Cluster(super::ClusterRole::Admin))
    }

    /// May read cluster-wide settings (admin, ro_admin, cluster_admin).
    pub fn can_read_settings(&self) -> bool {
        self.all_roles().any(Role::can_read_settings)
    }
}

/// Why a change to the store was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserError {
    #[error("invalid user id: {0}")]
    InvalidId(&'static str),
    #[error("a password is required to create a user")]
    PasswordRequired,
    #[error("invalid password: {0}")]
    InvalidPassword(&'static str),
    #[error("Groups do not exist: {0}")]
    UnknownGroups(String),
}

/// The set of local users; clones share one store.
#[derive(Clone)]
pub struct UserStore {
    inner: Arc<Inner>,
}

/// Lock order: `users` before `groups`; `set_groups` releases `groups` before it takes `users`.
struct Inner {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    groups: RwLock<BTreeMap<String, Arc<Group>>>,
    generation: AtomicU64,
    clock: Arc<dyn Clock>,
}

impl Default for UserStore {
    fn default() -> UserStore {
        UserStore::new()
    }
}

impl UserStore {
    /// An empty store on the wall clock.
    pub fn new() -> UserStore {
        UserStore::with_clock(Arc::new(SystemClock))
    }

    /// An empty store that dates password changes with `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> UserStore {
        let inner = Inner {
            users: RwLock::new(BTreeMap::new()),
            groups: RwLock::new(BTreeMap::new()),
            generation: AtomicU64::new(0),
            clock,
        };
        UserStore { inner: Arc::new(inner) }
    }

    /// Creates or replaces a user. `password: None` keeps the existing password, and is refused for a new user.
    /// Deriving credentials is slow (PBKDF2), so it happens before the lock is taken.
    /// The user keeps the groups it belongs to.
    pub fn upsert(&self, id: &str, name: &str, password: Option<&str>, roles: Vec<Role>) -> Result<(), UserError> {
        self.upsert_member(id, name, password, roles, None)
    }

    /// [`UserStore::upsert`] that also sets the user's groups (`Some`), each of which must exist.
    pub fn upsert_member(
        &self,
        id: &str,
        name: &str,
        password: Option<&str>,
        roles: Vec<Role>,
        groups: Option<Vec<String>>,
    ) -> Result<(), UserError> {
        validate_id(id)?;
        if let Some(groups) = &groups {
            let known = self.inner.groups.read();
            let missing: Vec<&str> = groups.iter().filter(|g| !known.contains_key(*g)).map(String::as_str).collect();
            if !missing.is_empty() {
                return Err(UserError::UnknownGroups(missing.join(",")));
            }
        }
        if password.is_some_and(|p| p.contains('\0')) {
            // PLAIN cannot carry a NUL, and PBKDF2 would treat `pw\0` as `pw` (see `PlainVerifier::verify`).
            return Err(UserError::InvalidPassword("contains NUL"));
        }
        let fresh = password.map(|password| {
            let now_secs = self.inner.clock.now_nanos() / 1_000_000_000;
            (Credentials::from_password(password), now_secs)
        });
        let mut users = self.inner.users.write();
        let (credentials, password_change_date_secs) = match (fresh, users.get(id)) {
            (Some((credentials, now_secs)), _) => (credentials, Some(now_secs)),
            (None, Some(existing)) => (existing.credentials.clone(), existing.password_change_date_secs),
            (None, None) => return Err(UserError::PasswordRequired),
        };
        let groups = groups.unwrap_or_else(|| users.get(id).map(|u| u.groups.clone()).unwrap_or_default());
        let limits = users.get(id).and_then(|u| u.limits.clone());
        let mut user = User {
            id: id.to_owned(),
            name: name.to_owned(),
            roles,
            groups,
            group_roles: Vec::new(),
            credentials,
            password_change_date_secs,
            limits,
        };
        user.group_roles = group_roles(&user.groups, &self.inner.groups.read());
        users.insert(id.to_owned(), Arc::new(user));
        self.inner.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Replaces every user with `users`, e.g. when loading a saved store. Ids are checked before anything changes.
    pub fn restore(&self, users: Vec<User>) -> Result<(), UserError> {
        for user in &users {
            validate_id(&user.id)?;
        }
        let mut map = self.inner.users.write();
        let groups = self.inner.groups.read();
        *map = users
            .into_iter()
            .map(|mut user| {
                user.group_roles = group_roles(&user.groups, &groups);
                (user.id.clone(), Arc::new(user))
            })
            .collect();
        drop((groups, map));
        self.inner.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Stores `user` as given, credentials included (a restore of `/settings/rbac/backup`), replacing any user of
    /// that id; its groups must exist.
    pub fn install(&self, mut user: User) -> Result<(), UserError> {
        validate_id(&user.id)?;
        let groups = self.inner.groups.read();
        let missing: Vec<&str> = user.groups.iter().filter(|g| !groups.contains_key(*g)).map(String::as_str).collect();
        if !missing.is_empty() {
            return Err(UserError::UnknownGroups(missing.join(",")));
        }
        user.group_roles = group_roles(&user.groups, &groups);
        drop(groups);
        self.inner.users.write().insert(user.id.clone(), Arc::new(user));
        self.inner.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Replaces an existing user's limits (`{}` removes them, as in ns_server); false when there is no such user.
    pub fn set_limits(&self, id: &str, limits: super::UserLimits) -> bool {
        let mut users = self.inner.users.write();
        let Some(user) = users.get_mut(id) else { return false };
        Arc::make_mut(user).limits = (!limits.is_empty()).then_some(limits);
        drop(users);
        self.inner.generation.fetch_add(1, Ordering::Release);
        true
    }

    pub fn get(&self, id: &str) -> Option<Arc<User>> {
        self.inner.users.read().get(id).cloned()
    }

    /// Every user, ordered by id.
    pub fn list(&self) -> Vec<Arc<User>> {
        self.inner.users.read().values().cloned().collect()
    }

    /// Removes a user; false when there was none.
    pub fn delete(&self, id: &str) -> bool {
        let removed = self.inner.users.write().remove(id).is_some();
        if removed {
            self.inner.generation.fetch_add(1, Ordering::Release);
        }
        removed
    }

    /// The credentials SASL checks against; pass `|u| store.credentials(u)` as the lookup.
    pub fn credentials(&self, id: &str) -> Option<Credentials> {
        self.inner.users.read().get(id).map(|user| user.credentials.clone())
    }

    /// What `user` may do with `bucket`; nothing for an unknown user.
    pub fn bucket_access(&self, user: &str, bucket: &str) -> BucketAccess {
        self.get(user).map_or(BucketAccess::NONE, |u| u.bucket_access(bucket))
    }

    pub fn is_admin(&self, user: &str) -> bool {
        self.get(user).is_some_and(|u| u.is_admin())
    }

    pub fn can_read_settings(&self, user: &str) -> bool {
        self.get(user).is_some_and(|u| u.can_read_settings())
    }

    /// Replaces every group; each member's roles follow at once (the groups it names that no longer exist give
    /// nothing).
    pub fn set_groups(&self, groups: Vec<Group>) {
        let groups: BTreeMap<String, Arc<Group>> = groups.into_iter().map(|g| (g.id.clone(), Arc::new(g))).collect();
        *self.inner.groups.write() = groups.clone();
        let mut users = self.inner.users.write();
        for user in users.values_mut() {
            let roles = group_roles(&user.groups, &groups);
            if roles != user.group_roles {
                Arc::make_mut(user).group_roles = roles;
            }
        }
        drop(users);
        self.inner.generation.fetch_add(1, Ordering::Release);
    }

    pub fn group(&self, id: &str) -> Option<Arc<Group>> {
        self.inner.groups.read().get(id).cloned()
    }

    /// Every group, ordered by id.
    pub fn groups(&self) -> Vec<Arc<Group>> {
        self.inner.groups.read().values().cloned().collect()
    }

    /// A counter that changes whenever any user is added, changed or removed.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }
}

/// The roles `groups` give, each with its group, from the known groups (unknown names give nothing).
fn group_roles(groups: &[String], known: &BTreeMap<String, Arc<Group>>) -> Vec<(String, Role)> {
    groups
        .iter()
        .filter_map(|g| known.get(g))
        .flat_map(|g| g.roles.iter().map(|role| (g.id.clone(), role.clone())))
        .collect()
}

/// Couchbase's rules for local user ids: 1 to 128 characters, no control characters and none of `()<>@,;:\"/[]?={}`.
pub fn validate_id(id: &str) -> Result<(), UserError> {
    if id.is_empty() {
        return Err(UserError::InvalidId("empty"));
    }
    if id.chars().count() > USER_ID_CHARS_MAX {
        return Err(UserError::InvalidId("longer than 128 characters"));
    }
    if id.chars().any(|c| c.is_control() || "()<>@,;:\\\"/[]?={}".contains(c)) {
        return Err(UserError::InvalidId("contains a forbidden character"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use settee_types::ManualClock;

    use super::*;

    fn roles(list: &str) -> Vec<Role> {
        Role::parse_list(list).unwrap()
    }

    #[test]
    fn group_roles_reach_members_and_follow_group_changes() {
        // Proves a member gets its groups' roles besides its own, a group's change or removal reaches members at
        // once (and moves the generation), a plain upsert keeps the memberships, and unknown groups are refused.
        let store = UserStore::new();
        let group = |id: &str, list: &str| Group { id: id.into(), description: String::new(), roles: roles(list) };
        store.set_groups(vec![group("readers", "data_reader[b]")]);
        let missing = store.upsert_member("u", "", Some("pw"), vec![], Some(vec!["nope".into()]));
        assert_eq!(missing, Err(UserError::UnknownGroups("nope".into())));
        store.upsert_member("u", "", Some("pw"), roles("data_writer[b]"), Some(vec!["readers".into()])).unwrap();
        let access = store.bucket_access("u", "b");
        assert!(access.read && access.write);
        let generation = store.generation();
        store.set_groups(vec![group("readers", "admin")]);
        assert!(store.is_admin("u") && store.generation() > generation);
        store.upsert("u", "renamed", None, roles("data_writer[b]")).unwrap();
        assert_eq!(store.get("u").unwrap().groups, ["readers"]);
        store.set_groups(vec![]);
        assert!(!store.is_admin("u") && !store.bucket_access("u", "b").read);
        assert!(store.bucket_access("u", "b").write, "its own role stays");
    }

    #[test]
    fn upsert_get_list_delete_round_trip() {
        // Proves the CRUD cycle, id ordering in list(), and that clones of the store share the same users.
        let store = UserStore::new();
        let other = store.clone();
        store.upsert("bob", "Bob", Some("password"), roles("data_reader[b]")).unwrap();
        store.upsert("alice", "Alice", Some("password"), roles("admin")).unwrap();
        let ids: Vec<String> = other.list().iter().map(|u| u.id.clone()).collect();
        assert_eq!(ids, ["alice", "bob"]);
        assert_eq!(other.get("bob").unwrap().name, "Bob");
        assert!(other.credentials("alice").unwrap().verify_plain(b"password"));
        assert!(store.delete("bob"));
        assert!(!store.delete("bob"));
        assert!(other.get("bob").is_none() && other.credentials("bob").is_none());
    }

    #[test]
    fn upsert_without_password_keeps_the_old_one_and_is_refused_for_new_users() {
        // Proves None keeps credentials and the change date, replaces roles, and cannot create a user.
        let clock = Arc::new(ManualClock::new(1_000));
        let store = UserStore::with_clock(clock.clone());
        assert_eq!(store.upsert("u", "", None, vec![]), Err(UserError::PasswordRequired));
        store.upsert("u", "U", Some("first-pw"), roles("ro_admin")).unwrap();
        clock.advance_secs(50);
        store.upsert("u", "U2", None, roles("data_writer[b]")).unwrap();
        let user = store.get("u").unwrap();
        assert!(user.credentials.verify_plain(b"first-pw"));
        assert_eq!(user.password_change_date_secs, Some(1_000));
        assert_eq!((user.name.as_str(), user.roles.clone()), ("U2", roles("data_writer[b]")));
        store.upsert("u", "U2", Some("second-pw"), vec![]).unwrap();
        assert_eq!(store.get("u").unwrap().password_change_date_secs, Some(1_050));
    }

    #[test]
    fn invalid_user_ids_and_nul_passwords_are_refused() {
        // Proves Couchbase's id rules (empty, too long, forbidden or control characters) and the NUL rule.
        let store = UserStore::new();
        let long = "x".repeat(129);
        for id in ["", long.as_str(), "a:b", "a,b", "a@b", "a=b", "[a]", "tab\there"] {
            assert!(matches!(store.upsert(id, "", Some("pw"), vec![]), Err(UserError::InvalidId(_))), "{id:?}");
        }
        assert_eq!(store.upsert("ok", "", Some("pw\0"), vec![]), Err(UserError::InvalidPassword("contains NUL")));
        store.upsert(&"x".repeat(128), "", Some("pw"), vec![]).unwrap();
        store.upsert("dot.dash-under_score ü", "", Some("pw"), vec![]).unwrap();
    }

    #[test]
    fn privilege_checks_combine_roles_and_deny_unknown_users() {
        // Proves admin/ro_admin/bucket roles through the store, unions across roles, and nothing for strangers.
        let store = UserStore::new();
        store.upsert("root", "", Some("pw"), roles("admin")).unwrap();
        store.upsert("ro", "", Some("pw"), roles("ro_admin")).unwrap();
        store.upsert("app", "", Some("pw"), roles("data_reader[b1],data_writer[b1],bucket_admin[b2]")).unwrap();
        assert!(store.is_admin("root") && store.can_read_settings("root"));
        assert_eq!(store.bucket_access("root", "anything"), BucketAccess::ALL);
        assert!(!store.is_admin("ro") && store.can_read_settings("ro"));
        assert_eq!(store.bucket_access("ro", "b1"), BucketAccess { stats: true, ..BucketAccess::NONE });
        let rw = BucketAccess { read: true, write: true, ..BucketAccess::NONE };
        assert_eq!(store.bucket_access("app", "b1"), rw);
        let bucket_admin = BucketAccess { manage: true, stats: true, ..BucketAccess::NONE };
        assert_eq!(store.bucket_access("app", "b2"), bucket_admin, "bucket_admin reaches no data");
        assert_eq!(store.bucket_access("app", "b3"), BucketAccess::NONE);
        assert!(!store.is_admin("app") && !store.can_read_settings("app"));
        assert_eq!(store.bucket_access("nobody", "b1"), BucketAccess::NONE);
        assert!(!store.is_admin("nobody") && !store.can_read_settings("nobody"));
    }

    #[test]
    fn generation_moves_on_every_change_and_restore_round_trips_json() {
        // Proves connections can detect changes via generation(), and a saved store reloads identically.
        let store = UserStore::new();
        let g0 = store.generation();
        store.upsert("a", "A", Some("pw"), roles("data_reader[b:s:c]")).unwrap();
        let g1 = store.generation();
        assert!(g1 > g0);
        assert!(!store.delete("missing"));
        assert_eq!(store.generation(), g1);
        let saved = serde_json::to_string(&store.list().iter().map(|u| &**u).collect::<Vec<_>>()).unwrap();
        let reloaded = UserStore::new();
        reloaded.restore(serde_json::from_str(&saved).unwrap()).unwrap();
        assert_eq!(*reloaded.get("a").unwrap(), *store.get("a").unwrap());
        assert!(reloaded.generation() > 0);
    }
}

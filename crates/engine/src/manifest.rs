//! The collections manifest of a bucket: scopes, collections, their ids and the manifest uid that grows with every
//! change. Uids are printed as hex strings, as the SDKs parse them.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use settee_types::CollectionId;

pub const DEFAULT_NAME: &str = "_default";
/// Ids below 8 are reserved by Couchbase; user scopes and collections start at 8.
const FIRST_USER_ID: u32 = 8;
/// Most scopes, and most collections, a bucket may have besides `_default` (ns_server's defaults; ns_server counts
/// them across every bucket of the cluster, which the REST layer checks with the `_limited` methods).
pub const SCOPES_MAX: usize = 1000;
pub const COLLECTIONS_MAX: usize = 1000;
const NAME_BYTES_MAX: usize = 251;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection {
    pub name: String,
    pub uid: CollectionId,
    /// Seconds; None means the bucket default (no limit).
    pub max_ttl: Option<u32>,
    pub history: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub name: String,
    pub uid: u32,
    pub collections: Vec<Collection>,
}

/// Serialisable so the node can keep manifests across restarts (ids must never be reused).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub uid: u64,
    pub scopes: Vec<Scope>,
    next_scope_id: u32,
    next_collection_id: u32,
}

/// Why a manifest change was refused; the REST layer turns these into Couchbase's messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("Scope with name \"{0}\" already exists")]
    ScopeExists(String),
    #[error("Scope with name \"{0}\" is not found")]
    ScopeNotFound(String),
    #[error("Collection with name \"{1}\" in scope \"{0}\" already exists")]
    CollectionExists(String, String),
    #[error("Collection with name \"{1}\" in scope \"{0}\" is not found")]
    CollectionNotFound(String, String),
    #[error("Name is invalid: {0}")]
    InvalidName(String),
    #[error("Deleting _default scope is not allowed")]
    DefaultScope,
    #[error("Maximum number of scopes has been reached")]
    TooManyScopes,
    #[error("Maximum number of collections has been reached")]
    TooManyCollections,
}

impl Default for Manifest {
    fn default() -> Self {
        Manifest {
            uid: 0,
            scopes: vec![Scope {
                name: DEFAULT_NAME.into(),
                uid: 0,
                collections: vec![Collection { name: DEFAULT_NAME.into(), uid: 0, max_ttl: None, history: false }],
            }],
            next_scope_id: FIRST_USER_ID,
            next_collection_id: FIRST_USER_ID,
        }
    }
}

impl Manifest {
    pub fn collection(&self, cid: CollectionId) -> Option<&Collection> {
        self.scopes.iter().flat_map(|s| &s.collections).find(|c| c.uid == cid)
    }
    /// The scope and collection names of collection `cid`.
    pub fn names_of(&self, cid: CollectionId) -> Option<(&str, &str)> {
        self.scopes
            .iter()
            .find_map(|s| s.collections.iter().find(|c| c.uid == cid).map(|c| (s.name.as_str(), c.name.as_str())))
    }
    pub fn scope(&self, name: &str) -> Option<&Scope> {
        self.scopes.iter().find(|s| s.name == name)
    }

    /// Resolves `scope.collection` as GET_COLLECTION_ID does: an empty part means `_default`.
    pub fn resolve(&self, path: &str) -> Result<(u32, CollectionId), ResolveError> {
        let (scope, coll) = path.split_once('.').ok_or(ResolveError::Invalid)?;
        if coll.contains('.') {
            return Err(ResolveError::Invalid);
        }
        let scope = if scope.is_empty() { DEFAULT_NAME } else { scope };
        let coll = if coll.is_empty() { DEFAULT_NAME } else { coll };
        let s = self.scope(scope).ok_or(ResolveError::UnknownScope)?;
        let c = s.collections.iter().find(|c| c.name == coll).ok_or(ResolveError::UnknownCollection)?;
        Ok((s.uid, c.uid))
    }

    /// Scopes other than `_default`.
    pub fn user_scope_count(&self) -> usize {
        self.scopes.iter().filter(|s| s.name != DEFAULT_NAME).count()
    }

    /// Collections other than `_default._default`.
    pub fn user_collection_count(&self) -> usize {
        let all: usize = self.scopes.iter().map(|s| s.collections.len()).sum();
        all - usize::from(self.resolve("_default._default").is_ok())
    }

    pub fn create_scope(&mut self, name: &str) -> Result<u64, ManifestError> {
        self.create_scope_limited(name, SCOPES_MAX)
    }

    /// Creates a scope if the bucket would then have at most `user_scopes_max` besides `_default` (and never more
    /// than [`SCOPES_MAX`]); refused in ns_server's order: name, existence, then the limit.
    pub fn create_scope_limited(&mut self, name: &str, user_scopes_max: usize) -> Result<u64, ManifestError> {
        check_name(name)?;
        if self.scope(name).is_some() {
            return Err(ManifestError::ScopeExists(name.into()));
        }
        if self.user_scope_count() >= user_scopes_max.min(SCOPES_MAX) {
            return Err(ManifestError::TooManyScopes);
        }
        self.scopes.push(Scope { name: name.into(), uid: self.next_scope_id, collections: Vec::new() });
        self.next_scope_id += 1;
        Ok(self.bump())
    }

    pub fn drop_scope(&mut self, name: &str) -> Result<(u64, Vec<CollectionId>), ManifestError> {
        if name == DEFAULT_NAME {
            return Err(ManifestError::DefaultScope);
        }
        let at = self.scopes.iter().position(|s| s.name == name).ok_or(ManifestError::ScopeNotFound(name.into()))?;
        let dropped = self.scopes.remove(at).collections.iter().map(|c| c.uid).collect();
        Ok((self.bump(), dropped))
    }

    pub fn create_collection(
        &mut self,
        scope: &str,
        name: &str,
        max_ttl: Option<u32>,
        history: bool,
    ) -> Result<u64, ManifestError> {
        self.create_collection_limited(scope, name, max_ttl, history, COLLECTIONS_MAX)
    }

    /// Creates a collection if the bucket would then have at most `user_collections_max` besides
    /// `_default._default` (and never more than [`COLLECTIONS_MAX`]); refused in ns_server's order: name, scope,
    /// existence, then the limit.
    pub fn create_collection_limited(
        &mut self,
        scope: &str,
        name: &str,
        max_ttl: Option<u32>,
        history: bool,
        user_collections_max: usize,
    ) -> Result<u64, ManifestError> {
        check_name(name)?;
        let uid = self.next_collection_id;
        let count = self.user_collection_count();
        let s = self.scopes.iter_mut().find(|s| s.name == scope).ok_or(ManifestError::ScopeNotFound(scope.into()))?;
        if s.collections.iter().any(|c| c.name == name) {
            return Err(ManifestError::CollectionExists(scope.into(), name.into()));
        }
        if count >= user_collections_max.min(COLLECTIONS_MAX) {
            return Err(ManifestError::TooManyCollections);
        }
        s.collections.push(Collection { name: name.into(), uid, max_ttl, history });
        self.next_collection_id += 1;
        Ok(self.bump())
    }

    pub fn update_collection(&mut self, scope: &str, name: &str, max_ttl: Option<u32>) -> Result<u64, ManifestError> {
        let c = self.find_mut(scope, name)?;
        c.max_ttl = max_ttl;
        Ok(self.bump())
    }

    pub fn drop_collection(&mut self, scope: &str, name: &str) -> Result<(u64, CollectionId), ManifestError> {
        let s = self.scopes.iter_mut().find(|s| s.name == scope).ok_or(ManifestError::ScopeNotFound(scope.into()))?;
        let at = s
            .collections
            .iter()
            .position(|c| c.name == name)
            .ok_or(ManifestError::CollectionNotFound(scope.into(), name.into()))?;
        let cid = s.collections.remove(at).uid;
        Ok((self.bump(), cid))
    }

    fn find_mut(&mut self, scope: &str, name: &str) -> Result<&mut Collection, ManifestError> {
        let s = self.scopes.iter_mut().find(|s| s.name == scope).ok_or(ManifestError::ScopeNotFound(scope.into()))?;
        s.collections
            .iter_mut()
            .find(|c| c.name == name)
            .ok_or(ManifestError::CollectionNotFound(scope.into(), name.into()))
    }

    fn bump(&mut self) -> u64 {
        self.uid += 1;
        self.uid
    }

    /// The manifest JSON of GET_COLLECTIONS_MANIFEST and `GET .../scopes`.
    pub fn to_json(&self) -> Value {
        let scopes: Vec<Value> = self
            .scopes
            .iter()
            .map(|s| {
                let cols: Vec<Value> = s
                    .collections
                    .iter()
                    .map(|c| {
                        let mut v = json!({"name": c.name, "uid": format!("{:x}", c.uid)});
                        if let Some(ttl) = c.max_ttl {
                            v["maxTTL"] = json!(ttl);
                        }
                        if c.history {
                            v["history"] = json!(true);
                        }
                        v
                    })
                    .collect();
                json!({"name": s.name, "uid": format!("{:x}", s.uid), "collections": cols})
            })
            .collect();
        json!({"uid": format!("{:x}", self.uid), "scopes": scopes})
    }
}

/// Why GET_COLLECTION_ID could not resolve a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResolveError {
    Invalid,
    UnknownScope,
    UnknownCollection,
}

/// Couchbase's naming rule: 1-251 characters of `A-Za-z0-9_-%`, not starting with `_` or `%`.
fn check_name(name: &str) -> Result<(), ManifestError> {
    let ok_chars = name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'%'));
    let ok_start = !name.starts_with('_') && !name.starts_with('%');
    if name.is_empty() || name.len() > NAME_BYTES_MAX || !ok_chars || !ok_start {
        return Err(ManifestError::InvalidName(name.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Creating scopes and collections assigns ids from 8, bumps the uid, and resolves by name.
    #[test]
    fn create_and_resolve() {
        let mut m = Manifest::default();
        assert_eq!(m.resolve("_default._default"), Ok((0, 0)));
        assert_eq!(m.resolve("."), Ok((0, 0)));
        assert_eq!(m.create_scope("s1"), Ok(1));
        assert_eq!(m.create_collection("s1", "c1", None, false), Ok(2));
        assert_eq!(m.resolve("s1.c1"), Ok((8, 8)));
        assert_eq!(m.create_collection("_default", "c2", Some(10), false), Ok(3));
        assert_eq!(m.resolve(".c2"), Ok((0, 9)));
        assert_eq!(m.resolve("s2.c1"), Err(ResolveError::UnknownScope));
        assert_eq!(m.resolve("s1.nope"), Err(ResolveError::UnknownCollection));
        assert_eq!(m.resolve("nodot"), Err(ResolveError::Invalid));
        assert_eq!(m.to_json()["uid"], "3");
    }

    /// Duplicates, bad names, missing scopes and the default scope are refused with Couchbase's messages.
    #[test]
    fn refusals() {
        let mut m = Manifest::default();
        m.create_scope("s").unwrap();
        assert_eq!(m.create_scope("s"), Err(ManifestError::ScopeExists("s".into())));
        assert!(matches!(m.create_scope("_x"), Err(ManifestError::InvalidName(_))));
        assert!(matches!(m.create_scope("a.b"), Err(ManifestError::InvalidName(_))));
        m.create_collection("s", "c", None, false).unwrap();
        assert_eq!(
            m.create_collection("s", "c", None, false).unwrap_err().to_string(),
            "Collection with name \"c\" in scope \"s\" already exists"
        );
        assert_eq!(m.drop_scope("nope").unwrap_err().to_string(), "Scope with name \"nope\" is not found");
        assert_eq!(m.drop_scope("_default"), Err(ManifestError::DefaultScope));
        assert_eq!(m.drop_scope("s").map(|(_, c)| c), Ok(vec![8]));
    }

    /// Regression (issue 17): scopes had no limit (10,000 created, ~48 KiB of memory each). Proves a bucket takes
    /// 1,000 scopes and 1,000 collections besides `_default`, then refuses with ns_server's texts (existence is
    /// still reported first), that a dropped one makes room again, and that a lower limit passed in is honoured.
    #[test]
    fn scopes_and_collections_stop_at_the_limit() {
        let mut m = Manifest::default();
        for i in 0..SCOPES_MAX {
            m.create_scope(&format!("s{i}")).unwrap();
        }
        assert_eq!(m.user_scope_count(), SCOPES_MAX);
        assert_eq!(m.create_scope("one-more"), Err(ManifestError::TooManyScopes));
        assert_eq!(m.create_scope("one-more").unwrap_err().to_string(), "Maximum number of scopes has been reached");
        assert_eq!(m.create_scope("s0"), Err(ManifestError::ScopeExists("s0".into())));
        m.drop_scope("s0").unwrap();
        m.create_scope("one-more").unwrap();
        for i in 0..COLLECTIONS_MAX {
            m.create_collection("s1", &format!("c{i}"), None, false).unwrap();
        }
        assert_eq!(m.user_collection_count(), COLLECTIONS_MAX);
        let refused = m.create_collection("_default", "late", None, false).unwrap_err();
        assert_eq!(refused.to_string(), "Maximum number of collections has been reached");
        let mut small = Manifest::default();
        small.create_scope_limited("a", 1).unwrap();
        assert_eq!(small.create_scope_limited("b", 1), Err(ManifestError::TooManyScopes));
        assert_eq!(small.create_collection_limited("a", "c", None, false, 0), Err(ManifestError::TooManyCollections));
    }
}

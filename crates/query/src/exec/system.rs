//! The `system:` keyspaces: catalog rows built from the datastore (indexes, keyspaces, buckets, scopes,
//! namespaces, datastores, dual) and request rows from the query service (prepareds, active and completed
//! requests).

use std::sync::Arc;

use super::Cx;
use crate::datastore::KeyspaceName;
use crate::index::{IndexDef, IndexState};
use crate::plan::SystemKeyspace;
use crate::value::{Object, Value};
use crate::QueryError;

/// What only the query service knows: its prepared statements and requests, and its own address.
pub trait SystemRows {
    /// `system:prepareds`, `system:active_requests` or `system:completed_requests`: (key, document) pairs.
    fn rows(&self, which: SystemKeyspace) -> Vec<(Arc<str>, Value)>;

    /// The `datastore_id` of catalog rows (Couchbase: the management URL, `http://host:8091`).
    fn datastore_url(&self) -> String {
        "http://127.0.0.1:8091".into()
    }
}

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    Value::object_from(pairs.into_iter().map(|(k, v)| (k.to_string(), v)))
}

pub(crate) fn rows(which: SystemKeyspace, cx: &Cx<'_>) -> Result<Vec<(Arc<str>, Value)>, QueryError> {
    let ds_id = cx.system.map_or_else(|| "http://127.0.0.1:8091".to_string(), |s| s.datastore_url());
    let ds_id = Value::from(ds_id);
    let ns = || Value::string("default");
    let key = |k: &str| -> Arc<str> { Arc::from(k) };
    Ok(match which {
        SystemKeyspace::Dual => vec![(key(""), Value::object(Object::new()))],
        SystemKeyspace::Namespaces => {
            vec![(key("default"), obj(vec![("datastore_id", ds_id), ("id", ns()), ("name", ns())]))]
        }
        SystemKeyspace::Datastores => vec![(key("datastore"), obj(vec![("id", ds_id.clone()), ("url", ds_id)]))],
        SystemKeyspace::Buckets => cx
            .ds
            .buckets()
            .into_iter()
            .map(|b| {
                let row = obj(vec![
                    ("datastore_id", ds_id.clone()),
                    ("name", Value::from(b.name.clone())),
                    ("namespace", ns()),
                    ("namespace_id", ns()),
                    ("path", Value::from(format!("default:{}", b.name))),
                ]);
                (key(&b.name), row)
            })
            .collect(),
        SystemKeyspace::Scopes => {
            let mut out = Vec::new();
            for b in cx.ds.buckets() {
                // Like system:keyspaces, system:scopes leaves out system scopes (`_default`, `_system`).
                for s in b.scopes.iter().filter(|s| !is_system_name(&s.name)) {
                    let row = obj(vec![
                        ("bucket", Value::from(b.name.clone())),
                        ("datastore_id", ds_id.clone()),
                        ("name", Value::from(s.name.clone())),
                        ("namespace", ns()),
                        ("namespace_id", ns()),
                        ("path", Value::from(format!("default:{}.{}", b.name, s.name))),
                    ]);
                    out.push((key(&format!("{}.{}", b.name, s.name)), row));
                }
            }
            out
        }
        SystemKeyspace::Keyspaces => {
            let mut out = Vec::new();
            for b in cx.ds.buckets() {
                let bucket_row = obj(vec![
                    ("datastore_id", ds_id.clone()),
                    ("id", Value::from(b.name.clone())),
                    ("name", Value::from(b.name.clone())),
                    ("namespace", ns()),
                    ("namespace_id", ns()),
                    ("path", Value::from(format!("default:{}", b.name))),
                ]);
                out.push((key(&b.name), bucket_row));
                // The bucket row stands for its default collection; collections whose name starts with `_`
                // (`_default` in any scope, the system collections) are not listed (Couchbase's
                // system_keyspace_keyspaces.go skipSystem).
                for s in &b.scopes {
                    for c in s.collections.iter().filter(|c| !is_system_name(c)) {
                        let row = obj(vec![
                            ("bucket", Value::from(b.name.clone())),
                            ("datastore_id", ds_id.clone()),
                            ("id", Value::from(c.clone())),
                            ("name", Value::from(c.clone())),
                            ("namespace", ns()),
                            ("namespace_id", ns()),
                            ("path", Value::from(format!("default:{}.{}.{}", b.name, s.name, c))),
                            ("scope", Value::from(s.name.clone())),
                        ]);
                        out.push((key(&format!("{}.{}.{}", b.name, s.name, c)), row));
                    }
                }
            }
            out
        }
        SystemKeyspace::Indexes => cx
            .ds
            .all_indexes()
            .into_iter()
            .map(|(ks, def, state)| (Arc::from(def.id.as_str()), index_row(&ks, &def, state, &ds_id)))
            .collect(),
        SystemKeyspace::Prepareds | SystemKeyspace::ActiveRequests | SystemKeyspace::CompletedRequests => {
            cx.system.map(|s| s.rows(which)).unwrap_or_default()
        }
    })
}

/// Whether a scope or collection name is one system:scopes and system:keyspaces leave out.
fn is_system_name(name: &str) -> bool {
    name.starts_with('_')
}

/// A `system:indexes` row, shaped as Couchbase's (`QUERY.md` §3): an index on a bucket's default collection has
/// no `bucket_id`/`scope_id` and its bucket as `keyspace_id`.
pub fn index_row(ks: &KeyspaceName, def: &IndexDef, state: IndexState, ds_id: &Value) -> Value {
    let mut o = Object::new();
    let mut put = |k: &str, v: Value| {
        o.insert(k.to_string(), v);
    };
    put("datastore_id", ds_id.clone());
    put("id", Value::from(def.id.clone()));
    put("name", Value::from(def.name.clone()));
    put("namespace", Value::string("default"));
    put("namespace_id", Value::string("default"));
    put("state", Value::string(state.as_str()));
    put("using", Value::string("gsi"));
    let keys = def.keys.iter().map(|k| Value::from(crate::index::key_display(k))).collect();
    put("index_key", Value::array(keys));
    if ks.is_default_collection() {
        put("keyspace_id", Value::from(ks.bucket.clone()));
    } else {
        put("bucket_id", Value::from(ks.bucket.clone()));
        put("scope_id", Value::from(ks.scope.clone()));
        put("keyspace_id", Value::from(ks.collection.clone()));
    }
    if def.is_primary {
        put("is_primary", Value::Bool(true));
    }
    if let Some(c) = &def.condition {
        put("condition", Value::from(c.clone()));
    }
    if let Some(p) = &def.partition {
        put("partition", Value::from(p.clone()));
    }
    Value::object(o)
}

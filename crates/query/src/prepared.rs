//! Prepared statements: parsed statements filed under a name and the query context they were prepared in, so
//! that `{"prepared": name}` and `EXECUTE name` run them without parsing again. Plans are made per execution, so a
//! prepared statement always uses the indexes that exist when it runs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::ast::Statement;
use crate::plan::QueryContext;
use crate::QueryError;

/// How many prepared statements a node keeps (Couchbase's default `prepared-limit`); past it the least recently
/// used goes, and a client that asks for it gets 4040 and prepares again.
pub const PREPARED_LIMIT: usize = 16_384;

/// One prepared statement.
pub struct Prepared {
    pub name: String,
    /// The statement's text, as written after `PREPARE [name FROM|AS]`.
    pub text: String,
    pub statement: Statement,
    pub context: QueryContext,
    pub signature: serde_json::Value,
    pub created_nanos: i64,
    pub uses: AtomicU64,
    last_use: AtomicU64,
}

impl Prepared {
    pub fn new(name: String, text: String, statement: Statement, context: QueryContext, now_nanos: i64) -> Prepared {
        Prepared {
            name,
            text,
            statement,
            context,
            signature: serde_json::Value::Null,
            created_nanos: now_nanos,
            uses: AtomicU64::new(0),
            last_use: AtomicU64::new(0),
        }
    }
}

/// The node's prepared statements.
pub struct Prepareds {
    map: Mutex<HashMap<(String, String), Arc<Prepared>>>,
    tick: AtomicU64,
    limit: usize,
}

impl Default for Prepareds {
    fn default() -> Prepareds {
        Prepareds::new(PREPARED_LIMIT)
    }
}

impl Prepareds {
    pub fn new(limit: usize) -> Prepareds {
        Prepareds { map: Mutex::new(HashMap::new()), tick: AtomicU64::new(0), limit: limit.max(1) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Prepared>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Files `p`, replacing one of the same name and context; evicts the least recently used past the limit.
    pub fn insert(&self, p: Arc<Prepared>) {
        p.last_use.store(self.tick.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        let mut map = self.lock();
        map.insert((p.name.clone(), p.context.key()), p);
        if map.len() > self.limit {
            let victim = map.iter().min_by_key(|(_, v)| v.last_use.load(Ordering::Relaxed)).map(|(k, _)| k.clone());
            if let Some(k) = victim {
                map.remove(&k);
            }
        }
    }

    /// Files `p` as PREPARE does: a name already taken in the same context by another statement text is refused
    /// with 4060 (Couchbase's `AddPrepared`), the same text is prepared again.
    pub fn add(&self, p: Arc<Prepared>) -> Result<(), QueryError> {
        let key = (p.name.clone(), p.context.key());
        if let Some(old) = self.lock().get(&key) {
            if old.text != p.text {
                let full = if key.1.is_empty() { key.0 } else { format!("{}({})", key.0, key.1) };
                return Err(QueryError::PreparedName(format!("duplicate name: {full}")));
            }
        }
        self.insert(p);
        Ok(())
    }

    /// The statement prepared as `name` in `context` (or, failing that, with no context: names are unique).
    pub fn get(&self, name: &str, context: &QueryContext) -> Option<Arc<Prepared>> {
        let map = self.lock();
        let p = map
            .get(&(name.to_string(), context.key()))
            .or_else(|| map.get(&(name.to_string(), String::new())))
            .or_else(|| map.iter().find(|((n, _), _)| n == name).map(|(_, p)| p))
            .cloned();
        if let Some(p) = &p {
            p.uses.fetch_add(1, Ordering::Relaxed);
            p.last_use.store(self.tick.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        }
        p
    }

    /// Removes a prepared statement (`DELETE FROM system:prepareds`).
    pub fn remove(&self, name: &str) -> bool {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|(n, _), _| n != name);
        map.len() != before
    }

    /// Every prepared statement.
    pub fn list(&self) -> Vec<Arc<Prepared>> {
        self.lock().values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{Projection, Select, SetExpr, Subselect};

    fn stmt() -> Statement {
        Statement::Select(Select {
            with: vec![],
            body: SetExpr::Query(Box::new(Subselect {
                projection: Projection { distinct: false, raw: true, terms: vec![] },
                from: None,
                let_: vec![],
                where_: None,
                group_by: None,
            })),
            order_by: vec![],
            limit: None,
            offset: None,
        })
    }

    #[test]
    fn a_taken_name_is_refused_for_another_text_and_accepted_for_the_same() {
        // Proves PREPARE's rule: re-preparing a name with the same text is fine, with another text it is 4060, and
        // the same name in another query context is another statement.
        let cache = Prepareds::new(8);
        let ctx = QueryContext { bucket: Some("b".into()), scope: Some("s".into()) };
        let p =
            |text: &str, ctx: &QueryContext| Arc::new(Prepared::new("p".into(), text.into(), stmt(), ctx.clone(), 0));
        cache.add(p("x", &ctx)).unwrap();
        cache.add(p("x", &ctx)).unwrap();
        let e = cache.add(p("y", &ctx)).unwrap_err();
        assert_eq!((e.code(), e.to_string()), (4060, "Unable to add name: duplicate name: p(default:b.s)".into()));
        cache.add(p("y", &QueryContext::default())).unwrap();
    }

    #[test]
    fn the_least_recently_used_statement_goes_past_the_limit() {
        // Proves the cache is bounded and keeps what is used.
        let cache = Prepareds::new(2);
        let ctx = QueryContext::default();
        for name in ["a", "b"] {
            cache.insert(Arc::new(Prepared::new(name.into(), "x".into(), stmt(), ctx.clone(), 0)));
        }
        assert!(cache.get("a", &ctx).is_some());
        cache.insert(Arc::new(Prepared::new("c".into(), "x".into(), stmt(), ctx.clone(), 0)));
        assert!(cache.get("b", &ctx).is_none());
        assert!(cache.get("a", &ctx).is_some() && cache.get("c", &ctx).is_some());
    }
}

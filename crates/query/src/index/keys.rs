//! What an index definition makes of one document: its entries (the values of the index keys), or none when the
//! document does not qualify (a partial index's WHERE is not true, or the leading key is MISSING without INCLUDE
//! MISSING). An array key (`DISTINCT ARRAY v.x FOR v IN arr END`, `ALL arr`) gives one entry per element.
//!
//! The keys and the condition are compiled once per index, as expressions over one keyspace term: a bare name is a
//! field of the document and `META()` its metadata, as in the statement that created the index.

use std::collections::HashMap;
use std::sync::atomic::AtomicU8;
use std::sync::Arc;

use super::{IndexDef, IndexKeyDef};
use crate::ast::{ArrayIndexKind, Expr};
use crate::datastore::{BucketInfo, CreateIndexRequest, Datastore, DocMeta, Keyspace, KeyspaceName};
use crate::exec::{eval, Cx, Row, RowMeta};
use crate::functions::FnContext;
use crate::index::IndexState;
use crate::plan::scope::VarKind;
use crate::plan::{CExpr, Compiler, QueryContext};
use crate::value::Value;
use crate::QueryError;

/// A compiled index definition.
pub struct KeyPlan {
    keys: Vec<(CExpr, Option<ArrayIndexKind>)>,
    include_missing: bool,
    condition: Option<CExpr>,
    keyspace: Arc<str>,
}

/// The datastore index expressions see: none (they may not read other documents).
struct NoDatastore;

impl Datastore for NoDatastore {
    fn keyspace(&self, name: &KeyspaceName) -> Result<Arc<dyn Keyspace>, QueryError> {
        Err(QueryError::semantics(format!("index expressions cannot read keyspace {}", name.display_path())))
    }
    fn buckets(&self) -> Vec<BucketInfo> {
        Vec::new()
    }
    fn create_index(&self, _: CreateIndexRequest) -> Result<(), QueryError> {
        Err(QueryError::semantics("not available in index expressions"))
    }
    fn drop_index(&self, _: &KeyspaceName, _: &str) -> Result<(), QueryError> {
        Err(QueryError::semantics("not available in index expressions"))
    }
    fn build_indexes(&self, _: &KeyspaceName, _: &[String]) -> Result<(), QueryError> {
        Err(QueryError::semantics("not available in index expressions"))
    }
    fn all_indexes(&self) -> Vec<(KeyspaceName, IndexDef, IndexState)> {
        Vec::new()
    }
}

/// The alias index expressions use for their keyspace: its last path element, as Couchbase formalises them.
fn alias_of(ks: &KeyspaceName) -> &str {
    if ks.is_default_collection() {
        &ks.bucket
    } else {
        &ks.collection
    }
}

impl KeyPlan {
    /// Compiles a definition's keys and condition. Only deterministic functions may appear (CREATE INDEX refuses
    /// the others before the definition exists).
    pub fn compile(def: &IndexDef) -> Result<KeyPlan, QueryError> {
        let mut c = Compiler::new(&NoDatastore, QueryContext::default());
        c.scopes.push_block();
        c.scopes.bind(alias_of(&def.keyspace), VarKind::Term { is_keyspace: true });
        let mut keys = Vec::with_capacity(def.keys.len());
        for k in &def.keys {
            let e = crate::parse_expression(&k.expr)?;
            keys.push((c.expr(&e)?, k.array));
        }
        let condition = match &def.condition {
            Some(text) => Some(c.expr(&crate::parse_expression(text)?)?),
            None => None,
        };
        Ok(KeyPlan {
            keys,
            include_missing: def.keys.first().is_some_and(|k| k.include_missing),
            condition,
            keyspace: Arc::from(def.keyspace.display_path()),
        })
    }

    /// The entries of one document (empty when it does not qualify).
    pub fn entries(&self, doc_id: &Arc<str>, doc: &Value, meta: &DocMeta) -> Result<Vec<Vec<Value>>, QueryError> {
        on_document(doc_id, doc, meta, &self.keyspace, |row, cx| self.entries_of(row, cx))
    }

    fn entries_of(&self, row: &mut Row, cx: &Cx<'_>) -> Result<Vec<Vec<Value>>, QueryError> {
        if let Some(cond) = &self.condition {
            if !eval(cond, row, cx)?.truth() {
                return Ok(Vec::new());
            }
        }
        let mut scalars = Vec::with_capacity(self.keys.len());
        let mut array: Option<(usize, Vec<Value>)> = None;
        for (i, (e, kind)) in self.keys.iter().enumerate() {
            let v = eval(e, row, cx)?;
            match kind {
                None => scalars.push(v),
                Some(kind) => {
                    let mut items: Vec<Value> = match v {
                        Value::Array(a) => a.iter().filter(|x| !x.is_missing()).cloned().collect(),
                        _ => Vec::new(),
                    };
                    if *kind == ArrayIndexKind::Distinct {
                        items.sort();
                        items.dedup();
                    }
                    scalars.push(Value::Missing);
                    array = Some((i, items));
                }
            }
        }
        let leading_missing = |key: &[Value]| key.first().is_some_and(Value::is_missing);
        let out: Vec<Vec<Value>> = match array {
            None => vec![scalars],
            Some((pos, items)) => items
                .into_iter()
                .map(|item| {
                    let mut key = scalars.clone();
                    key[pos] = item;
                    key
                })
                .collect(),
        };
        Ok(out.into_iter().filter(|k| self.include_missing || !leading_missing(k)).collect())
    }
}

/// Runs `f` with one document (and its `META()`) as the only term in scope, as index expressions and document
/// filters see it: no other keyspace, no named or positional parameters, a clock fixed at zero (only deterministic
/// functions are compiled for them).
fn on_document<R>(
    doc_id: &Arc<str>,
    doc: &Value,
    meta: &DocMeta,
    keyspace: &Arc<str>,
    f: impl FnOnce(&mut Row, &Cx<'_>) -> Result<R, QueryError>,
) -> Result<R, QueryError> {
    let named = HashMap::new();
    let state = AtomicU8::new(0);
    let zero = || 0i64;
    let random = || 0u64;
    let fnctx = FnContext { now_nanos: 0, clock: &zero, random: &random };
    let cx = Cx::new(&NoDatastore, &named, &[], fnctx, &state);
    let mut row = Row::new(1);
    let m = RowMeta { id: doc_id.clone(), meta: meta.clone(), keyspace: keyspace.clone() };
    row.set_doc(0, doc.clone(), Some(Arc::new(m)));
    f(&mut row, &cx)
}

/// The term name a document filter binds its document to: not one a filter's author writes, so every bare name
/// is a field of the document.
const FILTER_TERM: &str = "__settee_filtered_doc";

/// A condition on one document (XDCR's `filterExpression`): SQL++ over the document's fields (bare names) and
/// `META()` (`META().id`, `META().expiration` ...), compiled once; a document passes when it is true.
pub struct DocFilter {
    condition: CExpr,
    keyspace: Arc<str>,
}

impl DocFilter {
    /// Compiles `text`; a syntax error, an unknown function or one that is not deterministic (a filter must give
    /// the same answer for the same document on every node and every run) is refused.
    pub fn compile(text: &str) -> Result<DocFilter, QueryError> {
        let parsed = crate::parse_expression(text)?;
        let mut refused = None;
        crate::plan::visit(&parsed, &mut |e| match e {
            Expr::Subquery(_) => refused = Some("a filter expression cannot hold a subquery".to_owned()),
            // META() reads the document's own metadata: the same for the same document.
            Expr::Call(call)
                if !call.name.eq_ignore_ascii_case("meta")
                    && crate::functions::lookup(&call.name).is_some_and(|f| !f.deterministic) =>
            {
                refused = Some(format!("a filter expression may not call {}: its result changes", call.name));
            }
            _ => {}
        });
        if let Some(why) = refused {
            return Err(QueryError::semantics(why));
        }
        let mut c = Compiler::new(&NoDatastore, QueryContext::default());
        c.scopes.push_block();
        c.scopes.bind(FILTER_TERM, VarKind::Term { is_keyspace: true });
        let condition = c.expr(&parsed)?;
        Ok(DocFilter { condition, keyspace: Arc::from(FILTER_TERM) })
    }

    /// Whether the document passes (the condition is true; false, NULL and MISSING do not pass).
    pub fn matches(&self, doc_id: &Arc<str>, doc: &Value, meta: &DocMeta) -> Result<bool, QueryError> {
        on_document(doc_id, doc, meta, &self.keyspace, |row, cx| Ok(eval(&self.condition, row, cx)?.truth()))
    }
}

/// The definition's key texts as `system:indexes` shows them (``(distinct (array ... end))``, ` INCLUDE
/// MISSING`, ` DESC`).
pub fn key_display(k: &IndexKeyDef) -> String {
    let mut text = match k.array {
        Some(ArrayIndexKind::Distinct) => format!("(distinct ({}))", k.expr),
        Some(ArrayIndexKind::All) => format!("(all ({}))", k.expr),
        None => k.expr.clone(),
    };
    if k.include_missing {
        text.push_str(" INCLUDE MISSING");
    }
    if k.desc {
        text.push_str(" DESC");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(keys: &[(&str, Option<ArrayIndexKind>)], condition: Option<&str>, include_missing: bool) -> IndexDef {
        IndexDef {
            id: "i".into(),
            name: "ix".into(),
            keyspace: KeyspaceName::new("b", "_default", "_default"),
            is_primary: false,
            keys: keys
                .iter()
                .enumerate()
                .map(|(i, (e, a))| IndexKeyDef {
                    expr: e.to_string(),
                    array: *a,
                    desc: false,
                    include_missing: include_missing && i == 0,
                })
                .collect(),
            condition: condition.map(str::to_string),
            partition: None,
            num_replica: 0,
        }
    }

    fn entries(d: &IndexDef, doc: &str) -> Vec<String> {
        let plan = KeyPlan::compile(d).unwrap();
        let v = Value::from_json(doc.as_bytes()).unwrap();
        let meta = DocMeta { cas: 1, expiration: 0, flags: 0, is_json: true };
        plan.entries(&Arc::from("k1"), &v, &meta)
            .unwrap()
            .into_iter()
            .map(|k| Value::array(k).to_json_string())
            .collect()
    }

    #[test]
    fn composite_and_functional_keys_come_from_the_document() {
        // Proves bare names are fields of the document, functions apply, META().id is the key, and a missing
        // non-leading key is kept (as MISSING, written null here).
        let d = def(&[("lower(name)", None), ("age", None), ("meta().id", None)], None, false);
        assert_eq!(entries(&d, r#"{"name":"Ann","age":3}"#), [r#"["ann",3,"k1"]"#]);
        assert_eq!(entries(&d, r#"{"name":"Ann"}"#), [r#"["ann",null,"k1"]"#]);
    }

    #[test]
    fn a_missing_leading_key_gives_no_entry_unless_include_missing() {
        // Proves the leading-key rule and INCLUDE MISSING.
        let d = def(&[("name", None)], None, false);
        assert!(entries(&d, r#"{"age":1}"#).is_empty());
        let d = def(&[("name", None)], None, true);
        assert_eq!(entries(&d, r#"{"age":1}"#), ["[null]"]);
    }

    #[test]
    fn partial_indexes_take_only_documents_their_where_accepts() {
        // Proves the index condition.
        let d = def(&[("name", None)], Some("type = 'user'"), false);
        assert_eq!(entries(&d, r#"{"type":"user","name":"a"}"#), [r#"["a"]"#]);
        assert!(entries(&d, r#"{"type":"admin","name":"a"}"#).is_empty());
    }

    #[test]
    fn array_keys_give_one_entry_per_element() {
        // Proves DISTINCT ARRAY (duplicates once, in collation order) and ALL (every element), combined with a
        // scalar key; an empty array gives nothing.
        let d =
            def(&[("array `t`.`n` for `t` in `tags` end", Some(ArrayIndexKind::Distinct)), ("x", None)], None, false);
        assert_eq!(entries(&d, r#"{"tags":[{"n":2},{"n":1},{"n":2}],"x":0}"#), [r#"[1,0]"#, r#"[2,0]"#]);
        let d = def(&[("tags", Some(ArrayIndexKind::All))], None, false);
        assert_eq!(entries(&d, r#"{"tags":["b","a","b"]}"#), [r#"["b"]"#, r#"["a"]"#, r#"["b"]"#]);
        assert!(entries(&d, r#"{"tags":[]}"#).is_empty());
    }

    /// XDCR's filter expressions: bare names are the document's fields, META() its metadata; only a true condition
    /// passes (false, NULL and MISSING do not); a binary document (MISSING body) can still be filtered on its key.
    #[test]
    fn a_document_filter_passes_what_its_condition_accepts() {
        let meta = DocMeta { cas: 7, expiration: 0, flags: 0, is_json: true };
        let doc = |json: &str| Value::from_json(json.as_bytes()).unwrap();
        let id: Arc<str> = Arc::from("user::42");
        let f = DocFilter::compile(r#"country = "FR" AND META().id LIKE "user::%""#).unwrap();
        assert!(f.matches(&id, &doc(r#"{"country":"FR"}"#), &meta).unwrap());
        assert!(!f.matches(&id, &doc(r#"{"country":"US"}"#), &meta).unwrap());
        assert!(!f.matches(&id, &doc(r#"{}"#), &meta).unwrap(), "MISSING does not pass");
        assert!(!f.matches(&Arc::from("order::1"), &doc(r#"{"country":"FR"}"#), &meta).unwrap());
        let by_key = DocFilter::compile(r#"REGEXP_CONTAINS(META().id, "^user")"#).unwrap();
        assert!(by_key.matches(&id, &Value::Missing, &meta).unwrap(), "a binary document is filtered by its key");
        for refused in ["country = ", "NOW_MILLIS() > 0", "(SELECT 1) IS NOT NULL", "NO_SUCH_FUNCTION(1)"] {
            assert!(DocFilter::compile(refused).is_err(), "{refused}");
        }
    }
}

//! Running INSERT, UPSERT, UPDATE, DELETE and MERGE: each change is one KV mutation; documents the statement read
//! are written back with their CAS, so a concurrent change fails the statement's write (12009, reason 12033)
//! instead of being overwritten. A failed document does not stop the others: its error is reported with the
//! answer's errors and the others' changes stand, as Couchbase does.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::eval::{count_value, eval};
use super::ops::{build as build_op, project, Op};
use super::{Cx, Row, RowMeta};
use crate::datastore::{DocMeta, Mutation, MutationKind};
use crate::plan::{CUpdateFor, DmlKind, DmlNode, InsertTuple, PathRoot, PathStep, SetPath, SetTerm, Slot};
use crate::value::{Object, Value};
use crate::QueryError;

/// Expiries up to 30 days are relative to now, larger ones absolute (the KV rule).
const RELATIVE_EXPIRY_MAX_SECS: i64 = 30 * 24 * 60 * 60;

pub(crate) fn build<'p>(d: &'p DmlNode, base: &Row) -> Box<dyn Op + 'p> {
    Box::new(DmlOp {
        d,
        base: base.clone(),
        input: None,
        values_done: 0,
        limit: None,
        changed: 0,
        ready: VecDeque::new(),
        merged: HashSet::new(),
    })
}

struct DmlOp<'p> {
    d: &'p DmlNode,
    base: Row,
    input: Option<Box<dyn Op + 'p>>,
    values_done: usize,
    limit: Option<usize>,
    changed: usize,
    /// Changed rows not yet handed on (a MERGE source row may change several targets).
    ready: VecDeque<Row>,
    /// MERGE: the keys of the targets already updated or deleted (one change per document).
    merged: HashSet<Arc<str>>,
}

impl Op for DmlOp<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        if self.limit.is_none() {
            self.limit = Some(match &self.d.limit {
                Some(l) => count_value(&eval(l, &mut self.base.clone(), cx)?, "LIMIT")?,
                None => usize::MAX,
            });
        }
        loop {
            cx.check()?;
            if self.changed >= self.limit.unwrap_or(usize::MAX) {
                return Ok(None);
            }
            if let Some(mut row) = self.ready.pop_front() {
                self.changed += 1;
                cx.stats.mutations.set(cx.stats.mutations.get() + 1);
                if let Some(r) = &self.d.returning {
                    let v = project(&r.terms, r.raw, &mut row, cx)?;
                    row.set(self.d.out, v);
                }
                return Ok(Some(row));
            }
            if !self.change_more(cx)? {
                return Ok(None);
            }
        }
    }
}

impl DmlOp<'_> {
    /// Acts on the next VALUES tuple or input row, queueing the rows it changed; false when there is none left.
    fn change_more(&mut self, cx: &Cx<'_>) -> Result<bool, QueryError> {
        let d = self.d;
        if matches!(d.kind, DmlKind::Insert | DmlKind::Upsert) && !d.values.is_empty() {
            let Some(t) = d.values.get(self.values_done) else { return Ok(false) };
            self.values_done += 1;
            let mut row = self.base.clone();
            if insert(d, d.kind, t, &mut row, cx)?.is_some() {
                self.ready.push_back(row);
            }
            return Ok(true);
        }
        if self.input.is_none() {
            self.input = Some(build_op(&d.input, &self.base));
        }
        let Some(input) = self.input.as_mut() else { return Ok(false) };
        let Some(mut row) = input.next(cx)? else { return Ok(false) };
        let done = match d.kind {
            DmlKind::Insert | DmlKind::Upsert => match &d.select_tuple {
                Some(t) => insert(d, d.kind, t, &mut row, cx)?,
                None => None,
            },
            DmlKind::Update => update(d, &d.set, &mut row, cx)?,
            DmlKind::Delete => delete(d, &mut row, cx)?,
            DmlKind::Merge => {
                self.ready.extend(super::merge::merge(d, row, cx, &mut self.merged)?);
                return Ok(true);
            }
        };
        if done.is_some() {
            self.ready.push_back(row);
        }
        Ok(true)
    }
}

/// Applies a mutation; a refusal for this document is recorded and gives `None`.
fn send(d: &DmlNode, m: Mutation, cx: &Cx<'_>) -> Result<Option<u64>, QueryError> {
    match d.ks.keyspace.mutate(&m) {
        Ok(outcome) => Ok(Some(outcome.cas)),
        Err(e @ QueryError::Dml { .. }) => {
            cx.dml_errors.borrow_mut().push(e);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn expiry_from_options(options: Option<&Value>, cx: &Cx<'_>) -> Result<u32, QueryError> {
    let Some(Value::Object(o)) = options else { return Ok(0) };
    match o.get("expiration") {
        None | Some(Value::Missing) | Some(Value::Null) => Ok(0),
        Some(v) => expiry_value(v, cx),
    }
}

/// An expiration in seconds as given (relative up to 30 days, absolute beyond) as absolute seconds, 0 for none.
fn expiry_value(v: &Value, cx: &Cx<'_>) -> Result<u32, QueryError> {
    let Some(secs) = v.as_i64() else {
        return Err(QueryError::eval(format!(
            "Invalid expiration {}: a number of seconds is expected",
            v.to_json_string()
        )));
    };
    if secs <= 0 {
        return Ok(0);
    }
    let abs = if secs <= RELATIVE_EXPIRY_MAX_SECS { cx.fnctx.now_nanos / 1_000_000_000 + secs } else { secs };
    u32::try_from(abs).map_err(|_| QueryError::eval(format!("Expiration {secs} is out of range")))
}

fn doc_meta(cas: u64, expiration: u32) -> DocMeta {
    DocMeta { cas, expiration, flags: 0, is_json: true }
}

fn put_doc(d: &DmlNode, row: &mut Row, key: Arc<str>, value: Value, meta: DocMeta) {
    let keyspace = Arc::from(d.ks.name.display_path());
    row.set_doc(d.slot, value, Some(Arc::new(RowMeta { id: key, meta, keyspace })));
}

/// Inserts (or, for `DmlKind::Upsert`, upserts) one tuple evaluated over `row`.
pub(super) fn insert(
    d: &DmlNode,
    as_kind: DmlKind,
    t: &InsertTuple,
    row: &mut Row,
    cx: &Cx<'_>,
) -> Result<Option<()>, QueryError> {
    let key = eval(&t.key, row, cx)?;
    let value = eval(&t.value, row, cx)?;
    let options = t.options.as_ref().map(|o| eval(o, row, cx)).transpose()?;
    let upsert = as_kind == DmlKind::Upsert;
    let Value::String(key) = key else {
        return Err(QueryError::DmlKeyType { upsert, key: key.to_json_string() });
    };
    if value.is_missing() {
        let op = if upsert { "UPSERT" } else { "INSERT" };
        return Err(QueryError::eval(format!("Cannot {op} a MISSING value for key {key}.")));
    }
    if let Some(o) = options.as_ref().filter(|o| !matches!(o, Value::Object(_))) {
        return Err(QueryError::DmlOptionsType(o.to_json_string()));
    }
    let expiration = expiry_from_options(options.as_ref(), cx)?;
    let kind = if upsert { MutationKind::Upsert } else { MutationKind::Insert };
    let m = Mutation {
        kind,
        key: key.clone(),
        value: value.clone(),
        expiration,
        preserve_expiry: false,
        flags: None,
        durability: cx.dml.durability,
    };
    let Some(cas) = send(d, m, cx)? else { return Ok(None) };
    put_doc(d, row, key, value, doc_meta(cas, expiration));
    Ok(Some(()))
}

pub(super) fn current_meta(row: &Row, slot: Slot) -> Result<Arc<RowMeta>, QueryError> {
    row.metas
        .get(slot)
        .and_then(Option::clone)
        .ok_or_else(|| QueryError::internal("DML row without its document's metadata"))
}

pub(super) fn update(d: &DmlNode, set: &[SetTerm], row: &mut Row, cx: &Cx<'_>) -> Result<Option<()>, QueryError> {
    let meta = current_meta(row, d.slot)?;
    let mut expiration = None;
    for term in set {
        apply_term(term, d.slot, row, cx, &mut expiration)?;
    }
    let value = row.get(d.slot).clone();
    let preserve = expiration.is_none() && cx.dml.preserve_expiry;
    let new_expiry = expiration.unwrap_or(if preserve { meta.meta.expiration } else { 0 });
    let m = Mutation {
        kind: MutationKind::Replace { cas: meta.meta.cas },
        key: meta.id.clone(),
        value: value.clone(),
        expiration: new_expiry,
        preserve_expiry: preserve,
        flags: Some(meta.meta.flags),
        durability: cx.dml.durability,
    };
    let Some(cas) = send(d, m, cx)? else { return Ok(None) };
    put_doc(d, row, meta.id.clone(), value, doc_meta(cas, new_expiry));
    Ok(Some(()))
}

pub(super) fn delete(d: &DmlNode, row: &mut Row, cx: &Cx<'_>) -> Result<Option<()>, QueryError> {
    let meta = current_meta(row, d.slot)?;
    let m = Mutation {
        kind: MutationKind::Delete { cas: meta.meta.cas },
        key: meta.id.clone(),
        value: Value::Missing,
        expiration: 0,
        preserve_expiry: false,
        flags: None,
        durability: cx.dml.durability,
    };
    Ok(send(d, m, cx)?.map(|_| ()))
}

/// A step of a path with its computed name or index.
#[derive(Clone, Debug)]
enum Step {
    Field(String),
    Index(i64),
}

fn resolve_steps(steps: &[PathStep], row: &mut Row, cx: &Cx<'_>) -> Result<Option<Vec<Step>>, QueryError> {
    let mut out = Vec::with_capacity(steps.len());
    for s in steps {
        out.push(match s {
            PathStep::Field(n) => Step::Field(n.to_string()),
            PathStep::DynField(e) => match eval(e, row, cx)? {
                Value::String(n) => Step::Field(n.to_string()),
                _ => return Ok(None),
            },
            PathStep::Element(e) => match eval(e, row, cx)?.as_i64() {
                Some(i) => Step::Index(i),
                None => return Ok(None),
            },
        });
    }
    Ok(Some(out))
}

/// Where each update-for variable points in the target document.
type VarPaths = HashMap<Slot, Vec<Step>>;

fn apply_term(
    term: &SetTerm,
    target: Slot,
    row: &mut Row,
    cx: &Cx<'_>,
    expiration: &mut Option<u32>,
) -> Result<(), QueryError> {
    match &term.update_for {
        None => apply_at(term, target, row, cx, &VarPaths::new(), expiration),
        Some(uf) => apply_for(term, uf, 0, target, row, cx, &mut VarPaths::new(), expiration),
    }
}

#[allow(clippy::too_many_arguments)]
fn apply_for(
    term: &SetTerm,
    uf: &CUpdateFor,
    dim: usize,
    target: Slot,
    row: &mut Row,
    cx: &Cx<'_>,
    vars: &mut VarPaths,
    expiration: &mut Option<u32>,
) -> Result<(), QueryError> {
    let Some(bindings) = uf.dimensions.get(dim) else {
        if let Some(w) = &uf.when {
            if !eval(w, row, cx)?.truth() {
                return Ok(());
            }
        }
        return apply_at(term, target, row, cx, vars, expiration);
    };
    // Each binding of this dimension ranges over an array in the document; zip them to the shortest.
    let mut arrays = Vec::new();
    for (_, _, over) in bindings {
        let Some((slot, steps)) = full_path(over, target, row, cx, vars)? else { return Ok(()) };
        let Value::Array(items) = get_at(row.get(slot), &steps) else { return Ok(()) };
        arrays.push((steps, items));
    }
    let n = arrays.iter().map(|(_, a)| a.len()).min().unwrap_or(0);
    for i in 0..n {
        for ((var, pos, _), (steps, items)) in bindings.iter().zip(&arrays) {
            row.set(*var, items[i].clone());
            if let Some(p) = pos {
                row.set(*p, Value::int(i as i64));
            }
            let mut path = steps.clone();
            path.push(Step::Index(i as i64));
            vars.insert(*var, path);
        }
        apply_for(term, uf, dim + 1, target, row, cx, vars, expiration)?;
    }
    Ok(())
}

/// The slot and steps a path writes to, following update-for variables back into the target document.
fn full_path(
    path: &SetPath,
    target: Slot,
    row: &mut Row,
    cx: &Cx<'_>,
    vars: &VarPaths,
) -> Result<Option<(Slot, Vec<Step>)>, QueryError> {
    let PathRoot::Slot(root) = path.root else { return Ok(None) };
    let Some(steps) = resolve_steps(&path.steps, row, cx)? else { return Ok(None) };
    Ok(Some(match vars.get(&root) {
        Some(prefix) => (target, prefix.iter().cloned().chain(steps).collect()),
        None => (root, steps),
    }))
}

fn apply_at(
    term: &SetTerm,
    target: Slot,
    row: &mut Row,
    cx: &Cx<'_>,
    vars: &VarPaths,
    expiration: &mut Option<u32>,
) -> Result<(), QueryError> {
    let value = term.value.as_ref().map(|v| eval(v, row, cx)).transpose()?;
    if let PathRoot::Expiration = term.path.root {
        *expiration = Some(match &value {
            Some(v) => expiry_value(v, cx)?,
            None => 0,
        });
        return Ok(());
    }
    let Some((slot, steps)) = full_path(&term.path, target, row, cx, vars)? else { return Ok(()) };
    if slot != target {
        // A SET on a plain variable changes nothing in the document.
        return Ok(());
    }
    let mut doc = row.get(slot).clone();
    set_at(&mut doc, &steps, value);
    let meta = row.metas.get(slot).cloned().flatten();
    row.set_doc(slot, doc, meta);
    Ok(())
}

fn get_at(v: &Value, steps: &[Step]) -> Value {
    let mut cur = v.clone();
    for s in steps {
        cur = match s {
            Step::Field(n) => cur.field(n),
            Step::Index(i) => cur.element(*i),
        };
    }
    cur
}

/// Sets (or with `None`, removes) the value at `steps`, creating missing intermediate objects.
fn set_at(v: &mut Value, steps: &[Step], new: Option<Value>) {
    let Some((first, rest)) = steps.split_first() else {
        if let Some(n) = new {
            *v = n;
        }
        return;
    };
    match first {
        Step::Field(name) => {
            if v.is_unknown() && new.is_some() {
                *v = Value::object(Object::new());
            }
            let Some(o) = v.object_mut() else { return };
            if rest.is_empty() {
                match new {
                    Some(n) if !n.is_missing() => {
                        o.insert(name.clone(), n);
                    }
                    _ => {
                        o.remove(name);
                    }
                }
                return;
            }
            if new.is_none() && !o.contains_key(name) {
                return;
            }
            let child = o.entry(name.clone()).or_insert(Value::Missing);
            set_at(child, rest, new);
        }
        Step::Index(i) => {
            let Some(a) = v.array_mut() else { return };
            let len = a.len() as i64;
            let idx = if *i < 0 { len + i } else { *i };
            if !(0..len).contains(&idx) {
                return;
            }
            let idx = idx as usize;
            if rest.is_empty() {
                match new {
                    Some(n) => a[idx] = n,
                    None => {
                        a.remove(idx);
                    }
                }
                return;
            }
            set_at(&mut a[idx], rest, new);
        }
    }
}

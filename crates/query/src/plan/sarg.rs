//! Index selection: which online secondary index can narrow a keyspace's scan for a WHERE clause, and the spans
//! it reads.
//!
//! A predicate narrows an index when one side is the index's key expression (written over the keyspace's alias or
//! its bare fields, as the index was) and the other side is the same for every row (constants, parameters,
//! deterministic functions of them): `k = v`, `k IN [...]`, `k < v` and friends, `k BETWEEN a AND b`,
//! `k LIKE 'prefix%'`, `k IS NOT NULL/MISSING/VALUED`; for an array index `DISTINCT ARRAY v.f FOR v IN arr END`,
//! `ANY v IN arr SATISFIES v.f = x END` (any range variable name). Keys are matched as a prefix: equality on the
//! first keys, then one range. The WHERE clause still filters every fetched document, so a span only has to
//! cover the rows that can pass, and indexes never change results. A partial index is used only when each
//! conjunct of its WHERE appears among the query's.

use std::sync::Arc;

use super::compile_expr::Compiler;
use super::CExpr;
use crate::ast::{ArrayForKind, BinaryOp, Binding, Expr, IsTest, Quantifier};
use crate::index::{IndexDef, IndexState};
use crate::QueryError;

/// One span over an index: equality values for a prefix of the keys, then optionally a range on the next key.
#[derive(Clone)]
pub struct SpanPlan {
    pub eq: Vec<CExpr>,
    /// A range on key `eq.len()`: low and high bounds with their inclusiveness; `IN` lists expand at run time.
    pub range: Option<(Option<(CExpr, bool)>, Option<(CExpr, bool)>)>,
    /// The first key is matched against every element of this array (`k IN list`): one span per element.
    pub in_list: Option<CExpr>,
}

/// A chosen secondary index and its spans.
#[derive(Clone)]
pub struct IndexChoice {
    pub index: Arc<str>,
    pub span: SpanPlan,
    /// An array index can hold a document under several keys: its document ids are made distinct.
    pub distinct: bool,
    /// How many keys the spans constrain (for choosing between indexes).
    score: usize,
}

/// Strips the keyspace alias from a path over it: `d.a.b` (or, with `bare`, `a.b`) becomes `a.b` as an index key
/// is written; `None` when the expression reads anything else that varies per row.
fn relative(e: &Expr, alias: &str, bare: bool, bound: &[String]) -> Option<Expr> {
    let b = |x: &Expr| relative(x, alias, bare, bound).map(Box::new);
    Some(match e {
        Expr::Field(base, name) if matches!(&**base, Expr::Ident(a) if a == alias) => Expr::Ident(name.clone()),
        Expr::Ident(name) if bound.contains(name) => Expr::Ident(name.clone()),
        Expr::Ident(name) if bare && name != alias => Expr::Ident(name.clone()),
        Expr::Ident(_) | Expr::Subquery(_) | Expr::Param(_) => return None,
        Expr::Literal(v) => Expr::Literal(v.clone()),
        Expr::Field(base, name) => Expr::Field(b(base)?, name.clone()),
        Expr::Element(base, i) => Expr::Element(b(base)?, b(i)?),
        Expr::Neg(x) => Expr::Neg(b(x)?),
        Expr::Binary(op, l, r) => Expr::Binary(*op, b(l)?, b(r)?),
        Expr::Call(c) if c.name != "meta" => {
            let mut c = c.clone();
            c.args = c.args.iter().map(|a| relative(a, alias, bare, bound)).collect::<Option<Vec<_>>>()?;
            Expr::Call(c)
        }
        // META(alias).id / META().id: the index key `meta().id`.
        Expr::Call(c) if c.args.is_empty() || matches!(c.args.as_slice(), [Expr::Ident(a)] if a == alias) => {
            let mut c = c.clone();
            c.args.clear();
            Expr::Call(c)
        }
        Expr::ArrayFor { kind, mapping, bindings, when } => {
            let mut inner = bound.to_vec();
            inner.extend(bindings.iter().map(|x| x.var.clone()));
            let bindings = bindings
                .iter()
                .map(|x| Some(Binding { expr: relative(&x.expr, alias, bare, bound)?, ..x.clone() }))
                .collect::<Option<Vec<_>>>()?;
            Expr::ArrayFor {
                kind: *kind,
                mapping: Box::new(relative(mapping, alias, bare, &inner)?),
                bindings,
                when: match when {
                    Some(w) => Some(Box::new(relative(w, alias, bare, &inner)?)),
                    None => None,
                },
            }
        }
        _ => return None,
    })
}

/// Whether `e` has the same value for every row: literals, parameters and deterministic functions of them.
fn row_independent(e: &Expr) -> bool {
    match e {
        Expr::Literal(_) | Expr::Param(_) => true,
        Expr::Neg(x) => row_independent(x),
        Expr::Array(xs) => xs.iter().all(row_independent),
        Expr::Binary(_, a, b) => row_independent(a) && row_independent(b),
        Expr::Call(c) => {
            crate::functions::lookup(&c.name)
                .is_some_and(|d| d.deterministic && matches!(d.kind, crate::functions::FnKind::Scalar(_)))
                && c.args.iter().all(row_independent)
        }
        _ => false,
    }
}

fn flatten_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::And(xs) => xs.iter().for_each(|x| flatten_and(x, out)),
        e => out.push(e),
    }
}

/// A predicate on one key: what it says about the key's value.
enum KeyPred<'a> {
    Eq(&'a Expr),
    In(&'a Expr),
    Range(Option<(&'a Expr, bool)>, Option<(&'a Expr, bool)>),
    /// `LIKE 'prefix%'`.
    Prefix(String),
    /// IS NOT MISSING / IS VALUED / IS NOT NULL.
    NotUnknown,
}

/// Renames range variable `from` to `to` everywhere in `e` (an ANY's variable to the index key's).
fn rename(e: &Expr, from: &str, to: &str) -> Expr {
    let mut e = e.clone();
    rename_in(&mut e, from, to);
    e
}

fn rename_in(e: &mut Expr, from: &str, to: &str) {
    match e {
        Expr::Ident(n) if n == from => *n = to.to_string(),
        Expr::Field(b, _) | Expr::Neg(b) | Expr::Not(b) => rename_in(b, from, to),
        Expr::Element(a, b) | Expr::Binary(_, a, b) => {
            rename_in(a, from, to);
            rename_in(b, from, to)
        }
        Expr::Call(c) => c.args.iter_mut().for_each(|a| rename_in(a, from, to)),
        Expr::And(xs) | Expr::Or(xs) | Expr::Array(xs) => xs.iter_mut().for_each(|x| rename_in(x, from, to)),
        _ => {}
    }
}

/// What `conjunct` says about index key `key` (its normalised text), if anything.
fn key_pred<'a>(conjunct: &'a Expr, key: &str, alias: &str, bare: bool) -> Option<KeyPred<'a>> {
    let is_key = |e: &Expr| relative(e, alias, bare, &[]).is_some_and(|r| r.to_string() == key);
    match conjunct {
        Expr::Binary(op, l, r)
            if matches!(op, BinaryOp::Eq | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge) =>
        {
            let (op, v) = if is_key(l) && row_independent(r) {
                (*op, &**r)
            } else if is_key(r) && row_independent(l) {
                (flip(*op), &**l)
            } else {
                return None;
            };
            Some(match op {
                BinaryOp::Eq => KeyPred::Eq(v),
                BinaryOp::Lt => KeyPred::Range(None, Some((v, false))),
                BinaryOp::Le => KeyPred::Range(None, Some((v, true))),
                BinaryOp::Gt => KeyPred::Range(Some((v, false)), None),
                _ => KeyPred::Range(Some((v, true)), None),
            })
        }
        Expr::In { expr, list, negated: false } if is_key(expr) && row_independent(list) => Some(KeyPred::In(list)),
        Expr::Between { expr, low, high, negated: false }
            if is_key(expr) && row_independent(low) && row_independent(high) =>
        {
            Some(KeyPred::Range(Some((low, true)), Some((high, true))))
        }
        Expr::Like { expr, pattern, escape: None, negated: false } if is_key(expr) => match &**pattern {
            Expr::Literal(v) => {
                let p = v.as_str()?;
                let prefix: String = p.chars().take_while(|c| !matches!(c, '%' | '_' | '\\')).collect();
                (!prefix.is_empty()).then_some(KeyPred::Prefix(prefix))
            }
            _ => None,
        },
        Expr::Is { expr, test: IsTest::Missing | IsTest::Null, negated: true }
        | Expr::Is { expr, test: IsTest::Valued, negated: false }
            if is_key(expr) =>
        {
            Some(KeyPred::NotUnknown)
        }
        // `ANY v IN arr SATISFIES <mapping of v> = x END` over `DISTINCT ARRAY <mapping> FOR v IN arr END`.
        Expr::Quantified { quantifier: Quantifier::Any, bindings, satisfies } if bindings.len() == 1 => {
            let b = &bindings[0];
            let index_key = crate::parse_expression(key).ok()?;
            let Expr::ArrayFor { kind: ArrayForKind::Array, mapping, bindings: ib, when: None } = &index_key else {
                return None;
            };
            let [ib] = ib.as_slice() else { return None };
            if relative(&b.expr, alias, bare, &[]).map(|e| e.to_string()) != Some(ib.expr.to_string())
                || b.within != ib.within
            {
                return None;
            }
            let Expr::Binary(BinaryOp::Eq, ol, or) = &**satisfies else { return None };
            let inner_key = mapping.to_string();
            let is_inner = |e: &Expr| {
                let e = rename(e, &b.var, &ib.var);
                relative(&e, alias, bare, std::slice::from_ref(&ib.var)).is_some_and(|r| r.to_string() == inner_key)
            };
            if is_inner(ol) && row_independent(or) {
                Some(KeyPred::Eq(or))
            } else if is_inner(or) && row_independent(ol) {
                Some(KeyPred::Eq(ol))
            } else {
                None
            }
        }
        _ => None,
    }
}

fn flip(op: BinaryOp) -> BinaryOp {
    match op {
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::Le => BinaryOp::Ge,
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::Ge => BinaryOp::Le,
        other => other,
    }
}

/// The best online secondary index for a keyspace term (alias `alias`, `bare` when unqualified names are its
/// fields) under `where_`, with its spans compiled; `hint` restricts the choice to the named indexes.
pub(crate) fn choose_index_for(
    c: &mut Compiler<'_>,
    indexes: &[(IndexDef, IndexState)],
    where_: &Expr,
    alias: &str,
    bare: bool,
    hint: &[String],
) -> Result<Option<IndexChoice>, QueryError> {
    let mut conjuncts = Vec::new();
    flatten_and(where_, &mut conjuncts);
    let texts: Vec<String> =
        conjuncts.iter().filter_map(|e| relative(e, alias, bare, &[]).map(|r| r.to_string())).collect();
    let mut best: Option<IndexChoice> = None;
    for (def, state) in indexes {
        if def.is_primary || *state != IndexState::Online || def.keys.is_empty() {
            continue;
        }
        if !hint.is_empty() && !hint.contains(&def.name) {
            continue;
        }
        if let Some(cond) = &def.condition {
            // A partial index holds only documents its condition accepts: use it only when the query asks for no
            // others, i.e. when each of the condition's conjuncts is one of the query's.
            let Ok(parsed) = crate::parse_expression(cond) else { continue };
            let mut needed = Vec::new();
            flatten_and(&parsed, &mut needed);
            if !needed.iter().all(|n| texts.contains(&n.to_string())) {
                continue;
            }
        }
        let Some(mut choice) = spans_for(c, def, &conjuncts, alias, bare)? else { continue };
        if def.condition.is_some() {
            // A partial index holds fewer documents than a full one on the same keys.
            choice.score += 1;
        }
        if best.as_ref().is_none_or(|b| choice.score > b.score) {
            best = Some(choice);
        }
    }
    Ok(best)
}

fn spans_for(
    c: &mut Compiler<'_>,
    def: &IndexDef,
    conjuncts: &[&Expr],
    alias: &str,
    bare: bool,
) -> Result<Option<IndexChoice>, QueryError> {
    let mut span = SpanPlan { eq: Vec::new(), range: None, in_list: None };
    let mut score = 0;
    for (i, key) in def.keys.iter().enumerate() {
        let preds: Vec<KeyPred<'_>> = conjuncts.iter().filter_map(|e| key_pred(e, &key.expr, alias, bare)).collect();
        if let Some(v) = preds.iter().find_map(|p| if let KeyPred::Eq(v) = p { Some(*v) } else { None }) {
            span.eq.push(c.expr(v)?);
            score += 3;
            continue;
        }
        if i == 0 {
            if let Some(list) = preds.iter().find_map(|p| if let KeyPred::In(l) = p { Some(*l) } else { None }) {
                span.in_list = Some(c.expr(list)?);
                score += 2;
                break;
            }
        }
        let mut low: Option<(CExpr, bool)> = None;
        let mut high: Option<(CExpr, bool)> = None;
        let mut constrained = false;
        for p in &preds {
            match p {
                KeyPred::Range(l, h) => {
                    if let (None, Some((v, inc))) = (&low, l) {
                        low = Some((c.expr(v)?, *inc));
                    }
                    if let (None, Some((v, inc))) = (&high, h) {
                        high = Some((c.expr(v)?, *inc));
                    }
                    constrained = true;
                }
                KeyPred::Prefix(prefix) if low.is_none() => {
                    low = Some((CExpr::Const(crate::value::Value::from(prefix.clone())), true));
                    if let Some(next) = super::spans::successor(prefix) {
                        high = Some((CExpr::Const(crate::value::Value::from(next)), false));
                    }
                    constrained = true;
                }
                KeyPred::NotUnknown if low.is_none() => {
                    // Everything above NULL: false, true, numbers, strings, arrays, objects.
                    low = Some((CExpr::Const(crate::value::Value::Null), false));
                    constrained = true;
                }
                _ => {}
            }
        }
        if constrained {
            span.range = Some((low, high));
            score += 1;
        }
        break;
    }
    if score == 0 {
        return Ok(None);
    }
    let distinct = def.keys.iter().any(|k| k.array.is_some());
    Ok(Some(IndexChoice { index: Arc::from(def.name.as_str()), span, distinct, score }))
}

/// Turns a full primary scan (or a keyspace with no primary index) into a secondary index scan when `where_`
/// has a predicate an online index can narrow; a keyspace term still without an index is refused ("No index
/// available"). `bare`: unqualified names in the WHERE clause are fields of this term (it is the only one).
pub(crate) fn choose_secondary(
    c: &mut Compiler<'_>,
    node: super::Node,
    where_: Option<&Expr>,
    alias: &str,
    bare: bool,
) -> Result<super::Node, QueryError> {
    use super::{IdSpans, Node};
    let (ks, slot, hint) = match &node {
        Node::PrimaryScan { ks, slot, spans: IdSpans::All, .. } => (ks.clone(), *slot, Vec::new()),
        Node::PendingScan { ks, slot, hint, .. } => (ks.clone(), *slot, hint.clone()),
        _ => return Ok(node),
    };
    if let Some(w) = where_ {
        let indexes = ks.keyspace.indexes();
        if let Some(choice) = choose_index_for(c, &indexes, w, alias, bare, &hint)? {
            return Ok(Node::IndexScan { ks, slot, index: choice.index, span: choice.span, distinct: choice.distinct });
        }
    }
    require_scan(node)
}

/// A keyspace term that found no index fails the statement.
pub(crate) fn require_scan(node: super::Node) -> Result<super::Node, QueryError> {
    match node {
        super::Node::PendingScan { error, .. } => Err(error),
        other => Ok(other),
    }
}

/// Whether the rows of `node` already come in the order `order_by` asks for: every term ascending with the
/// default placement of MISSING and NULL, and the block's only scan reading an index whose order that is: the
/// primary index for `META(alias).id` (unique, so nothing after it matters), a secondary index (not an array
/// index, whose documents come once in the order of their first key) for a prefix of its keys.
pub(crate) fn order_satisfied(
    node: &super::Node,
    order_by: &[crate::ast::OrderTerm],
    alias: Option<&str>,
    projected: &[Arc<str>],
) -> bool {
    use super::Node;
    let Some(alias) = alias else { return false };
    if order_by.is_empty() || order_by.iter().any(|t| t.desc || t.nulls_first == Some(false)) {
        return false;
    }
    // ORDER BY names a projection alias before a field: such a term sorts by the projected value.
    let root = |e: &Expr| -> Option<String> {
        let mut e = e;
        loop {
            match e {
                Expr::Ident(n) => return Some(n.clone()),
                Expr::Field(b, _) | Expr::Element(b, _) => e = b,
                _ => return None,
            }
        }
    };
    if order_by.iter().any(|t| root(&t.expr).is_some_and(|r| projected.iter().any(|p| **p == *r))) {
        return false;
    }
    let mut leaf = node;
    loop {
        leaf = match leaf {
            Node::Project { input, .. } | Node::Filter { input, .. } | Node::Let { input, .. } => input,
            _ => break,
        };
    }
    let is_meta_id = |e: &Expr| {
        matches!(e, Expr::Field(base, f) if f == "id" && matches!(&**base, Expr::Call(c) if c.name == "meta"
            && (c.args.is_empty() || matches!(c.args.as_slice(), [Expr::Ident(a)] if a == alias))))
    };
    match leaf {
        Node::PrimaryScan { .. } => is_meta_id(&order_by[0].expr),
        Node::IndexScan { ks, index, distinct: false, .. } => {
            let indexes = ks.keyspace.indexes();
            let Some((def, _)) = indexes.iter().find(|(d, _)| *d.name == **index) else { return false };
            let mut keys = def.keys.iter();
            for term in order_by {
                if is_meta_id(&term.expr) {
                    // The document id follows the keys in an index entry.
                    return keys.next().is_none();
                }
                let Some(key) = keys.next() else { return false };
                if key.array.is_some()
                    || relative(&term.expr, alias, true, &[]).map(|e| e.to_string()) != Some(key.expr.clone())
                {
                    return false;
                }
            }
            true
        }
        _ => false,
    }
}

//! What a WHERE clause's conjuncts say about an index's keys.
//!
//! A predicate narrows an index when one side is the index's key expression (written over the keyspace's alias or
//! its bare fields, as the index was) and the other side is the same for every row (constants, parameters,
//! deterministic functions of them): `k = v`, `k IN [...]`, `k = a OR k = b`, `k < v` and friends,
//! `k BETWEEN a AND b`, `k LIKE 'prefix%'`, `k IS NOT NULL/MISSING/VALUED`; for an array index
//! `DISTINCT ARRAY v.f FOR v IN arr END`, `ANY v IN arr SATISFIES v.f = x END` (any range variable name).

use super::compile_expr::Compiler;
use super::scope::VarKind;
use super::Slot;
use crate::ast::{ArrayForKind, BinaryOp, Binding, Expr, IsTest, Quantifier};

/// Strips the keyspace alias from a path over it: `d.a.b` (or, with `bare`, `a.b`) becomes `a.b` as an index key
/// is written; `None` when the expression reads anything else that varies per row.
pub(super) fn relative(e: &Expr, alias: &str, bare: bool, bound: &[String]) -> Option<Expr> {
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
pub(super) fn row_independent(e: &Expr) -> bool {
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

pub(super) fn flatten_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::And(xs) => xs.iter().for_each(|x| flatten_and(x, out)),
        e => out.push(e),
    }
}

/// A predicate on one key: what it says about the key's value.
pub(super) enum KeyPred<'a> {
    Eq(&'a Expr),
    /// `k IN list`.
    In(&'a Expr),
    /// `k = a OR k = b ...`: the key is one of these values.
    AnyOf(Vec<&'a Expr>),
    Range(Option<(&'a Expr, bool)>, Option<(&'a Expr, bool)>),
    /// `LIKE 'prefix...'`, and whether the pattern is exactly `prefix%` (so the range is the predicate).
    Prefix(String, bool),
    /// IS NOT NULL and IS VALUED: any value above NULL.
    NotUnknown,
    /// IS NOT MISSING: NULL or above.
    NotMissing,
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
pub(super) fn key_pred<'a>(conjunct: &'a Expr, key: &str, alias: &str, bare: bool) -> Option<KeyPred<'a>> {
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
                let exact = p.len() == prefix.len() + 1 && p.ends_with('%');
                (!prefix.is_empty()).then_some(KeyPred::Prefix(prefix, exact))
            }
            _ => None,
        },
        Expr::Is { expr, test: IsTest::Null, negated: true }
        | Expr::Is { expr, test: IsTest::Valued, negated: false }
            if is_key(expr) =>
        {
            Some(KeyPred::NotUnknown)
        }
        // NULL is not MISSING: the span starts at NULL, included.
        Expr::Is { expr, test: IsTest::Missing, negated: true } if is_key(expr) => Some(KeyPred::NotMissing),
        Expr::Or(terms) => {
            let values = terms
                .iter()
                .map(|t| match key_pred(t, key, alias, bare) {
                    Some(KeyPred::Eq(v)) => Some(v),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            Some(KeyPred::AnyOf(values))
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

/// Whether every name `e` reads that is not a range variable of its own resolves to the keyspace term in `slot`
/// (`alias` itself, or with `bare` a field of it): a LET, WITH or outer variable of the same name as a field is
/// not the field, so such a conjunct is not one an index answers.
pub(super) fn reads_only_term(c: &Compiler<'_>, e: &Expr, alias: &str, bare: bool, slot: Slot) -> bool {
    fn walk(c: &Compiler<'_>, e: &Expr, alias: &str, bare: bool, slot: Slot, bound: &mut Vec<String>) -> bool {
        match e {
            Expr::Ident(n) if bound.contains(n) => true,
            Expr::Ident(n) if n == alias => c.scopes.lookup(n) == Some((slot, VarKind::Term { is_keyspace: true })),
            Expr::Ident(n) => bare && c.scopes.lookup(n).is_none(),
            Expr::Subquery(_) => false,
            Expr::Call(call) if call.name == "meta" && call.args.is_empty() => bare,
            Expr::Quantified { bindings, satisfies: body, .. } | Expr::ArrayFor { bindings, mapping: body, .. } => {
                let depth = bound.len();
                let mut ok = true;
                for b in bindings {
                    ok &= walk(c, &b.expr, alias, bare, slot, bound);
                    bound.push(b.var.clone());
                    bound.extend(b.name_var.clone());
                }
                ok &= walk(c, body, alias, bare, slot, bound);
                if let Expr::ArrayFor { when: Some(w), .. } = e {
                    ok &= walk(c, w, alias, bare, slot, bound);
                }
                bound.truncate(depth);
                ok
            }
            Expr::ObjectFor { .. } => false,
            _ => {
                let mut ok = true;
                super::visit_children(e, &mut |x| ok &= walk(c, x, alias, bare, slot, bound));
                ok
            }
        }
    }
    walk(c, e, alias, bare, slot, &mut Vec::new())
}

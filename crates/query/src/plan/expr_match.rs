//! Compiled expressions compared and rewritten: whether two compute the same value, replacing the parts an index
//! covers, and whether an expression still reads a slot.

use super::{CBinding, CExpr, Slot};

/// Whether `a` and `b` compute the same value for every row: the same tree, range variables matched by position.
pub(super) fn same(a: &CExpr, b: &CExpr) -> bool {
    same_in(a, b, &mut Vec::new())
}

/// `vars` pairs the range variable slots bound so far in `a` with those in `b`.
fn same_in(a: &CExpr, b: &CExpr, vars: &mut Vec<(Slot, Slot)>) -> bool {
    use CExpr as E;
    let s = |x: &CExpr, y: &CExpr, vars: &mut Vec<(Slot, Slot)>| same_in(x, y, vars);
    let opt = |x: &Option<Box<CExpr>>, y: &Option<Box<CExpr>>, vars: &mut Vec<(Slot, Slot)>| match (x, y) {
        (None, None) => true,
        (Some(x), Some(y)) => same_in(x, y, vars),
        _ => false,
    };
    let all = |xs: &[CExpr], ys: &[CExpr], vars: &mut Vec<(Slot, Slot)>| {
        xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same_in(x, y, vars))
    };
    match (a, b) {
        (E::Const(x), E::Const(y)) => x.value_type() == y.value_type() && x == y,
        (E::Var(x), E::Var(y)) => x == y || vars.contains(&(*x, *y)),
        (E::Named(x), E::Named(y)) => x == y,
        (E::Positional(x), E::Positional(y)) => x == y,
        (E::Meta(x), E::Meta(y)) => x == y,
        (E::Field(x, n), E::Field(y, m)) => n == m && s(x, y, vars),
        (E::DynField(x, n), E::DynField(y, m)) | (E::Element(x, n), E::Element(y, m)) => s(x, y, vars) && s(n, m, vars),
        (E::Slice(x, i, j), E::Slice(y, k, l)) => s(x, y, vars) && s(i, k, vars) && opt(j, l, vars),
        (E::Neg(x), E::Neg(y)) | (E::Not(x), E::Not(y)) | (E::Exists(x), E::Exists(y)) => s(x, y, vars),
        (E::Binary(o, x, i), E::Binary(p, y, j)) => o == p && s(x, y, vars) && s(i, j, vars),
        (E::And(xs), E::And(ys)) | (E::Or(xs), E::Or(ys)) | (E::Array(xs), E::Array(ys)) => all(xs, ys, vars),
        (
            E::Like { expr: x, pattern: p, escape: e, negated: n },
            E::Like { expr: y, pattern: q, escape: f, negated: m },
        ) => n == m && s(x, y, vars) && s(p, q, vars) && opt(e, f, vars),
        (E::In { expr: x, list: l, negated: n }, E::In { expr: y, list: k, negated: m })
        | (E::Within { expr: x, target: l, negated: n }, E::Within { expr: y, target: k, negated: m }) => {
            n == m && s(x, y, vars) && s(l, k, vars)
        }
        (E::Between { expr: x, low: l, high: h, negated: n }, E::Between { expr: y, low: k, high: g, negated: m }) => {
            n == m && s(x, y, vars) && s(l, k, vars) && s(h, g, vars)
        }
        (E::Is { expr: x, test: t, negated: n }, E::Is { expr: y, test: u, negated: m }) => {
            t == u && n == m && s(x, y, vars)
        }
        (E::Case { operand: o, whens: w, otherwise: e }, E::Case { operand: p, whens: v, otherwise: f }) => {
            opt(o, p, vars)
                && w.len() == v.len()
                && w.iter().zip(v).all(|((a1, b1), (a2, b2))| s(a1, a2, vars) && s(b1, b2, vars))
                && opt(e, f, vars)
        }
        (E::Call(f, xs), E::Call(g, ys)) => std::ptr::eq(*f, *g) && all(xs, ys, vars),
        (E::Object(xs), E::Object(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|((n, v), (m, w))| s(n, m, vars) && s(v, w, vars))
        }
        (
            E::Quantified { quantifier: q, bindings: bx, satisfies: x },
            E::Quantified { quantifier: r, bindings: by, satisfies: y },
        ) => q == r && scoped(bx, by, vars, |vars| s(x, y, vars)),
        (
            E::ArrayFor { kind: k, mapping: x, bindings: bx, when: wx },
            E::ArrayFor { kind: l, mapping: y, bindings: by, when: wy },
        ) => k == l && scoped(bx, by, vars, |vars| s(x, y, vars) && opt(wx, wy, vars)),
        (
            E::ObjectFor { name: n, value: x, bindings: bx, when: wx },
            E::ObjectFor { name: m, value: y, bindings: by, when: wy },
        ) => scoped(bx, by, vars, |vars| s(n, m, vars) && s(x, y, vars) && opt(wx, wy, vars)),
        // A subquery is never taken for another.
        _ => false,
    }
}

/// Compares two lists of range variables and, with their slots paired, what they scope.
fn scoped(
    bx: &[CBinding],
    by: &[CBinding],
    vars: &mut Vec<(Slot, Slot)>,
    body: impl FnOnce(&mut Vec<(Slot, Slot)>) -> bool,
) -> bool {
    if bx.len() != by.len() {
        return false;
    }
    let depth = vars.len();
    let mut ok = true;
    for (x, y) in bx.iter().zip(by) {
        ok &= x.within == y.within && same_in(&x.expr, &y.expr, vars);
        vars.push((x.slot, y.slot));
        match (x.name_slot, y.name_slot) {
            (Some(a), Some(b)) => vars.push((a, b)),
            (None, None) => {}
            _ => ok = false,
        }
    }
    ok = ok && body(vars);
    vars.truncate(depth);
    ok
}

/// Replaces, outermost first, every part of `e` that `replace` gives a replacement for.
pub(super) fn rewrite(e: &mut CExpr, replace: &dyn Fn(&CExpr) -> Option<CExpr>) {
    if let Some(r) = replace(e) {
        *e = r;
        return;
    }
    children_mut(e, &mut |x| rewrite(x, replace));
}

/// Whether `e` reads `slot` (its value or its metadata), or may (a correlated subquery).
pub(super) fn reads_slot(e: &CExpr, slot: Slot) -> bool {
    match e {
        CExpr::Var(s) | CExpr::Meta(s) => *s == slot,
        CExpr::Subquery { correlated, .. } => *correlated,
        _ => {
            let mut found = false;
            children(e, &mut |x| found |= reads_slot(x, slot));
            found
        }
    }
}

/// The children of a compiled expression, for `children` (shared, `iter`) and `children_mut` (`iter_mut`).
macro_rules! each_child {
    ($e:expr, $f:expr, $iter:ident) => {{
        use CExpr as E;
        let f = $f;
        match $e {
            E::Const(_) | E::Var(_) | E::Named(_) | E::Positional(_) | E::Meta(_) | E::Subquery { .. } => {}
            E::Field(x, _) | E::Neg(x) | E::Not(x) | E::Exists(x) => f(x),
            E::DynField(x, y) | E::Element(x, y) | E::Binary(_, x, y) => {
                f(x);
                f(y)
            }
            E::Slice(x, y, z) => {
                f(x);
                f(y);
                if let Some(z) = z {
                    f(z)
                }
            }
            E::And(xs) | E::Or(xs) | E::Array(xs) | E::Call(_, xs) => xs.$iter().for_each(|x| f(x)),
            E::Like { expr, pattern, escape, .. } => {
                f(expr);
                f(pattern);
                if let Some(x) = escape {
                    f(x)
                }
            }
            E::In { expr, list: y, .. } | E::Within { expr, target: y, .. } => {
                f(expr);
                f(y)
            }
            E::Between { expr, low, high, .. } => {
                f(expr);
                f(low);
                f(high)
            }
            E::Is { expr, .. } => f(expr),
            E::Case { operand, whens, otherwise } => {
                if let Some(x) = operand {
                    f(x)
                }
                for (w, t) in whens.$iter() {
                    f(w);
                    f(t)
                }
                if let Some(x) = otherwise {
                    f(x)
                }
            }
            E::Object(members) => {
                for (n, v) in members.$iter() {
                    f(n);
                    f(v)
                }
            }
            E::Quantified { bindings, satisfies, .. } => {
                bindings.$iter().for_each(|CBinding { expr, .. }| f(expr));
                f(satisfies)
            }
            E::ArrayFor { mapping, bindings, when, .. } => {
                bindings.$iter().for_each(|CBinding { expr, .. }| f(expr));
                f(mapping);
                if let Some(w) = when {
                    f(w)
                }
            }
            E::ObjectFor { name, value, bindings, when } => {
                bindings.$iter().for_each(|CBinding { expr, .. }| f(expr));
                f(name);
                f(value);
                if let Some(w) = when {
                    f(w)
                }
            }
        }
    }};
}

fn children(e: &CExpr, f: &mut dyn FnMut(&CExpr)) {
    each_child!(e, f, iter)
}

/// Calls `f` on each direct child of `e`.
fn children_mut(e: &mut CExpr, f: &mut dyn FnMut(&mut CExpr)) {
    each_child!(e, f, iter_mut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::BinaryOp;
    use crate::value::Value;

    fn field(slot: Slot, name: &str) -> CExpr {
        CExpr::Field(Box::new(CExpr::Var(slot)), name.into())
    }

    #[test]
    fn expressions_match_when_they_compute_the_same_value() {
        // Proves paths, operators and constants compare by structure and constants by type and value, and range
        // variables by position (two compilations of one ANY bind different slots).
        assert!(same(&field(0, "a"), &field(0, "a")));
        assert!(!same(&field(0, "a"), &field(1, "a")));
        assert!(!same(&CExpr::Const(Value::int(1)), &CExpr::Const(Value::from("1"))));
        let any = |var: Slot| CExpr::Quantified {
            quantifier: crate::ast::Quantifier::Any,
            bindings: vec![CBinding { name_slot: None, slot: var, expr: field(0, "tags"), within: false }],
            satisfies: Box::new(CExpr::Binary(
                BinaryOp::Eq,
                Box::new(CExpr::Var(var)),
                Box::new(CExpr::Const(Value::from("x"))),
            )),
        };
        assert!(same(&any(5), &any(9)));
        assert!(!same(&any(5), &field(0, "tags")));
    }

    #[test]
    fn rewriting_replaces_covered_parts_and_leaves_no_read_of_them() {
        // Proves a rewrite replaces the outermost matching part, and reads_slot then sees no read of the term.
        let mut e = CExpr::Binary(BinaryOp::Add, Box::new(field(0, "a")), Box::new(CExpr::Const(Value::int(1))));
        assert!(reads_slot(&e, 0));
        let key = field(0, "a");
        rewrite(&mut e, &|x| same(x, &key).then_some(CExpr::Var(7)));
        assert!(!reads_slot(&e, 0));
        assert!(reads_slot(&e, 7));
    }
}

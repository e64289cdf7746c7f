//! The rule that, in a grouping query block, everything evaluated after grouping (projection, LETTING, HAVING,
//! ORDER BY) depends only on group keys and aggregates (Couchbase's error 4210, `planner/build_select_sub.go`).
//!
//! The check runs on compiled expressions, where names are already resolved to slots: an expression is valid when
//! it is a group key (compared by its compiled form, so `category` and `p.category` are the same key), or reads no
//! slot that the block bound before grouping (its FROM terms and LET variables) except through group keys.
//! Aggregates, GROUP BY aliases and LETTING variables live in slots bound after grouping, and slots of outer
//! blocks (a correlated subquery's outer row, WITH terms) are outside the block's range, so they pass.

use std::fmt::Write;
use std::ops::Range;

use super::{CBinding, CExpr, Slot};

/// The slots a grouping block bound before grouping, and the compiled form of its group keys.
pub(crate) struct GroupCheck {
    pre_group: Range<Slot>,
    keys: Vec<String>,
}

impl GroupCheck {
    pub fn new<'a>(pre_group: Range<Slot>, keys: impl IntoIterator<Item = &'a CExpr>) -> GroupCheck {
        GroupCheck { pre_group, keys: keys.into_iter().map(fingerprint).collect() }
    }

    /// Whether `e` depends only on group keys, aggregates and values from outside the block.
    pub fn allows(&self, e: &CExpr) -> bool {
        if !self.keys.is_empty() && self.keys.contains(&fingerprint(e)) {
            return true;
        }
        match e {
            CExpr::Var(s) | CExpr::Meta(s) => !self.pre_group.contains(s),
            // A subquery is checked when it is compiled as its own block.
            CExpr::Subquery { .. } => true,
            _ => {
                let mut ok = true;
                children(e, &mut |child| ok = ok && self.allows(child));
                ok
            }
        }
    }
}

/// A text that two compiled expressions share exactly when they compute the same thing the same way. Range
/// variables are numbered in order of binding rather than by slot, since each compilation of the same text binds
/// them to fresh slots.
fn fingerprint(e: &CExpr) -> String {
    let mut out = String::new();
    write_fingerprint(e, &mut Vec::new(), &mut out);
    out
}

fn write_fingerprint(e: &CExpr, bound: &mut Vec<Slot>, out: &mut String) {
    let depth = bound.len();
    if let CExpr::Quantified { bindings, .. } | CExpr::ArrayFor { bindings, .. } | CExpr::ObjectFor { bindings, .. } = e
    {
        for b in bindings {
            bound.extend(b.name_slot);
            bound.push(b.slot);
        }
    }
    // Writing to a String cannot fail.
    let _ = match e {
        CExpr::Const(v) => write!(out, "c{}", v.to_json_string()),
        CExpr::Var(s) => match bound.iter().position(|b| b == s) {
            Some(i) => write!(out, "b{i}"),
            None => write!(out, "v{s}"),
        },
        CExpr::Named(n) => write!(out, "${n}"),
        CExpr::Positional(i) => write!(out, "${i}"),
        CExpr::Field(_, n) => write!(out, ".{n:?}"),
        CExpr::Meta(s) => write!(out, "meta{s}"),
        CExpr::Binary(op, ..) => write!(out, "{op:?}"),
        CExpr::Call(def, _) => write!(out, "{}", def.name),
        CExpr::Like { negated, .. } => write!(out, "like{negated}"),
        CExpr::In { negated, .. } => write!(out, "in{negated}"),
        CExpr::Within { negated, .. } => write!(out, "within{negated}"),
        CExpr::Between { negated, .. } => write!(out, "between{negated}"),
        CExpr::Is { test, negated, .. } => write!(out, "is{test:?}{negated}"),
        CExpr::Quantified { quantifier, bindings, .. } => write!(out, "{quantifier:?}{}", binding_shape(bindings)),
        CExpr::ArrayFor { kind, bindings, .. } => write!(out, "{kind:?}{}", binding_shape(bindings)),
        CExpr::ObjectFor { bindings, .. } => write!(out, "object{}", binding_shape(bindings)),
        CExpr::Subquery { id, .. } => write!(out, "subquery{id}"),
        other => write!(out, "{}", variant_name(other)),
    };
    out.push('(');
    children(e, &mut |child| {
        write_fingerprint(child, bound, out);
        out.push(',');
    });
    out.push(')');
    bound.truncate(depth);
}

/// Whether each binding has a name variable and ranges with WITHIN.
fn binding_shape(bindings: &[CBinding]) -> String {
    bindings.iter().map(|b| format!("[{}{}]", b.name_slot.is_some(), b.within)).collect()
}

fn variant_name(e: &CExpr) -> &'static str {
    match e {
        CExpr::DynField(..) => "dynfield",
        CExpr::Element(..) => "element",
        CExpr::Slice(..) => "slice",
        CExpr::Neg(_) => "neg",
        CExpr::Not(_) => "not",
        CExpr::And(_) => "and",
        CExpr::Or(_) => "or",
        CExpr::Case { operand, .. } => {
            if operand.is_some() {
                "simplecase"
            } else {
                "case"
            }
        }
        CExpr::Array(_) => "array",
        CExpr::Object(_) => "object",
        CExpr::Exists(_) => "exists",
        _ => "other",
    }
}

/// Calls `f` on each expression directly inside `e`, in a fixed order (a subquery's own expressions are not its
/// children).
fn children(e: &CExpr, f: &mut dyn FnMut(&CExpr)) {
    match e {
        CExpr::Const(_) | CExpr::Var(_) | CExpr::Named(_) | CExpr::Positional(_) | CExpr::Meta(_) => {}
        CExpr::Subquery { .. } => {}
        CExpr::Field(x, _) | CExpr::Neg(x) | CExpr::Not(x) | CExpr::Exists(x) => f(x),
        CExpr::DynField(a, b) | CExpr::Element(a, b) | CExpr::Binary(_, a, b) => {
            f(a);
            f(b)
        }
        CExpr::Slice(a, b, c) => {
            f(a);
            f(b);
            c.iter().for_each(|c| f(c))
        }
        CExpr::And(xs) | CExpr::Or(xs) | CExpr::Array(xs) | CExpr::Call(_, xs) => xs.iter().for_each(f),
        CExpr::Like { expr, pattern, escape, .. } => {
            f(expr);
            f(pattern);
            escape.iter().for_each(|e| f(e))
        }
        CExpr::In { expr, list: t, .. } | CExpr::Within { expr, target: t, .. } => {
            f(expr);
            f(t)
        }
        CExpr::Between { expr, low, high, .. } => {
            f(expr);
            f(low);
            f(high)
        }
        CExpr::Is { expr, .. } => f(expr),
        CExpr::Case { operand, whens, otherwise } => {
            operand.iter().for_each(|o| f(o));
            for (w, t) in whens {
                f(w);
                f(t)
            }
            otherwise.iter().for_each(|o| f(o))
        }
        CExpr::Object(members) => {
            for (n, v) in members {
                f(n);
                f(v)
            }
        }
        CExpr::Quantified { bindings, satisfies, .. } => {
            bindings.iter().for_each(|b| f(&b.expr));
            f(satisfies)
        }
        CExpr::ArrayFor { mapping, bindings, when, .. } => {
            bindings.iter().for_each(|b| f(&b.expr));
            f(mapping);
            when.iter().for_each(|w| f(w))
        }
        CExpr::ObjectFor { name, value, bindings, when } => {
            bindings.iter().for_each(|b| f(&b.expr));
            f(name);
            f(value);
            when.iter().for_each(|w| f(w))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn field(slot: Slot, name: &str) -> CExpr {
        CExpr::Field(Box::new(CExpr::Var(slot)), Arc::from(name))
    }

    #[test]
    fn expressions_over_group_keys_pass_and_other_fields_do_not() {
        // Proves the rule on compiled forms: slot 0 is the block's FROM term, slot 5 an aggregate, slot 9 an outer
        // block's value; the group key is `t.category`.
        let key = field(0, "category");
        let check = GroupCheck::new(0..3, [&key]);
        assert!(check.allows(&field(0, "category")));
        assert!(check.allows(&CExpr::Call(crate::functions::lookup("upper").unwrap(), vec![field(0, "category")])));
        assert!(check.allows(&CExpr::Var(5)));
        assert!(check.allows(&field(9, "x")));
        assert!(!check.allows(&field(0, "name")));
        assert!(check.allows(&CExpr::Field(Box::new(field(0, "category")), Arc::from("x"))));
        assert!(!check.allows(&CExpr::Meta(0)));
    }

    #[test]
    fn a_key_with_range_variables_matches_however_they_are_bound() {
        // Proves that `ARRAY x FOR x IN t.tags END` compiled twice (its variable in slot 3, then in slot 7) is
        // recognised as the same group key.
        let array_for = |var: Slot| CExpr::ArrayFor {
            kind: crate::ast::ArrayForKind::Array,
            mapping: Box::new(CExpr::Var(var)),
            bindings: vec![CBinding { name_slot: None, slot: var, expr: field(0, "tags"), within: false }],
            when: None,
        };
        let key = array_for(3);
        let check = GroupCheck::new(0..4, [&key]);
        assert!(check.allows(&array_for(7)));
    }
}

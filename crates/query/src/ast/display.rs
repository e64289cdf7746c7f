//! Expressions as text, in two styles.
//!
//! `Display` writes Couchbase's normalised form (its `expression/stringer.go`), the text `system:indexes` shows for
//! index keys and conditions: names in backticks, every operator in parentheses (``(`a` = 1)``), AND and OR n-ary,
//! lower-case keywords, strings double-quoted with JSON escapes, and Couchbase's rewrites: `a > b` is `(b < a)`,
//! `a >= b` is `(b <= a)`, `a != b` is `(not (a = b))`, NOT IN / NOT LIKE / NOT BETWEEN / NOT WITHIN are `(not
//! (...))`, object members are sorted by name with implicit names written out.
//!
//! The exact style (used inside statements, see `display_stmt.rs`) writes the same layout without those rewrites,
//! so that parsing the text gives back the same tree.

use std::fmt::{self, Write};

use super::{ArrayForKind, ArrayIndexKind, BinaryOp, Binding, Case, Expr, IndexKey, IsTest, Param, Quantifier};
use crate::value::Value;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    /// Couchbase's normalised text.
    Normalised,
    /// Text that parses back to the same tree.
    Exact,
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        write_expr(&mut out, self, Style::Normalised);
        f.write_str(&out)
    }
}

/// An index key as `system:indexes` lists it in `index_key`: the normalised expression, array keys as
/// ``(distinct (array ... end))``, then ` INCLUDE MISSING` and ` DESC` where they apply.
impl fmt::Display for IndexKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        match self.array {
            Some(kind) => {
                out.push_str(if kind == ArrayIndexKind::Distinct { "(distinct (" } else { "(all (" });
                write_expr(&mut out, &self.expr, Style::Normalised);
                out.push_str("))");
            }
            None => write_expr(&mut out, &self.expr, Style::Normalised),
        }
        if self.include_missing {
            out.push_str(" INCLUDE MISSING");
        }
        if self.desc {
            out.push_str(" DESC");
        }
        f.write_str(&out)
    }
}

/// `name` in backticks, a backtick inside doubled and a backslash escaped (the lexer resolves escapes in
/// backticked names too). Couchbase writes names raw; the two agree for every name without those characters.
pub(super) fn write_ident(out: &mut String, name: &str) {
    out.push('`');
    for ch in name.chars() {
        match ch {
            '`' => out.push_str("``"),
            '\\' => out.push_str("\\\\"),
            _ => out.push(ch),
        }
    }
    out.push('`');
}

pub(super) fn write_expr(out: &mut String, e: &Expr, style: Style) {
    match e {
        Expr::Literal(Value::Missing) => out.push_str("missing"),
        Expr::Literal(v) => out.push_str(&v.to_json_string()),
        Expr::Ident(name) => write_ident(out, name),
        Expr::Param(Param::Named(name)) => {
            out.push('$');
            out.push_str(name);
        }
        Expr::Param(Param::Positional(n)) => {
            let _ = write!(out, "${n}");
        }
        Expr::Field(base, name) => {
            out.push('(');
            write_expr(out, base, style);
            out.push('.');
            write_ident(out, name);
            out.push(')');
        }
        Expr::DynamicField(base, name) => wrap(out, style, base, ".[", name, "])"),
        Expr::Element(base, index) => wrap(out, style, base, "[", index, "])"),
        Expr::Slice { base, start, end } => {
            out.push('(');
            write_expr(out, base, style);
            out.push('[');
            write_expr(out, start, style);
            out.push_str(" : ");
            if let Some(end) = end {
                write_expr(out, end, style);
            }
            out.push_str("])");
        }
        Expr::Neg(operand) => prefixed(out, style, "(-", operand),
        Expr::Not(operand) => prefixed(out, style, "(not ", operand),
        Expr::Exists(operand) => prefixed(out, style, "(exists ", operand),
        Expr::Binary(op, a, b) => write_binary(out, style, *op, a, b),
        Expr::And(items) => write_list(out, style, "(", items, " and ", ")"),
        Expr::Or(items) => write_list(out, style, "(", items, " or ", ")"),
        Expr::Array(items) => write_list(out, style, "[", items, ", ", "]"),
        Expr::Like { expr, pattern, escape, negated } => {
            let escape = escape.as_deref().filter(|e| style == Style::Exact || !is_default_escape(e));
            negatable(out, style, *negated, expr, "like", |out| {
                write_expr(out, pattern, style);
                if let Some(escape) = escape {
                    out.push_str(" escape ");
                    write_expr(out, escape, style);
                }
            });
        }
        Expr::In { expr, list, negated } => {
            negatable(out, style, *negated, expr, "in", |out| write_expr(out, list, style))
        }
        Expr::Within { expr, target, negated } => {
            negatable(out, style, *negated, expr, "within", |out| write_expr(out, target, style))
        }
        Expr::Between { expr, low, high, negated } => negatable(out, style, *negated, expr, "between", |out| {
            write_expr(out, low, style);
            out.push_str(" and ");
            write_expr(out, high, style);
        }),
        Expr::Is { expr, test, negated } => {
            out.push('(');
            write_expr(out, expr, style);
            out.push_str(if *negated { " is not " } else { " is " });
            out.push_str(match test {
                IsTest::Null => "null)",
                IsTest::Missing => "missing)",
                IsTest::Valued => "valued)",
            });
        }
        Expr::Case(case) => write_case(out, style, case),
        Expr::Call(call) => {
            if crate::lexer::is_plain_name(&call.name) {
                out.push_str(&call.name);
            } else {
                write_ident(out, &call.name);
            }
            out.push('(');
            if call.star {
                out.push('*');
            } else {
                if call.distinct {
                    out.push_str("DISTINCT ");
                }
                write_list(out, style, "", &call.args, ", ", "");
            }
            out.push(')');
        }
        Expr::Object(members) => write_object(out, style, members),
        Expr::Quantified { quantifier, bindings, satisfies } => {
            out.push_str(match quantifier {
                Quantifier::Any => "any ",
                Quantifier::Every => "every ",
                Quantifier::AnyAndEvery => "any and every ",
            });
            write_bindings(out, style, bindings);
            out.push_str(" satisfies ");
            write_expr(out, satisfies, style);
            out.push_str(" end");
        }
        Expr::ArrayFor { kind, mapping, bindings, when } => {
            out.push_str(if *kind == ArrayForKind::Array { "array " } else { "first " });
            write_expr(out, mapping, style);
            write_for(out, style, bindings, when.as_deref());
        }
        Expr::ObjectFor { name, value, bindings, when } => {
            out.push_str("object ");
            write_expr(out, name, style);
            out.push_str(" : ");
            write_expr(out, value, style);
            write_for(out, style, bindings, when.as_deref());
        }
        Expr::Subquery(select) => {
            let _ = write!(out, "({select})");
        }
    }
}

/// `(` base `open` inner `close`, as for `(a[i])` and `(a.[e])`.
fn wrap(out: &mut String, style: Style, base: &Expr, open: &str, inner: &Expr, close: &str) {
    out.push('(');
    write_expr(out, base, style);
    out.push_str(open);
    write_expr(out, inner, style);
    out.push_str(close);
}

fn prefixed(out: &mut String, style: Style, prefix: &str, operand: &Expr) {
    out.push_str(prefix);
    write_expr(out, operand, style);
    out.push(')');
}

fn write_list(out: &mut String, style: Style, open: &str, items: &[Expr], sep: &str, close: &str) {
    out.push_str(open);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        write_expr(out, item, style);
    }
    out.push_str(close);
}

fn write_binary(out: &mut String, style: Style, op: BinaryOp, a: &Expr, b: &Expr) {
    let normalised = style == Style::Normalised;
    let (symbol, first, second) = match op {
        BinaryOp::Gt if normalised => (" < ", b, a),
        BinaryOp::Ge if normalised => (" <= ", b, a),
        BinaryOp::Ne if normalised => {
            out.push_str("(not ");
            write_binary(out, style, BinaryOp::Eq, a, b);
            out.push(')');
            return;
        }
        BinaryOp::Concat => {
            // `a || b || c` is one n-ary concatenation, as Couchbase builds it.
            let mut operands = vec![b];
            let mut left = a;
            while let Expr::Binary(BinaryOp::Concat, la, lb) = left {
                operands.push(lb);
                left = la;
            }
            operands.push(left);
            out.push('(');
            for (i, operand) in operands.iter().rev().enumerate() {
                if i > 0 {
                    out.push_str(" || ");
                }
                write_expr(out, operand, style);
            }
            out.push(')');
            return;
        }
        BinaryOp::Add => (" + ", a, b),
        BinaryOp::Sub => (" - ", a, b),
        BinaryOp::Mul => (" * ", a, b),
        BinaryOp::Div => (" / ", a, b),
        BinaryOp::Mod => (" % ", a, b),
        BinaryOp::Eq => (" = ", a, b),
        BinaryOp::Ne => (" != ", a, b),
        BinaryOp::Lt => (" < ", a, b),
        BinaryOp::Le => (" <= ", a, b),
        BinaryOp::Gt => (" > ", a, b),
        BinaryOp::Ge => (" >= ", a, b),
    };
    out.push('(');
    write_expr(out, first, style);
    out.push_str(symbol);
    write_expr(out, second, style);
    out.push(')');
}

/// `(a <keyword> rest)`, negated as `(not (a <keyword> rest))` in Couchbase's form and `(a not <keyword> rest)`
/// in the exact one.
fn negatable(out: &mut String, style: Style, negated: bool, a: &Expr, keyword: &str, rest: impl FnOnce(&mut String)) {
    let wrap_not = negated && style == Style::Normalised;
    if wrap_not {
        out.push_str("(not ");
    }
    out.push('(');
    write_expr(out, a, style);
    out.push(' ');
    if negated && !wrap_not {
        out.push_str("not ");
    }
    out.push_str(keyword);
    out.push(' ');
    rest(out);
    out.push(')');
    if wrap_not {
        out.push(')');
    }
}

/// LIKE's default escape character is the backslash; Couchbase leaves it out.
fn is_default_escape(e: &Expr) -> bool {
    matches!(e, Expr::Literal(v) if v.as_str() == Some("\\"))
}

fn write_case(out: &mut String, style: Style, case: &Case) {
    out.push_str("case");
    if let Some(operand) = &case.operand {
        out.push(' ');
        write_expr(out, operand, style);
    }
    for (when, then) in &case.whens {
        out.push_str(" when ");
        write_expr(out, when, style);
        out.push_str(" then ");
        write_expr(out, then, style);
    }
    if let Some(otherwise) = &case.otherwise {
        out.push_str(" else ");
        write_expr(out, otherwise, style);
    }
    out.push_str(" end");
}

/// `{name: value, ...}`. Couchbase's form sorts the members by the text of their names and writes implicit names
/// out as strings (a repeated name keeps its last value); the exact form keeps them as written.
fn write_object(out: &mut String, style: Style, members: &[(Option<Expr>, Expr)]) {
    out.push('{');
    if style == Style::Exact {
        for (i, (name, value)) in members.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            if let Some(name) = name {
                write_expr(out, name, style);
                out.push_str(": ");
            }
            write_expr(out, value, style);
        }
    } else {
        let mut named: Vec<(String, &Expr)> = Vec::with_capacity(members.len());
        for (name, value) in members {
            let mut text = String::new();
            match name {
                Some(name) => write_expr(&mut text, name, style),
                None => text = Value::string(value.implicit_name().unwrap_or_default()).to_json_string(),
            }
            named.retain(|(n, _)| *n != text);
            named.push((text, value));
        }
        named.sort_by(|a, b| a.0.cmp(&b.0));
        for (i, (name, value)) in named.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(name);
            out.push_str(": ");
            write_expr(out, value, style);
        }
    }
    out.push('}');
}

pub(super) fn write_bindings(out: &mut String, style: Style, bindings: &[Binding]) {
    for (i, b) in bindings.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if let Some(name) = &b.name_var {
            write_ident(out, name);
            out.push_str(" : ");
        }
        write_ident(out, &b.var);
        out.push_str(if b.within { " within " } else { " in " });
        write_expr(out, &b.expr, style);
    }
}

fn write_for(out: &mut String, style: Style, bindings: &[Binding], when: Option<&Expr>) {
    out.push_str(" for ");
    write_bindings(out, style, bindings);
    if let Some(when) = when {
        out.push_str(" when ");
        write_expr(out, when, style);
    }
    out.push_str(" end");
}

//! Parser tests, one file per concept, and the helpers they share.

mod ddl;
mod display;
mod dml;
mod errors;
mod exprs;
mod index_manager;
mod roundtrip;
mod select;

use crate::ast::*;
use crate::value::Value;
use crate::{parse, parse_expression};

pub(super) fn stmt(text: &str) -> Statement {
    parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

pub(super) fn expr(text: &str) -> Expr {
    parse_expression(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The message of the error `text` fails with.
pub(super) fn err(text: &str) -> String {
    match parse(text) {
        Ok(s) => panic!("{text} parsed: {s:?}"),
        Err(e) => {
            assert_eq!(e.code(), 3000, "{e}");
            e.to_string()
        }
    }
}

pub(super) fn select(text: &str) -> Select {
    match stmt(text) {
        Statement::Select(s) => s,
        other => panic!("not a select: {other:?}"),
    }
}

pub(super) fn subselect(text: &str) -> Subselect {
    match select(text).body {
        SetExpr::Query(q) => *q,
        other => panic!("not a subselect: {other:?}"),
    }
}

pub(super) fn from(text: &str) -> FromTerm {
    subselect(text).from.expect("a FROM clause")
}

pub(super) fn id(name: &str) -> Expr {
    Expr::ident(name)
}

pub(super) fn int(i: i64) -> Expr {
    Expr::int(i)
}

pub(super) fn s(text: &str) -> Expr {
    Expr::string(text)
}

pub(super) fn field(base: Expr, name: &str) -> Expr {
    Expr::field(base, name)
}

pub(super) fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b)
}

pub(super) fn eq(a: Expr, b: Expr) -> Expr {
    bin(BinaryOp::Eq, a, b)
}

pub(super) fn named(name: &str) -> Expr {
    Expr::Param(Param::Named(name.to_string()))
}

pub(super) fn lit(v: Value) -> Expr {
    Expr::Literal(v)
}

pub(super) fn path(namespace: Option<&str>, parts: &[&str]) -> KeyspacePath {
    KeyspacePath { namespace: namespace.map(str::to_string), parts: parts.iter().map(|p| p.to_string()).collect() }
}

pub(super) fn keyspace(namespace: Option<&str>, parts: &[&str], alias: Option<&str>) -> FromTerm {
    FromTerm::Keyspace(KeyspaceTerm {
        path: path(namespace, parts),
        alias: alias.map(str::to_string),
        use_keys: None,
        use_index: Vec::new(),
        join_hint: JoinHint::None,
    })
}

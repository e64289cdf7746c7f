//! Statements as SQL++ text that parses back to the same tree: `parse(&s.to_string()) == s` for every statement
//! the parser produces. Keywords are upper case, names backticked, expressions in the exact style of `display.rs`.

use std::fmt;

use super::display::{write_bindings, write_expr, write_ident, Style};
use super::*;

/// The exact text of an expression.
fn x(out: &mut String, e: &Expr) {
    write_expr(out, e, Style::Exact);
}

fn text<T>(item: &T, write: fn(&mut String, &T)) -> String {
    let mut out = String::new();
    write(&mut out, item);
    out
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&text(self, write_statement))
    }
}

impl fmt::Display for Select {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&text(self, write_select))
    }
}

impl fmt::Display for FromTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&text(self, write_from))
    }
}

impl fmt::Display for KeyspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&text(self, write_path))
    }
}

fn write_statement(out: &mut String, s: &Statement) {
    match s {
        Statement::Select(select) => write_select(out, select),
        Statement::Explain(inner) => {
            out.push_str("EXPLAIN ");
            write_statement(out, inner);
        }
        Statement::Prepare { name, force, text, .. } => {
            out.push_str(if *force { "PREPARE FORCE " } else { "PREPARE " });
            if let Some(name) = name {
                write_ident(out, name);
                out.push_str(" AS ");
            }
            out.push_str(text);
        }
        Statement::Execute { name, using } => {
            out.push_str("EXECUTE ");
            x(out, name);
            if let Some(using) = using {
                out.push_str(" USING ");
                x(out, using);
            }
        }
        Statement::Insert(insert) => write_insert(out, "INSERT", insert),
        Statement::Upsert(insert) => write_insert(out, "UPSERT", insert),
        Statement::Update(update) => write_update(out, update),
        Statement::Delete(delete) => write_delete(out, delete),
        Statement::Merge(merge) => write_merge(out, merge),
        Statement::CreatePrimaryIndex(c) => {
            out.push_str("CREATE PRIMARY INDEX ");
            if let Some(name) = &c.name {
                write_ident(out, name);
                out.push(' ');
            }
            if c.if_not_exists {
                out.push_str("IF NOT EXISTS ");
            }
            out.push_str("ON ");
            write_path(out, &c.keyspace);
            write_using(out, c.using);
            write_with(out, c.with.as_ref());
        }
        Statement::CreateIndex(c) => write_create_index(out, c),
        Statement::DropIndex(d) => {
            out.push_str("DROP INDEX ");
            write_ident(out, &d.name);
            out.push_str(if d.if_exists { " IF EXISTS ON " } else { " ON " });
            write_path(out, &d.keyspace);
            write_using(out, d.using);
        }
        Statement::DropPrimaryIndex(d) => {
            out.push_str(if d.if_exists { "DROP PRIMARY INDEX IF EXISTS ON " } else { "DROP PRIMARY INDEX ON " });
            write_path(out, &d.keyspace);
            write_using(out, d.using);
        }
        Statement::BuildIndexes(b) => {
            out.push_str("BUILD INDEX ON ");
            write_path(out, &b.keyspace);
            out.push('(');
            write_exprs(out, &b.names);
            out.push(')');
            write_using(out, b.using);
        }
        Statement::AlterIndex(a) => {
            out.push_str("ALTER INDEX ");
            write_ident(out, &a.name);
            out.push_str(" ON ");
            write_path(out, &a.keyspace);
            write_using(out, a.using);
            write_with(out, Some(&a.with));
        }
    }
}

fn write_exprs(out: &mut String, items: &[Expr]) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        x(out, item);
    }
}

fn write_path(out: &mut String, path: &KeyspacePath) {
    if let Some(ns) = &path.namespace {
        match ns.as_str() {
            "default" | "system" => out.push_str(ns),
            _ => write_ident(out, ns),
        }
        out.push(':');
    }
    for (i, part) in path.parts.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        write_ident(out, part);
    }
}

fn write_alias(out: &mut String, alias: Option<&String>) {
    if let Some(alias) = alias {
        out.push_str(" AS ");
        write_ident(out, alias);
    }
}

fn write_using(out: &mut String, using: Option<IndexType>) {
    if let Some(using) = using {
        out.push_str(match using {
            IndexType::Gsi => " USING GSI",
            IndexType::View => " USING VIEW",
            IndexType::Fts => " USING FTS",
        });
    }
}

fn write_with(out: &mut String, with: Option<&Expr>) {
    if let Some(with) = with {
        out.push_str(" WITH ");
        x(out, with);
    }
}

fn write_select(out: &mut String, s: &Select) {
    for (i, w) in s.with.iter().enumerate() {
        out.push_str(if i == 0 { "WITH " } else { ", " });
        write_ident(out, &w.alias);
        out.push_str(" AS (");
        match &w.expr {
            Expr::Subquery(select) => write_select(out, select),
            other => x(out, other),
        }
        out.push(')');
    }
    if !s.with.is_empty() {
        out.push(' ');
    }
    write_set_expr(out, &s.body, false);
    for (i, term) in s.order_by.iter().enumerate() {
        out.push_str(if i == 0 { " ORDER BY " } else { ", " });
        x(out, &term.expr);
        if term.desc {
            out.push_str(" DESC");
        }
        match term.nulls_first {
            Some(true) => out.push_str(" NULLS FIRST"),
            Some(false) => out.push_str(" NULLS LAST"),
            None => {}
        }
    }
    if let Some(limit) = &s.limit {
        out.push_str(" LIMIT ");
        x(out, limit);
    }
    if let Some(offset) = &s.offset {
        out.push_str(" OFFSET ");
        x(out, offset);
    }
}

/// A set operation's right operand is parenthesised when it is itself a set operation, so that the text nests
/// as the tree does (set operators group from the left).
fn write_set_expr(out: &mut String, body: &SetExpr, parenthesise_set_op: bool) {
    match body {
        SetExpr::Query(sub) => write_subselect(out, sub),
        SetExpr::Select(select) => {
            out.push('(');
            write_select(out, select);
            out.push(')');
        }
        SetExpr::SetOp { op, all, left, right } => {
            if parenthesise_set_op {
                out.push('(');
            }
            write_set_expr(out, left, false);
            out.push_str(match op {
                SetOp::Union => " UNION ",
                SetOp::Intersect => " INTERSECT ",
                SetOp::Except => " EXCEPT ",
            });
            if *all {
                out.push_str("ALL ");
            }
            write_set_expr(out, right, true);
            if parenthesise_set_op {
                out.push(')');
            }
        }
    }
}

fn write_subselect(out: &mut String, s: &Subselect) {
    out.push_str("SELECT ");
    write_projection(out, &s.projection);
    if let Some(from) = &s.from {
        out.push_str(" FROM ");
        write_from(out, from);
    }
    write_bindings_clause(out, " LET ", &s.let_);
    if let Some(w) = &s.where_ {
        out.push_str(" WHERE ");
        x(out, w);
    }
    if let Some(g) = &s.group_by {
        for (i, (key, alias)) in g.keys.iter().enumerate() {
            out.push_str(if i == 0 { " GROUP BY " } else { ", " });
            x(out, key);
            write_alias(out, alias.as_ref());
        }
        write_bindings_clause(out, " LETTING ", &g.letting);
        if let Some(h) = &g.having {
            out.push_str(" HAVING ");
            x(out, h);
        }
    }
}

fn write_bindings_clause(out: &mut String, keyword: &str, bindings: &[(String, Expr)]) {
    for (i, (name, value)) in bindings.iter().enumerate() {
        out.push_str(if i == 0 { keyword } else { ", " });
        write_ident(out, name);
        out.push_str(" = ");
        x(out, value);
    }
}

fn write_projection(out: &mut String, p: &Projection) {
    if p.distinct {
        out.push_str("DISTINCT ");
    }
    if p.raw {
        out.push_str("RAW ");
    }
    for (i, term) in p.terms.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match term {
            ResultTerm::Star => out.push('*'),
            ResultTerm::ExprStar(e) => {
                x(out, e);
                out.push_str(".*");
            }
            ResultTerm::Expr { expr, alias } => {
                x(out, expr);
                write_alias(out, alias.as_ref());
            }
        }
    }
}

fn write_from(out: &mut String, term: &FromTerm) {
    match term {
        FromTerm::Keyspace(k) => {
            write_path(out, &k.path);
            write_alias(out, k.alias.as_ref());
            write_use(out, k);
        }
        FromTerm::Subquery { select, alias } => {
            out.push('(');
            write_select(out, select);
            out.push_str(") AS ");
            write_ident(out, alias);
        }
        FromTerm::Expr { expr, alias } => {
            // A bare name would read back as a keyspace: parenthesise it.
            if matches!(expr, Expr::Ident(_)) {
                out.push('(');
                x(out, expr);
                out.push(')');
            } else {
                x(out, expr);
            }
            write_alias(out, alias.as_ref());
        }
        FromTerm::Join { left, kind, right, on: JoinOn::Cross } if *kind == JoinKind::Inner => {
            write_from(out, left);
            out.push_str(", ");
            write_from(out, right);
        }
        FromTerm::Join { left, kind, right, on } => write_join(out, "JOIN", left, *kind, right, on),
        FromTerm::Nest { left, kind, right, on } => write_join(out, "NEST", left, *kind, right, on),
        FromTerm::Unnest { left, outer, expr, alias } => {
            write_from(out, left);
            out.push_str(if *outer { " LEFT OUTER UNNEST " } else { " UNNEST " });
            x(out, expr);
            write_alias(out, alias.as_ref());
        }
    }
}

fn write_join(out: &mut String, what: &str, left: &FromTerm, kind: JoinKind, right: &FromTerm, on: &JoinOn) {
    write_from(out, left);
    out.push_str(match kind {
        JoinKind::Inner => " ",
        JoinKind::LeftOuter => " LEFT OUTER ",
        JoinKind::RightOuter => " RIGHT OUTER ",
    });
    out.push_str(what);
    out.push(' ');
    write_from(out, right);
    match on {
        JoinOn::Keys(e) => {
            out.push_str(" ON KEYS ");
            x(out, e);
        }
        JoinOn::KeyFor { expr, for_alias } => {
            out.push_str(" ON KEY ");
            x(out, expr);
            out.push_str(" FOR ");
            write_ident(out, for_alias);
        }
        JoinOn::Condition(e) => {
            out.push_str(" ON ");
            x(out, e);
        }
        // A cross join with an outer kind has no text of its own; the condition TRUE says the same.
        JoinOn::Cross => out.push_str(" ON true"),
    }
}

fn write_use(out: &mut String, k: &KeyspaceTerm) {
    let mut started = false;
    if let Some(keys) = &k.use_keys {
        out.push_str(" USE KEYS ");
        x(out, keys);
        started = true;
    } else if !k.use_index.is_empty() {
        out.push_str(" USE INDEX (");
        for (i, hint) in k.use_index.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            if !hint.name.is_empty() {
                write_ident(out, &hint.name);
            }
            write_using(out, hint.using);
        }
        out.push(')');
        started = true;
    }
    let hint = match k.join_hint {
        JoinHint::None => return,
        JoinHint::Hash(true) => "HASH(BUILD)",
        JoinHint::Hash(false) => "HASH(PROBE)",
        JoinHint::NestedLoop => "NL",
    };
    out.push_str(if started { " " } else { " USE " });
    out.push_str(hint);
}

fn write_returning(out: &mut String, returning: Option<&Projection>) {
    if let Some(p) = returning {
        out.push_str(" RETURNING ");
        write_projection(out, p);
    }
}

fn write_keyspace_ref(out: &mut String, k: &KeyspaceRef) {
    write_path(out, &k.path);
    write_alias(out, k.alias.as_ref());
}

fn write_insert(out: &mut String, verb: &str, insert: &Insert) {
    out.push_str(verb);
    out.push_str(" INTO ");
    write_keyspace_ref(out, &insert.keyspace);
    match &insert.source {
        InsertSource::Values(rows) => {
            out.push_str(" VALUES ");
            for (i, row) in rows.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push('(');
                x(out, &row.key);
                out.push_str(", ");
                x(out, &row.value);
                if let Some(options) = &row.options {
                    out.push_str(", ");
                    x(out, options);
                }
                out.push(')');
            }
        }
        InsertSource::Select { key, value, options, select } => {
            out.push_str(" (KEY ");
            x(out, key);
            if let Some(value) = value {
                out.push_str(", VALUE ");
                x(out, value);
            }
            if let Some(options) = options {
                out.push_str(", OPTIONS ");
                x(out, options);
            }
            out.push_str(") ");
            write_select(out, select);
        }
    }
    write_returning(out, insert.returning.as_ref());
}

/// A SET or UNSET path in path syntax (`a.b[0].[e]`, `meta(a).expiration`), which is all those clauses accept.
fn write_set_path(out: &mut String, path: &Expr) {
    match path {
        Expr::Ident(name) => write_ident(out, name),
        Expr::Field(base, name) => {
            write_set_path(out, base);
            out.push('.');
            write_ident(out, name);
        }
        Expr::DynamicField(base, name) => {
            write_set_path(out, base);
            out.push_str(".[");
            x(out, name);
            out.push(']');
        }
        Expr::Element(base, index) => {
            write_set_path(out, base);
            out.push('[');
            x(out, index);
            out.push(']');
        }
        other => x(out, other),
    }
}

fn write_update_for(out: &mut String, update_for: Option<&UpdateFor>) {
    let Some(uf) = update_for else { return };
    // Written innermost first, the reverse of how they are kept.
    for dimension in uf.dimensions.iter().rev() {
        out.push_str(" FOR ");
        write_bindings(out, Style::Exact, dimension);
    }
    if let Some(when) = &uf.when {
        out.push_str(" WHEN ");
        x(out, when);
    }
    out.push_str(" END");
}

fn write_set_unset(out: &mut String, set: &[SetClause], unset: &[UnsetClause]) {
    for (i, clause) in set.iter().enumerate() {
        out.push_str(if i == 0 { " SET " } else { ", " });
        write_set_path(out, &clause.path);
        out.push_str(" = ");
        x(out, &clause.value);
        write_update_for(out, clause.update_for.as_ref());
    }
    for (i, clause) in unset.iter().enumerate() {
        out.push_str(if i == 0 { " UNSET " } else { ", " });
        write_set_path(out, &clause.path);
        write_update_for(out, clause.update_for.as_ref());
    }
}

fn write_where_limit(out: &mut String, where_: Option<&Expr>, limit: Option<&Expr>) {
    if let Some(w) = where_ {
        out.push_str(" WHERE ");
        x(out, w);
    }
    if let Some(l) = limit {
        out.push_str(" LIMIT ");
        x(out, l);
    }
}

fn write_update(out: &mut String, u: &Update) {
    out.push_str("UPDATE ");
    write_keyspace_ref(out, &u.keyspace);
    if let Some(keys) = &u.use_keys {
        out.push_str(" USE KEYS ");
        x(out, keys);
    }
    write_set_unset(out, &u.set, &u.unset);
    write_where_limit(out, u.where_.as_ref(), u.limit.as_ref());
    write_returning(out, u.returning.as_ref());
}

fn write_delete(out: &mut String, d: &Delete) {
    out.push_str("DELETE FROM ");
    write_keyspace_ref(out, &d.keyspace);
    if let Some(keys) = &d.use_keys {
        out.push_str(" USE KEYS ");
        x(out, keys);
    }
    write_where_limit(out, d.where_.as_ref(), d.limit.as_ref());
    write_returning(out, d.returning.as_ref());
}

fn write_merge(out: &mut String, m: &Merge) {
    out.push_str("MERGE INTO ");
    write_keyspace_ref(out, &m.target);
    out.push_str(" USING ");
    write_from(out, &m.source);
    let (keyword, on) = match &m.on {
        MergeOn::Key(e) => (" ON KEY ", e),
        MergeOn::Condition(e) => (" ON ", e),
    };
    out.push_str(keyword);
    x(out, on);
    if let Some(update) = &m.update {
        out.push_str(" WHEN MATCHED THEN UPDATE");
        write_set_unset(out, &update.set, &update.unset);
        write_where_limit(out, update.where_.as_ref(), None);
    }
    if let Some(delete) = &m.delete {
        out.push_str(" WHEN MATCHED THEN DELETE");
        write_where_limit(out, delete.where_.as_ref(), None);
    }
    if let Some(insert) = &m.insert {
        out.push_str(" WHEN NOT MATCHED THEN INSERT ");
        match &insert.key {
            Some(key) => {
                out.push_str("(KEY ");
                x(out, key);
                out.push_str(", VALUE ");
                x(out, &insert.value);
                if let Some(options) = &insert.options {
                    out.push_str(", OPTIONS ");
                    x(out, options);
                }
                out.push(')');
            }
            None => x(out, &insert.value),
        }
        write_where_limit(out, insert.where_.as_ref(), None);
    }
    write_where_limit(out, None, m.limit.as_ref());
    write_returning(out, m.returning.as_ref());
}

fn write_create_index(out: &mut String, c: &CreateIndex) {
    out.push_str("CREATE INDEX ");
    write_ident(out, &c.name);
    if c.if_not_exists {
        out.push_str(" IF NOT EXISTS");
    }
    out.push_str(" ON ");
    write_path(out, &c.keyspace);
    out.push('(');
    for (i, key) in c.keys.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match key.array {
            Some(ArrayIndexKind::Distinct) => out.push_str("DISTINCT "),
            Some(ArrayIndexKind::All) => out.push_str("ALL "),
            None => {}
        }
        x(out, &key.expr);
        if key.include_missing {
            out.push_str(" INCLUDE MISSING");
        }
        if key.desc {
            out.push_str(" DESC");
        }
    }
    out.push(')');
    if let Some(partition) = &c.partition {
        out.push_str(" PARTITION BY HASH(");
        write_exprs(out, partition);
        out.push(')');
    }
    write_where_limit(out, c.where_.as_ref(), None);
    write_using(out, c.using);
    write_with(out, c.with.as_ref());
}

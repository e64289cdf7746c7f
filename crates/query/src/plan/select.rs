//! Compiling SELECT: FROM terms to scans and joins, then LET, WHERE, grouping, projection, DISTINCT, ORDER BY,
//! OFFSET and LIMIT, in Couchbase's order of evaluation.

use std::sync::Arc;

use serde_json::json;

use super::compile_expr::{aggregate_not_allowed, has_aggregate, Compiler};
use super::group_check::GroupCheck;
use super::keyspace::{resolve_keyspace, ResolvedPath};
use super::scope::VarKind;
use super::spans::choose_primary_spans;
use super::{CExpr, IdSpans, KeyspaceHandle, Node, Plan, ProjTerm, Slot, SortTerm};
use crate::ast::{
    Expr, FromTerm, JoinKind, JoinOn, KeyspacePath, KeyspaceTerm, OrderTerm, Projection, ResultTerm, Select, SetExpr,
    Subselect,
};
use crate::datastore::KeyspaceName;
use crate::functions::Aggregate;
use crate::index::IndexState;
use crate::QueryError;

/// What compiling a query block produces.
struct Block {
    node: Node,
    out: Slot,
    order: Option<Vec<Arc<str>>>,
    signature: serde_json::Value,
}

/// Compiles a top-level SELECT into a plan.
pub fn compile_select(c: &mut Compiler<'_>, select: &Select) -> Result<Plan, QueryError> {
    let block = select_block(c, select)?;
    Ok(Plan {
        root: block.node,
        slots: c.scopes.slot_count(),
        out: block.out,
        order: block.order.map(Arc::from),
        signature: block.signature,
    })
}

/// Compiles a subquery (in an expression or in FROM): it shares the statement's slots, so it can read the slots
/// of the blocks around it.
pub(crate) fn compile_subquery(c: &mut Compiler<'_>, select: &Select) -> Result<Plan, QueryError> {
    let block = select_block(c, select)?;
    Ok(Plan { root: block.node, slots: 0, out: block.out, order: None, signature: block.signature })
}

fn select_block(c: &mut Compiler<'_>, select: &Select) -> Result<Block, QueryError> {
    c.scopes.push_block();
    let result = select_block_inner(c, select);
    c.scopes.pop();
    result
}

fn select_block_inner(c: &mut Compiler<'_>, select: &Select) -> Result<Block, QueryError> {
    let mut with = Vec::new();
    for w in &select.with {
        let value = c.expr(&w.expr)?;
        if c.scopes.bound_in_block(&w.alias) {
            return Err(QueryError::DuplicateAlias { kind: "WITH", alias: w.alias.clone() });
        }
        let slot = c.scopes.bind(&w.alias, VarKind::Variable);
        with.push((slot, value));
    }
    let tail = Tail { order_by: &select.order_by, limit: select.limit.as_ref(), offset: select.offset.as_ref() };
    let mut block = match &select.body {
        SetExpr::Query(sub) => subselect(c, sub, &tail)?,
        body => {
            let mut block = set_expr(c, body)?;
            block.node = apply_tail(c, block.node, block.out, block.order.clone(), &tail)?;
            block
        }
    };
    if !with.is_empty() {
        block.node = Node::With { input: Box::new(block.node), bindings: with };
    }
    Ok(block)
}

/// ORDER BY, LIMIT and OFFSET of a full select.
struct Tail<'a> {
    order_by: &'a [OrderTerm],
    limit: Option<&'a Expr>,
    offset: Option<&'a Expr>,
}

fn set_expr(c: &mut Compiler<'_>, body: &SetExpr) -> Result<Block, QueryError> {
    let none = Tail { order_by: &[], limit: None, offset: None };
    match body {
        SetExpr::Query(sub) => {
            c.scopes.push_block();
            let r = subselect(c, sub, &none);
            c.scopes.pop();
            r
        }
        SetExpr::Select(select) => select_block(c, select),
        SetExpr::SetOp { op, all, left, right } => {
            let l = set_expr(c, left)?;
            let r = set_expr(c, right)?;
            let out = c.scopes.alloc();
            Ok(Block {
                node: Node::SetOp {
                    op: *op,
                    all: *all,
                    left: Box::new(l.node),
                    left_out: l.out,
                    right: Box::new(r.node),
                    right_out: r.out,
                    out,
                },
                out,
                order: l.order,
                signature: l.signature,
            })
        }
    }
}

fn subselect(c: &mut Compiler<'_>, sub: &Subselect, tail: &Tail<'_>) -> Result<Block, QueryError> {
    aggregate_not_allowed("LET", sub.let_.iter().map(|(_, e)| e))?;
    aggregate_not_allowed("WHERE", sub.where_.iter())?;
    aggregate_not_allowed("GROUP BY", sub.group_by.iter().flat_map(|g| g.keys.iter().map(|(e, _)| e)))?;
    let block_start = c.scopes.slot_count();
    let mut node = match &sub.from {
        Some(term) => from_term(c, term)?,
        None => Node::Dummy,
    };
    let mut lets = Vec::new();
    for (name, e) in &sub.let_ {
        let value = c.expr(e)?;
        let slot = c.scopes.bind(name, VarKind::Variable);
        lets.push((slot, value));
    }
    if !lets.is_empty() {
        node = Node::Let { input: Box::new(node), bindings: lets };
    }
    // The only FROM term's alias: the term an index may narrow, and what unqualified names read.
    let single = match c.scopes.current_block_terms() {
        [(alias, _)] => Some(alias.clone()),
        _ => None,
    };
    if let Some(w) = &sub.where_ {
        let cond = c.expr(w)?;
        node = choose_primary_spans(node, &cond);
        node = Node::Filter { input: Box::new(node), cond };
    }
    node = narrow_scan(c, node, sub.where_.as_ref(), single.as_deref())?;

    let grouping = sub.group_by.is_some()
        || projection_exprs(&sub.projection).any(has_aggregate)
        || tail.order_by.iter().any(|o| has_aggregate(&o.expr));
    let mut group_keys = Vec::new();
    if let Some(g) = &sub.group_by {
        for (e, alias) in &g.keys {
            group_keys.push((c.expr(e)?, None::<Slot>, alias.clone()));
        }
    }
    let group_check =
        grouping.then(|| GroupCheck::new(block_start..c.scopes.slot_count(), group_keys.iter().map(|(e, _, _)| e)));
    if grouping {
        c.start_aggregates();
    }
    // GROUP BY aliases are visible after grouping.
    let keys = group_keys
        .into_iter()
        .map(|(e, _, alias)| (e, alias.map(|a| c.scopes.bind(&a, VarKind::Variable))))
        .collect::<Vec<_>>();
    let mut letting = Vec::new();
    let mut having = None;
    if let Some(g) = &sub.group_by {
        for (name, e) in &g.letting {
            let value = c.expr(e)?;
            letting.push((c.scopes.bind(name, VarKind::Variable), value));
        }
        having = g.having.as_ref().map(|h| c.expr(h)).transpose()?;
    }
    let (terms, names, signature) = projection(c, &sub.projection)?;
    let out = c.scopes.alloc();
    let order = (!sub.projection.raw).then(|| names.clone());
    c.order_aliases = order.clone().map(|n| (out, n));
    let sort = order_terms(c, tail.order_by);
    c.order_aliases = None;
    let sort = sort?;
    if let Some(check) = &group_check {
        check_grouped(check, sub, tail, &letting, having.as_ref(), &terms, &sort)?;
    }
    if grouping {
        let aggs = c.finish_aggregates();
        if let Some(fast) = count_fast_path(&node, &keys, &aggs) {
            node = fast;
        } else {
            node = Node::Group { input: Box::new(node), keys, aggs };
        }
    }
    if !letting.is_empty() {
        node = Node::Let { input: Box::new(node), bindings: letting };
    }
    if let Some(cond) = having {
        node = Node::Filter { input: Box::new(node), cond };
    }
    node = Node::Project { input: Box::new(node), terms, raw: sub.projection.raw, out };
    if sub.projection.distinct {
        node = Node::Distinct { input: Box::new(node), out };
    }
    // Rows that already come in ORDER BY's order (from the index the scan reads) need no sort, and a LIMIT then
    // stops the scan early.
    let shadowing = shadowing_names(c, &sub.projection, single.as_deref());
    let index_order = if grouping {
        None
    } else {
        super::sarg::order_satisfied(c, &node, tail.order_by, single.as_deref(), &shadowing)
    };
    let sort = match index_order {
        Some(reverse) => {
            if reverse {
                super::sarg::read_in_reverse(&mut node);
            }
            Vec::new()
        }
        None => sort,
    };
    node = limit_nodes(c, node, sort, tail)?;
    let shape = super::pushdown::BlockShape {
        where_: sub.where_.as_ref(),
        alias: single.as_deref(),
        grouping,
        limit: tail.limit,
        offset: tail.offset,
    };
    node = super::pushdown::push_down(c, node, &shape)?;
    Ok(Block { node, out, order, signature })
}

/// The projection names an ORDER BY term could mean instead of a field of the block's term: all but those whose
/// value is the field of the same name (`SELECT name ... ORDER BY name` sorts by the field either way).
fn shadowing_names(c: &Compiler<'_>, p: &Projection, alias: Option<&str>) -> Vec<Arc<str>> {
    if p.raw {
        return Vec::new();
    }
    let mut out = Vec::new();
    for t in &p.terms {
        match t {
            ResultTerm::Star => {
                out.extend(c.scopes.current_block_terms().iter().map(|(n, _)| Arc::from(n.as_str())));
            }
            ResultTerm::ExprStar(_) => {}
            ResultTerm::Expr { expr, alias: name } => {
                let Some(name) = name.as_deref().or_else(|| expr.implicit_name()) else { continue };
                let same_field = alias.is_some_and(|a| {
                    super::key_pred::relative(expr, a, true, &[]).is_some_and(|r| r == Expr::ident(name))
                });
                if !same_field {
                    out.push(Arc::from(name));
                }
            }
        }
    }
    out
}

/// Fails with 4210 when something evaluated after grouping depends on more than group keys and aggregates.
fn check_grouped(
    check: &GroupCheck,
    sub: &Subselect,
    tail: &Tail<'_>,
    letting: &[(Slot, CExpr)],
    having: Option<&CExpr>,
    terms: &[ProjTerm],
    sort: &[SortTerm],
) -> Result<(), QueryError> {
    let fail = |e: &Expr| Err(QueryError::NotGroupKeyOrAgg(format!("({e})")));
    if let Some(g) = &sub.group_by {
        for ((_, value), (_, e)) in letting.iter().zip(&g.letting) {
            if !check.allows(value) {
                return fail(e);
            }
        }
        if let (Some(h), Some(e)) = (having, &g.having) {
            if !check.allows(h) {
                return fail(e);
            }
        }
    }
    for (t, written) in terms.iter().zip(&sub.projection.terms) {
        let (ProjTerm::Named(_, e) | ProjTerm::ExprStar(e)) = t else { continue };
        if !check.allows(e) {
            if let ResultTerm::Expr { expr, .. } | ResultTerm::ExprStar(expr) = written {
                return fail(expr);
            }
        }
    }
    for (s, written) in sort.iter().zip(tail.order_by) {
        if !check.allows(&s.expr) {
            return fail(&written.expr);
        }
    }
    Ok(())
}

/// Lets a secondary index narrow the block's only keyspace scan (under a LET or a filter); a keyspace left with
/// no index fails the statement.
pub(crate) fn narrow_scan(
    c: &mut Compiler<'_>,
    node: Node,
    where_: Option<&Expr>,
    alias: Option<&str>,
) -> Result<Node, QueryError> {
    match node {
        Node::Filter { input, cond } => {
            Ok(Node::Filter { input: Box::new(narrow_scan(c, *input, where_, alias)?), cond })
        }
        Node::Let { input, bindings } => {
            Ok(Node::Let { input: Box::new(narrow_scan(c, *input, where_, alias)?), bindings })
        }
        leaf @ (Node::PrimaryScan { .. } | Node::PendingScan { .. }) => match alias {
            Some(a) => super::sarg::choose_secondary(c, leaf, where_, a, true),
            None => super::sarg::require_scan(leaf),
        },
        other => Ok(other),
    }
}

/// `SELECT COUNT(*) FROM ks` with nothing else reads the keyspace's count instead of scanning it.
fn count_fast_path(node: &Node, keys: &[(CExpr, Option<Slot>)], aggs: &[super::AggSpec]) -> Option<Node> {
    match (node, keys, aggs) {
        (Node::PrimaryScan { ks, spans: IdSpans::All, .. }, [], [agg])
            if agg.func == Aggregate::Count && agg.arg.is_none() =>
        {
            Some(Node::CountScan { ks: ks.clone(), slot: agg.slot })
        }
        _ => None,
    }
}

fn apply_tail(
    c: &mut Compiler<'_>,
    node: Node,
    out: Slot,
    order: Option<Vec<Arc<str>>>,
    tail: &Tail<'_>,
) -> Result<Node, QueryError> {
    // After a set operation ORDER BY sees only the result's members.
    c.scopes.push_block();
    c.order_aliases = Some((out, order.unwrap_or_default()));
    let sort = order_terms(c, tail.order_by);
    c.order_aliases = None;
    c.scopes.pop();
    limit_nodes(c, node, sort?, tail)
}

fn order_terms(c: &mut Compiler<'_>, terms: &[OrderTerm]) -> Result<Vec<SortTerm>, QueryError> {
    terms
        .iter()
        .map(|t| {
            Ok(SortTerm {
                expr: c.expr(&t.expr)?,
                desc: t.desc,
                // By default MISSING and NULL sort first ascending and last descending.
                nulls_first: t.nulls_first.unwrap_or(!t.desc),
            })
        })
        .collect()
}

fn limit_nodes(c: &mut Compiler<'_>, mut node: Node, sort: Vec<SortTerm>, tail: &Tail<'_>) -> Result<Node, QueryError> {
    let offset = tail.offset.map(|e| c.expr(e)).transpose()?;
    let limit = tail.limit.map(|e| c.expr(e)).transpose()?;
    if !sort.is_empty() {
        let hint = limit.clone().map(|l| (offset.clone(), l));
        node = Node::Order { input: Box::new(node), terms: sort, limit: hint };
    }
    if let Some(n) = offset {
        node = Node::Offset { input: Box::new(node), n };
    }
    if let Some(n) = limit {
        node = Node::Limit { input: Box::new(node), n };
    }
    Ok(node)
}

fn projection_exprs(p: &Projection) -> impl Iterator<Item = &Expr> {
    p.terms.iter().filter_map(|t| match t {
        ResultTerm::Star => None,
        ResultTerm::ExprStar(e) | ResultTerm::Expr { expr: e, .. } => Some(e),
    })
}

/// Compiles the result terms: names in projection order and the answer's signature.
fn projection(
    c: &mut Compiler<'_>,
    p: &Projection,
) -> Result<(Vec<ProjTerm>, Vec<Arc<str>>, serde_json::Value), QueryError> {
    let mut terms = Vec::new();
    let mut names: Vec<Arc<str>> = Vec::new();
    let mut signature = serde_json::Map::new();
    let mut unnamed = 1;
    for t in &p.terms {
        match t {
            ResultTerm::Star => {
                let aliases: Vec<(Arc<str>, Slot)> =
                    c.scopes.current_block_terms().iter().map(|(n, s)| (Arc::from(n.as_str()), *s)).collect();
                names.extend(aliases.iter().map(|(n, _)| n.clone()));
                signature.insert("*".into(), json!("*"));
                terms.push(ProjTerm::Star(aliases));
            }
            ResultTerm::ExprStar(e) => {
                signature.insert("*".into(), json!("*"));
                terms.push(ProjTerm::ExprStar(c.expr(e)?));
            }
            ResultTerm::Expr { expr, alias } => {
                let name: Arc<str> = match alias.as_deref().or_else(|| expr.implicit_name()) {
                    Some(n) => Arc::from(n),
                    None => {
                        let n = format!("${unnamed}");
                        unnamed += 1;
                        Arc::from(n)
                    }
                };
                if !p.raw && names.contains(&name) {
                    return Err(QueryError::semantics(format!("Duplicate result alias '{name}'.")));
                }
                signature.insert(name.to_string(), json!(static_type(expr)));
                names.push(name.clone());
                terms.push(ProjTerm::Named(name, c.expr(expr)?));
            }
        }
    }
    let signature = if p.raw {
        json!(p.terms.first().map_or("json", |t| match t {
            ResultTerm::Expr { expr, .. } => static_type(expr),
            _ => "json",
        }))
    } else {
        serde_json::Value::Object(signature)
    };
    Ok((terms, names, signature))
}

/// The type the signature names for an expression: literals by their type, everything else `json`.
fn static_type(e: &Expr) -> &'static str {
    match e {
        Expr::Literal(v) => match v.value_type() {
            crate::value::ValueType::Number => "number",
            crate::value::ValueType::String => "string",
            crate::value::ValueType::Boolean => "boolean",
            _ => "json",
        },
        _ => "json",
    }
}

/// Compiles a FROM term and binds its aliases.
pub(crate) fn from_term(c: &mut Compiler<'_>, term: &FromTerm) -> Result<Node, QueryError> {
    match term {
        FromTerm::Keyspace(kt) => keyspace_term(c, kt),
        FromTerm::Subquery { select, alias } => {
            let plan = compile_subquery(c, select)?;
            let slot = bind_term(c, alias, false)?;
            Ok(Node::SubqueryScan { plan: Arc::new(plan), slot })
        }
        FromTerm::Expr { expr, alias } => {
            let e = c.expr(expr)?;
            let alias = alias
                .as_deref()
                .or_else(|| expr.implicit_name())
                .ok_or_else(|| QueryError::semantics("FROM expression term must have a name or alias"))?;
            let slot = bind_term(c, alias, false)?;
            Ok(Node::ExprScan { expr: e, slot })
        }
        FromTerm::Unnest { left, outer, expr, alias } => {
            let input = super::sarg::require_scan(from_term(c, left)?)?;
            let e = c.expr(expr)?;
            let alias = alias
                .as_deref()
                .or_else(|| expr.implicit_name())
                .ok_or_else(|| QueryError::semantics("UNNEST term must have a name or alias"))?;
            let slot = bind_term(c, alias, false)?;
            Ok(Node::Unnest { input: Box::new(input), expr: e, slot, outer: *outer })
        }
        FromTerm::Join { left, kind, right, on } => join(c, left, *kind, right, on, false),
        FromTerm::Nest { left, kind, right, on } => join(c, left, *kind, right, on, true),
    }
}

fn bind_term(c: &mut Compiler<'_>, alias: &str, is_keyspace: bool) -> Result<Slot, QueryError> {
    if c.scopes.bound_in_block(alias) {
        return Err(QueryError::DuplicateAlias { kind: "FROM", alias: alias.to_string() });
    }
    Ok(c.scopes.bind(alias, VarKind::Term { is_keyspace }))
}

/// Resolves a keyspace term; a path whose first part is a variable in scope (a WITH alias, an outer alias) is an
/// expression instead.
fn keyspace_term(c: &mut Compiler<'_>, kt: &KeyspaceTerm) -> Result<Node, QueryError> {
    if let Some(expr) = variable_path(c, &kt.path) {
        let e = c.expr(&expr)?;
        let alias = kt.alias.clone().unwrap_or_else(|| kt.path.parts.last().cloned().unwrap_or_default());
        let slot = bind_term(c, &alias, false)?;
        return Ok(Node::ExprScan { expr: e, slot });
    }
    let alias = kt.alias.clone().unwrap_or_else(|| kt.path.parts.last().cloned().unwrap_or_default());
    match resolve_keyspace(&kt.path, &c.context)? {
        ResolvedPath::System(which) => {
            let slot = bind_term(c, &alias, true)?;
            Ok(Node::SystemScan { which, slot })
        }
        ResolvedPath::Collection(name) => {
            let ks = handle(c, name)?;
            let keys = kt.use_keys.as_ref().map(|k| c.expr(k)).transpose()?;
            let slot = bind_term(c, &alias, true)?;
            match keys {
                Some(keys) => Ok(Node::KeyScan { ks, slot, keys, distinct: false }),
                None => {
                    let hint: Vec<String> = kt.use_index.iter().map(|h| h.name.clone()).collect();
                    Ok(pending_or_primary(ks, slot, &kt.path, hint))
                }
            }
        }
    }
}

/// A path like `t.children` where `t` is bound: the expression it denotes.
fn variable_path(c: &Compiler<'_>, path: &KeyspacePath) -> Option<Expr> {
    if path.namespace.is_some() {
        return None;
    }
    let (first, rest) = path.parts.split_first()?;
    c.scopes.lookup(first)?;
    Some(rest.iter().fold(Expr::Ident(first.clone()), |e, p| Expr::field(e, p)))
}

pub(crate) fn handle(c: &Compiler<'_>, name: KeyspaceName) -> Result<KeyspaceHandle, QueryError> {
    let keyspace = c.ds.keyspace(&name)?;
    Ok(KeyspaceHandle { name, keyspace })
}

/// A full scan of the keyspace's online primary index, or (when it has none, or `USE INDEX` names secondary
/// indexes) a scan waiting for a WHERE clause an index can serve.
pub(crate) fn pending_or_primary(ks: KeyspaceHandle, slot: Slot, path: &KeyspacePath, hint: Vec<String>) -> Node {
    let hinted_secondary =
        !hint.is_empty() && ks.keyspace.indexes().iter().any(|(d, _)| !d.is_primary && hint.contains(&d.name));
    if hinted_secondary {
        let error = QueryError::NoPrimaryIndex(protected_path(path, &ks.name));
        return Node::PendingScan { ks, slot, error, hint };
    }
    match primary_scan(ks.clone(), slot, path) {
        Ok(node) => node,
        Err(error) => Node::PendingScan { ks, slot, error, hint },
    }
}

/// A full scan of the keyspace's online primary index (an error naming the keyspace when it has none).
pub(crate) fn primary_scan(ks: KeyspaceHandle, slot: Slot, path: &KeyspacePath) -> Result<Node, QueryError> {
    let index = ks
        .keyspace
        .indexes()
        .into_iter()
        .find(|(d, state)| d.is_primary && *state == IndexState::Online)
        .map(|(d, _)| Arc::from(d.name.as_str()));
    match index {
        Some(index) => {
            Ok(Node::PrimaryScan { ks, slot, index, spans: IdSpans::All, reverse: false, offset: None, limit: None })
        }
        None => Err(QueryError::NoPrimaryIndex(protected_path(path, &ks.name))),
    }
}

/// `` `default`:`b` `` / `` `default`:`b`.`s`.`c` ``: how Couchbase names a keyspace in planning errors.
fn protected_path(path: &KeyspacePath, name: &KeyspaceName) -> String {
    if path.parts.len() == 1 && name.is_default_collection() {
        format!("`default`:`{}`", name.bucket)
    } else {
        format!("`default`:`{}`.`{}`.`{}`", name.bucket, name.scope, name.collection)
    }
}

fn join(
    c: &mut Compiler<'_>,
    left: &FromTerm,
    kind: JoinKind,
    right: &FromTerm,
    on: &JoinOn,
    nest: bool,
) -> Result<Node, QueryError> {
    if kind == JoinKind::RightOuter {
        return right_outer(c, left, right, on, nest);
    }
    let input = super::sarg::require_scan(from_term(c, left)?)?;
    let outer = kind == JoinKind::LeftOuter;
    if let JoinOn::Keys(keys) = on {
        let FromTerm::Keyspace(kt) = right else {
            return Err(QueryError::semantics("JOIN/NEST ... ON KEYS needs a keyspace on its right side"));
        };
        let keys = c.expr(keys)?;
        let alias = kt.alias.clone().unwrap_or_else(|| kt.path.parts.last().cloned().unwrap_or_default());
        let ResolvedPath::Collection(name) = resolve_keyspace(&kt.path, &c.context)? else {
            return Err(QueryError::semantics("JOIN/NEST ... ON KEYS cannot read a system keyspace"));
        };
        let ks = handle(c, name)?;
        let slot = bind_term(c, &alias, true)?;
        return Ok(Node::LookupJoin { input: Box::new(input), ks, slot, keys, outer, nest });
    }
    // ANSI join, index join or comma: the right side runs once per left row, with the left row as its base.
    let first_right_slot = c.scopes.slot_count();
    let right_node = from_term(c, right)?;
    let right_slots: Vec<Slot> = (first_right_slot..c.scopes.slot_count()).collect();
    let cond = match on {
        JoinOn::Condition(e) => Some(c.expr(e)?),
        JoinOn::KeyFor { expr, for_alias } => {
            // Index join: the right document's `expr` names the left document's key.
            let (left_slot, _) = c
                .scopes
                .lookup(for_alias)
                .ok_or_else(|| QueryError::semantics(format!("Unknown FOR alias {for_alias} in index join")))?;
            let key = CExpr::Field(Box::new(CExpr::Meta(left_slot)), Arc::from("id"));
            Some(CExpr::Binary(crate::ast::BinaryOp::Eq, Box::new(c.expr(expr)?), Box::new(key)))
        }
        JoinOn::Cross | JoinOn::Keys(_) => None,
    };
    let right_node = match &cond {
        Some(cond) => choose_primary_spans(right_node, cond),
        None => right_node,
    };
    let right_node = super::sarg::require_scan(right_node)?;
    if nest {
        let right_slot = *right_slots.first().ok_or_else(|| QueryError::internal("nest without a right term"))?;
        let cond = cond.unwrap_or(CExpr::Const(true.into()));
        Ok(Node::NestedLoopNest {
            input: Box::new(input),
            right: Box::new(right_node),
            on: cond,
            outer,
            right_slot,
            slot: right_slot,
        })
    } else {
        Ok(Node::NestedLoopJoin { input: Box::new(input), right: Box::new(right_node), on: cond, outer, right_slots })
    }
}

/// `a RIGHT OUTER JOIN b ON cond` is `b LEFT OUTER JOIN a ON cond` when `a` is a plain term.
fn right_outer(
    c: &mut Compiler<'_>,
    left: &FromTerm,
    right: &FromTerm,
    on: &JoinOn,
    nest: bool,
) -> Result<Node, QueryError> {
    let simple = |t: &FromTerm| matches!(t, FromTerm::Keyspace(_) | FromTerm::Subquery { .. } | FromTerm::Expr { .. });
    if nest || !simple(left) || !matches!(on, JoinOn::Condition(_)) {
        return Err(QueryError::semantics("RIGHT OUTER JOIN is only allowed as the first join, with an ON condition"));
    }
    join(c, right, JoinKind::LeftOuter, left, on, false)
}

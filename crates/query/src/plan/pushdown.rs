//! Pushdowns into a query block's index scan, after the block is compiled: covering (`cover`), then, when the
//! spans are exact (every entry read is a row of the block), LIMIT and OFFSET read and skip entries in the scan
//! instead of rows after it; `COUNT(*)` counts the entries instead of reading them (IndexCountScan2); `MIN` of the
//! leading key reads the first entry.

use super::compile_expr::Compiler;
use super::cover::{cover, leaf, leaf_mut};
use super::{CExpr, Node, Pushed};
use crate::ast::Expr;
use crate::functions::Aggregate;
use crate::value::Value;
use crate::QueryError;

/// What the pushdowns need to know of the block.
pub(crate) struct BlockShape<'a> {
    pub where_: Option<&'a Expr>,
    /// The block's only FROM term (none with joins or unnests).
    pub alias: Option<&'a str>,
    pub grouping: bool,
    pub limit: Option<&'a Expr>,
    pub offset: Option<&'a Expr>,
}

/// Pushes what it can into the block's index scan.
pub(crate) fn push_down(c: &mut Compiler<'_>, mut node: Node, shape: &BlockShape<'_>) -> Result<Node, QueryError> {
    let Some(alias) = shape.alias else { return Ok(node) };
    if leaf(&node).is_none() {
        return Ok(if shape.grouping || shape.where_.is_some() { node } else { paginate_primary(node, shape) });
    }
    cover(c, &mut node, alias, shape.where_);
    Ok(if shape.grouping { aggregate(node) } else { paginate(node, shape) })
}

/// OFFSET and LIMIT into an exact scan whose rows need no sort, no DISTINCT and no grouping: the scan skips the offset's
/// entries (the Offset operator goes) and reads at most the limit's (the Limit operator stays, as Couchbase's).
fn paginate(node: Node, shape: &BlockShape<'_>) -> Node {
    paginate_with(node, shape, |rest, offset, limit| {
        if !rows_are_entries(rest) {
            return false;
        }
        let Some(scan) = leaf_mut(rest) else { return false };
        (scan.offset, scan.limit) = (offset, limit);
        true
    })
}

/// OFFSET and LIMIT into a primary scan of every id (or an id range) when the block has no WHERE and its rows need
/// no sort, DISTINCT or grouping: the scan skips the offset's ids without fetching their documents (Couchbase's
/// PrimaryScan3 `offset`/`limit`). Ids whose document went away meanwhile still count, as with an index scan.
fn paginate_primary(node: Node, shape: &BlockShape<'_>) -> Node {
    paginate_with(node, shape, |rest, offset, limit| match primary_leaf(rest) {
        Some(Node::PrimaryScan { spans, offset: o, limit: l, .. }) if !matches!(spans, super::IdSpans::Keys { .. }) => {
            (*o, *l) = (offset, limit);
            true
        }
        _ => false,
    })
}

/// Takes the block's Limit and Offset operators off, offers their counts to `push` (with their EXPLAIN texts), and
/// puts back the Limit always (as Couchbase's plans keep it) and the Offset unless `push` took it.
fn paginate_with(
    node: Node,
    shape: &BlockShape<'_>,
    push: impl FnOnce(&mut Node, Option<Pushed>, Option<Pushed>) -> bool,
) -> Node {
    let (limit, rest) = match node {
        Node::Limit { input, n } => (Some(n), *input),
        other => (None, other),
    };
    let (mut offset, mut rest) = match rest {
        Node::Offset { input, n } => (Some(n), *input),
        other => (None, other),
    };
    if limit.is_some() || offset.is_some() {
        let pushed = |e: &Option<CExpr>, text: Option<&Expr>| {
            e.clone().map(|expr| Pushed { expr, text: text.map(|t| t.to_string()).unwrap_or_default() })
        };
        if push(&mut rest, pushed(&offset, shape.offset), pushed(&limit, shape.limit)) {
            offset = None;
        }
    }
    if let Some(n) = offset {
        rest = Node::Offset { input: Box::new(rest), n };
    }
    match limit {
        Some(n) => Node::Limit { input: Box::new(rest), n },
        None => rest,
    }
}

/// The primary scan under a block's projection and LET bindings (no filter, sort, DISTINCT or grouping between).
fn primary_leaf(node: &mut Node) -> Option<&mut Node> {
    match node {
        Node::Project { input, .. } | Node::Let { input, .. } => primary_leaf(input),
        scan @ Node::PrimaryScan { .. } => Some(scan),
        _ => None,
    }
}

/// Whether each entry the block's scan reads is one row of the block, in order: a projection over filters and
/// LET bindings of an exact scan that reads each document once.
fn rows_are_entries(node: &Node) -> bool {
    match node {
        Node::Project { input, .. } | Node::Filter { input, .. } | Node::Let { input, .. } => rows_are_entries(input),
        Node::IndexScan(scan) => scan.facts.exact && !scan.distinct,
        _ => false,
    }
}

/// A grouping with no GROUP BY and one aggregate over an exact, covering scan of a non-array index: `COUNT(*)`
/// (or of a constant, or of the leading key when the spans leave out its NULLs) becomes a count of the entries;
/// `MIN` of the leading key reads the first entry only, `MAX` the last one (a reversed scan's first).
fn aggregate(node: Node) -> Node {
    match node {
        Node::Group { input, keys, aggs } => {
            let scan = leaf(&input).filter(|s| {
                s.facts.exact && !s.distinct && s.cover.is_some() && scan_under_group(&input) && keys.is_empty()
            });
            let (Some(scan), [agg]) = (scan, aggs.as_slice()) else { return Node::Group { input, keys, aggs } };
            let leading = scan.cover.as_ref().and_then(|c| c.keys.first().copied().flatten());
            let skips_nulls = scan.facts.skips_nulls;
            let on_leading = |arg: &Option<CExpr>| {
                matches!((arg, leading), (Some(CExpr::Var(s)), Some(l)) if *s == l) && skips_nulls
            };
            let counts_entries = agg.func == Aggregate::Count
                && !agg.distinct
                && match &agg.arg {
                    None => true,
                    Some(CExpr::Const(v)) => !matches!(v, Value::Null | Value::Missing),
                    arg => on_leading(arg),
                };
            if counts_entries {
                return Node::IndexCountScan { scan: Box::new(scan.clone()), slot: agg.slot };
            }
            // MIN is the first entry; MAX the last, read first by a reversed scan.
            let one_entry = matches!(agg.func, Aggregate::Min | Aggregate::Max) && on_leading(&agg.arg);
            let mut input = input;
            if one_entry {
                if let Some(scan) = leaf_mut(&mut input) {
                    scan.limit = Some(Pushed { expr: CExpr::Const(Value::int(1)), text: "1".into() });
                    scan.explain.first_entry = true;
                    scan.reverse = agg.func == Aggregate::Max;
                }
            }
            Node::Group { input, keys, aggs }
        }
        Node::Limit { input, n } => Node::Limit { input: Box::new(aggregate(*input)), n },
        Node::Offset { input, n } => Node::Offset { input: Box::new(aggregate(*input)), n },
        Node::Order { input, terms, limit } => Node::Order { input: Box::new(aggregate(*input)), terms, limit },
        Node::Distinct { input, out } => Node::Distinct { input: Box::new(aggregate(*input)), out },
        Node::Project { input, terms, raw, out } => {
            Node::Project { input: Box::new(aggregate(*input)), terms, raw, out }
        }
        Node::Filter { input, cond } => Node::Filter { input: Box::new(aggregate(*input)), cond },
        Node::Let { input, bindings } => Node::Let { input: Box::new(aggregate(*input)), bindings },
        other => other,
    }
}

/// Whether only the WHERE filter and LET bindings lie between a grouping and its scan.
fn scan_under_group(node: &Node) -> bool {
    match node {
        Node::Filter { input, .. } | Node::Let { input, .. } => scan_under_group(input),
        Node::IndexScan(_) => true,
        _ => false,
    }
}

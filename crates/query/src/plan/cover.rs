//! Covering scans: when every expression of a query block that reads its keyspace term's document can be computed
//! from an index entry (the index keys and the document id) and from what the index's condition fixes, the scan
//! reads no document. Those parts of the block's expressions are rewritten to read slots the scan fills from each
//! entry, the way Couchbase's planner replaces them with `cover (...)` expressions.
//!
//! An array key covers nothing (its entry holds one element, not the array); an `ANY` conjunct the spans imply
//! exactly is true for every entry read, as is a conjunct of a partial index's condition, and `x = value` in that
//! condition fixes `x`. A document the index leaves out (a MISSING leading key, a condition it fails) is no row,
//! exactly as when the scan fetches.

use super::compile_expr::Compiler;
use super::expr_match::{reads_slot, rewrite, same};
use super::key_pred::flatten_and;
use super::scope::VarKind;
use super::{CExpr, IndexScanPlan, Node, ProjTerm, Slot};
use crate::ast::{ArrayIndexKind, BinaryOp, Binding, Call, Expr, IsTest};
use crate::index::IndexDef;
use crate::value::Value;

/// Where a covered scan puts each entry's values.
#[derive(Clone)]
pub struct Cover {
    /// The slot each index key's value goes to, by key position (`None` for an array key, which covers nothing).
    pub keys: Vec<Option<Slot>>,
    /// The slot of the document id.
    pub id: Slot,
}

/// What replaces the covered parts of the block's expressions.
struct CoverMap {
    /// Compiled index key expressions (and `META(alias).id`) and the slots holding their values.
    keys: Vec<(CExpr, Slot)>,
    /// Expressions the index condition fixes, and their values.
    fixed: Vec<(CExpr, Value)>,
}

/// Makes the block's only keyspace scan (the leaf of `node`, reached through the block's own operators) a covering
/// scan when the index covers the block; leaves `node` as it is otherwise.
pub(crate) fn cover(c: &mut Compiler<'_>, node: &mut Node, alias: &str, where_: Option<&Expr>) {
    let Some(scan) = leaf(node) else { return };
    if scan.cover.is_some() || c.scopes.lookup(alias) != Some((scan.slot, VarKind::Term { is_keyspace: true })) {
        return;
    }
    let indexes = scan.ks.keyspace.indexes();
    let Some((def, _)) = indexes.iter().find(|(d, _)| *d.name == *scan.index) else { return };
    let (term, implied) = (scan.slot, scan.facts.implied.clone());
    // A definition that does not compile here (it did when the index was created) only means no covering.
    let Some(CoverSetup { map, slots, texts, mut filter_covers, id }) = setup(c, def, alias) else { return };
    let mut covered = node.clone();
    let Some(replaced) = imply_conjuncts(&mut covered, &implied) else { return };
    if let Some(w) = where_ {
        let mut conjuncts = Vec::new();
        flatten_and(w, &mut conjuncts);
        for i in replaced {
            if let Some(conjunct) = conjuncts.get(i) {
                let text = format!("cover ({})", qualify(conjunct, alias, &mut Vec::new()));
                filter_covers.push((text, Value::Bool(true)));
            }
        }
    }
    let replace = |e: &CExpr| -> Option<CExpr> {
        map.keys
            .iter()
            .find(|(k, _)| same(k, e))
            .map(|(_, slot)| CExpr::Var(*slot))
            .or_else(|| map.fixed.iter().find(|(k, _)| same(k, e)).map(|(_, v)| CExpr::Const(v.clone())))
    };
    let mut reads_term = false;
    let complete = visit_block(&mut covered, &mut |e| {
        rewrite(e, &replace);
        reads_term |= reads_slot(e, term);
    });
    if !complete || reads_term || stars_read(&covered, term) {
        return;
    }
    let Some(scan) = leaf_mut(&mut covered) else { return };
    scan.cover = Some(Cover { keys: slots, id });
    scan.explain.covers = texts;
    scan.explain.filter_covers = filter_covers;
    *node = covered;
}

/// The compiled covers of an index for the block's term, with their slots and EXPLAIN texts.
struct CoverSetup {
    map: CoverMap,
    /// The slot of each index key (see `Cover::keys`).
    slots: Vec<Option<Slot>>,
    /// `cover (...)` for each key and the document id.
    texts: Vec<String>,
    filter_covers: Vec<(String, Value)>,
    /// The slot of the document id.
    id: Slot,
}

fn setup(c: &mut Compiler<'_>, def: &IndexDef, alias: &str) -> Option<CoverSetup> {
    let mut map = CoverMap { keys: Vec::new(), fixed: Vec::new() };
    let mut slots = Vec::with_capacity(def.keys.len());
    let mut texts = Vec::with_capacity(def.keys.len() + 1);
    for key in &def.keys {
        let expr = qualify(&crate::parse_expression(&key.expr).ok()?, alias, &mut Vec::new());
        match key.array {
            Some(kind) => {
                let all = if kind == ArrayIndexKind::Distinct { "distinct" } else { "all" };
                texts.push(format!("cover (({all} ({expr})))"));
                slots.push(None);
            }
            None => {
                texts.push(format!("cover ({expr})"));
                let slot = c.scopes.alloc();
                map.keys.push((c.expr(&expr).ok()?, slot));
                slots.push(Some(slot));
            }
        }
    }
    let id_expr = meta_id(alias);
    texts.push(format!("cover ({id_expr})"));
    let id = c.scopes.alloc();
    map.keys.push((c.expr(&id_expr).ok()?, id));
    let mut filter_covers = Vec::new();
    if let Some(cond) = &def.condition {
        let cond = qualify(&crate::parse_expression(cond).ok()?, alias, &mut Vec::new());
        let mut conjuncts = Vec::new();
        flatten_and(&cond, &mut conjuncts);
        for (expr, value) in conjuncts.into_iter().flat_map(fixed_by) {
            filter_covers.push((format!("cover ({expr})"), value.clone()));
            map.fixed.push((c.expr(&expr).ok()?, value));
        }
    }
    Some(CoverSetup { map, slots, texts, filter_covers, id })
}

/// `META(alias).id`.
fn meta_id(alias: &str) -> Expr {
    let meta = Call {
        name: "meta".into(),
        args: vec![Expr::ident(alias)],
        distinct: false,
        star: false,
        pos: Default::default(),
    };
    Expr::Field(Box::new(Expr::Call(meta)), "id".into())
}

/// What a conjunct of an index condition (already qualified) fixes for every entry, as Couchbase's
/// `FilterExpressionCovers`: `x = value` fixes `x`; IS NULL fixes its operand to NULL; those and IN, BETWEEN, LIKE,
/// IS VALUED, IS NOT NULL and other equalities are themselves true.
fn fixed_by(conjunct: &Expr) -> Vec<(Expr, Value)> {
    let t = || (conjunct.clone(), Value::Bool(true));
    match conjunct {
        Expr::Binary(BinaryOp::Eq, l, r) => match (&**l, &**r) {
            (x, Expr::Literal(v)) | (Expr::Literal(v), x) => vec![(x.clone(), v.clone())],
            _ => vec![t()],
        },
        Expr::Is { expr, test: IsTest::Null, negated: false } => vec![((**expr).clone(), Value::Null), t()],
        Expr::In { negated: false, .. }
        | Expr::Between { negated: false, .. }
        | Expr::Like { negated: false, .. }
        | Expr::Is { test: IsTest::Valued, negated: false, .. }
        | Expr::Is { test: IsTest::Null, negated: true, .. } => vec![t()],
        _ => Vec::new(),
    }
}

/// Replaces the `ANY` conjuncts of the WHERE filter that the spans imply (`implied`, in `flatten_and` order) by
/// TRUE: every entry of an exact array span satisfies them. Returns their positions, or `None` when the filter's
/// conjuncts do not line up with `implied` (then nothing is covered).
fn imply_conjuncts(node: &mut Node, implied: &[bool]) -> Option<Vec<usize>> {
    let Some(cond) = where_filter(node) else { return Some(Vec::new()) };
    let mut conjuncts = Vec::new();
    flatten_and_mut(cond, &mut conjuncts);
    if conjuncts.len() != implied.len() {
        return None;
    }
    let mut replaced = Vec::new();
    for (i, (conjunct, implied)) in conjuncts.into_iter().zip(implied).enumerate() {
        if *implied && matches!(conjunct, CExpr::Quantified { .. }) {
            *conjunct = CExpr::Const(Value::Bool(true));
            replaced.push(i);
        }
    }
    Some(replaced)
}

fn flatten_and_mut<'a>(e: &'a mut CExpr, out: &mut Vec<&'a mut CExpr>) {
    match e {
        CExpr::And(xs) => xs.iter_mut().for_each(|x| flatten_and_mut(x, out)),
        e => out.push(e),
    }
}

/// The WHERE filter's condition: the filter nearest the scan (HAVING filters sit above the grouping).
fn where_filter(node: &mut Node) -> Option<&mut CExpr> {
    let mut lowest = None;
    let mut n = node;
    loop {
        n = match n {
            Node::Filter { input, cond } => {
                lowest = Some(cond);
                input
            }
            other => match other.block_input_mut() {
                Some(input) => input,
                None => return lowest,
            },
        };
    }
}

/// The block's scan, when the block's operators lead to a secondary index scan.
pub(crate) fn leaf(node: &Node) -> Option<&IndexScanPlan> {
    match node {
        Node::IndexScan(scan) => Some(scan),
        other => leaf(other.block_input()?),
    }
}

pub(crate) fn leaf_mut(node: &mut Node) -> Option<&mut IndexScanPlan> {
    match node {
        Node::IndexScan(scan) => Some(scan),
        other => leaf_mut(other.block_input_mut()?),
    }
}

/// Calls `f` on every expression the block's operators evaluate per row; false when an operator on the way to the
/// scan is not one of the block's own (a join, an unnest), whose expressions this does not know.
fn visit_block(node: &mut Node, f: &mut dyn FnMut(&mut CExpr)) -> bool {
    match node {
        Node::IndexScan(_) => true,
        Node::Limit { input, .. } | Node::Offset { input, .. } | Node::Distinct { input, .. } => visit_block(input, f),
        Node::Order { input, terms, .. } => {
            terms.iter_mut().for_each(|t| f(&mut t.expr));
            visit_block(input, f)
        }
        Node::Project { input, terms, .. } => {
            for t in terms.iter_mut() {
                if let ProjTerm::Named(_, e) | ProjTerm::ExprStar(e) = t {
                    f(e)
                }
            }
            visit_block(input, f)
        }
        Node::Filter { input, cond } => {
            f(cond);
            visit_block(input, f)
        }
        Node::Let { input, bindings } => {
            bindings.iter_mut().for_each(|(_, e)| f(e));
            visit_block(input, f)
        }
        Node::Group { input, keys, aggs } => {
            keys.iter_mut().for_each(|(e, _)| f(e));
            aggs.iter_mut().filter_map(|a| a.arg.as_mut()).for_each(&mut *f);
            visit_block(input, f)
        }
        _ => false,
    }
}

/// Whether a `*` projection of the block returns the term's document.
fn stars_read(node: &Node, term: Slot) -> bool {
    match node {
        Node::Project { input, terms, .. } => {
            terms.iter().any(|t| matches!(t, ProjTerm::Star(aliases) if aliases.iter().any(|(_, s)| *s == term)))
                || stars_read(input, term)
        }
        other => other.block_input().is_some_and(|input| stars_read(input, term)),
    }
}

/// `e` with every name that is not a range variable of its own (nor `alias` itself) made a field of `alias`, and
/// `META()` made `META(alias)`: an index key or condition written over bare fields (or a conjunct of the block's
/// WHERE clause) as the query block's term reads it.
pub(crate) fn qualify(e: &Expr, alias: &str, bound: &mut Vec<String>) -> Expr {
    let list = |xs: &[Expr], bound: &mut Vec<String>| xs.iter().map(|x| qualify(x, alias, bound)).collect();
    match e {
        Expr::Ident(n) if !bound.contains(n) && n != alias => Expr::Field(Box::new(Expr::ident(alias)), n.clone()),
        Expr::Call(call) if call.name == "meta" && call.args.is_empty() => {
            let mut call = call.clone();
            call.args = vec![Expr::ident(alias)];
            Expr::Call(call)
        }
        Expr::Literal(_) | Expr::Ident(_) | Expr::Param(_) | Expr::Subquery(_) => e.clone(),
        Expr::Field(x, n) => Expr::Field(bx(x, alias, bound), n.clone()),
        Expr::DynamicField(x, y) => Expr::DynamicField(bx(x, alias, bound), bx(y, alias, bound)),
        Expr::Element(x, y) => Expr::Element(bx(x, alias, bound), bx(y, alias, bound)),
        Expr::Slice { base, start, end } => Expr::Slice {
            base: bx(base, alias, bound),
            start: bx(start, alias, bound),
            end: end.as_deref().map(|x| bx(x, alias, bound)),
        },
        Expr::Neg(x) => Expr::Neg(bx(x, alias, bound)),
        Expr::Not(x) => Expr::Not(bx(x, alias, bound)),
        Expr::Exists(x) => Expr::Exists(bx(x, alias, bound)),
        Expr::Binary(op, x, y) => Expr::Binary(*op, bx(x, alias, bound), bx(y, alias, bound)),
        Expr::And(xs) => Expr::And(list(xs, bound)),
        Expr::Or(xs) => Expr::Or(list(xs, bound)),
        Expr::Array(xs) => Expr::Array(list(xs, bound)),
        Expr::Like { expr, pattern, escape, negated } => Expr::Like {
            expr: bx(expr, alias, bound),
            pattern: bx(pattern, alias, bound),
            escape: escape.as_deref().map(|x| bx(x, alias, bound)),
            negated: *negated,
        },
        Expr::In { expr, list: l, negated } => {
            Expr::In { expr: bx(expr, alias, bound), list: bx(l, alias, bound), negated: *negated }
        }
        Expr::Within { expr, target, negated } => {
            Expr::Within { expr: bx(expr, alias, bound), target: bx(target, alias, bound), negated: *negated }
        }
        Expr::Between { expr, low, high, negated } => Expr::Between {
            expr: bx(expr, alias, bound),
            low: bx(low, alias, bound),
            high: bx(high, alias, bound),
            negated: *negated,
        },
        Expr::Is { expr, test, negated } => Expr::Is { expr: bx(expr, alias, bound), test: *test, negated: *negated },
        Expr::Case(case) => Expr::Case(crate::ast::Case {
            operand: case.operand.as_deref().map(|x| bx(x, alias, bound)),
            whens: case.whens.iter().map(|(w, t)| (qualify(w, alias, bound), qualify(t, alias, bound))).collect(),
            otherwise: case.otherwise.as_deref().map(|x| bx(x, alias, bound)),
        }),
        Expr::Call(call) => {
            let mut call = call.clone();
            call.args = list(&call.args, bound);
            Expr::Call(call)
        }
        Expr::Object(members) => Expr::Object(
            members
                .iter()
                .map(|(n, v)| (n.as_ref().map(|n| qualify(n, alias, bound)), qualify(v, alias, bound)))
                .collect(),
        ),
        Expr::Quantified { .. } | Expr::ArrayFor { .. } | Expr::ObjectFor { .. } => qualify_scoped(e, alias, bound),
    }
}

/// `qualify` for the expressions that bind range variables: their bindings' variables are not fields.
fn qualify_scoped(e: &Expr, alias: &str, bound: &mut Vec<String>) -> Expr {
    let depth = bound.len();
    let out = match e {
        Expr::Quantified { quantifier, bindings, satisfies } => {
            let bindings = qualify_bindings(bindings, alias, bound);
            Expr::Quantified { quantifier: *quantifier, bindings, satisfies: bx(satisfies, alias, bound) }
        }
        Expr::ArrayFor { kind, mapping, bindings, when } => {
            let bindings = qualify_bindings(bindings, alias, bound);
            let mapping = bx(mapping, alias, bound);
            let when = when.as_deref().map(|w| bx(w, alias, bound));
            Expr::ArrayFor { kind: *kind, mapping, bindings, when }
        }
        Expr::ObjectFor { name, value, bindings, when } => {
            let bindings = qualify_bindings(bindings, alias, bound);
            let (name, value) = (bx(name, alias, bound), bx(value, alias, bound));
            let when = when.as_deref().map(|w| bx(w, alias, bound));
            Expr::ObjectFor { name, value, bindings, when }
        }
        other => qualify(other, alias, bound),
    };
    bound.truncate(depth);
    out
}

fn bx(e: &Expr, alias: &str, bound: &mut Vec<String>) -> Box<Expr> {
    Box::new(qualify(e, alias, bound))
}

/// Qualifies each binding's expression (seeing the variables bound before it) and binds its variables.
fn qualify_bindings(bindings: &[Binding], alias: &str, bound: &mut Vec<String>) -> Vec<Binding> {
    let mut out = Vec::with_capacity(bindings.len());
    for b in bindings {
        out.push(Binding { expr: qualify(&b.expr, alias, bound), ..b.clone() });
        bound.push(b.var.clone());
        bound.extend(b.name_var.clone());
    }
    out
}

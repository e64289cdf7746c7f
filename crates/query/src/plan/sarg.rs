//! Index selection: which online secondary index can narrow a keyspace's scan for a WHERE clause, and the spans
//! it reads (what each conjunct says about the keys is `key_pred`'s part).
//!
//! Keys are matched as a prefix: equality on the first keys, then one range (or, on the first key, a list of
//! values). The WHERE clause still filters every row, so a span only has to hold the rows that can pass, and
//! indexes never change results. A span is *exact* when every row it reads passes the WHERE clause: each conjunct
//! is implied by the span (or by a partial index's condition), so the scan itself can stop at a LIMIT, skip an
//! OFFSET or count. A partial index is used only when each conjunct of its WHERE appears among the query's. A WHERE
//! clause with an OR that no single index serves reads the union of one scan per OR term.

use std::sync::Arc;

use super::compile_expr::Compiler;
use super::key_pred::{flatten_and, key_pred, reads_only_term, relative, KeyPred};
use super::{CExpr, IndexScanPlan, Node, Slot};
use crate::ast::Expr;
use crate::index::{IndexDef, IndexState};
use crate::value::Value;
use crate::QueryError;

/// One end of a range on an index key.
#[derive(Clone)]
pub enum KeyBound {
    /// A value computed per execution, and whether it is included; NULL or MISSING there selects nothing (no
    /// comparison with them is true).
    Value(CExpr, bool),
    /// NULL itself, included or not: the planner's own low end for IS NOT NULL, IS NOT MISSING and ranges with no
    /// lower end.
    Null(bool),
}

/// One span over an index: equality values for a prefix of the keys, then optionally a range on the next key.
#[derive(Clone)]
pub struct SpanPlan {
    pub eq: Vec<CExpr>,
    /// A range on key `eq.len()`: low and high ends.
    pub range: Option<(Option<KeyBound>, Option<KeyBound>)>,
    /// The first key is matched against every element of this array (`k IN list`): one span per element.
    pub in_list: Option<CExpr>,
}

/// What the planner knows about a scan's spans.
#[derive(Clone, Default)]
pub struct ScanFacts {
    /// Every row the spans read passes the WHERE clause.
    pub exact: bool,
    /// The WHERE conjuncts (in `flatten_and` order) the spans or the index condition imply.
    pub implied: Vec<bool>,
    /// The spans hold no entry whose leading key is NULL or MISSING.
    pub skips_nulls: bool,
}

/// A chosen secondary index and its spans.
#[derive(Clone)]
pub struct IndexChoice {
    pub index: Arc<str>,
    pub span: SpanPlan,
    /// An array index can hold a document under several keys: its document ids are made distinct.
    pub distinct: bool,
    pub facts: ScanFacts,
    /// How many keys the spans constrain (for choosing between indexes).
    score: usize,
}

/// The term an index scan is for: its alias, whether unqualified names are its fields, its slot.
#[derive(Clone, Copy)]
pub(crate) struct Term<'a> {
    pub alias: &'a str,
    pub bare: bool,
    pub slot: Slot,
}

/// The best online secondary index for a keyspace term under `where_`, with its spans compiled; `hint` restricts
/// the choice to the named indexes.
pub(crate) fn choose_index_for(
    c: &mut Compiler<'_>,
    indexes: &[(IndexDef, IndexState)],
    where_: &Expr,
    term: Term<'_>,
    hint: &[String],
) -> Result<Option<IndexChoice>, QueryError> {
    let mut conjuncts = Vec::new();
    flatten_and(where_, &mut conjuncts);
    let texts: Vec<Option<String>> =
        conjuncts.iter().map(|e| relative(e, term.alias, term.bare, &[]).map(|r| r.to_string())).collect();
    // Only a conjunct whose names all mean the term's fields says anything about the term's index keys (a LET
    // variable named like a field is not the field).
    let usable: Vec<bool> = conjuncts.iter().map(|e| reads_only_term(c, e, term.alias, term.bare, term.slot)).collect();
    let mut best: Option<IndexChoice> = None;
    for (def, state) in indexes {
        if def.is_primary || *state != IndexState::Online || def.keys.is_empty() {
            continue;
        }
        if !hint.is_empty() && !hint.contains(&def.name) {
            continue;
        }
        let mut implied = vec![false; conjuncts.len()];
        if let Some(cond) = &def.condition {
            // A partial index holds only documents its condition accepts: use it only when the query asks for no
            // others, i.e. when each of the condition's conjuncts is one of the query's (which it then implies).
            let Ok(parsed) = crate::parse_expression(cond) else { continue };
            let mut needed = Vec::new();
            flatten_and(&parsed, &mut needed);
            let mut all = true;
            for n in needed {
                let n = n.to_string();
                match texts.iter().zip(&usable).position(|(t, u)| *u && t.as_deref() == Some(n.as_str())) {
                    Some(i) => implied[i] = true,
                    None => all = false,
                }
            }
            if !all {
                continue;
            }
        }
        let Some(mut choice) = spans_for(c, def, &conjuncts, &usable, term, &mut implied)? else { continue };
        choice.facts.exact = implied.iter().all(|i| *i);
        choice.facts.implied = implied;
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

/// The spans `def` gives for the `usable` conjuncts, marking in `implied` the conjuncts they imply.
fn spans_for(
    c: &mut Compiler<'_>,
    def: &IndexDef,
    conjuncts: &[&Expr],
    usable: &[bool],
    term: Term<'_>,
    implied: &mut [bool],
) -> Result<Option<IndexChoice>, QueryError> {
    let mut span = SpanPlan { eq: Vec::new(), range: None, in_list: None };
    let mut score = 0;
    let mut skips_nulls = false;
    for (i, key) in def.keys.iter().enumerate() {
        let preds: Vec<(usize, KeyPred<'_>)> = conjuncts
            .iter()
            .enumerate()
            .filter(|(j, _)| usable[*j])
            .filter_map(|(j, e)| key_pred(e, &key.expr, term.alias, term.bare).map(|p| (j, p)))
            .collect();
        if let Some((j, v)) = preds.iter().find_map(|(j, p)| if let KeyPred::Eq(v) = p { Some((*j, *v)) } else { None })
        {
            span.eq.push(c.expr(v)?);
            implied[j] = true;
            skips_nulls |= i == 0;
            score += 3;
            continue;
        }
        if i == 0 {
            let list = preds.iter().find_map(|(j, p)| match p {
                KeyPred::In(l) => Some((*j, None, Some(*l))),
                KeyPred::AnyOf(vs) => Some((*j, Some(vs), None)),
                _ => None,
            });
            if let Some((j, values, list)) = list {
                span.in_list = Some(match (values, list) {
                    (Some(vs), _) => CExpr::Array(vs.iter().map(|v| c.expr(v)).collect::<Result<_, _>>()?),
                    (None, Some(l)) => c.expr(l)?,
                    (None, None) => unreachable!("a list or values were found above"),
                });
                implied[j] = true;
                skips_nulls = true;
                score += 2;
                break;
            }
        }
        if let Some((range, key_skips_nulls)) = range_for(c, &preds, implied)? {
            span.range = Some(range);
            skips_nulls |= i == 0 && key_skips_nulls;
            score += 1;
        }
        break;
    }
    if score == 0 {
        return Ok(None);
    }
    let distinct = def.keys.iter().any(|k| k.array.is_some());
    let facts = ScanFacts { exact: false, implied: Vec::new(), skips_nulls };
    Ok(Some(IndexChoice { index: Arc::from(def.name.as_str()), span, distinct, facts, score }))
}

type Range = (Option<KeyBound>, Option<KeyBound>);

/// The range the predicates on one key give: the first lower and the first upper end written, or a LIKE prefix;
/// without a lower end, everything above NULL (no comparison with NULL or MISSING is true). Marks the predicates
/// the range implies, and says whether it leaves out NULL and MISSING.
fn range_for(
    c: &mut Compiler<'_>,
    preds: &[(usize, KeyPred<'_>)],
    implied: &mut [bool],
) -> Result<Option<(Range, bool)>, QueryError> {
    // Each end, and the predicate it came from.
    let mut low: Option<(KeyBound, Option<usize>)> = None;
    let mut high: Option<(KeyBound, Option<usize>)> = None;
    for (j, p) in preds {
        match p {
            KeyPred::Range(l, h) => {
                if let (None, Some((v, inc))) = (&low, l) {
                    low = Some((KeyBound::Value(c.expr(v)?, *inc), Some(*j)));
                }
                if let (None, Some((v, inc))) = (&high, h) {
                    high = Some((KeyBound::Value(c.expr(v)?, *inc), Some(*j)));
                }
            }
            KeyPred::Prefix(prefix, _) if low.is_none() && high.is_none() => {
                low = Some((KeyBound::Value(CExpr::Const(Value::from(prefix.clone())), true), Some(*j)));
                if let Some(next) = super::spans::successor(prefix) {
                    high = Some((KeyBound::Value(CExpr::Const(Value::from(next)), false), Some(*j)));
                }
            }
            _ => {}
        }
    }
    let ranged = preds.iter().any(|(_, p)| matches!(p, KeyPred::Range(..) | KeyPred::NotUnknown));
    if low.is_none() {
        if ranged {
            low = Some((KeyBound::Null(false), None));
        } else if preds.iter().any(|(_, p)| matches!(p, KeyPred::NotMissing)) {
            low = Some((KeyBound::Null(true), None));
        }
    }
    if low.is_none() && high.is_none() {
        return Ok(None);
    }
    let from = |end: &Option<(KeyBound, Option<usize>)>| end.as_ref().and_then(|(_, j)| *j);
    let above_null = matches!(low, Some((KeyBound::Value(..) | KeyBound::Null(false), _)));
    for (j, p) in preds {
        let mine = |end: &Option<(KeyBound, Option<usize>)>| from(end) == Some(*j);
        implied[*j] |= match p {
            KeyPred::Range(l, h) => (if l.is_some() { mine(&low) } else { above_null }) && (h.is_none() || mine(&high)),
            KeyPred::Prefix(_, exact) => *exact && mine(&low) && mine(&high),
            KeyPred::NotUnknown => above_null,
            KeyPred::NotMissing => low.is_some(),
            _ => false,
        };
    }
    Ok(Some(((low.map(|(b, _)| b), high.map(|(b, _)| b)), above_null)))
}

/// Turns a full primary scan (or a keyspace with no primary index) into a secondary index scan when `where_`
/// has a predicate an online index can narrow, or into a union of index scans for an OR no single index serves; a
/// keyspace term still without an index is refused ("No index available"). `bare`: unqualified names in the
/// WHERE clause are fields of this term (it is the only one).
pub(crate) fn choose_secondary(
    c: &mut Compiler<'_>,
    node: Node,
    where_: Option<&Expr>,
    alias: &str,
    bare: bool,
) -> Result<Node, QueryError> {
    use super::IdSpans;
    let (ks, slot, hint) = match &node {
        Node::PrimaryScan { ks, slot, spans: IdSpans::All, .. } => (ks.clone(), *slot, Vec::new()),
        Node::PendingScan { ks, slot, hint, .. } => (ks.clone(), *slot, hint.clone()),
        _ => return Ok(node),
    };
    let Some(w) = where_ else { return require_scan(node) };
    let indexes = ks.keyspace.indexes();
    let term = Term { alias, bare, slot };
    let plan = |choice: IndexChoice| IndexScanPlan {
        ks: ks.clone(),
        slot,
        index: choice.index,
        span: choice.span,
        distinct: choice.distinct,
        facts: choice.facts,
        cover: None,
        offset: None,
        limit: None,
        explain: Default::default(),
        reverse: false,
    };
    if let Some(choice) = choose_index_for(c, &indexes, w, term, &hint)? {
        return Ok(Node::IndexScan(Box::new(plan(choice))));
    }
    if let Some(choices) = union_for(c, &indexes, w, term, &hint)? {
        let scans = choices.into_iter().map(plan).collect();
        return Ok(Node::UnionScan { ks: ks.clone(), slot, scans });
    }
    require_scan(node)
}

/// One index choice per term of the first OR conjunct whose every term some index serves.
fn union_for(
    c: &mut Compiler<'_>,
    indexes: &[(IndexDef, IndexState)],
    where_: &Expr,
    term: Term<'_>,
    hint: &[String],
) -> Result<Option<Vec<IndexChoice>>, QueryError> {
    let mut conjuncts = Vec::new();
    flatten_and(where_, &mut conjuncts);
    'conjuncts: for conjunct in conjuncts {
        let Expr::Or(terms) = conjunct else { continue };
        let mut choices = Vec::with_capacity(terms.len());
        for t in terms.iter() {
            match choose_index_for(c, indexes, t, term, hint)? {
                Some(choice) => choices.push(choice),
                None => continue 'conjuncts,
            }
        }
        return Ok(Some(choices));
    }
    Ok(None)
}

/// A keyspace term that found no index fails the statement.
pub(crate) fn require_scan(node: Node) -> Result<Node, QueryError> {
    match node {
        Node::PendingScan { error, .. } => Err(error),
        other => Ok(other),
    }
}

/// Whether the rows of `node` already come in the order `order_by` asks for, reading the index forward
/// (`Some(false)`) or from its highest entry down (`Some(true)`): every term in one direction with the default
/// placement of MISSING and NULL (first ascending, last descending), and the block's only scan reading an index
/// whose order that is: the primary index for `META(alias).id` (unique, so nothing after it matters), a secondary
/// index (not an array index, whose documents come once in the order of their first key) for a prefix of its keys
/// (those its spans fix by equality may be left out), then the document id.
pub(crate) fn order_satisfied(
    c: &Compiler<'_>,
    node: &Node,
    order_by: &[crate::ast::OrderTerm],
    alias: Option<&str>,
    projected: &[Arc<str>],
) -> Option<bool> {
    let alias = alias?;
    let reverse = order_by.first()?.desc;
    if order_by.iter().any(|t| t.desc != reverse || t.nulls_first == Some(reverse)) {
        return None;
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
        return None;
    }
    let mut leaf = node;
    loop {
        leaf = match leaf {
            Node::Project { input, .. } | Node::Filter { input, .. } | Node::Let { input, .. } => input,
            _ => break,
        };
    }
    // A term that reads a LET or outer variable named like a key sorts by that variable, not by the key.
    let slot = match leaf {
        Node::PrimaryScan { slot, .. } => *slot,
        Node::IndexScan(scan) => scan.slot,
        _ => return None,
    };
    if order_by.iter().any(|t| !reads_only_term(c, &t.expr, alias, true, slot)) {
        return None;
    }
    let is_meta_id = |e: &Expr| {
        matches!(e, Expr::Field(base, f) if f == "id" && matches!(&**base, Expr::Call(c) if c.name == "meta"
            && (c.args.is_empty() || matches!(c.args.as_slice(), [Expr::Ident(a)] if a == alias))))
    };
    match leaf {
        Node::PrimaryScan { .. } => is_meta_id(&order_by[0].expr).then_some(reverse),
        Node::IndexScan(scan) if !scan.distinct => {
            let indexes = scan.ks.keyspace.indexes();
            let (def, _) = indexes.iter().find(|(d, _)| *d.name == *scan.index)?;
            // Keys the spans fix by equality need not be named: their entries come in the order of the next keys.
            let fixed = scan.span.eq.len();
            let mut pos = 0;
            for term in order_by {
                if is_meta_id(&term.expr) {
                    // The document id follows the keys in an index entry, and is unique.
                    return (pos.max(fixed) >= def.keys.len()).then_some(reverse);
                }
                loop {
                    let key = def.keys.get(pos)?;
                    pos += 1;
                    let named = key.array.is_none()
                        && relative(&term.expr, alias, true, &[]).map(|e| e.to_string()) == Some(key.expr.clone());
                    if named {
                        break;
                    }
                    if pos > fixed {
                        return None;
                    }
                }
            }
            Some(reverse)
        }
        _ => None,
    }
}

/// Makes the block's scan read from its highest entry down (the order `order_satisfied` found reversed).
pub(crate) fn read_in_reverse(node: &mut Node) {
    match node {
        Node::Project { input, .. } | Node::Filter { input, .. } | Node::Let { input, .. } => read_in_reverse(input),
        Node::PrimaryScan { reverse, .. } => *reverse = true,
        Node::IndexScan(scan) => scan.reverse = true,
        _ => {}
    }
}

//! Compiling INSERT, UPSERT, UPDATE, DELETE and MERGE. Every change becomes a KV mutation (CAS-checked for
//! documents the statement read); RETURNING projects the changed documents.

use std::sync::Arc;

use super::compile_expr::Compiler;
use super::keyspace::{resolve_keyspace, ResolvedPath};
use super::scope::VarKind;
use super::select::{compile_subquery, handle, primary_scan};
use super::spans::choose_primary_spans;
use super::{CExpr, KeyspaceHandle, Node, Plan, ProjTerm, Slot};
use crate::ast::{
    Delete, Expr, FromTerm, Insert, InsertSource, KeyspaceRef, Merge, MergeOn, Projection, ResultTerm, SetClause,
    UnsetClause, Update, UpdateFor,
};
use crate::QueryError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmlKind {
    Insert,
    Upsert,
    Update,
    Delete,
    Merge,
}

impl DmlKind {
    pub fn op_name(self) -> &'static str {
        match self {
            DmlKind::Insert => "INSERT",
            DmlKind::Upsert => "UPSERT",
            DmlKind::Update => "UPDATE",
            DmlKind::Delete => "DELETE",
            DmlKind::Merge => "MERGE",
        }
    }
}

/// Where a SET or UNSET writes: a slot (the target alias or an update-for variable) and a path below it, or the
/// document's expiration (`META().expiration`).
#[derive(Clone)]
pub enum PathRoot {
    Slot(Slot),
    Expiration,
}

#[derive(Clone)]
pub enum PathStep {
    Field(Arc<str>),
    DynField(CExpr),
    Element(CExpr),
}

#[derive(Clone)]
pub struct SetPath {
    pub root: PathRoot,
    pub steps: Vec<PathStep>,
}

/// An update-for: for each combination of the bindings' elements (they are paths into the document) where
/// `when` holds, the term applies with the variables bound to those elements.
#[derive(Clone)]
pub struct CUpdateFor {
    /// Per dimension: (variable slot, optional position/name slot, the path of the array it ranges over).
    pub dimensions: Vec<Vec<(Slot, Option<Slot>, SetPath)>>,
    pub when: Option<CExpr>,
}

#[derive(Clone)]
pub struct SetTerm {
    pub path: SetPath,
    /// `None` for UNSET.
    pub value: Option<CExpr>,
    pub update_for: Option<CUpdateFor>,
}

/// INSERT/UPSERT tuples: key, value and options, evaluated per source row (or once per VALUES tuple).
#[derive(Clone)]
pub struct InsertTuple {
    pub key: CExpr,
    pub value: CExpr,
    pub options: Option<CExpr>,
}

/// What MERGE does with a source row.
#[derive(Clone, Default)]
pub struct MergeActions {
    pub update: Option<(Vec<SetTerm>, Option<CExpr>)>,
    pub delete: Option<Option<CExpr>>,
    pub insert: Option<(InsertTuple, Option<CExpr>)>,
}

#[derive(Clone)]
pub struct Returning {
    pub terms: Vec<ProjTerm>,
    pub raw: bool,
}

/// A DML operator.
#[derive(Clone)]
pub struct DmlNode {
    pub kind: DmlKind,
    pub ks: KeyspaceHandle,
    /// The rows to act on: the documents to change (UPDATE, DELETE), the source rows (INSERT ... SELECT, MERGE),
    /// or `Dummy` (INSERT ... VALUES).
    pub input: Node,
    /// The target alias's slot: holds each changed document (for RETURNING and SET paths).
    pub slot: Slot,
    /// INSERT/UPSERT ... VALUES tuples.
    pub values: Vec<InsertTuple>,
    /// INSERT/UPSERT ... SELECT: per source row.
    pub select_tuple: Option<InsertTuple>,
    pub set: Vec<SetTerm>,
    /// MERGE: the target key of a source row (lookup merge) or the match condition (ANSI merge).
    pub merge_key: Option<CExpr>,
    pub merge_cond: Option<CExpr>,
    /// ANSI merge: the target scan run per source row.
    pub merge_scan: Option<Box<Node>>,
    pub merge: MergeActions,
    pub limit: Option<CExpr>,
    pub returning: Option<Returning>,
    /// The slot RETURNING projects into.
    pub out: Slot,
}

fn target(c: &mut Compiler<'_>, k: &KeyspaceRef) -> Result<(KeyspaceHandle, String), QueryError> {
    let alias = k.alias.clone().unwrap_or_else(|| k.path.parts.last().cloned().unwrap_or_default());
    match resolve_keyspace(&k.path, &c.context)? {
        ResolvedPath::Collection(name) => Ok((handle(c, name)?, alias)),
        ResolvedPath::System(_) => Err(QueryError::semantics("DML statements cannot change system keyspaces")),
    }
}

fn new_node(kind: DmlKind, ks: KeyspaceHandle, slot: Slot, out: Slot) -> DmlNode {
    DmlNode {
        kind,
        ks,
        input: Node::Dummy,
        slot,
        values: Vec::new(),
        select_tuple: None,
        set: Vec::new(),
        merge_key: None,
        merge_cond: None,
        merge_scan: None,
        merge: MergeActions::default(),
        limit: None,
        returning: None,
        out,
    }
}

fn finish(c: &mut Compiler<'_>, mut node: DmlNode, returning: Option<&Projection>) -> Result<Plan, QueryError> {
    node.returning = returning.map(|p| compile_returning(c, p)).transpose()?;
    Ok(Plan {
        root: Node::Dml(Box::new(node)),
        slots: c.scopes.slot_count(),
        out: 0,
        order: None,
        signature: serde_json::Value::Null,
    })
}

fn compile_returning(c: &mut Compiler<'_>, p: &Projection) -> Result<Returning, QueryError> {
    let mut terms = Vec::new();
    let mut unnamed = 1;
    for t in &p.terms {
        terms.push(match t {
            ResultTerm::Star => ProjTerm::Star(
                c.scopes.current_block_terms().iter().map(|(n, s)| (Arc::from(n.as_str()), *s)).collect(),
            ),
            ResultTerm::ExprStar(e) => ProjTerm::ExprStar(c.expr(e)?),
            ResultTerm::Expr { expr, alias } => {
                let name = alias.clone().or_else(|| expr.implicit_name().map(str::to_string)).unwrap_or_else(|| {
                    unnamed += 1;
                    format!("${}", unnamed - 1)
                });
                ProjTerm::Named(Arc::from(name), c.expr(expr)?)
            }
        });
    }
    Ok(Returning { terms, raw: p.raw })
}

pub(crate) fn compile_insert(c: &mut Compiler<'_>, ins: &Insert, upsert: bool) -> Result<Plan, QueryError> {
    c.scopes.push_block();
    let result = compile_insert_inner(c, ins, upsert);
    c.scopes.pop();
    result
}

fn compile_insert_inner(c: &mut Compiler<'_>, ins: &Insert, upsert: bool) -> Result<Plan, QueryError> {
    let kind = if upsert { DmlKind::Upsert } else { DmlKind::Insert };
    let (ks, alias) = target(c, &ins.keyspace)?;
    let mut values = Vec::new();
    let mut select_tuple = None;
    let mut input = Node::Dummy;
    match &ins.source {
        InsertSource::Values(tuples) => {
            for t in tuples {
                values.push(InsertTuple {
                    key: c.expr(&t.key)?,
                    value: c.expr(&t.value)?,
                    options: t.options.as_ref().map(|o| c.expr(o)).transpose()?,
                });
            }
        }
        InsertSource::Select { key, value, options, select } => {
            let plan = compile_subquery(c, select)?;
            // The key, value and options expressions read the select's rows: bind its result as the only term.
            let row = plan.out;
            c.scopes.bind_slot("$insert_source", row, VarKind::Term { is_keyspace: false });
            select_tuple = Some(InsertTuple {
                key: c.expr(key)?,
                value: match value {
                    Some(v) => c.expr(v)?,
                    None => CExpr::Var(row),
                },
                options: options.as_ref().map(|o| c.expr(o)).transpose()?,
            });
            input = plan.root;
        }
    }
    c.scopes.push_block();
    let slot = c.scopes.bind(&alias, VarKind::Term { is_keyspace: true });
    let out = c.scopes.alloc();
    let mut node = new_node(kind, ks, slot, out);
    node.values = values;
    node.select_tuple = select_tuple;
    node.input = input;
    let plan = finish(c, node, ins.returning.as_ref());
    c.scopes.pop();
    plan
}

/// The documents an UPDATE or DELETE acts on: USE KEYS or a primary scan narrowed by the WHERE clause.
fn target_rows(
    c: &mut Compiler<'_>,
    k: &KeyspaceRef,
    use_keys: Option<&Expr>,
    where_: Option<&Expr>,
) -> Result<(KeyspaceHandle, Slot, Node), QueryError> {
    let (ks, alias) = target(c, k)?;
    let keys = use_keys.map(|e| c.expr(e)).transpose()?;
    let slot = c.scopes.bind(&alias, VarKind::Term { is_keyspace: true });
    let mut node = match keys {
        // A mutation visits each document once, however often its key is listed (Couchbase's distinct KeyScan).
        Some(keys) => Node::KeyScan { ks: ks.clone(), slot, keys, distinct: true },
        None => super::select::pending_or_primary(ks.clone(), slot, &k.path, Vec::new()),
    };
    if let Some(w) = where_ {
        let cond = c.expr(w)?;
        node = choose_primary_spans(node, &cond);
        node = Node::Filter { input: Box::new(node), cond };
    }
    let node = super::select::narrow_scan(c, node, where_, Some(&alias))?;
    Ok((ks, slot, node))
}

pub(crate) fn compile_update(c: &mut Compiler<'_>, u: &Update) -> Result<Plan, QueryError> {
    c.scopes.push_block();
    let result = (|| {
        let (ks, slot, input) = target_rows(c, &u.keyspace, u.use_keys.as_ref(), u.where_.as_ref())?;
        let set = set_terms(c, &u.set, &u.unset)?;
        let out = c.scopes.alloc();
        let mut node = new_node(DmlKind::Update, ks, slot, out);
        node.input = input;
        node.set = set;
        node.limit = u.limit.as_ref().map(|l| c.expr(l)).transpose()?;
        finish(c, node, u.returning.as_ref())
    })();
    c.scopes.pop();
    result
}

pub(crate) fn compile_delete(c: &mut Compiler<'_>, d: &Delete) -> Result<Plan, QueryError> {
    c.scopes.push_block();
    let result = (|| {
        let (ks, slot, input) = target_rows(c, &d.keyspace, d.use_keys.as_ref(), d.where_.as_ref())?;
        let out = c.scopes.alloc();
        let mut node = new_node(DmlKind::Delete, ks, slot, out);
        node.input = input;
        node.limit = d.limit.as_ref().map(|l| c.expr(l)).transpose()?;
        finish(c, node, d.returning.as_ref())
    })();
    c.scopes.pop();
    result
}

fn set_terms(c: &mut Compiler<'_>, set: &[SetClause], unset: &[UnsetClause]) -> Result<Vec<SetTerm>, QueryError> {
    let mut out = Vec::new();
    for s in set {
        out.push(set_term(c, &s.path, Some(&s.value), s.update_for.as_ref())?);
    }
    for u in unset {
        out.push(set_term(c, &u.path, None, u.update_for.as_ref())?);
    }
    Ok(out)
}

fn set_term(
    c: &mut Compiler<'_>,
    path: &Expr,
    value: Option<&Expr>,
    update_for: Option<&UpdateFor>,
) -> Result<SetTerm, QueryError> {
    let Some(uf) = update_for else {
        return Ok(SetTerm {
            path: set_path(c, path)?,
            value: value.map(|v| c.expr(v)).transpose()?,
            update_for: None,
        });
    };
    c.scopes.push();
    let result = (|| {
        let mut dimensions = Vec::new();
        for dim in &uf.dimensions {
            let mut d = Vec::new();
            for b in dim {
                let over = set_path(c, &b.expr)?;
                let name_slot = b.name_var.as_deref().map(|n| c.scopes.bind(n, VarKind::Variable));
                let slot = c.scopes.bind(&b.var, VarKind::Variable);
                d.push((slot, name_slot, over));
            }
            dimensions.push(d);
        }
        let when = uf.when.as_ref().map(|w| c.expr(w)).transpose()?;
        Ok(SetTerm {
            path: set_path(c, path)?,
            value: value.map(|v| c.expr(v)).transpose()?,
            update_for: Some(CUpdateFor { dimensions, when }),
        })
    })();
    c.scopes.pop();
    result
}

/// Compiles the left side of SET/UNSET: a path from a variable (or, unqualified, from the target document).
fn set_path(c: &mut Compiler<'_>, e: &Expr) -> Result<SetPath, QueryError> {
    if is_meta_expiration(e) {
        return Ok(SetPath { root: PathRoot::Expiration, steps: Vec::new() });
    }
    let mut steps = Vec::new();
    let mut cur = e;
    loop {
        match cur {
            Expr::Field(base, name) => {
                steps.push(PathStep::Field(Arc::from(name.as_str())));
                cur = base;
            }
            Expr::DynamicField(base, name) => {
                steps.push(PathStep::DynField(c.expr(name)?));
                cur = base;
            }
            Expr::Element(base, i) => {
                steps.push(PathStep::Element(c.expr(i)?));
                cur = base;
            }
            Expr::Ident(name) => {
                let root = match c.scopes.lookup(name) {
                    Some((slot, _)) => slot,
                    None => match c.scopes.block_terms() {
                        Some([(_, slot)]) => {
                            steps.push(PathStep::Field(Arc::from(name.as_str())));
                            *slot
                        }
                        _ => return Err(QueryError::AmbiguousReference(name.clone())),
                    },
                };
                steps.reverse();
                return Ok(SetPath { root: PathRoot::Slot(root), steps });
            }
            _ => return Err(QueryError::semantics("SET and UNSET need a path (a.b[0].c)")),
        }
    }
}

/// `META().expiration` or `META(alias).expiration`.
fn is_meta_expiration(e: &Expr) -> bool {
    matches!(e, Expr::Field(base, name) if name == "expiration"
        && matches!(&**base, Expr::Call(call) if call.name == "meta"))
}

pub(crate) fn compile_merge(c: &mut Compiler<'_>, m: &Merge) -> Result<Plan, QueryError> {
    c.scopes.push_block();
    let result = compile_merge_inner(c, m);
    c.scopes.pop();
    result
}

fn compile_merge_inner(c: &mut Compiler<'_>, m: &Merge) -> Result<Plan, QueryError> {
    let (ks, alias) = target(c, &m.target)?;
    let input = match &m.source {
        FromTerm::Keyspace(_) | FromTerm::Subquery { .. } | FromTerm::Expr { .. } => {
            super::select::from_term(c, &m.source)?
        }
        _ => return Err(QueryError::semantics("MERGE ... USING needs a keyspace, subquery or expression")),
    };
    let mut merge_key = None;
    if let MergeOn::Key(k) = &m.on {
        merge_key = Some(c.expr(k)?);
    }
    let slot = c.scopes.bind(&alias, VarKind::Term { is_keyspace: true });
    let mut merge_cond = None;
    let mut merge_scan = None;
    if let MergeOn::Condition(cond) = &m.on {
        let cond = c.expr(cond)?;
        let scan = primary_scan(ks.clone(), slot, &m.target.path)?;
        merge_scan = Some(Box::new(choose_primary_spans(scan, &cond)));
        merge_cond = Some(cond);
    }
    let mut actions = MergeActions::default();
    if let Some(u) = &m.update {
        let set = set_terms(c, &u.set, &u.unset)?;
        actions.update = Some((set, u.where_.as_ref().map(|w| c.expr(w)).transpose()?));
    }
    if let Some(d) = &m.delete {
        actions.delete = Some(d.where_.as_ref().map(|w| c.expr(w)).transpose()?);
    }
    if let Some(i) = &m.insert {
        let key = match (&i.key, &merge_key) {
            (Some(k), _) => c.expr(k)?,
            (None, Some(k)) => k.clone(),
            (None, None) => {
                return Err(QueryError::semantics("MERGE with an ON condition needs INSERT (KEY ..., VALUE ...)"))
            }
        };
        let tuple =
            InsertTuple { key, value: c.expr(&i.value)?, options: i.options.as_ref().map(|o| c.expr(o)).transpose()? };
        actions.insert = Some((tuple, i.where_.as_ref().map(|w| c.expr(w)).transpose()?));
    }
    let out = c.scopes.alloc();
    let mut node = new_node(DmlKind::Merge, ks, slot, out);
    node.input = input;
    node.merge_key = merge_key;
    node.merge_cond = merge_cond;
    node.merge_scan = merge_scan;
    node.merge = actions;
    node.limit = m.limit.as_ref().map(|l| c.expr(l)).transpose()?;
    finish(c, node, m.returning.as_ref())
}

//! Plans: statements compiled into trees of operators over expressions whose names are resolved to slots.
//!
//! Compilation (`compile`) does Couchbase's formalisation and planning in one pass: every FROM alias, LET and
//! LETTING variable, range variable, aggregate and projection gets a slot in the statement's row; every
//! identifier becomes a slot read (or a field of the only FROM term); keyspaces are resolved against the
//! query context and the datastore; a scan is chosen for each keyspace (the keys of USE KEYS, a span of the
//! primary index from a `META().id` predicate, or a full primary scan). A plan is built per execution, which is
//! cheap next to running it, so prepared statements keep their syntax tree and always see current indexes.

mod compile_expr;
pub(crate) mod cover;
mod dml;
mod explain;
mod expr_match;
mod group_check;
mod key_pred;
mod keyspace;
mod pushdown;
mod sarg;
pub(crate) mod scope;
mod select;
mod spans;

use std::sync::Arc;

pub(crate) use compile_expr::visit;
pub use compile_expr::{visit_children, Compiler};
pub use keyspace::{parse_query_context, resolve_keyspace, QueryContext, ResolvedPath};

use crate::ast::{ArrayForKind, BinaryOp, IsTest, Quantifier, SetOp};
use crate::datastore::{Keyspace, KeyspaceName};
use crate::functions::{Aggregate, FunctionDef};
use crate::value::Value;
use crate::QueryError;

/// A position in a row.
pub type Slot = usize;

/// A compiled expression.
#[derive(Clone)]
pub enum CExpr {
    Const(Value),
    Var(Slot),
    /// A named parameter (`$name`), looked up at run time.
    Named(Arc<str>),
    /// A positional parameter, 1-based.
    Positional(usize),
    Field(Box<CExpr>, Arc<str>),
    DynField(Box<CExpr>, Box<CExpr>),
    Element(Box<CExpr>, Box<CExpr>),
    Slice(Box<CExpr>, Box<CExpr>, Option<Box<CExpr>>),
    Neg(Box<CExpr>),
    Not(Box<CExpr>),
    Binary(BinaryOp, Box<CExpr>, Box<CExpr>),
    And(Vec<CExpr>),
    Or(Vec<CExpr>),
    Like {
        expr: Box<CExpr>,
        pattern: Box<CExpr>,
        escape: Option<Box<CExpr>>,
        negated: bool,
    },
    In {
        expr: Box<CExpr>,
        list: Box<CExpr>,
        negated: bool,
    },
    Within {
        expr: Box<CExpr>,
        target: Box<CExpr>,
        negated: bool,
    },
    Between {
        expr: Box<CExpr>,
        low: Box<CExpr>,
        high: Box<CExpr>,
        negated: bool,
    },
    Is {
        expr: Box<CExpr>,
        test: IsTest,
        negated: bool,
    },
    Case {
        operand: Option<Box<CExpr>>,
        whens: Vec<(CExpr, CExpr)>,
        otherwise: Option<Box<CExpr>>,
    },
    Call(&'static FunctionDef, Vec<CExpr>),
    /// `META(alias)`: the metadata object of the document in a slot.
    Meta(Slot),
    Array(Vec<CExpr>),
    /// Object constructor; a member whose name is not a string is left out.
    Object(Vec<(CExpr, CExpr)>),
    Quantified {
        quantifier: Quantifier,
        bindings: Vec<CBinding>,
        satisfies: Box<CExpr>,
    },
    ArrayFor {
        kind: ArrayForKind,
        mapping: Box<CExpr>,
        bindings: Vec<CBinding>,
        when: Option<Box<CExpr>>,
    },
    ObjectFor {
        name: Box<CExpr>,
        value: Box<CExpr>,
        bindings: Vec<CBinding>,
        when: Option<Box<CExpr>>,
    },
    /// A subquery: its rows as an array. Uncorrelated ones are run once per request (`id` keys the cache).
    Subquery {
        plan: Arc<Plan>,
        correlated: bool,
        id: usize,
    },
    Exists(Box<CExpr>),
}

/// A compiled range variable.
#[derive(Clone)]
pub struct CBinding {
    pub name_slot: Option<Slot>,
    pub slot: Slot,
    pub expr: CExpr,
    pub within: bool,
}

/// A resolved keyspace in a plan.
#[derive(Clone)]
pub struct KeyspaceHandle {
    pub name: KeyspaceName,
    pub keyspace: Arc<dyn Keyspace>,
}

/// The `system:` keyspaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SystemKeyspace {
    Indexes,
    Keyspaces,
    Buckets,
    Scopes,
    Namespaces,
    Datastores,
    Dual,
    Prepareds,
    ActiveRequests,
    CompletedRequests,
}

impl SystemKeyspace {
    pub fn from_name(name: &str) -> Option<SystemKeyspace> {
        Some(match name {
            "indexes" => SystemKeyspace::Indexes,
            "keyspaces" => SystemKeyspace::Keyspaces,
            "buckets" => SystemKeyspace::Buckets,
            "scopes" => SystemKeyspace::Scopes,
            "namespaces" => SystemKeyspace::Namespaces,
            "datastores" => SystemKeyspace::Datastores,
            "dual" => SystemKeyspace::Dual,
            "prepareds" => SystemKeyspace::Prepareds,
            "active_requests" => SystemKeyspace::ActiveRequests,
            "completed_requests" => SystemKeyspace::CompletedRequests,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SystemKeyspace::Indexes => "indexes",
            SystemKeyspace::Keyspaces => "keyspaces",
            SystemKeyspace::Buckets => "buckets",
            SystemKeyspace::Scopes => "scopes",
            SystemKeyspace::Namespaces => "namespaces",
            SystemKeyspace::Datastores => "datastores",
            SystemKeyspace::Dual => "dual",
            SystemKeyspace::Prepareds => "prepareds",
            SystemKeyspace::ActiveRequests => "active_requests",
            SystemKeyspace::CompletedRequests => "completed_requests",
        }
    }
}

/// One bound of a primary-index span, computed per execution.
#[derive(Clone)]
pub struct SpanBound {
    pub expr: CExpr,
    pub inclusive: bool,
}

/// Which primary-index entries a scan reads: exact keys (`META().id IN [...]` / `= x`), or a range.
#[derive(Clone)]
pub enum IdSpans {
    All,
    /// Each value (or each element, when `array`) is a key.
    Keys {
        expr: CExpr,
        array: bool,
    },
    Range {
        low: Option<SpanBound>,
        high: Option<SpanBound>,
    },
}

/// A projection term.
#[derive(Clone)]
pub enum ProjTerm {
    /// `*`: every FROM alias as a member.
    Star(Vec<(Arc<str>, Slot)>),
    /// `expr.*`
    ExprStar(CExpr),
    Named(Arc<str>, CExpr),
}

/// One aggregate the Group operator computes.
#[derive(Clone)]
pub struct AggSpec {
    pub func: Aggregate,
    /// `None` for COUNT(*).
    pub arg: Option<CExpr>,
    pub distinct: bool,
    pub slot: Slot,
}

/// A sort key.
#[derive(Clone)]
pub struct SortTerm {
    pub expr: CExpr,
    pub desc: bool,
    pub nulls_first: bool,
}

/// A count (OFFSET or LIMIT) pushed into a scan (index or primary), with its text for EXPLAIN.
#[derive(Clone)]
pub struct Pushed {
    pub expr: CExpr,
    pub text: String,
}

/// An operator.
#[derive(Clone)]
pub enum Node {
    /// One row with nothing bound (SELECT without FROM).
    Dummy,
    /// Documents by key (USE KEYS, ON KEYS).
    KeyScan {
        ks: KeyspaceHandle,
        slot: Slot,
        keys: CExpr,
        /// Each key once (the target of a DML statement); a SELECT gives a row per key as listed.
        distinct: bool,
    },
    /// Documents through the primary index.
    PrimaryScan {
        ks: KeyspaceHandle,
        slot: Slot,
        index: Arc<str>,
        spans: IdSpans,
        /// Highest id first (ORDER BY META().id DESC).
        reverse: bool,
        /// OFFSET and LIMIT pushed into the scan (no WHERE, rows in id order): ids skipped before any fetch.
        offset: Option<Pushed>,
        limit: Option<Pushed>,
    },
    /// Documents through a secondary index: the ids its spans hold (each once for an array index), fetched, or
    /// rows made from the index entries alone when the index covers the block.
    IndexScan(Box<IndexScanPlan>),
    /// The documents of several index scans (one per term of an OR), each once, fetched.
    UnionScan {
        ks: KeyspaceHandle,
        slot: Slot,
        scans: Vec<IndexScanPlan>,
    },
    /// The number of entries an exact, covering index scan would read, into `slot` (`COUNT(*)` answered by the
    /// index: Couchbase's IndexCountScan2).
    IndexCountScan {
        scan: Box<IndexScanPlan>,
        slot: Slot,
    },
    /// A keyspace term with no usable index yet: replaced by an index scan when a predicate allows one, else the
    /// statement fails with `error` ("No index available ...").
    PendingScan {
        ks: KeyspaceHandle,
        slot: Slot,
        error: QueryError,
        /// `USE INDEX` names.
        hint: Vec<String>,
    },
    /// The number of documents of a keyspace, for `SELECT COUNT(*) FROM ks`.
    CountScan {
        ks: KeyspaceHandle,
        slot: Slot,
    },
    /// The rows of a system keyspace.
    SystemScan {
        which: SystemKeyspace,
        slot: Slot,
    },
    /// Each element of an array (a single non-array value is one row; MISSING and NULL none).
    ExprScan {
        expr: CExpr,
        slot: Slot,
    },
    /// The rows of a subquery in FROM.
    SubqueryScan {
        plan: Arc<Plan>,
        slot: Slot,
    },
    /// Lookup join / nest: `ON KEYS expr` against a keyspace.
    LookupJoin {
        input: Box<Node>,
        ks: KeyspaceHandle,
        slot: Slot,
        keys: CExpr,
        outer: bool,
        nest: bool,
    },
    /// For each input row, run `right` with the row as its base and keep the rows `on` accepts.
    NestedLoopJoin {
        input: Box<Node>,
        right: Box<Node>,
        on: Option<CExpr>,
        outer: bool,
        right_slots: Vec<Slot>,
    },
    /// ANSI NEST: the matching right-side values gathered into an array in `slot`.
    NestedLoopNest {
        input: Box<Node>,
        right: Box<Node>,
        on: CExpr,
        outer: bool,
        right_slot: Slot,
        slot: Slot,
    },
    Unnest {
        input: Box<Node>,
        expr: CExpr,
        slot: Slot,
        outer: bool,
    },
    Let {
        input: Box<Node>,
        bindings: Vec<(Slot, CExpr)>,
    },
    Filter {
        input: Box<Node>,
        cond: CExpr,
    },
    Group {
        input: Box<Node>,
        keys: Vec<(CExpr, Option<Slot>)>,
        aggs: Vec<AggSpec>,
    },
    Project {
        input: Box<Node>,
        terms: Vec<ProjTerm>,
        raw: bool,
        out: Slot,
    },
    /// Drops rows whose projection (in `out`) was seen before.
    Distinct {
        input: Box<Node>,
        out: Slot,
    },
    Order {
        input: Box<Node>,
        terms: Vec<SortTerm>,
        limit: Option<(Option<CExpr>, CExpr)>,
    },
    Offset {
        input: Box<Node>,
        n: CExpr,
    },
    Limit {
        input: Box<Node>,
        n: CExpr,
    },
    /// A set operation over two complete subplans whose results are in their `out` slots.
    SetOp {
        op: SetOp,
        all: bool,
        left: Box<Node>,
        left_out: Slot,
        right: Box<Node>,
        right_out: Slot,
        out: Slot,
    },
    /// Values computed once, before the first row: WITH terms.
    With {
        input: Box<Node>,
        bindings: Vec<(Slot, CExpr)>,
    },
    /// A DML operator (see `dml`).
    Dml(Box<dml::DmlNode>),
}

/// A secondary index scan: which entries it reads (`sarg`), and what the planner pushed into it (`cover`,
/// `pushdown`).
#[derive(Clone)]
pub struct IndexScanPlan {
    pub ks: KeyspaceHandle,
    /// The slot of the keyspace term's document.
    pub slot: Slot,
    pub index: Arc<str>,
    pub span: SpanPlan,
    /// An array index can hold a document under several keys: each document id is read once.
    pub distinct: bool,
    /// What the spans say about the WHERE clause (for pushdowns).
    pub facts: sarg::ScanFacts,
    /// Rows made from the entries instead of fetched documents; `None` fetches.
    pub cover: Option<cover::Cover>,
    /// Entries skipped before the first one read, evaluated per execution (OFFSET pushed into the scan).
    pub offset: Option<Pushed>,
    /// The most entries read after the offset (LIMIT pushed into the scan).
    pub limit: Option<Pushed>,
    /// What EXPLAIN shows of the pushdowns.
    pub explain: ScanExplain,
    /// Highest entry first: ORDER BY over the index keys DESC, or MAX of the leading key.
    pub reverse: bool,
}

/// The pushdowns of an index scan as EXPLAIN prints them (Couchbase's texts).
#[derive(Clone, Default)]
pub struct ScanExplain {
    /// `cover ((`d`.`a`))` for each index key, then the document id's.
    pub covers: Vec<String>,
    /// `cover (...)` and the value the index condition (or the spans) fixes it to.
    pub filter_covers: Vec<(String, Value)>,
    /// Reads the first entry of the leading key (MIN pushed into the scan).
    pub first_entry: bool,
}

impl Node {
    /// The input of one of a query block's own operators (LIMIT, OFFSET, ORDER BY, DISTINCT, the projection, a
    /// filter, LET, the grouping); None for a scan, a join or anything else that ends the block's chain.
    pub(crate) fn block_input(&self) -> Option<&Node> {
        match self {
            Node::Limit { input, .. }
            | Node::Offset { input, .. }
            | Node::Order { input, .. }
            | Node::Distinct { input, .. }
            | Node::Project { input, .. }
            | Node::Filter { input, .. }
            | Node::Let { input, .. }
            | Node::Group { input, .. } => Some(input),
            _ => None,
        }
    }

    /// [`Node::block_input`], to change it.
    pub(crate) fn block_input_mut(&mut self) -> Option<&mut Node> {
        match self {
            Node::Limit { input, .. }
            | Node::Offset { input, .. }
            | Node::Order { input, .. }
            | Node::Distinct { input, .. }
            | Node::Project { input, .. }
            | Node::Filter { input, .. }
            | Node::Let { input, .. }
            | Node::Group { input, .. } => Some(input),
            _ => None,
        }
    }
}

/// A compiled statement ready to run.
#[derive(Clone)]
pub struct Plan {
    pub root: Node,
    /// Number of slots in a row.
    pub slots: usize,
    /// The slot holding each result row's value.
    pub out: Slot,
    /// The order of a result object's top-level members (projection order), when rows are objects.
    pub order: Option<Arc<[Arc<str>]>>,
    /// The `signature` of the answer.
    pub signature: serde_json::Value,
}

pub(crate) use dml::{compile_delete, compile_insert, compile_merge, compile_update};
pub use dml::{
    CUpdateFor, DmlKind, DmlNode, InsertTuple, MergeActions, PathRoot, PathStep, Returning, SetPath, SetTerm,
};
pub use explain::explain;
pub use sarg::{KeyBound, ScanFacts, SpanPlan};
pub use select::compile_select;

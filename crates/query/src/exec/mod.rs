//! The executor: plans run as pull-based operators, one request on one thread. Rows leave as they are produced;
//! only the operators that must see every row first (ORDER BY, GROUP BY, DISTINCT, set operations, subquery
//! results) hold rows, and what they hold is charged against the request's memory quota.

mod aggregate;
mod dml;
mod eval;
mod like;
mod merge;
mod ops;
mod system;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

pub use eval::eval;
pub use ops::{build, Op};
pub use system::SystemRows;

use crate::datastore::{Consistency, Datastore, DocMeta, Durability, KeyspaceName};
use crate::functions::FnContext;
use crate::value::{Object, Value};
use crate::QueryError;

/// A document's identity in a row, for META().
#[derive(Clone, Debug)]
pub struct RowMeta {
    pub id: Arc<str>,
    pub meta: DocMeta,
    pub keyspace: Arc<str>,
}

impl RowMeta {
    /// The object META() returns.
    pub fn to_value(&self) -> Value {
        let mut o = Object::new();
        o.insert("id".into(), Value::String(self.id.clone()));
        o.insert("cas".into(), Value::int(self.meta.cas as i64));
        o.insert("expiration".into(), Value::int(i64::from(self.meta.expiration)));
        o.insert("flags".into(), Value::int(i64::from(self.meta.flags)));
        o.insert("type".into(), Value::string(if self.meta.is_json { "json" } else { "base64" }));
        o.insert("keyspace".into(), Value::String(self.keyspace.clone()));
        Value::object(o)
    }
}

/// The values bound while a row goes through the pipeline: one per slot of the plan, and the metadata of the
/// documents in term slots.
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub vals: Vec<Value>,
    pub metas: Vec<Option<Arc<RowMeta>>>,
}

impl Row {
    pub fn new(slots: usize) -> Row {
        Row { vals: vec![Value::Missing; slots], metas: vec![None; slots] }
    }

    pub fn get(&self, slot: usize) -> &Value {
        self.vals.get(slot).unwrap_or(&Value::Missing)
    }

    pub fn set(&mut self, slot: usize, v: Value) {
        if slot >= self.vals.len() {
            self.vals.resize(slot + 1, Value::Missing);
            self.metas.resize(slot + 1, None);
        }
        self.vals[slot] = v;
    }

    pub fn set_doc(&mut self, slot: usize, v: Value, meta: Option<Arc<RowMeta>>) {
        self.set(slot, v);
        self.metas[slot] = meta;
    }
}

/// Why a request stopped early.
pub const RUNNING: u8 = 0;
pub const TIMED_OUT: u8 = 1;
pub const CANCELLED: u8 = 2;

/// Counters reported in `metrics`.
#[derive(Default)]
pub struct Stats {
    pub mutations: Cell<u64>,
    pub sorts: Cell<u64>,
}

/// The per-request memory quota (`memory_quota`, error 5500).
pub struct Memory {
    used: Cell<u64>,
    limit: u64,
}

impl Memory {
    /// `limit` in bytes; 0 for none.
    pub fn new(limit: u64) -> Memory {
        Memory { used: Cell::new(0), limit }
    }

    pub fn charge(&self, bytes: usize) -> Result<(), QueryError> {
        let used = self.used.get().saturating_add(bytes as u64);
        self.used.set(used);
        if self.limit > 0 && used > self.limit {
            return Err(QueryError::MemoryQuota { inuse: used, limit: self.limit });
        }
        Ok(())
    }

    pub fn release(&self, bytes: usize) {
        self.used.set(self.used.get().saturating_sub(bytes as u64));
    }

    pub fn used(&self) -> u64 {
        self.used.get()
    }
}

/// How DML statements write.
#[derive(Clone, Copy, Debug, Default)]
pub struct DmlOptions {
    pub preserve_expiry: bool,
    pub durability: Durability,
}

/// Everything operators and expressions need besides the row: the datastore, the parameters, the clock, the
/// cancellation flag, the memory quota and the counters.
pub struct Cx<'a> {
    pub ds: &'a dyn Datastore,
    pub named: &'a HashMap<String, Value>,
    pub positional: &'a [Value],
    pub fnctx: FnContext<'a>,
    /// Set to TIMED_OUT or CANCELLED by whoever watches the request.
    pub state: &'a AtomicU8,
    /// The request's `timeout` as the client gave it, for the 1080 message.
    pub timeout_text: &'a str,
    pub consistency: Consistency,
    /// The deadline for index consistency waits (`scan_wait` or the request's deadline), on the fnctx clock.
    pub scan_deadline_nanos: i64,
    pub memory: Memory,
    pub stats: Stats,
    pub dml: DmlOptions,
    /// Rows of `system:prepareds`, `system:active_requests` and `system:completed_requests`.
    pub system: Option<&'a dyn SystemRows>,
    /// Documents a DML statement could not change (reported as errors; the others' changes stand).
    pub dml_errors: RefCell<Vec<QueryError>>,
    pub(crate) subquery_cache: RefCell<HashMap<usize, Value>>,
    /// Keyspaces whose consistency wait is done.
    pub(crate) waited: RefCell<Vec<(KeyspaceName, Arc<str>)>>,
}

impl<'a> Cx<'a> {
    pub fn new(
        ds: &'a dyn Datastore,
        named: &'a HashMap<String, Value>,
        positional: &'a [Value],
        fnctx: FnContext<'a>,
        state: &'a AtomicU8,
    ) -> Cx<'a> {
        Cx {
            ds,
            named,
            positional,
            fnctx,
            state,
            timeout_text: "",
            consistency: Consistency::NotBounded,
            scan_deadline_nanos: i64::MAX,
            memory: Memory::new(0),
            stats: Stats::default(),
            dml: DmlOptions::default(),
            system: None,
            dml_errors: RefCell::new(Vec::new()),
            subquery_cache: RefCell::new(HashMap::new()),
            waited: RefCell::new(Vec::new()),
        }
    }

    /// Fails when the request timed out or was cancelled; operators call it once per row they produce.
    pub fn check(&self) -> Result<(), QueryError> {
        match self.state.load(Ordering::Relaxed) {
            RUNNING => Ok(()),
            TIMED_OUT => Err(QueryError::Timeout(self.timeout_text.to_string())),
            _ => Err(QueryError::eval("Request cancelled")),
        }
    }
}

/// Runs a plan to completion, calling `emit` for each result value (the top-level value of each row; MISSING
/// values are dropped, as Couchbase drops them). Stops early when `emit` returns false.
pub fn run(
    plan: &crate::plan::Plan,
    cx: &Cx<'_>,
    mut emit: impl FnMut(Value) -> Result<bool, QueryError>,
) -> Result<(), QueryError> {
    let base = Row::new(plan.slots);
    let mut root = build(&plan.root, &base);
    while let Some(row) = root.next(cx)? {
        let v = row.vals.get(plan.out).cloned().unwrap_or(Value::Missing);
        if matches!(plan.root, crate::plan::Node::Dml(_)) {
            // DML operators put RETURNING values in their own out slot.
            if let crate::plan::Node::Dml(d) = &plan.root {
                let r = row.vals.get(d.out).cloned().unwrap_or(Value::Missing);
                if !r.is_missing() && !emit(r)? {
                    return Ok(());
                }
            }
            continue;
        }
        if v.is_missing() {
            continue;
        }
        if !emit(v)? {
            return Ok(());
        }
    }
    Ok(())
}

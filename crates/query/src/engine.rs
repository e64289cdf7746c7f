//! Running one statement: SELECT and DML through a plan, EXPLAIN, PREPARE and EXECUTE, and the index DDL.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::ast::{
    AlterIndex, BuildIndexes, CreateIndex, CreatePrimaryIndex, DropIndex, DropPrimaryIndex, Expr, IndexType,
    KeyspacePath, Statement,
};
use crate::datastore::{CreateIndexRequest, KeyspaceName};
use crate::exec::{eval, run, Cx, Row};
use crate::index::{IndexDef, IndexKeyDef};
use crate::plan::{compile_select, explain, resolve_keyspace, Compiler, Plan, QueryContext};
use crate::prepared::{Prepared, Prepareds};
use crate::value::Value;
use crate::QueryError;

/// Where an answer's rows go. `start` comes once, before the first row (it carries the `prepared` name and the
/// `signature`); `row` returns false when nobody wants more rows (the client went away).
pub trait Sink {
    fn start(&mut self, prepared: Option<&str>, signature: &Json) -> Result<(), QueryError>;
    fn row(&mut self, value: &Value, order: Option<&[Arc<str>]>) -> Result<bool, QueryError>;
}

/// What a statement runs with besides its parameters (which are in the `Cx`).
#[derive(Clone, Debug, Default)]
pub struct StatementEnv {
    pub context: QueryContext,
    pub readonly: bool,
    /// `auto_execute`: a PREPARE also runs what it prepares.
    pub auto_execute: bool,
}

/// The statement-level part of the query service: prepared statements and statement dispatch.
#[derive(Default)]
pub struct Engine {
    pub prepareds: Prepareds,
}

impl Engine {
    pub fn new() -> Engine {
        Engine::default()
    }

    /// Runs `stmt` (whose text is `text`).
    pub fn execute(
        &self,
        stmt: &Statement,
        text: &str,
        env: &StatementEnv,
        cx: &Cx<'_>,
        sink: &mut dyn Sink,
    ) -> Result<(), QueryError> {
        if env.readonly && stmt.is_write() {
            return Err(QueryError::ReadOnly);
        }
        match stmt {
            Statement::Select(_)
            | Statement::Insert(_)
            | Statement::Upsert(_)
            | Statement::Update(_)
            | Statement::Delete(_)
            | Statement::Merge(_) => {
                let plan = compile(stmt, env, cx)?;
                run_plan(&plan, None, cx, sink)
            }
            Statement::Explain(inner) => {
                let plan = compile(inner, env, cx)?;
                sink.start(None, &json!("json"))?;
                let mut o = crate::value::Object::new();
                o.insert("plan".into(), Value::from(explain(&plan)));
                o.insert("text".into(), Value::string(strip_keyword(text, "explain")));
                sink.row(&Value::object(o), None)?;
                Ok(())
            }
            Statement::Prepare { name, statement, text: inner_text, .. } => {
                self.prepare(name.as_deref(), statement, inner_text, env, cx, sink)
            }
            Statement::Execute { name, using } => {
                let mut row = Row::default();
                let name = match name {
                    // `EXECUTE p1`: an identifier names the statement, it is not a field to read.
                    Expr::Ident(n) => n.clone(),
                    other => match eval(&compile_const(other, env, cx)?, &mut row, cx)? {
                        Value::String(s) => s.to_string(),
                        v => return Err(QueryError::eval(format!("EXECUTE needs a name, not {}", v.to_json_string()))),
                    },
                };
                let p = self.lookup(&name, &env.context)?;
                match using {
                    None => self.run_prepared(&p, env, cx, sink),
                    Some(args) => {
                        let args = eval(&compile_const(args, env, cx)?, &mut row, cx)?;
                        let (named, positional) = using_args(args)?;
                        let cx2 = Cx { named: &named, positional: &positional, ..cx.reborrow() };
                        self.run_prepared(&p, env, &cx2, sink)
                    }
                }
            }
            Statement::CreatePrimaryIndex(c) => ddl(sink, create_primary(c, env, cx)),
            Statement::CreateIndex(c) => ddl(sink, create_index(c, env, cx)),
            Statement::DropIndex(d) => ddl(sink, drop_index(d, env, cx)),
            Statement::DropPrimaryIndex(d) => ddl(sink, drop_primary(d, env, cx)),
            Statement::BuildIndexes(b) => ddl(sink, build_indexes(b, env, cx)),
            Statement::AlterIndex(a) => ddl(sink, alter_index(a, env, cx)),
        }
    }

    /// The prepared statement `name`, or 4040.
    pub fn lookup(&self, name: &str, context: &QueryContext) -> Result<Arc<Prepared>, QueryError> {
        self.prepareds.get(name, context).ok_or_else(|| QueryError::NoSuchPrepared {
            name: name.to_string(),
            context: if context.key().is_empty() { "unset".into() } else { context.key() },
        })
    }

    /// Runs a prepared statement (`{"prepared": name}` or EXECUTE).
    pub fn run_prepared(
        &self,
        p: &Prepared,
        env: &StatementEnv,
        cx: &Cx<'_>,
        sink: &mut dyn Sink,
    ) -> Result<(), QueryError> {
        let env = StatementEnv { context: p.context.clone(), auto_execute: false, ..env.clone() };
        if env.readonly && p.statement.is_write() {
            return Err(QueryError::ReadOnly);
        }
        let plan = compile(&p.statement, &env, cx)?;
        run_plan(&plan, None, cx, sink)
    }

    fn prepare(
        &self,
        name: Option<&str>,
        statement: &Statement,
        text: &str,
        env: &StatementEnv,
        cx: &Cx<'_>,
        sink: &mut dyn Sink,
    ) -> Result<(), QueryError> {
        if matches!(statement, Statement::Prepare { .. } | Statement::Execute { .. }) {
            return Err(QueryError::semantics("PREPARE cannot prepare PREPARE or EXECUTE"));
        }
        // Compiling checks that the keyspaces exist and gives the signature; parameters are bound later.
        let plan = compile(statement, env, cx)?;
        let name = match name {
            Some(n) => n.to_string(),
            None => uuid((cx.fnctx.random)(), (cx.fnctx.random)()),
        };
        let mut p =
            Prepared::new(name.clone(), text.to_string(), statement.clone(), env.context.clone(), cx.fnctx.now_nanos);
        p.signature = plan.signature.clone();
        let p = Arc::new(p);
        self.prepareds.add(p.clone())?;
        if env.auto_execute {
            if env.readonly && statement.is_write() {
                return Err(QueryError::ReadOnly);
            }
            return run_plan(&plan, Some(&name), cx, sink);
        }
        sink.start(None, &json!({"*": "*"}))?;
        let row = json!({
            "encoded_plan": "",
            "name": name,
            "namespace": "default",
            "operator": explain(&plan),
            "queryContext": env.context.key(),
            "signature": plan.signature,
            "text": text,
        });
        sink.row(&Value::from(row), None)?;
        Ok(())
    }
}

impl<'a> Cx<'a> {
    /// A copy of the context's references for a nested statement (EXECUTE ... USING rebinds the parameters).
    fn reborrow(&self) -> Cx<'a> {
        let mut cx = Cx::new(self.ds, self.named, self.positional, self.fnctx, self.state);
        cx.timeout_text = self.timeout_text;
        cx.consistency = self.consistency.clone();
        cx.scan_deadline_nanos = self.scan_deadline_nanos;
        cx.dml = self.dml;
        cx.system = self.system;
        cx
    }
}

fn compile(stmt: &Statement, env: &StatementEnv, cx: &Cx<'_>) -> Result<Plan, QueryError> {
    let mut c = Compiler::new(cx.ds, env.context.clone());
    match stmt {
        Statement::Select(s) => compile_select(&mut c, s),
        Statement::Insert(i) => crate::plan::compile_insert(&mut c, i, false),
        Statement::Upsert(i) => crate::plan::compile_insert(&mut c, i, true),
        Statement::Update(u) => crate::plan::compile_update(&mut c, u),
        Statement::Delete(d) => crate::plan::compile_delete(&mut c, d),
        Statement::Merge(m) => crate::plan::compile_merge(&mut c, m),
        _ => Err(QueryError::semantics("EXPLAIN and PREPARE take a SELECT or a DML statement")),
    }
}

/// An expression with no row to read (EXECUTE names and arguments, index WITH clauses).
fn compile_const(e: &Expr, env: &StatementEnv, cx: &Cx<'_>) -> Result<crate::plan::CExpr, QueryError> {
    Compiler::new(cx.ds, env.context.clone()).expr(e)
}

fn run_plan(plan: &Plan, prepared: Option<&str>, cx: &Cx<'_>, sink: &mut dyn Sink) -> Result<(), QueryError> {
    sink.start(prepared, &plan.signature)?;
    let order = plan.order.as_deref();
    run(plan, cx, |v| sink.row(&v, order))
}

fn ddl(sink: &mut dyn Sink, result: Result<(), QueryError>) -> Result<(), QueryError> {
    result?;
    sink.start(None, &Json::Null)
}

/// `text` without its leading keyword (EXPLAIN's `text` member is the explained statement).
fn strip_keyword<'t>(text: &'t str, keyword: &str) -> &'t str {
    let t = text.trim_start();
    match t.get(..keyword.len()) {
        Some(head) if head.eq_ignore_ascii_case(keyword) => t[keyword.len()..].trim(),
        _ => t.trim(),
    }
}

/// EXECUTE ... USING: an array of positional or an object of named parameters.
fn using_args(v: Value) -> Result<(std::collections::HashMap<String, Value>, Vec<Value>), QueryError> {
    match v {
        Value::Array(a) => Ok((Default::default(), a.iter().cloned().collect())),
        Value::Object(o) => {
            Ok((o.iter().map(|(k, v)| (k.trim_start_matches('$').to_string(), v.clone())).collect(), Vec::new()))
        }
        other => Err(QueryError::eval(format!(
            "EXECUTE ... USING needs an array or an object, not {}",
            other.to_json_string()
        ))),
    }
}

/// A version-4 UUID from 128 random bits, formatted 8-4-4-4-12.
pub fn uuid(hi: u64, lo: u64) -> String {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&hi.to_be_bytes());
    b[8..].copy_from_slice(&lo.to_be_bytes());
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

fn collection(path: &KeyspacePath, env: &StatementEnv) -> Result<KeyspaceName, QueryError> {
    match resolve_keyspace(path, &env.context)? {
        crate::plan::ResolvedPath::Collection(name) => Ok(name),
        crate::plan::ResolvedPath::System(_) => {
            Err(QueryError::semantics("Indexes on system keyspaces are not allowed"))
        }
    }
}

fn check_using(using: Option<IndexType>) -> Result<(), QueryError> {
    match using {
        None | Some(IndexType::Gsi) => Ok(()),
        Some(_) => Err(QueryError::semantics("settee supports USING GSI indexes only")),
    }
}

/// The options of `WITH {...}`.
fn with_options(with: Option<&Expr>, env: &StatementEnv, cx: &Cx<'_>) -> Result<(bool, u32), QueryError> {
    let Some(w) = with else { return Ok((false, 0)) };
    let v = eval(&compile_const(w, env, cx)?, &mut Row::default(), cx)?;
    let Value::Object(o) = v else { return Err(QueryError::semantics("WITH needs an object")) };
    let defer = match o.get("defer_build") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(QueryError::semantics("defer_build must be true or false")),
    };
    let replicas = match o.get("num_replica") {
        None => 0,
        Some(v) => v
            .as_i64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| QueryError::semantics("num_replica must be a non-negative integer"))?,
    };
    Ok((defer, replicas))
}

fn new_index_id(cx: &Cx<'_>) -> String {
    format!("{:016x}", (cx.fnctx.random)())
}

fn create_primary(c: &CreatePrimaryIndex, env: &StatementEnv, cx: &Cx<'_>) -> Result<(), QueryError> {
    check_using(c.using)?;
    let keyspace = collection(&c.keyspace, env)?;
    cx.ds.keyspace(&keyspace)?;
    let (defer_build, num_replica) = with_options(c.with.as_ref(), env, cx)?;
    let name = c.name.clone().unwrap_or_else(|| "#primary".to_string());
    let def = IndexDef {
        id: new_index_id(cx),
        name,
        keyspace,
        is_primary: true,
        keys: Vec::new(),
        condition: None,
        partition: None,
        num_replica,
    };
    match cx.ds.create_index(CreateIndexRequest { def, defer_build }) {
        Err(QueryError::IndexAlreadyExists(_)) if c.if_not_exists => Ok(()),
        r => r,
    }
}

fn create_index(c: &CreateIndex, env: &StatementEnv, cx: &Cx<'_>) -> Result<(), QueryError> {
    check_using(c.using)?;
    let keyspace = collection(&c.keyspace, env)?;
    cx.ds.keyspace(&keyspace)?;
    let (defer_build, num_replica) = with_options(c.with.as_ref(), env, cx)?;
    let keys = c
        .keys
        .iter()
        .map(|k| IndexKeyDef {
            expr: k.expr.to_string(),
            array: k.array,
            desc: k.desc,
            include_missing: k.include_missing,
        })
        .collect();
    let partition = c.partition.as_ref().map(|exprs| {
        let keys: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
        format!("HASH({})", keys.join(","))
    });
    let def = IndexDef {
        id: new_index_id(cx),
        name: c.name.clone(),
        keyspace,
        is_primary: false,
        keys,
        condition: c.where_.as_ref().map(|w| w.to_string()),
        partition,
        num_replica,
    };
    match cx.ds.create_index(CreateIndexRequest { def, defer_build }) {
        Err(QueryError::IndexAlreadyExists(_)) if c.if_not_exists => Ok(()),
        r => r,
    }
}

fn drop_index(d: &DropIndex, env: &StatementEnv, cx: &Cx<'_>) -> Result<(), QueryError> {
    check_using(d.using)?;
    let keyspace = collection(&d.keyspace, env)?;
    cx.ds.keyspace(&keyspace)?;
    match cx.ds.drop_index(&keyspace, &d.name) {
        Err(QueryError::IndexNotFound(_)) if d.if_exists => Ok(()),
        r => r,
    }
}

fn drop_primary(d: &DropPrimaryIndex, env: &StatementEnv, cx: &Cx<'_>) -> Result<(), QueryError> {
    check_using(d.using)?;
    let keyspace = collection(&d.keyspace, env)?;
    let ks = cx.ds.keyspace(&keyspace)?;
    let primary = ks.indexes().into_iter().find(|(def, _)| def.is_primary && def.name == "#primary");
    match primary {
        Some((def, _)) => cx.ds.drop_index(&keyspace, &def.name),
        None if d.if_exists => Ok(()),
        None => Err(QueryError::IndexNotFound("#primary".into())),
    }
}

fn build_indexes(b: &BuildIndexes, env: &StatementEnv, cx: &Cx<'_>) -> Result<(), QueryError> {
    check_using(b.using)?;
    let keyspace = collection(&b.keyspace, env)?;
    cx.ds.keyspace(&keyspace)?;
    let mut names = Vec::new();
    for n in &b.names {
        let n = match n {
            Expr::Ident(name) => Value::string(name),
            other => eval(&compile_const(other, env, cx)?, &mut Row::default(), cx)?,
        };
        match n {
            Value::String(s) => names.push(s.to_string()),
            Value::Array(items) => {
                for i in items.iter() {
                    match i.as_str() {
                        Some(s) => names.push(s.to_string()),
                        None => return Err(QueryError::semantics("BUILD INDEX names must be strings")),
                    }
                }
            }
            _ => return Err(QueryError::semantics("BUILD INDEX names must be strings")),
        }
    }
    cx.ds.build_indexes(&keyspace, &names)
}

fn alter_index(a: &AlterIndex, env: &StatementEnv, cx: &Cx<'_>) -> Result<(), QueryError> {
    check_using(a.using)?;
    let keyspace = collection(&a.keyspace, env)?;
    let ks = cx.ds.keyspace(&keyspace)?;
    if !ks.indexes().iter().any(|(d, _)| d.name == a.name) {
        return Err(QueryError::IndexNotFound(a.name.clone()));
    }
    // Replica counts and placement have no effect on a single copy of each index; accepted as Couchbase
    // accepts them.
    eval(&compile_const(&a.with, env, cx)?, &mut Row::default(), cx)?;
    Ok(())
}

//! Query privileges: which keyspaces a statement reads, inserts into, updates, deletes from or manages indexes
//! on, and whether the caller's roles grant each (error 13014 with Couchbase's text otherwise).
//!
//! Roles as Couchbase 7.6 grants them for the query service: `admin` everything; `bucket_full_access[b]` every
//! query privilege on `b`; `query_select`, `query_insert`, `query_update`, `query_delete` and `query_manage_index`
//! on a bucket, scope or collection (`[b]`, `[b:s]`, `[b:s:c]`, or `[*]`). `bucket_admin[b]` grants none (it cannot
//! read data, as in Couchbase). The `system:` keyspaces are readable by any authenticated
//! user; their rows are filtered to what the user may see.

use settee_query::ast::{
    Expr, FromTerm, Insert, InsertSource, KeyspacePath, KeyspaceTerm, Merge, ResultTerm, Select, SetExpr, Statement,
    Subselect,
};
use settee_query::datastore::KeyspaceName;
use settee_query::plan::{resolve_keyspace, QueryContext, ResolvedPath};
use settee_query::QueryError;

use crate::auth::{BucketRole, ClusterRole, Role, User};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Privilege {
    Select,
    Insert,
    Update,
    Delete,
    ManageIndex,
}

impl Privilege {
    fn message(self, ks: &str) -> String {
        let (what, role) = match self {
            Privilege::Select => (format!("run SELECT queries on {ks}"), "query_select"),
            Privilege::Insert => (format!("run INSERT queries on {ks}"), "query_insert"),
            Privilege::Update => (format!("run UPDATE queries on {ks}"), "query_update"),
            Privilege::Delete => (format!("run DELETE queries on {ks}"), "query_delete"),
            Privilege::ManageIndex => ("run index operations".to_string(), "query_manage_index"),
        };
        format!("{what}. Add role {role} on {ks} to allow the statement to run.")
    }

    fn role(self) -> BucketRole {
        match self {
            Privilege::Select => BucketRole::QuerySelect,
            Privilege::Insert => BucketRole::QueryInsert,
            Privilege::Update => BucketRole::QueryUpdate,
            Privilege::Delete => BucketRole::QueryDelete,
            Privilege::ManageIndex => BucketRole::QueryManageIndex,
        }
    }
}

/// Whether `user` has `privilege` on `ks`.
pub fn allowed(user: &User, privilege: Privilege, ks: &KeyspaceName) -> bool {
    user.all_roles().any(|r| match r {
        Role::Cluster(ClusterRole::Admin) => true,
        Role::Cluster(_) => false,
        Role::Bucket(role, target) => {
            target.covers(&ks.bucket, &ks.scope, &ks.collection)
                && (*role == privilege.role() || *role == BucketRole::BucketFullAccess)
        }
    })
}

/// Whether `user` holds any query role on `bucket` (so its keyspaces are visible in the catalog).
pub fn has_any_query_role(user: &User, bucket: &str) -> bool {
    user.all_roles().any(|r| {
        matches!(r, Role::Bucket(
            BucketRole::QuerySelect | BucketRole::QueryInsert | BucketRole::QueryUpdate | BucketRole::QueryDelete
                | BucketRole::QueryManageIndex,
            t,
        ) if t.matches_bucket(bucket))
    })
}

/// Checks every privilege `stmt` needs.
pub fn check(user: &User, stmt: &Statement, ctx: &QueryContext) -> Result<(), QueryError> {
    let mut needs = Vec::new();
    requirements(stmt, ctx, &mut needs);
    for (privilege, ks) in needs {
        if !allowed(user, privilege, &ks) {
            let text = ks.display_path();
            return Err(QueryError::InsufficientCredentials(privilege.message(&text)));
        }
    }
    Ok(())
}

fn keyspace(path: &KeyspacePath, ctx: &QueryContext) -> Option<KeyspaceName> {
    match resolve_keyspace(path, ctx) {
        Ok(ResolvedPath::Collection(name)) => Some(name),
        _ => None,
    }
}

/// The (privilege, keyspace) pairs a statement needs; keyspaces that do not resolve are left to the planner's
/// own errors.
pub fn requirements(stmt: &Statement, ctx: &QueryContext, out: &mut Vec<(Privilege, KeyspaceName)>) {
    let mut need = |p, path: &KeyspacePath| {
        if let Some(ks) = keyspace(path, ctx) {
            out.push((p, ks));
        }
    };
    match stmt {
        Statement::Select(s) => select_reads(s, &mut |p| need(Privilege::Select, p)),
        Statement::Explain(inner) | Statement::Prepare { statement: inner, .. } => requirements(inner, ctx, out),
        Statement::Execute { .. } => {}
        Statement::Insert(i) => insert_needs(i, &[Privilege::Insert], &mut need),
        Statement::Upsert(i) => insert_needs(i, &[Privilege::Insert, Privilege::Update], &mut need),
        Statement::Update(u) => {
            need(Privilege::Update, &u.keyspace.path);
            let mut reads = Vec::new();
            exprs_reads(u.where_.iter().chain(u.set.iter().map(|s| &s.value)), &mut |p| reads.push(p.clone()));
            reads.iter().for_each(|p| need(Privilege::Select, p));
        }
        Statement::Delete(d) => {
            need(Privilege::Delete, &d.keyspace.path);
            let mut reads = Vec::new();
            exprs_reads(d.where_.iter(), &mut |p| reads.push(p.clone()));
            reads.iter().for_each(|p| need(Privilege::Select, p));
        }
        Statement::Merge(m) => merge_needs(m, &mut need),
        Statement::CreatePrimaryIndex(c) => need(Privilege::ManageIndex, &c.keyspace),
        Statement::CreateIndex(c) => need(Privilege::ManageIndex, &c.keyspace),
        Statement::DropIndex(d) => need(Privilege::ManageIndex, &d.keyspace),
        Statement::DropPrimaryIndex(d) => need(Privilege::ManageIndex, &d.keyspace),
        Statement::BuildIndexes(b) => need(Privilege::ManageIndex, &b.keyspace),
        Statement::AlterIndex(a) => need(Privilege::ManageIndex, &a.keyspace),
    }
}

fn insert_needs(i: &Insert, privileges: &[Privilege], need: &mut impl FnMut(Privilege, &KeyspacePath)) {
    for p in privileges {
        need(*p, &i.keyspace.path);
    }
    if let InsertSource::Select { select, .. } = &i.source {
        select_reads(select, &mut |p| need(Privilege::Select, p));
    }
}

fn merge_needs(m: &Merge, need: &mut impl FnMut(Privilege, &KeyspacePath)) {
    if m.update.is_some() {
        need(Privilege::Update, &m.target.path);
    }
    if m.delete.is_some() {
        need(Privilege::Delete, &m.target.path);
    }
    if m.insert.is_some() {
        need(Privilege::Insert, &m.target.path);
    }
    from_reads(&m.source, &mut |p| need(Privilege::Select, p));
}

/// Calls `read` for every keyspace a SELECT reads, subqueries included.
fn select_reads(s: &Select, read: &mut dyn FnMut(&KeyspacePath)) {
    exprs_reads(s.with.iter().map(|w| &w.expr), read);
    set_reads(&s.body, read);
}

fn set_reads(body: &SetExpr, read: &mut dyn FnMut(&KeyspacePath)) {
    match body {
        SetExpr::Query(sub) => subselect_reads(sub, read),
        SetExpr::Select(s) => select_reads(s, read),
        SetExpr::SetOp { left, right, .. } => {
            set_reads(left, read);
            set_reads(right, read);
        }
    }
}

fn subselect_reads(sub: &Subselect, read: &mut dyn FnMut(&KeyspacePath)) {
    if let Some(f) = &sub.from {
        from_reads(f, read);
    }
    let projected = sub.projection.terms.iter().filter_map(|t| match t {
        ResultTerm::Star => None,
        ResultTerm::ExprStar(e) | ResultTerm::Expr { expr: e, .. } => Some(e),
    });
    exprs_reads(projected.chain(sub.where_.iter()).chain(sub.let_.iter().map(|(_, e)| e)), read);
}

fn from_reads(term: &FromTerm, read: &mut dyn FnMut(&KeyspacePath)) {
    match term {
        FromTerm::Keyspace(KeyspaceTerm { path, .. }) => {
            if path.namespace.as_deref() != Some("system") {
                read(path);
            }
        }
        FromTerm::Subquery { select, .. } => select_reads(select, read),
        FromTerm::Expr { expr, .. } => exprs_reads(std::iter::once(expr), read),
        FromTerm::Join { left, right, .. } | FromTerm::Nest { left, right, .. } => {
            from_reads(left, read);
            from_reads(right, read);
        }
        FromTerm::Unnest { left, .. } => from_reads(left, read),
    }
}

/// Keyspaces read by subqueries inside expressions.
fn exprs_reads<'a>(exprs: impl Iterator<Item = &'a Expr>, read: &mut dyn FnMut(&KeyspacePath)) {
    for e in exprs {
        subqueries(e, &mut |s| select_reads(s, read));
    }
}

fn subqueries(e: &Expr, f: &mut dyn FnMut(&Select)) {
    if let Expr::Subquery(s) = e {
        f(s);
        return;
    }
    settee_query::plan::visit_children(e, &mut |x| subqueries(x, f));
}

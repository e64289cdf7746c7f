//! The syntax tree of SQL++ statements, shaped after Couchbase's grammar (`n1ql.y`): what was written, before
//! keyspaces, aliases and parameters are resolved. `Display` prints Couchbase's normalised text (the form
//! `system:indexes` shows for index keys and conditions), which parses back to the same tree.

mod display;
mod display_stmt;
mod expr;

pub use expr::{ArrayForKind, BinaryOp, Binding, Call, Case, Expr, IsTest, Param, Pos, Quantifier};

/// One statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    Select(Select),
    /// `EXPLAIN stmt`
    Explain(Box<Statement>),
    /// `PREPARE [FORCE] [name FROM|AS] stmt`; `text` is the statement's own text, as written after the name.
    Prepare {
        name: Option<String>,
        force: bool,
        statement: Box<Statement>,
        text: String,
    },
    /// `EXECUTE name [USING [..] | {..}]`; the name is an identifier or string literal (`Expr::Literal`) or a
    /// parameter.
    Execute {
        name: Expr,
        using: Option<Expr>,
    },
    Insert(Insert),
    Upsert(Insert),
    Update(Update),
    Delete(Delete),
    Merge(Merge),
    CreatePrimaryIndex(CreatePrimaryIndex),
    CreateIndex(CreateIndex),
    DropIndex(DropIndex),
    DropPrimaryIndex(DropPrimaryIndex),
    BuildIndexes(BuildIndexes),
    AlterIndex(AlterIndex),
}

/// A keyspace as written: `[namespace:]a[.b.c]`, each part an identifier. `system:indexes` has namespace
/// `system`; `` default:`b`.`s`.`c` `` has namespace `default` and three parts. Resolution (query_context, bucket
/// default collection) happens later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyspacePath {
    pub namespace: Option<String>,
    pub parts: Vec<String>,
}

/// A full SELECT: `[WITH ...] body [ORDER BY ...] [LIMIT n] [OFFSET n]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Select {
    pub with: Vec<WithTerm>,
    pub body: SetExpr,
    pub order_by: Vec<OrderTerm>,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
}

/// `WITH alias AS (expr)`: a common table expression (usually a subquery).
#[derive(Clone, Debug, PartialEq)]
pub struct WithTerm {
    pub alias: String,
    pub expr: Expr,
}

/// The body of a SELECT: one subselect or a set operation over two bodies.
#[derive(Clone, Debug, PartialEq)]
pub enum SetExpr {
    Query(Box<Subselect>),
    SetOp {
        op: SetOp,
        all: bool,
        left: Box<SetExpr>,
        right: Box<SetExpr>,
    },
    /// A parenthesised select with its own WITH, ORDER BY, LIMIT or OFFSET as an operand of a set operation:
    /// `(SELECT ... ORDER BY x LIMIT 1) UNION ...`. A parenthesised select with none of these is its body.
    Select(Box<Select>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Union,
    Intersect,
    Except,
}

/// `SELECT projection [FROM ...] [LET ...] [WHERE ...] [GROUP BY ... [LETTING ...] [HAVING ...]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Subselect {
    pub projection: Projection,
    pub from: Option<FromTerm>,
    pub let_: Vec<(String, Expr)>,
    pub where_: Option<Expr>,
    pub group_by: Option<GroupBy>,
}

/// `[DISTINCT] [RAW|ELEMENT|VALUE] terms`. With `raw` there is exactly one term and rows are its values.
#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    pub distinct: bool,
    pub raw: bool,
    pub terms: Vec<ResultTerm>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ResultTerm {
    /// `*`
    Star,
    /// `expr.*`: the members of an object.
    ExprStar(Expr),
    /// `expr [[AS] alias]`
    Expr { expr: Expr, alias: Option<String> },
}

/// `GROUP BY expr [AS alias], ... [LETTING ...] [HAVING cond]`.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupBy {
    pub keys: Vec<(Expr, Option<String>)>,
    pub letting: Vec<(String, Expr)>,
    pub having: Option<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OrderTerm {
    pub expr: Expr,
    pub desc: bool,
    /// `NULLS FIRST` (`Some(true)`) or `NULLS LAST` (`Some(false)`); by default MISSING and NULL come first in
    /// ascending order and last in descending order.
    pub nulls_first: Option<bool>,
}

/// One FROM source and the joins hanging off it, as a left-deep tree.
#[derive(Clone, Debug, PartialEq)]
pub enum FromTerm {
    Keyspace(KeyspaceTerm),
    /// A subquery with its (mandatory) alias.
    Subquery {
        select: Box<Select>,
        alias: String,
    },
    /// Any other expression used as a source, each element a row: `ARRAY_RANGE(0, 10) AS d`, `$param AS p`,
    /// `t.children AS c` in a correlated subquery.
    Expr {
        expr: Expr,
        alias: Option<String>,
    },
    Join {
        left: Box<FromTerm>,
        kind: JoinKind,
        right: Box<FromTerm>,
        on: JoinOn,
    },
    Nest {
        left: Box<FromTerm>,
        kind: JoinKind,
        right: Box<FromTerm>,
        on: JoinOn,
    },
    /// `[LEFT [OUTER]] UNNEST expr [AS alias]`
    Unnest {
        left: Box<FromTerm>,
        outer: bool,
        expr: Expr,
        alias: Option<String>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinKind {
    Inner,
    LeftOuter,
    RightOuter,
}

#[derive(Clone, Debug, PartialEq)]
pub enum JoinOn {
    /// Lookup join: `ON [PRIMARY] KEYS expr`.
    Keys(Expr),
    /// Index join: `ON [PRIMARY] KEY expr FOR alias`.
    KeyFor { expr: Expr, for_alias: String },
    /// ANSI join: `ON condition`.
    Condition(Expr),
    /// A comma between FROM terms: every pair.
    Cross,
}

/// A keyspace in FROM: `path [[AS] alias] [USE KEYS expr | USE INDEX (...) | USE HASH(...) | USE NL]`.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyspaceTerm {
    pub path: KeyspacePath,
    pub alias: Option<String>,
    pub use_keys: Option<Expr>,
    pub use_index: Vec<IndexHint>,
    pub join_hint: JoinHint,
}

/// `USE INDEX (name [USING GSI|FTS], ...)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexHint {
    pub name: String,
    pub using: Option<IndexType>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JoinHint {
    #[default]
    None,
    /// `USE HASH(BUILD)` / `USE HASH(PROBE)`: `Some(true)` is BUILD.
    Hash(bool),
    /// `USE NL`
    NestedLoop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexType {
    Gsi,
    View,
    Fts,
}

/// The target of a DML statement: `path [[AS] alias]`.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyspaceRef {
    pub path: KeyspacePath,
    pub alias: Option<String>,
}

/// `INSERT|UPSERT INTO ks (KEY, VALUE[, OPTIONS]) VALUES (k, v[, o]), ... [RETURNING ...]` or
/// `INSERT|UPSERT INTO ks (KEY k[, VALUE v][, OPTIONS o]) select [RETURNING ...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Insert {
    pub keyspace: KeyspaceRef,
    pub source: InsertSource,
    pub returning: Option<Projection>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InsertSource {
    Values(Vec<InsertValues>),
    /// With a SELECT: key, value and options are expressions over each row of the select (the value defaults to
    /// the whole row).
    Select {
        key: Expr,
        value: Option<Expr>,
        options: Option<Expr>,
        select: Box<Select>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct InsertValues {
    pub key: Expr,
    pub value: Expr,
    pub options: Option<Expr>,
}

/// `UPDATE ks [USE KEYS e] [SET ...] [UNSET ...] [WHERE c] [LIMIT n] [RETURNING ...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    pub keyspace: KeyspaceRef,
    pub use_keys: Option<Expr>,
    pub set: Vec<SetClause>,
    pub unset: Vec<UnsetClause>,
    pub where_: Option<Expr>,
    pub limit: Option<Expr>,
    pub returning: Option<Projection>,
}

/// `path = value [FOR ... END]` in SET.
#[derive(Clone, Debug, PartialEq)]
pub struct SetClause {
    pub path: Expr,
    pub value: Expr,
    pub update_for: Option<UpdateFor>,
}

/// `path [FOR ... END]` in UNSET.
#[derive(Clone, Debug, PartialEq)]
pub struct UnsetClause {
    pub path: Expr,
    pub update_for: Option<UpdateFor>,
}

/// `FOR bindings [FOR bindings ...] [WHEN cond] END` after a SET or UNSET term: the term applies to every
/// element the bindings reach (outermost dimension first).
#[derive(Clone, Debug, PartialEq)]
pub struct UpdateFor {
    pub dimensions: Vec<Vec<Binding>>,
    pub when: Option<Expr>,
}

/// `DELETE FROM ks [USE KEYS e] [WHERE c] [LIMIT n] [RETURNING ...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Delete {
    pub keyspace: KeyspaceRef,
    pub use_keys: Option<Expr>,
    pub where_: Option<Expr>,
    pub limit: Option<Expr>,
    pub returning: Option<Projection>,
}

/// `MERGE INTO ks USING source ON [KEY] cond WHEN MATCHED THEN ... WHEN NOT MATCHED THEN INSERT ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct Merge {
    pub target: KeyspaceRef,
    pub source: FromTerm,
    pub on: MergeOn,
    pub update: Option<MergeUpdate>,
    pub delete: Option<MergeDelete>,
    pub insert: Option<MergeInsert>,
    pub limit: Option<Expr>,
    pub returning: Option<Projection>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum MergeOn {
    /// Lookup merge: `ON [PRIMARY] KEY expr` (the expression gives the target key for each source row).
    Key(Expr),
    /// ANSI merge: `ON condition`.
    Condition(Expr),
}

#[derive(Clone, Debug, PartialEq)]
pub struct MergeUpdate {
    pub set: Vec<SetClause>,
    pub unset: Vec<UnsetClause>,
    pub where_: Option<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MergeDelete {
    pub where_: Option<Expr>,
}

/// `INSERT [(KEY k,] VALUE v [, OPTIONS o][)] [WHERE c]`; the key is required for ANSI merge, derived from the
/// ON KEY expression for lookup merge.
#[derive(Clone, Debug, PartialEq)]
pub struct MergeInsert {
    pub key: Option<Expr>,
    pub value: Expr,
    pub options: Option<Expr>,
    pub where_: Option<Expr>,
}

/// `CREATE PRIMARY INDEX [[IF NOT EXISTS] name] ON ks [USING GSI] [WITH {...}]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CreatePrimaryIndex {
    pub name: Option<String>,
    pub if_not_exists: bool,
    pub keyspace: KeyspacePath,
    pub using: Option<IndexType>,
    pub with: Option<Expr>,
}

/// `CREATE INDEX [IF NOT EXISTS] name ON ks(keys) [PARTITION BY HASH(exprs)] [WHERE cond] [USING GSI]
/// [WITH {...}]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateIndex {
    pub name: String,
    pub if_not_exists: bool,
    pub keyspace: KeyspacePath,
    pub keys: Vec<IndexKey>,
    pub partition: Option<Vec<Expr>>,
    pub where_: Option<Expr>,
    pub using: Option<IndexType>,
    pub with: Option<Expr>,
}

/// One index key: `expr [ASC|DESC]`, the leading one optionally `INCLUDE MISSING`; array keys are written
/// `DISTINCT ARRAY ... END`, `ALL ARRAY ... END`, `DISTINCT expr` or `ALL expr`.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexKey {
    pub expr: Expr,
    pub array: Option<ArrayIndexKind>,
    pub desc: bool,
    pub include_missing: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayIndexKind {
    Distinct,
    All,
}

/// `DROP INDEX [IF EXISTS] name ON ks [USING GSI]` or the older `DROP INDEX ks.name [USING GSI]` (the keyspace
/// path then holds every part but the last).
#[derive(Clone, Debug, PartialEq)]
pub struct DropIndex {
    pub name: String,
    pub if_exists: bool,
    pub keyspace: KeyspacePath,
    pub using: Option<IndexType>,
}

/// `DROP PRIMARY INDEX [IF EXISTS] ON ks [USING GSI]`.
#[derive(Clone, Debug, PartialEq)]
pub struct DropPrimaryIndex {
    pub if_exists: bool,
    pub keyspace: KeyspacePath,
    pub using: Option<IndexType>,
}

/// `BUILD INDEX ON ks(name_or_expr, ...) [USING GSI]`; each name is an identifier (as a string literal) or an
/// expression giving a name or an array of names.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildIndexes {
    pub keyspace: KeyspacePath,
    pub names: Vec<Expr>,
    pub using: Option<IndexType>,
}

/// `ALTER INDEX name ON ks WITH {...}` (or `ALTER INDEX ks.name WITH {...}`).
#[derive(Clone, Debug, PartialEq)]
pub struct AlterIndex {
    pub name: String,
    pub keyspace: KeyspacePath,
    pub using: Option<IndexType>,
    pub with: Expr,
}

impl Statement {
    /// Whether the statement changes data or definitions (refused in `readonly` requests).
    pub fn is_write(&self) -> bool {
        match self {
            Statement::Select(_) | Statement::Explain(_) | Statement::Execute { .. } => false,
            Statement::Prepare { statement, .. } => statement.is_write(),
            _ => true,
        }
    }
}

//! Expressions as the parser produces them, before any name is resolved.

use super::Select;
use crate::value::Value;

/// Where a token starts in the statement text (1-based), for errors that name a line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

/// A `$name`, `$1` or `?` parameter. `?` placeholders are numbered in order of appearance, from 1, so `?` and
/// `$1` bind the same way: positional parameter n is `args[n - 1]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    Named(String),
    Positional(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    /// `||`
    Concat,
    /// `=` and `==`
    Eq,
    /// `!=` and `<>`
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// The test of `IS [NOT] NULL | MISSING | VALUED` (`IS KNOWN` is VALUED, `IS UNKNOWN` is NOT VALUED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsTest {
    Null,
    Missing,
    Valued,
}

/// ANY / SOME (the same), EVERY, ANY AND EVERY (SOME AND EVERY).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantifier {
    Any,
    Every,
    AnyAndEvery,
}

/// `ARRAY ... FOR ... END` or `FIRST ... FOR ... END`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayForKind {
    Array,
    First,
}

/// One range variable of a collection expression: `[pos:]var IN expr` or `[name:]var WITHIN expr`.
/// With IN, the optional first name binds the element's position; with WITHIN, a name bound over every nested
/// value of `expr` (WITHIN descends into children), the first name binds the member name or position.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    pub name_var: Option<String>,
    pub var: String,
    pub expr: Expr,
    pub within: bool,
}

/// A function call as written: `name(args)`, `COUNT(*)`, `COUNT(DISTINCT x)`. The name is lowercased; whether it
/// names a function is checked after parsing (an unknown one is a syntax error that names the position). Two calls
/// are equal when they call the same function the same way, wherever they were written (so that `COUNT(a)` in
/// HAVING matches `COUNT(a)` in the projection, and a printed statement parses back equal).
#[derive(Clone, Debug)]
pub struct Call {
    pub name: String,
    pub args: Vec<Expr>,
    /// `f(DISTINCT x)`, for aggregates.
    pub distinct: bool,
    /// `f(*)`, only COUNT takes it.
    pub star: bool,
    pub pos: Pos,
}

impl PartialEq for Call {
    fn eq(&self, other: &Call) -> bool {
        self.name == other.name && self.args == other.args && self.distinct == other.distinct && self.star == other.star
    }
}

/// `CASE [operand] WHEN ... THEN ... [ELSE ...] END`.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The simple form's operand; `None` for the searched form.
    pub operand: Option<Box<Expr>>,
    pub whens: Vec<(Expr, Expr)>,
    pub otherwise: Option<Box<Expr>>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A number, string, `TRUE`, `FALSE`, `NULL` or `MISSING`.
    Literal(Value),
    /// A bare or backticked name: a keyspace alias, a variable, or a field of the only FROM term.
    Ident(String),
    Param(Param),
    /// `expr.name` (also `` expr.`name` ``).
    Field(Box<Expr>, String),
    /// `expr.[name_expr]`: a member whose name is computed.
    DynamicField(Box<Expr>, Box<Expr>),
    /// `expr[index]`
    Element(Box<Expr>, Box<Expr>),
    /// `expr[start:]` or `expr[start:end]`.
    Slice {
        base: Box<Expr>,
        start: Box<Expr>,
        end: Option<Box<Expr>>,
    },
    /// Unary minus.
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `a AND b AND c`, flattened.
    And(Vec<Expr>),
    /// `a OR b OR c`, flattened.
    Or(Vec<Expr>),
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        escape: Option<Box<Expr>>,
        negated: bool,
    },
    In {
        expr: Box<Expr>,
        list: Box<Expr>,
        negated: bool,
    },
    Within {
        expr: Box<Expr>,
        target: Box<Expr>,
        negated: bool,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    Is {
        expr: Box<Expr>,
        test: IsTest,
        negated: bool,
    },
    Case(Case),
    Call(Call),
    /// `[a, b, ...]`
    Array(Vec<Expr>),
    /// `{name: value, ...}`; a member written without a name (`{d.name}`) has `None` and takes the name of its
    /// expression's last path element.
    Object(Vec<(Option<Expr>, Expr)>),
    /// `ANY|EVERY|ANY AND EVERY bindings SATISFIES cond END`.
    Quantified {
        quantifier: Quantifier,
        bindings: Vec<Binding>,
        satisfies: Box<Expr>,
    },
    /// `ARRAY|FIRST mapping FOR bindings [WHEN cond] END`.
    ArrayFor {
        kind: ArrayForKind,
        mapping: Box<Expr>,
        bindings: Vec<Binding>,
        when: Option<Box<Expr>>,
    },
    /// `OBJECT name:value FOR bindings [WHEN cond] END`.
    ObjectFor {
        name: Box<Expr>,
        value: Box<Expr>,
        bindings: Vec<Binding>,
        when: Option<Box<Expr>>,
    },
    /// `(SELECT ...)` used as a value: an array of its rows.
    Subquery(Box<Select>),
    /// `EXISTS expr`: true when the array (usually a subquery) is not empty.
    Exists(Box<Expr>),
}

impl Expr {
    pub fn ident(name: &str) -> Expr {
        Expr::Ident(name.to_string())
    }

    pub fn string(s: &str) -> Expr {
        Expr::Literal(Value::string(s))
    }

    pub fn int(i: i64) -> Expr {
        Expr::Literal(Value::int(i))
    }

    pub fn field(base: Expr, name: &str) -> Expr {
        Expr::Field(Box::new(base), name.to_string())
    }

    pub fn binary(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::Binary(op, Box::new(a), Box::new(b))
    }

    /// The name a projection of this expression gets when it has no alias: the last path element of a path
    /// (`a.b.c` → `c`, `` `x` `` → `x`), `None` for anything else (which is then named `$1`, `$2`, ...).
    pub fn implicit_name(&self) -> Option<&str> {
        match self {
            Expr::Ident(name) | Expr::Field(_, name) => Some(name),
            _ => None,
        }
    }
}

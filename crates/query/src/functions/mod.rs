//! The SQL++ function library: every built-in function by name, with its arity and its implementation.
//!
//! Scalar functions are pure: they get evaluated arguments and a `FnContext` (the request's clock and random
//! source) and return a value. Most return MISSING when an argument is MISSING and NULL when one has the wrong
//! type, as Couchbase's do. Aggregates (COUNT, SUM, ...) are only listed here, so that names resolve; the executor
//! keeps their state.

use crate::value::Value;
use crate::QueryError;

/// What a scalar function sees besides its arguments.
#[derive(Clone, Copy)]
pub struct FnContext<'a> {
    /// The request's start time in nanoseconds since the Unix epoch: NOW_MILLIS, NOW_STR and friends return the
    /// same time for a whole statement, as Couchbase's do.
    pub now_nanos: i64,
    /// The current time in nanoseconds since the epoch, for CLOCK_MILLIS / CLOCK_STR (which move during a
    /// statement).
    pub clock: &'a dyn Fn() -> i64,
    /// A random source for RANDOM() without a seed and UUID(): returns 64 random bits per call.
    pub random: &'a dyn Fn() -> u64,
}

pub type ScalarFn = fn(&[Value], &FnContext<'_>) -> Result<Value, QueryError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    Count,
    CountN,
    Sum,
    Avg,
    Min,
    Max,
    ArrayAgg,
    Median,
    Stddev,
    StddevPop,
    StddevSamp,
    Variance,
    VariancePop,
    VarianceSamp,
}

#[derive(Clone, Copy)]
pub enum FnKind {
    Scalar(ScalarFn),
    Aggregate(Aggregate),
    /// Evaluated by the executor because it needs the row (META, SEARCH_META ...).
    Special,
}

/// One built-in function.
#[derive(Clone, Copy)]
pub struct FunctionDef {
    /// Lowercase name.
    pub name: &'static str,
    pub min_args: usize,
    /// `usize::MAX` for any number.
    pub max_args: usize,
    pub kind: FnKind,
    /// Same arguments, same result (false for NOW_*, CLOCK_*, RANDOM without seed, UUID): only deterministic
    /// functions may appear in index keys, and only they are folded when their arguments are constant.
    pub deterministic: bool,
}

/// The function named `name` (any case), if SQL++ has one.
pub fn lookup(name: &str) -> Option<&'static FunctionDef> {
    let lower = name.to_ascii_lowercase();
    FUNCTIONS.iter().find(|f| f.name == lower)
}

static FUNCTIONS: &[FunctionDef] = &[];

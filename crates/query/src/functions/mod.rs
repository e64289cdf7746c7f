//! The SQL++ function library: every built-in function by name, with its arity and its implementation.
//!
//! Scalar functions are pure: they get evaluated arguments and a `FnContext` (the request's clock and random
//! source) and return a value. Callers pass a number of arguments the definition `accepts` (the planner checks
//! arity when it resolves the name); a function never panics on any argument values. Most return MISSING when an argument is MISSING and NULL when one has the wrong
//! type, as Couchbase's do; each family's file says where a function departs from that. Aggregates (COUNT, SUM,
//! ...) are only listed here, so that names resolve; the executor keeps their state. META, SEARCH_META and
//! SEARCH_SCORE are `Special`: the executor evaluates them because they need the row.
//!
//! One file per family (`string` with `mask`, `regexp`, `number`, `bitwise`, `array` with `array_set`, `object`
//! with `object_paths`, `types`, `conditional`, `json`, `misc`, `date/`), each with a `FUNCTIONS` table; `lookup` indexes them all once, by lowercase name, aliases
//! included. Work and output are bounded: a result that would exceed `args::MAX_RESULT_BYTES` (20 MiB, Couchbase's
//! fallback limit) or `args::RANGE_LIMIT` elements is an evaluation error, never an allocation.
//!
//! Behaviour follows Couchbase Server 7.6's query service (`expression/func_*.go`), read for behaviour only.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::value::Value;
use crate::QueryError;

mod args;

pub use args::sql_eq;
mod array;
mod array_set;
mod bitwise;
mod conditional;
mod date;
mod json;
mod mask;
mod misc;
mod number;
mod object;
mod object_paths;
mod regexp;
mod string;
mod types;

#[cfg(test)]
mod tests;

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
    /// Same arguments, same result (false for NOW_*, CLOCK_*, RANDOM, UUID): only deterministic functions may
    /// appear in index keys, and only they are folded when their arguments are constant.
    pub deterministic: bool,
}

impl FunctionDef {
    /// Whether `n` arguments are acceptable.
    pub fn accepts(&self, n: usize) -> bool {
        (self.min_args..=self.max_args).contains(&n)
    }
}

/// Any number of arguments.
pub const VARIADIC: usize = usize::MAX;

/// A deterministic scalar function.
pub(crate) const fn scalar(name: &'static str, min_args: usize, max_args: usize, f: ScalarFn) -> FunctionDef {
    FunctionDef { name, min_args, max_args, kind: FnKind::Scalar(f), deterministic: true }
}

/// A scalar function whose result may change between calls with the same arguments (clock, random source).
pub(crate) const fn volatile(name: &'static str, min_args: usize, max_args: usize, f: ScalarFn) -> FunctionDef {
    FunctionDef { name, min_args, max_args, kind: FnKind::Scalar(f), deterministic: false }
}

const fn aggregate(name: &'static str, min_args: usize, max_args: usize, agg: Aggregate) -> FunctionDef {
    FunctionDef { name, min_args, max_args, kind: FnKind::Aggregate(agg), deterministic: true }
}

const fn special(name: &'static str, min_args: usize, max_args: usize) -> FunctionDef {
    FunctionDef { name, min_args, max_args, kind: FnKind::Special, deterministic: false }
}

/// Aggregates, by Couchbase's names. COUNT takes no argument for `COUNT(*)`.
static AGGREGATES: &[FunctionDef] = &[
    aggregate("array_agg", 1, 1, Aggregate::ArrayAgg),
    aggregate("avg", 1, 1, Aggregate::Avg),
    aggregate("count", 0, 1, Aggregate::Count),
    aggregate("countn", 1, 1, Aggregate::CountN),
    aggregate("max", 1, 1, Aggregate::Max),
    aggregate("mean", 1, 1, Aggregate::Avg),
    aggregate("median", 1, 1, Aggregate::Median),
    aggregate("min", 1, 1, Aggregate::Min),
    aggregate("stddev", 1, 1, Aggregate::Stddev),
    aggregate("stddev_pop", 1, 1, Aggregate::StddevPop),
    aggregate("stddev_samp", 1, 1, Aggregate::StddevSamp),
    aggregate("sum", 1, 1, Aggregate::Sum),
    aggregate("variance", 1, 1, Aggregate::Variance),
    aggregate("variance_pop", 1, 1, Aggregate::VariancePop),
    aggregate("var_pop", 1, 1, Aggregate::VariancePop),
    aggregate("variance_samp", 1, 1, Aggregate::VarianceSamp),
    aggregate("var_samp", 1, 1, Aggregate::VarianceSamp),
];

/// Functions the executor evaluates itself.
static SPECIALS: &[FunctionDef] = &[special("meta", 0, 1), special("search_meta", 0, 1), special("search_score", 0, 1)];

/// Every family's table.
static FUNCTIONS: &[&[FunctionDef]] = &[
    string::FUNCTIONS,
    regexp::FUNCTIONS,
    number::FUNCTIONS,
    bitwise::FUNCTIONS,
    array::FUNCTIONS,
    array_set::FUNCTIONS,
    object::FUNCTIONS,
    object_paths::FUNCTIONS,
    types::CHECKS,
    types::CONVERSIONS,
    conditional::FUNCTIONS,
    json::FUNCTIONS,
    misc::FUNCTIONS,
    date::FUNCTIONS,
    AGGREGATES,
    SPECIALS,
];

/// The function named `name` (any case), if SQL++ has one.
pub fn lookup(name: &str) -> Option<&'static FunctionDef> {
    index().get(name.to_ascii_lowercase().as_str()).copied()
}

/// Every built-in function, aliases included, in table order.
pub fn all() -> impl Iterator<Item = &'static FunctionDef> {
    FUNCTIONS.iter().flat_map(|family| family.iter())
}

fn index() -> &'static HashMap<&'static str, &'static FunctionDef> {
    static INDEX: OnceLock<HashMap<&'static str, &'static FunctionDef>> = OnceLock::new();
    INDEX.get_or_init(|| all().map(|f| (f.name, f)).collect())
}

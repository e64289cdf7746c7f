//! Unit tests of the function library, one file per family. Expected values come from Couchbase Server's own
//! test cases (`test/filestore/test_cases/*/case_*.json` in couchbase/query), its documentation, or its source
//! (`expression/func_*.go`), as each test says.

use super::*;

mod array;
mod bitwise;
mod conditional;
mod date;
mod date_formats;
mod json;
mod number;
mod object;
mod regexp;
mod registry;
mod robustness;
mod string;
mod types;

/// The fixed context tests run in: the request started at 2021-06-25T14:48:42.123Z, the clock reads one second
/// later, and the random source counts up.
pub(super) const NOW_NANOS: i64 = 1_624_632_522_123_000_000;

/// Calls `name` through the registry with arguments written as JSON text, or `MISSING`; returns the result as JSON
/// text, `MISSING`, or `ERROR: <message>`.
pub(super) fn ev(name: &str, args: &[&str]) -> String {
    let args: Vec<Value> = args.iter().map(|a| val(a)).collect();
    match call(name, &args) {
        Ok(Value::Missing) => "MISSING".to_string(),
        Ok(v) => v.to_json_string(),
        Err(e) => format!("ERROR: {e}"),
    }
}

/// Calls `name` with values; panics (failing the test) when the name or arity is wrong.
pub(super) fn call(name: &str, args: &[Value]) -> Result<Value, QueryError> {
    let def = lookup(name).unwrap_or_else(|| panic!("no function {name}"));
    assert!(def.accepts(args.len()), "{name} does not take {} arguments", args.len());
    let FnKind::Scalar(f) = def.kind else { panic!("{name} is not a scalar function") };
    let counter = std::cell::Cell::new(0u64);
    let random = || {
        counter.set(counter.get() + 1);
        counter.get().wrapping_mul(0x9e37_79b9_7f4a_7c15)
    };
    let clock = || NOW_NANOS + 1_000_000_000;
    let ctx = FnContext { now_nanos: NOW_NANOS, clock: &clock, random: &random };
    f(args, &ctx)
}

/// A value from JSON text, or MISSING for `MISSING`.
pub(super) fn val(text: &str) -> Value {
    if text == "MISSING" {
        return Value::Missing;
    }
    Value::from_json(text.as_bytes()).unwrap_or_else(|e| panic!("bad test JSON {text}: {e}"))
}

//! Numeric functions: ABS, ACOS, ASIN, ATAN, ATAN2, CEIL, COS, DEGREES, E, EXP, LN, LOG, FLOOR, IDIV, IMOD, NAN,
//! NEGINF, POSINF, PI, POWER, RADIANS, RANDOM, ROUND (also ROUND_EVEN, ROUND_NEAREST), SIGN, SIN, SQRT, TAN, TRUNC,
//! and the arithmetic operators as functions (ADD, SUB, MULT, DIV, MOD, NEG).
//!
//! Couchbase computes in float64 and stores a whole result as an integer (`args::num`); integer inputs that need
//! no float (ABS, CEIL, FLOOR, ROUND, TRUNC of an integer) stay exact here even beyond 2^53. ROUND rounds half to
//! even, as Couchbase 7.6 does (`ROUND(2.5)` is 2); ROUND_NEAREST rounds half away from zero.
//!
//! RANDOM(seed) is deterministic per seed but is not Go's generator, so the numbers differ from Couchbase's; and
//! where Couchbase advances one generator across the rows of a statement for a constant seed, settee returns the
//! same number for the same seed every time. A fractional seed is truncated (Couchbase does that for constants).

use super::args::{arg, f64_of, int, is_num, num, unknown, whole};
use super::{scalar, volatile, FnContext, FunctionDef, VARIADIC};
use crate::value::{Number, Value};
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    scalar("abs", 1, 1, abs),
    scalar("acos", 1, 1, |a, _| unary_f(a, f64::acos)),
    scalar("asin", 1, 1, |a, _| unary_f(a, f64::asin)),
    scalar("atan", 1, 1, |a, _| unary_f(a, f64::atan)),
    scalar("atan2", 2, 2, |a, _| binary_f(a, f64::atan2)),
    scalar("ceil", 1, 1, |a, _| unary_exact(a, f64::ceil)),
    scalar("cos", 1, 1, |a, _| unary_f(a, f64::cos)),
    scalar("deg", 1, 1, |a, _| unary_f(a, |x| x * 180.0 / std::f64::consts::PI)),
    scalar("degrees", 1, 1, |a, _| unary_f(a, |x| x * 180.0 / std::f64::consts::PI)),
    scalar("e", 0, 0, |_, _| Ok(num(std::f64::consts::E))),
    scalar("exp", 1, 1, |a, _| unary_f(a, f64::exp)),
    scalar("ln", 1, 1, |a, _| unary_f(a, f64::ln)),
    scalar("log", 1, 1, |a, _| unary_f(a, f64::log10)),
    scalar("floor", 1, 1, |a, _| unary_exact(a, f64::floor)),
    scalar("inf", 0, 0, |_, _| Ok(num(f64::INFINITY))),
    scalar("posinf", 0, 0, |_, _| Ok(num(f64::INFINITY))),
    scalar("pos_inf", 0, 0, |_, _| Ok(num(f64::INFINITY))),
    scalar("neginf", 0, 0, |_, _| Ok(num(f64::NEG_INFINITY))),
    scalar("neg_inf", 0, 0, |_, _| Ok(num(f64::NEG_INFINITY))),
    scalar("nan", 0, 0, |_, _| Ok(num(f64::NAN))),
    scalar("pi", 0, 0, |_, _| Ok(num(std::f64::consts::PI))),
    scalar("power", 2, 2, |a, _| binary_f(a, f64::powf)),
    scalar("rad", 1, 1, |a, _| unary_f(a, |x| x * std::f64::consts::PI / 180.0)),
    scalar("radians", 1, 1, |a, _| unary_f(a, |x| x * std::f64::consts::PI / 180.0)),
    volatile("random", 0, 1, random),
    scalar("round", 1, 2, |a, _| round(a, Rounding::HalfEven)),
    scalar("round_even", 1, 2, |a, _| round(a, Rounding::HalfEven)),
    scalar("round_nearest", 1, 2, |a, _| round(a, Rounding::HalfAway)),
    scalar("sign", 1, 1, sign),
    scalar("sin", 1, 1, |a, _| unary_f(a, f64::sin)),
    scalar("sqrt", 1, 1, |a, _| unary_f(a, f64::sqrt)),
    scalar("tan", 1, 1, |a, _| unary_f(a, f64::tan)),
    scalar("trunc", 1, 2, |a, _| round(a, Rounding::Truncate)),
    scalar("idiv", 2, 2, |a, _| integer_op(a, i64::wrapping_div)),
    scalar("imod", 2, 2, |a, _| integer_op(a, i64::wrapping_rem)),
    scalar("add", 2, VARIADIC, |a, _| fold(a, Number::add)),
    scalar("mult", 2, VARIADIC, |a, _| fold(a, Number::mul)),
    scalar("sub", 2, 2, |a, _| fold(a, Number::sub)),
    scalar("div", 2, 2, div),
    scalar("mod", 2, 2, modulo),
    scalar("neg", 1, 1, neg),
];

type Res = Result<Value, QueryError>;

fn unary_f(args: &[Value], f: fn(f64) -> f64) -> Res {
    Ok(unknown(args, |_, v| is_num(v)).unwrap_or_else(|| num(f(f64_of(&args[0])))))
}

fn binary_f(args: &[Value], f: fn(f64, f64) -> f64) -> Res {
    Ok(unknown(args, |_, v| is_num(v)).unwrap_or_else(|| num(f(f64_of(&args[0]), f64_of(&args[1])))))
}

/// A function that leaves integers alone (CEIL, FLOOR) and applies `f` to floats.
fn unary_exact(args: &[Value], f: fn(f64) -> f64) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        Value::Number(Number::Int(i)) => int(*i),
        Value::Number(Number::Float(x)) => num(f(*x)),
        _ => Value::Null,
    })
}

fn abs(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        Value::Number(Number::Int(i)) => i.checked_abs().map_or_else(|| num((*i as f64).abs()), int),
        Value::Number(Number::Float(x)) => num(x.abs()),
        _ => Value::Null,
    })
}

fn sign(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(unknown(args, |_, v| is_num(v)).unwrap_or_else(|| {
        let x = f64_of(&args[0]);
        int(if x < 0.0 {
            -1
        } else if x > 0.0 {
            1
        } else {
            0
        })
    }))
}

#[derive(Clone, Copy, PartialEq)]
enum Rounding {
    HalfEven,
    HalfAway,
    Truncate,
}

/// ROUND/TRUNC(x [, digits]): digits may be negative (tens, hundreds...); a fractional digit count is NULL.
fn round(args: &[Value], mode: Rounding) -> Res {
    let integral = |v: &Value| whole(v).is_some() || f64_of(v).is_infinite();
    if let Some(v) = unknown(args, |i, v| is_num(v) && (i == 0 || integral(v))) {
        return Ok(v);
    }
    let digits = args.get(1).map_or(0, |d| whole(d).unwrap_or(if f64_of(d) > 0.0 { i64::MAX } else { i64::MIN }));
    if let (Value::Number(Number::Int(i)), true) = (&args[0], digits >= 0) {
        return Ok(int(*i));
    }
    let x = f64_of(&args[0]);
    // Couchbase's roundFloat/truncateFloat: scale by 10^digits, round, scale back.
    let pow = 10f64.powf(digits.clamp(-400, 400) as f64);
    Ok(num(match mode {
        Rounding::Truncate => (x * pow).trunc() / pow,
        _ if !x.is_finite() => x,
        _ => {
            let scaled = x.abs() * pow + 0.5;
            let mut rounded = scaled.floor();
            if mode == Rounding::HalfEven && rounded == scaled && rounded % 2.0 != 0.0 {
                rounded -= 1.0;
            }
            x.signum() * rounded / pow
        }
    }))
}

/// RANDOM(): 53 random bits from the request's source; RANDOM(seed): the first number of a generator seeded with
/// the (truncated) seed.
fn random(args: &[Value], ctx: &FnContext<'_>) -> Res {
    let bits = match args.first() {
        None => (ctx.random)(),
        Some(Value::Missing) => return Ok(Value::Missing),
        Some(Value::Number(n)) => splitmix64(n.to_f64() as i64 as u64),
        Some(_) => return Ok(Value::Null),
    };
    Ok(Value::float((bits >> 11) as f64 / (1u64 << 53) as f64))
}

/// SplitMix64's output function: a well-mixed 64-bit value for each seed.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// IDIV/IMOD: both operands truncated to integers; a divisor that truncates to zero gives NULL.
fn integer_op(args: &[Value], op: fn(i64, i64) -> i64) -> Res {
    if let Some(v) = unknown(args, |_, v| is_num(v)) {
        return Ok(v);
    }
    let truncated = |v: &Value| match v.as_number() {
        Some(Number::Int(i)) => i,
        Some(Number::Float(f)) => f as i64,
        None => 0,
    };
    let (a, b) = (truncated(&args[0]), truncated(&args[1]));
    Ok(if b == 0 { Value::Null } else { int(op(a, b)) })
}

/// ADD, SUB and MULT as functions: integers stay exact until they overflow.
fn fold(args: &[Value], op: fn(Number, Number) -> Number) -> Res {
    if let Some(v) = unknown(args, |_, v| is_num(v)) {
        return Ok(v);
    }
    let mut numbers = args.iter().filter_map(Value::as_number);
    let first = numbers.next().unwrap_or(Number::Int(0));
    Ok(Value::Number(numbers.fold(first, op)))
}

fn div(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_num(v)) {
        return Ok(v);
    }
    let (a, b) = (f64_of(&args[0]), f64_of(&args[1]));
    Ok(if b == 0.0 { Value::Null } else { num(a / b) })
}

fn modulo(args: &[Value], _: &FnContext<'_>) -> Res {
    if let Some(v) = unknown(args, |_, v| is_num(v)) {
        return Ok(v);
    }
    let (a, b) = (f64_of(&args[0]), f64_of(&args[1]));
    Ok(if b == 0.0 { Value::Null } else { num(a % b) })
}

fn neg(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(match arg(args, 0) {
        Value::Missing => Value::Missing,
        Value::Number(n) => Value::Number(n.neg()),
        _ => Value::Null,
    })
}

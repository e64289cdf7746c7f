//! Bit functions on 64-bit integers: BITAND, BITOR, BITXOR (two or more operands), BITNOT, BITSHIFT (logical
//! shift, or rotation), BITSET, BITCLEAR, BITTEST/ISBITSET. Operands must be whole numbers (NULL otherwise); bit
//! positions count from 1 (the least significant bit) to 64, given as one number or an array of them.

use super::args::{arg, int, is_num, items, unknown, whole};
use super::{scalar, FnContext, FunctionDef, VARIADIC};
use crate::value::Value;
use crate::QueryError;

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    scalar("bitand", 2, VARIADIC, |a, _| fold(a, |x, y| x & y)),
    scalar("bitor", 2, VARIADIC, |a, _| fold(a, |x, y| x | y)),
    scalar("bitxor", 2, VARIADIC, |a, _| fold(a, |x, y| x ^ y)),
    scalar("bitnot", 1, 1, bitnot),
    scalar("bitshift", 2, 3, bitshift),
    scalar("bitset", 2, 2, |a, _| set_or_clear(a, true)),
    scalar("bitclear", 2, 2, |a, _| set_or_clear(a, false)),
    scalar("bittest", 2, 3, bittest),
    scalar("isbitset", 2, 3, bittest),
];

type Res = Result<Value, QueryError>;

fn fold(args: &[Value], op: fn(i64, i64) -> i64) -> Res {
    if let Some(v) = unknown(args, |_, v| whole(v).is_some()) {
        return Ok(v);
    }
    let mut values = args.iter().filter_map(whole);
    let first = values.next().unwrap_or(0);
    Ok(int(values.fold(first, op)))
}

fn bitnot(args: &[Value], _: &FnContext<'_>) -> Res {
    Ok(unknown(args, |_, v| whole(v).is_some()).unwrap_or_else(|| int(!whole(&args[0]).unwrap_or(0))))
}

/// BITSHIFT(n, shift [, rotate]): left for a positive shift, right (logical) for a negative one; shifting 64 or
/// more places gives 0 unless rotating, which wraps modulo 64.
fn bitshift(args: &[Value], _: &FnContext<'_>) -> Res {
    let ok = |i: usize, v: &Value| if i == 2 { v.as_bool().is_some() } else { whole(v).is_some() };
    if let Some(v) = unknown(args, ok) {
        return Ok(v);
    }
    let (n, shift) = (whole(&args[0]).unwrap_or(0) as u64, whole(&args[1]).unwrap_or(0));
    let rotate = args.get(2).and_then(Value::as_bool).unwrap_or(false);
    let bits = if rotate {
        n.rotate_left((shift & 63) as u32)
    } else if shift < 0 {
        u32::try_from(shift.unsigned_abs()).ok().and_then(|s| n.checked_shr(s)).unwrap_or(0)
    } else {
        u32::try_from(shift).ok().and_then(|s| n.checked_shl(s)).unwrap_or(0)
    };
    Ok(int(bits as i64))
}

/// The mask of bit positions given as a number or an array of numbers, each from 1 to 64.
fn positions(v: &Value) -> Option<u64> {
    let single;
    let list: &[Value] = match v {
        Value::Number(_) => {
            single = [v.clone()];
            &single
        }
        Value::Array(_) => items(v),
        _ => return None,
    };
    list.iter().try_fold(0u64, |mask, p| match whole(p) {
        Some(p @ 1..=64) => Some(mask | 1 << (p - 1)),
        _ => None,
    })
}

fn set_or_clear(args: &[Value], set: bool) -> Res {
    if let Some(v) = unknown(args, |i, v| if i == 0 { is_num(v) } else { is_num(v) || v.as_array().is_some() }) {
        return Ok(v);
    }
    let (Some(n), Some(mask)) = (whole(&args[0]), positions(&args[1])) else { return Ok(Value::Null) };
    let n = n as u64;
    Ok(int((if set { n | mask } else { n & !mask }) as i64))
}

/// BITTEST(n, positions [, all]): whether any (or, with `all`, every) of the bits is set.
fn bittest(args: &[Value], _: &FnContext<'_>) -> Res {
    let ok = |i: usize, v: &Value| match i {
        0 => whole(v).is_some(),
        1 => positions(v).is_some(),
        _ => v.as_bool().is_some(),
    };
    if let Some(v) = unknown(args, ok) {
        return Ok(v);
    }
    let (n, mask) = (whole(&args[0]).unwrap_or(0) as u64, positions(&args[1]).unwrap_or(0));
    let all = arg(args, 2).as_bool().unwrap_or(false);
    Ok(Value::Bool(if all { n & mask == mask } else { n & mask != 0 }))
}

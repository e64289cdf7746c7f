//! Collation: the total order of SQL++ values, and the comparison operators built on it.
//!
//! MISSING < NULL < false < true < numbers < strings < arrays < objects < binary. Numbers compare by value
//! (integers and floats mixed), strings by their UTF-8 bytes, arrays element by element and then by length,
//! objects first by their number of members and then member by member in name order (name, then value).

use std::cmp::Ordering;

use super::Value;

/// Compares two values in collation order.
pub fn collate(a: &Value, b: &Value) -> Ordering {
    let by_type = a.value_type().cmp(&b.value_type());
    if by_type != Ordering::Equal {
        return by_type;
    }
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => x.compare(*y),
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Binary(x), Value::Binary(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let o = collate(p, q);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let by_len = x.len().cmp(&y.len());
            if by_len != Ordering::Equal {
                return by_len;
            }
            for ((kx, vx), (ky, vy)) in x.iter().zip(y.iter()) {
                let o = kx.as_bytes().cmp(ky.as_bytes()).then_with(|| collate(vx, vy));
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        }
        // Same type and no payload (MISSING, NULL).
        _ => Ordering::Equal,
    }
}

/// The comparison behind `<`, `<=`, `>`, `>=` and BETWEEN (Couchbase's `Value.Compare`): MISSING if either side is
/// MISSING, NULL if either is NULL (MISSING first), otherwise the collation order, across types as well
/// (`1 < "a"` is true). Arrays and objects compare element by element (objects member by member in name order) and
/// give MISSING or NULL when they reach one before a difference: `[1, null] < [1, 2]` is NULL, `[0, null] < [1, 2]`
/// is true.
pub fn compare_for_operator(a: &Value, b: &Value) -> Result<Ordering, Value> {
    if a.is_missing() || b.is_missing() {
        return Err(Value::Missing);
    }
    if a.is_null() || b.is_null() {
        return Err(Value::Null);
    }
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let o = compare_for_operator(p, q)?;
                if o != Ordering::Equal {
                    return Ok(o);
                }
            }
            Ok(x.len().cmp(&y.len()))
        }
        (Value::Object(x), Value::Object(y)) => {
            let by_len = x.len().cmp(&y.len());
            if by_len != Ordering::Equal {
                return Ok(by_len);
            }
            // Names of both in order: the first name only one of them has makes the other the greater.
            let mut names: Vec<&String> = x.keys().chain(y.keys()).collect();
            names.sort_unstable_by(|p, q| p.as_bytes().cmp(q.as_bytes()));
            names.dedup();
            for name in names {
                let (Some(p), Some(q)) = (x.get(name), y.get(name)) else {
                    return Ok(if x.contains_key(name) { Ordering::Less } else { Ordering::Greater });
                };
                let o = compare_for_operator(p, q)?;
                if o != Ordering::Equal {
                    return Ok(o);
                }
            }
            Ok(Ordering::Equal)
        }
        _ => Ok(collate(a, b)),
    }
}

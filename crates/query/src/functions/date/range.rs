//! DATE_RANGE_MILLIS and DATE_RANGE_STR(start, end, part [, step]): the dates from `start` (included) towards
//! `end` (excluded) every `step` parts.
//!
//! As in Couchbase, the element count is estimated with DATE_DIFF first and more than 2^31 - 1 is a range error;
//! settee also refuses a result over 20 MiB (Couchbase's fallback limit) before building it, checks the size again
//! as it goes, and returns an empty array for a zero step (which loops forever in Couchbase 7.6).

use super::super::args::{
    arg, check_size, f64_of, is_num, is_str, num, range_error, str_of, unknown, whole, RANGE_LIMIT,
};
use super::arith::{date_add, date_diff};
use super::formats::closest;
use super::layout;
use super::time::DateTime;
use super::zone::Zone;
use crate::value::Value;
use crate::QueryError;

pub(super) fn date_range(args: &[Value], millis: bool) -> Result<Value, QueryError> {
    let ok = |i: usize, v: &Value| match i {
        0 | 1 if millis => is_num(v),
        0..=2 => is_str(v),
        _ => is_num(v),
    };
    if let Some(v) = unknown(args, ok) {
        return Ok(v);
    }
    let name = if millis { "DATE_RANGE_MILLIS" } else { "DATE_RANGE_STR" };
    let read = |v: &Value| {
        if millis {
            DateTime::from_millis(f64_of(v), Zone::LOCAL).map(|t| (t, None))
        } else {
            closest(str_of(v)).map(|(t, f)| (t, Some(f)))
        }
    };
    let (Some((start, format)), Some((end, _))) = (read(&args[0]), read(&args[1])) else { return Ok(Value::Null) };
    let step = match args.get(3) {
        None => 1,
        Some(n) => match whole(n) {
            Some(n) => n,
            None => return Ok(Value::Null),
        },
    };
    let (first, last) = (start.unix_nanos(), end.unix_nanos());
    if step == 0 || first == last || (first > last && step > 0) || (first < last && step < 0) {
        return Ok(Value::array(Vec::new()));
    }
    let part = str_of(arg(args, 2));
    let count = date_diff(&start, &end, part)?.unsigned_abs();
    if count > RANGE_LIMIT {
        return Err(range_error(name));
    }
    let write = |t: &DateTime| match &format {
        Some(f) => Value::from(layout::format(t, f)),
        None => num(t.to_millis()),
    };
    let element_size =
        if millis { 8 } else { 16 + layout::format(&start, format.as_deref().unwrap_or("")).len() as u64 };
    check_size(name, count.saturating_mul(element_size))?;
    let end_millis = end.to_millis();
    let before_end = |t: &DateTime| if step > 0 { t.to_millis() < end_millis } else { t.to_millis() > end_millis };
    let mut out = Vec::new();
    let mut size = 0u64;
    let mut push = |out: &mut Vec<Value>, t: &DateTime| -> Result<(), QueryError> {
        size += element_size;
        check_size(name, size)?;
        out.push(write(t));
        Ok(())
    };
    if part == "calendar_month" {
        // Each date from the start, so that month ends stay month ends.
        for i in 0i64.. {
            let Some(t) = date_add(&start, step.saturating_mul(i), part)? else { break };
            if !before_end(&t) {
                break;
            }
            push(&mut out, &t)?;
        }
    } else {
        let mut t = start;
        while before_end(&t) {
            push(&mut out, &t)?;
            match date_add(&t, step, part)? {
                Some(next) => t = next,
                None => break,
            }
        }
    }
    Ok(Value::array(out))
}

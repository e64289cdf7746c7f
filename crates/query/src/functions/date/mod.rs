//! Date and time functions: CLOCK_*, NOW_*, DATE_ADD/DIFF/DIFF_ABS/FORMAT/PART/RANGE/TRUNC_*, MILLIS*,
//! STR_TO_*, DURATION_TO_STR, STR_TO_DURATION, WEEKDAY_*, after Couchbase Server 7.6's func_date.go.
//!
//! Times are Unix instants in a zone (`time.rs`, hand-written proleptic Gregorian arithmetic). Strings are read
//! and written in Go reference layouts (`layout.rs`), `%` formats (`percent.rs`), "common" formats such as
//! `YYYY-MM-DD` (`common.rs`), or by example (`formats.rs` picks the kind); without a format, the default layouts
//! (ISO 8601 with or without a zone, fractional seconds, date only, time only) are tried. Parts, addition,
//! truncation and differences are in `arith.rs`, durations in `duration.rs`.
//!
//! All time comes from the `FnContext`: NOW_* from the statement's start time, CLOCK_* from its clock; nothing
//! here reads the system clock.
//!
//! Known gap: settee has no time zone database. UTC, the server's local zone (which settee takes to be UTC), fixed
//! offsets (`+05:30`, `-0800`, `GMT+5`) and the fixed IANA zones (UTC, GMT, Etc/GMT±N and their aliases) work; any
//! other IANA name (`America/New_York`, `Europe/London`, or an abbreviation Couchbase maps to one, such as `EST`)
//! makes the function return NULL, where Couchbase would convert.

mod arith;
mod common;
mod duration;
mod formats;
mod funcs;
mod layout;
mod percent;
mod range;
mod time;
mod zone;

use super::{scalar, volatile, FunctionDef};

/// Couchbase's default date format (util.DEFAULT_FORMAT).
pub(crate) const DEFAULT_FORMAT: &str = "2006-01-02T15:04:05.999Z07:00";

/// The date layout `%D` and `%x` stand for.
pub(crate) const SHORT_DATE_FORMAT: &str = "2006-01-02";

pub(super) static FUNCTIONS: &[FunctionDef] = &[
    volatile("clock_millis", 0, 0, funcs::clock_millis),
    volatile("clock_str", 0, 1, funcs::clock_str),
    volatile("clock_local", 0, 1, funcs::clock_str),
    volatile("clock_tz", 1, 2, funcs::clock_tz),
    volatile("clock_utc", 0, 1, funcs::clock_utc),
    volatile("now_millis", 0, 0, funcs::now_millis),
    volatile("now_str", 0, 1, funcs::now_str),
    volatile("now_local", 0, 1, funcs::now_str),
    volatile("now_tz", 1, 2, funcs::now_tz),
    volatile("now_utc", 0, 1, funcs::now_utc),
    scalar("date_add_millis", 3, 3, funcs::date_add_millis),
    scalar("date_add_str", 3, 3, funcs::date_add_str),
    scalar("date_diff_millis", 3, 3, |a, _| funcs::date_diff_millis(a, false)),
    scalar("date_diff_abs_millis", 3, 3, |a, _| funcs::date_diff_millis(a, true)),
    scalar("date_diff_str", 3, 3, |a, _| funcs::date_diff_str(a, false)),
    scalar("date_diff_abs_str", 3, 3, |a, _| funcs::date_diff_str(a, true)),
    scalar("date_format_str", 2, 3, funcs::date_format_str),
    scalar("date_part_millis", 2, 3, funcs::date_part_millis),
    scalar("date_part_str", 2, 2, funcs::date_part_str),
    scalar("date_range_millis", 3, 4, |a, _| range::date_range(a, true)),
    scalar("date_range_str", 3, 4, |a, _| range::date_range(a, false)),
    scalar("date_trunc_millis", 2, 2, funcs::date_trunc_millis),
    scalar("date_trunc_str", 2, 3, funcs::date_trunc_str),
    scalar("duration_to_str", 1, 2, |a, _| duration::duration_to_str(a)),
    scalar("str_to_duration", 1, 2, |a, _| duration::str_to_duration(a)),
    scalar("millis", 1, 2, funcs::str_to_millis),
    scalar("str_to_millis", 1, 2, funcs::str_to_millis),
    scalar("millis_to_str", 1, 2, funcs::millis_to_str),
    scalar("millis_to_local", 1, 2, funcs::millis_to_str),
    scalar("millis_to_utc", 1, 2, funcs::millis_to_utc),
    scalar("millis_to_zone_name", 2, 3, funcs::millis_to_zone_name),
    scalar("millis_to_tz", 2, 3, funcs::millis_to_zone_name),
    scalar("str_to_utc", 1, 3, funcs::str_to_utc),
    scalar("str_to_zone_name", 2, 4, funcs::str_to_zone_name),
    scalar("str_to_tz", 2, 4, funcs::str_to_zone_name),
    scalar("weekday_millis", 1, 2, funcs::weekday_millis),
    scalar("weekday_str", 1, 1, funcs::weekday_str),
];

//! Date parsing and formatting in each kind of format, against date_functions/case_func_date.json in
//! couchbase/query (the 7.6 version) and Couchbase's format documentation in func_date.go.

use super::*;

fn s(text: &str) -> String {
    format!("\"{text}\"")
}

fn millis(text: &str, format: &str) -> String {
    ev("str_to_millis", &[&s(text), &s(format)])
}

#[test]
fn str_to_millis_matches_couchbase_test_cases() {
    // Proves the STR_TO_MILLIS rows with common, % and default formats, year-0 times, and the row whose
    // 12-hour clock without am/pm fails.
    assert_eq!(ev("str_to_millis", &[&s("2015-01-01T16:00:00-08:00")]), "1420156800000");
    assert_eq!(millis("2015/01/01 16:00:00-08:00", "YYYY MM DD hh:mm:ssTZD"), "1420156800000");
    assert_eq!(millis("2015/01/01T16:00:00-08:00", "%Y/%m/%dT%T%z"), "1420156800000");
    assert_eq!(millis("00:00:00", "%I:%M:%S"), "null");
    assert_eq!(millis("00:00:00+0000", "%H:%M:%S%z"), "-62167219200000");
    assert_eq!(millis("00:00:00+0000", "HH24:MI:SSTZD"), "-62167219200000");
    assert_eq!(millis("Monday 12 pm, 1 MAR Z", "Day HH12 pm, DD MON TZD"), "-62161992000000");
    assert_eq!(millis("2021-06-25-14:48:42.123+00:00pm", "YYYY-MM-DD-hh:mm:ss.sTZDpp"), "1624632522123");
    assert_eq!(millis("2021-06-25-14:48:42.123+00:00pmJuneFri", "%C%y-%m-%d-%H:%M:%S.%N%z%P%B%a"), "1624632522123");
    assert_eq!(millis("4pm on 1st JaN 15 in +08:00", "%-I%P on %-d%f %^b %y in %z"), "1420099200000");
}

#[test]
fn single_element_formats_match_couchbase_test_cases() {
    // Proves every nvl2(str_to_millis(x, f), ...) row of case_func_date.json: which one-element formats accept
    // which text.
    let accepted = [
        ("30", "CC"),
        ("30", "YY"),
        ("3030", "YYYY"),
        ("06", "MM"),
        ("25", "DD"),
        ("12", "hh"),
        ("13", "hh"),
        ("12", "HH"),
        ("22", "mm"),
        ("11", "ss"),
        ("123", "s"),
        ("am", "pp"),
        ("AM", "pp"),
        ("Z", "TZD"),
        ("+0000", "TZD"),
        ("-08", "TZD"),
        ("-05:00", "TZD"),
        ("30", "%C"),
        ("30", "%y"),
        ("3030", "%Y"),
        ("06", "%m"),
        ("25", "%d"),
        ("12", "%H"),
        ("13", "%H"),
        ("12", "%I"),
        ("22", "%M"),
        ("11", "%S"),
        ("123", "%N"),
        ("am", "%P"),
        ("AM", "%p"),
        ("Z", "%z"),
        ("+0000", "%z"),
        ("-08", "%z"),
        ("-05:00", "%z"),
    ];
    for (text, format) in accepted {
        assert_ne!(millis(text, format), "null", "{text} with {format}");
    }
    for (text, format) in [("13", "HH"), ("zm", "pp"), ("XX", "pp"), ("13", "%I"), ("am", "%p"), ("AM", "%P")] {
        assert_eq!(millis(text, format), "null", "{text} with {format}");
    }
}

#[test]
fn default_layouts_cover_iso_8601_variants() {
    // Proves the default formats (_DATE_FORMATS and determineKnownFormat): zones as Z, +hh:mm, +hhmm and +hh, with
    // or without fractions of 1 to 9 digits, a space or T, date only, time only, other date separators.
    let same = [
        "2021-06-25T14:48:42.123Z",
        "2021-06-25T14:48:42.123+00:00",
        "2021-06-25 14:48:42.123+0000",
        "2021-06-25T14:48:42.123+00",
        "2021-06-25T14:48:42.123000Z",
        "2021-06-25T14:48:42.123000000+00:00",
        "2021-06-25T16:48:42.123+02:00",
        "2021-06-25T14:48:42.123",
        "2021/06/25 14:48:42.123Z",
        "2021.06.25T14:48:42.123 Z",
    ];
    for text in same {
        assert_eq!(ev("str_to_millis", &[&s(text)]), "1624632522123", "{text}");
    }
    assert_eq!(ev("str_to_millis", &[&s("2021-06-25")]), "1624579200000");
    assert_eq!(ev("str_to_millis", &[&s("2021-06-25T14:48")]), "1624632480000");
    assert_eq!(ev("str_to_millis", &[&s("14:48:42")]), "-62167165878000");
    for bad in ["2021-13-01", "2021-02-30", "25/06/2021", "2021-06-25T25:00:00", "2021-06-25T14:48:42+15:00", "x"] {
        assert_eq!(ev("str_to_millis", &[&s(bad)]), "null", "{bad}");
    }
}

#[test]
fn go_layouts_format_like_time_format() {
    // Proves Go reference-layout formatting: names, 12-hour clocks, padded and unpadded fields, day of year,
    // fractions trimmed (.999) or kept (.000), and the zone spellings.
    let t = "1624632522123";
    let cases = [
        ("Monday, January 2 2006", "Friday, June 25 2021"),
        ("Mon Jan _2 3:04PM", "Fri Jun 25 2:48PM"),
        ("06/1/2 03:4:5 pm", "21/6/25 02:48:42 pm"),
        ("2006 002 __2", "2021 176 176"),
        ("Jan 15:04:05.000000", "Jun 14:48:42.123000"),
        ("Jan 15:04:05.999999", "Jun 14:48:42.123"),
        ("Jan 15:04:05,000", "Jun 14:48:42,123"),
        ("-07:00 -0700 -07 Z07:00 MST", "+00:00 +0000 +00 Z UTC"),
    ];
    for (layout, want) in cases {
        assert_eq!(ev("millis_to_utc", &[t, &s(layout)]), s(want), "{layout}");
    }
    assert_eq!(ev("millis_to_tz", &[t, &s("-05:30"), &s("Z07:00 MST -070000")]), s("-05:30 -0530 -053000"));
    assert_eq!(ev("millis_to_utc", &["1624579200000", &s("Jan 15:04:05.999")]), s("Jun 00:00:00"));
    // Like Couchbase, a layout that starts with "15" is taken for an example, and the example's own layout used.
    assert_eq!(ev("millis_to_utc", &["1624632522123", &s("15:04:05.000000")]), s("14:48:42.123000"));
}

#[test]
fn percent_formats_write_every_directive() {
    // Proves timeToStrPercentFormat's directives on 2021-06-25T14:48:42.123Z (a Friday) and 2021-01-03 (a Sunday),
    // with the padding modifiers and widths, and its text for unknown or malformed directives.
    let t = "1624632522123";
    let cases = [
        ("%F", "2021-06-25T14:48:42.123Z"),
        ("%D %x", "2021-06-25 2021-06-25"),
        ("%C%y %m/%d", "2021 06/25"),
        ("%B %b %^B %^b", "June Jun JUNE JUN"),
        ("%A %a %^a", "Friday Fri FRI"),
        ("%d%f %-d%^f", "25th 25TH"),
        ("%I%p %l%P", "02PM %l!pm"),
        ("%r|%R|%T|%X", "02:48:42 PM|14:48|14:48:42|14:48:42"),
        ("%N %n", "123000000 123"),
        ("%s %^s", "1624632522 1624632522123000000"),
        ("%z %:z %::z %:::z", "+0000 +00:00 +00:00:00 +00"),
        ("%Z %-Z %^Z", "UTC Z UTC"),
        ("%V %G %j %q %u %w %U %W", "25 2021 176 2 5 5 25 25"),
        ("%_5Y|%-m|%03d|%5H", " 2021|6|025|00014"),
        ("%%", "%"),
        ("%k", "!(Unknown format: 'k')"),
    ];
    for (format, want) in cases {
        let want = want.replace("%l!pm", "!(Unknown format: 'l')pm");
        assert_eq!(ev("millis_to_utc", &[t, &s(format)]), s(&want), "{format}");
    }
    assert_eq!(ev("millis_to_utc", &[t, &s("%:Y")]), s("!(Invalid format: '%:Y')"));
    assert_eq!(ev("millis_to_utc", &[t, &s("100%")]), s("100%"));
    assert_eq!(ev("millis_to_utc", &["1609632000000", &s("%U %W %u")]), s("1 0 7"));
    assert_eq!(ev("millis_to_utc", &["3723500", &s("%# %@")]), s("1:02:03 1:02:03.500"));
}

#[test]
fn common_formats_write_every_element() {
    // Proves timeToStrCommonFormat's elements, their case variants, and literal text around them.
    let t = "1624632522123";
    let cases = [
        ("YYYY-MM-DD hh:mm:ss.s", "2021-06-25 14:48:42.123"),
        ("CC YY HH HH12 HH24 MI SS sss", "20 21 02 02 14 48 42 123000000"),
        ("MONTH Month month MON Mon mon", "JUNE June june JUN Jun jun"),
        ("DAY Day day DY Dy dy", "FRIDAY Friday friday FRI Fri fri"),
        ("PP pp AM am", "PM pm PM pm"),
        ("TZD TZN TZF", "Z UTC UTC"),
    ];
    for (format, want) in cases {
        assert_eq!(ev("millis_to_utc", &[t, &s(format)]), s(want), "{format}");
    }
    assert_eq!(ev("millis_to_tz", &[t, &s("-03:30"), &s("hh:mm TZD TZN")]), s("11:18 -03:30 -0330"));
}

#[test]
fn example_formats_pick_the_layout_of_their_shape() {
    // Proves formats given by example (digits other than Go's reference values) select the default layout that
    // parses them, both to write and to read, and that DATE_TRUNC_STR and STR_TO_UTC keep the input's shape.
    assert_eq!(ev("millis_to_utc", &["1624632522123", &s("1111-11-11T11:11:11Z")]), s("2021-06-25T14:48:42Z"));
    assert_eq!(ev("millis_to_utc", &["1624632522123", &s("9999/12/31")]), s("2021/06/25"));
    assert_eq!(ev("str_to_millis", &[&s("2021-06-25 14:48:42"), &s("1999-12-31 23:59:59")]), "1624632522000");
    assert_eq!(ev("str_to_utc", &[&s("2021-06-25T16:48:42.5+02:00")]), s("2021-06-25T14:48:42.5Z"));
    assert_eq!(ev("date_format_str", &[&s("2021-06-25"), &s("%d.%m.%Y"), &s("2006-01-02")]), "null");
    assert_eq!(ev("date_format_str", &[&s("25.06.2021"), &s("%d.%m.%Y"), &s("2006-01-02")]), s("2021-06-25"));
}

#[test]
fn zones_parse_in_every_spelling() {
    // Proves gatherZone's spellings: Z, +hh, +hhmm, +hh:mm, +hhmmss and +hh:mm:ss (seconds ignored), GMT+h, and
    // the bounds of -12..+14 hours; an offset of -01:00 is an offset, not "no zone" as in Couchbase.
    let at = |zone: &str| {
        ev("str_to_millis", &[&s(&format!("2021-06-25 12:00:00 {zone}")), &s("2006-01-02 15:04:05 Z07:00:00")])
    };
    assert_eq!(at("+01:00:00"), "1624618800000");
    assert_eq!(ev("millis_to_tz", &["0", &s("+0130")]), s("1970-01-01T01:30:00+01:30"));
    assert_eq!(ev("millis_to_tz", &["0", &s("-01")]), s("1969-12-31T23:00:00-01:00"));
    assert_eq!(ev("millis_to_tz", &["0", &s("-00:30")]), s("1969-12-31T23:30:00-00:30"));
    assert_eq!(ev("millis_to_tz", &["0", &s("GMT+5"), &s("MST 15")]), s("GMT+5 05"));
    assert_eq!(ev("millis_to_tz", &["0", &s("+15:00")]), "null");
    assert_eq!(ev("millis_to_tz", &["0", &s("-13")]), "null");
    assert_eq!(ev("millis_to_tz", &["0", &s("Z")]), s("1970-01-01T00:00:00Z"));
    assert_eq!(ev("millis_to_tz", &["0", &s("Local")]), s("1970-01-01T00:00:00Z"));
}

#[test]
fn extreme_and_fractional_millis() {
    // Proves negative years and fractional milliseconds convert both ways, and that values beyond the supported
    // range (or NaN) give NULL instead of overflowing.
    assert_eq!(ev("millis_to_utc", &["-100000000000000"]), s("-1199-02-15T14:13:20Z"));
    assert_eq!(ev("millis_to_utc", &["1.5", &s("15:04:05.000000")]), s("00:00:00.001500"));
    assert_eq!(ev("millis_to_utc", &["1e30"]), "null");
    assert_eq!(call("millis_to_utc", &[call("nan", &[]).unwrap()]).unwrap(), Value::Null);
    assert_eq!(ev("date_part_millis", &["-1", &s("year")]), "1969");
    assert_eq!(ev("str_to_millis", &[&s("1969-12-31T23:59:59.9995Z")]), "0");
}

#[test]
fn missing_and_null_arguments() {
    // Proves the argument rules of func_date.go: MISSING first, NULL for wrong types, and STR_TO_MILLIS checking
    // its date before its format.
    assert_eq!(ev("date_add_str", &["MISSING", "null", "1"]), "MISSING");
    assert_eq!(ev("date_add_str", &[&s("2021-01-01"), &s("1"), &s("day")]), "null");
    assert_eq!(ev("str_to_millis", &["1", "MISSING"]), "null");
    assert_eq!(ev("str_to_millis", &[&s("2021-01-01"), "MISSING"]), "MISSING");
    assert_eq!(ev("millis_to_str", &["1", "2"]), "null");
    assert_eq!(ev("date_trunc_str", &[&s("2021-01-01"), &s("day"), "MISSING"]), "MISSING");
    assert_eq!(ev("weekday_str", &["1"]), "null");
    assert_eq!(ev("str_to_zone_name", &[&s("2021-01-01"), "MISSING"]), "MISSING");
}

#[test]
fn huge_percent_widths_are_capped_instead_of_panicking() {
    // Regression: a width of millions (found by the robustness proptest) panicked in the formatter and would have
    // built a string of that size; widths are now capped at 64.
    let out = call("millis_to_utc", &[val("0"), val(&s("%9992006Y"))]).unwrap();
    assert_eq!(out.as_str().map(str::len), Some(64));
    // Parsing ignores widths, as Couchbase does.
    assert_eq!(ev("str_to_millis", &[&s("1970"), &s("%9992006Y")]), "0");
}

#[test]
fn a_multibyte_character_after_percent_is_an_unknown_directive() {
    // Regression: a non-ASCII character as a % conversion (found by the robustness proptest) left the formatter in
    // the middle of the character and panicked on the next slice.
    assert_eq!(ev("millis_to_utc", &["0", &s("%é%Y")]), s("!(Unknown format: 'é')1970"));
    assert_eq!(ev("str_to_millis", &[&s("x"), &s("%é")]), "null");
}

//! SQL++ parsing of arbitrary text never panics or overflows the stack, and every statement that parses prints as
//! text that parses back to the same statement.
//!
//! Seeds: `fuzz/seeds/sql_parse/` (run `cargo +nightly fuzz run sql_parse fuzz/seeds/sql_parse`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(statement) = settee_query::parse(text) {
        let printed = statement.to_string();
        assert_eq!(settee_query::parse(&printed).as_ref(), Ok(&statement), "{printed}");
    }
    if let Ok(expr) = settee_query::parse_expression(text) {
        // Couchbase's normalised form is valid SQL++ too.
        let normalised = expr.to_string();
        assert!(settee_query::parse_expression(&normalised).is_ok(), "{normalised}");
    }
});

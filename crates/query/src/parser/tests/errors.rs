use proptest::prelude::*;

use super::*;

#[test]
fn syntax_errors_name_the_line_column_context_and_token() {
    // Proves Couchbase's layout: `syntax error - line L, column C, near '<context>', at: <token>`, the context
    // being what precedes the token on its line.
    assert_eq!(err("SLECT name FROM b"), "syntax error - line 1, column 7, near 'SLECT ', at: name");
    assert_eq!(err("SELECT a\nFROM b c d"), "syntax error - line 2, column 10, near 'FROM b c ', at: d");
    assert_eq!(
        err("SELECT a, b, c FROM x WHERE AND"),
        "syntax error - line 1, column 29, near '..., b, c FROM x WHERE ', at: AND (reserved word)"
    );
    assert_eq!(err(")"), "syntax error - line 1, column 1, at: )");
}

#[test]
fn reserved_words_are_marked_and_end_of_input_said() {
    // Proves the `(reserved word)` suffix for keywords (VALUE cannot be a field name) and the end-of-input form.
    assert_eq!(
        err("SELECT value FROM b"),
        "syntax error - line 1, column 14, near 'SELECT value ', at: FROM (reserved word)"
    );
    assert_eq!(err("SELECT * FROM"), "syntax error - at end of input");
    assert_eq!(err("   \n  SELECT a FROM  "), "syntax error - at end of input");
}

#[test]
fn not_n1ql_is_a_3000_with_the_scanners_message() {
    // Proves the Python SDK's test_bad_query input fails with 3000 and the scanner's text for the open quote.
    assert_eq!(
        err("I'm not N1QL!"),
        "syntax error: invalid quoted string - missing closing quote - line 1, column 2, near 'I', at: 'm not N1QL!"
    );
}

#[test]
fn a_doubled_backtick_path_is_a_3000() {
    // Proves the statement test_drop_secondary_indexes builds (a quoted path quoted once more) fails with 3000,
    // and that a really unterminated identifier does too, with the scanner's text.
    let text = "SELECT fld1, fld2 FROM ``default`.`test-scope`.`test-collection`` WHERE fld1=1 AND fld2=2 LIMIT 1";
    assert!(err(text).starts_with("syntax error - line 1, column 33"), "{}", err(text));
    let e = err("SELECT * FROM `default`.`s`.`_default");
    assert!(
        e.starts_with("syntax error: invalid escaped identifier - missing closing quote - line 1, column 29"),
        "{e}"
    );
}

#[test]
fn scanner_errors_explain_bad_tokens() {
    // Proves invalid numbers and escapes carry the scanner's reason.
    assert!(err("SELECT 1abc").starts_with("syntax error: invalid number - line 1, column 8"));
    assert!(err(r#"SELECT "\q""#).starts_with("syntax error: invalid quoted string - invalid escape sequence"));
    assert!(err("SELECT `a`i FROM b").contains("case-insensitive identifiers are not supported"));
}

#[test]
fn an_expression_alone_is_invalid_input() {
    // Proves an input that is a complete expression but no statement is refused as Couchbase refuses it.
    assert_eq!(err("1 + 1"), "Invalid input.");
    assert_eq!(err("(SELECT 1)"), "Invalid input.");
    assert!(parse("SELECT 1;;").is_ok());
    assert_eq!(err("1;"), "syntax error - line 1, column 2, near '1', at: ;");
}

#[test]
fn deep_nesting_is_refused_before_the_stack_runs_out() {
    // Proves 512 levels of parentheses, NOTs, subqueries or a 10,000-term chain fail with a syntax error (no stack
    // overflow, no panic), while the deepest accepted nesting still parses, prints and parses back on a 2 MiB
    // stack (the size of a tokio blocking thread).
    for text in [
        format!("SELECT {}1{}", "(".repeat(512), ")".repeat(512)),
        format!("SELECT {}1", "NOT ".repeat(512)),
        format!("SELECT {}1{}", "(SELECT ".repeat(512), ")".repeat(512)),
        format!("SELECT 1{}", " + 1".repeat(10_000)),
        format!("SELECT 1 {}", "UNION SELECT 1 ".repeat(10_000)),
        format!("SELECT * FROM a{}", " JOIN b ON KEYS c".repeat(10_000)),
        format!("SELECT * FROM a{}", ", b".repeat(10_000)),
    ] {
        let e = err(&text);
        assert!(e.starts_with("syntax error - statement too deeply nested (near line 1, column"), "{e}");
    }
    let handle = std::thread::Builder::new().stack_size(2 << 20).spawn(|| {
        let patterns: [fn(usize) -> String; 4] = [
            |n| format!("SELECT {}1{}", "(".repeat(n), ")".repeat(n)),
            |n| format!("SELECT {}1{}", "(SELECT [{'a': -(".repeat(n), ")}])".repeat(n)),
            |n| format!("SELECT 1 FROM {}b{}", "(SELECT 1 FROM ".repeat(n), ") AS x".repeat(n)),
            |n| format!("SELECT {}1{}", "CASE WHEN ANY v IN ".repeat(n), " SATISFIES v END THEN 1 END".repeat(n)),
        ];
        for make in patterns {
            let deepest = (1..).map_while(|n| parse(&make(n)).ok()).last().expect("one level parses");
            assert_eq!(parse(&deepest.to_string()).as_ref(), Ok(&deepest));
        }
    });
    handle.expect("thread").join().expect("no stack overflow");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,80}") {
        // Proves any text gives a statement or an error, never a panic.
        let _ = parse(&text);
        let _ = parse_expression(&text);
    }

    #[test]
    fn sql_shaped_text_never_panics(words in prop::collection::vec(prop::sample::select(vec![
        "SELECT", "FROM", "WHERE", "a", "b.c", "(", ")", "[", "]", "{", "}", ",", ":", ".", "*", "=", "AND", "NOT",
        "IN", "BETWEEN", "LIKE", "IS", "NULL", "MISSING", "1", "'s'", "\"t\"", "`u`", "$p", "?", "UNION", "JOIN",
        "ON", "KEYS", "KEY", "FOR", "END", "ANY", "SATISFIES", "ARRAY", "CASE", "WHEN", "THEN", "ELSE", "USE",
        "INDEX", "CREATE", "DROP", "INSERT", "INTO", "VALUES", "UPDATE", "SET", "UNSET", "DELETE", "MERGE",
        "USING", "WITH", "AS", "RAW", "DISTINCT", "ORDER", "BY", "LIMIT", "OFFSET", "GROUP", "LET", "-", "||",
        "EXISTS", "PRIMARY", "BUILD", "EXPLAIN", "PREPARE", "EXECUTE", ";", "/*", "*/", "--", "``", "`",
    ]), 0..40)) {
        // Proves token soups built from the grammar's own words never panic the parser, and that whatever of them
        // parses prints back to an equal statement.
        let text = words.join(" ");
        if let Ok(statement) = parse(&text) {
            let printed = statement.to_string();
            prop_assert_eq!(parse(&printed), Ok(statement), "{}", printed);
        }
        let _ = parse_expression(&text);
    }
}

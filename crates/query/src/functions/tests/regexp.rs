use super::*;

#[test]
fn regexp_functions_match_couchbase_test_cases() {
    // Proves the results of string_functions/case_str.json in couchbase/query.
    assert_eq!(ev("regexp_contains", &[r#""Thisisabigsubquery""#, r#""query""#]), "true");
    assert_eq!(ev("regexp_like", &[r#""Thisisabigsubquery""#, r#""query%""#]), "false");
    assert_eq!(ev("regexp_like", &[r#""query""#, r#""query""#]), "true");
    assert_eq!(ev("regexp_like", &[r#""query""#, r#""query.*""#]), "true");
    assert_eq!(ev("regexp_position", &[r#""Thisisabigsubquery""#, r#""query""#]), "13");
    assert_eq!(ev("regexp_position1", &[r#""tablet""#, r#""ab?""#]), "2");
    let text = r#""Thisisaqueryisasubqandisnotisnull""#;
    assert_eq!(ev("regexp_replace", &[text, r#""is""#, r#""IS""#]), r#""ThISISaqueryISasubqandISnotISnull""#);
    assert_eq!(ev("regexp_replace", &[text, r#""is""#, r#""IS""#, "4"]), r#""ThISISaqueryISasubqandISnotisnull""#);
    assert_eq!(
        ev("regexp_replace", &[r#""esgFSdfa3rjs84tha5gref4""#, r#""[a-z]""#, r#""9""#]),
        r#""999FS999399984999599994""#
    );
}

#[test]
fn regexp_like_wraps_the_pattern_without_grouping() {
    // Proves Couchbase's `"^" + pattern + "$"` (func_regexp.go): "a|b" means "^a|b$", so "xb" matches.
    assert_eq!(ev("regexp_like", &[r#""xb""#, r#""a|b""#]), "true");
    assert_eq!(ev("regexp_like", &[r#""ab""#, r#""a""#]), "false");
}

#[test]
fn perl_classes_and_word_boundaries_are_ascii_as_in_go() {
    // Proves the Go RE2 meaning of \d, \w, \s and \b survives translation: Arabic-Indic digits and accented letters
    // are not matched, inside and outside brackets; \Q...\E quotes.
    assert_eq!(ev("regexp_contains", &[r#""٣""#, r#""\\d""#]), "false");
    assert_eq!(ev("regexp_contains", &[r#""é""#, r#""^\\w$""#]), "false");
    assert_eq!(ev("regexp_contains", &[r#""a_1""#, r#""^[\\w]+$""#]), "true");
    assert_eq!(ev("regexp_contains", &[r#""x-y""#, r#""[\\d-]""#]), "true");
    assert_eq!(ev("regexp_matches", &[r#""é b""#, r#""\\b\\w""#]), r#"["b"]"#);
    assert_eq!(ev("regexp_contains", &[r#""1+1=2""#, r#""\\Q1+1\\E=""#]), "true");
    assert_eq!(ev("regexp_contains", &[r#""a]b""#, r#""[]]""#]), "true");
    assert_eq!(ev("regexp_contains", &[r#""7""#, r#""[[:digit:]]""#]), "true");
}

#[test]
fn replace_takes_the_replacement_literally_and_counts_only_positive_limits() {
    // Proves ReplaceAllLiteralString semantics ($1 is not expanded) and that n <= 0 replaces nothing, while a
    // fractional count is NULL (func_regexp.go).
    assert_eq!(ev("regexp_replace", &[r#""abc""#, r#""(b)""#, r#""$1$1""#]), r#""a$1$1c""#);
    assert_eq!(ev("regexp_replace", &[r#""aaa""#, r#""a""#, r#""b""#, "0"]), r#""aaa""#);
    assert_eq!(ev("regexp_replace", &[r#""aaa""#, r#""a""#, r#""b""#, "-1"]), r#""aaa""#);
    assert_eq!(ev("regexp_replace", &[r#""aaa""#, r#""a""#, r#""b""#, "1.5"]), "null");
    assert_eq!(ev("regexp_replace", &[r#""aaa""#, r#""a""#, r#""b""#, "2"]), r#""bba""#);
}

#[test]
fn matches_and_split_follow_couchbase_edge_rules() {
    // Proves REGEXP_MATCHES lists every match and REGEXP_SPLIT skips a leading empty match, drops nothing after a
    // final match, and gives NULL when nothing matches (an empty Go slice written as null).
    assert_eq!(ev("regexp_matches", &[r#""a1b22c333""#, r#""[0-9]+""#]), r#"["1","22","333"]"#);
    assert_eq!(ev("regexp_matches", &[r#""abc""#, r#""[0-9]""#]), "null");
    assert_eq!(ev("regexp_split", &[r#""a,b,,c""#, r#"",""#]), r#"["a","b","","c"]"#);
    assert_eq!(ev("regexp_split", &[r#"",a""#, r#"",""#]), r#"["","a"]"#);
    assert_eq!(ev("regexp_split", &[r#""a,b,""#, r#"",""#]), r#"["a","b"]"#);
    assert_eq!(ev("regexp_split", &[r#""abc""#, r#""x""#]), "null");
}

#[test]
fn missing_wins_over_null_and_bad_patterns_are_errors() {
    // Proves the argument rules (MISSING first, then NULL for non-strings) and that a pattern that does not compile
    // fails the evaluation instead of returning a value.
    assert_eq!(ev("regexp_contains", &["MISSING", "1"]), "MISSING");
    assert_eq!(ev("regexp_contains", &["1", r#""a""#]), "null");
    assert_eq!(ev("regexp_replace", &[r#""a""#, r#""a""#, r#""b""#, "MISSING"]), "MISSING");
    assert_eq!(ev("regexp_replace", &[r#""a""#, r#""a""#, r#""b""#, r#""1""#]), "null");
    assert!(ev("regexp_contains", &[r#""a""#, r#""(""#]).starts_with("ERROR: Invalid regular expression"));
}

#[test]
fn the_pattern_cache_stays_bounded() {
    // Proves the per-thread cache never holds more than its limit however many distinct patterns arrive.
    for i in 0..500 {
        assert_eq!(ev("regexp_contains", &[r#""x""#, &format!("\"x{{0,{i}}}\"")]), "true");
    }
    assert!(crate::functions::regexp::cached_patterns() <= 64);
}

#[test]
fn results_that_would_explode_are_refused() {
    // Proves REGEXP_REPLACE checks the size an empty-matching pattern would produce, and REGEXP_MATCHES and
    // REGEXP_SPLIT count their pieces, before building anything.
    let text = format!("\"{}\"", "a".repeat(10_000));
    let long = format!("\"{}\"", "b".repeat(5_000));
    assert!(ev("regexp_replace", &[&text, r#""""#, &long]).starts_with("ERROR: Size of REGEXP_REPLACE()"));
    assert_eq!(ev("regexp_replace", &[r#""ab""#, r#""""#, r#""-""#]), r#""-a-b-""#);
    let million = format!("\"{}\"", "a".repeat(1_000_000));
    assert!(ev("regexp_matches", &[&million, r#"".""#]).starts_with("ERROR: Size of REGEXP_MATCHES()"));
    assert!(ev("regexp_split", &[&million, r#""""#]).starts_with("ERROR: Size of REGEXP_SPLIT()"));
}

use super::*;

#[test]
fn bit_functions_match_couchbase_test_cases() {
    // Proves every statement of bitwise_functions/case_bitwise.json in couchbase/query.
    let cases: &[(&str, &[&str], &str)] = &[
        ("bitand", &["1", "3"], "1"),
        ("bitand", &["1", "3", "5", "8"], "0"),
        ("bitand", &["-1", "-3"], "-3"),
        ("bitand", &["-1", "MISSING"], "MISSING"),
        ("bitand", &["-1.0", "-3"], "-3"),
        ("bitand", &["-1.1", "-3"], "null"),
        ("bitor", &["1", "3"], "3"),
        ("bitor", &["1", "3", "5", "8"], "15"),
        ("bitor", &["-1", "-3"], "-1"),
        ("bitor", &["-1.1", "-3"], "null"),
        ("bitxor", &["1", "3"], "2"),
        ("bitxor", &["1", "3", "5", "8"], "15"),
        ("bitxor", &["-1", "-3"], "2"),
        ("bitnot", &["\"a\""], "null"),
        ("bitnot", &["1"], "-2"),
        ("bitnot", &["1.0"], "-2"),
        ("bitnot", &["0"], "-1"),
        ("bitnot", &["-1.0"], "0"),
        ("bitnot", &["1.1"], "null"),
        ("bitshift", &["1", "1", "false"], "2"),
        ("bitshift", &["1", "-1", "false"], "0"),
        ("bitshift", &["-1", "1", "false"], "-2"),
        ("bitshift", &["-1", "-21", "false"], "8796093022207"),
        ("bitshift", &["512", "-6", "false"], "8"),
        ("bitshift", &["-1", "-64", "false"], "0"),
        ("bitshift", &["-1", "-64", "true"], "-1"),
        ("bitshift", &["1", "70", "true"], "64"),
        ("bitset", &["3", "1"], "3"),
        ("bitset", &["3", "[3]"], "7"),
        ("bitset", &["3", "-1"], "null"),
        ("bitset", &["3", "[3,4]"], "15"),
        ("bitclear", &["15", "[1,2]"], "12"),
        ("bitclear", &["3", "1"], "2"),
        ("bittest", &["3", "[1,3]", "true"], "false"),
        ("bittest", &["3", "[1,3]", "false"], "true"),
        ("bittest", &["3", "2"], "true"),
        ("bittest", &["3", "3", "false"], "false"),
        ("bittest", &["-3", "61"], "true"),
    ];
    for (name, args, want) in cases {
        assert_eq!(ev(name, args), *want, "{name}{args:?}");
    }
    let set = call("bitset", &[val("3"), val("17")]).unwrap();
    assert_eq!(call("bitshift", &[set, val("-8")]).unwrap().to_json_string(), "256");
}

#[test]
fn bad_positions_and_flags_are_null() {
    // Proves positions outside 1..64, non-integer positions and a non-boolean flag give NULL, MISSING first.
    assert_eq!(ev("bitset", &["1", "65"]), "null");
    assert_eq!(ev("bitset", &["1", "[1, \"a\"]"]), "null");
    assert_eq!(ev("bittest", &["1", "1", "1"]), "null");
    assert_eq!(ev("bitshift", &["1", "1", "\"x\""]), "null");
    assert_eq!(ev("bitshift", &["null", "MISSING"]), "MISSING");
    assert_eq!(ev("bitshift", &["1", "200"]), "0");
}

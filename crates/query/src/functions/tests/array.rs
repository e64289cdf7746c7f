use super::*;

#[test]
fn array_functions_match_couchbase_test_cases() {
    // Proves the constant statements of array_functions/case_func_array.json in couchbase/query.
    let cases: &[(&str, &[&str], &str)] = &[
        ("array_contains_all", &["[1,2,3]", "[1,2,3,4]"], "false"),
        ("array_contains_all", &["[1,2,3]", "[1,2]"], "true"),
        ("array_contains_any", &["[1,2,3]", "[1,2,3,4]"], "true"),
        ("array_contains_any", &["[1,2,3]", "[9,8]"], "false"),
        ("array_ifnull", &[r#"[null, null, null, "append", "avg", null, "max"]"#], r#""append""#),
        ("array_insert", &["[1,2,3]", "0", "0"], "[0,1,2,3]"),
        ("array_insert", &["[1,2,3]", "1", "0"], "[1,0,2,3]"),
        ("array_insert", &["[1,2,3]", "3", "0"], "[1,2,3,0]"),
        ("array_insert", &["[]", "0", "0"], "[0]"),
        ("array_insert", &["[1,2,3]", "0", r#"["a","b"]"#], r#"[["a","b"],1,2,3]"#),
        ("array_insert", &["[1,2,3]", "0", "MISSING"], "MISSING"),
        ("array_insert", &["MISSING", "0", "0"], "MISSING"),
        ("array_insert", &["[]", "MISSING", "0"], "MISSING"),
        ("array_insert", &["1", "0", "0"], "null"),
        ("array_insert", &["[]", "-1", "0"], "null"),
        ("array_insert", &["[]", "1.5", "0"], "null"),
        ("array_insert", &["[]", "23", "0"], "null"),
        ("array_flatten", &[r#"[0, ["one"], [[2]], [[[3]]]]"#, "0"], r#"[0,["one"],[[2]],[[[3]]]]"#),
        ("array_flatten", &[r#"[0, ["one"], [[2]], [[[3]]]]"#, "1"], r#"[0,"one",[2],[[3]]]"#),
        ("array_flatten", &[r#"[0, ["one"], [[2]], [[[3]]]]"#, "2"], r#"[0,"one",2,[3]]"#),
        ("array_flatten", &[r#"[0, ["one"], [[2]], [[[3]]]]"#, "3"], r#"[0,"one",2,3]"#),
        (
            "array_flatten",
            &[r#"[0, ["one","a"], ["b",[2],"c"], [[[3,null]]]]"#, "-1"],
            r#"[0,"one","a","b",2,"c",3,null]"#,
        ),
        ("array_flatten", &[r#""something""#, "-1"], "null"),
        ("array_length", &[r#"[null, null, null, "append", "avg", null, "max"]"#], "7"),
        ("array_range", &["-3", "10", "2"], "[-3,-1,1,3,5,7,9]"),
        ("array_range", &["-3", "10"], "[-3,-2,-1,0,1,2,3,4,5,6,7,8,9]"),
        ("array_repeat", &[r#""N1ql""#, "-1"], "null"),
        ("array_repeat", &[r#""N1ql""#, "0"], "[]"),
        ("array_repeat", &[r#""N1ql""#, "3"], r#"["N1ql","N1ql","N1ql"]"#),
        ("array_repeat", &[r#"["N1ql",4]"#, "3"], r#"[["N1ql",4],["N1ql",4],["N1ql",4]]"#),
        (
            "array_replace",
            &[r#"["2010","2011",2012,2013,"2013"]"#, r#""2013""#, "[2013,2014]"],
            r#"["2010","2011",2012,2013,[2013,2014]]"#,
        ),
        ("array_swap", &["[1,2,3,4]", "0", "0"], "[1,2,3,4]"),
        ("array_swap", &["[1,2,3,4]", "-5", "5"], "null"),
        ("array_swap", &["[1,2,3,4]", "-1", "-4"], "[4,2,3,1]"),
        ("array_swap", &["[1,2,3,4]", "0.5", "5"], "null"),
        ("array_swap", &["[1,2,3,4]", "0", "-4"], "[1,2,3,4]"),
        ("array_swap", &[r#"["Tom","Bob","Sam","Alice"]"#, "5", "MISSING"], "MISSING"),
        (
            "array_swap",
            &[r#"["Tom","Bob","Sam","Alice",[1,2,3,4]]"#, "1", "4"],
            r#"["Tom",[1,2,3,4],"Sam","Alice","Bob"]"#,
        ),
        ("array_move", &["[1,2,3,4]", "0", "0"], "[1,2,3,4]"),
        ("array_move", &["[1,2,3,4]", "-5", "5"], "null"),
        ("array_move", &["[1,2,3,4]", "0.5", "5"], "null"),
        ("array_move", &["[1,2,3,4]", "0", "-4"], "[1,2,3,4]"),
        ("array_move", &[r#"["Tom","Bob","Sam","Alice"]"#, "MISSING", "5"], "MISSING"),
        (
            "array_move",
            &[r#"["Tom","Bob","Sam","Alice",[1,2,3,4]]"#, "1", "4"],
            r#"["Tom","Sam","Alice",[1,2,3,4],"Bob"]"#,
        ),
        ("array_except", &["[1,2,3,4,7,8,9]", "[7,8,9,10]"], "[1,2,3,4]"),
        ("array_except", &["[1,2,3,4,7,8,9]", "[1,2,3,4,7,8,9]"], "[]"),
        ("array_except", &["[1,2,3,4]", "[]"], "[1,2,3,4]"),
        ("array_except", &["MISSING", "[2,3]"], "MISSING"),
        ("array_except", &["null", "[2,3]"], "null"),
        ("array_binary_search", &["[1,2,3,4]", "4"], "3"),
        ("array_binary_search", &["[1,2,3,4]", "1"], "0"),
        ("array_binary_search", &["[1,2,3,4]", "5"], "-1"),
        ("array_binary_search", &["[1,2,3,4]", "MISSING"], "-1"),
        ("array_binary_search", &["[null,2,3,4]", "null"], "0"),
        ("array_binary_search", &[r#"["ab","cd","ef","gh"]"#, r#""gh""#], "3"),
        ("array_binary_search", &["[1,2,3,3,5,5,5,5,5,5]", "5"], "4"),
        ("array_binary_search", &["[1,2,3,3,3,5]", "3"], "2"),
        ("array_binary_search", &["[0,0,1,2,3,3,3,5]", "0"], "0"),
        ("array_binary_search", &["[]", "0"], "-1"),
    ];
    for (name, args, want) in cases {
        assert_eq!(ev(name, args), *want, "{name}{args:?}");
    }
    let sum = call("array_sum", &[call("array_range", &[val("-3"), val("5")]).unwrap()]).unwrap();
    assert_eq!(sum.to_json_string(), "4");
}

#[test]
fn binary_search_finds_missing_and_null_by_collation() {
    // Proves the MISSING and NULL rows of case_func_array.json: elements are compared by collation, where MISSING
    // sorts before NULL.
    let a = Value::array(vec![Value::Missing, Value::Missing, Value::Null, Value::int(1), Value::int(2)]);
    assert_eq!(call("array_binary_search", &[a, Value::Missing]).unwrap().to_json_string(), "0");
    let a = Value::array(vec![Value::Missing, Value::Missing, Value::Null, Value::Null, Value::int(1)]);
    assert_eq!(call("array_binary_search", &[a, Value::Null]).unwrap().to_json_string(), "2");
}

#[test]
fn aggregating_functions_skip_what_they_cannot_use() {
    // Proves ARRAY_AVG/SUM use numbers only, ARRAY_COUNT skips NULL, ARRAY_MIN skips NULL and ARRAY_MAX/MIN collate
    // across types (func_array.go); an empty array averages to NULL.
    assert_eq!(ev("array_avg", &[r#"[1, 2, "x", null, 3]"#]), "2");
    assert_eq!(ev("array_avg", &["[1, 2]"]), "1.5");
    assert_eq!(ev("array_avg", &["[]"]), "null");
    assert_eq!(ev("array_sum", &[r#"[1, 2.5, "x"]"#]), "3.5");
    assert_eq!(ev("array_sum", &["[]"]), "0");
    assert_eq!(ev("array_count", &["[1, null, 2]"]), "2");
    assert_eq!(ev("array_max", &[r#"[1, "a", [0], null]"#]), "[0]");
    assert_eq!(ev("array_min", &[r#"[null, 3, "a", false]"#]), "false");
    assert_eq!(ev("array_max", &["[]"]), "null");
    assert_eq!(
        ev("array_sort", &[r#"[3, "b", null, 1.5, [1], {"a":1}, true, "a"]"#]),
        r#"[null,true,1.5,3,"a","b",[1],{"a":1}]"#
    );
}

#[test]
fn membership_uses_function_equality() {
    // Proves NULL never matches (ARRAY_CONTAINS/POSITION give NULL for a NULL value, PUT and REMOVE give NULL for
    // a NULL argument) and numbers match across int and float.
    assert_eq!(ev("array_contains", &["[1, null]", "null"]), "null");
    assert_eq!(ev("array_contains", &["[1.0, 2]", "1"]), "true");
    assert_eq!(ev("array_position", &["[1, 2, 3]", "3"]), "2");
    assert_eq!(ev("array_position", &["[1, 2, 3]", "4"]), "-1");
    assert_eq!(ev("array_put", &["[1, 2]", "2", "3", "3"]), "[1,2,3,3]");
    assert_eq!(ev("array_put", &["[1, 2]", "null"]), "null");
    assert_eq!(ev("array_remove", &["[1, 2, 1, 3]", "1", "3"]), "[2]");
    assert_eq!(ev("array_remove", &["[1, 2]", "null"]), "null");
    assert_eq!(ev("array_append", &["[1]", "null", "2"]), "[1,null,2]");
    assert_eq!(ev("array_append", &["[1]", "MISSING"]), "MISSING");
    assert_eq!(ev("array_prepend", &["0", "null", "[1]"]), "[0,null,1]");
    assert_eq!(ev("array_prepend", &["0", "1"]), "null");
    assert_eq!(ev("array_replace", &["[1, 2, 1, 1]", "1", "9", "2"]), "[9,2,9,1]");
    assert_eq!(ev("array_replace", &["[1]", "null", "9"]), "null");
}

#[test]
fn set_functions_keep_first_appearance_order() {
    // Proves the set semantics of value.Set (1 and 1.0 are one element, NULL is an element) and that INTERSECT
    // drops NULL.
    assert_eq!(ev("array_distinct", &["[1, 2, 1.0, null, 2, null]"]), "[1,2,null]");
    assert_eq!(ev("array_union", &["[1, 2]", "[2, 3, 1]", "[4]"]), "[1,2,3,4]");
    assert_eq!(ev("array_intersect", &["[1, 2, null, 3]", "[3, 2, null]", "[2, 3, 3]"]), "[2,3]");
    assert_eq!(ev("array_symdiff", &["[1, 2]", "[2, 3]", "[3, 4]"]), "[1,4]");
    assert_eq!(ev("array_symdiff1", &["[1, 2]", "[2, 3]", "[3, 4]"]), "[1,4]");
    assert_eq!(ev("array_symdiffn", &["[1, 2]", "[2, 3]", "[2, 4]"]), "[1,2,3,4]");
    assert_eq!(ev("array_union", &["[1]", "2"]), "null");
    assert_eq!(ev("array_union", &["[1]", "2", "MISSING"]), "MISSING");
}

#[test]
fn array_star_gathers_members() {
    // Proves ARRAY_STAR turns an array of objects into an object of arrays, MISSING members written as null.
    assert_eq!(ev("array_star", &[r#"[{"a":1,"b":2},{"a":3},5]"#]), r#"{"a":[1,3,null],"b":[2,null,null]}"#);
    assert_eq!(ev("array_star", &["[]"]), "{}");
}

#[test]
fn huge_ranges_and_repeats_are_refused_before_allocating() {
    // Proves ARRAY_RANGE/ARRAY_REPEAT raise Couchbase's range error past 2^31 - 1 elements and its size error past
    // 20 MiB, and that a NaN bound or a zero step gives an empty array.
    assert!(ev("array_range", &["0", "1e12"]).starts_with("ERROR: Out of range evaluating ARRAY_RANGE()"));
    assert!(ev("array_range", &["0", "1e9"]).starts_with("ERROR: Size of ARRAY_RANGE() result exceeds limit"));
    assert!(ev("array_repeat", &["1", "3e9"]).starts_with("ERROR: Out of range evaluating ARRAY_REPEAT()"));
    assert!(ev("array_repeat", &[r#""abcdefgh""#, "1e8"]).starts_with("ERROR: Size of ARRAY_REPEAT()"));
    assert_eq!(ev("array_range", &["0", "10", "0"]), "[]");
    assert_eq!(ev("array_range", &["0", "10", "-1"]), "[]");
    let nan = call("nan", &[]).unwrap();
    assert_eq!(call("array_range", &[Value::int(0), nan]).unwrap().to_json_string(), "[]");
    assert_eq!(ev("array_range", &["0", "1", "0.25"]), "[0,0.25,0.5,0.75]");
    assert_eq!(call("array_range", &[val("0"), val("2000000")]).unwrap().as_array().map(|a| a.len()), Some(2_000_000));
}

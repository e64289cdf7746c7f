use super::*;

#[test]
fn unknown_conditionals_match_couchbase_test_cases() {
    // Proves conditional_unkn_functions/case_func_cond_unkn.json on its values.
    assert_eq!(ev("missingif", &["null", r#""n1ql""#]), "null");
    assert_eq!(ev("missingif", &["MISSING", r#""n1ql""#]), "MISSING");
    assert_eq!(ev("missingif", &["12", r#""n1ql""#]), "12");
    assert_eq!(ev("missingif", &["2", "2"]), "MISSING");
    assert_eq!(ev("nullif", &["null", r#""n1ql""#]), "null");
    assert_eq!(ev("nullif", &["MISSING", r#""n1ql""#]), "MISSING");
    assert_eq!(ev("nullif", &["12", r#""n1ql""#]), "12");
    assert_eq!(ev("nullif", &["2", "2"]), "null");
    assert_eq!(ev("ifmissing", &["MISSING", r#""MISSING""#]), r#""MISSING""#);
    assert_eq!(ev("ifmissing", &["null", r#""MISSING""#]), "null");
    assert_eq!(ev("ifnull", &["MISSING", r#""NULL""#]), "MISSING");
    assert_eq!(ev("ifnull", &["null", r#""NULL""#]), r#""NULL""#);
    assert_eq!(ev("ifmissingornull", &["null", "MISSING", r#""NOT THERE""#]), r#""NOT THERE""#);
    assert_eq!(ev("coalesce", &["null", "MISSING", "null"]), "null");
    assert_eq!(ev("nvl", &["MISSING", r#""not applicable""#]), r#""not applicable""#);
    assert_eq!(ev("nvl", &[r#""Brown""#, r#""x""#]), r#""Brown""#);
    assert_eq!(ev("nvl2", &[r#""Brown""#, r#""Brown""#, "MISSING"]), r#""Brown""#);
    assert_eq!(ev("nvl2", &["null", r#""a""#, "null"]), "null");
}

#[test]
fn decode_matches_couchbase_test_cases() {
    // Proves the DECODE statements of case_func_cond_unkn.json: MISSING matches MISSING, NULL matches NULL, the
    // default is the odd last argument, and without one the result is NULL.
    let d = |subject: &str| {
        ev(
            "decode",
            &[subject, r#""customer38""#, r#""newCustomer""#, r#""customer12""#, r#""VIP""#, r#""normal customer""#],
        )
    };
    assert_eq!(d(r#""customer12""#), r#""VIP""#);
    assert_eq!(d(r#""customer38""#), r#""newCustomer""#);
    assert_eq!(d(r#""other""#), r#""normal customer""#);
    assert_eq!(ev("decode", &[r#""x""#, r#""a""#, r#""b""#, "MISSING"]), "MISSING");
    assert_eq!(
        ev("decode", &["null", "null", r#""not available""#, "MISSING", r#""not given""#]),
        r#""not available""#
    );
    assert_eq!(ev("decode", &["MISSING", "null", r#""not available""#, "MISSING", r#""not given""#]), r#""not given""#);
    assert_eq!(ev("decode", &["null", "MISSING", r#""not available""#]), "null");
    let lines = r#"[{"productId":"coffee01","qty":1},{"productId":"sugar22","qty":1}]"#;
    assert_eq!(ev("decode", &[lines, lines, "[]"]), "[]");
}

#[test]
fn numeric_conditionals_match_couchbase_test_cases() {
    // Proves number_functions/case_func_cond_num.json; NaN and the infinities are checked by value because JSON
    // text cannot show them.
    let inf = || call("posinf", &[]).unwrap();
    let nan = || call("nan", &[]).unwrap();
    let j = |name: &str, args: Vec<Value>| call(name, &args).unwrap().to_json_string();
    assert_eq!(j("ifinf", vec![inf(), val("2"), val("[1,2]")]), "2");
    assert_eq!(j("ifinf", vec![inf(), val("[1,2]")]), "null");
    assert_eq!(j("ifinf", vec![inf(), val("[1,2]"), val("4")]), "null");
    assert_eq!(j("ifinf", vec![call("neginf", &[]).unwrap(), val("2"), val("[1,2]")]), "2");
    assert!(call("ifnan", &[inf(), nan(), val("1")]).unwrap().as_f64().unwrap().is_infinite());
    assert_eq!(j("ifnan", vec![nan(), val("1")]), "1");
    assert_eq!(j("ifnan", vec![nan(), val(r#""1""#)]), "null");
    assert_eq!(j("ifnanorinf", vec![call("neginf", &[]).unwrap(), val("2"), nan()]), "2");
    assert_eq!(j("ifnanorinf", vec![inf(), nan(), val("1")]), "1");
    assert_eq!(ev("ifnan", &["MISSING", "MISSING"]), "MISSING");
    assert_eq!(ev("nanif", &["MISSING", "[1,2]"]), "MISSING");
    assert_eq!(ev("nanif", &["null", "[1,2]"]), "null");
    assert_eq!(ev("nanif", &["[1,2,4]", "[1,2,null]"]), "null");
    assert_eq!(ev("nanif", &["[1,2,null]", "[1,2,null]"]), "null");
    assert!(call("nanif", &[val("[1,2]"), val("[1,2]")]).unwrap().as_f64().unwrap().is_nan());
    assert_eq!(ev("posinfif", &["[1,2,null]", "[1,2,null]"]), "null");
    assert_eq!(call("posinfif", &[val("[1,2]"), val("[1,2]")]).unwrap().as_f64(), Some(f64::INFINITY));
    let with_missing = Value::array(vec![Value::int(1), Value::int(2), Value::Missing]);
    assert_eq!(j("posinfif", vec![with_missing, val("[1,2]")]), "[1,2,null]");
    assert_eq!(call("neginfif", &[val(r#""a""#), val(r#""a""#)]).unwrap().as_f64(), Some(f64::NEG_INFINITY));
    assert_eq!(call("neginfif", &[inf(), inf()]).unwrap().as_f64(), Some(f64::NEG_INFINITY));
}

#[test]
fn comparison_functions_match_couchbase_test_cases() {
    // Proves comp_functions/case_func_comp.json: GREATEST/LEAST collate across types and skip NULL; EQ/LT/LE and
    // BETWEEN; the IS_ functions' treatment of MISSING and NULL.
    assert_eq!(ev("least", &[r#""Yes""#, "99"]), "99");
    assert_eq!(ev("greatest", &[r#""Yes""#, "99"]), r#""Yes""#);
    assert_eq!(ev("greatest", &["null", "3", "MISSING"]), "3");
    assert_eq!(ev("least", &["null", "MISSING"]), "null");
    let cmp =
        [("eq", "1", "1", "true"), ("eq", "1", "2", "false"), ("lt", "1", "2", "true"), ("lt", "2", "1", "false")];
    for (f, a, b, want) in cmp {
        assert_eq!(ev(f, &[a, b]), want);
    }
    assert_eq!(ev("le", &["2", "2"]), "true");
    assert_eq!(ev("le", &["3", "2"]), "false");
    assert_eq!(ev("eq", &["[null]", "[null]"]), "null");
    assert_eq!(ev("lt", &["MISSING", "null"]), "MISSING");
    assert_eq!(ev("between", &["10", "5", "15"]), "true");
    assert_eq!(ev("between", &["10", "15", "25"]), "false");
    assert_eq!(ev("between", &["10", "null", "5"]), "null");
    assert_eq!(ev("is_missing", &["MISSING"]), "true");
    assert_eq!(ev("is_null", &["MISSING"]), "MISSING");
    assert_eq!(ev("is_not_null", &["MISSING"]), "MISSING");
    assert_eq!(ev("is_null", &["null"]), "true");
    assert_eq!(ev("is_known", &["null"]), "false");
    assert_eq!(ev("is_not_known", &["MISSING"]), "true");
    assert_eq!(ev("is_not_distinct_from", &["null", "null"]), "true");
    assert_eq!(ev("is_distinct_from", &["null", "MISSING"]), "true");
    assert_eq!(ev("is_not_distinct_from", &["1", "1.0"]), "true");
}

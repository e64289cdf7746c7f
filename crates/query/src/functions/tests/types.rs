use super::*;

#[test]
fn type_checks_match_couchbase_test_cases() {
    // Proves typeconv_functions/case_type_check.json: MISSING and NULL pass through, every type has its name.
    assert_eq!(ev("is_array", &["null"]), "null");
    assert_eq!(ev("is_array", &["MISSING"]), "MISSING");
    assert_eq!(ev("is_boolean", &["false"]), "true");
    assert_eq!(ev("is_boolean", &["1"]), "false");
    assert_eq!(ev("is_num", &["0"]), "true");
    assert_eq!(ev("is_num", &["[1,2]"]), "false");
    assert_eq!(ev("is_string", &[r#""""#]), "true");
    for (v, t) in [
        ("1", "number"),
        (r#""yes""#, "string"),
        ("true", "boolean"),
        ("[1,2]", "array"),
        ("MISSING", "missing"),
        ("null", "null"),
        ("{}", "object"),
    ] {
        assert_eq!(ev("type", &[v]), format!("\"{t}\""));
    }
    assert_eq!(
        call("type", &[Value::Binary(std::sync::Arc::from(&b"\x00"[..]))]).unwrap().to_json_string(),
        r#""binary""#
    );
    assert_eq!(ev("is_atom", &[r#""a""#]), "true");
    assert_eq!(ev("is_atom", &["{}"]), "false");
}

#[test]
fn conversions_match_couchbase_test_cases() {
    // Proves typeconv_functions/case_type_conv.json on its values: TOARRAY wraps, TOATOM unwraps, TONUMBER
    // parses, TOSTRING writes, TOOBJECT and TOBOOLEAN as func_type_conv.go defines them.
    assert_eq!(ev("toarray", &[r#""1200""#]), r#"["1200"]"#);
    assert_eq!(ev("toatom", &[r#"["1200"]"#]), r#""1200""#);
    assert_eq!(ev("tonumber", &[r#""1200""#]), "1200");
    assert_eq!(ev("tostring", &["1200"]), r#""1200""#);
    assert_eq!(ev("toobject", &[r#""2012/01/02""#]), "{}");
    assert_eq!(ev("toobject", &["null"]), "null");
    assert_eq!(ev("toobject", &["MISSING"]), "MISSING");
    assert_eq!(ev("toobject", &[r#"{"productId":"sugar22","qty":1}"#]), r#"{"productId":"sugar22","qty":1}"#);
    assert_eq!(ev("toboolean", &[r#"{"productId":"sugar22"}"#]), "true");
    assert_eq!(ev("toboolean", &[r#""2012/01/02""#]), "true");
    assert_eq!(ev("toboolean", &["null"]), "null");
}

#[test]
fn tostring_writes_numbers_like_go_format_float() {
    // Proves FormatFloat(f, 'f', -1) output: no exponent, shortest digits, whole floats without a fraction, and
    // Go's names for NaN and the infinities.
    assert_eq!(ev("tostring", &["1.0"]), r#""1""#);
    assert_eq!(ev("tostring", &["0.1"]), r#""0.1""#);
    assert_eq!(ev("tostring", &["1e-7"]), r#""0.0000001""#);
    assert_eq!(ev("tostring", &["1.5e21"]), r#""1500000000000000000000""#);
    assert_eq!(ev("tostring", &["-2.5"]), r#""-2.5""#);
    assert_eq!(ev("tostring", &["true"]), r#""true""#);
    assert_eq!(ev("tostring", &["[1]"]), "null");
    assert_eq!(call("tostring", &[call("nan", &[]).unwrap()]).unwrap().to_json_string(), r#""NaN""#);
    assert_eq!(call("tostring", &[call("neginf", &[]).unwrap()]).unwrap().to_json_string(), r#""-Inf""#);
}

#[test]
fn tonumber_parses_go_syntax_and_strips_on_request() {
    // Proves ParseInt/ParseFloat acceptance (signs, exponents, Inf/NaN names; no spaces, no overflow) and the
    // second argument's cleaning: listed characters and spaces removed, a lone comma as the decimal point.
    let cases = [
        (r#""42""#, "42"),
        (r#""-7""#, "-7"),
        (r#""+3.5""#, "3.5"),
        (r#""1e3""#, "1000"),
        (r#"".5""#, "0.5"),
        (r#"" 1""#, "null"),
        (r#""1e400""#, "null"),
        (r#""0x10""#, "null"),
        (r#""abc""#, "null"),
        (r#""""#, "null"),
        ("true", "1"),
        ("false", "0"),
        ("[1]", "null"),
        ("MISSING", "MISSING"),
    ];
    for (input, want) in cases {
        assert_eq!(ev("tonumber", &[input]), want, "{input}");
    }
    assert!(call("tonumber", &[val(r#""-Infinity""#)]).unwrap().as_f64().unwrap().is_infinite());
    assert_eq!(ev("tonumber", &[r#""$1,234.50""#, r#""$,""#]), "1234.5");
    assert_eq!(ev("tonumber", &[r#""12,5 €""#, r#""€""#]), "12.5");
    assert_eq!(ev("tonumber", &[r#""1,234,567""#, r#""""#]), "null");
    assert_eq!(ev("tonumber", &[r#""1,234.5""#, r#""""#]), "null");
    assert_eq!(ev("tonumber", &[r#""  ""#, r#""""#]), "null");
    assert_eq!(ev("tonumber", &[r#""1""#, "1"]), "null");
}

#[test]
fn toatom_and_toarray_edges() {
    // Proves TOATOM recurses through single-element containers and gives NULL for larger ones; TOARRAY gives NULL
    // for binary and passes arrays through.
    assert_eq!(ev("toatom", &[r#"{"a":[[5]]}"#]), "5");
    assert_eq!(ev("toatom", &["[1,2]"]), "null");
    assert_eq!(ev("toatom", &["{}"]), "null");
    assert_eq!(ev("toarray", &["[1]"]), "[1]");
    assert_eq!(call("toarray", &[Value::Binary(std::sync::Arc::from(&b"x"[..]))]).unwrap().to_json_string(), "null");
    assert_eq!(ev("toboolean", &["0"]), "false");
    assert_eq!(ev("toboolean", &["[]"]), "false");
}

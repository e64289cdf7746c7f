use super::*;

fn sorted(name: &str, args: &[&str]) -> String {
    let v = call(name, &args.iter().map(|a| val(a)).collect::<Vec<_>>()).unwrap();
    call("array_sort", &[v]).unwrap().to_json_string()
}

#[test]
fn json_functions_match_couchbase_test_cases() {
    // Proves the constant statements of json_functions/case_JSON.json in couchbase/query.
    assert_eq!(ev("json_decode", &[r#""2""#]), "2");
    assert_eq!(ev("decode_json", &[r#""2""#]), "2");
    assert_eq!(ev("decode_json", &["[1,2,3]"]), "null");
    assert_eq!(ev("decode_json", &[r#""""#]), "null");
    assert_eq!(ev("encode_json", &["[1,2,3]"]), r#""[1,2,3]""#);
    assert_eq!(ev("encode_json", &[r#""""#]), r#""\"\"""#);
    assert_eq!(ev("encoded_size", &[r#""""#]), "2");
    assert_eq!(ev("encoded_size", &["[1,2,3]"]), "7");
    assert_eq!(ev("poly_length", &[r#""""#]), "0");
    assert_eq!(ev("poly_length", &["[1,2,3]"]), "3");
    assert_eq!(ev("poly_length", &["MISSING"]), "MISSING");
    assert_eq!(ev("poly_length", &["null"]), "null");
    assert_eq!(call("poly_length", &[call("decode_json", &[val(r#""o""#)]).unwrap()]).unwrap(), Value::Null);
    assert_eq!(call("poly_length", &[call("nan", &[]).unwrap()]).unwrap(), Value::Null);
}

#[test]
fn tokens_match_couchbase_test_cases() {
    // Proves the TOKENS statements of case_JSON.json (sorted, as the test sorts them).
    assert_eq!(ev("tokens", &["MISSING"]), "MISSING");
    for (v, want) in
        [("null", "[null]"), ("false", "[false]"), ("true", "[true]"), ("0", "[0]"), ("-1.5", "[-1.5]"), ("10", "[10]")]
    {
        assert_eq!(ev("tokens", &[v]), want);
    }
    assert_eq!(ev("tokens", &[r#""hello""#]), r#"["hello"]"#);
    assert_eq!(sorted("tokens", &[r#""Hello, World!""#]), r#"["Hello","World"]"#);
    assert_eq!(
        sorted("tokens", &[r#"[null, false, true, -1.5, 0, 10, "Hello, World!"]"#]),
        r#"[null,false,true,-1.5,0,10,"Hello","World"]"#
    );
    let o = r#"{"a": {"b": "hello", "c": "world!"}}"#;
    assert_eq!(sorted("tokens", &[o]), r#"["a","b","c","hello","world"]"#);
    let o = r#"{"aa": {"bb": "hello", "cc": "world!"}}"#;
    assert_eq!(sorted("tokens", &[o, r#"{"names":false}"#]), r#"["hello","world"]"#);
    assert_eq!(ev("tokens", &[o, "0"]), "null");
    assert_eq!(sorted("tokens", &[o, r#"{"names":false, "case":"upper"}"#]), r#"["HELLO","WORLD"]"#);
    let o = r#"{"AA": {"BB": "HELLO", "CC": "WORLD!"}}"#;
    assert_eq!(sorted("tokens", &[o, r#"{"names":true, "case":"lower"}"#]), r#"["aa","bb","cc","hello","world"]"#);
}

#[test]
fn token_options_split_trim_and_specials() {
    // Proves the string options of value/string.go's tokens: no split keeps the (trimmed) string, specials keeps
    // addresses and hyphenated words, duplicates appear once.
    assert_eq!(ev("tokens", &[r#"" a b ""#, r#"{"split":false}"#]), r#"["a b"]"#);
    assert_eq!(ev("tokens", &[r#"" a b ""#, r#"{"split":false,"trim":false}"#]), r#"[" a b "]"#);
    assert_eq!(
        sorted("tokens", &[r#""mail bob@x.com (555-1234).""#, r#"{"specials":true}"#]),
        r#"["1234","555","555-1234","bob","bob@x.com","com","mail","x"]"#
    );
    assert_eq!(ev("tokens", &[r#""a a A""#]), r#"["a","A"]"#);
}

#[test]
fn base64_round_trips_values_through_their_json() {
    // Proves BASE64 encodes a value's JSON text and BASE64_DECODE parses it back (func_json.go); text that is not
    // JSON decodes to a binary value, text that is not base64 to NULL.
    assert_eq!(ev("base64", &[r#""abc""#]), r#""ImFiYyI=""#);
    assert_eq!(ev("base64_encode", &[r#"{"a":[1,2]}"#]), r#""eyJhIjpbMSwyXX0=""#);
    assert_eq!(ev("base64_decode", &[r#""ImFiYyI=""#]), r#""abc""#);
    assert_eq!(ev("decode_base64", &[r#""eyJhIjpbMSwyXX0=""#]), r#"{"a":[1,2]}"#);
    assert_eq!(ev("base64_decode", &[r#""YWJj""#]), r#""<binary (3 b)>""#);
    assert_eq!(ev("base64_decode", &[r#""!!""#]), "null");
    assert_eq!(ev("base64_decode", &["1"]), "null");
    assert_eq!(ev("base64_encode", &["MISSING"]), "MISSING");
}

#[test]
fn encode_takes_missing_as_null_and_pairs_walks_members() {
    // Proves ENCODE_JSON/ENCODED_SIZE marshal MISSING as null (func_json.go evaluates them for any argument) and
    // PAIRS lists every member pair plus each array element under its member's name.
    assert_eq!(ev("encode_json", &["MISSING"]), r#""null""#);
    assert_eq!(ev("encoded_size", &["MISSING"]), "4");
    assert_eq!(
        ev("pairs", &[r#"{"a":1,"b":[2,{"c":3}]}"#]),
        r#"[["a",1],["b",[2,{"c":3}]],["b",2],["b",{"c":3}],["c",3]]"#
    );
    assert_eq!(ev("pairs", &[r#""x""#]), "null");
}

#[test]
fn uuid_is_a_version_4_uuid_from_the_context() {
    // Proves UUID() is built from the request's random source (two 64-bit draws) with the v4 and RFC 4122 bits,
    // and is not deterministic for the planner.
    let u = ev("uuid", &[]);
    let u = u.trim_matches('"');
    assert_eq!(u.len(), 36);
    assert_eq!(&u[14..15], "4");
    assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
    assert_eq!(u, ev("uuid", &[]).trim_matches('"'), "the test context's source starts over on every call");
    assert!(!lookup("uuid").unwrap().deterministic);
}

#[test]
fn len_measures_every_type() {
    // Proves LEN/MB_LEN from func_general.go: bytes or characters of strings, sizes of containers, 1 for booleans,
    // the length of a number's text.
    assert_eq!(ev("len", &[r#""日本""#]), "6");
    assert_eq!(ev("mb_len", &[r#""日本""#]), "2");
    assert_eq!(ev("len", &["[1,2]"]), "2");
    assert_eq!(ev("len", &["true"]), "1");
    assert_eq!(ev("len", &["-12.5"]), "5");
    assert_eq!(ev("len", &["null"]), "null");
    assert_eq!(ev("len", &["MISSING"]), "MISSING");
}

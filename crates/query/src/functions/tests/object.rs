use super::*;

const CC: &str = r#"{"cardExpiry":"2011-10-12","cardNumber":"1211-1221-1234-2201","cardType":"americanexpress"}"#;
const NESTED: &str = r#"{"a":1,"b":2,"c":{"a":[{"b":3},{"b":4},{"b":[{"c":5}]}]}}"#;

#[test]
fn object_functions_match_couchbase_test_cases() {
    // Proves the results of obj_functions/case_obj.json in couchbase/query on one of its ccInfo objects.
    assert_eq!(ev("object_length", &[CC]), "3");
    assert_eq!(ev("object_names", &[CC]), r#"["cardExpiry","cardNumber","cardType"]"#);
    assert_eq!(
        ev("object_pairs", &[CC]),
        r#"[{"name":"cardExpiry","val":"2011-10-12"},{"name":"cardNumber","val":"1211-1221-1234-2201"},{"name":"cardType","val":"americanexpress"}]"#
    );
    assert_eq!(ev("object_values", &[CC]), r#"["2011-10-12","1211-1221-1234-2201","americanexpress"]"#);
    let doc = format!(r#"{{"ccInfo":{CC},"customerId":"c1","type":"customer"}}"#);
    assert_eq!(
        ev("object_paths", &[&doc]),
        r#"["ccInfo","ccInfo.cardExpiry","ccInfo.cardNumber","ccInfo.cardType","customerId","type"]"#
    );
    assert_eq!(ev("object_field", &[&doc, r#""ccInfo.cardExpiry""#]), r#""2011-10-12""#);
    assert_eq!(ev("object_field", &[&doc, r#""`CCINFO`i.cardExpiry""#]), r#""2011-10-12""#);
}

#[test]
fn pairs_nested_matches_couchbase_test_cases() {
    // Proves the three OBJECT_PAIRS_NESTED statements of case_obj.json: leaves only by default, composites on
    // request, and a pattern over the whole path.
    assert_eq!(
        ev("object_pairs_nested", &[NESTED]),
        concat!(
            r#"[{"name":"a","val":1},{"name":"b","val":2},{"name":"c.a[0].b","val":3},"#,
            r#"{"name":"c.a[1].b","val":4},{"name":"c.a[2].b[0].c","val":5}]"#
        )
    );
    let names: Vec<String> = call("object_pairs_nested", &[val(NESTED), val(r#"{"composites":true}"#)])
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.field("name").as_str().unwrap().to_string())
        .collect();
    let want = ["a", "b", "c", "c.a", "c.a[0]", "c.a[0].b", "c.a[1]", "c.a[1].b", "c.a[2]", "c.a[2].b", "c.a[2].b[0]"];
    assert_eq!(names, [&want[..], &["c.a[2].b[0].c"]].concat());
    assert_eq!(
        ev("object_pairs_nested", &[NESTED, r#"{"pattern":"\\[2\\].b"}"#]),
        r#"[{"name":"c.a[2].b[0].c","val":5}]"#
    );
}

#[test]
fn path_options_follow_couchbase() {
    // Proves OBJECT_PATHS's options from func_obj.go: composites off, [*] array notation, index-style paths,
    // quoting of awkward names, field pattern space, and duplicates kept with unique false.
    let o = r#"{"a":[{"x":1},{"x":2}],"b c":{"d":true}}"#;
    // Array elements are not paths of their own (getNamesFromArray lists only what is inside them).
    assert_eq!(ev("object_paths", &[o]), r#"["`b c`","`b c`.d","a","a[0].x","a[1].x"]"#);
    assert_eq!(ev("object_paths", &[o, r#"{"composites":false}"#]), r#"["`b c`.d","a[0].x","a[1].x"]"#);
    assert_eq!(ev("object_paths", &[o, r#"{"arraysubscript":false}"#]), r#"["`b c`","`b c`.d","a","a[*].x"]"#);
    assert_eq!(
        ev("object_paths", &[o, r#"{"arraysubscript":false,"unique":false}"#]),
        r#"["`b c`","`b c`.d","a","a[*].x","a[*].x"]"#
    );
    assert_eq!(ev("object_paths", &[o, r#"{"index":true}"#]), r#"["`a`[].`x`","`b c`.`d`"]"#);
    assert_eq!(ev("object_paths", &[o, r#"{"pattern":"D","ignorecase":true,"composites":false}"#]), r#"["`b c`.d"]"#);
    assert_eq!(
        ev("object_paths", &[o, r#"{"pattern":"x","exact":true,"patternspace":"field"}"#]),
        r#"["a[0].x","a[1].x"]"#
    );
    assert_eq!(ev("object_paths", &[o, r#"{"pattern":"a[0]","regex":false}"#]), r#"["a[0].x"]"#);
    assert_eq!(ev("object_paths", &[o, "1"]), "null");
    assert_eq!(ev("object_paths", &["1"]), "null");
    assert_eq!(
        ev("object_pairs_nested", &[o, r#"{"report":"field","types":true}"#]),
        r#"[{"name":"d","type":"boolean"},{"name":"x","type":"number"},{"name":"x","type":"number"}]"#
    );
}

#[test]
fn editing_functions_follow_couchbase() {
    // Proves ADD never overwrites, PUT overwrites and removes with MISSING, REMOVE/RENAME/REPLACE/CONCAT/UNWRAP
    // as func_obj.go does them.
    assert_eq!(ev("object_add", &[r#"{"a":1}"#, r#""a""#, "2"]), r#"{"a":1}"#);
    assert_eq!(ev("object_add", &[r#"{"a":1}"#, r#""b""#, "null"]), r#"{"a":1,"b":null}"#);
    assert_eq!(ev("object_add", &[r#"{"a":1}"#, r#""b""#, "MISSING"]), r#"{"a":1}"#);
    assert_eq!(ev("object_put", &[r#"{"a":1}"#, r#""a""#, "2"]), r#"{"a":2}"#);
    assert_eq!(ev("object_put", &[r#"{"a":1,"b":2}"#, r#""a""#, "MISSING"]), r#"{"b":2}"#);
    assert_eq!(ev("object_put", &["MISSING", r#""a""#, "1"]), "MISSING");
    assert_eq!(ev("object_put", &["[]", r#""a""#, "1"]), "null");
    assert_eq!(ev("object_remove", &[r#"{"a":1,"b":2,"c":3}"#, r#""a""#, r#""c""#]), r#"{"b":2}"#);
    assert_eq!(ev("object_remove", &[r#"{"a":1}"#, "null"]), "null");
    assert_eq!(ev("object_rename", &[r#"{"a":1,"b":2}"#, r#""a""#, r#""z""#]), r#"{"b":2,"z":1}"#);
    assert_eq!(ev("object_rename", &[r#"{"a":1}"#, r#""q""#, r#""z""#]), r#"{"a":1}"#);
    assert_eq!(ev("object_replace", &[r#"{"a":1,"b":2,"c":1.0}"#, "1", r#""one""#]), r#"{"a":"one","b":2,"c":"one"}"#);
    assert_eq!(ev("object_replace", &[r#"{"a":1}"#, "null", "2"]), "null");
    assert_eq!(ev("object_concat", &[r#"{"a":1,"b":1}"#, r#"{"b":2}"#, r#"{"c":3}"#]), r#"{"a":1,"b":2,"c":3}"#);
    assert_eq!(ev("object_concat", &[r#"{"a":1}"#, "[]"]), "null");
    assert_eq!(ev("object_concat2", &[r#"{"a":1}"#, r#"[{"b":2},{"a":3}]"#]), r#"{"a":3,"b":2}"#);
    assert_eq!(ev("object_concat2", &[r#"{"a":1}"#, "[1]"]), "null");
    assert_eq!(ev("object_unwrap", &[r#"{"a":[1]}"#]), "[1]");
    assert_eq!(ev("object_unwrap", &[r#"{"a":1,"b":2}"#]), "null");
}

#[test]
fn inner_functions_drop_missing_elements() {
    // Proves Couchbase's removeMissing: MISSING array elements go, and an array left with one element is replaced
    // by it, unless the object has a single member.
    let o = Value::object(
        [
            ("a".to_string(), Value::array(vec![Value::int(1), Value::Missing])),
            ("b".to_string(), Value::array(vec![Value::Missing, Value::int(2), Value::int(3)])),
        ]
        .into_iter()
        .collect(),
    );
    assert_eq!(call("object_inner_values", std::slice::from_ref(&o)).unwrap().to_json_string(), "[1,[2,3]]");
    assert_eq!(
        call("object_inner_pairs", &[o]).unwrap().to_json_string(),
        r#"[{"name":"a","val":1},{"name":"b","val":[2,3]}]"#
    );
}

#[test]
fn types_and_field_paths() {
    // Proves OBJECT_TYPES/OBJECT_TYPES_NESTED and OBJECT_FIELD subscripts, quoting and unparsable paths.
    assert_eq!(ev("object_types", &[r#"{"a":1,"b":[1],"c":null}"#]), r#"{"a":"number","b":"array","c":"null"}"#);
    assert_eq!(ev("object_types_nested", &[r#"{"a":{"b":[1,"x"]}}"#]), r#"{"a":{"b":["number","string"]}}"#);
    let o = r#"{"a":{"b c":[10,20,{"d":1}]}}"#;
    assert_eq!(ev("object_field", &[o, r#""a.`b c`[1]""#]), "20");
    assert_eq!(ev("object_field", &[o, r#""a.`b c`[-1].d""#]), "1");
    assert_eq!(ev("object_field", &[o, r#""a.zz""#]), "MISSING");
    assert_eq!(ev("object_field", &[o, r#""a..b""#]), "null");
    assert_eq!(ev("object_field", &[o, r#""a[x]""#]), "null");
    assert_eq!(ev("object_pairs", &[r#"{"a":1}"#, r#"{"types":true}"#]), r#"[{"name":"a","type":"number"}]"#);
}

use std::cmp::Ordering;

use super::*;

fn v(text: &str) -> Value {
    Value::from_json(text.as_bytes()).unwrap()
}

#[test]
fn collation_orders_types_as_couchbase_does() {
    // Proves the type order MISSING < NULL < false < true < numbers < strings < arrays < objects.
    let ordered = [
        Value::Missing,
        Value::Null,
        v("false"),
        v("true"),
        v("-1"),
        v("2.5"),
        v("\"\""),
        v("\"a\""),
        v("[]"),
        v("{}"),
    ];
    for (i, a) in ordered.iter().enumerate() {
        for (j, b) in ordered.iter().enumerate() {
            assert_eq!(collate(a, b), i.cmp(&j), "{a:?} vs {b:?}");
        }
    }
}

#[test]
fn numbers_compare_by_value_across_int_and_float() {
    // Proves 1 = 1.0, 2 > 1.5, and exact order between large integers that floats cannot tell apart.
    assert_eq!(collate(&v("1"), &v("1.0")), Ordering::Equal);
    assert_eq!(collate(&v("2"), &v("1.5")), Ordering::Greater);
    assert_eq!(collate(&v("9007199254740993"), &v("9007199254740992")), Ordering::Greater);
}

#[test]
fn arrays_compare_by_elements_then_length_and_objects_by_size_first() {
    // Proves the container rules: [1,2] < [1,3] < [1,3,0]; a one-member object sorts before any two-member one.
    assert_eq!(collate(&v("[1,2]"), &v("[1,3]")), Ordering::Less);
    assert_eq!(collate(&v("[1,3]"), &v("[1,3,0]")), Ordering::Less);
    assert_eq!(collate(&v(r#"{"z":9}"#), &v(r#"{"a":1,"b":2}"#)), Ordering::Less);
    assert_eq!(collate(&v(r#"{"a":1,"b":2}"#), &v(r#"{"a":1,"c":0}"#)), Ordering::Less);
}

#[test]
fn operators_propagate_missing_before_null() {
    // Proves `MISSING = NULL` is MISSING and `NULL = 1` is NULL, while cross-type comparisons collate.
    assert!(matches!(compare_for_operator(&Value::Missing, &Value::Null), Err(Value::Missing)));
    assert!(matches!(compare_for_operator(&Value::Null, &v("1")), Err(Value::Null)));
    assert_eq!(compare_for_operator(&v("1"), &v("\"a\"")).unwrap(), Ordering::Less);
}

#[test]
fn json_round_trips_with_sorted_members_and_couchbase_numbers() {
    // Proves parsing sorts members, whole floats print without a fraction, no exponent ever (Go's 'f' format),
    // and NaN and the infinities print as Couchbase's strings.
    assert_eq!(v(r#"{"b":1,"a":[true,null,"x\n"]}"#).to_json_string(), r#"{"a":[true,null,"x\n"],"b":1}"#);
    assert_eq!(Value::float(3.0).to_json_string(), "3");
    assert_eq!(Value::float(0.1).to_json_string(), "0.1");
    assert_eq!(Value::float(1e-7).to_json_string(), "0.0000001");
    assert_eq!(Value::float(1.5e21).to_json_string(), "1500000000000000000000");
    assert_eq!(Value::float(f64::NAN).to_json_string(), "\"NaN\"");
    assert_eq!(Value::float(f64::NEG_INFINITY).to_json_string(), "\"-Infinity\"");
    assert_eq!(v("18446744073709551615").to_json_string(), "18446744073709552000");
}

#[test]
fn missing_is_left_out_of_objects_and_null_in_arrays() {
    // Proves MISSING never reaches JSON text as a member, and becomes null as an element.
    let o = Value::object(Object::from([("a".to_string(), Value::Missing), ("b".to_string(), Value::int(1))]));
    assert_eq!(o.to_json_string(), r#"{"b":1}"#);
    assert_eq!(Value::array(vec![Value::Missing]).to_json_string(), "[null]");
}

#[test]
fn truth_follows_sql_plus_plus() {
    // Proves which values pass a WHERE clause.
    for (text, truth) in [("true", true), ("0", false), ("2", true), ("\"\"", false), ("\"x\"", true), ("[]", false)] {
        assert_eq!(v(text).truth(), truth, "{text}");
    }
    assert!(!Value::Missing.truth() && !Value::Null.truth() && !Value::float(f64::NAN).truth());
}

#[test]
fn equal_values_hash_alike() {
    // Proves 1 and 1.0 land in the same hash bucket, as DISTINCT and GROUP BY need.
    use std::collections::HashSet;
    let set: HashSet<Value> = [v("1"), v("1.0"), v("[1]"), v("[1.0]")].into_iter().collect();
    assert_eq!(set.len(), 2);
}

#[test]
fn elements_count_from_the_end_for_negative_indexes() {
    // Proves a[-1] is the last element and out-of-range indexes are MISSING.
    let a = v("[1,2,3]");
    assert_eq!(a.element(-1), v("3"));
    assert!(a.element(3).is_missing() && a.element(-4).is_missing());
}

#[test]
fn ordering_operators_give_null_when_they_reach_a_null_inside_arrays_and_objects() {
    // Proves Couchbase's Value.Compare for containers: element by element (objects member by member in name
    // order), stopping at the first difference, and NULL (or MISSING) when an element pair holds one first.
    let cmp = |a: &str, b: &str| compare_for_operator(&v(a), &v(b));
    assert!(matches!(cmp("[1,null]", "[1,2]"), Err(Value::Null)));
    assert_eq!(cmp("[0,null]", "[1,2]").unwrap(), Ordering::Less);
    assert_eq!(cmp("[1,2]", "[1,2,null]").unwrap(), Ordering::Less);
    assert!(matches!(cmp(r#"{"a":null}"#, r#"{"a":1}"#), Err(Value::Null)));
    assert_eq!(cmp(r#"{"a":0,"b":null}"#, r#"{"a":1,"b":0}"#).unwrap(), Ordering::Less);
    assert_eq!(cmp(r#"{"b":null}"#, r#"{"a":1}"#).unwrap(), Ordering::Greater);
    let missing_inside = Value::array(vec![Value::Missing]);
    assert!(matches!(compare_for_operator(&missing_inside, &v("[1]")), Err(Value::Missing)));
}

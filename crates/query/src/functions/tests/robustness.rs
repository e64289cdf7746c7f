//! Every scalar function, called with arbitrary values, returns a value or an error: never a panic, whatever the
//! argument types, text (multi-byte characters, `%` directives, date-like fragments) or numbers (huge, negative,
//! fractional, NaN-producing).

use proptest::prelude::*;

use super::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,12}",
        "\\PC{0,10}",
        "[0-9:.+TZ -]{0,30}",
        "(%[-_^0]?[0-9]?[:]{0,3}[a-zA-Z%#@]){0,4}",
        "(YYYY|MM|DD|hh|HH12|HH24|mi|ss|s|TZD|MON|Day|pp|[ /:T.-]){0,6}",
        "(2006|01|02|15|04|05|.999|.000|Z07:00|-0700|MST|Jan|Monday|_2|__2|002|PM|[ /:T.-]){0,6}",
        "[日本é\u{301}a-c]{0,6}",
        Just("2021-06-25T14:48:42.123+05:30".to_string()),
    ]
}

fn scalar_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Missing),
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::int),
        (-100i64..100).prop_map(Value::int),
        any::<f64>().prop_map(Value::float),
        (-1e13f64..1e13).prop_map(Value::float),
        text().prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar_value().prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::array),
            prop::collection::vec(("[a-c `.]{0,3}", inner), 0..4).prop_map(Value::object_from),
        ]
    })
}

fn scalars() -> Vec<&'static FunctionDef> {
    all().filter(|f| matches!(f.kind, FnKind::Scalar(_))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn no_function_panics_on_arbitrary_arguments(
        pick in any::<prop::sample::Index>(),
        args in prop::collection::vec(value(), 0..5),
    ) {
        let functions = scalars();
        let def = functions[pick.index(functions.len())];
        let n = args.len().clamp(def.min_args, def.max_args.min(5));
        let mut args = args;
        args.resize(n, Value::int(1));
        let _ = call(def.name, &args);
    }

    #[test]
    fn date_text_functions_never_panic(s in text(), f in text(), part in "[a-z_]{0,14}") {
        for name in ["str_to_millis", "date_format_str", "str_to_utc", "date_trunc_str"] {
            let second = if name == "date_trunc_str" { part.clone() } else { f.clone() };
            let _ = call(name, &[Value::from(s.clone()), Value::from(second)]);
        }
        let _ = call("millis_to_str", &[Value::int(1_624_632_522_123), Value::from(f.clone())]);
        let _ = call("str_to_tz", &[Value::from(s.clone()), Value::from(f.clone())]);
        let _ = call("date_add_str", &[Value::from(s.clone()), Value::int(3), Value::from(part.clone())]);
        let _ = call("date_part_str", &[Value::from(s.clone()), Value::from(part.clone())]);
    }
}

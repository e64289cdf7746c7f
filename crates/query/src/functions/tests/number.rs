use super::*;

/// The result of `name(args)` as a float, for functions whose last digit may differ between Go's math library
/// and Rust's.
fn approx(name: &str, args: &[&str]) -> f64 {
    call(name, &args.iter().map(|a| val(a)).collect::<Vec<_>>()).unwrap().as_f64().unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn number_functions_match_couchbase_test_cases() {
    // Proves the constant statements of number_functions/case_func_num.json in couchbase/query (exact where the
    // result is whole or a constant, within 1e-12 where the math libraries may differ in the last digit).
    let exact: &[(&str, &[&str], &str)] = &[
        ("abs", &["-4.599"], "4.599"),
        ("abs", &["0.0"], "0"),
        ("acos", &["1.0"], "0"),
        ("acos", &["-1.0"], "3.141592653589793"),
        ("cos", &["3.141592653589793"], "-1"),
        ("ceil", &["1.4"], "2"),
        ("pi", &[], "3.141592653589793"),
        ("e", &[], "2.718281828459045"),
        ("degrees", &["3.141592653589793"], "180"),
        ("radians", &["90"], "1.5707963267948966"),
        ("radians", &["-180"], "-3.141592653589793"),
        ("floor", &["1.7"], "1"),
        ("power", &["12", "2"], "144"),
        ("round", &["12.5"], "12"),
        ("round", &["1.2343534"], "1"),
        ("round", &["1.8343534"], "2"),
        ("round", &["1.8343534", "0"], "2"),
        ("round", &["1.8343534", "3"], "1.834"),
        ("round", &["8.8343534", "-1"], "10"),
        ("round", &["1.8343534", "-1"], "0"),
        ("sign", &["-1034.992445"], "-1"),
        ("sign", &["0.0000111"], "1"),
        ("sign", &["0.0"], "0"),
        ("sqrt", &["0"], "0"),
        ("trunc", &["-2.2544", "2"], "-2.25"),
        ("trunc", &["0.2544", "3"], "0.254"),
    ];
    for (name, args, want) in exact {
        assert_eq!(ev(name, args), *want, "{name}{args:?}");
    }
    assert!(close(approx("cos", &["1.5707963267948966"]), 6.123233995736757e-17));
    assert!(close(approx("sin", &["3.141592653589793"]), 1.2246467991473515e-16));
    assert!(close(approx("power", &["2.718281828459045", "2"]), 7.3890560989306495));
    assert!(close(approx("exp", &["2"]), 7.38905609893065));
    assert!(close(approx("log", &["22026.465794806718"]), 4.342944819032518));
    assert_eq!(ev("log", &["1e34"]), "34");
    assert!(approx("acos", &["3"]).is_nan() && approx("sqrt", &["-1"]).is_nan());
}

#[test]
fn round_is_half_even_and_round_nearest_half_away() {
    // Proves the round_even/round_nearest statements of case_func_num.json: ROUND(2.5) is 2, ROUND_NEAREST(2.5)
    // is 3, both with and without a digit count; negatives mirror positives.
    for name in ["round", "round_even"] {
        assert_eq!(ev(name, &["1.5"]), "2");
        assert_eq!(ev(name, &["2.5"]), "2");
        assert_eq!(ev(name, &["2.5", "0"]), "2");
        assert_eq!(ev(name, &["-2.5"]), "-2");
    }
    assert_eq!(ev("round_nearest", &["1.5"]), "2");
    assert_eq!(ev("round_nearest", &["2.5"]), "3");
    assert_eq!(ev("round_nearest", &["2.5", "0"]), "3");
    assert_eq!(ev("round_nearest", &["-2.5"]), "-3");
    assert_eq!(ev("round", &["2.25", "1"]), "2.2");
    assert_eq!(ev("round", &["1.5", "0.5"]), "null");
    assert_eq!(ev("round", &["9007199254740993"]), "9007199254740993");
}

#[test]
fn constants_and_special_values() {
    // Proves NaN and the infinities are numbers (TYPE number), and SIGN of them follows case_func_num.json.
    for name in ["nan", "posinf", "neginf", "inf", "pos_inf", "neg_inf"] {
        assert!(matches!(call(name, &[]).unwrap(), Value::Number(_)), "{name}");
    }
    let sign = |v: Value| call("sign", &[v]).unwrap().to_json_string();
    assert_eq!(sign(call("nan", &[]).unwrap()), "0");
    assert_eq!(sign(call("posinf", &[]).unwrap()), "1");
    assert_eq!(sign(call("neginf", &[]).unwrap()), "-1");
}

#[test]
fn integer_division_and_arithmetic_functions() {
    // Proves IDIV/IMOD truncate both operands and give NULL for a zero divisor (arith_idiv.go, arith_imod.go),
    // DIV and MOD give NULL for zero (case_expression.json: 1/0 is null), and ADD/MULT stay exact on integers.
    assert_eq!(ev("idiv", &["7", "2"]), "3");
    assert_eq!(ev("idiv", &["-7", "2"]), "-3");
    assert_eq!(ev("idiv", &["7.9", "2.9"]), "3");
    assert_eq!(ev("idiv", &["7", "0.5"]), "null");
    assert_eq!(ev("imod", &["-7", "2"]), "-1");
    assert_eq!(ev("imod", &["7", "0"]), "null");
    assert_eq!(ev("div", &["10", "2"]), "5");
    assert_eq!(ev("div", &["1", "0"]), "null");
    assert_eq!(ev("mod", &["25", "5"]), "0");
    assert_eq!(ev("add", &["9007199254740993", "1"]), "9007199254740994");
    assert_eq!(ev("mult", &["2", "3", "4"]), "24");
    assert_eq!(ev("sub", &["1", "3"]), "-2");
    assert_eq!(ev("neg", &["3"]), "-3");
    assert_eq!(ev("add", &["1", "MISSING", "null"]), "MISSING");
    assert_eq!(ev("add", &["1", "\"a\""]), "null");
}

#[test]
fn random_is_seeded_deterministically_and_unseeded_from_the_context() {
    // Proves RANDOM(seed) repeats for a seed and differs across seeds, RANDOM() reads the context's source, all
    // within [0, 1); and that RANDOM is not deterministic for the planner.
    let a = approx("random", &["42"]);
    assert_eq!(a, approx("random", &["42"]));
    assert_eq!(a, approx("random", &["42.7"]));
    assert_ne!(a, approx("random", &["43"]));
    let r = approx("random", &[]);
    assert!((0.0..1.0).contains(&a) && (0.0..1.0).contains(&r));
    assert_eq!(ev("random", &["\"x\""]), "null");
    assert_eq!(ev("random", &["MISSING"]), "MISSING");
    assert!(!lookup("random").unwrap().deterministic);
}

#[test]
fn wrong_types_are_null_and_missing_stays_missing() {
    // Proves the usual rule for the numeric family (func_num.go).
    for name in ["abs", "ceil", "floor", "sqrt", "sign", "exp"] {
        assert_eq!(ev(name, &["MISSING"]), "MISSING", "{name}");
        assert_eq!(ev(name, &["\"1\""]), "null", "{name}");
    }
    assert_eq!(ev("power", &["null", "MISSING"]), "MISSING");
    assert_eq!(ev("atan2", &["1", "true"]), "null");
    // |i64::MIN| does not fit an integer: it becomes a float, written the way Go writes it.
    assert_eq!(ev("abs", &["-9223372036854775808"]), "9223372036854776000");
}

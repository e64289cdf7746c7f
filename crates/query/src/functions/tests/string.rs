use super::*;

#[test]
fn string_functions_match_couchbase_test_cases() {
    // Proves the constant statements of string_functions/case_str.json in couchbase/query.
    assert_eq!(ev("contains", &[r#""Couchbaseisdope""#, r#""chbaseisdo""#]), "true");
    let sentence = r#""couchbase is the superior nosql database""#;
    assert_eq!(ev("initcap", &[sentence]), r#""Couchbase Is The Superior Nosql Database""#);
    assert_eq!(ev("title", &[sentence]), r#""Couchbase Is The Superior Nosql Database""#);
    assert_eq!(ev("lower", &[r#""THIS Is a N1Ql QuErY""#]), r#""this is a n1ql query""#);
    assert_eq!(ev("ltrim", &[r#""       THIS Is a N1Ql QuErY""#, r#"" T""#]), r#""HIS Is a N1Ql QuErY""#);
    assert_eq!(ev("position", &[r#""       THIS Is a N1Ql QuErY""#, r#""N1Ql""#]), "17");
    assert_eq!(
        ev("replace", &[r#""esgFSdfa3rjs84tha5gref4  [a-z]""#, r#""[a-z]""#, r#""9""#]),
        r#""esgFSdfa3rjs84tha5gref4  9""#
    );
    assert_eq!(ev("repeat", &[r#""N1QL""#, "5"]), r#""N1QLN1QLN1QLN1QLN1QL""#);
    assert_eq!(
        ev("split", &[r#""Thisisaqueryisasubqandisnotisnull""#, r#""is""#]),
        r#"["Th","","aquery","asubqand","not","null"]"#
    );
    assert_eq!(ev("substr", &[r#""Thisisasubquery""#, "5", "10"]), r#""sasubquery""#);
    assert_eq!(ev("position1", &[r#""blet""#, r#""et""#]), "3");
    for (pos, want) in [("0", "abcdef"), ("1", "abcdef"), ("2", "bcdef"), ("-1", "f")] {
        assert_eq!(ev("substr1", &[r#""abcdef""#, pos]), format!("\"{want}\""));
    }
    assert_eq!(ev("substr1", &[r#""abcdef""#, "-4", "2"]), r#""cd""#);
    assert_eq!(ev("concat2", &[r#""-""#, r#""a""#, r#""b""#, r#"["c","d"]"#, r#"["xyz"]"#]), r#""a-b-c-d-xyz""#);
    assert_eq!(ev("concat2", &[r#""-""#, r#""a""#]), r#""a""#);
    assert_eq!(ev("concat2", &[r#""-""#, r#"["b"]"#]), r#""b""#);
    let sql = r#""SQL SQL SQL""#;
    assert_eq!(ev("replace", &[sql, r#""S""#, r#""N1""#, "-1"]), r#""N1QL N1QL N1QL""#);
    assert_eq!(ev("replace", &[sql, r#""S""#, r#""N1""#, "2"]), r#""N1QL N1QL SQL""#);
    assert_eq!(ev("replace", &[sql, r#""S""#, r#""N1""#]), r#""N1QL N1QL N1QL""#);
    assert_eq!(ev("lpad", &[r#""<-""#, "15", r#""- pad str""#]), r#""- pad str- pa<-""#);
    assert_eq!(ev("rpad", &[r#""->""#, "15", r#""- pad str""#]), r#""->- pad str- pa""#);
    assert_eq!(ev("lpad", &[r#""default""#, "15"]), r#""        default""#);
    assert_eq!(ev("rpad", &[r#""default""#, "15"]), r#""default        ""#);
    assert_eq!(ev("lpad", &[r#""truncated""#, "5"]), r#""trunc""#);
    assert_eq!(ev("rpad", &[r#""truncated""#, "5"]), r#""trunc""#);
}

#[test]
fn byte_and_character_variants_match_couchbase_on_multibyte_text() {
    // Proves the '日本語で日本' row of case_str.json: byte functions count UTF-8 bytes and show cut characters as
    // U+FFFD, the MB_ functions count characters.
    let (s, sub) = (r#""日本語で日本""#, r#""で日本""#);
    assert_eq!(ev("length", &[s]), "18");
    assert_eq!(ev("mb_length", &[s]), "6");
    assert_eq!(ev("pos0", &[s, sub]), "9");
    assert_eq!(ev("mb_pos0", &[s, sub]), "3");
    assert_eq!(ev("pos1", &[s, sub]), "10");
    assert_eq!(ev("mb_pos1", &[s, sub]), "4");
    assert_eq!(ev("substr0", &[s, "3", "1"]), "\"\u{fffd}\"");
    assert_eq!(ev("mb_substr0", &[s, "3", "1"]), r#""で""#);
    assert_eq!(ev("substr1", &[s, "3", "1"]), "\"\u{fffd}\"");
    assert_eq!(ev("mb_substr1", &[s, "3", "1"]), r#""語""#);
    assert_eq!(ev("lpad", &[s, "25", sub]), "\"で日\u{fffd}日本語で日本\"");
    assert_eq!(ev("mb_lpad", &[s, "25", sub]), format!("\"{}語で日本\"", "で日本".repeat(6) + "で日本"));
    assert_eq!(ev("rpad", &[s, "25", sub]), "\"日本語で日本で日\u{fffd}\"");
    assert_eq!(ev("mb_rpad", &[s, "25", sub]), format!("\"日本語で日本{}で\"", "で日本".repeat(6)));
}

#[test]
fn mask_follows_couchbase_test_cases() {
    // Proves every MASK row of case_str.json: default mask, holes, injection, source length and anchors.
    let s = r#""Some text to mask""#;
    let cases = [
        ("{}", "********"),
        (r#"{"mask":"++ ++ ++ ++"}"#, "++m++t++t++"),
        (r#"{"length":"source"}"#, "********t to mask"),
        (r#"{"anchor":"end"}"#, "********"),
        (r#"{"mask":"LONGERTHANTHESOURCE"}"#, "LONGERTHANTHESOURCE"),
        (r#"{"mask":"LONGERTHANTHESOURCE","length":"source"}"#, "LONGERTHANTHESOUR"),
        (r#"{"mask":"LONGERTHANTHESOURCE","anchor":-10}"#, "LONGERTHANTHESOURCExt to mask"),
        (r#"{"mask":"LONGERTHANTHESOURCE","anchor":-10,"length":"source"}"#, "ESOURCExt to mask"),
        (r#"{"anchor":"text"}"#, "Some ********"),
        (r#"{"anchor":"text","length":"source"}"#, "Some ********mask"),
        (r#"{"mask":"**++**++**++**","hole":"+","inject":"*"}"#, "**So**me** t**"),
        (r#"{"mask":"**++**++**++**","hole":"+"}"#, "**me**ex**to**"),
        (r#"{"mask":"**++**++**++**","hole":"+","inject":"*","length":"source"}"#, "**So**me** t**ext to mask"),
        (r#"{"mask":"**++**++**++**","hole":"+","length":"source"}"#, "**me**ex**to**ask"),
    ];
    assert_eq!(ev("mask", &[s]), r#""********""#);
    for (opts, want) in cases {
        assert_eq!(ev("mask", &[s, opts]), format!("\"{want}\""), "{opts}");
    }
    assert_eq!(ev("mask", &[s, r#"{"anchor":"zzz"}"#]), s);
    assert_eq!(ev("mask", &[s, "1"]), "null");
    assert_eq!(ev("mask", &[s, "MISSING"]), "MISSING");
    assert!(ev("mask", &[s, r#"{"anchor":"("}"#]).starts_with("ERROR"));
}

#[test]
fn unknown_and_wrong_type_arguments_follow_the_usual_rules() {
    // Proves MISSING is returned before NULL whatever the position, and wrong types give NULL (func_str.go).
    assert_eq!(ev("lower", &["MISSING"]), "MISSING");
    assert_eq!(ev("lower", &["1"]), "null");
    assert_eq!(ev("concat", &[r#""a""#, "null", "MISSING"]), "MISSING");
    assert_eq!(ev("concat", &[r#""a""#, "1"]), "null");
    assert_eq!(ev("concat2", &[r#""-""#, r#"["a", 1]"#]), "null");
    assert_eq!(ev("concat2", &[r#"["-"]"#, r#""a""#]), "null");
    assert_eq!(ev("trim", &[r#""  a  ""#, "MISSING"]), "MISSING");
    assert_eq!(ev("replace", &[r#""a""#, r#""a""#, r#""b""#, "1.5"]), "null");
    assert_eq!(ev("substr", &[r#""abc""#, "1.5"]), "null");
    assert_eq!(ev("substr", &[r#""abc""#, "3"]), "null");
    assert_eq!(ev("substr", &[r#""abc""#, "0", "-1"]), "null");
    assert_eq!(ev("substr", &[r#""abc""#, "1", "100"]), r#""bc""#);
    assert_eq!(ev("repeat", &[r#""a""#, "-1"]), "null");
    assert_eq!(ev("lpad", &[r#""a""#, "3", r#""""#]), "null");
    assert_eq!(ev("position", &[r#""abc""#, r#""z""#]), "-1");
    assert_eq!(ev("position1", &[r#""abc""#, r#""z""#]), "0");
}

#[test]
fn text_helpers_behave_like_go() {
    // Proves Go's simple case mapping, Fields-style SPLIT, empty-separator SPLIT, trims by character set,
    // SUFFIXES, REVERSE keeping combining marks, and Go's query escaping.
    assert_eq!(ev("upper", &[r#""straße""#]), r#""STRAßE""#);
    assert_eq!(ev("lower", &[r#""İX""#]), r#""ix""#);
    assert_eq!(ev("title", &[r#""hello_world o'neil""#]), r#""Hello_world O'Neil""#);
    assert_eq!(ev("split", &[r#""  a \t b\nc  ""#]), r#"["a","b","c"]"#);
    assert_eq!(ev("split", &[r#""aé""#, r#""""#]), r#"["a","é"]"#);
    assert_eq!(ev("trim", &[r#""xxaxyx""#, r#""xy""#]), r#""a""#);
    assert_eq!(ev("rtrim", &[r#""a \t\n""#]), r#""a""#);
    assert_eq!(ev("suffixes", &[r#""abc""#]), r#"["abc","bc","c"]"#);
    assert_eq!(ev("reverse", &[r#""abc""#]), r#""cba""#);
    assert_eq!(ev("reverse", &["\"e\u{301}x\""]), "\"xe\u{301}\"");
    assert_eq!(ev("urlencode", &[r#""a b&c=d/é~""#]), r#""a+b%26c%3Dd%2F%C3%A9~""#);
    assert_eq!(ev("urldecode", &[r#""a+b%26c%3Dd%2F%C3%A9~""#]), r#""a b&c=d/é~""#);
    assert_eq!(ev("urldecode", &[r#""%zz""#]), "null");
    assert_eq!(ev("urldecode", &[r#""%4""#]), "null");
}

#[test]
fn oversized_results_are_errors_not_allocations() {
    // Proves REPEAT, LPAD, REPLACE and SUFFIXES refuse results beyond 20 MiB (Couchbase's size error) and REPEAT
    // refuses counts beyond 2^31 - 1 (its range error), before allocating anything.
    assert!(ev("repeat", &[r#""abc""#, "10000000"]).starts_with("ERROR: Size of REPEAT() result exceeds limit"));
    assert!(ev("repeat", &[r#""""#, "3000000000"]).starts_with("ERROR: Out of range evaluating REPEAT()"));
    assert_eq!(ev("repeat", &[r#""""#, "2000000000"]), r#""""#);
    assert!(ev("lpad", &[r#""a""#, "1e12"]).starts_with("ERROR: Size of LPAD()"));
    assert!(ev("mb_rpad", &[r#""a""#, "1e12", r#""é""#]).starts_with("ERROR: Size of MB_RPAD()"));
    let big = format!("\"{}\"", "a".repeat(10_000));
    assert!(
        ev("replace", &[&big, r#""""#, &format!("\"{}\"", "b".repeat(5_000))]).starts_with("ERROR: Size of REPLACE()")
    );
    assert!(ev("suffixes", &[&big]).starts_with("ERROR: Size of SUFFIXES()"));
}

#[test]
fn splitting_into_many_pieces_is_bounded() {
    // Proves SPLIT counts what its pieces really take (a value each, not only their bytes): a million characters
    // split into characters is refused, a hundred thousand are fine.
    let million = format!("\"{}\"", "a".repeat(1_000_000));
    assert!(ev("split", &[&million, r#""""#]).starts_with("ERROR: Size of SPLIT()"));
    let many = Value::from("a,".repeat(100_000));
    let parts = call("split", &[many, val(r#"",""#)]).unwrap();
    assert_eq!(parts.as_array().map(<[Value]>::len), Some(100_001));
}

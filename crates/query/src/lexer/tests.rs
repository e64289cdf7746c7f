use super::*;

fn kinds(text: &str) -> Vec<TokenKind<'_>> {
    tokenize(text).into_iter().map(|t| t.kind).collect()
}

fn ident(s: &str) -> TokenKind<'_> {
    TokenKind::Ident(Cow::Borrowed(s))
}

fn string(s: &str) -> TokenKind<'_> {
    TokenKind::Str(Cow::Borrowed(s))
}

#[test]
fn keywords_are_case_insensitive_and_backticked_names_are_identifiers() {
    // Proves `SeLeCt` is the SELECT keyword, `selected` an identifier, and `` `select` `` an identifier.
    assert_eq!(
        kinds("SeLeCt selected `select` default"),
        vec![
            TokenKind::Keyword(Kw::Select),
            ident("selected"),
            ident("select"),
            TokenKind::Keyword(Kw::Default),
            TokenKind::Eof
        ]
    );
}

#[test]
fn strings_take_either_quote_and_resolve_escapes() {
    // Proves both quote styles are string literals, `''` escapes a single quote, and `\u` escapes decode.
    assert_eq!(
        kinds(r#"'it''s' "say \"hi\"" '\u00e9'"#),
        vec![
            TokenKind::Str(Cow::Owned("it's".into())),
            TokenKind::Str(Cow::Owned("say \"hi\"".into())),
            TokenKind::Str(Cow::Owned("é".into())),
            TokenKind::Eof
        ]
    );
    assert_eq!(kinds("'plain'"), vec![string("plain"), TokenKind::Eof]);
}

#[test]
fn doubled_quotes_only_escape_in_single_quoted_strings() {
    // Proves `"a""b"` is two strings (n1ql.nex has no doubled-quote rule for double quotes) while `` `a``b` `` is one
    // identifier.
    assert_eq!(kinds(r#""a""b""#), vec![string("a"), string("b"), TokenKind::Eof]);
    assert_eq!(kinds("`a``b`"), vec![TokenKind::Ident(Cow::Owned("a`b".into())), TokenKind::Eof]);
}

#[test]
fn unterminated_quotes_end_the_tokens_with_an_error() {
    // Proves an unterminated string or identifier runs to the end and becomes one error token with Couchbase's text.
    let tokens = tokenize("I'm not N1QL!");
    assert_eq!(tokens[0].kind, ident("I"));
    assert_eq!(tokens[1].kind, TokenKind::Error("invalid quoted string - missing closing quote".into()));
    assert_eq!(tokens[1].text, "'m not N1QL!");
    assert_eq!(tokens[1].column, 1);
    let tokens = tokenize("FROM `default`.`s");
    assert_eq!(tokens[3].kind, TokenKind::Error("invalid escaped identifier - missing closing quote".into()));
    // A doubled backtick right after the opening one is an empty name, then the text goes on.
    assert_eq!(kinds("``default`")[0], ident(""));
}

#[test]
fn numbers_are_ints_when_they_fit_and_floats_otherwise() {
    // Proves integers, decimals, exponents, i64 overflow to float, and Couchbase's no-leading-zero rule.
    assert_eq!(
        kinds("42 1.5 2e3 1.5E-2"),
        vec![TokenKind::Int(42), TokenKind::Num(1.5), TokenKind::Num(2000.0), TokenKind::Num(0.015), TokenKind::Eof]
    );
    assert_eq!(kinds("9223372036854775807"), vec![TokenKind::Int(i64::MAX), TokenKind::Eof]);
    assert_eq!(kinds("9223372036854775808"), vec![TokenKind::Num(9.223_372_036_854_776e18), TokenKind::Eof]);
    assert_eq!(kinds("007"), vec![TokenKind::Int(0), TokenKind::Int(0), TokenKind::Int(7), TokenKind::Eof]);
    assert_eq!(kinds("1."), vec![TokenKind::Int(1), TokenKind::Punct(Punct::Dot), TokenKind::Eof]);
    assert_eq!(kinds("1e+5x"), vec![TokenKind::Num(1e5), ident("x"), TokenKind::Eof]);
}

#[test]
fn digits_run_into_letters_are_an_invalid_number() {
    // Proves `1abc` (and `1e5x`, longer than the exponent form) are errors, as n1ql.nex's invalid-number rule makes them.
    assert_eq!(kinds("1abc"), vec![TokenKind::Error("invalid number".into()), TokenKind::Eof]);
    assert_eq!(kinds("1e5x")[0], TokenKind::Error("invalid number".into()));
    // A float beyond a double's range has no value settee could print back; Couchbase reads it as infinity.
    assert_eq!(kinds("1e999")[0], TokenKind::Error("invalid number".into()));
}

#[test]
fn parameters_take_names_positions_and_question_marks() {
    // Proves `$name`, `@name`, `$1`, `?` and `??`, and that a lone `$` is an unknown character.
    assert_eq!(
        kinds("$bucket_name @x $12 ? ??"),
        vec![
            TokenKind::NamedParam("bucket_name"),
            TokenKind::NamedParam("x"),
            TokenKind::PositionalParam(Some(12)),
            TokenKind::NextParam,
            TokenKind::RandomElement,
            TokenKind::Eof
        ]
    );
    assert_eq!(kinds("$ 0")[0], TokenKind::Unknown);
}

#[test]
fn operators_take_the_longest_match() {
    // Proves two-character operators win over their prefixes and `]i` is its own token, as in n1ql.nex.
    let p = TokenKind::Punct;
    assert_eq!(
        kinds("== != <> <= >= || = < > ]i ] !"),
        vec![
            p(Punct::DEq),
            p(Punct::Ne),
            p(Punct::Ne),
            p(Punct::Le),
            p(Punct::Ge),
            p(Punct::Concat),
            p(Punct::Eq),
            p(Punct::Lt),
            p(Punct::Gt),
            p(Punct::RBracketIcase),
            p(Punct::RBracket),
            p(Punct::Bang),
            TokenKind::Eof
        ]
    );
}

#[test]
fn comments_are_skipped_and_hints_kept() {
    // Proves `--` and `/* */` comments vanish, hints stay tokens, and an unterminated `/*` lexes as `/` `*`.
    assert_eq!(kinds("a -- note\n/* block */ b"), vec![ident("a"), ident("b"), TokenKind::Eof]);
    assert_eq!(kinds("SELECT /*+ INDEX(b ix) */ 1")[1], TokenKind::OptimHints);
    assert_eq!(kinds("--+ hint")[0], TokenKind::OptimHints);
    assert_eq!(
        kinds("/* open"),
        vec![TokenKind::Punct(Punct::Div), TokenKind::Punct(Punct::Star), ident("open"), TokenKind::Eof]
    );
}

#[test]
fn positions_count_lines_and_characters() {
    // Proves lines start at 0 after each `\n` and columns count characters, not bytes.
    let tokens = tokenize("'é' x\n  y");
    assert_eq!((tokens[1].line, tokens[1].column), (0, 4));
    assert_eq!((tokens[2].line, tokens[2].column), (1, 2));
    assert_eq!(tokens[2].offset, 9);
}

#[test]
fn case_insensitive_identifiers_are_refused() {
    // Proves Couchbase's `` `name`i `` form becomes an error token rather than an identifier followed by `i`.
    assert!(matches!(&kinds("`abc`i")[0], TokenKind::Error(m) if m.contains("case-insensitive")));
}

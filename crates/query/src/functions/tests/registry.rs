use super::*;

#[test]
fn names_are_lowercase_and_unique() {
    // Proves the index loses no function to a duplicate name and that lookup's lowercasing can find each one.
    let mut seen = std::collections::HashSet::new();
    for f in all() {
        assert_eq!(f.name, f.name.to_ascii_lowercase(), "{}", f.name);
        assert!(seen.insert(f.name), "{} is registered twice", f.name);
        assert!(f.min_args <= f.max_args, "{}", f.name);
    }
}

#[test]
fn lookup_ignores_case_and_knows_aggregates_and_specials() {
    // Proves names resolve in any case, and that aggregates and META are listed with their arity.
    let count = lookup("CoUnT").expect("count");
    assert!(matches!(count.kind, FnKind::Aggregate(Aggregate::Count)));
    assert!(count.accepts(0) && count.accepts(1) && !count.accepts(2));
    assert!(matches!(lookup("VAR_SAMP").map(|f| f.kind), Some(FnKind::Aggregate(Aggregate::VarianceSamp))));
    assert!(matches!(lookup("meta").map(|f| f.kind), Some(FnKind::Special)));
    assert!(lookup("no_such_function").is_none());
}

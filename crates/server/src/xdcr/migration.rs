//! Collections migration mode (`collectionsMigrationMode=true`), as goxdcr reads it: only the documents of the
//! source's default collection are replicated, and `colMappingRules` sends each one to target collections by its
//! content. Each rule's key is a filter expression (SQL++ over the document and `META()`, the same language as
//! `filterExpression`) and its value a target `scope.collection`.
//!
//! As goxdcr does, a document is checked against every rule and goes to the target collection of each rule that
//! matches (a copy per collection: the rules are a JSON object, with no order to pick a first match by); a
//! document that matches none, or that a rule cannot evaluate, is not replicated by that rule; a deletion or an
//! expiration has no body to match and passes every rule, so it reaches every target collection a version of
//! the document may have gone to. One rule `"_default._default": "scope.collection"` is the special explicit
//! form: every document of the default collection goes to that collection.

use settee_query::index::DocFilter;

use super::filter::DocInput;
use super::mapping::MappingRules;
use settee_xdcr::{Change, ChangeKind};

/// goxdcr's words for the rules it refuses in migration mode.
pub const DENY_RULE: &str = "Deny rules are not allowed for migration mode";
pub const EXPLICIT_ONLY_ONE: &str =
    "One single rule migrating from default collection to a target collection cannot be accompanied by any other rules";
const SCOPE_TO_SCOPE: &str = "seems like a scope to scope rule, which is not allowed under migration mode";

/// A scope or collection name as Couchbase allows it (letters, digits, `_`, `-`, `%`; at most 251 bytes).
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 251 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-%".contains(&b))
}

/// `scope.collection`, both valid names.
fn namespace(s: &str) -> Option<(&str, &str)> {
    s.split_once('.').filter(|(scope, collection)| is_name(scope) && is_name(collection))
}

fn is_default(s: &str) -> bool {
    s == "_default._default"
}

/// The single `"_default._default": "scope.collection"` rule, if that is what the rules are.
fn explicit_target(rules: &MappingRules) -> Option<&str> {
    if rules.len() != 1 {
        return None;
    }
    let (source, target) = rules.entries().next()?;
    (is_default(source) && namespace(target?).is_some()).then_some(target?)
}

/// Checks migration rules with goxdcr's messages: no `null` (deny) rule, no scope-to-scope rule, the explicit
/// default-collection rule alone, every key a filter expression that compiles, every value a
/// `scope.collection`.
pub fn check(rules: &MappingRules) -> Result<(), String> {
    if explicit_target(rules).is_some() {
        return Ok(());
    }
    for (source, target) in rules.entries() {
        let Some(target) = target else { return Err(DENY_RULE.into()) };
        if is_default(source) && namespace(target).is_some() {
            return Err(EXPLICIT_ONLY_ONE.into());
        }
        // A bare name to a bare name: scopes (SQL++ would read the key as a field, but the target is no collection).
        if is_name(source) && is_name(target) {
            return Err(format!("{source} -> {target} {SCOPE_TO_SCOPE}"));
        }
    }
    let mut problems = Vec::new();
    for (source, target) in rules.entries() {
        if let Err(e) = DocFilter::compile(source) {
            problems.push(format!("{source} : {e}"));
        }
        let target = target.unwrap_or_default();
        if namespace(target).is_none() {
            problems.push(format!("{target} : Invalid collection namespace: must be scope.collection"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join(", "))
    }
}

/// Checked migration rules, compiled once per run.
pub struct MigrationRules {
    /// The explicit form's one target collection.
    explicit: Option<String>,
    /// Each filter and its target `scope.collection`.
    rules: Vec<(DocFilter, String)>,
}

impl MigrationRules {
    /// Compiles rules that passed [`check`]; a rule that no longer compiles (stored by another version) is left
    /// out with an error logged, so it replicates nothing rather than everything.
    pub fn compile(rules: &MappingRules, replication: &str) -> MigrationRules {
        if let Some(target) = explicit_target(rules) {
            return MigrationRules { explicit: Some(target.to_owned()), rules: Vec::new() };
        }
        let mut compiled = Vec::new();
        for (source, target) in rules.entries() {
            match (DocFilter::compile(source), target) {
                (Ok(filter), Some(target)) => compiled.push((filter, target.to_owned())),
                (Err(e), _) => {
                    tracing::error!(replication, rule = source, error = %e, "xdcr migration rule does not compile")
                }
                (_, None) => tracing::error!(replication, rule = source, "xdcr migration rule has no target"),
            }
        }
        MigrationRules { explicit: None, rules: compiled }
    }

    /// Whether [`Self::targets`] reads the document (a filter rule and a mutation).
    pub fn needs_document(&self, c: &Change) -> bool {
        self.explicit.is_none() && c.kind == ChangeKind::Mutation
    }

    /// The target collections of `c`, a change of the source's default collection (`doc` is its evaluation input
    /// when [`Self::needs_document`]).
    pub fn targets(&self, c: &Change, doc: Option<&DocInput>) -> Vec<&str> {
        if let Some(target) = &self.explicit {
            return vec![target.as_str()];
        }
        match (c.kind, doc) {
            (ChangeKind::Mutation, Some(doc)) => {
                self.rules.iter().filter(|(f, _)| doc.matches(f)).map(|(_, t)| t.as_str()).collect()
            }
            (ChangeKind::Mutation, None) => Vec::new(),
            // A tombstone passes every rule: wherever a version of the document went, its deletion follows.
            (ChangeKind::Deletion | ChangeKind::Expiration, _) => self.rules.iter().map(|(_, t)| t.as_str()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> MappingRules {
        MappingRules::from_json(text).expect("a JSON object")
    }

    fn change(kind: ChangeKind, key: &str, body: &str) -> Change {
        Change {
            kind,
            key: key.as_bytes().to_vec(),
            collection: 0,
            value: body.as_bytes().to_vec(),
            datatype: if body.is_empty() { 0 } else { 1 },
            cas: 1,
            seqno: 1,
            rev: 1,
            flags: 0,
            expiry: 0,
        }
    }

    /// Proves the checks refuse what goxdcr refuses, with its words: a deny (null) rule, a scope-to-scope rule, the
    /// explicit default-collection rule beside others, a key that is not a filter, a value that is not a
    /// collection; and accept filter rules and the explicit rule alone.
    #[test]
    fn rules_are_refused_with_goxdcrs_words_when_they_are_not_migration_rules() {
        assert_eq!(check(&rules(r#"{"type = \"hotel\"": null}"#)), Err(DENY_RULE.into()));
        let scope_to_scope = check(&rules(r#"{"inventory": "stock"}"#));
        assert!(scope_to_scope.is_err_and(|e| e.contains("seems like a scope to scope rule")));
        let crowded = check(&rules(r#"{"_default._default": "s.c", "type = \"a\"": "s.d"}"#));
        assert_eq!(crowded, Err(EXPLICIT_ONLY_ONE.into()));
        assert!(check(&rules(r#"{"type = ": "s.c"}"#)).is_err_and(|e| e.starts_with("type =  : ")));
        assert!(check(&rules(r#"{"type = \"a\"": "justascope"}"#)).is_err_and(|e| e.contains("scope.collection")));
        assert_eq!(check(&rules(r#"{"type = \"a\"": "s.c", "REGEXP_CONTAINS(META().id, \"^b\")": "s.d"}"#)), Ok(()));
        assert_eq!(check(&rules(r#"{"_default._default": "s.c"}"#)), Ok(()));
    }

    /// Proves a document goes to every rule it matches (none: nowhere), a deletion to every rule's collection,
    /// and the explicit form sends everything to its one collection.
    #[test]
    fn documents_go_to_each_matching_rule_and_tombstones_to_all() {
        let r = MigrationRules::compile(
            &rules(r#"{"type = \"hotel\"": "travel.hotels", "stars > 3": "travel.best"}"#),
            "r",
        );
        let targets = |c: &Change| {
            let doc = r.needs_document(c).then(|| DocInput::of(c));
            let mut t: Vec<String> = r.targets(c, doc.as_ref()).into_iter().map(str::to_owned).collect();
            t.sort();
            t
        };
        assert_eq!(targets(&change(ChangeKind::Mutation, "h1", r#"{"type":"hotel","stars":2}"#)), ["travel.hotels"]);
        assert_eq!(
            targets(&change(ChangeKind::Mutation, "h2", r#"{"type":"hotel","stars":5}"#)),
            ["travel.best", "travel.hotels"]
        );
        assert!(targets(&change(ChangeKind::Mutation, "a1", r#"{"type":"airline"}"#)).is_empty());
        assert!(targets(&change(ChangeKind::Mutation, "bin", "")).is_empty(), "a binary body matches no field");
        assert_eq!(targets(&change(ChangeKind::Deletion, "h1", "")), ["travel.best", "travel.hotels"]);
        let explicit = MigrationRules::compile(&rules(r#"{"_default._default": "travel.all"}"#), "r");
        let c = change(ChangeKind::Mutation, "x", "{}");
        assert!(!explicit.needs_document(&c));
        assert_eq!(explicit.targets(&c, None), ["travel.all"]);
    }
}

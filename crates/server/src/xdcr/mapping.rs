//! Explicit collection mapping (`collectionsExplicitMapping=true` with `colMappingRules`), as goxdcr reads it: a
//! JSON object from source namespaces to target namespaces, each `"scope"` or `"scope.collection"`. A
//! collection rule sends that collection to the named one; a scope rule sends every collection of the scope to the
//! collection of the same name in the target scope; the collection rule wins over its scope's; `null` replicates
//! nothing of that namespace. A collection no rule names is not replicated.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Parsed `colMappingRules`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingRules(BTreeMap<String, Option<String>>);

/// A namespace's depth: a scope, or a collection of a scope.
fn depth(ns: &str) -> Result<usize, String> {
    let parts: Vec<&str> = ns.split('.').collect();
    if parts.len() > 2 || parts.iter().any(|p| p.is_empty()) {
        return Err(format!("`{ns}` is not a scope or a scope.collection name"));
    }
    Ok(parts.len())
}

impl MappingRules {
    /// Reads `text`: a JSON object of string keys to string or null values, with at least one rule. What the keys
    /// and values may be depends on the mode: [`Self::check_explicit`], or `migration::check` in migration mode.
    pub fn from_json(text: &str) -> Result<MappingRules, String> {
        let rules: BTreeMap<String, Option<String>> =
            serde_json::from_str(text).map_err(|e| format!("not a JSON object of namespaces: {e}"))?;
        if rules.is_empty() {
            return Err("the mapping needs at least one rule".into());
        }
        Ok(MappingRules(rules))
    }

    /// Checks the rules as explicit mapping reads them: a rule maps a scope to a scope, a collection to a
    /// collection.
    pub fn check_explicit(&self) -> Result<(), String> {
        for (source, target) in &self.0 {
            let from = depth(source)?;
            if let Some(target) = target {
                if depth(target)? != from {
                    return Err(format!("`{source}` and `{target}` must both be scopes or both collections"));
                }
            }
        }
        Ok(())
    }

    /// Reads and checks explicit mapping rules.
    pub fn parse(text: &str) -> Result<MappingRules, String> {
        let rules = Self::from_json(text)?;
        rules.check_explicit()?;
        Ok(rules)
    }

    /// The rules, source key first, in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_deref()))
    }

    /// The target `scope.collection` of source collection `scope.collection`; None when it is not replicated.
    pub fn target(&self, scope: &str, collection: &str) -> Option<String> {
        if let Some(rule) = self.0.get(&format!("{scope}.{collection}")) {
            return rule.clone();
        }
        match self.0.get(scope) {
            Some(Some(target_scope)) => Some(format!("{target_scope}.{collection}")),
            _ => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The rules as Couchbase shows them (`colMappingRules`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A collection rule beats its scope's; a scope rule keeps collection names; null and unnamed namespaces are
    /// not replicated; malformed rules are refused with the reason.
    #[test]
    fn rules_map_scopes_and_collections_as_goxdcr_does() {
        let r = MappingRules::parse(
            r#"{"inventory": "stock", "inventory.secret": null, "orders.eu": "sales.europe", "_default": "_default"}"#,
        )
        .unwrap();
        assert_eq!(r.target("inventory", "hotels").as_deref(), Some("stock.hotels"));
        assert_eq!(r.target("inventory", "secret"), None);
        assert_eq!(r.target("orders", "eu").as_deref(), Some("sales.europe"));
        assert_eq!(r.target("orders", "us"), None, "no rule, no replication");
        assert_eq!(r.target("_default", "_default").as_deref(), Some("_default._default"));
        for bad in [r#"{"a": "b.c"}"#, r#"{"a.b.c": "d"}"#, r#"{}"#, r#"["a"]"#, r#"{"a.": "b."}"#] {
            assert!(MappingRules::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(MappingRules::parse(r#"{"a":"b"}"#).unwrap().to_json(), serde_json::json!({"a": "b"}));
    }
}

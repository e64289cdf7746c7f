//! The GET_ERROR_MAP answer: version 2 of Couchbase's error map, listing every status the server can return with
//! a name, a description and attributes (the C++ SDK aborts on an entry missing any of them).

use serde_json::{json, Map, Value};
use settee_types::Status;

pub const ERROR_MAP_VERSION: u16 = 2;
const REVISION: u64 = 1;

/// The error map as JSON text; built once at startup.
pub fn error_map_json() -> String {
    let mut errors = Map::new();
    for s in Status::ALL {
        let attrs: Vec<&str> = s.attrs().iter().map(|a| a.name()).collect();
        let mut entry = json!({"name": s.name(), "desc": s.description(), "attrs": attrs});
        if attrs.contains(&"retry-later") {
            // Exponential backoff, as Couchbase advertises for temporary failures.
            entry["retry"] =
                json!({"strategy": "exponential", "interval": 10, "after": 0, "max-duration": 500, "ceil": 100});
        }
        errors.insert(format!("{:x}", s.code()), entry);
    }
    json!({"version": ERROR_MAP_VERSION, "revision": REVISION, "errors": Value::Object(errors)}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every status appears under its hex code with the three fields the C++ client reads with `at()`.
    #[test]
    fn error_map_lists_every_status_completely() {
        let v: Value = serde_json::from_str(&error_map_json()).unwrap();
        assert_eq!(v["version"], 2);
        let errors = v["errors"].as_object().unwrap();
        assert_eq!(errors.len(), Status::ALL.len());
        for s in Status::ALL {
            let e = &errors[&format!("{:x}", s.code())];
            assert_eq!(e["name"], s.name());
            assert!(e["desc"].is_string() && e["attrs"].as_array().is_some_and(|a| !a.is_empty()), "{s:?}");
        }
        assert_eq!(errors["7"]["name"], "NOT_MY_VBUCKET");
    }
}

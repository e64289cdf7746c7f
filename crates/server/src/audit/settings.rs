//! The audit settings (`/settings/audit`): what the cluster metadata stores (whole, as a JSON value the cluster
//! crate does not read), how a POST form is checked against Couchbase's ranges, and the GET answer.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::events::{self, default_disabled};

/// Couchbase's bounds: a file is rotated after 15 minutes to 7 days (whole minutes), and after at most 500 MiB
/// (0 turns rotation by size off).
pub const ROTATE_INTERVAL_SECS_MIN: u64 = 15 * 60;
pub const ROTATE_INTERVAL_SECS_MAX: u64 = 7 * 24 * 3600;
pub const ROTATE_SIZE_MAX: u64 = 500 * 1024 * 1024;

/// A user whose events are not written (`disabledUsers`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditUser {
    pub name: String,
    /// `local` or `external`, as Couchbase names user domains.
    pub domain: String,
}

/// The cluster's audit settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditSettings {
    pub enabled: bool,
    /// The directory holding `audit.log`; None: each node's `<data-dir>/logs`.
    pub log_path: Option<PathBuf>,
    pub rotate_interval_secs: u64,
    /// Bytes after which the file is rotated; 0 never.
    pub rotate_size: u64,
    /// Event ids not written (filterable ones only).
    pub disabled: Vec<u32>,
    pub disabled_users: Vec<AuditUser>,
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            enabled: false,
            log_path: None,
            rotate_interval_secs: 86_400,
            rotate_size: 20 * 1024 * 1024,
            disabled: default_disabled(),
            disabled_users: Vec::new(),
        }
    }
}

impl AuditSettings {
    /// The settings the metadata holds; null (never set) or unreadable gives the defaults (audit off).
    pub fn from_metadata(value: &Value) -> AuditSettings {
        if value.is_null() {
            return AuditSettings::default();
        }
        serde_json::from_value(value.clone()).unwrap_or_else(|e| {
            tracing::error!(error = %e, "the cluster's audit settings cannot be read; audit stays off");
            AuditSettings::default()
        })
    }

    /// `GET /settings/audit`, with `log_dir` the directory this node writes to.
    pub fn to_json(&self, log_dir: &Path) -> Value {
        let users: Vec<Value> =
            self.disabled_users.iter().map(|u| json!({"name": u.name, "domain": u.domain})).collect();
        json!({
            "auditdEnabled": self.enabled,
            "logPath": log_dir.display().to_string(),
            "rotateInterval": self.rotate_interval_secs,
            "rotateSize": self.rotate_size,
            "disabled": self.disabled,
            "disabledUsers": users,
        })
    }

    /// Applies the fields a `POST /settings/audit` form names (each optional, as Couchbase's) to a copy of `self`;
    /// every invalid field is reported, keyed by its name, as ns_server's `{"errors": {...}}`.
    pub fn edited(&self, get: impl Fn(&str) -> Option<String>) -> Result<AuditSettings, Map<String, Value>> {
        let mut next = self.clone();
        let mut errors = Map::new();
        let mut fail = |field: &str, message: String| {
            errors.insert(field.to_owned(), Value::String(message));
        };
        if let Some(v) = get("auditdEnabled") {
            match v.as_str() {
                "true" => next.enabled = true,
                "false" => next.enabled = false,
                _ => fail("auditdEnabled", crate::rest::form::BOOL_EXPECTED.into()),
            }
        }
        if let Some(v) = get("logPath") {
            match check_log_path(&v) {
                Ok(path) => next.log_path = Some(path),
                Err(message) => fail("logPath", message),
            }
        }
        if let Some(v) = get("rotateInterval") {
            match v.trim().parse::<u64>() {
                Ok(n) if (ROTATE_INTERVAL_SECS_MIN..=ROTATE_INTERVAL_SECS_MAX).contains(&n) && n % 60 == 0 => {
                    next.rotate_interval_secs = n
                }
                Ok(n) if n % 60 != 0 => fail("rotateInterval", "The value must be a multiple of 60".into()),
                _ => fail(
                    "rotateInterval",
                    format!("The value must be in range from {ROTATE_INTERVAL_SECS_MIN} to {ROTATE_INTERVAL_SECS_MAX}"),
                ),
            }
        }
        if let Some(v) = get("rotateSize") {
            match v.trim().parse::<u64>() {
                Ok(n) if n <= ROTATE_SIZE_MAX => next.rotate_size = n,
                _ => fail("rotateSize", format!("The value must be in range from 0 to {ROTATE_SIZE_MAX}")),
            }
        }
        if let Some(v) = get("disabled") {
            match parse_disabled(&v) {
                Ok(ids) => next.disabled = ids,
                Err(message) => fail("disabled", message),
            }
        }
        if let Some(v) = get("disabledUsers") {
            match parse_users(&v) {
                Ok(users) => next.disabled_users = users,
                Err(message) => fail("disabledUsers", message),
            }
        }
        if errors.is_empty() {
            Ok(next)
        } else {
            Err(errors)
        }
    }

    /// The fields of the `modify audit settings` event (8240), as ns_server writes them.
    pub fn event_fields(&self, log_dir: &Path) -> Map<String, Value> {
        let users: Vec<String> = self.disabled_users.iter().map(|u| format!("{}/{}", u.name, u.domain)).collect();
        let mut fields = Map::new();
        fields.insert("auditd_enabled".into(), json!(self.enabled));
        fields.insert("log_path".into(), json!(log_dir.display().to_string()));
        fields.insert("rotate_interval".into(), json!(self.rotate_interval_secs));
        fields.insert("rotate_size".into(), json!(self.rotate_size));
        fields.insert("disabled".into(), json!(self.disabled));
        fields.insert("disabled_users".into(), json!(users));
        fields
    }
}

/// An absolute path to a directory this node can create and write into.
fn check_log_path(raw: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(raw.trim());
    if !path.is_absolute() {
        return Err("The value must be an absolute path".into());
    }
    std::fs::create_dir_all(&path).map_err(|e| format!("The value must be a valid directory: {e}"))?;
    let probe = path.join(".settee-audit-probe");
    std::fs::write(&probe, b"").map_err(|e| format!("The directory is not writable: {e}"))?;
    let _ = std::fs::remove_file(probe);
    Ok(path)
}

/// Comma-separated event ids, each known and filterable; empty is none.
fn parse_disabled(raw: &str) -> Result<Vec<u32>, String> {
    let mut ids = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let id: u32 = part.parse().map_err(|_| format!("{part} is not an event id"))?;
        match events::lookup(id) {
            Some((_, d)) if d.filterable => ids.push(id),
            Some(_) => return Err(format!("Event {id} cannot be disabled")),
            None => return Err(format!("Unknown event id {id}")),
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// Comma-separated `name/domain` entries (`local` or `external`); empty is none.
fn parse_users(raw: &str) -> Result<Vec<AuditUser>, String> {
    let mut users = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, domain) = part.rsplit_once('/').ok_or_else(|| format!("{part}: expected name/domain"))?;
        if name.is_empty() || !matches!(domain, "local" | "external") {
            return Err(format!("{part}: expected name/local or name/external"));
        }
        users.push(AuditUser { name: name.to_owned(), domain: domain.to_owned() });
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn edits_apply_only_the_named_fields() {
        // Proves a form naming some fields leaves the others as they were, and the lists parse as Couchbase's.
        let before = AuditSettings::default();
        let after = before
            .edited(form(&[("auditdEnabled", "true"), ("disabled", "20488, 8232"), ("disabledUsers", "bob/local")]))
            .expect("valid");
        assert!(after.enabled);
        assert_eq!(after.disabled, vec![8232, 20488]);
        assert_eq!(after.disabled_users, vec![AuditUser { name: "bob".into(), domain: "local".into() }]);
        assert_eq!(after.rotate_size, before.rotate_size);
        assert_eq!(after.edited(form(&[("disabled", "")])).expect("valid").disabled, Vec::<u32>::new());
    }

    #[test]
    fn out_of_range_values_are_refused_per_field() {
        // Proves each bad field is named in the errors and nothing is applied.
        let errors = AuditSettings::default()
            .edited(form(&[
                ("auditdEnabled", "yes"),
                ("rotateInterval", "60"),
                ("rotateSize", "524288001"),
                ("disabled", "20481"),
                ("disabledUsers", "bob"),
                ("logPath", "relative/dir"),
            ]))
            .expect_err("invalid");
        for field in ["auditdEnabled", "rotateInterval", "rotateSize", "disabled", "disabledUsers", "logPath"] {
            assert!(errors.contains_key(field), "{field} refused: {errors:?}");
        }
        let errors =
            AuditSettings::default().edited(form(&[("rotateInterval", "1000"), ("disabled", "7")])).unwrap_err();
        assert_eq!(errors["rotateInterval"], "The value must be a multiple of 60");
        assert_eq!(errors["disabled"], "Unknown event id 7");
    }

    #[test]
    fn null_metadata_reads_as_the_defaults() {
        // Proves a cluster that never set audit has it off, with Couchbase's default rotation and filters.
        let s = AuditSettings::from_metadata(&Value::Null);
        assert_eq!(s, AuditSettings::default());
        assert!(!s.enabled && s.disabled.contains(&events::DOCUMENT_READ));
        let stored = serde_json::to_value(&s).expect("encode");
        assert_eq!(AuditSettings::from_metadata(&stored), s);
    }
}

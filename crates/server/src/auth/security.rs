//! The cluster's security settings: the fields of Couchbase's `/settings/security` that settee acts on, and
//! `/settings/clientCertAuth`. One JSON object in the replicated metadata (`MetaCommand::SetSecurity`), applied by
//! every node without a restart: the SASL mechanisms a KV connection may use, the oldest TLS version the TLS ports
//! accept, and whether (and how) a client certificate authenticates its connection.
//!
//! Sans-IO: parsing, validation and the certificate-to-user mapping are pure; the TLS module reads the names out of
//! a certificate and the listeners apply the result.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::Mechanism;

/// Couchbase accepts at most this many prefixes in `/settings/clientCertAuth`.
pub const CLIENT_CERT_PREFIXES_MAX: usize = 10;

/// The security settings. Every field has Couchbase's default, so a cluster that never set them has these.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecuritySettings {
    pub tls_min_version: TlsMinVersion,
    pub scram_sha1_enabled: bool,
    pub scram_sha256_enabled: bool,
    pub scram_sha512_enabled: bool,
    /// settee's own: whether SASL PLAIN (the password in clear inside the frame) is accepted on the plain KV port.
    /// Couchbase always accepts it; an operator who wants passwords only over TLS or through SCRAM turns it off.
    pub allow_plain_auth_without_tls: bool,
    pub client_cert_auth: ClientCertAuth,
    pub password_policy: PasswordPolicy,
    /// What node-to-node traffic is encrypted once every node has `nodeEncryption` on (see [`EncryptionLevel`]).
    pub cluster_encryption_level: EncryptionLevel,
}

/// Couchbase's `clusterEncryptionLevel`. It applies only while every node has node encryption on; until then
/// nothing between nodes is encrypted (ns_server's effective level `none`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncryptionLevel {
    /// The control plane: Raft and the node-to-node REST calls.
    #[default]
    Control,
    /// Every node-to-node connection: also DCP replication and the query service's peer calls.
    All,
    /// `all`, and the plain client ports accept only loopback connections (to 127.0.0.1 or ::1).
    Strict,
}

impl EncryptionLevel {
    pub fn name(self) -> &'static str {
        match self {
            EncryptionLevel::Control => "control",
            EncryptionLevel::All => "all",
            EncryptionLevel::Strict => "strict",
        }
    }
}

impl Default for SecuritySettings {
    fn default() -> Self {
        SecuritySettings {
            tls_min_version: TlsMinVersion::V12,
            scram_sha1_enabled: true,
            scram_sha256_enabled: true,
            scram_sha512_enabled: true,
            allow_plain_auth_without_tls: true,
            client_cert_auth: ClientCertAuth::default(),
            password_policy: PasswordPolicy::default(),
            cluster_encryption_level: EncryptionLevel::Control,
        }
    }
}

/// `/settings/passwordPolicy`: what a password set from now on must contain (passwords set before stay valid).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PasswordPolicy {
    pub min_length: u32,
    pub enforce_uppercase: bool,
    pub enforce_lowercase: bool,
    pub enforce_digits: bool,
    pub enforce_special_chars: bool,
}

impl Default for PasswordPolicy {
    /// Couchbase's default: six characters, nothing else required.
    fn default() -> Self {
        PasswordPolicy {
            min_length: 6,
            enforce_uppercase: false,
            enforce_lowercase: false,
            enforce_digits: false,
            enforce_special_chars: false,
        }
    }
}

/// The characters `enforceSpecialChars` asks for one of (ns_server's list).
pub const PASSWORD_SPECIAL_CHARS: &str = "@%+\\/'\"!#$^?:,(){}[]~`-_";

impl PasswordPolicy {
    /// Parses `POST /settings/passwordPolicy` (ns_server's validators: `minLength` required, 0 to 100, the four
    /// flags booleans, nothing else).
    pub fn from_form(fields: &[(String, String)]) -> Result<PasswordPolicy, serde_json::Map<String, Value>> {
        let mut policy = PasswordPolicy::default();
        let mut min_length = None;
        let mut errors = serde_json::Map::new();
        for (name, value) in fields {
            let flag = match name.as_str() {
                "minLength" => {
                    match value.parse::<u32>() {
                        Ok(n) if n <= 100 => min_length = Some(n),
                        _ => {
                            errors.insert(name.clone(), json!("The value must be an integer between 0 and 100"));
                        }
                    }
                    continue;
                }
                "enforceUppercase" => &mut policy.enforce_uppercase,
                "enforceLowercase" => &mut policy.enforce_lowercase,
                "enforceDigits" => &mut policy.enforce_digits,
                "enforceSpecialChars" => &mut policy.enforce_special_chars,
                _ => {
                    errors.insert(name.clone(), json!("Unsupported key"));
                    continue;
                }
            };
            match value.as_str() {
                "true" => *flag = true,
                "false" => *flag = false,
                _ => {
                    errors.insert(name.clone(), json!("The value must be one of the following: [true,false]"));
                }
            }
        }
        match min_length {
            Some(n) if errors.is_empty() => Ok(PasswordPolicy { min_length: n, ..policy }),
            None if !errors.contains_key("minLength") => {
                errors.insert("minLength".to_owned(), json!("The value must be supplied"));
                Err(errors)
            }
            _ => Err(errors),
        }
    }

    /// The first rule `password` breaks, with ns_server's message; None when it meets the policy.
    pub fn violation(&self, password: &str) -> Option<String> {
        if password.chars().count() < self.min_length as usize {
            return Some(format!("The password must be at least {} characters long.", self.min_length));
        }
        if password.chars().any(char::is_control) {
            return Some("The password must not contain control characters".to_owned());
        }
        let rules: [(bool, fn(char) -> bool, &str); 4] = [
            (self.enforce_uppercase, char::is_uppercase, "The password must contain at least one uppercase letter"),
            (self.enforce_lowercase, char::is_lowercase, "The password must contain at least one lowercase letter"),
            (self.enforce_digits, |c| c.is_ascii_digit(), "The password must contain at least one digit"),
            (self.enforce_special_chars, |c| PASSWORD_SPECIAL_CHARS.contains(c), ""),
        ];
        rules.iter().find(|(on, test, _)| *on && !password.chars().any(*test)).map(|(_, _, message)| {
            if message.is_empty() {
                format!("The password must contain at least one of the following characters: {PASSWORD_SPECIAL_CHARS}")
            } else {
                (*message).to_owned()
            }
        })
    }
}

/// The oldest TLS version the TLS ports accept (`tlsMinVersion`). settee never offers TLS 1.0 or 1.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TlsMinVersion {
    #[serde(rename = "tlsv1.2")]
    V12,
    #[serde(rename = "tlsv1.3")]
    V13,
}

/// `/settings/clientCertAuth`: whether the TLS ports ask for a client certificate, and how its names map to a user.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCertAuth {
    pub state: ClientCertState,
    pub prefixes: Vec<CertPrefix>,
}

/// Couchbase's three states: `disable` (no certificate asked for), `enable` (one is asked for and, when given,
/// authenticates the connection), `mandatory` (a connection without one fails its handshake).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientCertState {
    #[default]
    Disable,
    Enable,
    Mandatory,
}

/// One mapping rule: the certificate field to read, a prefix the value must start with (removed), and the
/// characters that end the user name (the rest of the value is dropped).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertPrefix {
    pub path: CertPath,
    pub prefix: String,
    pub delimiter: String,
}

/// The certificate fields a user name may come from, as Couchbase names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CertPath {
    #[serde(rename = "subject.cn")]
    SubjectCn,
    #[serde(rename = "san.dnsname")]
    SanDnsName,
    #[serde(rename = "san.uri")]
    SanUri,
    #[serde(rename = "san.email")]
    SanEmail,
}

/// The names a client certificate carries, read by the TLS module from the leaf certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertNames {
    pub common_names: Vec<String>,
    pub dns_names: Vec<String>,
    pub uris: Vec<String>,
    pub emails: Vec<String>,
}

impl CertNames {
    fn at(&self, path: CertPath) -> &[String] {
        match path {
            CertPath::SubjectCn => &self.common_names,
            CertPath::SanDnsName => &self.dns_names,
            CertPath::SanUri => &self.uris,
            CertPath::SanEmail => &self.emails,
        }
    }
}

impl ClientCertAuth {
    /// Parses the JSON body of `POST /settings/clientCertAuth` with ns_server's rules: exactly `state` and
    /// `prefixes`, a known state, at most [`CLIENT_CERT_PREFIXES_MAX`] prefixes, each with exactly `path`, `prefix`
    /// and `delimiter`, no two with the same path and prefix, and at least one unless the state is `disable`.
    pub fn from_request(body: &Value) -> Result<ClientCertAuth, Vec<String>> {
        let Some(fields) = body.as_object() else { return Err(vec!["Invalid JSON".to_owned()]) };
        let (Some(state), Some(prefixes)) = (fields.get("state"), fields.get("prefixes")) else {
            return Err(vec!["Unsupported format: Must contain 'state' and 'prefixes' fields".to_owned()]);
        };
        if fields.len() > 2 {
            return Err(vec!["Unsupported fields: Must contain 'state' and 'prefixes' fields only".to_owned()]);
        }
        let Some(prefixes) = prefixes.as_array() else {
            return Err(vec!["'prefixes' must be a list".to_owned()]);
        };
        if prefixes.len() > CLIENT_CERT_PREFIXES_MAX {
            return Err(vec![format!("Maximum number of prefixes supported is {CLIENT_CERT_PREFIXES_MAX}")]);
        }
        let mut errors = Vec::new();
        let state = serde_json::from_value::<ClientCertState>(state.clone()).map_err(|_| {
            errors.push(format!("Invalid value '{}' for key 'state'", state.as_str().unwrap_or_default()));
        });
        if state.is_ok_and(|s| s != ClientCertState::Disable) && prefixes.is_empty() {
            let state = fields["state"].as_str().unwrap_or_default();
            errors.push(format!("'prefixes' cannot be empty when the 'state' is '{state}'"));
        }
        let mut parsed: Vec<CertPrefix> = Vec::new();
        for entry in prefixes {
            match parse_prefix(entry) {
                Ok(p) if parsed.iter().any(|q| q.path == p.path && q.prefix == p.prefix) => errors.push(format!(
                    "Multiple entries with same path & prefix ({}, {}) are not allowed",
                    path_name(p.path),
                    p.prefix
                )),
                Ok(p) => parsed.push(p),
                Err(e) => errors.push(e),
            }
        }
        match state {
            Ok(state) if errors.is_empty() => Ok(ClientCertAuth { state, prefixes: parsed }),
            _ => Err(errors),
        }
    }

    /// The user a certificate with `names` authenticates as: the first rule, in order, whose field holds a value
    /// that starts with its prefix and, cut at its first delimiter, names a user `lookup` finds. None when no rule
    /// gives one: such a certificate authenticates nobody (the connection is refused, as Couchbase refuses it).
    pub fn user_for<U>(&self, names: &CertNames, lookup: impl Fn(&str) -> Option<U>) -> Option<U> {
        self.prefixes.iter().find_map(|rule| {
            names.at(rule.path).iter().find_map(|value| {
                let rest = value.strip_prefix(rule.prefix.as_str())?;
                let end = rest.find(|c| rule.delimiter.contains(c)).unwrap_or(rest.len());
                Some(&rest[..end]).filter(|user| !user.is_empty()).and_then(&lookup)
            })
        })
    }

    /// Whether a client certificate, when given, authenticates its connection.
    pub fn enabled(&self) -> bool {
        self.state != ClientCertState::Disable
    }

    /// The JSON `GET /settings/clientCertAuth` answers.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn parse_prefix(entry: &Value) -> Result<CertPrefix, String> {
    let fields = entry.as_object().filter(|f| {
        let mut keys: Vec<&str> = f.keys().map(String::as_str).collect();
        keys.sort_unstable();
        keys == ["delimiter", "path", "prefix"] && f.values().all(Value::is_string)
    });
    let Some(fields) = fields else {
        return Err(format!("Invalid prefixes entry ({entry}). Must contain 'path', 'prefix' & 'delimiter' fields."));
    };
    let path = serde_json::from_value::<CertPath>(fields["path"].clone())
        .map_err(|_| format!("Invalid value '{}' for key 'path'", fields["path"].as_str().unwrap_or_default()))?;
    let text = |k: &str| fields[k].as_str().unwrap_or_default().to_owned();
    Ok(CertPrefix { path, prefix: text("prefix"), delimiter: text("delimiter") })
}

fn path_name(path: CertPath) -> String {
    serde_json::to_value(path).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

impl SecuritySettings {
    /// The settings kept in the metadata; null (never set) or unreadable is the defaults, the latter logged.
    pub fn from_metadata(value: &Value) -> SecuritySettings {
        if value.is_null() {
            return SecuritySettings::default();
        }
        serde_json::from_value(value.clone()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the cluster's security settings are unreadable; using the defaults");
            SecuritySettings::default()
        })
    }

    pub fn to_metadata(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// These settings with the fields of a `POST /settings/security` form changed (`field` gives a form value).
    /// Unknown fields, values out of range, and node-to-node encryption (which settee does not have) are refused
    /// with an error per field, as ns_server answers them.
    pub fn edited(&self, fields: &[(String, String)]) -> Result<SecuritySettings, serde_json::Map<String, Value>> {
        let mut next = self.clone();
        let mut errors = serde_json::Map::new();
        for (name, value) in fields {
            let flag = |target: &mut bool, errors: &mut serde_json::Map<String, Value>| match value.as_str() {
                "true" => *target = true,
                "false" => *target = false,
                _ => {
                    errors.insert(name.clone(), json!("Value must be a boolean (true or false)"));
                }
            };
            match name.as_str() {
                "tlsMinVersion" => match value.as_str() {
                    "tlsv1.2" => next.tls_min_version = TlsMinVersion::V12,
                    "tlsv1.3" => next.tls_min_version = TlsMinVersion::V13,
                    _ => {
                        errors.insert(name.clone(), json!("Supported TLS versions are tlsv1.2, tlsv1.3"));
                    }
                },
                "scramSha1Enabled" => flag(&mut next.scram_sha1_enabled, &mut errors),
                "scramSha256Enabled" => flag(&mut next.scram_sha256_enabled, &mut errors),
                "scramSha512Enabled" => flag(&mut next.scram_sha512_enabled, &mut errors),
                "allowPlainAuthWithoutTls" => flag(&mut next.allow_plain_auth_without_tls, &mut errors),
                "clusterEncryptionLevel" => match value.as_str() {
                    "control" => next.cluster_encryption_level = EncryptionLevel::Control,
                    "all" => next.cluster_encryption_level = EncryptionLevel::All,
                    "strict" => next.cluster_encryption_level = EncryptionLevel::Strict,
                    _ => {
                        errors.insert(
                            name.clone(),
                            json!("Cluster encryption level must be one of [\"control\",\"all\",\"strict\"]"),
                        );
                    }
                },
                _ => {
                    errors.insert(name.clone(), json!("Unsupported key"));
                }
            }
        }
        if errors.is_empty() {
            Ok(next)
        } else {
            Err(errors)
        }
    }

    /// The JSON `GET /settings/security` answers: the fields settee acts on, `clusterEncryptionLevel` only when
    /// `encrypted` (every node has node encryption on), as ns_server.
    pub fn to_json(&self, encrypted: bool) -> Value {
        let mut v = self.to_metadata();
        if let Some(fields) = v.as_object_mut() {
            fields.remove("clientCertAuth");
            fields.remove("passwordPolicy");
            // ns_server shows the level only while every node has node encryption on.
            if !encrypted {
                fields.remove("clusterEncryptionLevel");
            }
        }
        v
    }

    /// Whether `mechanism` may authenticate a KV connection (`tls`: one to the TLS port).
    pub fn mechanism_allowed(&self, mechanism: Mechanism, tls: bool) -> bool {
        match mechanism {
            Mechanism::Plain => tls || self.allow_plain_auth_without_tls,
            Mechanism::Scram(super::ScramHash::Sha1) => self.scram_sha1_enabled,
            Mechanism::Scram(super::ScramHash::Sha256) => self.scram_sha256_enabled,
            Mechanism::Scram(super::ScramHash::Sha512) => self.scram_sha512_enabled,
        }
    }

    /// The SASL_LIST_MECHS answer for a connection (`tls`: to the TLS port), strongest first.
    pub fn mechanisms(&self, tls: bool) -> String {
        Mechanism::ALL
            .iter()
            .filter(|m| self.mechanism_allowed(**m, tls))
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ScramHash;

    fn names(cn: &[&str], emails: &[&str], uris: &[&str]) -> CertNames {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        CertNames { common_names: own(cn), dns_names: Vec::new(), uris: own(uris), emails: own(emails) }
    }

    fn rules(body: Value) -> ClientCertAuth {
        ClientCertAuth::from_request(&body).expect("valid settings")
    }

    /// A certificate maps to the first rule's user that exists: the prefix is removed, the value is cut at the
    /// first delimiter, a value without the prefix or naming an unknown user falls through to the next value or
    /// rule, and a certificate nothing maps gives no user.
    #[test]
    fn user_for_follows_rules_in_order_and_needs_an_existing_user() {
        let auth = rules(json!({"state": "enable", "prefixes": [
            {"path": "san.email", "prefix": "", "delimiter": "@"},
            {"path": "subject.cn", "prefix": "app-", "delimiter": ".;"},
        ]}));
        let exists = |u: &str| ["alice", "reader"].contains(&u).then(|| u.to_owned());
        assert_eq!(
            auth.user_for(&names(&["app-reader.prod"], &["bob@x", "alice@x"], &[]), exists).as_deref(),
            Some("alice")
        );
        assert_eq!(auth.user_for(&names(&["app-reader.prod"], &["bob@x"], &[]), exists).as_deref(), Some("reader"));
        assert_eq!(auth.user_for(&names(&["reader"], &[], &[]), exists), None, "the prefix is required");
        assert_eq!(auth.user_for(&names(&["app-"], &[], &[]), |u| Some(u.to_owned())), None, "an empty name is nobody");
        assert_eq!(auth.user_for(&names(&[], &[], &["alice"]), exists), None, "no rule reads the URIs");
    }

    /// ns_server's validation: both fields and only them, a known state, prefixes unless disabled, complete and
    /// distinct prefix entries with a known path, at most ten.
    #[test]
    fn from_request_refuses_what_ns_server_refuses() {
        let entry = |path: &str, prefix: &str| json!({"path": path, "prefix": prefix, "delimiter": ""});
        let refused = |body: Value| ClientCertAuth::from_request(&body).expect_err("refused");
        assert!(refused(json!({"state": "enable"}))[0].contains("Must contain"));
        assert!(refused(json!({"state": "enable", "prefixes": [], "x": 1}))[0].contains("only"));
        assert!(refused(json!({"state": "sometimes", "prefixes": []}))[0].contains("'state'"));
        assert!(refused(json!({"state": "mandatory", "prefixes": []}))[0].contains("cannot be empty"));
        assert!(refused(json!({"state": "enable", "prefixes": [{"path": "subject.cn"}]}))[0]
            .contains("Invalid prefixes entry"));
        assert!(refused(json!({"state": "enable", "prefixes": [entry("subject.o", "")]}))[0].contains("'path'"));
        let twice = json!({"state": "enable", "prefixes": [entry("subject.cn", "a"), entry("subject.cn", "a")]});
        assert!(refused(twice)[0].contains("Multiple entries"));
        let many: Vec<Value> = (0..11).map(|i| entry("subject.cn", &i.to_string())).collect();
        assert!(refused(json!({"state": "enable", "prefixes": many}))[0].contains("Maximum"));
        let off = rules(json!({"state": "disable", "prefixes": []}));
        assert_eq!(off, ClientCertAuth::default());
        let on = rules(json!({"state": "mandatory", "prefixes": [entry("san.uri", "www.")]}));
        assert_eq!(on.to_json(), json!({"state": "mandatory", "prefixes": [entry("san.uri", "www.")]}));
    }

    /// The form changes only the fields it names, refuses unknown fields, bad values and node-to-node encryption,
    /// and the result survives the metadata round trip.
    #[test]
    fn edited_changes_named_fields_and_refuses_the_rest() {
        let form =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        let base = SecuritySettings::default();
        let next =
            base.edited(&form(&[("tlsMinVersion", "tlsv1.3"), ("allowPlainAuthWithoutTls", "false")])).expect("ok");
        assert_eq!(
            (next.tls_min_version, next.allow_plain_auth_without_tls, next.scram_sha1_enabled),
            (TlsMinVersion::V13, false, true)
        );
        assert_eq!(SecuritySettings::from_metadata(&next.to_metadata()), next);
        assert_eq!(SecuritySettings::from_metadata(&Value::Null), base);
        let errors = base
            .edited(&form(&[
                ("tlsMinVersion", "tlsv1.1"),
                ("clusterEncryptionLevel", "everything"),
                ("scramSha1Enabled", "1"),
                ("bogus", "x"),
            ]))
            .expect_err("refused");
        let mut keys: Vec<&str> = errors.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["bogus", "clusterEncryptionLevel", "scramSha1Enabled", "tlsMinVersion"]);
        let strict = base.edited(&form(&[("clusterEncryptionLevel", "strict")])).expect("a level");
        assert_eq!(strict.cluster_encryption_level, EncryptionLevel::Strict);
        assert_eq!(SecuritySettings::from_metadata(&strict.to_metadata()), strict);
        assert_eq!(strict.to_json(true)["clusterEncryptionLevel"], "strict");
        assert!(strict.to_json(false).get("clusterEncryptionLevel").is_none(), "hidden until encryption is on");
    }

    /// The policy's form follows ns_server's validators, and each rule refuses a password without what it asks for
    /// with ns_server's message; the default is six characters and nothing else.
    #[test]
    fn password_policy_parses_and_checks_like_ns_server() {
        let form =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(
            PasswordPolicy::default().violation("abcde").as_deref(),
            Some("The password must be at least 6 characters long.")
        );
        assert_eq!(PasswordPolicy::default().violation("abcdef"), None);
        let strict = PasswordPolicy::from_form(&form(&[
            ("minLength", "8"),
            ("enforceUppercase", "true"),
            ("enforceLowercase", "true"),
            ("enforceDigits", "true"),
            ("enforceSpecialChars", "true"),
        ]))
        .expect("valid");
        assert!(strict.violation("Abcdefg1").expect("no special").contains("following characters"));
        assert!(strict.violation("abcdefg1!").expect("no upper").contains("uppercase"));
        assert!(strict.violation("ABCDEFG1!").expect("no lower").contains("lowercase"));
        assert!(strict.violation("Abcdefgh!").expect("no digit").contains("digit"));
        assert!(strict.violation("Ab1!").expect("short").contains("at least 8"));
        assert!(strict.violation("Abc\tdefg1!").expect("control").contains("control"));
        assert_eq!(strict.violation("Abcdefg1!"), None);
        let errors = PasswordPolicy::from_form(&form(&[("minLength", "101"), ("enforceDigits", "yes"), ("x", "1")]))
            .expect_err("refused");
        assert_eq!(errors.len(), 3);
        assert!(PasswordPolicy::from_form(&form(&[("enforceDigits", "true")]))
            .expect_err("no minLength")
            .contains_key("minLength"));
        let zero = PasswordPolicy::from_form(&form(&[("minLength", "0")])).expect("zero allowed");
        assert_eq!(zero.violation(""), None);
    }

    /// PLAIN is listed and allowed on the plain port only while the setting allows it, always over TLS; a
    /// disabled SCRAM variant is neither listed nor allowed.
    #[test]
    fn mechanisms_follow_the_settings_and_the_port() {
        let mut s = SecuritySettings::default();
        assert_eq!(s.mechanisms(false), "SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1 PLAIN");
        s.allow_plain_auth_without_tls = false;
        s.scram_sha1_enabled = false;
        assert_eq!(s.mechanisms(false), "SCRAM-SHA512 SCRAM-SHA256");
        assert_eq!(s.mechanisms(true), "SCRAM-SHA512 SCRAM-SHA256 PLAIN");
        assert!(!s.mechanism_allowed(Mechanism::Plain, false) && s.mechanism_allowed(Mechanism::Plain, true));
        assert!(!s.mechanism_allowed(Mechanism::Scram(ScramHash::Sha1), true));
    }
}

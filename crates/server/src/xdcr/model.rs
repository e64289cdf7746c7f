//! What XDCR keeps cluster-wide (in the Raft metadata as one opaque value, `MetaCommand::SetXdcr`): the remote
//! cluster references and the replications with their settings. Couchbase keeps the same in its metakv.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A remote cluster reference (`POST /pools/default/remoteClusters`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteCluster {
    pub name: String,
    /// The remote's cluster uuid (its `/pools` `uuid`), learned when the reference was created.
    pub uuid: String,
    /// `host:port` of the remote's management REST service.
    pub hostname: String,
    pub username: String,
    /// Kept as given: the replicator authenticates with it (see docs/compat.md, XDCR).
    pub password: String,
    /// `demandEncryption=1`: `encryptionType=full` (everything to the remote over TLS) or `half`, trusting this CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<RemoteTls>,
}

/// Encryption to a remote cluster: its CA (`certificate`, PEM) and its TLS management address, learned from its
/// `/nodes/self/xdcrSSLPorts` when the reference was made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteTls {
    pub certificate: String,
    /// `host:port` of the remote's HTTPS management service.
    pub mgmt_tls: String,
    /// goxdcr's half encryption: only the credentials protected. The management calls go over HTTPS (goxdcr's
    /// fallback when the remote's REST has no SCRAM-SHA authentication, as settee's has not) and the KV
    /// connections to the plain ports with SCRAM-SHA512, so the documents travel in clear.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub half: bool,
    /// Full encryption with a client certificate (`clientCertificate`, `clientKey`, PEM) instead of a username: the
    /// source presents it on every TLS connection and the remote maps it to a user (`/settings/clientCertAuth`);
    /// the KV connections then skip SASL. Empty when the reference has a username.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_certificate: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_key: String,
}

impl RemoteTls {
    /// `full` or `half`, as goxdcr shows `encryptionType` and `secureType`.
    pub fn kind(&self) -> &'static str {
        if self.half {
            "half"
        } else {
            "full"
        }
    }

    /// The TLS client for the remote's KV ports: None under half encryption (plain ports).
    pub fn kv_client(&self, hostname: &str) -> Result<Option<settee_client::TlsClient>, String> {
        if self.half {
            return Ok(None);
        }
        self.client(hostname).map(Some)
    }

    /// How the KV connections authenticate: SCRAM on the plain ports under half encryption, by the client
    /// certificate when there is one, else PLAIN inside TLS.
    pub fn kv_auth(&self) -> settee_client::Auth {
        if self.half {
            settee_client::Auth::ScramSha512
        } else if !self.client_certificate.is_empty() {
            settee_client::Auth::Certificate
        } else {
            settee_client::Auth::Plain
        }
    }

    /// The TLS client that trusts the remote's CA; the certificate is checked for the host dialled (its name, or
    /// its address when the reference names an IP address).
    pub fn client(&self, hostname: &str) -> Result<settee_client::TlsClient, String> {
        let client = if self.client_certificate.is_empty() {
            settee_client::TlsClient::with_roots_pem(&self.certificate)
        } else {
            settee_client::TlsClient::with_identity_pem(&self.certificate, &self.client_certificate, &self.client_key)
        };
        let client = client.map_err(|e| e.to_string())?;
        let host = settee_client::host_of(hostname);
        if host.parse::<std::net::IpAddr>().is_ok() {
            Ok(client)
        } else {
            client.with_server_name(host).map_err(|e| e.to_string())
        }
    }
}

impl RemoteCluster {
    /// Couchbase's JSON for one reference (no password).
    pub fn to_json(&self) -> Value {
        let name = &self.name;
        json!({
            "deleted": false,
            "hostname": self.hostname,
            "name": name,
            "secureType": self.encryption.as_ref().map_or("none", RemoteTls::kind),
            "demandEncryption": self.encryption.is_some(),
            "encryptionType": self.encryption.as_ref().map_or("", RemoteTls::kind),
            "certificate": self.encryption.as_ref().map_or("", |t| t.certificate.as_str()),
            "clientCertificate": self.encryption.as_ref().map_or("", |t| t.client_certificate.as_str()),
            "uri": format!("/pools/default/remoteClusters/{name}"),
            "username": self.username,
            "uuid": self.uuid,
            "validateURI": format!("/pools/default/remoteClusters/{name}?just_validate=1"),
        })
    }
}

/// The per-replication settings settee acts on (Couchbase's names in `/settings/replications/<id>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplSettings {
    /// Seconds between checkpoints (`checkpointInterval`).
    pub checkpoint_interval: u64,
    /// Writes per batch (`workerBatchSize`).
    pub worker_batch_size: u64,
    /// `pauseRequested`.
    pub pause_requested: bool,
    /// `filterExpression`: only documents it accepts are replicated (SQL++ over the document and `META()`); empty
    /// for none. Checked when set; a change re-streams from seqno 0 unless `filterSkipRestream` (`Replication::edit`).
    pub filter_expression: String,
    /// `filterDeletion`: deletions are not replicated.
    pub filter_deletion: bool,
    /// `filterExpiration`: deletions by expiry are not replicated.
    pub filter_expiration: bool,
    /// `filterBinary`: documents that are not JSON are not replicated.
    pub filter_binary: bool,
    /// `collectionsExplicitMapping`: collections go where `col_mapping_rules` says (else to the target collection of
    /// the same name).
    pub collections_explicit_mapping: bool,
    /// `collectionsMigrationMode`: only the default collection is replicated, each document to the collections
    /// whose `col_mapping_rules` filter it matches (`xdcr::migration`).
    pub collections_migration_mode: bool,
    /// `colMappingRules`, checked when set (as explicit rules, or as migration rules in migration mode).
    pub col_mapping_rules: super::mapping::MappingRules,
}

impl Default for ReplSettings {
    fn default() -> ReplSettings {
        ReplSettings {
            checkpoint_interval: 600,
            worker_batch_size: 500,
            pause_requested: false,
            filter_expression: String::new(),
            filter_deletion: false,
            filter_expiration: false,
            filter_binary: false,
            collections_explicit_mapping: false,
            collections_migration_mode: false,
            col_mapping_rules: Default::default(),
        }
    }
}

impl ReplSettings {
    /// Applies the fields `get` gives (form fields by Couchbase name); returns the first invalid one.
    pub fn edited(&self, get: impl Fn(&str) -> Option<String>) -> Result<ReplSettings, (String, String)> {
        let mut next = self.clone();
        let number = |field: &str, min: u64, max: u64| -> Result<Option<u64>, (String, String)> {
            let Some(text) = get(field) else { return Ok(None) };
            match text.trim().parse::<u64>() {
                Ok(v) if (min..=max).contains(&v) => Ok(Some(v)),
                _ => Err((field.to_owned(), format!("The value must be an integer between {min} and {max}"))),
            }
        };
        if let Some(v) = number("checkpointInterval", 1, 14_400)? {
            next.checkpoint_interval = v;
        }
        if let Some(v) = number("workerBatchSize", 1, 10_000)? {
            next.worker_batch_size = v;
        }
        let flag = |field: &str| -> Result<Option<bool>, (String, String)> {
            match get(field).as_deref().map(str::trim) {
                None => Ok(None),
                Some("true") => Ok(Some(true)),
                Some("false") => Ok(Some(false)),
                Some(_) => Err((field.to_owned(), crate::rest::form::BOOL_EXPECTED.into())),
            }
        };
        for (field, slot) in [
            ("pauseRequested", &mut next.pause_requested),
            ("filterDeletion", &mut next.filter_deletion),
            ("filterExpiration", &mut next.filter_expiration),
            ("filterBinary", &mut next.filter_binary),
            ("collectionsExplicitMapping", &mut next.collections_explicit_mapping),
            ("collectionsMigrationMode", &mut next.collections_migration_mode),
        ] {
            if let Some(v) = flag(field)? {
                *slot = v;
            }
        }
        if let Some(text) = get("filterExpression") {
            let text = text.trim();
            if !text.is_empty() {
                settee_query::index::DocFilter::compile(text)
                    .map_err(|e| ("filterExpression".to_owned(), format!("Invalid filter expression: {e}")))?;
            }
            next.filter_expression = text.to_owned();
        }
        if let Some(text) = get("colMappingRules") {
            next.col_mapping_rules = super::mapping::MappingRules::from_json(&text)
                .map_err(|e| ("colMappingRules".to_owned(), format!("Invalid mapping rules: {e}")))?;
        }
        next.check_collections()?;
        Ok(next)
    }

    /// The collection settings together, as goxdcr checks them: migration and explicit mapping exclude each
    /// other, each needs rules, and the rules are read as the mode reads them.
    fn check_collections(&self) -> Result<(), (String, String)> {
        let rules_error = |e: String| ("colMappingRules".to_owned(), e);
        if self.collections_migration_mode && self.collections_explicit_mapping {
            return Err((
                "collectionsMigrationMode".into(),
                "Migration and Explicit mapping cannot both be active".into(),
            ));
        }
        if (self.collections_migration_mode || self.collections_explicit_mapping) && self.col_mapping_rules.is_empty() {
            let mode = if self.collections_migration_mode { "migration mode" } else { "explicit mapping" };
            return Err(rules_error(format!("{mode} needs at least one rule")));
        }
        if self.collections_migration_mode {
            super::migration::check(&self.col_mapping_rules).map_err(rules_error)
        } else if self.col_mapping_rules.is_empty() {
            Ok(())
        } else {
            self.col_mapping_rules.check_explicit().map_err(|e| rules_error(format!("Invalid mapping rules: {e}")))
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "checkpointInterval": self.checkpoint_interval,
            "workerBatchSize": self.worker_batch_size,
            "pauseRequested": self.pause_requested,
            "compressionType": "None",
            "filterExpression": self.filter_expression,
            "filterDeletion": self.filter_deletion,
            "filterExpiration": self.filter_expiration,
            "filterBinary": self.filter_binary,
            "type": "xmem",
            "replicationType": "continuous",
            "collectionsExplicitMapping": self.collections_explicit_mapping,
            "colMappingRules": self.col_mapping_rules.to_json(),
            "collectionsMigrationMode": self.collections_migration_mode,
        })
    }
}

/// One replication (`POST /controller/createReplication`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replication {
    /// `<remote uuid>/<source bucket>/<target bucket>`, Couchbase's replication id.
    pub id: String,
    pub source_bucket: String,
    pub remote_uuid: String,
    pub target_bucket: String,
    pub settings: ReplSettings,
    /// How many times the replication was restarted from seqno 0 (a filter or collection mode change without
    /// `filterSkipRestream`): its checkpoints are kept under a key of their own (`checkpoint_key`), so those of an
    /// earlier stream are dropped, on every node, by the same clean-up as a deleted replication's.
    #[serde(default)]
    pub restreams: u64,
}

/// goxdcr's words when an edit names a filter without saying whether to re-stream.
pub const SKIP_RESTREAM_REQUIRED: &str = "Filter skip restream flag is required along with a filter";

impl Replication {
    pub fn id_of(remote_uuid: &str, source: &str, target: &str) -> String {
        format!("{remote_uuid}/{source}/{target}")
    }

    /// The key of this stream's checkpoints (file name and cluster metadata): the id until the first re-stream.
    pub fn checkpoint_key(&self) -> String {
        match self.restreams {
            0 => self.id.clone(),
            n => format!("{}#restream-{n}", self.id),
        }
    }

    /// Applies an edit of the settings (`POST /settings/replications/<id>`). As goxdcr: an edit that names
    /// `filterExpression` must say `filterSkipRestream`; a new filter expression without `filterSkipRestream=true`,
    /// or a switch of the collection mode (explicit mapping or migration on or off), restarts the replication from
    /// seqno 0 (its checkpoints dropped), so documents the old settings left out are sent now.
    pub fn edit(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), (String, String)> {
        let skip = match get("filterSkipRestream") {
            None => None,
            // Go's strconv.ParseBool, which goxdcr reads it with (couchbase-cli sends 0 or 1).
            Some(v) => match v.trim() {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
                "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
                _ => return Err(("filterSkipRestream".into(), crate::rest::form::BOOL_EXPECTED.into())),
            },
        };
        if get("filterExpression").is_some() && skip.is_none() {
            return Err(("filterExpression".into(), SKIP_RESTREAM_REQUIRED.into()));
        }
        let next = self.settings.edited(get)?;
        let old = &self.settings;
        let filter_changed = next.filter_expression != old.filter_expression && skip != Some(true);
        let mode_changed = next.collections_explicit_mapping != old.collections_explicit_mapping
            || next.collections_migration_mode != old.collections_migration_mode;
        if filter_changed || mode_changed {
            self.restreams += 1;
            tracing::info!(replication = %self.id, restreams = self.restreams, "xdcr replication restreams from zero");
        }
        self.settings = next;
        Ok(())
    }
}

/// Everything XDCR keeps cluster-wide.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct XdcrModel {
    pub remotes: Vec<RemoteCluster>,
    pub replications: Vec<Replication>,
}

impl XdcrModel {
    /// The model stored in the metadata; null (never set) or unreadable reads as empty.
    pub fn from_metadata(value: &Value) -> XdcrModel {
        if value.is_null() {
            return XdcrModel::default();
        }
        serde_json::from_value(value.clone()).unwrap_or_else(|e| {
            tracing::error!(error = %e, "the XDCR model in the cluster metadata is unreadable; treating it as empty");
            XdcrModel::default()
        })
    }

    /// The model stored in the metadata, or None when it cannot be read (never treated as "no replications").
    pub fn parse_metadata(value: &Value) -> Option<XdcrModel> {
        if value.is_null() {
            return Some(XdcrModel::default());
        }
        serde_json::from_value(value.clone()).ok()
    }

    pub fn remote(&self, name: &str) -> Option<&RemoteCluster> {
        self.remotes.iter().find(|r| r.name == name)
    }

    pub fn remote_by_uuid(&self, uuid: &str) -> Option<&RemoteCluster> {
        self.remotes.iter().find(|r| r.uuid == uuid)
    }

    pub fn replication(&self, id: &str) -> Option<&Replication> {
        self.replications.iter().find(|r| r.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves settings edits take Couchbase's field names, keep unnamed fields, and refuse out-of-range numbers
    /// and non-boolean pauseRequested with the field named.
    #[test]
    fn settings_edit_keeps_unnamed_fields_when_one_is_changed() {
        let s = ReplSettings::default();
        let get = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        let paused = s.edited(get(&[("pauseRequested", "true")])).unwrap();
        assert_eq!((paused.pause_requested, paused.checkpoint_interval), (true, 600));
        let e = s.edited(get(&[("checkpointInterval", "0")])).unwrap_err();
        assert_eq!(e.0, "checkpointInterval");
        assert_eq!(s.edited(get(&[("pauseRequested", "yes")])).unwrap_err().0, "pauseRequested");
        let filtered = s.edited(get(&[("filterExpression", " country = 'FR' "), ("filterDeletion", "true")])).unwrap();
        assert_eq!(filtered.filter_expression, "country = 'FR'");
        assert!(filtered.filter_deletion && !filtered.filter_expiration && !filtered.filter_binary);
        assert_eq!(s.edited(get(&[("filterExpression", "country =")])).unwrap_err().0, "filterExpression");
        assert_eq!(s.edited(get(&[("filterBinary", "1")])).unwrap_err().0, "filterBinary");
        let cleared = filtered.edited(get(&[("filterExpression", "")])).unwrap();
        assert_eq!((cleared.filter_expression.as_str(), cleared.filter_deletion), ("", true));
    }

    /// Proves the collection settings are checked together as goxdcr checks them: migration rules are filter
    /// expressions to collections, migration and explicit mapping exclude each other, and each mode needs rules.
    #[test]
    fn migration_mode_takes_filter_rules_when_explicit_mapping_is_off() {
        let s = ReplSettings::default();
        fn get<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        }
        let rules = r#"{"type = 'hotel'": "travel.hotels"}"#;
        let m = s.edited(get(&[("collectionsMigrationMode", "true"), ("colMappingRules", rules)])).unwrap();
        assert!(m.collections_migration_mode && m.to_json()["collectionsMigrationMode"] == json!(true));
        assert_eq!(s.edited(get(&[("colMappingRules", rules)])).unwrap_err().0, "colMappingRules", "not explicit");
        let both =
            [("collectionsMigrationMode", "true"), ("collectionsExplicitMapping", "true"), ("colMappingRules", rules)];
        assert_eq!(s.edited(get(&both)).unwrap_err().0, "collectionsMigrationMode");
        assert_eq!(s.edited(get(&[("collectionsMigrationMode", "true")])).unwrap_err().0, "colMappingRules");
        let off =
            m.edited(get(&[("collectionsMigrationMode", "false"), ("colMappingRules", r#"{"a": "b"}"#)])).unwrap();
        assert!(!off.collections_migration_mode, "back to implicit mapping with scope rules kept");
    }

    /// Proves a new filter re-streams (a new checkpoint key) unless `filterSkipRestream` is true, that an edit
    /// naming a filter must say which (goxdcr's words), that switching the collection mode re-streams, and that
    /// other edits keep the checkpoints.
    #[test]
    fn filter_change_restreams_unless_skip_restream_is_set() {
        fn get<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        }
        let mut r = Replication {
            id: "u/a/b".into(),
            source_bucket: "a".into(),
            remote_uuid: "u".into(),
            target_bucket: "b".into(),
            settings: ReplSettings::default(),
            restreams: 0,
        };
        assert_eq!(r.checkpoint_key(), "u/a/b");
        let e = r.edit(get(&[("filterExpression", "x = 1")])).unwrap_err();
        assert_eq!(e, ("filterExpression".into(), SKIP_RESTREAM_REQUIRED.into()));
        r.edit(get(&[("filterExpression", "x = 1"), ("filterSkipRestream", "1")])).unwrap();
        assert_eq!((r.restreams, r.settings.filter_expression.as_str()), (0, "x = 1"), "skipped: checkpoints kept");
        r.edit(get(&[("filterExpression", "x = 2"), ("filterSkipRestream", "false")])).unwrap();
        assert_eq!(r.checkpoint_key(), "u/a/b#restream-1");
        r.edit(get(&[("filterExpression", "x = 2"), ("filterSkipRestream", "0")])).unwrap();
        assert_eq!(r.restreams, 1, "the same filter again is no change");
        r.edit(get(&[("checkpointInterval", "5")])).unwrap();
        assert_eq!(r.restreams, 1);
        r.edit(get(&[("collectionsExplicitMapping", "true"), ("colMappingRules", r#"{"s": "t"}"#)])).unwrap();
        assert_eq!(r.restreams, 2, "a collection mode switch re-streams");
        assert_eq!(r.edit(get(&[("filterSkipRestream", "maybe")])).unwrap_err().0, "filterSkipRestream");
    }

    /// Proves a model round-trips through the metadata's JSON and that null reads as empty.
    #[test]
    fn model_reads_back_when_stored_in_metadata() {
        let m = XdcrModel {
            remotes: vec![RemoteCluster {
                name: "dc2".into(),
                uuid: "u".into(),
                hostname: "h:1".into(),
                username: "a".into(),
                password: "p".into(),
                encryption: None,
            }],
            replications: vec![Replication {
                id: Replication::id_of("u", "a", "b"),
                source_bucket: "a".into(),
                remote_uuid: "u".into(),
                target_bucket: "b".into(),
                settings: ReplSettings::default(),
                restreams: 0,
            }],
        };
        assert_eq!(XdcrModel::from_metadata(&serde_json::to_value(&m).unwrap()), m);
        assert_eq!(XdcrModel::from_metadata(&Value::Null), XdcrModel::default());
        assert!(m.remote_by_uuid("u").is_some() && m.replication("u/a/b").is_some());
    }
}

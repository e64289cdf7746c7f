//! The audit log (issue 17, item 3): who did what, as JSON lines in Couchbase's event shape (`id`, `name`,
//! `description`, `timestamp`, `real_userid {domain, user}`, `remote {ip, port}`, `local {ip, port}` and the
//! event's own fields), written per node to `<logPath>/audit.log` (default `<data-dir>/logs`).
//!
//! Off the hot path: a caller checks [`Audit::wants`] (atomic loads only) and, when the event is wanted, hands a
//! [`Record`] to a bounded queue with `try_send`; one writer thread (`writer.rs`) formats and writes. A full queue
//! never blocks a request: the event is counted as dropped (`/metrics`: `settee_audit_events_dropped_total`) and
//! logged at powers of two. The settings (`settings.rs`) are cluster-wide: stored in the replicated metadata and
//! applied on every node by the reconcile, without a restart.
//!
//! Layout: `events` (the event table with Couchbase's ids), `settings`, `writer`, `time` (timestamps).

pub mod events;
pub mod settings;
mod time;
mod writer;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde_json::{Map, Value};
use settee_types::Clock;

pub use settings::{AuditSettings, AuditUser};
use writer::{Writer, WriterConfig};

/// Events waiting for the writer at most; more are dropped and counted.
pub const QUEUE_EVENTS_MAX: usize = 65_536;

/// Who acted: Couchbase's `real_userid`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `builtin` (the command line's administrator on the REST port, as ns_server's), `local` otherwise.
    pub domain: &'static str,
    pub user: String,
}

/// One event, as handed to the writer.
#[derive(Clone, Debug)]
pub struct Record {
    pub id: u32,
    pub timestamp_nanos: u64,
    pub user: Option<Identity>,
    pub remote: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    pub fields: Fields,
}

/// The event's own fields.
#[derive(Clone, Debug)]
pub enum Fields {
    /// Any fields (`bucket_name`, `reason` ...), in key order.
    Map(Map<String, Value>),
    /// A document event's fields as the KV path has them, so it builds no JSON: `bucket`, `collection_id`, `key`.
    Document { bucket: String, collection: u32, key: Box<[u8]> },
}

/// Appends `,"name":` to a JSON object being written.
fn key(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// Appends `s` as a JSON string (escaped).
fn string(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn addr(out: &mut Vec<u8>, name: &str, a: &SocketAddr) {
    use std::io::Write;
    key(out, name);
    let _ = write!(out, "{{\"ip\":\"{}\",\"port\":{}}}", a.ip(), a.port());
}

impl Record {
    /// Appends the event's line (without its newline) to `out`, writing the JSON directly: the writer thread
    /// formats every event, so it builds no intermediate map.
    pub fn write_line(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(out, "{{\"id\":{}", self.id);
        if let Some((_, d)) = events::lookup(self.id) {
            key(out, "name");
            string(out, d.name);
            key(out, "description");
            string(out, d.description);
        }
        key(out, "timestamp");
        string(out, &time::iso8601(self.timestamp_nanos));
        if let Some(u) = &self.user {
            key(out, "real_userid");
            out.extend_from_slice(b"{\"domain\":");
            string(out, u.domain);
            out.extend_from_slice(b",\"user\":");
            string(out, &u.user);
            out.push(b'}');
        }
        if let Some(a) = &self.remote {
            addr(out, "remote", a);
        }
        if let Some(a) = &self.local {
            addr(out, "local", a);
        }
        match &self.fields {
            Fields::Map(map) => {
                for (k, v) in map {
                    key(out, k);
                    let _ = serde_json::to_writer(&mut *out, v);
                }
            }
            Fields::Document { bucket, collection, key: doc } => {
                key(out, "bucket");
                string(out, bucket);
                key(out, "collection_id");
                let _ = write!(out, "\"{collection:#x}\"");
                key(out, "key");
                string(out, &String::from_utf8_lossy(doc));
            }
        }
        out.push(b'}');
    }

    /// The line written to the file (without its newline).
    pub fn to_json_line(&self) -> String {
        let mut out = Vec::with_capacity(256);
        self.write_line(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// What the writer and the queue count, for `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    pub written: AtomicU64,
    pub dropped: AtomicU64,
    pub rotations: AtomicU64,
}

/// The node's audit log.
pub struct Audit {
    enabled: AtomicBool,
    /// Bit i set when `events::EVENTS[i]` is written.
    events: AtomicU64,
    /// Set when `disabled_users` is not empty, so most events skip its lock.
    filters_users: AtomicBool,
    disabled_users: RwLock<Vec<AuditUser>>,
    settings: Mutex<AuditSettings>,
    default_dir: PathBuf,
    writer_config: Arc<Mutex<WriterConfig>>,
    queue: SyncSender<Record>,
    clock: Arc<dyn Clock>,
    pub counters: Arc<Counters>,
}

impl Audit {
    /// An audit log that is off, writing to `default_dir` once enabled without a `logPath`; starts its writer
    /// thread, which ends when the `Audit` is dropped.
    pub fn new(default_dir: PathBuf, host: &str, clock: Arc<dyn Clock>) -> std::io::Result<Audit> {
        let settings = AuditSettings::default();
        let writer_config = Arc::new(Mutex::new(WriterConfig {
            enabled: false,
            dir: default_dir.clone(),
            rotate_size: settings.rotate_size,
            rotate_interval_secs: settings.rotate_interval_secs,
        }));
        let counters = Arc::new(Counters::default());
        let (queue, receiver) = sync_channel(QUEUE_EVENTS_MAX);
        let writer = Writer::new(writer_config.clone(), clock.clone(), host.to_owned(), counters.clone());
        std::thread::Builder::new().name("audit-writer".into()).spawn(move || writer.run(receiver))?;
        let audit = Audit {
            enabled: AtomicBool::new(false),
            events: AtomicU64::new(0),
            filters_users: AtomicBool::new(false),
            disabled_users: RwLock::new(Vec::new()),
            settings: Mutex::new(settings.clone()),
            default_dir,
            writer_config,
            queue,
            clock,
            counters,
        };
        audit.apply(&settings);
        Ok(audit)
    }

    /// Makes `settings` current on this node; events already queued are written under the new settings.
    pub fn apply(&self, settings: &AuditSettings) {
        let mut mask = 0u64;
        for (bit, d) in events::EVENTS.iter().enumerate() {
            if !(d.filterable && settings.disabled.contains(&d.id)) {
                mask |= 1 << bit;
            }
        }
        *self.disabled_users.write() = settings.disabled_users.clone();
        self.filters_users.store(!settings.disabled_users.is_empty(), Ordering::Release);
        self.events.store(mask, Ordering::Release);
        *self.writer_config.lock() = WriterConfig {
            enabled: settings.enabled,
            dir: self.log_dir_for(settings),
            rotate_size: settings.rotate_size,
            rotate_interval_secs: settings.rotate_interval_secs,
        };
        self.enabled.store(settings.enabled, Ordering::Release);
        let mut current = self.settings.lock();
        if *current != *settings {
            tracing::info!(enabled = settings.enabled, dir = %self.log_dir_for(settings).display(), "audit settings applied");
        }
        *current = settings.clone();
    }

    pub fn settings(&self) -> AuditSettings {
        self.settings.lock().clone()
    }

    /// The directory this node writes `audit.log` to under `settings`.
    pub fn log_dir_for(&self, settings: &AuditSettings) -> PathBuf {
        settings.log_path.clone().unwrap_or_else(|| self.default_dir.clone())
    }

    /// Whether event `id` is written now (audit on and the event not disabled). Atomic loads only.
    #[inline]
    pub fn wants(&self, id: u32) -> bool {
        if !self.enabled.load(Ordering::Relaxed) {
            return false;
        }
        events::lookup(id).is_some_and(|(bit, _)| self.events.load(Ordering::Relaxed) & (1 << bit) != 0)
    }

    /// Whether any document event (read, lock, modify, delete) is written now: the one check the KV path makes.
    #[inline]
    pub fn wants_data(&self) -> bool {
        self.enabled.load(Ordering::Relaxed) && self.events.load(Ordering::Relaxed) & DATA_MASK != 0
    }

    /// Queues event `id` if it is wanted and its user is not filtered out; never blocks.
    pub fn log(&self, id: u32, user: Option<Identity>, addrs: Addrs, fields: Map<String, Value>) {
        if !self.wants(id) {
            return;
        }
        self.log_anyway(id, user, addrs, fields);
    }

    /// Queues document event `id` (20488-20491), with its fields as the KV path has them; the caller checked
    /// [`Audit::wants`] first (before gathering those fields).
    pub fn log_document(
        &self,
        id: u32,
        user: Option<Identity>,
        addrs: Addrs,
        bucket: String,
        collection: u32,
        key: &[u8],
    ) {
        self.enqueue(id, user, addrs, Fields::Document { bucket, collection, key: key.into() });
    }

    /// Queues event `id` while audit is on, even if it is disabled (an audit settings change is always written,
    /// including the one that turns audit off: the writer still holds the file then).
    pub fn log_anyway(&self, id: u32, user: Option<Identity>, addrs: Addrs, fields: Map<String, Value>) {
        self.enqueue(id, user, addrs, Fields::Map(fields));
    }

    fn enqueue(&self, id: u32, user: Option<Identity>, addrs: Addrs, fields: Fields) {
        if self.filters_users.load(Ordering::Relaxed) {
            if let Some(u) = &user {
                if self.disabled_users.read().iter().any(|d| d.name == u.user) {
                    return;
                }
            }
        }
        let record = Record {
            id,
            timestamp_nanos: self.clock.now_nanos(),
            user,
            remote: addrs.remote,
            local: addrs.local,
            fields,
        };
        match self.queue.try_send(record) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if dropped.is_power_of_two() {
                    tracing::warn!(dropped, "audit queue full: events dropped (the writer cannot keep up)");
                }
            }
        }
    }
}

/// The two ends of the connection an event came through; either may be unknown.
#[derive(Clone, Copy, Debug, Default)]
pub struct Addrs {
    pub remote: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
}

/// The filter bits of the document events, the one test the KV path makes per request.
const DATA_MASK: u64 = {
    use events::*;
    let ids = [DOCUMENT_READ, DOCUMENT_LOCKED, DOCUMENT_MODIFY, DOCUMENT_DELETE];
    let mut mask = 0;
    let mut i = 0;
    while i < ids.len() {
        if let Some(bit) = position(ids[i]) {
            mask |= 1 << bit;
        }
        i += 1;
    }
    mask
};

/// The fields of an event: `fields![("bucket_name", name), ...]`.
#[macro_export]
macro_rules! audit_fields {
    ($(($k:expr, $v:expr)),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut m = serde_json::Map::new();
        $(m.insert(($k).to_string(), serde_json::json!($v));)*
        m
    }};
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use settee_types::SystemClock;

    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_blocking() {
        // Proves the hot-path promise: with the writer unable to drain (the queue's far end held by a test), a
        // caller queueing past the bound returns at once and the overflow is counted as dropped.
        let (queue, _held) = sync_channel(2);
        let audit = Audit {
            enabled: AtomicBool::new(true),
            events: AtomicU64::new(u64::MAX),
            filters_users: AtomicBool::new(false),
            disabled_users: RwLock::new(Vec::new()),
            settings: Mutex::new(AuditSettings::default()),
            default_dir: PathBuf::from("/nonexistent"),
            writer_config: Arc::new(Mutex::new(WriterConfig {
                enabled: true,
                dir: PathBuf::from("/nonexistent"),
                rotate_size: 0,
                rotate_interval_secs: 900,
            })),
            queue,
            clock: Arc::new(SystemClock),
            counters: Arc::default(),
        };
        for _ in 0..5 {
            audit.log(events::CREATE_BUCKET, None, Addrs::default(), Map::new());
        }
        assert_eq!(audit.counters.dropped.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn disabled_events_and_users_are_not_wanted() {
        // Proves the filters: audit off wants nothing; on, a disabled filterable event is not wanted, an event
        // that cannot be filtered always is, and the data-access check follows the document events.
        let dir = std::env::temp_dir().join(format!("settee-audit-filters-{}", std::process::id()));
        let audit = Audit::new(dir.clone(), "h", Arc::new(SystemClock)).expect("audit");
        assert!(!audit.wants(events::CREATE_BUCKET) && !audit.wants_data());
        let mut s = AuditSettings { enabled: true, ..AuditSettings::default() };
        s.disabled =
            vec![events::CREATE_BUCKET, events::KV_AUTH_FAILED, events::DOCUMENT_READ, events::DOCUMENT_LOCKED];
        s.disabled.extend([events::DOCUMENT_MODIFY, events::DOCUMENT_DELETE]);
        audit.apply(&s);
        assert!(!audit.wants(events::CREATE_BUCKET));
        assert!(audit.wants(events::KV_AUTH_FAILED), "not filterable");
        assert!(audit.wants(events::DELETE_BUCKET) && !audit.wants_data());
        s.disabled = vec![];
        audit.apply(&s);
        assert!(audit.wants_data());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_record_renders_couchbases_event_shape() {
        // Proves the line's fields: id, name, description, timestamp, real_userid, remote, local and the extras.
        let record = Record {
            id: events::CREATE_BUCKET,
            timestamp_nanos: 0,
            user: Some(Identity { domain: "local", user: "alice".into() }),
            remote: Some("127.0.0.2:5000".parse().unwrap()),
            local: Some("127.0.0.1:8091".parse().unwrap()),
            fields: Fields::Map(audit_fields![("bucket_name", "b")]),
        };
        let v: Value = serde_json::from_str(&record.to_json_line()).expect("json");
        assert_eq!(v["name"], "create bucket");
        assert_eq!(v["description"], "Bucket was created");
        assert_eq!(v["timestamp"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["real_userid"], json!({"domain": "local", "user": "alice"}));
        assert_eq!(v["remote"], json!({"ip": "127.0.0.2", "port": 5000}));
        assert_eq!(v["local"]["port"], 8091);
        assert_eq!(v["bucket_name"], "b");
        let doc = Record {
            id: events::DOCUMENT_READ,
            user: None,
            remote: None,
            fields: Fields::Document { bucket: "b\"q".into(), collection: 8, key: b"k\n1"[..].into() },
            ..record
        };
        let v: Value = serde_json::from_str(&doc.to_json_line()).expect("json with escapes");
        assert_eq!(
            (v["bucket"].as_str(), v["collection_id"].as_str(), v["key"].as_str()),
            (Some("b\"q"), Some("0x8"), Some("k\n1"))
        );
        assert!(v.get("real_userid").is_none() && v["local"]["ip"] == "127.0.0.1");
    }
}

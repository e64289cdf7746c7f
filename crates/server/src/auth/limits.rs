//! Per-user limits (Couchbase 7.1's user rate limits): how many KV connections a user may hold on a node, and how
//! many KV commands, queries and bytes in and out it may use there per minute.
//!
//! A user's limits are ns_server's JSON (`limits` of `PUT /settings/rbac/users/local/<u>`: per service
//! `clusterManager`, `fts`, `query`, `kv`, each a set of positive integers) and are enforced only while the
//! cluster's `enforceLimits` (`POST /internalSettings`) is on, as in Couchbase. Each node counts on its own, as
//! kv_engine and the query service do: a user's open KV connections, and per minute (a window that starts at each
//! whole minute of the node's clock) its KV commands, the bytes of its requests and of the answers it was sent, its
//! queries, their statements' and results' bytes, and its queries running now.
//!
//! What the user is told: KV answers RATE_LIMITED_MAX_CONNECTIONS to the authentication that would open one
//! connection too many, and RATE_LIMITED_MAX_COMMANDS / _NETWORK_INGRESS / _NETWORK_EGRESS to a command over the
//! minute's budget (egress is checked before a command, so the answer that crosses the limit is still sent, as
//! kv_engine does); the query service answers 429 with codes 1191-1194. The SDKs raise RateLimitedException for
//! each. `clusterManager` and `fts` limits are kept and shown but not enforced: settee's REST API has no per-user
//! concurrency accounting and there is no search service.
//!
//! Cost: a user without KV limits pays one branch per command; a limited user one uncontended mutex per command.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use settee_types::{Clock, Status};

use super::User;

const MIB: u64 = 1 << 20;
const MINUTE_NANOS: u64 = 60_000_000_000;

/// One service's limits; `None` is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_connections: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_ops_per_min: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_concurrent_requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_queries_per_min: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_mib_per_min: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_mib_per_min: Option<u64>,
}

/// A user's limits per service, as ns_server stores and shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserLimits {
    #[serde(default, rename = "clusterManager", skip_serializing_if = "Option::is_none")]
    pub cluster_manager: Option<ServiceLimits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fts: Option<ServiceLimits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<ServiceLimits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<ServiceLimits>,
}

/// The fields each service takes (ns_server's `service_user_limit_validators`).
fn fields_of(service: &str) -> Option<&'static [&'static str]> {
    const RATES: [&str; 2] = ["ingress_mib_per_min", "egress_mib_per_min"];
    Some(match service {
        "clusterManager" => &["num_concurrent_requests", RATES[0], RATES[1]],
        "fts" | "query" => &["num_concurrent_requests", "num_queries_per_min", RATES[0], RATES[1]],
        "kv" => &["num_connections", "num_ops_per_min", RATES[0], RATES[1]],
        _ => return None,
    })
}

impl UserLimits {
    /// Parses the `limits` form field, checked as ns_server checks it: a JSON object of known services, each an
    /// object of that service's fields, each an integer of at least 1. The error names the field and says why, in
    /// ns_server's words.
    pub fn parse(text: &str) -> Result<UserLimits, String> {
        let Ok(Value::Object(services)) = serde_json::from_str::<Value>(text) else {
            return Err("Invalid JSON".to_owned());
        };
        let mut limits = UserLimits::default();
        for (service, fields) in &services {
            let Some(known) = fields_of(service) else { return Err(format!("{service}: Unsupported key")) };
            let Value::Object(fields) = fields else { return Err(format!("{service}: Invalid JSON")) };
            let mut parsed = ServiceLimits::default();
            for (field, value) in fields {
                if !known.contains(&field.as_str()) {
                    return Err(format!("{service}.{field}: Unsupported key"));
                }
                let n = match value {
                    Value::Number(n) => n.as_i64(),
                    Value::String(s) => s.trim().parse::<i64>().ok(),
                    _ => None,
                };
                let n = n.ok_or_else(|| format!("{service}.{field}: The value must be an integer"))?;
                let n = u64::try_from(n)
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| format!("{service}.{field}: The value must be in range from 1 to infinity"))?;
                *parsed.field_mut(field) = Some(n);
            }
            *limits.service_mut(service) = Some(parsed);
        }
        Ok(limits)
    }

    /// No service limited (`limits={}` removes a user's limits, as in ns_server).
    pub fn is_empty(&self) -> bool {
        self.cluster_manager.is_none() && self.fts.is_none() && self.query.is_none() && self.kv.is_none()
    }

    fn service_mut(&mut self, service: &str) -> &mut Option<ServiceLimits> {
        match service {
            "clusterManager" => &mut self.cluster_manager,
            "fts" => &mut self.fts,
            "query" => &mut self.query,
            _ => &mut self.kv,
        }
    }
}

impl ServiceLimits {
    fn field_mut(&mut self, field: &str) -> &mut Option<u64> {
        match field {
            "num_connections" => &mut self.num_connections,
            "num_ops_per_min" => &mut self.num_ops_per_min,
            "num_concurrent_requests" => &mut self.num_concurrent_requests,
            "num_queries_per_min" => &mut self.num_queries_per_min,
            "ingress_mib_per_min" => &mut self.ingress_mib_per_min,
            _ => &mut self.egress_mib_per_min,
        }
    }
}

/// What one user used on this node in the current minute.
#[derive(Debug, Default)]
struct Window {
    minute: u64,
    kv: Usage,
    query: Usage,
}

/// One service's use in a window: requests (KV commands, queries), bytes received and bytes sent.
#[derive(Debug, Default)]
struct Usage {
    requests: u64,
    bytes_in: u64,
    bytes_out: u64,
}

/// Which of a service's per-minute budgets a request is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    Requests,
    Ingress,
    Egress,
}

impl Usage {
    /// Counts a request of `bytes` unless it is over `requests_cap` or `limits`' byte budgets (egress is checked
    /// before the request, so the answer that crosses it is still sent).
    fn admit(&mut self, requests_cap: Option<u64>, limits: &ServiceLimits, bytes: u64) -> Result<(), Over> {
        if requests_cap.is_some_and(|cap| self.requests >= cap) {
            return Err(Over::Requests);
        }
        if limits.ingress_mib_per_min.is_some_and(|cap| self.bytes_in + bytes > cap * MIB) {
            return Err(Over::Ingress);
        }
        if limits.egress_mib_per_min.is_some_and(|cap| self.bytes_out >= cap * MIB) {
            return Err(Over::Egress);
        }
        self.requests += 1;
        self.bytes_in += bytes;
        Ok(())
    }
}

/// One user's counters on this node.
#[derive(Debug, Default)]
struct Meter {
    kv_connections: AtomicU32,
    queries_running: AtomicU32,
    window: Mutex<Window>,
}

struct Inner {
    enforced: AtomicBool,
    meters: Mutex<HashMap<String, Arc<Meter>>>,
    clock: Arc<dyn Clock>,
}

impl Inner {
    /// The user's window, rolled over when a new minute began.
    fn window<'m>(&self, meter: &'m Meter) -> parking_lot::MutexGuard<'m, Window> {
        let minute = self.clock.now_nanos() / MINUTE_NANOS;
        let mut w = meter.window.lock();
        if w.minute != minute {
            *w = Window { minute, ..Window::default() };
        }
        w
    }
}

/// The node's per-user counters and whether limits are enforced; clones share them.
#[derive(Clone)]
pub struct Limits {
    inner: Arc<Inner>,
}

impl Limits {
    pub fn new(clock: Arc<dyn Clock>) -> Limits {
        let inner = Inner { enforced: AtomicBool::new(false), meters: Mutex::new(HashMap::new()), clock };
        Limits { inner: Arc::new(inner) }
    }

    /// Whether limits are enforced (the cluster's `enforceLimits`).
    pub fn enforced(&self) -> bool {
        self.inner.enforced.load(Ordering::Relaxed)
    }

    pub fn set_enforced(&self, on: bool) {
        if self.inner.enforced.swap(on, Ordering::Relaxed) != on {
            tracing::info!(enforced = on, "per-user limits");
        }
    }

    fn meter(&self, user: &str) -> Arc<Meter> {
        self.inner.meters.lock().entry(user.to_owned()).or_default().clone()
    }

    /// Drops the counters of users that no longer exist and hold nothing open (bounded by the users there are).
    pub fn forget_absent(&self, exists: impl Fn(&str) -> bool) {
        self.inner.meters.lock().retain(|user, m| {
            exists(user)
                || m.kv_connections.load(Ordering::Relaxed) > 0
                || m.queries_running.load(Ordering::Relaxed) > 0
        });
    }

    /// Counts a KV connection authenticated as `user`; RATE_LIMITED_MAX_CONNECTIONS when it would be one more than
    /// the user's `kv.num_connections` while limits are enforced. The connection holds the answer until it closes.
    pub fn kv_connect(&self, user: &User) -> Result<KvMeter, Status> {
        let meter = self.meter(&user.id);
        let limits = user.limits.as_ref().and_then(|l| l.kv.clone());
        let cap = limits.as_ref().and_then(|l| l.num_connections).filter(|_| self.enforced());
        let taken = meter.kv_connections.fetch_add(1, Ordering::AcqRel);
        if cap.is_some_and(|cap| u64::from(taken) >= cap) {
            meter.kv_connections.fetch_sub(1, Ordering::AcqRel);
            tracing::info!(user = %user.id, connections = taken, "kv connection refused: the user's connection limit");
            return Err(Status::RateLimitedMaxConnections);
        }
        Ok(KvMeter { limits: self.clone(), meter, kv: limits })
    }

    /// Admits a query of `user` whose request has `request_bytes`, or says which limit it is over.
    pub fn query_admit(&self, user: &User, request_bytes: u64) -> Result<QueryTicket, QueryLimit> {
        let meter = self.meter(&user.id);
        let limits = user.limits.as_ref().and_then(|l| l.query.clone()).filter(|_| self.enforced());
        let running = meter.queries_running.fetch_add(1, Ordering::AcqRel);
        let ticket = QueryTicket { limits: self.clone(), meter, counted: limits.is_some() };
        let Some(l) = limits else { return Ok(ticket) };
        if l.num_concurrent_requests.is_some_and(|cap| u64::from(running) >= cap) {
            return Err(QueryLimit::Concurrent);
        }
        let admitted = self.inner.window(&ticket.meter).query.admit(l.num_queries_per_min, &l, request_bytes);
        admitted.map(|()| ticket).map_err(|over| match over {
            Over::Requests => QueryLimit::Rate,
            Over::Ingress => QueryLimit::Ingress,
            Over::Egress => QueryLimit::Egress,
        })
    }
}

/// Which query limit a request is over (the query service's codes 1191-1194).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryLimit {
    Concurrent,
    Rate,
    Ingress,
    Egress,
}

/// A query being run: counted among the user's running queries until dropped.
pub struct QueryTicket {
    limits: Limits,
    meter: Arc<Meter>,
    counted: bool,
}

impl QueryTicket {
    /// Counts `bytes` of results sent to the user.
    pub fn sent(&self, bytes: u64) {
        if self.counted {
            self.limits.inner.window(&self.meter).query.bytes_out += bytes;
        }
    }
}

impl Drop for QueryTicket {
    fn drop(&mut self) {
        self.meter.queries_running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An authenticated KV connection's share of its user's counters: counted among the user's connections until
/// dropped.
pub struct KvMeter {
    limits: Limits,
    meter: Arc<Meter>,
    kv: Option<ServiceLimits>,
}

impl KvMeter {
    /// Whether this connection's commands are metered now: the user has KV limits and they are enforced.
    #[inline]
    pub fn active(&self) -> bool {
        self.kv.is_some() && self.limits.enforced()
    }

    /// Takes the user's current limits (they changed while the connection was open).
    pub fn refresh(&mut self, user: &User) {
        self.kv = user.limits.as_ref().and_then(|l| l.kv.clone());
    }

    /// Admits a command of `request_bytes`, or answers which limit the user is over this minute.
    pub fn admit(&self, request_bytes: u64) -> Result<(), Status> {
        let Some(l) = &self.kv else { return Ok(()) };
        let admitted = self.limits.inner.window(&self.meter).kv.admit(l.num_ops_per_min, l, request_bytes);
        admitted.map_err(|over| match over {
            Over::Requests => Status::RateLimitedMaxCommands,
            Over::Ingress => Status::RateLimitedNetworkIngress,
            Over::Egress => Status::RateLimitedNetworkEgress,
        })
    }

    /// Counts `bytes` of answers sent to the user.
    pub fn sent(&self, bytes: u64) {
        if self.kv.as_ref().is_some_and(|l| l.egress_mib_per_min.is_some()) {
            self.limits.inner.window(&self.meter).kv.bytes_out += bytes;
        }
    }
}

impl Drop for KvMeter {
    fn drop(&mut self) {
        self.meter.kv_connections.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;
    use crate::auth::Role;

    struct TestClock(AtomicU64);
    impl Clock for TestClock {
        fn now_nanos(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    /// A user named `id` with `limits`; the meters are per user id, so each case names its own.
    fn user(id: &str, limits: &str) -> User {
        let store = crate::auth::UserStore::new();
        store.upsert(id, "", Some("password"), Role::parse_list("admin").unwrap()).unwrap();
        let mut u = (*store.get(id).unwrap()).clone();
        u.limits = Some(UserLimits::parse(limits).unwrap());
        u
    }

    fn limits() -> (Limits, Arc<TestClock>) {
        let clock = Arc::new(TestClock(AtomicU64::new(5 * MINUTE_NANOS)));
        let limits = Limits::new(clock.clone());
        limits.set_enforced(true);
        (limits, clock)
    }

    #[test]
    fn limits_are_checked_as_ns_server_checks_them() {
        // Proves the parser keeps each service's own fields, and refuses unknown services and fields, non-integers
        // and values under 1 with ns_server's words.
        let l = UserLimits::parse(r#"{"kv":{"num_connections":2,"num_ops_per_min":"10"},"query":{}}"#).unwrap();
        let kv = l.kv.as_ref().unwrap();
        assert_eq!((kv.num_connections, kv.num_ops_per_min, kv.ingress_mib_per_min), (Some(2), Some(10), None));
        assert_eq!(l.query, Some(ServiceLimits::default()));
        assert!(UserLimits::parse("{}").unwrap().is_empty());
        for (text, why) in [
            (r#"{"search":{}}"#, "search: Unsupported key"),
            (r#"{"kv":{"num_queries_per_min":1}}"#, "kv.num_queries_per_min: Unsupported key"),
            (r#"{"query":{"num_connections":1}}"#, "query.num_connections: Unsupported key"),
            (r#"{"kv":{"num_ops_per_min":0}}"#, "kv.num_ops_per_min: The value must be in range from 1 to infinity"),
            (r#"{"kv":{"num_ops_per_min":"x"}}"#, "kv.num_ops_per_min: The value must be an integer"),
            ("[1]", "Invalid JSON"),
        ] {
            assert_eq!(UserLimits::parse(text), Err(why.to_owned()), "{text}");
        }
    }

    #[test]
    fn kv_connections_over_the_limit_are_refused_and_closing_one_frees_its_place() {
        // Proves the connection cap counts open connections per user, and is not applied while limits are off.
        let (limits, _) = limits();
        let u = user("conns", r#"{"kv":{"num_connections":2}}"#);
        let first = limits.kv_connect(&u).unwrap();
        let _second = limits.kv_connect(&u).unwrap();
        assert_eq!(limits.kv_connect(&u).err(), Some(Status::RateLimitedMaxConnections));
        drop(first);
        let _third = limits.kv_connect(&u).unwrap();
        limits.set_enforced(false);
        let _fourth = limits.kv_connect(&u).unwrap();
    }

    #[test]
    fn kv_commands_over_the_minutes_budget_are_refused_until_the_next_minute() {
        // Proves the per-minute windows of commands, request bytes and answer bytes, each with its status, and that
        // a new minute starts them again.
        let (limits, clock) = limits();
        let m = limits.kv_connect(&user("ops", r#"{"kv":{"num_ops_per_min":3}}"#)).unwrap();
        assert!(m.active());
        for _ in 0..3 {
            m.admit(100).unwrap();
        }
        assert_eq!(m.admit(100), Err(Status::RateLimitedMaxCommands));
        clock.0.fetch_add(MINUTE_NANOS, Ordering::Relaxed);
        m.admit(100).unwrap();

        let m = limits.kv_connect(&user("ingress", r#"{"kv":{"ingress_mib_per_min":1}}"#)).unwrap();
        m.admit(MIB / 2).unwrap();
        assert_eq!(m.admit(MIB / 2 + 1), Err(Status::RateLimitedNetworkIngress));
        m.admit(MIB / 2).unwrap();

        let m = limits.kv_connect(&user("egress", r#"{"kv":{"egress_mib_per_min":1}}"#)).unwrap();
        m.admit(24).unwrap();
        m.sent(MIB);
        assert_eq!(m.admit(24), Err(Status::RateLimitedNetworkEgress));
    }

    #[test]
    fn one_users_connections_share_the_budget_and_others_are_not_touched() {
        // Proves the window is the user's, not the connection's, and that a user without limits is never metered.
        let (limits, _) = limits();
        let u = user("shared", r#"{"kv":{"num_ops_per_min":2}}"#);
        let (a, b) = (limits.kv_connect(&u).unwrap(), limits.kv_connect(&u).unwrap());
        a.admit(1).unwrap();
        b.admit(1).unwrap();
        assert_eq!(a.admit(1), Err(Status::RateLimitedMaxCommands));
        let mut free = user("free", "{}");
        free.limits = None;
        assert!(!limits.kv_connect(&free).unwrap().active());
    }

    #[test]
    fn queries_are_limited_by_rate_concurrency_and_bytes() {
        // Proves each query limit answers its own kind, that a finished query frees its place, and that nothing is
        // limited while enforcement is off.
        let (limits, _) = limits();
        let u = user("q1", r#"{"query":{"num_queries_per_min":3,"num_concurrent_requests":1,"egress_mib_per_min":1}}"#);
        let running = limits.query_admit(&u, 10).unwrap();
        assert_eq!(limits.query_admit(&u, 10).err(), Some(QueryLimit::Concurrent));
        running.sent(MIB);
        drop(running);
        assert_eq!(limits.query_admit(&u, 10).err(), Some(QueryLimit::Egress));
        let other = user("q2", r#"{"query":{"num_queries_per_min":1,"ingress_mib_per_min":1}}"#);
        assert_eq!(limits.query_admit(&other, MIB + 1).err(), Some(QueryLimit::Ingress));
        drop(limits.query_admit(&other, 10).unwrap());
        assert_eq!(limits.query_admit(&other, 10).err(), Some(QueryLimit::Rate));
        limits.set_enforced(false);
        drop(limits.query_admit(&other, 10).unwrap());
    }
}

//! The answer, written as Couchbase writes it (`QUERY.md` §1.3): one JSON object, each top-level member on its
//! own line, in the order streaming parsers expect (`requestID`, `clientContextID`, `prepared`, `signature`,
//! `results`, then `errors`, `warnings`, `status`, `metrics`, `profile`), rows streamed as they are produced.
//!
//! The executor thread writes into a bounded channel of chunks that the HTTP body drains; a client that stops
//! reading fills the channel and stops the executor (back-pressure), one that goes away cancels the request.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value as Json};
use settee_query::value::{write_json, Value};
use settee_query::{QueryError, Sink};
use tokio::sync::{mpsc, oneshot};

/// Bytes gathered before a chunk goes to the HTTP body.
const CHUNK_BYTES: usize = 32 * 1024;

/// Go's `time.Duration.String()`: `1.5s`, `2m3.004s`, `12.345ms`, `7.1µs`, `350ns`.
pub fn go_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    let frac = |value: u128, unit: u128, suffix: &str| {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            return format!("{whole}{suffix}");
        }
        let digits = unit.ilog10() as usize;
        let f = format!("{rest:0digits$}");
        format!("{whole}.{}{suffix}", f.trim_end_matches('0'))
    };
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    if ns < 1_000_000 {
        return frac(ns, 1_000, "µs");
    }
    if ns < 1_000_000_000 {
        return frac(ns, 1_000_000, "ms");
    }
    let secs = ns / 1_000_000_000;
    let sub = ns % 1_000_000_000;
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&frac(s * 1_000_000_000 + sub, 1_000_000_000, "s"));
    out
}

/// Writes a result row: a top-level object's members in projection order (members not in it, from `*` or
/// `alias.*`, after them in name order), everything nested in name order.
pub fn write_row(v: &Value, order: Option<&[Arc<str>]>, out: &mut Vec<u8>) {
    let (Value::Object(members), Some(order)) = (v, order) else {
        write_json(v, out);
        return;
    };
    out.push(b'{');
    let mut first = true;
    let mut member = |k: &str, item: &Value, out: &mut Vec<u8>| {
        if item.is_missing() {
            return;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_json(&Value::string(k), out);
        out.push(b':');
        write_json(item, out);
    };
    for name in order {
        if let Some(item) = members.get(&**name) {
            member(name, item, out);
        }
    }
    for (k, item) in members.iter() {
        if !order.iter().any(|n| **n == **k) {
            member(k, item, out);
        }
    }
    out.push(b'}');
}

/// What the HTTP handler needs before it can send headers: whether the request started (200, body follows) or
/// failed first (the error's status and a whole body).
pub enum Head {
    Started,
    Failed(QueryError),
}

/// Counters the tail of the answer reports.
#[derive(Default)]
pub struct Tally {
    pub result_count: u64,
    pub result_size: u64,
}

/// The request's servicer permit: given back while the executor waits for the client to take the answer (a slow
/// reader costs no servicer), taken again before it goes on, and the wait bounded by `stall`.
pub struct Servicer {
    pub limiter: Arc<tokio::sync::Semaphore>,
    pub permit: Option<tokio::sync::OwnedSemaphorePermit>,
    pub runtime: tokio::runtime::Handle,
    pub stall: Duration,
}

/// The executor's side of the answer.
pub struct StreamSink {
    tx: mpsc::Sender<Bytes>,
    head: Option<oneshot::Sender<Head>>,
    buf: Vec<u8>,
    pub tally: Tally,
    prefix: String,
    state: Arc<AtomicU8>,
    /// The client went away: nothing more is written.
    gone: bool,
    signature: bool,
    servicer: Servicer,
}

impl StreamSink {
    /// `prefix` is the opening of the answer up to `clientContextID` (written once the request starts).
    pub fn new(
        tx: mpsc::Sender<Bytes>,
        head: oneshot::Sender<Head>,
        prefix: String,
        state: Arc<AtomicU8>,
        signature: bool,
        servicer: Servicer,
    ) -> StreamSink {
        StreamSink {
            tx,
            head: Some(head),
            buf: Vec::with_capacity(CHUNK_BYTES),
            tally: Tally::default(),
            prefix,
            state,
            gone: false,
            signature,
            servicer,
        }
    }

    pub fn started(&self) -> bool {
        self.head.is_none()
    }

    /// Reports a failure that happened before `start`: the handler answers with the error's status.
    pub fn fail_early(&mut self, e: QueryError) {
        if let Some(h) = self.head.take() {
            let _ = h.send(Head::Failed(e));
        }
    }

    fn flush(&mut self) -> bool {
        if self.gone || self.buf.is_empty() {
            return !self.gone;
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_BYTES)));
        let chunk = match self.tx.try_send(chunk) {
            Ok(()) => return true,
            Err(mpsc::error::TrySendError::Closed(_)) => return self.client_gone("the client went away"),
            Err(mpsc::error::TrySendError::Full(chunk)) => chunk,
        };
        // The client is slower than the executor: wait for it without holding a servicer.
        self.servicer.permit = None;
        let sent = self.servicer.runtime.block_on(self.tx.send_timeout(chunk, self.servicer.stall));
        match sent {
            Ok(()) => {}
            Err(mpsc::error::SendTimeoutError::Closed(_)) => return self.client_gone("the client went away"),
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                tracing::warn!(stall = ?self.servicer.stall, "query request cancelled: its client stopped reading");
                return self.client_gone("the client stopped reading");
            }
        }
        let limiter = self.servicer.limiter.clone();
        self.servicer.permit = self.servicer.runtime.block_on(limiter.acquire_owned()).ok();
        true
    }

    fn client_gone(&mut self, why: &str) -> bool {
        tracing::debug!(why, "query answer abandoned");
        self.gone = true;
        self.state.store(settee_query::exec::CANCELLED, Ordering::Release);
        false
    }

    /// Writes the rest of the answer after the last row: errors, status, metrics and profile.
    pub fn finish(mut self, errors: &[QueryError], tail: Json) {
        if self.head.is_some() {
            // Nothing started (a statement with no result phase): open the answer now.
            let _ = self.start(None, &Json::Null);
        }
        self.buf.extend_from_slice(b"\n],\n");
        if !errors.is_empty() {
            let errs: Vec<Json> = errors.iter().map(QueryError::to_json).collect();
            self.buf.extend_from_slice(b"\"errors\": [\n");
            for (i, e) in errs.iter().enumerate() {
                if i > 0 {
                    self.buf.extend_from_slice(b",\n");
                }
                self.buf.extend_from_slice(e.to_string().as_bytes());
            }
            self.buf.extend_from_slice(b"\n],\n");
        }
        if let Json::Object(members) = tail {
            let n = members.len();
            for (i, (k, v)) in members.into_iter().enumerate() {
                self.buf.extend_from_slice(format!("{}: {}", Json::String(k), v).as_bytes());
                self.buf.extend_from_slice(if i + 1 < n { b",\n" } else { b"\n" });
            }
        }
        self.buf.extend_from_slice(b"}\n");
        self.flush();
    }
}

impl Sink for StreamSink {
    fn start(&mut self, prepared: Option<&str>, signature: &Json) -> Result<(), QueryError> {
        let Some(h) = self.head.take() else { return Ok(()) };
        let _ = h.send(Head::Started);
        self.buf.extend_from_slice(self.prefix.as_bytes());
        if let Some(p) = prepared {
            self.buf.extend_from_slice(format!("\"prepared\": {},\n", json!(p)).as_bytes());
        }
        if self.signature && !signature.is_null() {
            self.buf.extend_from_slice(format!("\"signature\": {signature},\n").as_bytes());
        }
        self.buf.extend_from_slice(b"\"results\": [");
        Ok(())
    }

    fn row(&mut self, value: &Value, order: Option<&[Arc<str>]>) -> Result<bool, QueryError> {
        if self.gone {
            return Ok(false);
        }
        let before = self.buf.len();
        self.buf.extend_from_slice(if self.tally.result_count == 0 { b"\n" } else { b",\n" });
        let start = self.buf.len();
        write_row(value, order, &mut self.buf);
        self.tally.result_size += (self.buf.len() - start) as u64;
        self.tally.result_count += 1;
        let _ = before;
        if self.buf.len() >= CHUNK_BYTES {
            return Ok(self.flush());
        }
        Ok(true)
    }
}

/// The opening members: `requestID` and the echoed `clientContextID`.
pub fn prefix(request_id: &str, client_context_id: Option<&str>) -> String {
    let mut s = format!("{{\n\"requestID\": {},\n", json!(request_id));
    if let Some(c) = client_context_id {
        s.push_str(&format!("\"clientContextID\": {},\n", json!(c)));
    }
    s
}

/// The whole body of an answer that failed before it started.
pub fn error_body(prefix: &str, e: &QueryError, metrics: Option<Json>) -> String {
    let mut s = prefix.to_string();
    s.push_str(&format!("\"errors\": [\n{}\n],\n", e.to_json()));
    s.push_str(&format!("\"status\": {}", json!(status_of(e))));
    if let Some(m) = metrics {
        s.push_str(&format!(",\n\"metrics\": {m}"));
    }
    s.push_str("\n}\n");
    s
}

/// The answer's `status` for a request that ended with `e`.
pub fn status_of(e: &QueryError) -> &'static str {
    match e {
        QueryError::Timeout(_) => "timeout",
        QueryError::Evaluation(m) if m == "Request cancelled" => "stopped",
        _ => "fatal",
    }
}

/// The `metrics` member: the C++ core requires the first four, the rest appear when non-zero.
pub fn metrics(elapsed: Duration, execution: Duration, tally: &Tally, mutations: u64, sorts: u64, errors: u64) -> Json {
    // Durations must be above 0.5 µs for the SDKs' parsers to read them as non-zero.
    let at_least = |d: Duration| go_duration(d.max(Duration::from_micros(1)));
    let mut m = serde_json::Map::new();
    m.insert("elapsedTime".into(), json!(at_least(elapsed)));
    m.insert("executionTime".into(), json!(at_least(execution)));
    m.insert("resultCount".into(), json!(tally.result_count));
    m.insert("resultSize".into(), json!(tally.result_size));
    m.insert("serviceLoad".into(), json!(1));
    if mutations > 0 {
        m.insert("mutationCount".into(), json!(mutations));
    }
    if sorts > 0 {
        m.insert("sortCount".into(), json!(sorts));
    }
    if errors > 0 {
        m.insert("errorCount".into(), json!(errors));
    }
    Json::Object(m)
}

/// The `profile` member for `phases` and `timings`.
pub fn profile(started: Instant, request_time: &str, host: &str, plan: Option<Json>) -> Json {
    let mut p = json!({
        "phaseTimes": {"run": go_duration(started.elapsed().max(Duration::from_micros(1)))},
        "phaseCounts": {},
        "phaseOperators": {},
        "requestTime": request_time,
        "servicingHost": host,
    });
    if let Some(plan) = plan {
        p["executionTimings"] = plan;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        // Proves Go's Duration.String() forms, which the SDKs parse back.
        assert_eq!(go_duration(Duration::from_nanos(350)), "350ns");
        assert_eq!(go_duration(Duration::from_nanos(7_100)), "7.1µs");
        assert_eq!(go_duration(Duration::from_micros(12_345)), "12.345ms");
        assert_eq!(go_duration(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(123_004)), "2m3.004s");
        assert_eq!(go_duration(Duration::from_secs(3_600)), "1h0m0s");
    }

    #[test]
    fn rows_keep_projection_order_at_the_top_level_only() {
        // Proves `SELECT b, a` writes b first while nested objects stay in name order.
        let v = Value::from_json(br#"{"a":{"z":1,"y":2},"b":3,"c":4}"#).unwrap();
        let order: Vec<Arc<str>> = vec![Arc::from("b"), Arc::from("a")];
        let mut out = Vec::new();
        write_row(&v, Some(&order), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"b":3,"a":{"y":2,"z":1},"c":4}"#);
    }
}

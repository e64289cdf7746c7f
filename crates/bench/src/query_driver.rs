//! The loop of one query connection: one operation at a time, closed loop, as a YCSB client thread or an SDK
//! caller that awaits each query. A query is a `POST /query/service` on the connection's kept-alive HTTP/1.1
//! socket; YCSB E's inserts are KV SETs of new records on the connection's smart-client link, as YCSB's insert path
//! does. Latency runs from the send to the end of the answer (the whole body read).
//!
//! A query that gets no answer within `--timeout`, or whose connection fails, ends the connection (counted as
//! `timeout` or `connection lost`), as a KV connection does. The inserts are not retried on NOT_MY_VBUCKET: the
//! query workloads are for steady clusters, not rebalances.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use settee_mcbp::Magic;
use tokio::time::Instant;

use crate::driver::{DriveError, PhaseClock, Plan, Shared};
use crate::http_link::{HttpLink, QueryEndpoint};
use crate::link::{Link, QueueError};
use crate::query_answer;
use crate::query_request::{Args, RequestWriter};
use crate::stats::{Completion, OpKind, Outcome, PhaseStats};
use crate::values::ycsb_field;

/// Completions kept before they go to the thread's recorder (the reporter reads it once a second).
const RECORD_BATCH: usize = 64;
const RECORD_INTERVAL: Duration = Duration::from_millis(100);
/// NOT_MY_VBUCKET, counted under its name.
const STATUS_NOT_MY_VBUCKET: u16 = 0x07;

/// What every query connection of a run shares.
#[derive(Debug)]
pub(crate) struct QueryWork {
    /// The query nodes; connection `i` uses endpoint `i % len`, as the SDKs spread requests over the nodes.
    pub endpoints: Vec<std::sync::Arc<QueryEndpoint>>,
    pub requests: RequestWriter,
    /// YCSB E scans read 1..=this many records (uniform); a page reads exactly this many.
    pub scan_length: u64,
    /// Lookups ask for the value of `field0` (this many characters) of the chosen record instead of its key.
    pub lookup_field: Option<usize>,
}

/// One query connection: the HTTP socket, and a KV link when the workload inserts.
pub(crate) struct QueryConn {
    pub http: HttpLink,
    pub kv: Option<Link>,
}

struct Loop<'a> {
    plan: Plan,
    shared: &'a Shared,
    work: &'a QueryWork,
    stats: &'a Mutex<PhaseStats>,
    clock: PhaseClock,
    done: Vec<Completion>,
    recorded_at: Instant,
    key: Vec<u8>,
    wire_key: Vec<u8>,
    body: Vec<u8>,
    /// The body of a YCSB record being inserted.
    value: Vec<u8>,
    issued: u64,
}

/// Runs one query connection until its phase ends (the clock's stop time, the stop flag, `--num-cycles`). Returns
/// how many operations it issued.
pub(crate) async fn drive_queries(
    mut conn: QueryConn,
    plan: Plan,
    shared: &Shared,
    work: &QueryWork,
    stats: &Mutex<PhaseStats>,
    clock: PhaseClock,
) -> Result<u64, DriveError> {
    let mut l = Loop {
        plan,
        shared,
        work,
        stats,
        clock,
        done: Vec::with_capacity(RECORD_BATCH),
        recorded_at: Instant::now(),
        key: Vec::with_capacity(64),
        wire_key: Vec::with_capacity(64),
        body: Vec::with_capacity(1024),
        value: Vec::new(),
        issued: 0,
    };
    let result = l.run(&mut conn).await;
    l.record();
    result.map(|()| l.issued)
}

impl Loop<'_> {
    async fn run(&mut self, conn: &mut QueryConn) -> Result<(), DriveError> {
        loop {
            let now = Instant::now();
            let stopping = self.shared.stop.load(std::sync::atomic::Ordering::Relaxed)
                || self.clock.stop_at.is_some_and(|t| now >= t)
                || self.plan.limit.is_some_and(|l| self.issued >= l);
            if stopping {
                return Ok(());
            }
            let Some(op) = self.plan.source.next(&mut self.plan.rng, &self.shared.records) else { return Ok(()) };
            self.issued += 1;
            self.key.clear();
            match self.work.lookup_field {
                Some(length) if op.kind == OpKind::Lookup => ycsb_field(op.record, 0, length, &mut self.key),
                _ => self.shared.keys.write(op.record, &mut self.key),
            }
            let started = Instant::now();
            let (outcome, rows) = match op.kind {
                OpKind::Insert => (self.insert(conn.kv.as_mut(), op.record, started).await?, 0),
                kind => self.query(&mut conn.http, kind, op.record, started).await?,
            };
            if op.kind == OpKind::Insert && outcome == Outcome::Ok {
                self.shared.records.acknowledge(op.record);
            }
            self.finish(op.kind, started, outcome, rows);
        }
    }

    /// Sends one query and reads its answer. A timeout or a failed connection is recorded and ends the loop.
    async fn query(
        &mut self,
        http: &mut HttpLink,
        kind: OpKind,
        record: u64,
        started: Instant,
    ) -> Result<(Outcome, u64), DriveError> {
        let args = match kind {
            OpKind::Scan => Args::Scan { key: &self.key, length: self.plan.rng.between(1, self.work.scan_length) },
            OpKind::Lookup => Args::Lookup { key: &self.key },
            OpKind::Page => Args::Page { limit: self.work.scan_length, offset: record },
            _ => Args::None,
        };
        if !self.work.requests.write(kind, args, self.issued, &mut self.body) {
            return Ok((Outcome::BadAnswer, 0));
        }
        let timeout = self.shared.op_timeout;
        match tokio::time::timeout(timeout, http.post(Bytes::copy_from_slice(&self.body))).await {
            Ok(Ok((status, answer))) => {
                let a = query_answer::read(status, &answer, kind == OpKind::Lookup);
                Ok((a.outcome, a.rows))
            }
            Ok(Err(e)) => {
                self.finish(kind, started, Outcome::ConnectionLost, 0);
                Err(e.into())
            }
            Err(_) => {
                self.finish(kind, started, Outcome::Timeout, 0);
                Err(DriveError::Timeout(timeout))
            }
        }
    }

    /// A KV SET of a new record (YCSB's insert), waited for.
    async fn insert(&mut self, kv: Option<&mut Link>, record: u64, started: Instant) -> Result<Outcome, DriveError> {
        let Some(link) = kv else { return Ok(Outcome::ConnectionLost) };
        self.wire_key.clear();
        self.wire_key.extend_from_slice(link.key_prefix());
        let prefix_len = self.wire_key.len();
        self.wire_key.extend_from_slice(&self.key);
        let value = self.shared.values.value(record, &mut self.plan.rng, &mut self.value);
        let queued = match link.queue(&self.wire_key, prefix_len, Some((value, self.shared.values.is_json()))) {
            Ok(q) => q,
            Err(QueueError::NoActiveNode) => return Ok(Outcome::Status(STATUS_NOT_MY_VBUCKET)),
            Err(QueueError::NodeDown) => return Ok(Outcome::ConnectionLost),
        };
        let timeout = self.shared.op_timeout;
        match tokio::time::timeout(timeout, reply_status(link, queued.node, queued.opaque)).await {
            Ok(Ok(status)) => Ok(Outcome::of_status(status, false)),
            Ok(Err(e)) => {
                self.finish(OpKind::Insert, started, Outcome::ConnectionLost, 0);
                Err(e)
            }
            Err(_) => {
                self.finish(OpKind::Insert, started, Outcome::Timeout, 0);
                Err(DriveError::Timeout(timeout))
            }
        }
    }

    fn finish(&mut self, kind: OpKind, started: Instant, outcome: Outcome, rows: u64) {
        let now = Instant::now();
        if self.clock.records(now) {
            let latency_ns = now.saturating_duration_since(started).as_nanos().min(u128::from(u64::MAX)) as u64;
            self.done.push(Completion { kind, latency_ns, outcome, rows });
        }
        if self.done.len() >= RECORD_BATCH || now.saturating_duration_since(self.recorded_at) >= RECORD_INTERVAL {
            self.record();
            self.recorded_at = now;
        }
    }

    fn record(&mut self) {
        if self.done.is_empty() {
            return;
        }
        // The lock is shared with this thread's other connections and the once-a-second reporter only.
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        for c in &self.done {
            stats.record(c);
        }
        drop(stats);
        self.done.clear();
    }
}

/// Flushes what `link` has queued and waits for the reply with `opaque` from `node`; server pushes (cluster-map
/// notifications) are skipped.
async fn reply_status(link: &mut Link, node: usize, opaque: u32) -> Result<u16, DriveError> {
    link.flush().await?;
    loop {
        while let Some(r) = link.next_response(node)? {
            if r.magic != Magic::ServerRequest && r.opaque == opaque {
                return Ok(r.status);
            }
        }
        link.fill_any(&[node]).await?;
    }
}

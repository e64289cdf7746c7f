//! The loop of one benchmark connection: keep up to `window` requests in flight (`--batch-size`), write every
//! request queued in a round with one write, decode replies in place, and hand finished operations to the
//! recorder.
//!
//! Closed loop (the default): a slot that frees up is refilled at once, and latency runs from the write. Open loop
//! (`--rate-limit`): each request has an intended send time on a fixed schedule. If the window was full at that
//! time, the server held the request up and latency runs from the intended time (no coordinated omission); if a
//! slot was free, only the client was late (tokio's timer has millisecond resolution) and latency runs from the
//! actual send. With one connection per thread the wait for the next send is a thread sleep, which keeps
//! sub-millisecond schedules.
//!
//! Like an SDK, the loop follows the cluster map: a NOT_MY_VBUCKET reply's config (or a pushed or fetched one) is
//! applied and the request is sent again to the node the map now names ([`crate::retry`]); a new node list is
//! followed by reconciling the connections, keeping those to the nodes that stay with their requests in flight
//! and sending again those that were in flight on a node that left; a node whose connection fails is dealt with by
//! [`crate::follow`]. A retried request keeps its intended time, so its latency includes every attempt.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use settee_client::{ClientError, NodeError};
use settee_mcbp::{Magic, Response};
use tokio::time::Instant;

use crate::follow::{FetchFrom, Follower, LOST_NODE_GRACE};
use crate::keys::KeyWriter;
use crate::link::{Link, QueueError};
use crate::retry::{next_attempt, Resend, RetryQueue};
use crate::rng::Rng;
use crate::stats::{Completion, OpKind, Outcome, PhaseStats};
use crate::values::ValuePool;
use crate::workload::{OpSource, Records};

/// NOT_MY_VBUCKET: the reply carries a newer config.
const STATUS_NOT_MY_VBUCKET: u16 = 0x07;
const STATUS_TMPFAIL: u16 = 0x86;
/// Opcode of a cluster-map change notification (a server push, magic 0x82).
const OPCODE_CLUSTERMAP_CHANGE: u8 = 0x01;
/// How long an open-loop connection sleeps at most before looking at the stop flag again.
const IDLE_SLEEP_MAX: Duration = Duration::from_millis(100);
/// Full-window periods remembered for open-loop latency; older ones no longer matter once requests due after
/// them have been sent.
const FULL_PERIODS_MAX: usize = 1024;

/// What every connection of a phase shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub keys: KeyWriter,
    pub values: ValuePool,
    pub records: Records,
    /// Set by Ctrl-C: stop issuing, drain, report.
    pub stop: AtomicBool,
    /// An operation without a reply for this long fails its connection; a request is not retried past it.
    pub op_timeout: Duration,
    /// TMPFAIL answers are retried after a backoff (as the SDKs do) instead of counted as errors.
    pub retry_tmpfail: bool,
}

/// When a phase records: operations that finish before `record_from` (warm-up) or after `stop_at` are not counted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PhaseClock {
    pub start: Instant,
    pub record_from: Instant,
    pub stop_at: Option<Instant>,
}

impl PhaseClock {
    pub(crate) fn records(&self, now: Instant) -> bool {
        now >= self.record_from && self.stop_at.is_none_or(|t| now <= t)
    }
}

/// One connection's plan.
#[derive(Debug)]
pub(crate) struct Plan {
    pub source: OpSource,
    pub rng: Rng,
    /// Requests in flight at most.
    pub window: usize,
    /// Operations to issue at most (`--num-cycles` × batch).
    pub limit: Option<u64>,
    /// Open loop: the time between intended sends, and this connection's first one relative to the start.
    pub schedule: Option<(Duration, Duration)>,
    /// The connection has its thread to itself: wait for the next intended send with a thread sleep (microsecond
    /// precision) instead of tokio's millisecond timer.
    pub precise_sleep: bool,
}

/// A request of an operation: what it takes to send it (again) and to record it.
#[derive(Clone, Copy, Debug)]
struct Pending {
    kind: OpKind,
    /// The GET half of a read-modify-write: a success sends the SET half, and the operation goes on.
    rmw_get: bool,
    record: u64,
    /// Where the operation's latency starts; retries keep it.
    intended: Instant,
    /// When this request was first sent: it is not retried past `op_timeout` after it.
    first_sent: Instant,
    /// Times it was sent again.
    retries: u32,
}

/// A request on the wire.
#[derive(Debug)]
struct InFlight {
    opaque: u32,
    vbucket: u16,
    req: Pending,
}

/// Why a connection stopped early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DriveError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Http(#[from] crate::http_link::HttpError),
    #[error("reply out of order: expected opaque {expected:?}, got {got}")]
    OutOfOrder { expected: Option<u32>, got: u32 },
}

/// A frame from a node, reduced to what the loop needs once the read buffer is released.
enum Frame {
    Reply {
        opaque: u32,
        status: u16,
        /// The value of a NOT_MY_VBUCKET reply or of the config fetch's reply.
        config: Option<Vec<u8>>,
    },
    /// A cluster-map push: the (epoch, revision) it announces, and the config unless it is brief.
    Push { rev: Option<(i64, i64)>, config: Option<Vec<u8>> },
    /// A server request the bench does not act on.
    Other,
}

impl Frame {
    fn of(r: &Response<'_>, fetch_reply: bool) -> Frame {
        match r.magic {
            Magic::ServerRequest if r.opcode == OPCODE_CLUSTERMAP_CHANGE => {
                let rev = r.extras.get(..16).map(|e| {
                    let word = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("an 8-byte slice"));
                    (word(&e[..8]), word(&e[8..16]))
                });
                Frame::Push { rev, config: (!r.value.is_empty()).then(|| r.value.to_vec()) }
            }
            Magic::ServerRequest => Frame::Other,
            _ => Frame::Reply {
                opaque: r.opaque,
                status: r.status,
                config: (r.status == STATUS_NOT_MY_VBUCKET || fetch_reply).then(|| r.value.to_vec()),
            },
        }
    }
}

/// The state of one connection's loop.
struct Driver<'a> {
    link: Link,
    plan: Plan,
    shared: &'a Shared,
    stats: &'a Mutex<PhaseStats>,
    clock: PhaseClock,
    /// Requests on the wire, per node, in send order.
    queues: Vec<VecDeque<InFlight>>,
    /// SET halves of read-modify-writes, sent before anything else.
    followups: VecDeque<Pending>,
    /// Requests to send again, when due.
    retries: RetryQueue<Pending>,
    follower: Follower,
    done: Vec<Completion>,
    /// Retries since the last hand-over to the recorder.
    retried: u64,
    wire_key: Vec<u8>,
    /// The body of a YCSB record being written.
    value: Vec<u8>,
    in_flight: usize,
    issued: u64,
    source_done: bool,
    next_at: Instant,
    full: FullPeriods,
}

/// Moves per-node queues to the nodes' new indexes (`moved`, by old index) in a list of `nodes`; returns them and
/// the entries of the queues whose node left, in their send order.
fn remap_queues<T>(
    old: Vec<VecDeque<T>>,
    moved: &[Option<usize>],
    nodes: usize,
    capacity: usize,
) -> (Vec<VecDeque<T>>, Vec<T>) {
    let mut queues: Vec<VecDeque<T>> = (0..nodes).map(|_| VecDeque::with_capacity(capacity)).collect();
    let mut orphans = Vec::new();
    for (from, queue) in old.into_iter().enumerate() {
        match moved.get(from).copied().flatten().filter(|&to| to < nodes) {
            Some(to) => queues[to] = queue,
            None => orphans.extend(queue),
        }
    }
    (queues, orphans)
}

/// When the window was full, for deciding where an open-loop request's latency starts.
#[derive(Debug, Default)]
struct FullPeriods {
    since: Option<Instant>,
    past: VecDeque<(Instant, Instant)>,
}

impl FullPeriods {
    fn mark(&mut self, full: bool, now: Instant) {
        match (full, self.since) {
            (true, None) => self.since = Some(now),
            (false, Some(start)) => {
                self.since = None;
                if self.past.len() == FULL_PERIODS_MAX {
                    self.past.pop_front();
                }
                self.past.push_back((start, now));
            }
            _ => {}
        }
    }

    /// Where the latency of a request due at `due` and sent at `now` starts: `due` if the window was full then
    /// (the server held it up), else `now` (only the client's timer was late). Requests come in due order, so
    /// periods that ended before `due` are dropped.
    fn latency_start(&mut self, due: Instant, now: Instant) -> Instant {
        while self.past.front().is_some_and(|(_, end)| *end < due) {
            self.past.pop_front();
        }
        let was_full =
            self.since.is_some_and(|s| s <= due) || self.past.iter().any(|(start, end)| *start <= due && due <= *end);
        if was_full {
            due
        } else {
            now.max(due)
        }
    }
}

/// Runs one connection until its phase ends: the clock's stop time, the stop flag, the operation limit or the end
/// of a load slice. Returns how many operations it issued.
pub(crate) async fn drive(
    link: Link,
    plan: Plan,
    shared: &Shared,
    stats: &Mutex<PhaseStats>,
    clock: PhaseClock,
) -> Result<u64, DriveError> {
    let nodes = link.node_count();
    let window = plan.window;
    let next_at = clock.start + plan.schedule.map_or(Duration::ZERO, |(_, first)| first);
    let mut d = Driver {
        link,
        plan,
        shared,
        stats,
        clock,
        queues: (0..nodes).map(|_| VecDeque::with_capacity(window)).collect(),
        followups: VecDeque::new(),
        retries: RetryQueue::new(),
        follower: Follower::default(),
        done: Vec::with_capacity(window * 2),
        retried: 0,
        wire_key: Vec::with_capacity(256),
        value: Vec::new(),
        in_flight: 0,
        issued: 0,
        source_done: false,
        next_at,
        full: FullPeriods::default(),
    };
    let result = d.run().await;
    if let Err(e) = &result {
        let outcome = if matches!(e, DriveError::Timeout(_)) { Outcome::Timeout } else { Outcome::ConnectionLost };
        d.fail_in_flight(outcome, Instant::now());
    }
    d.record_done();
    result.map(|()| d.issued)
}

impl Driver<'_> {
    async fn run(&mut self) -> Result<(), DriveError> {
        let mut waiting = Vec::with_capacity(self.queues.len());
        loop {
            let now = Instant::now();
            self.follow_cluster(now).await?;
            let stopping = self.stopping(now);
            self.issue(now, stopping);
            self.full.mark(self.outstanding() >= self.plan.window, now);
            self.record_done();
            if let Err(e) = self.link.flush().await {
                self.node_failed(e, Instant::now())?;
                continue;
            }
            let fetching = self.follower.fetching().map(|(node, _)| node);
            // Wake for the next retry, the follower's timer, or (open loop, with a free slot) the next intended send.
            let mut wake = [self.retries.next_at(), self.follower.wake_at()].into_iter().flatten().min();
            if self.plan.schedule.is_some() && self.outstanding() < self.plan.window && !stopping && !self.exhausted() {
                let next = self.next_at.min(now + IDLE_SLEEP_MAX);
                wake = Some(wake.map_or(next, |w| w.min(next)));
            }
            if self.in_flight == 0 && fetching.is_none() {
                if !self.retries.is_empty() {
                    // Nothing to read: only requests waiting to be sent again (a node refuses, or is lost).
                    tokio::time::sleep_until(wake.unwrap_or(now)).await;
                    continue;
                }
                if stopping || self.exhausted() {
                    return Ok(());
                }
                if self.plan.schedule.is_some() {
                    // Open loop, ahead of schedule.
                    let wake = self.next_at.min(now + IDLE_SLEEP_MAX);
                    if self.plan.precise_sleep {
                        // Nothing is in flight and no other connection shares this thread, so blocking the thread
                        // is harmless, and a thread sleep keeps microseconds where tokio's timer rounds up to a
                        // millisecond (which would show up as client-made latency in open loop).
                        std::thread::sleep(wake.saturating_duration_since(now));
                    } else {
                        tokio::time::sleep_until(wake).await;
                    }
                }
                continue;
            }
            waiting.clear();
            waiting.extend((0..self.queues.len()).filter(|&n| !self.queues[n].is_empty() || fetching == Some(n)));
            // Without anything to wake for, the wait is the operation timeout.
            let timeout = self.shared.op_timeout;
            let (until, timed_out) = match wake {
                Some(w) if w < now + timeout => (w, false),
                _ => (now + timeout, true),
            };
            tokio::select! {
                r = self.link.fill_any(&waiting) => {
                    if let Err(e) = r {
                        self.node_failed(e, Instant::now())?;
                    }
                }
                _ = tokio::time::sleep_until(until) => {
                    if timed_out {
                        return Err(DriveError::Timeout(timeout));
                    }
                }
            }
            let now = Instant::now();
            for &node in &waiting {
                self.take_replies(node, now)?;
            }
            self.full.mark(self.outstanding() >= self.plan.window, now);
        }
    }

    fn stopping(&self, now: Instant) -> bool {
        self.shared.stop.load(Ordering::Relaxed) || self.clock.stop_at.is_some_and(|t| now >= t)
    }

    fn exhausted(&self) -> bool {
        self.source_done || self.plan.limit.is_some_and(|l| self.issued >= l)
    }

    /// Operations begun and not finished: on the wire or waiting to be sent again.
    fn outstanding(&self) -> usize {
        self.in_flight + self.retries.len()
    }

    /// Fills the window: read-modify-write SET halves first, then retries that are due, then new operations (on
    /// schedule, in open loop). Requests waiting to be sent again hold their slots.
    fn issue(&mut self, now: Instant, stopping: bool) {
        while self.in_flight < self.plan.window {
            let req = if let Some(f) = self.followups.pop_front() {
                f
            } else if let Some(r) = self.retries.pop_due(now) {
                r
            } else {
                if stopping || self.exhausted() || self.outstanding() >= self.plan.window {
                    return;
                }
                let intended = match self.plan.schedule {
                    Some((interval, _)) => {
                        if self.next_at > now {
                            return;
                        }
                        let due = self.next_at;
                        self.next_at += interval;
                        self.full.latency_start(due, now)
                    }
                    None => now,
                };
                let Some(op) = self.plan.source.next(&mut self.plan.rng, &self.shared.records) else {
                    self.source_done = true;
                    return;
                };
                self.issued += 1;
                let rmw_get = op.kind == OpKind::Rmw;
                Pending { kind: op.kind, rmw_get, record: op.record, intended, first_sent: now, retries: 0 }
            };
            self.send(req, now);
        }
    }

    /// Queues `req` on the node its key's vBucket maps to; when there is none to send it to, it waits to be sent
    /// again.
    fn send(&mut self, req: Pending, now: Instant) {
        self.wire_key.clear();
        self.wire_key.extend_from_slice(self.link.key_prefix());
        let prefix_len = self.wire_key.len();
        self.shared.keys.write(req.record, &mut self.wire_key);
        let value = match req.kind {
            OpKind::Get => None,
            OpKind::Rmw if req.rmw_get => None,
            _ => Some((
                self.shared.values.value(req.record, &mut self.plan.rng, &mut self.value),
                self.shared.values.is_json(),
            )),
        };
        match self.link.queue(&self.wire_key, prefix_len, value) {
            Ok(q) => {
                self.queues[q.node].push_back(InFlight { opaque: q.opaque, vbucket: q.vbucket, req });
                self.in_flight += 1;
            }
            Err(QueueError::NoActiveNode) => {
                self.retry(req, now, Resend::Backoff, Outcome::Status(STATUS_NOT_MY_VBUCKET));
            }
            Err(QueueError::NodeDown) => self.retry(req, now, Resend::Backoff, Outcome::ConnectionLost),
        }
    }

    /// Schedules `req` to be sent again, or finishes it with `give_up` once its retries are spent.
    fn retry(&mut self, mut req: Pending, now: Instant, resend: Resend, give_up: Outcome) {
        match next_attempt(req.retries, req.first_sent, now, self.shared.op_timeout, resend) {
            Some(at) => {
                req.retries += 1;
                if self.clock.records(now) {
                    self.retried += 1;
                }
                self.retries.push(at, req);
            }
            None => self.finish(req.kind, req.intended, now, give_up),
        }
    }

    /// Keeps up with the cluster: the follower's timer, a new node list (or reopening lost nodes), the verdict on
    /// lost nodes, and a config fetch when one is wanted.
    async fn follow_cluster(&mut self, now: Instant) -> Result<(), DriveError> {
        if self.follower.tick(now) {
            self.link.request_reconcile();
        }
        if self.link.needs_reconcile() {
            self.reconcile(now).await;
        }
        let link = &self.link;
        self.follower.settle(|addr| link.node_state(addr), now)?;
        if let Some(from) = self.follower.to_fetch() {
            let node = match from {
                FetchFrom::Node(n) if self.link.is_up(n) => Some(n),
                _ => self.link.first_up_node(),
            };
            if let Some(node) = node {
                if let Some(opaque) = self.link.request_config(node) {
                    self.follower.sent(node, opaque);
                }
            }
        }
        Ok(())
    }

    /// Follows a new node list: requests in flight on nodes that stay keep waiting for their replies (under the
    /// nodes' new indexes); those on nodes that left are sent again to the nodes the map now names.
    async fn reconcile(&mut self, now: Instant) {
        let reconciled = self.link.reconcile().await;
        let (queues, orphans) =
            remap_queues(std::mem::take(&mut self.queues), &reconciled.moved, self.link.node_count(), self.plan.window);
        self.queues = queues;
        self.follower.remap(&reconciled.moved);
        for f in orphans {
            self.in_flight -= 1;
            self.retry(f.req, now, Resend::Now, Outcome::ConnectionLost);
        }
        for (node, source) in reconciled.unreachable {
            let error = NodeError { node, addr: self.link.node_addr(node), source };
            self.follower.lost(error, now, self.lost_node_grace());
        }
    }

    /// A node's connection failed: its requests are sent again (to the same node once it is back, or to the one
    /// the map names once it left), and the follower decides whether the failure ends this connection. With no
    /// other node to ask, it does at once, as it always did.
    fn node_failed(&mut self, error: NodeError, now: Instant) -> Result<(), DriveError> {
        if self.link.first_up_node().is_none() {
            return Err(error.into());
        }
        let lost: Vec<InFlight> = self.queues.get_mut(error.node).map(|q| q.drain(..).collect()).unwrap_or_default();
        for f in lost {
            self.in_flight -= 1;
            self.retry(f.req, now, Resend::Now, Outcome::ConnectionLost);
        }
        self.follower.lost(error, now, self.lost_node_grace());
        Ok(())
    }

    fn lost_node_grace(&self) -> Duration {
        LOST_NODE_GRACE.min(self.shared.op_timeout)
    }

    /// Matches every reply `node` has sent with its request, and acts on cluster-map pushes.
    fn take_replies(&mut self, node: usize, now: Instant) -> Result<(), DriveError> {
        loop {
            let fetch = self.follower.fetching();
            let frame = match self.link.next_response(node)? {
                None => return Ok(()),
                Some(r) => Frame::of(&r, fetch == Some((node, r.opaque)) && r.magic != Magic::ServerRequest),
            };
            let (opaque, status, config) = match frame {
                Frame::Reply { opaque, status, config } => (opaque, status, config),
                Frame::Push { config: Some(body), .. } => {
                    self.link.apply_config(&body);
                    continue;
                }
                Frame::Push { rev: Some(rev), config: None } => {
                    self.follower.pushed(node, rev, self.link.config_rev());
                    continue;
                }
                Frame::Push { rev: None, config: None } | Frame::Other => continue,
            };
            if fetch == Some((node, opaque)) {
                self.follower.answered();
                if let (0, Some(body)) = (status, config) {
                    self.link.apply_config(&body);
                }
                continue;
            }
            // With unordered execution (negotiated, as the SDKs do) a durable write may be answered after requests
            // sent behind it: match by opaque. The queue is at most one batch long.
            let Some(at) = self.queues[node].iter().position(|f| f.opaque == opaque) else {
                let expected = self.queues[node].front().map(|f| f.opaque);
                return Err(DriveError::OutOfOrder { expected, got: opaque });
            };
            let Some(f) = self.queues[node].remove(at) else { unreachable!("position is in range") };
            self.in_flight -= 1;
            if status == STATUS_NOT_MY_VBUCKET {
                self.not_my_vbucket(node, f, config.unwrap_or_default(), now);
                continue;
            }
            if status == STATUS_TMPFAIL && self.shared.retry_tmpfail {
                self.retry(f.req, now, Resend::Backoff, Outcome::Status(STATUS_TMPFAIL));
                continue;
            }
            let mut req = f.req;
            if req.rmw_get && status == 0 {
                req.rmw_get = false;
                req.first_sent = now;
                req.retries = 0;
                self.followups.push_back(req);
                continue;
            }
            if req.kind == OpKind::Insert && status == 0 {
                self.shared.records.acknowledge(req.record);
            }
            let read = req.kind == OpKind::Get || req.rmw_get;
            self.finish(req.kind, req.intended, now, Outcome::of_status(status, read));
        }
    }

    /// `node` refused `f`: take the config the reply carries (or fetch one if it carries none), then send the
    /// request again, at once if the map now names another node.
    fn not_my_vbucket(&mut self, node: usize, f: InFlight, body: Vec<u8>, now: Instant) {
        if body.is_empty() {
            self.follower.want(FetchFrom::Node(node));
        } else {
            self.link.apply_config(&body);
        }
        let moved = self.link.needs_reconcile() || self.link.active_node(f.vbucket) != Some(node);
        let resend = if moved { Resend::Now } else { Resend::Backoff };
        self.retry(f.req, now, resend, Outcome::Status(STATUS_NOT_MY_VBUCKET));
    }

    fn finish(&mut self, kind: OpKind, intended: Instant, now: Instant, outcome: Outcome) {
        if self.clock.records(now) {
            let latency_ns = now.saturating_duration_since(intended).as_nanos().min(u128::from(u64::MAX)) as u64;
            self.done.push(Completion { kind, latency_ns, outcome, rows: 0 });
        }
    }

    fn fail_in_flight(&mut self, outcome: Outcome, now: Instant) {
        let lost: Vec<(OpKind, Instant)> = self
            .queues
            .iter_mut()
            .flat_map(|q| q.drain(..).map(|f| f.req))
            .chain(self.followups.drain(..))
            .chain(self.retries.drain())
            .map(|r| (r.kind, r.intended))
            .collect();
        self.in_flight = 0;
        for (kind, intended) in lost {
            self.finish(kind, intended, now, outcome);
        }
    }

    fn record_done(&mut self) {
        if self.done.is_empty() && self.retried == 0 {
            return;
        }
        // The lock is shared with this thread's other connections and the once-a-second reporter only.
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        for c in &self.done {
            stats.record(c);
        }
        stats.record_retries(self.retried);
        drop(stats);
        self.done.clear();
        self.retried = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From nodes [a, b, c] to [d, c, a]: a's and c's requests stay queued (they wait for their replies) under the
    /// nodes' new indexes, the new node d starts empty, and b's requests come back to be sent again, in order.
    #[test]
    fn requests_follow_their_node_or_come_back_when_it_left() {
        let old: Vec<VecDeque<&str>> = vec![["a1", "a2"].into(), ["b1", "b2"].into(), ["c1"].into()];
        let (queues, orphans) = remap_queues(old, &[Some(2), None, Some(1)], 3, 4);
        assert_eq!(queues, [VecDeque::new(), VecDeque::from(["c1"]), VecDeque::from(["a1", "a2"])]);
        assert_eq!(orphans, ["b1", "b2"]);
    }

    /// A request due while the window was full is charged from its due time; one due while a slot was free (the
    /// client's timer was late) from its actual send.
    #[test]
    fn open_loop_latency_starts_where_the_delay_was_the_servers() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let mut f = FullPeriods::default();
        f.mark(true, at(100));
        f.mark(false, at(300));
        assert_eq!(f.latency_start(at(150), at(300)), at(150), "due while full");
        assert_eq!(f.latency_start(at(400), at(1000)), at(1000), "due while free: the client was late");
        assert!(f.past.is_empty(), "periods before the due time are dropped");
        f.mark(true, at(2000));
        assert_eq!(f.latency_start(at(2500), at(2600)), at(2500), "still full");
        assert_eq!(f.latency_start(at(3000), at(2900)), at(3000), "never before the due time");
    }
}

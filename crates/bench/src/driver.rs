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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use settee_client::ClientError;
use settee_mcbp::Magic;
use tokio::time::Instant;

use crate::keys::KeyWriter;
use crate::link::Link;
use crate::rng::Rng;
use crate::stats::{Completion, OpKind, Outcome, PhaseStats};
use crate::values::ValuePool;
use crate::workload::{OpSource, Records};

/// NOT_MY_VBUCKET: the reply carries a newer config.
const STATUS_NOT_MY_VBUCKET: u16 = 0x07;
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
    /// An operation without a reply for this long fails its connection.
    pub op_timeout: Duration,
}

/// When a phase records: operations that finish before `record_from` (warm-up) or after `stop_at` are not counted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PhaseClock {
    pub start: Instant,
    pub record_from: Instant,
    pub stop_at: Option<Instant>,
}

impl PhaseClock {
    fn records(&self, now: Instant) -> bool {
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

#[derive(Debug)]
struct InFlight {
    opaque: u32,
    kind: OpKind,
    /// The GET half of a read-modify-write: a success sends the SET half, and the operation goes on.
    rmw_get: bool,
    record: u64,
    intended: Instant,
}

/// Why a connection stopped early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DriveError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error("reply out of order: expected opaque {expected:?}, got {got}")]
    OutOfOrder { expected: Option<u32>, got: u32 },
}

/// The state of one connection's loop.
struct Driver<'a> {
    link: Link,
    plan: Plan,
    shared: &'a Shared,
    stats: &'a Mutex<PhaseStats>,
    clock: PhaseClock,
    queues: Vec<VecDeque<InFlight>>,
    followups: VecDeque<InFlight>,
    done: Vec<Completion>,
    wire_key: Vec<u8>,
    in_flight: usize,
    issued: u64,
    source_done: bool,
    next_at: Instant,
    full: FullPeriods,
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
        done: Vec::with_capacity(window * 2),
        wire_key: Vec::with_capacity(256),
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
            let stopping = self.stopping(now);
            self.issue(now, stopping);
            self.full.mark(self.in_flight >= self.plan.window, now);
            self.record_done();
            self.link.flush().await?;
            if self.in_flight == 0 {
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
            waiting.extend((0..self.queues.len()).filter(|&n| !self.queues[n].is_empty()));
            let may_issue = self.plan.schedule.is_some() && self.in_flight < self.plan.window && !stopping;
            if may_issue {
                let wake = self.next_at.min(now + IDLE_SLEEP_MAX);
                tokio::select! {
                    r = self.link.fill_any(&waiting) => { r?; }
                    _ = tokio::time::sleep_until(wake) => {}
                }
            } else {
                let timeout = self.shared.op_timeout;
                match tokio::time::timeout(timeout, self.link.fill_any(&waiting)).await {
                    Ok(r) => {
                        r?;
                    }
                    Err(_) => return Err(DriveError::Timeout(timeout)),
                }
            }
            let now = Instant::now();
            for &node in &waiting {
                self.take_replies(node, now)?;
            }
            self.full.mark(self.in_flight >= self.plan.window, now);
        }
    }

    fn stopping(&self, now: Instant) -> bool {
        self.shared.stop.load(Ordering::Relaxed) || self.clock.stop_at.is_some_and(|t| now >= t)
    }

    fn exhausted(&self) -> bool {
        self.source_done || self.plan.limit.is_some_and(|l| self.issued >= l)
    }

    /// Fills the window: read-modify-write SET halves first, then new operations (on schedule, in open loop).
    fn issue(&mut self, now: Instant, stopping: bool) {
        while self.in_flight < self.plan.window {
            let (kind, record, intended, rmw_get) = if let Some(f) = self.followups.pop_front() {
                (f.kind, f.record, f.intended, false)
            } else {
                if stopping || self.exhausted() {
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
                (op.kind, op.record, intended, op.kind == OpKind::Rmw)
            };
            self.wire_key.clear();
            self.wire_key.extend_from_slice(self.link.key_prefix());
            let prefix_len = self.wire_key.len();
            self.shared.keys.write(record, &mut self.wire_key);
            let value = match kind {
                OpKind::Get => None,
                OpKind::Rmw if rmw_get => None,
                _ => Some((self.shared.values.pick(&mut self.plan.rng), self.shared.values.is_json())),
            };
            match self.link.queue(&self.wire_key, prefix_len, value) {
                Ok((node, opaque)) => {
                    self.queues[node].push_back(InFlight { opaque, kind, rmw_get, record, intended });
                    self.in_flight += 1;
                }
                Err(_) => self.finish(kind, intended, now, Outcome::Status(STATUS_NOT_MY_VBUCKET)),
            }
        }
    }

    /// Matches every reply `node` has sent with its request.
    fn take_replies(&mut self, node: usize, now: Instant) -> Result<(), DriveError> {
        loop {
            let (opaque, status, config) = match self.link.next_response(node)? {
                None => return Ok(()),
                // A server push (cluster map notification) answers no request.
                Some(r) if r.magic == Magic::ServerRequest => continue,
                Some(r) => (r.opaque, r.status, (r.status == STATUS_NOT_MY_VBUCKET).then(|| r.value.to_vec())),
            };
            // With unordered execution (negotiated, as the SDKs do) a durable write may be answered after requests
            // sent behind it: match by opaque. The queue is at most one batch long.
            let Some(at) = self.queues[node].iter().position(|f| f.opaque == opaque) else {
                let expected = self.queues[node].front().map(|f| f.opaque);
                return Err(DriveError::OutOfOrder { expected, got: opaque });
            };
            let Some(f) = self.queues[node].remove(at) else { unreachable!("position is in range") };
            self.in_flight -= 1;
            if let Some(body) = config {
                self.link.apply_config(&body);
            }
            if f.rmw_get && status == 0 {
                self.followups.push_back(f);
                continue;
            }
            if f.kind == OpKind::Insert && status == 0 {
                self.shared.records.acknowledge(f.record);
            }
            let read = f.kind == OpKind::Get || f.rmw_get;
            self.finish(f.kind, f.intended, now, Outcome::of_status(status, read));
        }
    }

    fn finish(&mut self, kind: OpKind, intended: Instant, now: Instant, outcome: Outcome) {
        if self.clock.records(now) {
            let latency_ns = now.saturating_duration_since(intended).as_nanos().min(u128::from(u64::MAX)) as u64;
            self.done.push(Completion { kind, latency_ns, outcome });
        }
    }

    fn fail_in_flight(&mut self, outcome: Outcome, now: Instant) {
        let lost: Vec<(OpKind, Instant)> = self
            .queues
            .iter_mut()
            .flat_map(|q| q.drain(..))
            .chain(self.followups.drain(..))
            .map(|f| (f.kind, f.intended))
            .collect();
        self.in_flight = 0;
        for (kind, intended) in lost {
            self.finish(kind, intended, now, outcome);
        }
    }

    fn record_done(&mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;

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

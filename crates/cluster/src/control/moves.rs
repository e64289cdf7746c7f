//! One bucket's vBucket moves during a rebalance, as a state machine: the move queue, admission by
//! `rebalanceMovesPerNode`, each move's phases (building → holding → ready → committed), and the stop and failure
//! rules. [`super::rebalance::Rebalance`] runs one of these per bucket and routes its events here.
//!
//! A round starts with the seqno reports of the sources of queued moves ([`Command::Poll`]), from which the machine
//! admits queued moves (proposing their copies as `building`); then come the reports of the other nodes the moves
//! in flight wait for (asked after the proposal, so a copy that starts at once is seen in the same round). The
//! machine holds the actives whose new copies caught up (one [`Command::Hold`] per active: the old active of a
//! takeover, or the active that stays while its replicas move), commits every ready move in one map change
//! ([`Command::SetChains`]), applies the failure rules and asks for the next round. Each node is asked at most once
//! per round. At most one command awaiting an answer is out at a time.
//!
//! Every move that builds a copy holds its active before the commit, and commits only once the new active and every
//! new copy hold what the active held when it stopped: a `majority` write is acknowledged by the old chain's
//! replicas, so a copy that joins the chain without it, and an active lost before the copy caught up, would lose
//! it (the simulation's seed 815 of a persistent bucket: a replica move committed while the new replica's stream was
//! reconnecting, the active was killed, and the failover promoted the new replica without two acknowledged writes).
//! Couchbase avoids the hold with a second durability topology during the move; settee refuses the vBucket's writes
//! for the few milliseconds of the switch instead.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::health::{unseen_in, HealthSnapshot};
use super::rebalance::{Command, Event, MoveFailure, Reports};
use crate::metadata::MetaCommand;
use crate::vbmap::{NodeId, VbMove};

/// How long one move's copies may take to catch up, in all.
pub const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a new copy may stay at the same seqno, short of what it must reach, before the rebalance fails: a copy
/// that stopped moving (its stream refused, its node stuck) ends the rebalance with a reason instead of a hang.
pub const BUILD_STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a takeover may hold the old active (clients are refused that vBucket meanwhile) for the new active's
/// copy to reach the seqno it stopped at; the copy had caught up before the hold, so this is normally milliseconds.
pub const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a node taking part in a move may go unseen by the health probes before the rebalance fails.
pub const NODE_DOWN_DURING_MOVES: Duration = Duration::from_secs(10);
/// Pause before the next round when the last one advanced nothing.
pub const ROUND_PAUSE: Duration = Duration::from_millis(20);

/// [`InFlight::since`] of a move whose copies' proposal has not answered yet: no report counts for them.
const PROPOSING: u64 = u64::MAX;

/// Where one move is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// New copies streaming until each reaches [`InFlight::wanted`].
    Building,
    /// The old active holds the vBucket; the new active's copy catches up to the seqno it stopped at.
    Holding { stopped_at: u64 },
    /// Ready for the map.
    Ready,
}

#[derive(Clone, Debug)]
struct InFlight {
    mv: VbMove,
    /// Nodes building a new copy.
    building: Vec<NodeId>,
    /// (old, new) active when the active changes node.
    takeover: Option<(NodeId, NodeId)>,
    /// The active's high seqno when the move started: what the new copies must reach. Zero for an empty vBucket,
    /// whose move copies nothing and does not count against the per-node limit.
    wanted: u64,
    phase: Phase,
    deadline: Duration,
    /// The lowest seqno the watched copies reported, and when it last grew (or the phase began).
    progress: (u64, Duration),
    /// The metadata revision from which the map (and the copies being built) place this move's copies: a node's
    /// report counts for them only once the node has applied it. Before, the node may report a copy that a change
    /// it has not applied yet empties (one a stopped rebalance was building), and a takeover committed on that
    /// seqno would make an empty copy active.
    since: u64,
}

impl InFlight {
    /// A move admitted when `known_rev` is the newest metadata revision known: one with copies to build counts
    /// reports from the revision that proposes them (set when the proposal answers), one without from `known_rev`.
    fn new(mv: VbMove, wanted: u64, known_rev: u64, now: Duration) -> Self {
        let building: Vec<NodeId> =
            mv.new_chain.iter().flatten().filter(|n| !mv.old_chain.contains(&Some(**n))).copied().collect();
        let takeover = match (mv.old_chain.first(), mv.new_chain.first()) {
            (Some(Some(old)), Some(Some(new))) if old != new => Some((*old, *new)),
            _ => None,
        };
        let deadline = now + CATCH_UP_TIMEOUT;
        let since = if building.is_empty() { known_rev } else { PROPOSING };
        let (phase, progress) = (Phase::Building, (0, now));
        InFlight { mv, building, takeover, wanted, phase, deadline, progress, since }
    }

    /// The node whose active copy is held before the commit: the old active of a takeover, or the active that keeps
    /// the vBucket while new replicas join its chain. None for a move that builds nothing and keeps its active.
    fn held_on(&self) -> Option<NodeId> {
        match self.takeover {
            Some((old, _)) => Some(old),
            None if !self.building.is_empty() => source(&self.mv),
            None => None,
        }
    }

    /// The chain a hold of a move that keeps its active lasts until (a takeover's ends when the active leaves).
    fn until_chain(&self) -> Option<&Vec<Option<NodeId>>> {
        self.takeover.is_none().then_some(&self.mv.new_chain)
    }

    /// The copies this move waits for in its phase: while the active is held, the new active and every new copy.
    fn watched(&self) -> Vec<NodeId> {
        match self.phase {
            Phase::Building => self.building.clone(),
            Phase::Holding { .. } => {
                let mut nodes = self.building.clone();
                nodes.extend(self.takeover.map(|(_, new)| new).filter(|new| !nodes.contains(new)));
                nodes
            }
            Phase::Ready => Vec::new(),
        }
    }

    fn enter(&mut self, phase: Phase, now: Duration) {
        self.phase = phase;
        self.progress = (0, now);
    }

    /// Why this move has waited too long, if it has: past its overall deadline, a new copy stuck at one seqno for
    /// [`BUILD_STALL_TIMEOUT`], or a takeover's hold older than [`TAKEOVER_TIMEOUT`].
    fn overdue(&self, now: Duration) -> Option<String> {
        let vb = self.mv.vb;
        let (at, since) = self.progress;
        let waited = now.saturating_sub(since);
        match self.phase {
            _ if now > self.deadline => {
                Some(format!("vBucket {vb} did not catch up within {CATCH_UP_TIMEOUT:?} ({:?})", self.phase))
            }
            Phase::Building if waited > BUILD_STALL_TIMEOUT => Some(format!(
                "vBucket {vb}: the new copies on {:?} stayed at seqno {at} (of {}) for {BUILD_STALL_TIMEOUT:?}",
                self.building, self.wanted
            )),
            Phase::Holding { stopped_at } if waited > TAKEOVER_TIMEOUT => Some(format!(
                "vBucket {vb}: the new copies on {:?} did not reach seqno {stopped_at} (the lowest is at {at}) \
                 within {TAKEOVER_TIMEOUT:?} of the hold",
                self.watched()
            )),
            _ => None,
        }
    }

    fn counts(&self) -> bool {
        self.wanted > 0
    }

    /// The nodes this move keeps busy: the source and the destinations of its copies, and both ends of a takeover.
    fn nodes(&self) -> Vec<NodeId> {
        let mut nodes = self.building.clone();
        if !self.building.is_empty() {
            nodes.extend(source(&self.mv));
        }
        if let Some((old, new)) = self.takeover {
            nodes.extend([old, new]);
        }
        nodes.extend(self.held_on());
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }
}

/// The node holding `mv`'s active copy before the move.
fn source(mv: &VbMove) -> Option<NodeId> {
    mv.old_chain.first().copied().flatten()
}

/// What one move does after a round's reports.
enum Step {
    Stay,
    /// Its copies caught up: hold its active on this node (the old active of a takeover, or the active that stays).
    Hold(NodeId),
    Enter(Phase),
}

/// What the machine waits for within a round.
#[derive(Debug)]
enum Stage {
    /// The round's first seqno reports ([`Command::Poll`]): the sources of queued moves, or (with none queued) the
    /// nodes the moves in flight wait for.
    Polling,
    /// The proposal of the copies being built; then the stop check (when stopping) or the advance.
    Building { stopping: bool },
    /// The reports of the nodes the moves in flight wait for that the round has not asked yet; then the advance.
    PollingMore,
    /// The hold of `vbs` on `node`; then the holds in `rest`.
    Holding { node: NodeId, vbs: Vec<u16>, rest: VecDeque<(NodeId, Vec<u16>)> },
    /// The map change that commits `ready`.
    Committing { ready: Vec<InFlight> },
    /// Finished: every event is ignored.
    Done,
}

/// One bucket's moves.
#[derive(Debug)]
pub(crate) struct Moves {
    bucket: String,
    me: NodeId,
    limit: usize,
    queue: VecDeque<VbMove>,
    flight: Vec<InFlight>,
    /// vBuckets held, by the node holding them: asked for and neither committed nor released.
    held: BTreeMap<NodeId, Vec<u16>>,
    stage: Stage,
    /// This round's observations.
    reports: Reports,
    health: HealthSnapshot,
    failed_over: Vec<NodeId>,
    /// Whether this round changed anything (the next one then starts without a pause).
    advanced: bool,
    /// Moves committed since the owner last asked.
    committed: usize,
    /// The newest metadata revision known to hold this machine's changes (the plan's, then each proposal's).
    rev: u64,
    outcome: Option<Result<(), MoveFailure>>,
}

impl Moves {
    /// `moves` of `bucket`, at most `limit` moves with data per node at once; `me` is the orchestrator; `rev` is the
    /// metadata revision the moves were planned from.
    pub(crate) fn new(bucket: &str, moves: Vec<VbMove>, limit: usize, me: NodeId, rev: u64) -> Self {
        Moves {
            bucket: bucket.to_owned(),
            me,
            limit: limit.max(1),
            queue: moves.into(),
            flight: Vec::new(),
            held: BTreeMap::new(),
            stage: Stage::Polling,
            reports: Reports::new(),
            health: HealthSnapshot::new(),
            failed_over: Vec::new(),
            // The first round starts at once.
            advanced: true,
            committed: 0,
            rev,
            outcome: None,
        }
    }

    /// The newest metadata revision this machine's changes are known to be in.
    pub(crate) fn rev(&self) -> u64 {
        self.rev
    }

    pub(crate) fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Moves with data a node may take part in at once.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The first round's poll, or the end when there is nothing to move.
    pub(crate) fn start(&mut self) -> Vec<Command> {
        self.next_round()
    }

    /// How the moves ended, once they have; taken once.
    pub(crate) fn take_outcome(&mut self) -> Option<Result<(), MoveFailure>> {
        self.outcome.take()
    }

    /// Moves committed since the last call.
    pub(crate) fn take_committed(&mut self) -> usize {
        std::mem::take(&mut self.committed)
    }

    pub(crate) fn handle(&mut self, event: Event, now: Duration) -> Vec<Command> {
        match (std::mem::replace(&mut self.stage, Stage::Done), event) {
            (Stage::Polling, Event::Polled { reports, health, stop_requested, failed_over }) => {
                self.reports = reports;
                self.health = health;
                self.failed_over = failed_over;
                self.advanced = false;
                self.round(stop_requested, now)
            }
            (Stage::PollingMore, Event::Polled { reports, health, failed_over, .. }) => {
                self.reports.extend(reports);
                self.health = health;
                self.failed_over = failed_over;
                self.advance(now)
            }
            (Stage::Building { .. }, Event::Proposed(Err(e))) => self.fail(MoveFailure::Proposal(e)),
            (Stage::Building { stopping: true }, Event::Proposed(Ok(rev))) => {
                self.rev = self.rev.max(rev);
                self.stop_check(now)
            }
            (Stage::Building { stopping: false }, Event::Proposed(Ok(rev))) => {
                // The copies just proposed exist from this revision on.
                self.rev = self.rev.max(rev);
                for f in self.flight.iter_mut().filter(|f| f.since == PROPOSING) {
                    f.since = self.rev;
                }
                self.poll_more(now)
            }
            (Stage::Holding { node, vbs, rest }, Event::Held { node: answered, reply }) if answered == node => {
                match reply {
                    Err(e) => self.fail(MoveFailure::Hold(e)),
                    Ok(reply) => {
                        for f in self.flight.iter_mut().filter(|f| vbs.contains(&f.mv.vb)) {
                            // Without the seqno the copy stopped at, nothing says when the new active has all of it.
                            let Some(stopped_at) = reply.stopped.get(&self.bucket, f.mv.vb) else {
                                let vb = f.mv.vb;
                                return self.fail(MoveFailure::HoldUnreported { node, vb });
                            };
                            f.enter(Phase::Holding { stopped_at }, now);
                        }
                        self.hold_next(rest, now)
                    }
                }
            }
            (Stage::Committing { ready }, Event::Proposed(result)) => self.committed(ready, result, now),
            (Stage::Done, _) => Vec::new(),
            (stage, event) => {
                // An answer to a command that is not out: a driver bug. Nothing sensible can follow.
                let why = format!("unexpected {event:?} while waiting in {stage:?}");
                self.fail(MoveFailure::Protocol(why))
            }
        }
    }

    /// Admission (or, when stopping, giving up the moves still building), then the rest of the round.
    fn round(&mut self, stopping: bool, now: Duration) -> Vec<Command> {
        if stopping {
            let before = self.flight.len();
            self.flight.retain(|f| f.phase != Phase::Building);
            if self.flight.len() == before {
                return self.stop_check(now);
            }
            self.advanced = true;
            self.stage = Stage::Building { stopping: true };
            return vec![self.propose_building()];
        }
        let started = match self.admit(now) {
            Ok(started) => started,
            Err(f) => return self.fail(f),
        };
        if started.is_empty() {
            return self.poll_more(now);
        }
        self.advanced = true;
        let new_copies = started.iter().any(|f| !f.building.is_empty());
        self.flight.extend(started);
        if !new_copies {
            return self.poll_more(now);
        }
        self.stage = Stage::Building { stopping: false };
        vec![self.propose_building()]
    }

    /// A stop ends the moves once no takeover is left under way.
    fn stop_check(&mut self, now: Duration) -> Vec<Command> {
        if self.flight.is_empty() {
            return self.fail(MoveFailure::Stopped);
        }
        self.poll_more(now)
    }

    /// Asks the nodes the moves in flight wait for that this round has not asked yet; the advance follows their
    /// answer.
    fn poll_more(&mut self, now: Duration) -> Vec<Command> {
        let nodes: Vec<NodeId> = self.watched_nodes().into_iter().filter(|n| !self.reports.contains_key(n)).collect();
        if nodes.is_empty() {
            return self.advance(now);
        }
        self.stage = Stage::PollingMore;
        vec![Command::Poll { nodes, pause: Duration::ZERO }]
    }

    /// Starts the queued moves whose nodes have room. A move of an empty vBucket copies nothing and does not count
    /// against the limit. Each new copy must reach what its active holds now: a source that did not report fails
    /// the rebalance.
    fn admit(&mut self, now: Duration) -> Result<Vec<InFlight>, MoveFailure> {
        let mut load: BTreeMap<NodeId, usize> = BTreeMap::new();
        for n in self.flight.iter().filter(|f| f.counts()).flat_map(InFlight::nodes) {
            *load.entry(n).or_default() += 1;
        }
        let mut started = Vec::new();
        let mut rest = VecDeque::new();
        while let Some(mv) = self.queue.pop_front() {
            let wanted = match source(&mv) {
                Some(active) => match self.reports.get(&active) {
                    Some(Ok(report)) => report.buckets.get(&self.bucket, mv.vb).unwrap_or(0),
                    Some(Err(e)) => {
                        self.queue.push_front(mv);
                        return Err(MoveFailure::Unreported(e.clone()));
                    }
                    None => {
                        self.queue.push_front(mv);
                        return Err(MoveFailure::Unreported(format!("node {active} was not asked for its seqnos")));
                    }
                },
                None => 0,
            };
            let f = InFlight::new(mv, wanted, self.rev, now);
            let nodes = if f.counts() { f.nodes() } else { Vec::new() };
            if nodes.iter().all(|n| load.get(n).copied().unwrap_or(0) < self.limit) {
                for n in nodes {
                    *load.entry(n).or_default() += 1;
                }
                started.push(f);
            } else {
                rest.push_back(f.mv);
            }
        }
        self.queue = rest;
        Ok(started)
    }

    fn propose_building(&self) -> Command {
        let building: BTreeMap<u16, Vec<NodeId>> =
            self.flight.iter().filter(|f| !f.building.is_empty()).map(|f| (f.mv.vb, f.building.clone())).collect();
        Command::Propose(MetaCommand::SetBuilding { bucket: self.bucket.clone(), building })
    }

    /// The seqno `node` reported this round for its copy of `vb`, if it had applied revision `placed` (see
    /// [`InFlight::since`]; 0: whatever it applied).
    fn seqno(&self, node: NodeId, vb: u16, placed: u64) -> Option<u64> {
        match self.reports.get(&node) {
            Some(Ok(report)) => report.copy_seqno(&self.bucket, vb, placed),
            _ => None,
        }
    }

    /// Moves every copy that caught up to its next phase, then holds the actives of the takeovers that can start.
    fn advance(&mut self, now: Duration) -> Vec<Command> {
        let mut to_hold: BTreeMap<NodeId, Vec<u16>> = BTreeMap::new();
        for i in 0..self.flight.len() {
            let (at, next) = self.next_step(&self.flight[i]);
            let f = &mut self.flight[i];
            // A building copy's clock restarts whenever it moves; a takeover's runs from the hold.
            if at > f.progress.0 {
                f.progress = (at, if f.phase == Phase::Building { now } else { f.progress.1 });
            }
            match next {
                Step::Stay => continue,
                Step::Hold(node) => to_hold.entry(node).or_default().push(f.mv.vb),
                Step::Enter(phase) => {
                    if f.phase != Phase::Building && phase == Phase::Building {
                        // The old active serves the vBucket again (it restarted and lost its holds): what it took
                        // since is not covered by the seqno the hold stopped at, so the takeover starts over.
                        let vb = f.mv.vb;
                        tracing::warn!(bucket = %self.bucket, vb, "a takeover's hold was lost on the old active; holding it again");
                    }
                    f.enter(phase, now);
                }
            }
            self.advanced = true;
        }
        for (old, vbs) in &to_hold {
            let held = self.held.entry(*old).or_default();
            held.extend(vbs.iter().filter(|vb| !held.contains(vb)).collect::<Vec<_>>());
        }
        self.hold_next(to_hold.into_iter().collect(), now)
    }

    /// The lowest seqno `f`'s watched copies reported this round, and what `f` does next.
    fn next_step(&self, f: &InFlight) -> (u64, Step) {
        let vb = f.mv.vb;
        let at = f.watched().iter().map(|n| self.seqno(*n, vb, f.since).unwrap_or(0)).min().unwrap_or(0);
        let reached = |node: NodeId, seqno: u64| self.seqno(node, vb, f.since).is_some_and(|h| h >= seqno);
        let step = match f.phase {
            Phase::Building if f.building.iter().all(|n| reached(*n, f.wanted)) => match f.held_on() {
                Some(node) => Step::Hold(node),
                None => Step::Enter(Phase::Ready),
            },
            Phase::Holding { .. } if f.held_on().is_some_and(|node| self.seqno(node, vb, 0).is_some()) => {
                Step::Enter(Phase::Building)
            }
            Phase::Holding { stopped_at } if f.watched().iter().all(|n| reached(*n, stopped_at)) => {
                Step::Enter(Phase::Ready)
            }
            _ => Step::Stay,
        };
        (at, step)
    }

    /// Asks for the next hold in `rest`, or goes on to the commit.
    fn hold_next(&mut self, mut rest: VecDeque<(NodeId, Vec<u16>)>, now: Duration) -> Vec<Command> {
        match rest.pop_front() {
            Some((node, vbs)) => {
                let until_chains = self
                    .flight
                    .iter()
                    .filter(|f| vbs.contains(&f.mv.vb))
                    .filter_map(|f| Some((f.mv.vb, f.until_chain()?.clone())))
                    .collect();
                let hold = Command::Hold { node, bucket: self.bucket.clone(), vbs: vbs.clone(), until_chains };
                self.stage = Stage::Holding { node, vbs, rest };
                vec![hold]
            }
            None => self.commit(now),
        }
    }

    /// Commits every ready move's chain in one map change (the old actives end their holds as they apply it).
    fn commit(&mut self, now: Duration) -> Vec<Command> {
        let (ready, rest): (Vec<InFlight>, Vec<InFlight>) =
            std::mem::take(&mut self.flight).into_iter().partition(|f| f.phase == Phase::Ready);
        self.flight = rest;
        if ready.is_empty() {
            return self.check(now);
        }
        let chains = ready.iter().map(|f| (f.mv.vb, f.mv.new_chain.clone())).collect();
        self.stage = Stage::Committing { ready };
        vec![Command::SetChains { bucket: self.bucket.clone(), chains }]
    }

    fn committed(&mut self, ready: Vec<InFlight>, result: Result<u64, String>, now: Duration) -> Vec<Command> {
        let mut held: BTreeMap<NodeId, Vec<u16>> = BTreeMap::new();
        for f in &ready {
            if let Some(node) = f.held_on() {
                held.entry(node).or_default().push(f.mv.vb);
            }
        }
        let mut out = Vec::new();
        for (old, vbs) in held {
            self.forget_held(old, &vbs);
            if result.is_err() {
                // The map did not change: the old actives serve again.
                out.push(Command::Release { node: old, bucket: self.bucket.clone(), vbs });
            }
            // Otherwise each held active ends its hold when it applies the new map (the vBucket goes from pending to
            // replica or dead, or to active with its new chain; a release reaching it first would make it active
            // again for a moment with the old chain).
        }
        match result {
            Err(e) => {
                out.extend(self.fail(MoveFailure::Proposal(e)));
                out
            }
            Ok(rev) => {
                self.rev = self.rev.max(rev);
                self.committed += ready.len();
                self.advanced = true;
                out.extend(self.check(now));
                out
            }
        }
    }

    fn forget_held(&mut self, old: NodeId, vbs: &[u16]) {
        if let Some(held) = self.held.get_mut(&old) {
            held.retain(|vb| !vbs.contains(vb));
        }
    }

    /// The failure rules, then the next round (or the end when every move is committed).
    fn check(&mut self, now: Duration) -> Vec<Command> {
        // A node in a move that stopped answering ends the rebalance (allowing for a slow probe on a busy box).
        let down = self
            .flight
            .iter()
            .flat_map(InFlight::nodes)
            .find(|n| *n != self.me && unseen_in(&self.health, *n) > NODE_DOWN_DURING_MOVES);
        if let Some(n) = down {
            return self.fail(MoveFailure::NodeDown(n));
        }
        // A node failed over under a move (automatic failover of a node that came back quickly) would keep it
        // waiting for a copy that node no longer builds, and a commit naming it would be refused.
        if let Some(n) = self.flight.iter().flat_map(InFlight::nodes).find(|n| self.failed_over.contains(n)) {
            return self.fail(MoveFailure::FailedOver(n));
        }
        if let Some(why) = self.flight.iter().find_map(|f| f.overdue(now)) {
            return self.fail(MoveFailure::Overdue(why));
        }
        self.next_round()
    }

    fn next_round(&mut self) -> Vec<Command> {
        if self.queue.is_empty() && self.flight.is_empty() {
            self.stage = Stage::Done;
            self.outcome = Some(Ok(()));
            return self.release_all();
        }
        let pause = if self.advanced { Duration::ZERO } else { ROUND_PAUSE };
        self.stage = Stage::Polling;
        vec![Command::Poll { nodes: self.to_poll(), pause }]
    }

    /// The nodes a round asks first: the sources of queued moves (what their copies must reach), or with none
    /// queued the nodes the moves in flight wait for.
    fn to_poll(&self) -> Vec<NodeId> {
        if self.queue.is_empty() {
            return self.watched_nodes();
        }
        let mut nodes: Vec<NodeId> = self.queue.iter().filter_map(source).collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// The nodes the moves in flight wait for: the copies of their phase, and the old active of each takeover under
    /// way (a hold it no longer knows of, after a restart, shows as an active copy again).
    fn watched_nodes(&self) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = Vec::new();
        for f in &self.flight {
            nodes.extend(f.watched());
            // The held active too: a report of the vBucket from it says it serves again (it lost its hold).
            if let (Phase::Holding { .. }, Some(node)) = (f.phase, f.held_on()) {
                nodes.push(node);
            }
        }
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// Ends the moves with `failure`: whatever is still held is released (the old actives serve again) and the
    /// copies being built are given up; finished moves are kept.
    fn fail(&mut self, failure: MoveFailure) -> Vec<Command> {
        self.stage = Stage::Done;
        self.outcome = Some(Err(failure));
        let mut out = self.release_all();
        out.push(Command::ClearBuilding { bucket: self.bucket.clone() });
        out
    }

    fn release_all(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.held)
            .into_iter()
            .filter(|(_, vbs)| !vbs.is_empty())
            .map(|(node, vbs)| Command::Release { node, bucket: self.bucket.clone(), vbs })
            .collect()
    }
}

#[cfg(test)]
#[path = "moves_tests.rs"]
mod tests;

//! Rebalance: moves vBuckets to a balanced map over the nodes that stay, while clients keep working.
//!
//! The node that received `POST /controller/rebalance` orchestrates, in the background: it activates added nodes
//! and failed-over nodes marked for recovery (ejecting failed-over nodes that are not), plans the target map
//! (`vbmap::rebalance_keeping`: minimal movement, and a delta-recovering node gets back the vBuckets it kept), then
//! moves vBuckets concurrently, at most `rebalanceMovesPerNode` moves per node at a time (as the source or a
//! destination of a copy). Each move goes through:
//! 1. **build**: its new copies are proposed as `building`; their nodes stream them from the active over DCP
//!    (backfill, then the change log; a kept copy resumes from its own seqno) until each has reached the seqno the
//!    active had when the move started;
//! 2. **takeover** (only when the active moves): the old active holds just that vBucket pending (clients get
//!    NOT_MY_VBUCKET and retry), answering the seqno it stopped at; the new active's copy catches up to it;
//! 3. **commit**: a `SetMap` names the new chain (promotion gives the new active a failover-log branch, the map
//!    change is pushed to clients); the old active ends its hold when it applies that map, so its copy goes from
//!    pending straight to replica or dead; copies the map no longer places on a node are dropped there.
//!
//! One loop drives every move in flight, so each round costs one proposal per kind of change and one seqno
//! report per node, whatever the number of moves. Ejected nodes are removed at the end. A stop or a failure leaves
//! the map as the last commit made it (consistent; finished moves are kept) and the rebalance can be started again.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use settee_cluster::{vbmap, Membership, MetaCommand, NodeId, Recovery, VbMove};
use tokio::time::Instant;

use super::peers::{seqno_in, Peers, Reports};
use super::Cluster;
use crate::node::Node;

/// How long one move's copies may take to catch up, in all.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a new copy may stay at the same seqno, short of what it must reach, before the rebalance fails: a copy
/// that stopped moving (its stream refused, its node stuck) ends the rebalance with a reason instead of a hang.
const BUILD_STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a takeover may hold the old active (clients are refused that vBucket meanwhile) for the new active's
/// copy to reach the seqno it stopped at; the copy had caught up before the hold, so this is normally milliseconds.
const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a node taking part in a move may go unseen by the health probes before the rebalance fails.
const NODE_DOWN_DURING_MOVES: Duration = Duration::from_secs(10);
/// Pause between rounds of the move loop when nothing advanced.
const ROUND_PAUSE: Duration = Duration::from_millis(20);

/// What `/pools/default/tasks` and `/pools/default/rebalanceProgress` report.
#[derive(Clone, Debug, Default)]
pub struct Status {
    pub running: bool,
    /// vBucket moves done and planned in the current (or last) rebalance.
    pub done: usize,
    pub total: usize,
    pub stop_requested: bool,
    pub last_error: Option<String>,
}

/// Starts a rebalance in the background; refuses while one runs, or when a node that stays is unreachable.
pub fn start_rebalance(cluster: &Arc<Cluster>, node: &Arc<Node>, ejected: Vec<NodeId>) -> anyhow::Result<()> {
    let meta = cluster.metadata();
    let staying: Vec<NodeId> = meta
        .nodes
        .values()
        .filter(|n| n.membership != Membership::InactiveFailed || meta.recovery.contains_key(&n.id))
        .filter(|n| !ejected.contains(&n.id))
        .map(|n| n.id)
        .collect();
    cluster.ensure_reachable(&staying)?;
    {
        let mut status = cluster.rebalance.lock();
        anyhow::ensure!(!status.running, "Rebalance running.");
        *status = Status { running: true, ..Status::default() };
    }
    let (cluster, node) = (cluster.clone(), node.clone());
    tokio::spawn(async move {
        let outcome = run(&cluster, &node, &ejected).await;
        let mut status = cluster.rebalance.lock();
        status.running = false;
        match outcome {
            Ok(()) => tracing::info!(moves = status.done, "rebalance done"),
            Err(e) => {
                tracing::warn!(error = %e, done = status.done, total = status.total, "rebalance ended early");
                status.last_error = Some(format!("{e:#}"));
            }
        }
    });
    Ok(())
}

async fn run(cluster: &Cluster, node: &Node, ejected: &[NodeId]) -> anyhow::Result<()> {
    let meta = cluster.metadata();
    let mut ejected = ejected.to_vec();
    // A failed-over node not marked for recovery leaves, as ns_server ejects it.
    for n in meta.nodes.values() {
        if n.membership == Membership::InactiveFailed && !meta.recovery.contains_key(&n.id) && !ejected.contains(&n.id)
        {
            ejected.push(n.id);
        }
    }
    let recovering: Vec<(NodeId, Recovery)> =
        meta.recovery.iter().filter(|(id, _)| !ejected.contains(id)).map(|(id, r)| (*id, *r)).collect();
    let kept = kept_copies(node, &meta, &recovering).await?;
    for n in meta.nodes.values().filter(|n| n.membership != Membership::Active && !ejected.contains(&n.id)) {
        cluster.propose(node, MetaCommand::SetMembership { node: n.id, membership: Membership::Active }).await?;
    }
    let meta = cluster.metadata();
    let nodes: Vec<NodeId> = meta.active_nodes().into_iter().filter(|n| !ejected.contains(n)).collect();
    anyhow::ensure!(!nodes.is_empty(), "a rebalance must keep at least one active node");
    cluster.ensure_reachable(&nodes)?;
    let no_kept = BTreeMap::new();
    let plans: Vec<(String, Vec<VbMove>)> = meta
        .buckets
        .iter()
        .map(|(name, b)| {
            let kept = kept.get(name).unwrap_or(&no_kept);
            let target = vbmap::rebalance_keeping(&b.map, kept, &nodes, usize::from(b.spec.replicas));
            (name.clone(), vbmap::moves(&b.map, &target))
        })
        .collect();
    cluster.rebalance.lock().total = plans.iter().map(|(_, m)| m.len()).sum();
    let limit = usize::try_from(meta.rebalance.moves_per_node).unwrap_or(usize::MAX).max(1);
    for (bucket, moves) in plans {
        let mut mover = Mover::new(cluster, node, &bucket, limit);
        let moved = mover.run(moves).await;
        mover.release_all().await;
        if moved.is_err() {
            mover.clear_building().await;
        }
        moved.with_context(|| format!("moving vBuckets of {bucket}"))?;
    }
    for (id, _) in &recovering {
        cluster.propose(node, MetaCommand::SetRecovery { node: *id, recovery: None }).await?;
    }
    for id in &ejected {
        cluster.propose(node, MetaCommand::RemoveNode(*id)).await?;
        cluster.store().remove_member(*id).await?;
    }
    Ok(())
}

/// Per bucket, the vBuckets each delta-recovering node still holds data for (its failed-over copies).
async fn kept_copies(
    node: &Node,
    meta: &settee_cluster::ClusterMetadata,
    recovering: &[(NodeId, Recovery)],
) -> anyhow::Result<BTreeMap<String, BTreeMap<NodeId, Vec<u16>>>> {
    let peers = Peers::new(node, meta);
    let mut kept: BTreeMap<String, BTreeMap<NodeId, Vec<u16>>> = BTreeMap::new();
    for (id, _) in recovering.iter().filter(|(_, r)| *r == Recovery::Delta) {
        let report = peers.seqnos(*id).await.context("a node in delta recovery must answer")?;
        for (bucket, vbs) in report["kept"].as_object().into_iter().flatten() {
            let vbs: Vec<u16> = vbs.as_object().into_iter().flatten().filter_map(|(vb, _)| vb.parse().ok()).collect();
            kept.entry(bucket.clone()).or_default().insert(*id, vbs);
        }
    }
    Ok(kept)
}

/// Where one move is.
#[derive(Debug)]
enum Phase {
    /// New copies streaming until each reaches [`InFlight::wanted`].
    Building,
    /// The old active holds the vBucket; the new active's copy catches up to the seqno it stopped at.
    Holding { stopped_at: u64 },
    /// Ready for the map.
    Ready,
}

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
    deadline: Instant,
    /// The lowest seqno the watched copies reported, and when it last grew (or the phase began).
    progress: (u64, Instant),
}

impl InFlight {
    fn new(mv: VbMove, wanted: u64) -> Self {
        let building: Vec<NodeId> =
            mv.new_chain.iter().flatten().filter(|n| !mv.old_chain.contains(&Some(**n))).copied().collect();
        let takeover = match (mv.old_chain.first(), mv.new_chain.first()) {
            (Some(Some(old)), Some(Some(new))) if old != new => Some((*old, *new)),
            _ => None,
        };
        let now = Instant::now();
        let deadline = now + CATCH_UP_TIMEOUT;
        InFlight { mv, building, takeover, wanted, phase: Phase::Building, deadline, progress: (0, now) }
    }

    /// The copies this move waits for in its phase.
    fn watched(&self) -> Vec<NodeId> {
        match self.phase {
            Phase::Building => self.building.clone(),
            Phase::Holding { .. } => self.takeover.map(|(_, new)| vec![new]).unwrap_or_default(),
            Phase::Ready => Vec::new(),
        }
    }

    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.progress = (0, Instant::now());
    }

    /// Why this move has waited too long, if it has: past its overall deadline, a new copy stuck at one seqno for
    /// [`BUILD_STALL_TIMEOUT`], or a takeover's hold older than [`TAKEOVER_TIMEOUT`].
    fn overdue(&self, now: Instant) -> Option<String> {
        let vb = self.mv.vb;
        let (at, since) = self.progress;
        let waited = now.saturating_duration_since(since);
        match self.phase {
            _ if now > self.deadline => {
                Some(format!("vBucket {vb} did not catch up within {CATCH_UP_TIMEOUT:?} ({:?})", self.phase))
            }
            Phase::Building if waited > BUILD_STALL_TIMEOUT => Some(format!(
                "vBucket {vb}: the new copies on {:?} stayed at seqno {at} (of {}) for {BUILD_STALL_TIMEOUT:?}",
                self.building, self.wanted
            )),
            Phase::Holding { stopped_at } if waited > TAKEOVER_TIMEOUT => {
                let new = self.takeover.map(|(_, n)| n).unwrap_or_default();
                Some(format!(
                    "vBucket {vb}: the new active on node {new} did not reach seqno {stopped_at} (it is at {at}) \
                     within {TAKEOVER_TIMEOUT:?} of the takeover hold"
                ))
            }
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
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }
}

/// The node holding `mv`'s active copy before the move.
fn source(mv: &VbMove) -> Option<NodeId> {
    mv.old_chain.first().copied().flatten()
}

/// Drives one bucket's moves.
struct Mover<'a> {
    cluster: &'a Cluster,
    node: &'a Node,
    bucket: &'a str,
    limit: usize,
    flight: Vec<InFlight>,
    /// vBuckets held for takeovers, by their old active.
    held: BTreeMap<NodeId, Vec<u16>>,
}

impl<'a> Mover<'a> {
    fn new(cluster: &'a Cluster, node: &'a Node, bucket: &'a str, limit: usize) -> Self {
        Mover { cluster, node, bucket, limit, flight: Vec::new(), held: BTreeMap::new() }
    }

    async fn run(&mut self, moves: Vec<VbMove>) -> anyhow::Result<()> {
        let mut queue: VecDeque<VbMove> = moves.into();
        while !queue.is_empty() || !self.flight.is_empty() {
            let meta = self.cluster.metadata();
            let peers = Peers::new(self.node, &meta);
            // Admission (sources) and progress (destinations) share one report per node per round.
            let mut reports = Reports::new(&peers);
            let stopping = self.cluster.rebalance.lock().stop_requested;
            let mut advanced =
                if stopping { self.abandon_building().await? } else { self.admit(&mut queue, &mut reports).await? };
            if stopping && self.flight.is_empty() {
                anyhow::bail!("Rebalance stopped by user.");
            }
            advanced |= self.advance(&peers, &mut reports).await?;
            advanced |= self.commit_ready().await?;
            // A node in a move that stopped answering ends the rebalance (allowing for a slow probe on a busy box).
            if let Some(n) = self
                .flight
                .iter()
                .flat_map(InFlight::nodes)
                .find(|n| *n != self.cluster.me && self.cluster.health.unseen_for(*n) > NODE_DOWN_DURING_MOVES)
            {
                anyhow::bail!("node {n} stopped answering during the rebalance; finished moves are kept");
            }
            let now = Instant::now();
            if let Some(why) = self.flight.iter().find_map(|f| f.overdue(now)) {
                anyhow::bail!("{why}; finished moves are kept");
            }
            if !advanced {
                tokio::time::sleep(ROUND_PAUSE).await;
            }
        }
        Ok(())
    }

    /// Starts the queued moves whose nodes have room, and proposes their copies; true when any started. A move
    /// of an empty vBucket copies nothing and does not count against the limit.
    async fn admit(&mut self, queue: &mut VecDeque<VbMove>, reports: &mut Reports<'_, '_>) -> anyhow::Result<bool> {
        if queue.is_empty() {
            return Ok(false);
        }
        let mut load: BTreeMap<NodeId, usize> = BTreeMap::new();
        for n in self.flight.iter().filter(|f| f.counts()).flat_map(InFlight::nodes) {
            *load.entry(n).or_default() += 1;
        }
        let mut started = Vec::new();
        let mut rest = VecDeque::new();
        while let Some(mv) = queue.pop_front() {
            // Each new copy must reach what its active holds now.
            let wanted = match source(&mv) {
                Some(active) => {
                    reports.load(active).await?;
                    reports.seqno(active, self.bucket, mv.vb).unwrap_or(0)
                }
                None => 0,
            };
            let f = InFlight::new(mv, wanted);
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
        *queue = rest;
        if started.is_empty() {
            return Ok(false);
        }
        let new_copies = started.iter().any(|f| !f.building.is_empty());
        self.flight.extend(started);
        if new_copies {
            self.propose_building().await?;
        }
        Ok(true)
    }

    /// On a stop: moves still building are given up (their copies no longer streamed); takeovers finish.
    async fn abandon_building(&mut self) -> anyhow::Result<bool> {
        let before = self.flight.len();
        self.flight.retain(|f| !matches!(f.phase, Phase::Building));
        if self.flight.len() == before {
            return Ok(false);
        }
        self.propose_building().await?;
        Ok(true)
    }

    async fn propose_building(&self) -> anyhow::Result<()> {
        let building: BTreeMap<u16, Vec<NodeId>> =
            self.flight.iter().filter(|f| !f.building.is_empty()).map(|f| (f.mv.vb, f.building.clone())).collect();
        self.cluster.propose(self.node, MetaCommand::SetBuilding { bucket: self.bucket.into(), building }).await?;
        Ok(())
    }

    /// Moves every copy that caught up to its next phase, holding the actives of the takeovers that can start.
    async fn advance(&mut self, peers: &Peers<'_>, reports: &mut Reports<'_, '_>) -> anyhow::Result<bool> {
        for f in &self.flight {
            let mut asked = f.watched();
            if let (Phase::Holding { .. }, Some((old, _))) = (&f.phase, f.takeover) {
                // The old active too: a hold it no longer knows of (it restarted) shows as an active copy again.
                asked.push(old);
            }
            for n in asked {
                // A node that does not answer this round is asked again in the next one.
                reports.load_or_skip(n).await;
            }
        }
        let bucket = self.bucket;
        let reached = |node: NodeId, vb: u16, seqno: u64| reports.seqno(node, bucket, vb).is_some_and(|h| h >= seqno);
        let now = Instant::now();
        let mut advanced = false;
        let mut to_hold: BTreeMap<NodeId, Vec<u16>> = BTreeMap::new();
        for f in &mut self.flight {
            let at = f.watched().iter().map(|n| reports.seqno(*n, bucket, f.mv.vb).unwrap_or(0)).min().unwrap_or(0);
            // A building copy's clock restarts whenever it moves; a takeover's runs from the hold.
            if at > f.progress.0 {
                f.progress = (at, if matches!(f.phase, Phase::Building) { now } else { f.progress.1 });
            }
            match f.phase {
                Phase::Building if f.building.iter().all(|n| reached(*n, f.mv.vb, f.wanted)) => {
                    advanced = true;
                    match f.takeover {
                        Some((old, _)) => to_hold.entry(old).or_default().push(f.mv.vb),
                        None => f.enter(Phase::Ready),
                    }
                }
                Phase::Holding { .. }
                    if f.takeover.is_some_and(|(old, _)| reports.seqno(old, bucket, f.mv.vb).is_some()) =>
                {
                    // The old active serves the vBucket again (it restarted and lost its holds): what it took since
                    // is not covered by the seqno the hold stopped at, so the takeover starts over.
                    tracing::warn!(
                        bucket,
                        vb = f.mv.vb,
                        "a takeover's hold was lost on the old active; holding it again"
                    );
                    f.enter(Phase::Building);
                    advanced = true;
                }
                Phase::Holding { stopped_at }
                    if f.takeover.is_some_and(|(_, new)| reached(new, f.mv.vb, stopped_at)) =>
                {
                    f.enter(Phase::Ready);
                    advanced = true;
                }
                _ => {}
            }
        }
        for (old, vbs) in to_hold {
            self.held.entry(old).or_default().extend(&vbs);
            let stopped = peers.hold(old, Some(self.bucket), &vbs, true).await?;
            for f in self.flight.iter_mut().filter(|f| vbs.contains(&f.mv.vb)) {
                // Without the seqno the copy stopped at, nothing says when the new active has all of it.
                let stopped_at = seqno_in(&stopped, self.bucket, f.mv.vb).with_context(|| {
                    format!("node {old} held vBucket {} but did not report the seqno it stopped at", f.mv.vb)
                })?;
                f.enter(Phase::Holding { stopped_at });
            }
        }
        Ok(advanced)
    }

    /// Commits every ready move's chain in one map change (the old actives end their holds as they apply it; if the
    /// change fails they are released).
    async fn commit_ready(&mut self) -> anyhow::Result<bool> {
        let (ready, rest): (Vec<InFlight>, Vec<InFlight>) =
            std::mem::take(&mut self.flight).into_iter().partition(|f| matches!(f.phase, Phase::Ready));
        self.flight = rest;
        if ready.is_empty() {
            return Ok(false);
        }
        let mut map = self.cluster.metadata().buckets.get(self.bucket).context("the bucket was deleted")?.map.clone();
        for f in &ready {
            map.chains[usize::from(f.mv.vb)] = f.mv.new_chain.clone();
        }
        let committed = self.cluster.propose(self.node, MetaCommand::SetMap { bucket: self.bucket.into(), map }).await;
        let mut held: BTreeMap<NodeId, Vec<u16>> = BTreeMap::new();
        for f in &ready {
            if let Some((old, _)) = f.takeover {
                held.entry(old).or_default().push(f.mv.vb);
            }
        }
        for (old, vbs) in held {
            if committed.is_err() {
                // The map did not change: the old actives serve again.
                self.release(old, &vbs).await;
            } else {
                // Each old active ends its hold when it applies the new map (the vBucket goes from pending to
                // replica or dead; a release reaching it first would make it active again for a moment).
                self.forget_held(old, &vbs);
            }
        }
        committed?;
        self.cluster.rebalance.lock().done += ready.len();
        Ok(true)
    }

    async fn release(&mut self, old: NodeId, vbs: &[u16]) {
        let meta = self.cluster.metadata();
        if let Err(e) = Peers::new(self.node, &meta).hold(old, Some(self.bucket), vbs, false).await {
            tracing::warn!(node = old, error = %e, "cannot release vBuckets held for a takeover");
        }
        self.forget_held(old, vbs);
    }

    fn forget_held(&mut self, old: NodeId, vbs: &[u16]) {
        if let Some(held) = self.held.get_mut(&old) {
            held.retain(|vb| !vbs.contains(vb));
        }
    }

    /// Releases whatever is still held (a failed or stopped rebalance): the old actives serve again.
    async fn release_all(&mut self) {
        for (old, vbs) in std::mem::take(&mut self.held) {
            if !vbs.is_empty() {
                self.release(old, &vbs).await;
            }
        }
    }

    /// Ends the building of copies a failed rebalance leaves behind.
    async fn clear_building(&self) {
        let cmd = MetaCommand::SetBuilding { bucket: self.bucket.into(), building: BTreeMap::new() };
        if let Err(e) = self.cluster.propose(self.node, cmd).await {
            tracing::warn!(bucket = self.bucket, error = %e, "cannot end the copies a failed rebalance was building");
        }
    }
}

impl Cluster {
    /// Fails when one of `nodes` is unhealthy (unseen by this node's probes for 3 s): a rebalance that needs it is
    /// refused at once instead of waiting out its moves' timeout.
    fn ensure_reachable(&self, nodes: &[NodeId]) -> anyhow::Result<()> {
        match nodes.iter().find(|n| self.health.status(**n, self.me) == "unhealthy") {
            Some(n) => {
                let name = self.metadata().nodes.get(n).map_or_else(|| n.to_string(), |i| i.mgmt_addr());
                anyhow::bail!("node {name} is unreachable; fail it over or bring it back, then rebalance again")
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn takeover() -> InFlight {
        InFlight::new(VbMove { vb: 7, old_chain: vec![Some(1), Some(2)], new_chain: vec![Some(3), Some(2)] }, 40)
    }

    /// Every wait of a move ends: a new copy that stops moving fails the rebalance after BUILD_STALL_TIMEOUT (while
    /// one that keeps moving may take longer), a takeover hold fails it after TAKEOVER_TIMEOUT however the copy
    /// moves, and every move has an overall deadline; each failure names the vBucket and what it waited for.
    #[test]
    fn a_move_that_stops_advancing_is_overdue_with_a_reason() {
        let mut f = takeover();
        let start = f.progress.1;
        assert_eq!(f.overdue(start + BUILD_STALL_TIMEOUT / 2), None);
        let stalled = f.overdue(start + BUILD_STALL_TIMEOUT + Duration::from_secs(1)).expect("a stalled copy");
        assert!(stalled.contains("vBucket 7") && stalled.contains("of 40"), "{stalled}");
        f.progress = (30, start + BUILD_STALL_TIMEOUT);
        assert_eq!(f.overdue(start + BUILD_STALL_TIMEOUT + Duration::from_secs(1)), None, "it moved meanwhile");

        f.enter(Phase::Holding { stopped_at: 45 });
        let held = f.progress.1;
        f.progress.0 = 44;
        assert_eq!(f.overdue(held + TAKEOVER_TIMEOUT / 2), None);
        let late = f.overdue(held + TAKEOVER_TIMEOUT + Duration::from_secs(1)).expect("a takeover past its time");
        assert!(late.contains("seqno 45") && late.contains("node 3") && late.contains("at 44"), "{late}");
        assert!(f.overdue(f.deadline + Duration::from_secs(1)).is_some_and(|why| why.contains("did not catch up")));
    }
}

//! [`Replicator`]: the state machine of one replication on one source node.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use settee_types::{vbucket_for_key, FailoverLog, StreamStart};

use crate::change::{Change, Write};
use crate::error::XdcrError;
use crate::event::{Checkpoint, Command, Event, Outcome};
use crate::settings::Settings;
use crate::stats::Stats;
use crate::vb_progress::{Probe, VbProgress};

/// A write the core holds until the target settles it.
#[derive(Debug)]
struct Held {
    vb: u16,
    epoch: u64,
    change: Arc<Change>,
    attempts: u32,
    /// The node it was sent to, while in flight.
    node: Option<usize>,
}

/// One target node's queue and pipeline.
#[derive(Debug, Default)]
struct NodeQueue {
    queued: VecDeque<u64>,
    inflight: usize,
}

pub struct Replicator {
    settings: Settings,
    /// Saved checkpoints by source vBucket: where a vBucket that starts being read resumes.
    checkpoints: BTreeMap<u16, Checkpoint>,
    vbs: BTreeMap<u16, VbProgress>,
    next_epoch: u64,
    held: HashMap<u64, Held>,
    /// Bytes of keys and values of the held writes.
    held_bytes: usize,
    next_id: u64,
    /// Target vBucket → node index; empty until the first map.
    map: Vec<u16>,
    nodes: Vec<NodeQueue>,
    /// Writes waiting for a (new) map.
    parked: Vec<u64>,
    map_requested: bool,
    /// Writes waiting to be retried: (due time, id).
    retries: BTreeSet<(Duration, u64)>,
    last_checkpoint: Duration,
    last_confirm: Duration,
    stats: Stats,
    out: Vec<Command>,
}

impl Replicator {
    /// A core that resumes each vBucket from `checkpoints` (none: from zero). `now` starts the checkpoint interval.
    pub fn new(settings: Settings, checkpoints: impl IntoIterator<Item = Checkpoint>, now: Duration) -> Replicator {
        Replicator {
            settings,
            checkpoints: checkpoints.into_iter().map(|c| (c.vb, c)).collect(),
            vbs: BTreeMap::new(),
            next_epoch: 0,
            held: HashMap::new(),
            held_bytes: 0,
            next_id: 0,
            map: Vec::new(),
            nodes: Vec::new(),
            parked: Vec::new(),
            map_requested: false,
            retries: BTreeSet::new(),
            last_checkpoint: now,
            last_confirm: now,
            stats: Stats::default(),
            out: Vec::new(),
        }
    }

    /// Applies one event at time `now`; the commands it leads to wait in [`Self::take_commands`]. An event that
    /// breaks the reading contract is refused and changes nothing: the driver restarts that vBucket's reading.
    pub fn handle(&mut self, now: Duration, event: Event) -> Result<(), XdcrError> {
        match event {
            Event::VbStarted { vb, failover, high_seqno, purge_seqno } => {
                self.start_vb(vb, &failover, high_seqno, purge_seqno)
            }
            Event::VbStopped { vb } => self.stop_vb(vb),
            Event::Snapshot { vb, start, end } => self.vb(vb)?.on_snapshot(vb, start, end)?,
            Event::Change { vb, change } => self.on_change(vb, change)?,
            Event::SnapshotDone { vb } => {
                self.vb(vb)?.on_snapshot_done();
                self.pump();
            }
            Event::Map { vbuckets, nodes } => self.on_map(vbuckets, nodes),
            Event::Reply { node, id, outcome } => self.on_reply(now, node, id, outcome),
            Event::NodeDown { node } => self.on_node_down(node),
            Event::Tick => self.on_tick(now),
            Event::Observed { vb, probe, vbuuid, persisted, current } => {
                self.on_observed(vb, probe, vbuuid, persisted, current)
            }
            Event::ObserveRefused { vb, probe } => self.on_observe_refused(vb, probe),
        }
        Ok(())
    }

    pub fn take_commands(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.out)
    }

    /// Whether the driver may read more changes: the writes the core holds are under `pending_max` and their
    /// bytes under `pending_bytes_max` (one read may pass either by what it returns at once).
    pub fn accepting(&self) -> bool {
        self.held.len() < self.settings.pending_max && self.held_bytes < self.settings.pending_bytes_max
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The seqno below which every change of `vb` is on the target (None: not being read).
    pub fn through(&self, vb: u16) -> Option<u64> {
        self.vbs.get(&vb).map(VbProgress::through)
    }

    /// Writes held: queued, in flight, waiting to retry or for a map (goxdcr's `docs_rep_queue`).
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Bytes of keys and values of the writes held (goxdcr's `size_rep_queue`).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// A checkpoint saved elsewhere (another node that read the vBucket before it moved here): kept if it is ahead
    /// of the one held, and used when the vBucket next starts (checked against the failover log then).
    pub fn offer_checkpoint(&mut self, c: Checkpoint) {
        if self.checkpoints.get(&c.vb).is_none_or(|held| held.seqno < c.seqno) {
            self.checkpoints.insert(c.vb, c);
        }
    }

    /// The seqno below which every change of `vb` is confirmed on the target's disk (None: not being read).
    pub fn confirmed(&self, vb: u16) -> Option<u64> {
        self.vbs.get(&vb).map(|p| p.confirmed)
    }

    /// Saves the checkpoints of every vBucket whose confirmed position moved since the last save, now (a pause, a
    /// stop, a shutdown). Acknowledged writes not confirmed yet are read and sent again next run (conflict
    /// resolution refuses those the target kept).
    pub fn checkpoint_now(&mut self, now: Duration) {
        self.last_checkpoint = now;
        let mut saved = Vec::new();
        for (&vb, p) in &mut self.vbs {
            let confirmed = p.confirmed;
            if confirmed != p.saved {
                p.saved = confirmed;
                let c = Checkpoint { vb, vbuuid: p.vbuuid, seqno: confirmed };
                self.checkpoints.insert(vb, c);
                saved.push(c);
            }
        }
        if !saved.is_empty() {
            self.stats.checkpoints += saved.len() as u64;
            self.out.push(Command::SaveCheckpoints(saved));
        }
    }

    /// Stops reading `vb` and saves its checkpoint at once if it moved: the node the vBucket went to resumes from
    /// the checkpoints the cluster holds, so a stale one would make it resend.
    fn stop_vb(&mut self, vb: u16) {
        let Some(p) = self.vbs.remove(&vb) else { return };
        if p.confirmed != p.saved {
            let c = Checkpoint { vb, vbuuid: p.vbuuid, seqno: p.confirmed };
            self.checkpoints.insert(vb, c);
            self.stats.checkpoints += 1;
            self.out.push(Command::SaveCheckpoints(vec![c]));
        }
    }

    fn vb(&mut self, vb: u16) -> Result<&mut VbProgress, XdcrError> {
        self.vbs.get_mut(&vb).ok_or(XdcrError::NotReading(vb))
    }

    /// Resumes from the checkpoint when the vBucket's history still contains it, else from where the histories
    /// part (the failover log's rollback point: 0 when the checkpoint's vbuuid is unknown to it).
    fn start_vb(&mut self, vb: u16, failover: &FailoverLog, high_seqno: u64, purge_seqno: u64) {
        let from = match self.checkpoints.get(&vb) {
            None => 0,
            Some(c) => {
                let asked = StreamStart::new(c.vbuuid, c.seqno, c.seqno, c.seqno);
                failover.rollback_point(asked, high_seqno, purge_seqno).unwrap_or(c.seqno)
            }
        };
        self.next_epoch += 1;
        self.vbs.insert(vb, VbProgress::new(failover.latest().uuid, self.next_epoch, from));
        self.out.push(Command::Read { vb, from });
    }

    fn on_change(&mut self, vb: u16, change: Change) -> Result<(), XdcrError> {
        let p = self.vb(vb)?;
        p.on_change(vb, change.seqno)?;
        let epoch = p.epoch;
        self.stats.count_read(&change);
        let id = self.next_id;
        self.next_id += 1;
        self.held_bytes += change.bytes();
        self.held.insert(id, Held { vb, epoch, change: Arc::new(change), attempts: 0, node: None });
        if let Some(node) = self.route(id) {
            if self.nodes[node].queued.len() >= self.settings.batch_count {
                self.pump_node(node);
            }
        }
        Ok(())
    }

    /// Queues the write on the node holding its target vBucket, or parks it until a map says where that is.
    fn route(&mut self, id: u64) -> Option<usize> {
        let held = self.held.get_mut(&id)?;
        held.node = None;
        let node = (!self.map.is_empty())
            .then(|| usize::from(self.map[usize::from(vbucket_for_key(&held.change.key, self.map.len() as u16).0)]))
            .filter(|&n| n < self.nodes.len());
        match node {
            Some(n) => self.nodes[n].queued.push_back(id),
            None => {
                self.parked.push(id);
                self.request_map();
            }
        }
        node
    }

    fn request_map(&mut self) {
        if !self.map_requested {
            self.map_requested = true;
            self.out.push(Command::RefreshMap);
        }
    }

    fn on_map(&mut self, vbuckets: Vec<u16>, nodes: usize) {
        self.map = vbuckets;
        self.map_requested = false;
        // This map answers every request for one still waiting to be taken.
        self.out.retain(|c| *c != Command::RefreshMap);
        if nodes != self.nodes.len() {
            // Node indexes now name other nodes: everything queued or in flight is routed again (a write that did
            // land meanwhile is refused by conflict resolution the second time, which is harmless).
            for n in &mut self.nodes {
                self.parked.extend(n.queued.drain(..));
            }
            for (&id, h) in &mut self.held {
                if h.node.take().is_some() {
                    self.parked.push(id);
                }
            }
            self.nodes = (0..nodes).map(|_| NodeQueue::default()).collect();
        }
        for id in std::mem::take(&mut self.parked) {
            self.stats.rerouted += 1;
            self.route(id);
        }
        self.pump();
    }

    fn on_reply(&mut self, now: Duration, node: usize, id: u64, outcome: Outcome) {
        let Some(held) = self.held.get_mut(&id) else { return };
        if held.node != Some(node) {
            return; // A reply from a node the write was taken back from (it went down).
        }
        held.node = None;
        if let Some(n) = self.nodes.get_mut(node) {
            n.inflight = n.inflight.saturating_sub(1);
        }
        match outcome {
            Outcome::Success => {
                self.stats.count_written(&held.change);
                self.settle(id);
            }
            Outcome::LostConflict => {
                self.stats.count_lost_conflict(&held.change);
                self.settle(id);
            }
            Outcome::NotMyVbucket => {
                self.stats.rerouted += 1;
                self.parked.push(id);
                self.map_requested = false;
                self.request_map();
            }
            Outcome::TempFail | Outcome::Failed(_) => {
                if let Outcome::Failed(status) = outcome {
                    self.stats.errors += 1;
                    self.stats.last_error = Some(status);
                }
                held.attempts += 1;
                let shift = held.attempts.saturating_sub(1).min(16);
                let backoff =
                    self.settings.retry_backoff_min.saturating_mul(1 << shift).min(self.settings.retry_backoff_max);
                self.retries.insert((now + backoff, id));
            }
        }
        self.pump_node(node);
    }

    fn settle(&mut self, id: u64) {
        let Some(held) = self.held.remove(&id) else { return };
        self.held_bytes = self.held_bytes.saturating_sub(held.change.bytes());
        if let Some(p) = self.vbs.get_mut(&held.vb) {
            if p.epoch == held.epoch {
                p.on_settled(held.change.seqno);
            }
        }
    }

    fn on_node_down(&mut self, node: usize) {
        // The node may have crashed: what it acknowledged and had not persisted may be gone, so the vBuckets it
        // holds are read again from their confirmed positions (a write it kept is refused the second time).
        let unsure: Vec<u16> = self
            .vbs
            .iter()
            .filter(|(&vb, p)| p.through() > p.confirmed && self.target_node(vb).is_none_or(|n| n == node))
            .map(|(&vb, _)| vb)
            .collect();
        for vb in unsure {
            self.rewind(vb);
        }
        let lost: Vec<u64> = self.held.iter().filter(|(_, h)| h.node == Some(node)).map(|(&id, _)| id).collect();
        if let Some(n) = self.nodes.get_mut(node) {
            n.inflight = 0;
            self.parked.extend(n.queued.drain(..));
        }
        for id in lost {
            if let Some(h) = self.held.get_mut(&id) {
                h.node = None;
            }
            self.parked.push(id);
        }
        self.map_requested = false;
        self.request_map();
    }

    fn on_tick(&mut self, now: Duration) {
        while let Some(&(due, id)) = self.retries.first() {
            if due > now {
                break;
            }
            self.retries.pop_first();
            if self.held.contains_key(&id) {
                self.stats.retries += 1;
                self.route(id);
            }
        }
        self.pump();
        if now.saturating_sub(self.last_confirm) >= self.settings.confirm_interval {
            self.last_confirm = now;
            self.probe_all();
        }
        if now.saturating_sub(self.last_checkpoint) >= self.settings.checkpoint_interval {
            self.checkpoint_now(now);
        }
    }

    fn pump(&mut self) {
        for node in 0..self.nodes.len() {
            self.pump_node(node);
        }
    }

    /// Sends what the node's window allows, in batches of at most `batch_count`.
    fn pump_node(&mut self, node: usize) {
        let (batch_max, window) = (self.settings.batch_count.max(1), self.settings.inflight_per_node_max);
        loop {
            let Some(n) = self.nodes.get_mut(node) else { return };
            let room = window.saturating_sub(n.inflight).min(batch_max).min(n.queued.len());
            if room == 0 {
                return;
            }
            let ids: Vec<u64> = n.queued.drain(..room).collect();
            n.inflight += ids.len();
            let mut writes = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(h) = self.held.get_mut(&id) {
                    h.node = Some(node);
                    let vbucket = vbucket_for_key(&h.change.key, self.map.len() as u16).0;
                    writes.push(Write { id, vbucket, change: h.change.clone() });
                }
            }
            self.out.push(Command::Send { node, writes });
        }
    }
}

/// Confirming that acknowledged writes are on the target's disk before a checkpoint covers them.
impl Replicator {
    /// The target node holding target vBucket `vb` (the one source vBucket `vb`'s keys map to); None when the
    /// target has no map yet or another vBucket count.
    fn target_node(&self, vb: u16) -> Option<usize> {
        if self.map.len() != self.settings.source_vbuckets {
            return None;
        }
        self.map.get(usize::from(vb)).map(|&n| usize::from(n)).filter(|&n| n < self.nodes.len())
    }

    /// Starts a probe for each vBucket with acknowledged writes past its confirmed position, and asks again for
    /// each probe still open. A target with another vBucket count cannot be asked: acknowledged counts as done.
    fn probe_all(&mut self) {
        let other_count = !self.map.is_empty() && self.map.len() != self.settings.source_vbuckets;
        let vbs: Vec<u16> = self.vbs.keys().copied().collect();
        for vb in vbs {
            let node = self.target_node(vb);
            let Some(p) = self.vbs.get_mut(&vb) else { continue };
            if other_count {
                p.confirmed = p.through();
                continue;
            }
            if p.probe.is_none() && p.through() > p.confirmed {
                p.probe = Some(Probe { id: self.next_id, seqno: p.through(), target: None });
                self.next_id += 1;
            }
            if let (Some(probe), Some(node)) = (p.probe, node) {
                self.out.push(Command::Observe { node, vb, probe: probe.id });
            }
        }
    }

    fn on_observed(&mut self, vb: u16, id: u64, vbuuid: u64, persisted: u64, current: u64) {
        let Some(p) = self.vbs.get_mut(&vb) else { return };
        let Some(mut probe) = p.probe.filter(|probe| probe.id == id) else { return };
        let lost = p.target_uuid.is_some_and(|u| u != vbuuid)
            || probe.target.is_some_and(|(u, at)| u != vbuuid || current < at);
        p.target_uuid = Some(vbuuid);
        if lost {
            // A failover or a crash recovery on the target: resend from what its disk is known to hold.
            self.rewind(vb);
            return;
        }
        let (_, at) = *probe.target.get_or_insert((vbuuid, current));
        if persisted >= at {
            p.confirmed = probe.seqno;
            p.probe = None;
        } else {
            p.probe = Some(probe);
        }
    }

    /// The target cannot be asked about `vb`: its acknowledged writes count as persisted (the behaviour before
    /// persistence was confirmed), and it is asked again next interval.
    fn on_observe_refused(&mut self, vb: u16, id: u64) {
        let Some(p) = self.vbs.get_mut(&vb) else { return };
        if let Some(probe) = p.probe.filter(|probe| probe.id == id) {
            p.confirmed = probe.seqno;
            p.probe = None;
            self.stats.unconfirmed += 1;
        }
    }

    /// Reads `vb` again from its confirmed position (the writes of the earlier reading still held are settled and
    /// ignored, as after a restart of its reading).
    fn rewind(&mut self, vb: u16) {
        let Some(old) = self.vbs.get(&vb) else { return };
        let (vbuuid, from, saved, target_uuid) = (old.vbuuid, old.confirmed, old.saved, old.target_uuid);
        self.next_epoch += 1;
        let mut p = VbProgress::new(vbuuid, self.next_epoch, from);
        (p.saved, p.target_uuid) = (saved, target_uuid);
        self.vbs.insert(vb, p);
        self.stats.rewinds += 1;
        self.out.push(Command::Read { vb, from });
    }
}

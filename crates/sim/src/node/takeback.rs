//! A restarted member's take-back of its persistent actives, as the server's `cluster/takeback.rs` drives the
//! real decision (`settee_cluster::control::restart::Takeback`): before its metadata counts as current (so before
//! anything of it is active), once warmup is done, it asks the replicas of the vBuckets the map gives it for their
//! seqnos and has the cluster hand every vBucket a replica is ahead on over to that replica (`PromoteReplicas`).
//! A replica that does not answer within ten seconds is not waited for any longer.

use std::collections::BTreeMap;
use std::time::Duration;

use settee_cluster::control::restart::Takeback;
use settee_cluster::peer::SeqnoReport;
use settee_cluster::{ClusterMetadata, MetaCommand, NodeId};

use super::{node_id, Ctx, SimNode, BUCKET, PROPOSE_RETRY};
use crate::msg::Msg;
use crate::net::Endpoint;

/// The server's `SILENT_REPLICA_WAIT`.
const SILENT_REPLICA_WAIT: Duration = Duration::from_secs(10);
/// How long the replicas' answers are waited for before the comparison is made again (the server's catch-up
/// loop polls, then sleeps 500 ms).
const ASK_AGAIN: Duration = Duration::from_millis(500);

/// One comparison in progress.
pub(super) struct TakebackAsk {
    id: u64,
    asked_at: Duration,
    began: Duration,
    reports: BTreeMap<NodeId, BTreeMap<u16, u64>>,
    proposed_at: Option<Duration>,
}

/// What the restarted node does next.
pub(super) enum Next {
    /// Still comparing, or waiting for the hand-over to commit.
    Wait,
    /// Nothing (more) to hand over: the metadata counts as current.
    Current,
}

impl SimNode {
    /// Whether this node must compare its persistent actives with their replicas before it serves.
    pub(super) fn needs_takeback_check(&self) -> bool {
        self.starts > 1 && self.persistence.is_some() && self.takeback_enabled
    }

    /// One pass of the comparison, each time the leader's current metadata arrives.
    pub(super) fn take_back(&mut self, meta: &ClusterMetadata, ctx: &mut Ctx<'_>) -> Next {
        let Some(bucket) = self.bucket.as_ref() else { return Next::Wait };
        if bucket.is_warming_up() {
            return Next::Wait;
        }
        let me = node_id(self.idx);
        let Some(b) = meta.buckets.get(BUCKET) else { return Next::Current };
        if b.map.actives_of(me).is_empty() {
            self.takeback = None;
            return Next::Current;
        }
        let now = ctx.now;
        let ask = self.takeback.get_or_insert_with(|| TakebackAsk {
            id: 0,
            asked_at: Duration::ZERO,
            began: now,
            reports: BTreeMap::new(),
            proposed_at: None,
        });
        if ask.proposed_at.is_some_and(|at| now < at + PROPOSE_RETRY) {
            return Next::Wait;
        }
        ask.proposed_at = None;
        let replicas = Takeback::replicas_to_ask(&b.map, me);
        let answered = replicas.iter().all(|r| ask.reports.contains_key(r));
        if ask.id == 0 || (!answered && now >= ask.asked_at + ASK_AGAIN) {
            ask.id = ctx.rng.next_u64() | 1;
            ask.asked_at = now;
            ask.reports.clear();
            let id = ask.id;
            for replica in replicas {
                ctx.send(Endpoint::Node(self.idx), Endpoint::Node((replica - 1) as usize), None, Msg::SeqnosAsk { id });
            }
            return Next::Wait;
        }
        let give_up = now >= ask.began + SILENT_REPLICA_WAIT;
        if !answered && !give_up {
            return Next::Wait;
        }
        let mine: BTreeMap<u16, u64> = b
            .map
            .actives_of(me)
            .into_iter()
            .filter_map(|vb| Some((vb, bucket.stream_info(settee_types::VbId(vb)).ok()?.high_seqno)))
            .collect();
        let decision = Takeback::decide(&b.map, me, &mine, &ask.reports);
        if decision.promote.is_empty() {
            if !decision.unknown.is_empty() {
                ctx.count("restarted nodes took back vBuckets unchecked");
            }
            self.takeback = None;
            return Next::Current;
        }
        ask.proposed_at = Some(now);
        ask.id = 0;
        ctx.count("take-backs handing vBuckets to replicas ahead");
        let cmd = MetaCommand::PromoteReplicas { bucket: BUCKET.into(), node: me, promote: decision.promote };
        ctx.send(Endpoint::Node(self.idx), Endpoint::Control, None, Msg::Propose(cmd));
        Next::Wait
    }

    /// A replica's seqno report, for the comparison in progress: its copies and the dead ones it keeps data for
    /// (the higher of the two where both list a vBucket).
    pub(super) fn takeback_report(&mut self, from: usize, id: u64, report: &SeqnoReport) {
        let Some(ask) = self.takeback.as_mut().filter(|a| a.id == id) else { return };
        let mut seqnos: BTreeMap<u16, u64> = BTreeMap::new();
        for section in [&report.kept, &report.buckets] {
            for (vb, seqno) in section.0.get(BUCKET).into_iter().flatten() {
                let at = seqnos.entry(*vb).or_default();
                *at = (*at).max(*seqno);
            }
        }
        ask.reports.insert(node_id(from), seqnos);
    }
}

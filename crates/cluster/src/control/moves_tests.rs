//! One bucket's moves, openraft style: build a state, apply one event, assert the commands.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::control::health::{NodeHealth, PeerHealth};
use crate::peer::{HoldReply, SeqnoReport, VbSeqnos};

const ME: NodeId = 1;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn mv(vb: u16, old: &[NodeId], new: &[NodeId]) -> VbMove {
    VbMove { vb, old_chain: old.iter().map(|n| Some(*n)).collect(), new_chain: new.iter().map(|n| Some(*n)).collect() }
}

fn seqnos(pairs: &[(u16, u64)]) -> VbSeqnos {
    let mut s = VbSeqnos::default();
    s.add_bucket("b");
    for (vb, seqno) in pairs {
        s.insert("b", *vb, *seqno);
    }
    s
}

/// A round in which each listed node reports `(vb, seqno)` pairs of bucket "b", every node is healthy, no stop.
fn polled(nodes: &[(NodeId, &[(u16, u64)])]) -> Event {
    polled_at(0, nodes)
}

/// [`polled`], from nodes that have applied the metadata up to `rev`.
fn polled_at(rev: u64, nodes: &[(NodeId, &[(u16, u64)])]) -> Event {
    let reports = nodes
        .iter()
        .map(|(n, pairs)| (*n, Ok(SeqnoReport { buckets: seqnos(pairs), rev, ..Default::default() })))
        .collect();
    Event::Polled { reports, health: HealthSnapshot::new(), stop_requested: false, failed_over: Vec::new() }
}

fn stop(event: Event) -> Event {
    match event {
        Event::Polled { reports, health, failed_over, .. } => {
            Event::Polled { reports, health, stop_requested: true, failed_over }
        }
        other => other,
    }
}

fn unseen(event: Event, node: NodeId, for_: Duration) -> Event {
    match event {
        Event::Polled { reports, mut health, stop_requested, failed_over } => {
            health.insert(node, PeerHealth { status: NodeHealth::Unhealthy, unseen: for_ });
            Event::Polled { reports, health, stop_requested, failed_over }
        }
        other => other,
    }
}

fn building(pairs: &[(u16, &[NodeId])]) -> Command {
    let building = pairs.iter().map(|(vb, nodes)| (*vb, nodes.to_vec())).collect();
    Command::Propose(MetaCommand::SetBuilding { bucket: "b".into(), building })
}

fn chains(pairs: &[(u16, &[NodeId])]) -> Command {
    let chains = pairs.iter().map(|(vb, nodes)| (*vb, nodes.iter().map(|n| Some(*n)).collect())).collect();
    Command::SetChains { bucket: "b".into(), chains }
}

fn poll(nodes: &[NodeId], pause: Duration) -> Command {
    Command::Poll { nodes: nodes.to_vec(), pause }
}

fn held(node: NodeId, pairs: &[(u16, u64)]) -> Event {
    Event::Held { node, reply: Ok(HoldReply { stopped: seqnos(pairs) }) }
}

fn ok() -> Event {
    Event::Proposed(Ok(0))
}

fn clear() -> Command {
    Command::ClearBuilding { bucket: "b".into() }
}

fn release(node: NodeId, vbs: &[u16]) -> Command {
    Command::Release { node, bucket: "b".into(), vbs: vbs.to_vec() }
}

/// vBucket 7's active moves from node 1 to node 3 (replica on 2 stays); its data reaches seqno 40 at the start.
/// Returns the moves after the takeover hold answered that node 1 stopped at 45, at second 100.
fn holding_takeover() -> Moves {
    let mut m = Moves::new("b", vec![mv(7, &[1, 2], &[3, 2])], 4, ME, 0);
    assert_eq!(m.start(), vec![poll(&[1], Duration::ZERO)], "the source first: what must the copy reach?");
    assert_eq!(m.handle(polled(&[(1, &[(7, 40)])]), secs(0)), vec![building(&[(7, &[3])])]);
    assert_eq!(m.handle(ok(), secs(0)), vec![poll(&[3], Duration::ZERO)], "then the new copy, in the same round");
    assert_eq!(m.handle(polled(&[(3, &[])]), secs(0)), vec![poll(&[3], Duration::ZERO)]);
    let hold = Command::Hold { node: 1, bucket: "b".into(), vbs: vec![7], until_chains: Default::default() };
    assert_eq!(m.handle(polled(&[(3, &[(7, 40)])]), secs(1)), vec![hold]);
    assert_eq!(m.handle(held(1, &[(7, 45)]), secs(100)), vec![poll(&[1, 3], Duration::ZERO)]);
    m
}

/// A node takes part in at most `limit` moves with data at once: the third move waits in the queue until one of the
/// first two commits, and is then admitted with the copies still building.
#[test]
fn admission_waits_for_room_under_the_per_node_limit() {
    let moves = (0..3).map(|vb| mv(vb, &[1, 2], &[1, 3])).collect();
    let mut m = Moves::new("b", moves, 2, ME, 0);
    assert_eq!(m.start(), vec![poll(&[1], Duration::ZERO)]);
    let data = [(0, 10), (1, 10), (2, 10)];
    assert_eq!(m.handle(polled(&[(1, &data)]), secs(0)), vec![building(&[(0, &[3]), (1, &[3])])]);
    assert_eq!(m.handle(ok(), secs(0)), vec![poll(&[3], Duration::ZERO)]);
    assert_eq!(m.handle(polled(&[(3, &[])]), secs(0)), vec![poll(&[1], Duration::ZERO)]);
    // The queued move still has no room; vBucket 0's copy caught up (its active is held), vBucket 1's did not.
    assert_eq!(m.handle(polled(&[(1, &data)]), secs(1)), vec![poll(&[3], Duration::ZERO)]);
    let until_chains = [(0, vec![Some(1), Some(3)])].into_iter().collect();
    let hold = Command::Hold { node: 1, bucket: "b".into(), vbs: vec![0], until_chains };
    assert_eq!(m.handle(polled(&[(3, &[(0, 10), (1, 4)])]), secs(1)), vec![hold]);
    assert_eq!(m.handle(held(1, &[(0, 10)]), secs(1)), vec![poll(&[1], Duration::ZERO)]);
    // Held, vBucket 0 is pending on node 1: its report leaves it out.
    assert_eq!(m.handle(polled(&[(1, &data[1..])]), secs(1)), vec![poll(&[3], Duration::ZERO)]);
    assert_eq!(m.handle(polled(&[(3, &[(0, 10), (1, 4)])]), secs(1)), vec![chains(&[(0, &[1, 3])])]);
    assert_eq!(m.handle(ok(), secs(1)), vec![poll(&[1], Duration::ZERO)]);
    assert_eq!(m.take_committed(), 1);
    assert_eq!(m.handle(polled(&[(1, &data)]), secs(2)), vec![building(&[(1, &[3]), (2, &[3])])]);
}

/// A move of an empty vBucket copies nothing and does not count against the limit: all of them start at once.
#[test]
fn empty_vbuckets_move_at_once_whatever_the_limit() {
    let moves = (0..3).map(|vb| mv(vb, &[1, 2], &[1, 3])).collect();
    let mut m = Moves::new("b", moves, 1, ME, 0);
    m.start();
    let out = m.handle(polled(&[(1, &[])]), secs(0));
    assert_eq!(out, vec![building(&[(0, &[3]), (1, &[3]), (2, &[3])])]);
}

/// A takeover goes building → holding → ready → committed: the hold is asked once the new copy reached what the
/// active had, the commit once the new active reached the seqno the hold stopped at; nothing is released on
/// success (the old active ends its hold as it applies the map) and the moves end.
#[test]
fn a_takeover_holds_then_commits_once_the_new_active_caught_up() {
    let mut m = holding_takeover();
    assert_eq!(m.handle(polled(&[(1, &[]), (3, &[(7, 44)])]), secs(101)), vec![poll(&[1, 3], ROUND_PAUSE)]);
    assert_eq!(m.handle(polled(&[(1, &[]), (3, &[(7, 45)])]), secs(102)), vec![chains(&[(7, &[3, 2])])]);
    assert_eq!(m.handle(ok(), secs(102)), Vec::<Command>::new(), "nothing to release");
    assert_eq!(m.take_committed(), 1);
    assert_eq!(m.take_outcome(), Some(Ok(())));
}

/// A move whose active stays and whose replica changes holds the active once the new replica caught up, until the
/// chain it commits is applied there, and commits only when the new replica holds everything the active held when
/// it stopped: a `majority` write acknowledged by the old replica meanwhile is on the new one before it joins the
/// chain. (Committed without a hold, seed 815 of the persistent simulation lost two acknowledged writes: the new
/// replica's stream was reconnecting at the commit and the active was killed before it caught up.)
#[test]
fn a_replica_move_holds_its_active_until_the_new_replica_has_what_it_stopped_at() {
    let mut m = Moves::new("b", vec![mv(5, &[1, 2], &[1, 3])], 4, ME, 0);
    m.start();
    m.handle(polled(&[(1, &[(5, 8)])]), secs(0));
    m.handle(ok(), secs(0));
    let until_chains = [(5, vec![Some(1), Some(3)])].into_iter().collect();
    let hold = Command::Hold { node: 1, bucket: "b".into(), vbs: vec![5], until_chains };
    assert_eq!(m.handle(polled(&[(3, &[(5, 9)])]), secs(0)), vec![hold], "caught up at once: hold the active");
    assert_eq!(m.handle(held(1, &[(5, 11)]), secs(0)), vec![poll(&[1, 3], Duration::ZERO)]);
    let behind = m.handle(polled(&[(1, &[]), (3, &[(5, 10)])]), secs(0));
    assert_eq!(behind, vec![poll(&[1, 3], ROUND_PAUSE)], "writes acknowledged by the old replica are still missing");
    assert_eq!(m.handle(polled(&[(1, &[]), (3, &[(5, 11)])]), secs(0)), vec![chains(&[(5, &[1, 3])])]);
    assert_eq!(m.handle(ok(), secs(0)), Vec::<Command>::new(), "the active ends its hold as it applies the chain");
    assert_eq!(m.take_outcome(), Some(Ok(())));
}

/// A move that builds nothing and keeps its active (a replica dropped) commits without a hold.
#[test]
fn a_move_that_only_drops_a_replica_commits_without_a_hold() {
    let mut m = Moves::new("b", vec![mv(5, &[1, 2], &[1])], 4, ME, 0);
    m.start();
    assert_eq!(m.handle(polled(&[(1, &[(5, 8)])]), secs(0)), vec![chains(&[(5, &[1])])]);
}

/// A stop gives up the moves still building (their copies are no longer proposed) and ends the moves, with
/// "Rebalance stopped by user." and the copies being built cleared.
#[test]
fn a_stop_gives_up_building_moves_and_ends() {
    let mut m = Moves::new("b", vec![mv(5, &[1, 2], &[1, 3]), mv(6, &[1, 2], &[1, 3])], 1, ME, 0);
    m.start();
    m.handle(polled(&[(1, &[(5, 8), (6, 8)])]), secs(0));
    m.handle(ok(), secs(0));
    m.handle(polled(&[(3, &[])]), secs(0));
    assert_eq!(m.handle(stop(polled(&[(1, &[])])), secs(1)), vec![building(&[])]);
    assert_eq!(m.handle(ok(), secs(1)), vec![clear()]);
    assert_eq!(m.take_outcome(), Some(Err(MoveFailure::Stopped)));
}

/// A stop lets a takeover under way finish: the held vBucket still commits, and the moves end after it.
#[test]
fn a_stop_lets_a_takeover_finish() {
    let mut m = holding_takeover();
    assert_eq!(m.handle(stop(polled(&[(1, &[]), (3, &[(7, 45)])])), secs(101)), vec![chains(&[(7, &[3, 2])])]);
    assert_eq!(m.handle(ok(), secs(101)), Vec::<Command>::new());
    assert_eq!(m.take_outcome(), Some(Ok(())), "every move left was committed");
}

/// A node of a move in flight unseen by the probes past NODE_DOWN_DURING_MOVES ends the moves: the holds are
/// released and the copies being built cleared. The orchestrator's own health does not count.
#[test]
fn a_node_unseen_past_the_limit_fails_the_moves() {
    let mut m = holding_takeover();
    let me_silent = unseen(polled(&[(1, &[]), (3, &[(7, 44)])]), ME, secs(60));
    assert_eq!(m.handle(me_silent, secs(101)), vec![poll(&[1, 3], ROUND_PAUSE)]);
    let long = NODE_DOWN_DURING_MOVES + Duration::from_millis(1);
    let out = m.handle(unseen(polled(&[(1, &[]), (3, &[(7, 44)])]), 3, long), secs(102));
    assert_eq!(out, vec![release(1, &[7]), clear()]);
    assert_eq!(m.take_outcome(), Some(Err(MoveFailure::NodeDown(3))));
}

/// A node of a move in flight failed over during the rebalance (an automatic failover of a node that came back
/// before the probes' limit) ends the moves at once, instead of waiting out the build stall for a copy that node
/// no longer builds: the holds are released and the copies being built cleared.
#[test]
fn a_node_failed_over_under_a_move_fails_the_moves() {
    let mut m = holding_takeover();
    let failed_over = match polled(&[(1, &[]), (3, &[(7, 44)])]) {
        Event::Polled { reports, health, stop_requested, .. } => {
            Event::Polled { reports, health, stop_requested, failed_over: vec![3] }
        }
        other => other,
    };
    assert_eq!(m.handle(failed_over, secs(101)), vec![release(1, &[7]), clear()]);
    assert_eq!(m.take_outcome(), Some(Err(MoveFailure::FailedOver(3))));
}

/// A new copy that stops advancing for BUILD_STALL_TIMEOUT fails the moves with a reason naming the vBucket and
/// what it waited for; one that keeps advancing may take longer.
#[test]
fn a_copy_that_stops_advancing_fails_after_the_stall_limit() {
    let mut m = Moves::new("b", vec![mv(7, &[1, 2], &[1, 3])], 4, ME, 0);
    m.start();
    m.handle(polled(&[(1, &[(7, 40)])]), secs(0));
    m.handle(ok(), secs(0));
    m.handle(polled(&[(3, &[])]), secs(0));
    assert!(matches!(m.handle(polled(&[(3, &[(7, 5)])]), secs(50))[..], [Command::Poll { .. }]));
    assert!(matches!(m.handle(polled(&[(3, &[(7, 30)])]), secs(100))[..], [Command::Poll { .. }]), "it moved");
    assert!(matches!(m.handle(polled(&[(3, &[(7, 30)])]), secs(160))[..], [Command::Poll { .. }]));
    assert_eq!(m.handle(polled(&[(3, &[(7, 30)])]), secs(161)), vec![clear()]);
    let Some(Err(MoveFailure::Overdue(why))) = m.take_outcome() else { panic!("a stalled copy") };
    assert!(why.contains("vBucket 7") && why.contains("seqno 30 (of 40)"), "{why}");
}

/// A takeover hold fails the moves after TAKEOVER_TIMEOUT however the new active moves, releasing the hold.
#[test]
fn a_takeover_past_its_time_fails_and_releases_the_hold() {
    let mut m = holding_takeover();
    assert!(matches!(m.handle(polled(&[(1, &[]), (3, &[(7, 44)])]), secs(120))[..], [Command::Poll { .. }]));
    assert_eq!(m.handle(polled(&[(1, &[]), (3, &[(7, 44)])]), secs(121)), vec![release(1, &[7]), clear()]);
    let Some(Err(MoveFailure::Overdue(why))) = m.take_outcome() else { panic!("a takeover past its time") };
    assert!(why.contains("seqno 45") && why.contains("[3]") && why.contains("at 44"), "{why}");
}

/// Every move has an overall deadline, even one whose copy keeps moving.
#[test]
fn every_move_has_an_overall_deadline() {
    let mut m = Moves::new("b", vec![mv(7, &[1, 2], &[1, 3])], 4, ME, 0);
    m.start();
    m.handle(polled(&[(1, &[(7, 1_000_000)])]), secs(0));
    m.handle(ok(), secs(0));
    m.handle(polled(&[(3, &[])]), secs(0));
    for (i, t) in (50..CATCH_UP_TIMEOUT.as_secs()).step_by(50).enumerate() {
        assert!(matches!(m.handle(polled(&[(3, &[(7, i as u64 + 1)])]), secs(t))[..], [Command::Poll { .. }]));
    }
    assert_eq!(m.handle(polled(&[(3, &[(7, 999)])]), CATCH_UP_TIMEOUT + secs(1)), vec![clear()]);
    assert!(matches!(m.take_outcome(), Some(Err(MoveFailure::Overdue(why))) if why.contains("did not catch up")));
}

/// An old active that reports the held vBucket again (it restarted and lost its hold) sends the takeover back to
/// building, and it is held again once the new copy caught up.
#[test]
fn a_lost_hold_is_taken_again() {
    let mut m = holding_takeover();
    assert_eq!(m.handle(polled(&[(1, &[(7, 50)]), (3, &[(7, 45)])]), secs(101)), vec![poll(&[3], Duration::ZERO)]);
    let hold = Command::Hold { node: 1, bucket: "b".into(), vbs: vec![7], until_chains: Default::default() };
    assert_eq!(m.handle(polled(&[(3, &[(7, 45)])]), secs(102)), vec![hold]);
}

/// A hold answered without the seqno a vBucket stopped at fails the moves (nothing would say when the new active
/// has all of it) and releases the hold.
#[test]
fn a_hold_without_the_stopped_seqno_fails_and_releases() {
    let mut m = Moves::new("b", vec![mv(7, &[1, 2], &[3, 2])], 4, ME, 0);
    m.start();
    m.handle(polled(&[(1, &[(7, 40)])]), secs(0));
    m.handle(ok(), secs(0));
    m.handle(polled(&[(3, &[(7, 40)])]), secs(0));
    assert_eq!(m.handle(held(1, &[]), secs(1)), vec![release(1, &[7]), clear()]);
    assert_eq!(m.take_outcome(), Some(Err(MoveFailure::HoldUnreported { node: 1, vb: 7 })));
}

/// A map change that does not commit releases the holds of its takeovers (the old actives serve again) and ends
/// the moves with the proposal's error.
#[test]
fn a_commit_that_fails_releases_its_holds() {
    let mut m = holding_takeover();
    m.handle(polled(&[(1, &[]), (3, &[(7, 45)])]), secs(101));
    let out = m.handle(Event::Proposed(Err("no quorum".into())), secs(101));
    assert_eq!(out, vec![release(1, &[7]), clear()]);
    assert_eq!(m.take_outcome(), Some(Err(MoveFailure::Proposal("no quorum".into()))));
}

/// The source of a queued move that does not report its seqnos fails the moves (what the copies must reach is
/// unknown); a destination that does not answer only waits for the next round.
#[test]
fn an_unanswered_source_fails_but_a_silent_destination_waits() {
    let mut m = Moves::new("b", vec![mv(5, &[1, 2], &[1, 3])], 4, ME, 0);
    m.start();
    m.handle(polled(&[(1, &[(5, 8)])]), secs(0));
    m.handle(ok(), secs(0));
    let silent = || {
        let reports = BTreeMap::from([(3, Err("timed out".to_owned()))]);
        Event::Polled { reports, health: HealthSnapshot::new(), stop_requested: false, failed_over: Vec::new() }
    };
    assert_eq!(m.handle(silent(), secs(0)), vec![poll(&[3], Duration::ZERO)]);
    assert_eq!(m.handle(silent(), secs(1)), vec![poll(&[3], ROUND_PAUSE)], "asked again after a pause");

    let mut m = Moves::new("b", vec![mv(5, &[1, 2], &[1, 3])], 4, ME, 0);
    m.start();
    let reports = BTreeMap::from([(1, Err("connection refused".to_owned()))]);
    let out = m.handle(
        Event::Polled { reports, health: HealthSnapshot::new(), stop_requested: false, failed_over: Vec::new() },
        secs(0),
    );
    assert_eq!(out, vec![clear()]);
    assert_eq!(m.take_outcome(), Some(Err(MoveFailure::Unreported("connection refused".into()))));
}

/// An answer to a command that is not out is a driver bug: the moves end with it named, instead of guessing.
#[test]
fn an_unexpected_answer_ends_the_moves() {
    let mut m = Moves::new("b", vec![mv(5, &[1, 2], &[1, 3])], 4, ME, 0);
    m.start();
    assert_eq!(m.handle(ok(), secs(0)), vec![clear()]);
    assert!(matches!(m.take_outcome(), Some(Err(MoveFailure::Protocol(_)))));
    assert!(m.handle(polled(&[]), secs(1)).is_empty(), "ended moves ignore events");
}

/// Regression (lost documents after a stopped rebalance was run again): a node that has not applied the proposal
/// of the copy it builds may report the copy a stopped rebalance left it, which the change it has not applied yet
/// (that rebalance giving up its copies) empties. Its seqno counts only from a report at or after the revision that
/// proposed the copy, so no takeover holds or commits on it; once the node reports from that revision, it does.
#[test]
fn a_copy_counts_only_from_a_node_that_applied_its_proposal() {
    let mut m = Moves::new("b", vec![mv(7, &[1, 2], &[3, 2])], 4, ME, 10);
    assert_eq!(m.start(), vec![poll(&[1], Duration::ZERO)]);
    assert_eq!(m.handle(polled_at(10, &[(1, &[(7, 40)])]), secs(0)), vec![building(&[(7, &[3])])]);
    assert_eq!(m.handle(Event::Proposed(Ok(12)), secs(0)), vec![poll(&[3], Duration::ZERO)]);
    // Node 3 is still at revision 11: the copy it reports at 40 is the stopped rebalance's, about to be dropped.
    assert_eq!(m.handle(polled_at(11, &[(3, &[(7, 40)])]), secs(0)), vec![poll(&[3], Duration::ZERO)]);
    assert_eq!(m.handle(polled_at(11, &[(3, &[(7, 40)])]), secs(1)), vec![poll(&[3], ROUND_PAUSE)]);
    // From revision 12 on, its copy is the one being built: caught up, the takeover holds the old active.
    let hold = Command::Hold { node: 1, bucket: "b".into(), vbs: vec![7], until_chains: Default::default() };
    assert_eq!(m.handle(polled_at(12, &[(3, &[(7, 40)])]), secs(2)), vec![hold]);
    // The new active's report must also be from that revision on before the commit.
    assert_eq!(m.handle(held(1, &[(7, 41)]), secs(3)), vec![poll(&[1, 3], Duration::ZERO)]);
    assert_eq!(m.handle(polled_at(13, &[(1, &[]), (3, &[(7, 41)])]), secs(3)), vec![chains(&[(7, &[3, 2])])]);
}

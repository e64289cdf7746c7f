//! The core driven the openraft way: build a state, apply one event, assert the commands. Time is a plain
//! `Duration` the tests move by hand.

use std::time::Duration;

use settee_types::{vbucket_for_key, FailoverLog};

use crate::ByKind;
use crate::{Change, ChangeKind, Checkpoint, Command, Event, Outcome, Replicator, Settings, Stats, XdcrError};

const T0: Duration = Duration::from_secs(100);
const VBS: u16 = 4;

fn settings() -> Settings {
    Settings {
        batch_count: 2,
        inflight_per_node_max: 4,
        pending_max: 8,
        checkpoint_interval: Duration::from_secs(10),
        source_vbuckets: usize::from(VBS),
        ..Settings::default()
    }
}

fn change(key: &str, seqno: u64) -> Change {
    Change {
        kind: ChangeKind::Mutation,
        key: key.as_bytes().to_vec(),
        collection: 0,
        value: b"{}".to_vec(),
        datatype: 1,
        cas: 1000 + seqno,
        seqno,
        rev: 1,
        flags: 0,
        expiry: 0,
    }
}

/// Target vBucket → node: even vBuckets on node 0, odd ones on node 1.
fn two_node_map() -> Event {
    Event::Map { vbuckets: (0..VBS).map(|v| v % 2).collect(), nodes: 2 }
}

fn node_of(key: &str) -> usize {
    usize::from(vbucket_for_key(key.as_bytes(), VBS).0 % 2)
}

fn started(r: &mut Replicator, vb: u16) {
    r.handle(T0, Event::VbStarted { vb, failover: FailoverLog::new(77, 0), high_seqno: 100, purge_seqno: 0 }).unwrap();
}

/// A replicator with a map and vBucket 0 being read from zero, commands drained.
fn ready() -> Replicator {
    let mut r = Replicator::new(settings(), [], T0);
    r.handle(T0, two_node_map()).unwrap();
    started(&mut r, 0);
    r.take_commands();
    r
}

/// Delivers changes `keys` at seqnos 1.. as one snapshot of vBucket 0; returns the commands.
fn deliver(r: &mut Replicator, keys: &[&str]) -> Vec<Command> {
    let start = 1;
    let end = keys.len() as u64;
    r.handle(T0, Event::Snapshot { vb: 0, start, end }).unwrap();
    for (i, k) in keys.iter().enumerate() {
        r.handle(T0, Event::Change { vb: 0, change: change(k, i as u64 + 1) }).unwrap();
    }
    r.handle(T0, Event::SnapshotDone { vb: 0 }).unwrap();
    r.take_commands()
}

/// The OBSERVE_SEQNO requests among `cmds`: (node, vb, probe).
fn observes(cmds: &[Command]) -> Vec<(usize, u16, u64)> {
    cmds.iter()
        .filter_map(|c| match *c {
            Command::Observe { node, vb, probe } => Some((node, vb, probe)),
            _ => None,
        })
        .collect()
}

/// Ticks at `now` and answers each observe with `(vbuuid, persisted, current)`; returns the other commands.
fn tick_observed(r: &mut Replicator, now: Duration, answer: (u64, u64, u64)) -> Vec<Command> {
    r.handle(now, Event::Tick).unwrap();
    let cmds = r.take_commands();
    let (vbuuid, persisted, current) = answer;
    for (_, vb, probe) in observes(&cmds) {
        r.handle(now, Event::Observed { vb, probe, vbuuid, persisted, current }).unwrap();
    }
    cmds.into_iter().filter(|c| !matches!(c, Command::Observe { .. })).chain(r.take_commands()).collect()
}

fn sends(cmds: &[Command]) -> Vec<(usize, Vec<u64>)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Send { node, writes } => Some((*node, writes.iter().map(|w| w.id).collect())),
            _ => None,
        })
        .collect()
}

#[test]
fn vbucket_is_read_from_zero_when_no_checkpoint_exists() {
    // Proves a vBucket without a checkpoint asks to be read from seqno 0.
    let mut r = Replicator::new(settings(), [], T0);
    started(&mut r, 3);
    assert_eq!(r.take_commands(), vec![Command::Read { vb: 3, from: 0 }]);
}

#[test]
fn vbucket_resumes_from_checkpoint_when_its_history_contains_it() {
    // Proves a checkpoint on the vBucket's current history (here after a restart added a newer failover entry
    // above it) is where reading resumes, not zero.
    let cp = Checkpoint { vb: 1, vbuuid: 77, seqno: 40 };
    let mut r = Replicator::new(settings(), [cp], T0);
    let failover = FailoverLog::from_entries([(88, 50), (77, 0)]).unwrap();
    r.handle(T0, Event::VbStarted { vb: 1, failover, high_seqno: 60, purge_seqno: 0 }).unwrap();
    assert_eq!(r.take_commands(), vec![Command::Read { vb: 1, from: 40 }]);
}

#[test]
fn vbucket_reads_from_rollback_point_when_its_history_diverged() {
    // Proves a checkpoint past the point where the vBucket's history branched (a failover promoted a replica that
    // had only up to 30) resumes from the branch point, and one of an unknown history from zero.
    let cp = Checkpoint { vb: 1, vbuuid: 77, seqno: 40 };
    let mut r = Replicator::new(settings(), [cp], T0);
    let failover = FailoverLog::from_entries([(88, 30), (77, 0)]).unwrap();
    r.handle(T0, Event::VbStarted { vb: 1, failover, high_seqno: 60, purge_seqno: 0 }).unwrap();
    assert_eq!(r.take_commands(), vec![Command::Read { vb: 1, from: 30 }]);
    let unknown = FailoverLog::new(99, 0);
    r.handle(T0, Event::VbStarted { vb: 1, failover: unknown, high_seqno: 60, purge_seqno: 0 }).unwrap();
    assert_eq!(r.take_commands(), vec![Command::Read { vb: 1, from: 0 }]);
}

#[test]
fn changes_go_in_batches_to_the_node_holding_their_target_vbucket() {
    // Proves each write goes to the node the map gives its key's target vBucket, in batches of `batch_count`.
    let mut r = ready();
    let keys = ["a", "b", "c", "d", "e", "f"];
    let cmds = deliver(&mut r, &keys);
    let mut per_node = [0usize; 2];
    for c in &cmds {
        if let Command::Send { node, writes } = c {
            assert!(writes.len() <= 2, "batch of at most batch_count");
            for w in writes {
                assert_eq!(node_of(std::str::from_utf8(&w.change.key).unwrap()), *node);
                assert_eq!(w.vbucket, vbucket_for_key(&w.change.key, VBS).0);
                per_node[*node] += 1;
            }
        }
    }
    assert_eq!(per_node[0] + per_node[1], keys.len());
}

#[test]
fn lost_conflict_is_counted_and_not_retried() {
    // Proves KEY_EEXISTS from conflict resolution settles the write: counted, never sent again, and the
    // checkpoint may pass it.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a"]);
    let (node, ids) = sends(&cmds)[0].clone();
    r.handle(T0, Event::Reply { node, id: ids[0], outcome: Outcome::LostConflict }).unwrap();
    r.handle(T0 + Duration::from_secs(60), Event::Tick).unwrap();
    let after = r.take_commands();
    assert!(sends(&after).is_empty(), "nothing resent: {after:?}");
    assert_eq!((r.stats().docs_failed_cr(), r.stats().docs_written(), r.held()), (1, 0, 0));
    assert_eq!(r.through(0), Some(1));
}

#[test]
fn tmpfail_is_retried_after_backoff_on_the_clock() {
    // Proves a TMPFAIL write is sent again only once its backoff elapsed, and the backoff doubles per attempt.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a"]);
    let (node, ids) = sends(&cmds)[0].clone();
    let id = ids[0];
    r.handle(T0, Event::Reply { node, id, outcome: Outcome::TempFail }).unwrap();
    r.handle(T0 + Duration::from_millis(9), Event::Tick).unwrap();
    assert!(sends(&r.take_commands()).is_empty(), "not before 10 ms");
    r.handle(T0 + Duration::from_millis(10), Event::Tick).unwrap();
    assert_eq!(sends(&r.take_commands()), vec![(node, vec![id])]);
    let t1 = T0 + Duration::from_millis(10);
    r.handle(t1, Event::Reply { node, id, outcome: Outcome::TempFail }).unwrap();
    r.handle(t1 + Duration::from_millis(19), Event::Tick).unwrap();
    assert!(sends(&r.take_commands()).is_empty(), "second backoff is 20 ms");
    r.handle(t1 + Duration::from_millis(20), Event::Tick).unwrap();
    assert_eq!(sends(&r.take_commands()), vec![(node, vec![id])]);
    assert_eq!(r.stats().retries, 2);
}

#[test]
fn not_my_vbucket_refreshes_the_map_and_resends_where_it_says() {
    // Proves NOT_MY_VBUCKET parks the write and asks for the map once; the new map routes it to its new node.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a"]);
    let (node, ids) = sends(&cmds)[0].clone();
    r.handle(T0, Event::Reply { node, id: ids[0], outcome: Outcome::NotMyVbucket }).unwrap();
    assert_eq!(r.take_commands(), vec![Command::RefreshMap]);
    let other = 1 - node as u16;
    r.handle(T0, Event::Map { vbuckets: vec![other; usize::from(VBS)], nodes: 2 }).unwrap();
    assert_eq!(sends(&r.take_commands()), vec![(usize::from(other), ids)]);
}

#[test]
fn writes_in_flight_to_a_node_that_went_down_are_resent_after_a_new_map() {
    // Proves a broken connection loses no write: what was in flight to it is parked, a map is asked for, and the
    // map's answer sends it again; a late reply from the dead connection is ignored.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a"]);
    let (node, ids) = sends(&cmds)[0].clone();
    r.handle(T0, Event::NodeDown { node }).unwrap();
    assert_eq!(r.take_commands(), vec![Command::RefreshMap]);
    r.handle(T0, two_node_map()).unwrap();
    assert_eq!(sends(&r.take_commands()), vec![(node, ids.clone())]);
    assert_eq!(r.held(), 1);
    r.handle(T0, Event::Reply { node, id: ids[0], outcome: Outcome::Success }).unwrap();
    assert_eq!((r.held(), r.stats().docs_written()), (0, 1));
}

#[test]
fn checkpoint_records_only_seqnos_below_the_oldest_unacknowledged_change() {
    // Proves acknowledgements out of order hold the checkpoint at the oldest change still in flight, and that the
    // interval on the clock, not each reply, decides when checkpoints are saved.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a", "b", "c"]);
    let all: Vec<(usize, u64)> =
        sends(&cmds).into_iter().flat_map(|(n, ids)| ids.into_iter().map(move |i| (n, i))).collect();
    assert_eq!(all.len(), 3);
    // Acknowledge seqnos 2 and 3 (ids 1 and 2), not 1.
    for &(node, id) in all.iter().filter(|(_, id)| *id != 0) {
        r.handle(T0, Event::Reply { node, id, outcome: Outcome::Success }).unwrap();
    }
    assert_eq!(r.through(0), Some(0));
    r.handle(T0 + Duration::from_secs(9), Event::Tick).unwrap();
    assert!(r.take_commands().is_empty(), "interval not elapsed");
    let &(node, id) = all.iter().find(|(_, id)| *id == 0).unwrap();
    r.handle(T0 + Duration::from_secs(9), Event::Reply { node, id, outcome: Outcome::Success }).unwrap();
    // The interval's tick asks the target; its answer (all persisted) confirms, and the next interval saves.
    assert!(tick_observed(&mut r, T0 + Duration::from_secs(10), (5, 9, 9)).is_empty(), "not confirmed yet");
    assert_eq!(r.confirmed(0), Some(3));
    r.handle(T0 + Duration::from_secs(20), Event::Tick).unwrap();
    assert_eq!(r.take_commands(), vec![Command::SaveCheckpoints(vec![Checkpoint { vb: 0, vbuuid: 77, seqno: 3 }])]);
    r.handle(T0 + Duration::from_secs(30), Event::Tick).unwrap();
    assert!(r.take_commands().is_empty(), "nothing moved since");
}

#[test]
fn reading_stops_when_the_held_writes_reach_the_bound_and_the_window_limits_sends() {
    // Proves back-pressure: at `pending_max` held writes the core stops accepting, and no node ever has more than
    // `inflight_per_node_max` writes in flight.
    let mut r = Replicator::new(settings(), [], T0);
    r.handle(T0, Event::Map { vbuckets: vec![0; usize::from(VBS)], nodes: 1 }).unwrap();
    started(&mut r, 0);
    r.take_commands();
    let keys: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let cmds = deliver(&mut r, &refs);
    let sent: usize = sends(&cmds).iter().map(|(_, ids)| ids.len()).sum();
    assert_eq!(sent, 4, "window of 4");
    assert!(!r.accepting());
    let first = sends(&cmds)[0].1[0];
    r.handle(T0, Event::Reply { node: 0, id: first, outcome: Outcome::Success }).unwrap();
    assert!(r.accepting());
    assert_eq!(sends(&r.take_commands()).iter().map(|(_, ids)| ids.len()).sum::<usize>(), 1, "one slot freed");
}

#[test]
fn change_out_of_seqno_order_is_refused() {
    // Proves the core refuses a change that does not follow what was delivered, or lies outside its snapshot,
    // and a change of a vBucket it does not read.
    let mut r = ready();
    r.handle(T0, Event::Snapshot { vb: 0, start: 1, end: 5 }).unwrap();
    r.handle(T0, Event::Change { vb: 0, change: change("a", 3) }).unwrap();
    assert_eq!(
        r.handle(T0, Event::Change { vb: 0, change: change("b", 2) }),
        Err(XdcrError::OutOfOrder { vb: 0, seqno: 2, after: 3 })
    );
    assert!(matches!(
        r.handle(T0, Event::Change { vb: 0, change: change("b", 6) }),
        Err(XdcrError::OutsideSnapshot { .. })
    ));
    assert_eq!(r.handle(T0, Event::Change { vb: 9, change: change("b", 1) }), Err(XdcrError::NotReading(9)));
}

#[test]
fn replies_for_a_vbucket_read_again_do_not_move_its_new_progress() {
    // Proves a vBucket stopped and started again (it left and came back) ignores replies to writes of the earlier
    // reading when computing its checkpoint.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a"]);
    r.handle(T0, Event::VbStopped { vb: 0 }).unwrap();
    started(&mut r, 0);
    r.take_commands();
    r.handle(T0, Event::Snapshot { vb: 0, start: 1, end: 2 }).unwrap();
    r.handle(T0, Event::Change { vb: 0, change: change("b", 1) }).unwrap();
    let (node, ids) = sends(&cmds)[0].clone();
    r.handle(T0, Event::Reply { node, id: ids[0], outcome: Outcome::Success }).unwrap();
    assert_eq!(r.through(0), Some(0), "the new reading's seqno 1 is still pending");
}

#[test]
fn map_answers_a_refresh_request_still_waiting_to_be_taken() {
    // Proves a map handled before the driver took a pending RefreshMap cancels it: the driver, which reports the
    // old nodes down and then hands over the new map in one go, does not refresh again forever.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a"]);
    let (node, _) = sends(&cmds)[0].clone();
    r.handle(T0, Event::NodeDown { node }).unwrap();
    r.handle(T0, two_node_map()).unwrap();
    let after = r.take_commands();
    assert!(!after.contains(&Command::RefreshMap), "{after:?}");
    assert_eq!(sends(&after).len(), 1, "the parked write is sent again");
}

#[test]
fn reading_stops_when_the_held_bytes_reach_their_bound() {
    // Proves large documents stop reading by bytes long before the count bound, and that settling them resumes it.
    let mut r = Replicator::new(Settings { pending_bytes_max: 100, ..settings() }, [], T0);
    r.handle(T0, two_node_map()).unwrap();
    started(&mut r, 0);
    r.take_commands();
    r.handle(T0, Event::Snapshot { vb: 0, start: 1, end: 1 }).unwrap();
    let big = Change { value: vec![b'x'; 200], ..change("a", 1) };
    r.handle(T0, Event::Change { vb: 0, change: big }).unwrap();
    r.handle(T0, Event::SnapshotDone { vb: 0 }).unwrap();
    assert!(!r.accepting(), "one 200-byte write passes a 100-byte bound");
    let (node, ids) = sends(&r.take_commands())[0].clone();
    r.handle(T0, Event::Reply { node, id: ids[0], outcome: Outcome::Success }).unwrap();
    assert!(r.accepting());
}

#[test]
fn a_vbucket_that_stops_here_saves_its_checkpoint_at_once() {
    // Proves a vBucket that leaves this node (rebalance, failover) has its checkpoint saved when it stops, not at
    // the next interval, so the node it moves to resumes from it; one that never moved saves nothing.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a", "b"]);
    for (node, ids) in sends(&cmds) {
        for id in ids {
            r.handle(T0, Event::Reply { node, id, outcome: Outcome::Success }).unwrap();
        }
    }
    r.take_commands();
    let t = T0 + Duration::from_secs(1);
    assert!(tick_observed(&mut r, t, (5, 2, 2)).is_empty(), "confirmed, the interval not elapsed");
    r.handle(t, Event::VbStopped { vb: 0 }).unwrap();
    assert_eq!(r.take_commands(), vec![Command::SaveCheckpoints(vec![Checkpoint { vb: 0, vbuuid: 77, seqno: 2 }])]);
    assert_eq!(r.through(0), None);
    started(&mut r, 1);
    r.take_commands();
    r.handle(T0, Event::VbStopped { vb: 1 }).unwrap();
    assert!(r.take_commands().is_empty(), "nothing read, nothing to save");
}

#[test]
fn a_checkpoint_offered_from_another_node_is_kept_when_it_is_ahead() {
    // Proves a vBucket that moved here resumes from its last owner's checkpoint when that one is ahead of this
    // node's own (older) one, and keeps its own when the offered one is behind.
    let mut r = Replicator::new(settings(), [Checkpoint { vb: 1, vbuuid: 77, seqno: 10 }], T0);
    r.offer_checkpoint(Checkpoint { vb: 1, vbuuid: 77, seqno: 40 });
    r.offer_checkpoint(Checkpoint { vb: 1, vbuuid: 77, seqno: 20 });
    r.offer_checkpoint(Checkpoint { vb: 2, vbuuid: 77, seqno: 5 });
    started(&mut r, 1);
    started(&mut r, 2);
    assert_eq!(r.take_commands(), vec![Command::Read { vb: 1, from: 40 }, Command::Read { vb: 2, from: 5 }]);
}

#[test]
fn a_change_copied_to_two_collections_is_through_only_when_both_copies_are_on_the_target() {
    // Proves the collections migration mode's fan-out: a change delivered twice with the same seqno (once per
    // target collection) is two writes, and the checkpoint passes it only after the second acknowledgement; a
    // copy of a change that is already settled, or of an older one, is still refused as out of order.
    let mut r = ready();
    r.handle(T0, Event::Snapshot { vb: 0, start: 1, end: 1 }).unwrap();
    let first = Change { collection: 8, ..change("a", 1) };
    let second = Change { collection: 9, ..change("a", 1) };
    r.handle(T0, Event::Change { vb: 0, change: first }).unwrap();
    r.handle(T0, Event::Change { vb: 0, change: second }).unwrap();
    r.handle(T0, Event::SnapshotDone { vb: 0 }).unwrap();
    let sent: Vec<(usize, u64)> =
        sends(&r.take_commands()).into_iter().flat_map(|(n, ids)| ids.into_iter().map(move |i| (n, i))).collect();
    assert_eq!(sent.len(), 2, "one write per target collection");
    r.handle(T0, Event::Reply { node: sent[0].0, id: sent[0].1, outcome: Outcome::Success }).unwrap();
    assert_eq!(r.through(0), Some(0), "one copy still in flight");
    r.handle(T0, Event::Reply { node: sent[1].0, id: sent[1].1, outcome: Outcome::LostConflict }).unwrap();
    assert_eq!(r.through(0), Some(1));
    assert_eq!(r.stats().docs_written(), 1);
    r.handle(T0, Event::Snapshot { vb: 0, start: 2, end: 2 }).unwrap();
    assert_eq!(
        r.handle(T0, Event::Change { vb: 0, change: change("a", 1) }),
        Err(XdcrError::OutOfOrder { vb: 0, seqno: 1, after: 1 }),
        "the change at seqno 1 is settled: no copy of it can follow"
    );
}

#[test]
fn writes_are_counted_by_kind_and_bytes_when_the_target_answers() {
    // Proves goxdcr's splits: a mutation, a deletion and an expiration read, then one of each accepted or refused
    // by conflict resolution, land in their own counters; the bytes replicated are the accepted requests' sizes,
    // and the queue's bytes fall to zero once every write is settled.
    let mut r = ready();
    let kinds = [ChangeKind::Mutation, ChangeKind::Deletion, ChangeKind::Expiration];
    r.handle(T0, Event::Snapshot { vb: 0, start: 1, end: 6 }).unwrap();
    let mut sizes = Vec::new();
    for (i, key) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        let mut c = change(key, i as u64 + 1);
        c.kind = kinds[i % 3];
        if c.kind != ChangeKind::Mutation {
            c.value.clear();
        }
        sizes.push(c.request_bytes() as u64);
        r.handle(T0, Event::Change { vb: 0, change: c }).unwrap();
    }
    r.handle(T0, Event::SnapshotDone { vb: 0 }).unwrap();
    assert_eq!(r.held_bytes(), 6 + 2 * 2, "six keys and the two mutations' values held");
    let mut cmds = r.take_commands();
    while !cmds.is_empty() {
        for (node, ids) in sends(&cmds) {
            for id in ids {
                let outcome = if id < 3 { Outcome::Success } else { Outcome::LostConflict };
                r.handle(T0, Event::Reply { node, id, outcome }).unwrap();
            }
        }
        cmds = r.take_commands();
    }
    let s = r.stats();
    assert_eq!((s.read.sets, s.read.deletions, s.read.expirations), (2, 2, 2));
    assert_eq!((s.written.sets, s.written.deletions, s.written.expirations, s.docs_written()), (1, 1, 1, 3));
    assert_eq!((s.failed_cr.sets, s.failed_cr.deletions, s.failed_cr.expirations, s.docs_failed_cr()), (1, 1, 1, 3));
    assert_eq!(s.data_replicated, sizes[..3].iter().sum::<u64>());
    assert_eq!(sizes[..3], [24 + 24 + 1 + 1 + 2, 24 + 24 + 1 + 1, 24 + 28 + 1 + 1]);
    assert_eq!(r.held_bytes(), 0);
}

#[test]
fn stats_add_up_over_runs_when_a_runner_restarts() {
    // Proves `plus` sums every counter and keeps the later run's last error.
    let written = |sets, deletions| ByKind { sets, deletions, expirations: 0 };
    let earlier = Stats { written: written(2, 0), data_replicated: 100, last_error: Some(1), ..Stats::default() };
    let later = Stats { written: written(0, 1), data_replicated: 50, ..Stats::default() };
    let sum = earlier.plus(&later);
    assert_eq!((sum.docs_written(), sum.written.sets, sum.written.deletions, sum.data_replicated), (3, 2, 1, 150));
    assert_eq!(sum.last_error, Some(1));
    assert_eq!(earlier.plus(&Stats { last_error: Some(5), ..later }).last_error, Some(5));
}

/// Acknowledges every write sent in `cmds` (and those sent as a result).
fn ack_all(r: &mut Replicator, mut cmds: Vec<Command>) {
    while !cmds.is_empty() {
        for (node, ids) in sends(&cmds) {
            for id in ids {
                r.handle(T0, Event::Reply { node, id, outcome: Outcome::Success }).unwrap();
            }
        }
        cmds = r.take_commands();
    }
}

#[test]
fn checkpoint_waits_until_the_target_persisted_what_it_acknowledged() {
    // Proves issue 19's crash window is closed in the core: acknowledged writes are `through` at once but a
    // checkpoint covers them only once OBSERVE_SEQNO shows the target's disk past its seqno taken after the acks,
    // on the same target history; a target whose history changed before that makes the vBucket be read again
    // from the confirmed position, not from past the lost writes.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a", "b"]);
    ack_all(&mut r, cmds);
    assert_eq!((r.through(0), r.confirmed(0)), (Some(2), Some(0)));
    // First answer: target vBucket 0 at seqno 40, 38 on disk: not yet.
    let t1 = T0 + Duration::from_secs(1);
    r.handle(t1, Event::Tick).unwrap();
    let [(node, vb, probe)] = observes(&r.take_commands())[..] else { panic!("one observe") };
    assert_eq!((node, vb), (0, 0), "vBucket 0's keys live in target vBucket 0, on node 0");
    r.handle(t1, Event::Observed { vb, probe, vbuuid: 5, persisted: 38, current: 40 }).unwrap();
    assert_eq!(r.confirmed(0), Some(0));
    // A stale answer (another probe) changes nothing; the flusher catching up confirms.
    r.handle(t1, Event::Observed { vb, probe: probe + 100, vbuuid: 5, persisted: 40, current: 40 }).unwrap();
    assert_eq!(r.confirmed(0), Some(0));
    let t2 = T0 + Duration::from_secs(2);
    r.handle(t2, Event::Tick).unwrap();
    assert_eq!(observes(&r.take_commands()), vec![(0, 0, probe)], "the same probe is asked again");
    r.handle(t2, Event::Observed { vb, probe, vbuuid: 5, persisted: 41, current: 45 }).unwrap();
    assert_eq!(r.confirmed(0), Some(2));
    // Two more writes acknowledged; the target then restarts from its disk with a new history.
    r.handle(t2, Event::Snapshot { vb: 0, start: 3, end: 4 }).unwrap();
    r.handle(t2, Event::Change { vb: 0, change: change("c", 3) }).unwrap();
    r.handle(t2, Event::Change { vb: 0, change: change("d", 4) }).unwrap();
    r.handle(t2, Event::SnapshotDone { vb: 0 }).unwrap();
    let cmds = r.take_commands();
    ack_all(&mut r, cmds);
    let t3 = T0 + Duration::from_secs(3);
    r.handle(t3, Event::Tick).unwrap();
    let [(_, vb, probe)] = observes(&r.take_commands())[..] else { panic!("one observe") };
    r.handle(t3, Event::Observed { vb, probe, vbuuid: 6, persisted: 41, current: 41 }).unwrap();
    assert_eq!(r.take_commands(), vec![Command::Read { vb: 0, from: 2 }], "read again from the confirmed seqno");
    assert_eq!((r.through(0), r.confirmed(0), r.stats().rewinds), (Some(2), Some(2), 1));
    // The checkpoint saved records the confirmed position only.
    let cmds = tick_observed(&mut r, T0 + Duration::from_secs(10), (6, 41, 41));
    assert_eq!(cmds, vec![Command::SaveCheckpoints(vec![Checkpoint { vb: 0, vbuuid: 77, seqno: 2 }])]);
}

#[test]
fn vbuckets_with_unconfirmed_writes_are_read_again_when_their_target_node_goes_down() {
    // Proves a broken connection to the target node (a crash kills it) sends again what that node acknowledged
    // and had not been confirmed persisted, while a vBucket on another node, or one fully confirmed, goes on.
    let mut r = ready();
    started(&mut r, 1);
    r.take_commands();
    let cmds = deliver(&mut r, &["a"]);
    ack_all(&mut r, cmds);
    r.handle(T0, Event::NodeDown { node: 1 }).unwrap();
    assert!(!r.take_commands().iter().any(|c| matches!(c, Command::Read { .. })), "vBucket 0 is on node 0");
    r.handle(T0, Event::NodeDown { node: 0 }).unwrap();
    assert!(r.take_commands().contains(&Command::Read { vb: 0, from: 0 }));
    assert_eq!(r.stats().rewinds, 1, "vBucket 1 had nothing unconfirmed");
}

#[test]
fn acknowledged_writes_count_as_persisted_when_the_target_refuses_to_be_observed() {
    // Proves a target that refuses OBSERVE_SEQNO (a server without it, or one denying it to the user) keeps the
    // behaviour from before confirmations: the probe's acknowledged seqno is taken as confirmed, and counted.
    let mut r = ready();
    let cmds = deliver(&mut r, &["a", "b"]);
    ack_all(&mut r, cmds);
    r.handle(T0 + Duration::from_secs(1), Event::Tick).unwrap();
    let [(_, vb, probe)] = observes(&r.take_commands())[..] else { panic!("one observe") };
    r.handle(T0, Event::ObserveRefused { vb, probe: probe + 1 }).unwrap();
    assert_eq!(r.confirmed(0), Some(0), "another probe's refusal");
    r.handle(T0, Event::ObserveRefused { vb, probe }).unwrap();
    assert_eq!((r.confirmed(0), r.stats().unconfirmed), (Some(2), 1));
}

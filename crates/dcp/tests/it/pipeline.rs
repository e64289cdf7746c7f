//! A producer connection piped into a consumer stream through the real encoder and decoder.

use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use settee_dcp::{
    ConsumerAction, ConsumerEvent, ConsumerFlowControl, ConsumerStream, DcpItem, ProducerConnection, Snapshot,
    StreamRequestError,
};
use settee_mcbp::dcp::{DcpMessage, DcpOpenFlags};
use settee_mcbp::decode_response;
use settee_types::{DurabilityLevel, FailoverLog, Seqno, Status, VbId};

/// Sends the consumer's stream request to the producer and hands the reply back.
fn connect(
    producer: &mut ProducerConnection,
    consumer: &mut ConsumerStream,
    log: &FailoverLog,
    high: Seqno,
) -> ConsumerEvent {
    let mut out = Vec::new();
    let mut frame = Vec::new();
    consumer.request().encode(&mut frame);
    let DcpMessage::StreamReq(req) = DcpMessage::decode(&request(&frame)).unwrap() else { panic!() };
    let _ = producer.stream_request(&req, log, high, 0, &mut out);
    let (resp, _) = decode_response(&out, 1 << 20).unwrap().unwrap();
    consumer.on_stream_response(resp.status, resp.value).unwrap()
}

/// Pipes every frame the producer can send into the consumer, acknowledging buffer space as a replica would;
/// returns the consumer's actions.
fn pump(
    producer: &mut ProducerConnection,
    consumer: &mut ConsumerStream,
    flow: &mut ConsumerFlowControl,
) -> Vec<ConsumerAction> {
    let mut actions = Vec::new();
    let mut out = Vec::new();
    for _ in 0..10_000 {
        if let Some(ack) = flow.take_ack(0) {
            producer.buffer_ack(ack.bytes);
        }
        out.clear();
        let Some(len) = producer.poll_into(Duration::ZERO, &mut out) else { break };
        actions.push(consumer.on_message(&request(&out)).expect("the consumer accepts what the producer sends"));
        flow.consumed(len);
    }
    actions
}

fn applied(actions: &[ConsumerAction]) -> Vec<DcpItem> {
    actions
        .iter()
        .filter_map(|a| match a {
            ConsumerAction::Apply(item) => Some(item.clone()),
            _ => None,
        })
        .collect()
}

/// A replica with sync writes receives a backfill and memory checkpoints holding mutations, a deletion, an
/// expiration, a prepare with its commit and another with its abort, under flow control, and ends up with exactly
/// the producer's items; its seqno acknowledgement reaches the producer.
#[test]
fn consumer_reconstructs_the_producers_items() {
    let log = FailoverLog::new(0xA, 0);
    let mut producer = producer(DcpOpenFlags::INCLUDE_DELETE_TIMES);
    for (key, value) in [
        ("connection_buffer_size", "300"),
        ("enable_sync_writes", "true"),
        ("consumer_name", "replica"),
        ("enable_expiry_opcode", "true"),
    ] {
        assert_eq!(producer.control(key.as_bytes(), value.as_bytes()), Status::Success);
    }
    let mut consumer = ConsumerStream::new(VbId(VB), OPAQUE, &FailoverLog::new(0, 0), 0, (0, 0));
    assert_eq!(connect(&mut producer, &mut consumer, &log, 12), ConsumerEvent::Accepted { failover_log: log.clone() });

    let expired = DcpItem::Expiration { key: Bytes::from_static(b"e"), cas: 77, seqno: 9, rev: 3, delete_time: 1234 };
    let snapshots = vec![
        Snapshot::disk(1, 4, vec![mutation("a", 1), mutation("b", 2), deletion("c", 4)]),
        Snapshot::memory(5, 8, vec![prepare("p", 5, DurabilityLevel::Majority), mutation("a", 6), commit("p", 5, 8)]),
        Snapshot::memory(9, 12, vec![expired, prepare("q", 10, DurabilityLevel::Majority), abort("q", 10, 12)]),
    ];
    let sent: Vec<DcpItem> = snapshots.iter().flat_map(|s| s.items.clone()).collect();
    for snapshot in snapshots {
        producer.push_snapshot(VbId(VB), snapshot).unwrap();
    }
    let mut flow = ConsumerFlowControl::new(300);
    let actions = pump(&mut producer, &mut consumer, &mut flow);
    assert_eq!(applied(&actions), sent);
    let markers: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            ConsumerAction::SnapshotMarker { start, end, .. } => Some((*start, *end)),
            _ => None,
        })
        .collect();
    assert_eq!(markers, [(0, 4), (5, 8), (9, 12)]);
    assert_eq!(consumer.resume_point(), (12, 12, 12));

    let ack = consumer.seqno_ack().expect("both prepares were in complete memory snapshots");
    let mut frame = Vec::new();
    ack.encode(&mut frame);
    let DcpMessage::SeqnoAcknowledged(ack) = DcpMessage::decode(&request(&frame)).unwrap() else { panic!() };
    assert_eq!(producer.seqno_acknowledged(VbId(ack.vbucket), ack.prepared_seqno), Ok(10));
}

/// A replica that kept items of a history the new active never had (branch A beyond 10, while the active started
/// branch B at 10) is rolled back to the branch point, then resumes and receives branch B's items.
#[test]
fn diverged_replica_is_rolled_back_to_the_branch_point() {
    let mut active_log = FailoverLog::new(0xA, 0);
    active_log.push(0xB, 10);
    let replica_log = FailoverLog::new(0xA, 0);
    let mut producer = producer(DcpOpenFlags::default());

    let mut consumer = ConsumerStream::new(VbId(VB), OPAQUE, &replica_log, 15, (11, 15));
    assert_eq!(connect(&mut producer, &mut consumer, &active_log, 20), ConsumerEvent::RollbackTo(10));
    assert_eq!(producer.stream_count(), 0);

    // The driver rolls the replica's vBucket back to 10, which is the end of a complete snapshot.
    let mut consumer = ConsumerStream::new(VbId(VB), OPAQUE, &replica_log, 10, (10, 10));
    let event = connect(&mut producer, &mut consumer, &active_log, 20);
    assert_eq!(event, ConsumerEvent::Accepted { failover_log: active_log.clone() });
    producer
        .push_snapshot(VbId(VB), Snapshot::memory(11, 20, vec![mutation("b-branch", 14), mutation("x", 20)]))
        .unwrap();
    let seqnos: Vec<Seqno> = applied(&pump(&mut producer, &mut consumer, &mut ConsumerFlowControl::new(0)))
        .iter()
        .map(DcpItem::seqno)
        .collect();
    assert_eq!(seqnos, [14, 20]);

    // Resuming with the new log's uuid from where it is needs no rollback.
    let mut resumed = ConsumerStream::new(VbId(9), 1, &active_log, 20, (20, 20));
    assert_eq!(resumed.request().vb_uuid, 0xB);
    let mut other = ProducerConnection::open(
        &settee_mcbp::dcp::DcpOpen { opaque: 1, flags: DcpOpenFlags::PRODUCER, name: b"n", value: &[] },
        false,
        Duration::ZERO,
    )
    .unwrap();
    assert!(matches!(connect(&mut other, &mut resumed, &active_log, 20), ConsumerEvent::Accepted { .. }));
}

/// A replica that stops mid-snapshot resumes from its partial snapshot; after a failover on the active inside
/// that snapshot it must roll back to the snapshot start, as deduplicated keys of the snapshot may be missing.
#[test]
fn partial_snapshot_resumes_or_rolls_back_to_its_start() {
    let log = FailoverLog::new(0xA, 0);
    let mut active = producer(DcpOpenFlags::default());
    let mut consumer = ConsumerStream::new(VbId(VB), OPAQUE, &log, 0, (0, 0));
    connect(&mut active, &mut consumer, &log, 10);
    active.push_snapshot(VbId(VB), Snapshot::memory(1, 4, vec![mutation("a", 2), mutation("b", 4)])).unwrap();
    active
        .push_snapshot(VbId(VB), Snapshot::memory(5, 10, vec![mutation("c", 6), mutation("d", 8), mutation("e", 10)]))
        .unwrap();
    let mut out = Vec::new();
    for _ in 0..6 {
        out.clear();
        active.poll_into(Duration::ZERO, &mut out).unwrap();
        consumer.on_message(&request(&out)).unwrap();
    }
    assert_eq!(consumer.resume_point(), (8, 5, 10), "in snapshot {{5, 10}} after item 8");
    let (start, snap_start, snap_end) = consumer.resume_point();

    let mut resumed = ConsumerStream::new(VbId(VB), OPAQUE, &log, start, (snap_start, snap_end));
    let event = connect(&mut producer(DcpOpenFlags::default()), &mut resumed, &log, 10);
    assert!(matches!(event, ConsumerEvent::Accepted { .. }));

    let mut failed_over = log.clone();
    failed_over.push(0xB, 9);
    let mut after_failover = ConsumerStream::new(VbId(VB), OPAQUE, &log, start, (snap_start, snap_end));
    let mut new_active = producer(DcpOpenFlags::default());
    assert_eq!(connect(&mut new_active, &mut after_failover, &failed_over, 12), ConsumerEvent::RollbackTo(5));
    assert_eq!(
        new_active.stream_request(&after_failover.request(), &failed_over, 12, 0, &mut Vec::new()),
        Err(StreamRequestError::Rollback { to: 5 })
    );
}

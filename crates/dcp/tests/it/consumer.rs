//! The consumer stream: its request, the reply, message validation, resume points and seqno acknowledgements.

use crate::support::*;
use settee_dcp::{ConsumerAction, ConsumerError, ConsumerEvent, ConsumerStream, DcpItem, SnapshotKind};
use settee_mcbp::dcp::{
    DcpControl, MarkerFormat, Mutation, Prepare, SnapshotFlags, SnapshotMarker, StreamEnd, StreamEndReason,
    StreamReqResponse,
};
use settee_mcbp::{decode_response, Request};
use settee_types::{Datatype, DurabilityLevel, FailoverLog, Seqno, VbId};

fn log() -> FailoverLog {
    let mut log = FailoverLog::new(0xA, 0);
    log.push(0xB, 4);
    log
}

/// An accepted stream starting after `high` with the consumer's own snapshot.
fn accepted(high: Seqno, snap: (Seqno, Seqno)) -> ConsumerStream {
    let mut c = ConsumerStream::new(VbId(VB), OPAQUE, &log(), high, snap);
    let mut body = Vec::new();
    log().encode(&mut body);
    assert_eq!(c.on_stream_response(0, &body), Ok(ConsumerEvent::Accepted { failover_log: log() }));
    c
}

fn marker(start: Seqno, end: Seqno, flags: SnapshotFlags) -> Vec<u8> {
    let mut out = Vec::new();
    SnapshotMarker { opaque: OPAQUE, vbucket: VB, start, end, flags, format: MarkerFormat::V1 }.encode(&mut out);
    out
}

fn mutation_frame(seqno: Seqno) -> Vec<u8> {
    let mut out = Vec::new();
    Mutation {
        opaque: OPAQUE,
        vbucket: VB,
        cas: 5,
        datatype: Datatype::RAW,
        by_seqno: seqno,
        rev_seqno: 1,
        flags: 0,
        expiration: 0,
        lock_time: 0,
        nru: 0,
        key: b"k",
        value: b"v",
    }
    .encode(&mut out);
    out
}

fn prepare_frame(seqno: Seqno, level: DurabilityLevel) -> Vec<u8> {
    let mut out = Vec::new();
    Prepare {
        opaque: OPAQUE,
        vbucket: VB,
        cas: 5,
        datatype: Datatype::RAW,
        by_seqno: seqno,
        rev_seqno: 1,
        flags: 0,
        expiration: 0,
        lock_time: 0,
        nru: 0,
        deleted: false,
        level,
        key: b"p",
        value: b"v",
    }
    .encode(&mut out);
    out
}

fn feed(c: &mut ConsumerStream, frame: &[u8]) -> Result<ConsumerAction, ConsumerError> {
    c.on_message(&request(frame))
}

/// The request resumes from the replica's high seqno and snapshot, under its newest uuid, to the end of time; a
/// snapshot not containing the high seqno is widened.
#[test]
fn stream_request_carries_the_resume_point() {
    let c = ConsumerStream::new(VbId(VB), OPAQUE, &log(), 12, (10, 15));
    let req = c.request();
    assert_eq!((req.vb_uuid, req.start_seqno, req.snap_start, req.snap_end), (0xB, 12, 10, 15));
    assert_eq!((req.end_seqno, req.opaque, req.vbucket), (u64::MAX, OPAQUE, VB));
    let odd = ConsumerStream::new(VbId(VB), OPAQUE, &log(), 9, (10, 15)).request();
    assert_eq!((odd.start_seqno, odd.snap_start, odd.snap_end), (9, 9, 15));
}

/// Success, ROLLBACK and other statuses of the reply, a malformed reply, and messages before acceptance.
#[test]
fn stream_response_outcomes() {
    let mut c = ConsumerStream::new(VbId(VB), OPAQUE, &log(), 12, (12, 12));
    assert_eq!(feed(&mut c, &marker(12, 14, SnapshotFlags::MEMORY)), Err(ConsumerError::NotStreaming));
    let mut out = Vec::new();
    StreamReqResponse::Rollback(4).encode(OPAQUE, &mut out);
    let (resp, _) = decode_response(&out, 1 << 20).unwrap().unwrap();
    assert_eq!(c.on_stream_response(resp.status, resp.value), Ok(ConsumerEvent::RollbackTo(4)));
    assert!(c.is_ended());
    let mut c = ConsumerStream::new(VbId(VB), OPAQUE, &log(), 12, (12, 12));
    assert_eq!(c.on_stream_response(0x07, &[]), Ok(ConsumerEvent::Rejected(0x07)));
    let mut c = ConsumerStream::new(VbId(VB), OPAQUE, &log(), 12, (12, 12));
    assert_eq!(c.on_stream_response(0, &[1, 2, 3]), Err(ConsumerError::BadResponse));
}

/// Items before a marker, outside it or not increasing, markers that do not advance, another stream's messages,
/// non-stream opcodes and anything after STREAM_END are errors.
#[test]
fn invalid_messages_are_errors() {
    let mut c = accepted(4, (4, 4));
    assert_eq!(feed(&mut c, &mutation_frame(5)), Err(ConsumerError::NoSnapshot { seqno: 5 }));
    assert_eq!(
        feed(&mut c, &marker(6, 4, SnapshotFlags::MEMORY)),
        Err(ConsumerError::BadMarker { start: 6, end: 4, position: 4 })
    );
    assert_eq!(
        feed(&mut c, &marker(4, 4, SnapshotFlags::MEMORY)),
        Err(ConsumerError::BadMarker { start: 4, end: 4, position: 4 })
    );
    assert!(feed(&mut c, &marker(4, 8, SnapshotFlags::MEMORY)).is_ok());
    assert_eq!(feed(&mut c, &mutation_frame(9)), Err(ConsumerError::OutsideSnapshot { seqno: 9, start: 4, end: 8 }));
    assert_eq!(feed(&mut c, &mutation_frame(4)), Err(ConsumerError::NotIncreasing { seqno: 4, last: 4 }));
    assert!(feed(&mut c, &mutation_frame(6)).is_ok());
    assert_eq!(feed(&mut c, &mutation_frame(6)), Err(ConsumerError::NotIncreasing { seqno: 6, last: 6 }));
    let other = {
        let mut f = mutation_frame(7);
        f[12..16].copy_from_slice(&1u32.to_be_bytes());
        f
    };
    assert_eq!(feed(&mut c, &other), Err(ConsumerError::WrongStream { vbucket: VB, opaque: 1 }));
    let mut control = Vec::new();
    DcpControl { opaque: OPAQUE, key: b"k", value: b"v" }.encode(&mut control);
    let control = Request { vbucket: VB, ..request(&control) };
    assert_eq!(c.on_message(&control), Err(ConsumerError::Unexpected(0x5e)));
    let mut end = Vec::new();
    StreamEnd { opaque: OPAQUE, vbucket: VB, reason: StreamEndReason::StateChanged }.encode(&mut end);
    assert_eq!(feed(&mut c, &end), Ok(ConsumerAction::StreamEnd(StreamEndReason::StateChanged)));
    assert_eq!(feed(&mut c, &mutation_frame(7)), Err(ConsumerError::NotStreaming));
    assert!(matches!(
        feed(&mut c, &[0x80, 0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Err(ConsumerError::Decode(_))
    ));
}

/// The resume point follows the data: inside a snapshot it is the last item and that snapshot; a complete
/// snapshot (its end received, or the next marker) resumes at its end; a marker with no items yet changes nothing.
#[test]
fn resume_point_follows_snapshots() {
    let mut c = accepted(4, (4, 4));
    feed(&mut c, &marker(5, 10, SnapshotFlags::MEMORY)).unwrap();
    assert_eq!(c.resume_point(), (4, 4, 4));
    feed(&mut c, &mutation_frame(6)).unwrap();
    assert_eq!(c.resume_point(), (6, 5, 10));
    feed(&mut c, &marker(11, 12, SnapshotFlags::DISK)).unwrap();
    assert_eq!(c.resume_point(), (10, 10, 10));
    let action = feed(&mut c, &mutation_frame(12)).unwrap();
    assert!(matches!(action, ConsumerAction::Apply(DcpItem::Mutation { seqno: 12, .. })));
    assert_eq!(c.resume_point(), (12, 12, 12));
}

/// A reopened stream acknowledges again the prepares the replica already held (the old connection's acks may be
/// lost): at once for a complete resume snapshot, a persist-level one once persisted; prepares inside a snapshot
/// the replica had not finished wait for its end.
#[test]
fn held_prepares_are_acknowledged_again_on_a_new_stream() {
    let mut c = accepted(9, (5, 9));
    c.resume_prepares(&[(6, false), (8, true)]);
    assert_eq!(c.seqno_ack().map(|a| a.prepared_seqno), Some(6));
    assert!(c.awaits_acknowledgement(), "the persist-level prepare waits for the disk");
    c.persisted(9);
    assert_eq!(c.seqno_ack().map(|a| a.prepared_seqno), Some(8));

    let mut partial = accepted(7, (5, 9));
    partial.resume_prepares(&[(6, false)]);
    assert_eq!(partial.seqno_ack(), None, "the snapshot holding it is not complete");
    feed(&mut partial, &marker(8, 9, SnapshotFlags::MEMORY)).unwrap();
    feed(&mut partial, &mutation_frame(8)).unwrap();
    feed(&mut partial, &mutation_frame(9)).unwrap();
    assert_eq!(partial.seqno_ack().map(|a| a.prepared_seqno), Some(6));
}

/// A majority prepare is acknowledged once its memory snapshot is complete; a persist-level one and any in a
/// disk snapshot only once persisted.
#[test]
fn prepares_are_acknowledged_at_snapshot_boundaries() {
    let mut c = accepted(4, (4, 4));
    feed(&mut c, &marker(5, 7, SnapshotFlags::MEMORY.with(SnapshotFlags::CHECKPOINT))).unwrap();
    feed(&mut c, &prepare_frame(5, DurabilityLevel::Majority)).unwrap();
    assert_eq!(c.seqno_ack(), None, "snapshot not complete yet");
    feed(&mut c, &prepare_frame(6, DurabilityLevel::PersistToMajority)).unwrap();
    feed(&mut c, &mutation_frame(7)).unwrap();
    assert_eq!(c.seqno_ack().map(|a| (a.vbucket, a.opaque, a.prepared_seqno)), Some((VB, OPAQUE, 5)));
    assert!(c.awaits_acknowledgement(), "the persist-level prepare waits for the disk");
    c.persisted(6);
    assert_eq!(c.seqno_ack().map(|a| a.prepared_seqno), Some(6));
    assert!(!c.awaits_acknowledgement());

    let action = feed(&mut c, &marker(8, 9, SnapshotFlags::DISK)).unwrap();
    assert!(matches!(action, ConsumerAction::SnapshotMarker { kind: SnapshotKind::Disk, .. }));
    feed(&mut c, &prepare_frame(8, DurabilityLevel::Majority)).unwrap();
    feed(&mut c, &mutation_frame(9)).unwrap();
    c.persisted(8);
    assert_eq!(c.seqno_ack(), None, "a disk snapshot counts once persisted whole");
    c.persisted(9);
    assert_eq!(c.seqno_ack().map(|a| a.prepared_seqno), Some(8));
    assert_eq!(c.seqno_ack(), None);
}

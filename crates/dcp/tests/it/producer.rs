//! The producer: stream requests, snapshots in and frames out, the end of a stream, and the connection around it.

use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use settee_dcp::{
    DcpItem, FlowControl, OpenError, ProducerConnection, ProducerStream, Snapshot, StreamError, StreamOptions,
    StreamRequestError, STREAM_QUEUE_BYTES_SOFT_MAX,
};
use settee_mcbp::dcp::{
    DcpMessage, DcpOpen, DcpOpenFlags, MarkerFormat, SnapshotFlags, StreamEndReason, StreamFlags, StreamReqResponse,
    STATUS_ROLLBACK,
};
use settee_mcbp::decode_response;
use settee_types::{DurabilityLevel, FailoverLog, Status, VbId};

/// Branches A from 0, B from 10, C from 20; high seqno 30.
fn history() -> FailoverLog {
    let mut log = FailoverLog::new(0xA, 0);
    log.push(0xB, 10);
    log.push(0xC, 20);
    log
}

fn reply(out: &[u8]) -> StreamReqResponse {
    let (resp, _) = decode_response(out, 1 << 20).unwrap().unwrap();
    assert_eq!(resp.opaque, OPAQUE);
    StreamReqResponse::decode(resp.status, resp.value).unwrap()
}

/// An accepted stream request is answered with the producer's whole failover log, and the stream exists.
#[test]
fn accepted_stream_request_replies_with_the_failover_log() {
    let mut conn = producer(DcpOpenFlags::default());
    let mut out = Vec::new();
    let result = conn.stream_request(&stream_req(0xB, 15, u64::MAX, (12, 18)), &history(), 30, 0, &mut out);
    assert_eq!(result, Ok(()));
    assert_eq!(reply(&out), StreamReqResponse::Accepted(history()));
    assert_eq!(conn.stream(VbId(VB)).unwrap().wants_from(), Some(16));
}

/// Each rollback case of rollback.md, answered with status ROLLBACK and the seqno in the body.
#[test]
fn stream_request_rollback_for_each_failover_case() {
    let cases = [
        // (uuid, start, snapshot, purge seqno, expected rollback)
        (0xEE, 5, (5, 5), 0, 0),    // unknown uuid: no common history
        (0xC, 25, (25, 25), 26, 0), // purged tombstones past the start
        (0xA, 15, (12, 15), 0, 10), // consumer ahead on a branch that ended at 10
        (0xB, 18, (16, 24), 0, 16), // partial snapshot straddling the branch point 20
        (0xC, 35, (35, 35), 0, 30), // ahead of the producer's high seqno
    ];
    for (uuid, start, snap, purge, to) in cases {
        let mut conn = producer(DcpOpenFlags::default());
        let mut out = Vec::new();
        let result = conn.stream_request(&stream_req(uuid, start, u64::MAX, snap), &history(), 30, purge, &mut out);
        assert_eq!(result, Err(StreamRequestError::Rollback { to }), "{uuid:x} {start} {snap:?}");
        assert_eq!(reply(&out), StreamReqResponse::Rollback(to));
        assert_eq!(decode_response(&out, 1 << 20).unwrap().unwrap().0.status, STATUS_ROLLBACK);
        assert_eq!(conn.stream_count(), 0);
    }
}

/// start > end and a snapshot that does not contain the start are ERANGE; a second stream for the same vBucket is
/// KEY_EEXISTS; takeover and filters are NOT_SUPPORTED.
#[test]
fn invalid_stream_requests_get_their_status() {
    let mut conn = producer(DcpOpenFlags::default());
    let mut out = Vec::new();
    let log = history();
    let mut ask = |conn: &mut ProducerConnection, req| {
        out.clear();
        let r = conn.stream_request(&req, &log, 30, 0, &mut out);
        (r, decode_response(&out, 1 << 20).unwrap().unwrap().0.status)
    };
    let erange = Status::Erange.code();
    assert_eq!(ask(&mut conn, stream_req(0xC, 25, 24, (25, 25))), (Err(StreamRequestError::InvalidRange), erange));
    assert_eq!(ask(&mut conn, stream_req(0xC, 25, 40, (26, 28))), (Err(StreamRequestError::InvalidRange), erange));
    assert_eq!(ask(&mut conn, stream_req(0xC, 25, u64::MAX, (25, 25))).0, Ok(()));
    let exists = Status::KeyEexists.code();
    assert_eq!(
        ask(&mut conn, stream_req(0xC, 25, u64::MAX, (25, 25))),
        (Err(StreamRequestError::StreamExists), exists)
    );
    let takeover =
        settee_mcbp::dcp::StreamReq { vbucket: 1, flags: StreamFlags::TAKEOVER, ..stream_req(0, 0, 9, (0, 0)) };
    assert_eq!(ask(&mut conn, takeover).1, Status::NotSupported.code());
    let filtered = settee_mcbp::dcp::StreamReq { vbucket: 2, value: b"{\"uid\":\"0\"}", ..stream_req(0, 0, 9, (0, 0)) };
    assert_eq!(ask(&mut conn, filtered), (Err(StreamRequestError::ValueNotSupported), Status::NotSupported.code()));
}

/// A backfill from disk then two memory checkpoints: the first marker starts at the requested start, disk markers
/// carry DISK|CHECKPOINT, memory ones MEMORY|CHECKPOINT, and items follow in order.
#[test]
fn backfill_snapshot_then_memory_snapshots() {
    let mut stream = open_stream(0, u64::MAX, 20, StreamOptions::default());
    let mut flow = FlowControl::new();
    stream.push_snapshot(Snapshot::disk(1, 10, vec![mutation("a", 3), deletion("b", 7), mutation("c", 10)])).unwrap();
    stream.push_snapshot(Snapshot::memory(11, 15, vec![mutation("a", 12), mutation("d", 15)])).unwrap();
    stream.push_snapshot(Snapshot::memory(16, 20, vec![mutation("e", 20)])).unwrap();
    let frames = drain(&mut stream, &mut flow);
    assert_eq!(
        describe_all(&frames),
        [
            ("MARKER", 0, 10),
            ("ITEM", 3, 0),
            ("ITEM", 7, 0),
            ("ITEM", 10, 0),
            ("MARKER", 11, 15),
            ("ITEM", 12, 0),
            ("ITEM", 15, 0),
            ("MARKER", 16, 20),
            ("ITEM", 20, 0),
        ]
    );
    let flags = |i: usize| match DcpMessage::decode(&request(&frames[i])).unwrap() {
        DcpMessage::SnapshotMarker(m) => (m.flags, m.format),
        other => panic!("{other:?}"),
    };
    assert_eq!(flags(0), (SnapshotFlags::DISK.with(SnapshotFlags::CHECKPOINT), MarkerFormat::V1));
    assert_eq!(flags(4), (SnapshotFlags::MEMORY.with(SnapshotFlags::CHECKPOINT), MarkerFormat::V1));
    assert_eq!(stream.wants_from(), Some(21));
    assert_eq!(flow.unacked_bytes(), frames.iter().map(|f| f.len() as u64).sum::<u64>());
}

/// The snapshot that reaches the end seqno is clipped to it, STREAM_END(OK) follows, and the stream is done.
#[test]
fn end_seqno_reached_sends_stream_end_ok() {
    let mut stream = open_stream(0, 12, 20, StreamOptions::default());
    let mut flow = FlowControl::new();
    stream.push_snapshot(Snapshot::memory(1, 10, vec![mutation("a", 4)])).unwrap();
    stream
        .push_snapshot(Snapshot::memory(11, 20, vec![mutation("b", 11), mutation("c", 12), mutation("d", 13)]))
        .unwrap();
    assert_eq!(stream.wants_from(), None);
    assert_eq!(stream.push_snapshot(Snapshot::memory(21, 22, vec![])), Err(StreamError::NotActive));
    let frames = drain(&mut stream, &mut flow);
    assert_eq!(
        describe_all(&frames),
        [("MARKER", 0, 10), ("ITEM", 4, 0), ("MARKER", 11, 12), ("ITEM", 11, 0), ("ITEM", 12, 0), ("END", 0, 0)]
    );
    assert!(stream.is_done());
}

/// Regression: a snapshot starting beyond the end seqno once produced a marker whose start passed its end. It
/// means nothing exists up to the end seqno, so the stream ends.
#[test]
fn snapshot_starting_past_the_end_seqno_ends_the_stream() {
    let mut stream = open_stream(9, 17, 20, StreamOptions::default());
    stream.push_snapshot(Snapshot::memory(4, 10, vec![mutation("a", 10)])).unwrap();
    stream.push_snapshot(Snapshot::memory(18, 18, vec![mutation("b", 18)])).unwrap();
    assert_eq!(
        describe_all(&drain(&mut stream, &mut FlowControl::new())),
        [("MARKER", 9, 10), ("ITEM", 10, 0), ("END", 0, 0)]
    );
}

/// A request whose start equals its end is accepted and ends at once.
#[test]
fn empty_range_ends_at_once() {
    let mut stream = open_stream(5, 5, 20, StreamOptions::default());
    assert_eq!(describe_all(&drain(&mut stream, &mut FlowControl::new())), [("END", 0, 0)]);
}

/// TO_LATEST ends at the high seqno; FROM_LATEST starts there whatever the request said.
#[test]
fn to_latest_and_from_latest() {
    let log = FailoverLog::new(0xA, 0);
    let req = settee_mcbp::dcp::StreamReq { flags: StreamFlags::TO_LATEST, ..stream_req(0, 0, u64::MAX, (0, 0)) };
    assert_eq!(ProducerStream::open(&req, &log, 8, 0, StreamOptions::default()).unwrap().end_seqno(), 8);
    let req = settee_mcbp::dcp::StreamReq { flags: StreamFlags::FROM_LATEST, ..stream_req(0xEE, 3, u64::MAX, (1, 4)) };
    assert_eq!(ProducerStream::open(&req, &log, 8, 0, StreamOptions::default()).unwrap().wants_from(), Some(9));
}

/// A snapshot overlapping what was sent is clipped (items at or below the position dropped, the marker starting
/// after it), and one wholly behind is ignored.
#[test]
fn overlapping_snapshots_are_clipped_and_stale_ones_ignored() {
    let mut stream = open_stream(0, u64::MAX, 30, StreamOptions::default());
    stream.push_snapshot(Snapshot::disk(1, 12, vec![mutation("a", 5), mutation("b", 12)])).unwrap();
    stream.push_snapshot(Snapshot::memory(3, 9, vec![mutation("x", 9)])).unwrap();
    stream
        .push_snapshot(Snapshot::memory(5, 20, vec![mutation("a", 5), mutation("c", 13), mutation("d", 20)]))
        .unwrap();
    assert_eq!(
        describe_all(&drain(&mut stream, &mut FlowControl::new())),
        [("MARKER", 0, 12), ("ITEM", 5, 0), ("ITEM", 12, 0), ("MARKER", 13, 20), ("ITEM", 13, 0), ("ITEM", 20, 0)]
    );
}

/// Driver misuse is reported and leaves the stream untouched.
#[test]
fn driver_misuse_is_an_error_and_queues_nothing() {
    let mut stream = open_stream(0, u64::MAX, 30, StreamOptions::default());
    let misuse = [
        (Snapshot::memory(5, 4, vec![]), StreamError::BadRange { start: 5, end: 4 }),
        (
            Snapshot::memory(1, 5, vec![mutation("a", 3), mutation("b", 3)]),
            StreamError::NotIncreasing { seqno: 3, previous: 3 },
        ),
        (
            Snapshot::memory(1, 5, vec![mutation("a", 6)]),
            StreamError::ItemOutsideSnapshot { seqno: 6, start: 1, end: 5 },
        ),
        (Snapshot::memory(1, 5, vec![commit("a", 2, 4)]), StreamError::CommitWithoutSyncWrites { seqno: 4 }),
    ];
    for (snapshot, error) in misuse {
        assert_eq!(stream.push_snapshot(snapshot), Err(error));
        assert!(!stream.has_frame());
        assert_eq!(stream.wants_from(), Some(1));
    }
}

/// Without sync writes prepares and aborts are not sent and markers are v1; with them everything is sent under
/// v2.0 markers carrying the max visible seqno (and the HCS for disk snapshots).
#[test]
fn sync_write_items_follow_the_negotiation() {
    let items = || vec![mutation("a", 1), prepare("k", 2, DurabilityLevel::Majority), abort("k", 2, 3)];
    let mut plain = open_stream(0, u64::MAX, 9, StreamOptions::default());
    plain.push_snapshot(Snapshot::memory(1, 3, items())).unwrap();
    assert_eq!(describe_all(&drain(&mut plain, &mut FlowControl::new())), [("MARKER", 0, 3), ("ITEM", 1, 0)]);

    let mut sync = open_stream(0, u64::MAX, 9, StreamOptions { sync_writes: true, ..StreamOptions::default() });
    sync.push_snapshot(Snapshot { high_completed_seqno: 3, ..Snapshot::disk(1, 3, items()) }).unwrap();
    let frames = drain(&mut sync, &mut FlowControl::new());
    assert_eq!(describe_all(&frames), [("MARKER", 0, 3), ("ITEM", 1, 0), ("ITEM", 2, 0), ("ITEM", 3, 0)]);
    match DcpMessage::decode(&request(&frames[0])).unwrap() {
        DcpMessage::SnapshotMarker(m) => {
            assert_eq!(m.format, MarkerFormat::V2_0 { max_visible_seqno: 1, high_completed_seqno: 3 })
        }
        other => panic!("{other:?}"),
    }
}

/// Expirations travel as DCP_DELETION unless the expiry opcode was enabled; deletions use the v2 layout with
/// delete times.
#[test]
fn expirations_and_delete_times_follow_the_negotiation() {
    let expired = DcpItem::Expiration { key: Bytes::from_static(b"k"), cas: 9, seqno: 1, rev: 2, delete_time: 77 };
    let first_item = |options| {
        let mut stream = open_stream(0, u64::MAX, 9, options);
        stream.push_snapshot(Snapshot::memory(1, 1, vec![expired.clone()])).unwrap();
        let frames = drain(&mut stream, &mut FlowControl::new());
        let req = request(&frames[1]);
        (req.opcode, req.extras.len())
    };
    assert_eq!(first_item(StreamOptions::default()), (0x58, 18));
    let times = StreamOptions { include_delete_times: true, ..StreamOptions::default() };
    assert_eq!(first_item(times), (0x58, 21));
    assert_eq!(first_item(StreamOptions { expiry_opcode: true, ..times }), (0x59, 20));
}

/// With collections, a snapshot whose sent items stop short of its end is closed by SEQNO_ADVANCED.
#[test]
fn seqno_advanced_closes_a_snapshot_with_a_missing_tail() {
    let options = StreamOptions { seqno_advanced: true, ..StreamOptions::default() };
    let mut stream = open_stream(0, u64::MAX, 9, options);
    stream
        .push_snapshot(Snapshot::memory(1, 4, vec![mutation("a", 1), prepare("p", 4, DurabilityLevel::Majority)]))
        .unwrap();
    assert_eq!(
        describe_all(&drain(&mut stream, &mut FlowControl::new())),
        [("MARKER", 0, 4), ("ITEM", 1, 0), ("ADVANCED", 4, 0)]
    );
}

/// CLOSE_STREAM sends nothing more, unless the consumer asked for STREAM_END(CLOSED); an unknown vBucket is
/// KEY_ENOENT. A producer-side end drops what was queued and sends STREAM_END with its reason.
#[test]
fn closing_and_ending_streams() {
    for (asked, expected) in [(false, vec![]), (true, vec![("END", 1, 0)])] {
        let mut conn = producer(DcpOpenFlags::default());
        if asked {
            assert_eq!(conn.control(b"send_stream_end_on_client_close_stream", b"true"), Status::Success);
        }
        conn.stream_request(&stream_req(0, 0, u64::MAX, (0, 0)), &history(), 30, 0, &mut Vec::new()).unwrap();
        conn.push_snapshot(VbId(VB), Snapshot::memory(1, 2, vec![mutation("a", 1)])).unwrap();
        assert_eq!(conn.close_stream(VbId(VB)), Status::Success);
        assert_eq!(conn.close_stream(VbId(9)), Status::KeyEnoent);
        let mut out = Vec::new();
        let frames: Vec<Vec<u8>> = std::iter::from_fn(|| {
            out.clear();
            conn.poll_into(Duration::ZERO, &mut out).map(|_| out.clone())
        })
        .collect();
        assert_eq!(describe_all(&frames), expected);
        assert_eq!(conn.stream_count(), 0);
    }
    let mut stream = open_stream(0, u64::MAX, 9, StreamOptions::default());
    stream.push_snapshot(Snapshot::memory(1, 2, vec![mutation("a", 1)])).unwrap();
    stream.end(StreamEndReason::StateChanged);
    assert_eq!(describe_all(&drain(&mut stream, &mut FlowControl::new())), [("END", 2, 0)]);
}

/// Streams take turns: one frame each, in vBucket order, starting after the one served last.
#[test]
fn frames_are_round_robin_across_streams() {
    let mut conn = producer(DcpOpenFlags::default());
    for vb in [3u16, 5, 9] {
        let req = settee_mcbp::dcp::StreamReq { vbucket: vb, ..stream_req(0, 0, u64::MAX, (0, 0)) };
        conn.stream_request(&req, &history(), 30, 0, &mut Vec::new()).unwrap();
        conn.push_snapshot(VbId(vb), Snapshot::memory(1, 2, vec![mutation("a", 1), mutation("b", 2)])).unwrap();
    }
    assert_eq!(conn.wants().collect::<Vec<_>>(), [(VbId(3), 3), (VbId(5), 3), (VbId(9), 3)]);
    let mut order = Vec::new();
    let mut out = Vec::new();
    while let Some(len) = conn.poll_into(Duration::ZERO, &mut out) {
        order.push(request(&out[out.len() - len..]).vbucket);
    }
    assert_eq!(order, [3, 5, 9, 3, 5, 9, 3, 5, 9]);
}

/// A stream stops asking for data once its unsent frames pass the soft bound, and asks again once they drain.
#[test]
fn wants_from_stops_while_the_queue_is_full() {
    let mut stream = open_stream(0, u64::MAX, 1000, StreamOptions::default());
    let big = |seqno| match mutation("k", seqno) {
        DcpItem::Mutation { key, cas, seqno, rev, flags, expiry, datatype, .. } => {
            let value = Bytes::from(vec![b'x'; STREAM_QUEUE_BYTES_SOFT_MAX / 4]);
            DcpItem::Mutation { key, value, cas, seqno, rev, flags, expiry, datatype }
        }
        other => other,
    };
    stream.push_snapshot(Snapshot::memory(1, 5, (1..=5).map(big).collect())).unwrap();
    assert_eq!(stream.wants_from(), None);
    drain(&mut stream, &mut FlowControl::new());
    assert_eq!(stream.wants_from(), Some(6));
}

/// DCP_OPEN without the producer flag, with the invalid flag, or with an over-long name is refused.
#[test]
fn open_checks_flags_and_name() {
    let open = |flags, name: &'static [u8]| {
        ProducerConnection::open(&DcpOpen { opaque: 1, flags, name, value: &[] }, false, Duration::ZERO).map(|_| ())
    };
    assert_eq!(open(DcpOpenFlags::default(), b"c"), Err(OpenError::NotProducer));
    let invalid = DcpOpenFlags::PRODUCER.with(DcpOpenFlags::INVALID);
    assert_eq!(open(invalid, b"c"), Err(OpenError::InvalidFlags(3)));
    assert_eq!(open(DcpOpenFlags::PRODUCER, &[b'n'; 201]), Err(OpenError::NameTooLong(201)));
    assert_eq!(open(DcpOpenFlags::PRODUCER, &[b'n'; 200]), Ok(()));
}

/// SEQNO_ACKNOWLEDGED needs sync writes and a consumer name, and a stream for the vBucket.
#[test]
fn seqno_acknowledged_needs_sync_replication() {
    let mut conn = producer(DcpOpenFlags::default());
    assert_eq!(conn.seqno_acknowledged(VbId(VB), 4), Err(Status::Einval));
    conn.control(b"enable_sync_writes", b"true");
    conn.control(b"consumer_name", b"replica-1");
    assert_eq!(conn.seqno_acknowledged(VbId(VB), 4), Err(Status::NotMyVbucket));
    conn.stream_request(&stream_req(0, 0, u64::MAX, (0, 0)), &history(), 30, 0, &mut Vec::new()).unwrap();
    assert_eq!(conn.seqno_acknowledged(VbId(VB), 4), Ok(4));
}

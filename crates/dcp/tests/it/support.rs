//! Builders for requests, items and connections, and a decoder for what a producer emits.

use std::time::Duration;

use bytes::Bytes;
use settee_dcp::{DcpItem, FlowControl, ProducerConnection, ProducerStream, StreamOptions};
use settee_mcbp::dcp::{DcpMessage, DcpOpen, DcpOpenFlags, StreamFlags, StreamReq};
use settee_mcbp::{decode_request, Request};
use settee_types::{Datatype, DurabilityLevel, FailoverLog, Seqno, VbUuid};

pub const VB: u16 = 7;
pub const OPAQUE: u32 = 0xabc;

pub fn mutation(key: &str, seqno: Seqno) -> DcpItem {
    DcpItem::Mutation {
        key: Bytes::copy_from_slice(key.as_bytes()),
        value: Bytes::from(format!("{{\"v\":{seqno}}}")),
        cas: 1000 + seqno,
        seqno,
        rev: seqno,
        flags: 0x0200_0000,
        expiry: 0,
        datatype: Datatype::JSON,
    }
}

pub fn deletion(key: &str, seqno: Seqno) -> DcpItem {
    DcpItem::Deletion {
        key: Bytes::copy_from_slice(key.as_bytes()),
        value: Bytes::new(),
        cas: 1000 + seqno,
        seqno,
        rev: seqno,
        delete_time: 0,
        datatype: Datatype::RAW,
    }
}

pub fn prepare(key: &str, seqno: Seqno, level: DurabilityLevel) -> DcpItem {
    DcpItem::Prepare {
        key: Bytes::copy_from_slice(key.as_bytes()),
        value: Bytes::from_static(b"{\"durable\":true}"),
        cas: 1000 + seqno,
        seqno,
        rev: seqno,
        flags: 0,
        expiry: 0,
        datatype: Datatype::JSON,
        level,
        deleted: false,
    }
}

pub fn commit(key: &str, prepared_seqno: Seqno, commit_seqno: Seqno) -> DcpItem {
    DcpItem::Commit { key: Bytes::copy_from_slice(key.as_bytes()), prepared_seqno, commit_seqno }
}

pub fn abort(key: &str, prepared_seqno: Seqno, abort_seqno: Seqno) -> DcpItem {
    DcpItem::Abort { key: Bytes::copy_from_slice(key.as_bytes()), prepared_seqno, abort_seqno }
}

/// A stream request on `VB` with `OPAQUE`.
pub fn stream_req(uuid: VbUuid, start: Seqno, end: Seqno, snap: (Seqno, Seqno)) -> StreamReq<'static> {
    StreamReq {
        opaque: OPAQUE,
        vbucket: VB,
        flags: StreamFlags::default(),
        start_seqno: start,
        end_seqno: end,
        vb_uuid: uuid,
        snap_start: snap.0,
        snap_end: snap.1,
        value: &[],
    }
}

/// An accepted stream from `start` to `end` on a vBucket with a single history branch 0xA.
pub fn open_stream(start: Seqno, end: Seqno, high: Seqno, options: StreamOptions) -> ProducerStream {
    let log = FailoverLog::new(0xA, 0);
    let uuid = if start == 0 { 0 } else { 0xA };
    ProducerStream::open(&stream_req(uuid, start, end, (start, start)), &log, high, 0, options).unwrap()
}

/// A producer connection opened with `flags` (PRODUCER added) at time 0.
pub fn producer(flags: DcpOpenFlags) -> ProducerConnection {
    let open = DcpOpen { opaque: 1, flags: flags.with(DcpOpenFlags::PRODUCER), name: b"test:conn", value: &[] };
    ProducerConnection::open(&open, false, Duration::ZERO).unwrap()
}

/// One whole frame as a request.
pub fn request(frame: &[u8]) -> Request<'_> {
    let (req, used) = decode_request(frame, 1 << 24).unwrap().unwrap();
    assert_eq!(used, frame.len(), "one frame per buffer");
    req
}

/// Every frame a stream emits while flow control allows, one buffer per frame.
pub fn drain(stream: &mut ProducerStream, flow: &mut FlowControl) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| stream.poll_frame(flow)).take(10_000).collect()
}

/// What a frame is, in a form tests compare easily: ("MARKER", start, end), ("ITEM", seqno, 0), ...
pub fn describe(frame: &[u8]) -> (&'static str, u64, u64) {
    match DcpMessage::decode(&request(frame)).unwrap() {
        DcpMessage::SnapshotMarker(m) => ("MARKER", m.start, m.end),
        DcpMessage::StreamEnd(e) => ("END", u64::from(e.reason.code()), 0),
        DcpMessage::SeqnoAdvanced(a) => ("ADVANCED", a.seqno, 0),
        DcpMessage::Noop(_) => ("NOOP", 0, 0),
        other => match DcpItem::from_message(&other) {
            Some(item) => ("ITEM", item.seqno(), 0),
            None => panic!("unexpected frame {other:?}"),
        },
    }
}

pub fn describe_all(frames: &[Vec<u8>]) -> Vec<(&'static str, u64, u64)> {
    frames.iter().map(|f| describe(f)).collect()
}

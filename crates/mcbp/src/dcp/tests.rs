use super::*;
use crate::request::decode_request;
use proptest::prelude::*;
use settee_types::{Datatype, DurabilityLevel, FailoverLog};

fn decode(bytes: &[u8]) -> DcpMessage<'_> {
    let (req, used) = decode_request(bytes, 1 << 20).unwrap().unwrap();
    assert_eq!(used, bytes.len());
    DcpMessage::decode(&req).unwrap()
}

/// The DCP_OPEN example of open-connection.md, byte for byte (its key length 0x18 is the 24-byte name).
#[test]
fn dcp_open_matches_the_documented_bytes() {
    let name = b"bucketstream vb[100-105]";
    let mut out = Vec::new();
    DcpOpen { opaque: 1, flags: DcpOpenFlags::default(), name, value: &[] }.encode(&mut out);
    let mut want = vec![0x80, 0x50, 0x00, 0x18, 0x08, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    want.extend_from_slice(&[0; 8]);
    want.extend_from_slice(name);
    assert_eq!(out, want);
}

/// The first STREAM_REQ example of stream-request.md, byte for byte, and its rollback reply.
#[test]
fn stream_req_matches_the_documented_bytes() {
    let req = StreamReq {
        opaque: 0x1000,
        vbucket: 0,
        flags: StreamFlags::default(),
        start_seqno: 0xffeedd,
        end_seqno: u64::MAX,
        vb_uuid: 0xfeeddeca,
        snap_start: 0,
        snap_end: 0xffeeff,
        value: &[],
    };
    let mut out = Vec::new();
    req.encode(&mut out);
    assert_eq!(&out[..12], &[0x80, 0x53, 0, 0, 0x30, 0, 0, 0, 0, 0, 0, 0x30]);
    assert_eq!(&out[32..40], &[0, 0, 0, 0, 0, 0xff, 0xee, 0xdd]);
    assert_eq!(&out[40..48], &[0xff; 8]);
    assert_eq!(&out[64..72], &[0, 0, 0, 0, 0, 0xff, 0xee, 0xff]);
    assert_eq!(decode(&out), DcpMessage::StreamReq(req));

    let mut reply = Vec::new();
    StreamReqResponse::Rollback(0).encode(0x1000, &mut reply);
    assert_eq!(&reply[..8], &[0x81, 0x53, 0, 0, 0, 0, 0, 0x23]);
    assert_eq!(reply.len(), 32);
}

/// The DCP_MUTATION example of mutation.md: "hello" = "world" at seqno 4, rev 1, on vBucket 0x210.
#[test]
fn mutation_matches_the_documented_bytes() {
    let m = Mutation {
        opaque: 0x1210,
        vbucket: 0x210,
        cas: 0,
        datatype: Datatype::RAW,
        by_seqno: 4,
        rev_seqno: 1,
        flags: 0,
        expiration: 0,
        lock_time: 0,
        nru: 0,
        key: b"hello",
        value: b"world",
    };
    let mut out = Vec::new();
    m.encode(&mut out);
    let mut want = vec![0x80, 0x57, 0, 5, 0x1f, 0, 0x02, 0x10, 0, 0, 0, 0x29, 0, 0, 0x12, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 1]);
    want.extend_from_slice(&[0; 15]);
    want.extend_from_slice(b"helloworld");
    assert_eq!(out, want);
}

/// A v1 marker is 20 bytes of extras; a v2.0 marker is a version byte and a 36-byte value; v2.2 adds 16 bytes;
/// other versions are refused.
#[test]
fn snapshot_marker_layouts() {
    let v1 = SnapshotMarker {
        opaque: 0xdeadbeef,
        vbucket: 0,
        start: 0,
        end: 8,
        flags: SnapshotFlags::MEMORY,
        format: MarkerFormat::V1,
    };
    let mut out = Vec::new();
    v1.encode(&mut out);
    assert_eq!((out[4], out.len()), (20, 44));
    assert_eq!(&out[40..44], &[0, 0, 0, 1]);
    let v2 = SnapshotMarker {
        start: 1,
        flags: SnapshotFlags::DISK,
        format: MarkerFormat::V2_0 { max_visible_seqno: 8, high_completed_seqno: 7 },
        ..v1
    };
    out.clear();
    v2.encode(&mut out);
    assert_eq!((out[4], out[24], out.len()), (1, 0, 24 + 1 + 36));
    assert_eq!(decode(&out), DcpMessage::SnapshotMarker(v2));
    // Regression: the v2.2 value (52 bytes) once overflowed the fixed-section builder.
    let v2_2 = SnapshotMarker {
        format: MarkerFormat::V2_2 {
            max_visible_seqno: 8,
            high_completed_seqno: 7,
            purge_seqno: 2,
            high_prepared_seqno: 8,
        },
        ..v2
    };
    let mut out2 = Vec::new();
    v2_2.encode(&mut out2);
    assert_eq!((out2[4], out2[24], out2.len()), (1, 2, 24 + 1 + 52));
    assert_eq!(decode(&out2), DcpMessage::SnapshotMarker(v2_2));
    let mut bad = out.clone();
    bad[24] = 1;
    let (req, _) = decode_request(&bad, 1 << 20).unwrap().unwrap();
    assert_eq!(SnapshotMarker::decode(&req), Err(DcpDecodeError::MarkerVersion(1)));
}

/// A STREAM_REQ reply carries the failover log on success and the seqno on ROLLBACK; other statuses pass through.
#[test]
fn stream_req_response_round_trips() {
    let mut log = FailoverLog::new(0xfeeddeca, 0);
    log.push(0xdecafe, 0x5432);
    for reply in [StreamReqResponse::Accepted(log), StreamReqResponse::Rollback(77), StreamReqResponse::Failed(0x22)] {
        let mut out = Vec::new();
        reply.encode(9, &mut out);
        let (resp, _) = crate::response::decode_response(&out, 1 << 20).unwrap().unwrap();
        assert_eq!(resp.opaque, 9);
        assert_eq!(StreamReqResponse::decode(resp.status, resp.value), Ok(reply));
    }
    assert!(StreamReqResponse::decode(STATUS_ROLLBACK, &[0; 7]).is_err());
    assert!(StreamReqResponse::decode(0, &[0; 15]).is_err());
}

/// A frame of another opcode, a wrong extras length, a missing key and a forbidden value are all EINVAL.
#[test]
fn layout_violations_are_errors() {
    let mut out = Vec::new();
    BufferAck { opaque: 1, bytes: 10 }.encode(&mut out);
    let (req, _) = decode_request(&out, 1 << 20).unwrap().unwrap();
    assert!(matches!(StreamEnd::decode(&req), Err(DcpDecodeError::WrongOpcode { .. })));
    let short = crate::Request { extras: &req.extras[..3], ..req };
    assert_eq!(BufferAck::decode(&short), Err(DcpDecodeError::ExtrasLength { opcode: Opcode::DcpBufferAck, len: 3 }));
    let with_value = crate::Request { value: b"x", ..req };
    assert_eq!(BufferAck::decode(&with_value), Err(DcpDecodeError::UnexpectedValue(Opcode::DcpBufferAck)));
    let commit = crate::Request { opcode: 0x62, extras: &[0; 16], ..req };
    assert_eq!(Commit::decode(&commit), Err(DcpDecodeError::MissingKey(Opcode::DcpCommit)));
    assert_eq!(DcpMessage::decode(&crate::Request { opcode: 0x5a, ..req }), Err(DcpDecodeError::NotDcp(0x5a)));
    assert_eq!(DcpDecodeError::NotDcp(0).status(), Status::Einval);
}

/// Every opcode round-trips through its byte and the documented codes hold.
#[test]
fn opcode_table() {
    assert_eq!(Opcode::ALL.iter().filter(|o| o.is_dcp()).count(), 21);
    assert_eq!((Opcode::DcpSetVbucketState as u8, Opcode::DcpOsoSnapshot as u8), (0x5b, 0x65));
    assert_eq!(Opcode::from_byte(0x5a), None, "DCP_FLUSH is obsolete");
}

/// Builds message number `kind` (0..21) from random fields, respecting each message's required parts.
fn sample<'a>(kind: u8, n: &[u64; 8], key: &'a [u8], value: &'a [u8]) -> DcpMessage<'a> {
    let (opaque, vbucket, cas) = (n[0] as u32, (n[1] % 1024) as u16, n[2]);
    let datatype = Datatype((n[3] % 8) as u8);
    let level = DurabilityLevel::from_wire((n[4] % 3) as u8 + 1).unwrap();
    let marker_format = match n[5] % 3 {
        0 => MarkerFormat::V1,
        1 => MarkerFormat::V2_0 { max_visible_seqno: n[6], high_completed_seqno: n[7] },
        _ => MarkerFormat::V2_2 {
            max_visible_seqno: n[6],
            high_completed_seqno: n[7],
            purge_seqno: n[2],
            high_prepared_seqno: n[3],
        },
    };
    match kind {
        0 => DcpMessage::Open(DcpOpen { opaque, flags: DcpOpenFlags(n[2] as u32), name: key, value }),
        1 => DcpMessage::AddStream(AddStream { opaque, vbucket, flags: StreamFlags(n[2] as u32) }),
        2 => DcpMessage::CloseStream(CloseStream { opaque, vbucket }),
        3 => DcpMessage::StreamReq(StreamReq {
            opaque,
            vbucket,
            flags: StreamFlags(n[2] as u32),
            start_seqno: n[3],
            end_seqno: n[4],
            vb_uuid: n[5],
            snap_start: n[6],
            snap_end: n[7],
            value,
        }),
        4 => DcpMessage::GetFailoverLog(GetFailoverLog { opaque, vbucket }),
        5 => DcpMessage::StreamEnd(StreamEnd { opaque, vbucket, reason: StreamEndReason::from_code(n[2] as u32) }),
        6 => DcpMessage::SnapshotMarker(SnapshotMarker {
            opaque,
            vbucket,
            start: n[3],
            end: n[4],
            flags: SnapshotFlags(n[2] as u32),
            format: marker_format,
        }),
        7 => DcpMessage::Mutation(Mutation {
            opaque,
            vbucket,
            cas,
            datatype,
            by_seqno: n[4],
            rev_seqno: n[5],
            flags: n[6] as u32,
            expiration: (n[6] >> 32) as u32,
            lock_time: n[7] as u32,
            nru: (n[7] >> 32) as u8,
            key,
            value,
        }),
        8 => DcpMessage::Deletion(Deletion {
            opaque,
            vbucket,
            cas,
            datatype,
            by_seqno: n[4],
            rev_seqno: n[5],
            delete_time: n[6].is_multiple_of(2).then_some(n[7] as u32),
            key,
            value,
        }),
        9 => DcpMessage::Expiration(Expiration {
            opaque,
            vbucket,
            cas,
            datatype,
            by_seqno: n[4],
            rev_seqno: n[5],
            delete_time: n[6] as u32,
            key,
            value,
        }),
        10 => DcpMessage::SetVbucketState(SetVbucketState {
            opaque,
            vbucket,
            state: VbucketState::from_wire((n[2] % 4) as u8 + 1).unwrap(),
            value,
        }),
        11 => DcpMessage::Noop(DcpNoop { opaque }),
        12 => DcpMessage::BufferAck(BufferAck { opaque, bytes: n[2] as u32 }),
        13 => DcpMessage::Control(DcpControl { opaque, key, value }),
        14 => DcpMessage::SystemEvent(SystemEvent {
            opaque,
            vbucket,
            seqno: n[4],
            event: n[5] as u32,
            version: n[6] as u8,
            key,
            value,
        }),
        15 => DcpMessage::Prepare(Prepare {
            opaque,
            vbucket,
            cas,
            datatype,
            by_seqno: n[4],
            rev_seqno: n[5],
            flags: n[6] as u32,
            expiration: (n[6] >> 32) as u32,
            lock_time: n[7] as u32,
            nru: (n[7] >> 32) as u8,
            deleted: n[7] % 2 == 1,
            level,
            key,
            value,
        }),
        16 => DcpMessage::SeqnoAcknowledged(SeqnoAcknowledged { opaque, vbucket, prepared_seqno: n[4] }),
        17 => DcpMessage::Commit(Commit { opaque, vbucket, prepared_seqno: n[4], commit_seqno: n[5], key }),
        18 => DcpMessage::Abort(Abort { opaque, vbucket, prepared_seqno: n[4], abort_seqno: n[5], key }),
        19 => DcpMessage::SeqnoAdvanced(SeqnoAdvanced { opaque, vbucket, seqno: n[4] }),
        _ => DcpMessage::OsoSnapshot(OsoSnapshot { opaque, vbucket, flags: n[2] as u32 }),
    }
}

proptest! {
    /// Every DCP message encodes to one whole request frame that decodes back to itself.
    #[test]
    fn every_message_round_trips(
        kind in 0u8..21,
        n in any::<[u64; 8]>(),
        key in proptest::collection::vec(any::<u8>(), 1..250),
        value in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let msg = sample(kind, &n, &key, &value);
        let mut out = Vec::new();
        msg.encode(&mut out);
        let (req, used) = decode_request(&out, 1 << 20).unwrap().unwrap();
        prop_assert_eq!(used, out.len());
        prop_assert!(Opcode::from_byte(req.opcode).is_some_and(|o| o.is_dcp()));
        let got = DcpMessage::decode(&req);
        // Messages that forbid a key or a value drop the sampled ones, so compare what was encoded.
        prop_assert_eq!(got, Ok(msg));
    }

    /// Decoding arbitrary sections under any opcode never panics.
    #[test]
    fn decoding_arbitrary_requests_never_panics(
        opcode in 0x4fu8..0x67,
        extras in proptest::collection::vec(any::<u8>(), 0..60),
        key in proptest::collection::vec(any::<u8>(), 0..20),
        value in proptest::collection::vec(any::<u8>(), 0..80),
        datatype in any::<u8>(),
    ) {
        let req = crate::Request {
            magic: crate::Magic::ClientRequest,
            opcode,
            datatype,
            vbucket: 1,
            opaque: 2,
            cas: 3,
            framing: &[],
            extras: &extras,
            key: &key,
            value: &value,
        };
        let _ = DcpMessage::decode(&req);
        let _ = StreamReqResponse::decode(u16::from(datatype), &value);
    }

    /// Arbitrary bytes through the frame decoder and then the DCP decoder never panic.
    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(Some((req, _))) = decode_request(&bytes, 1 << 20) {
            let _ = DcpMessage::decode(&req);
        }
    }
}

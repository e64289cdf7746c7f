//! Property tests of the stream invariants (DESIGN §5): whatever snapshots the driver pushes and however flow
//! control interleaves, a producer never sends a seqno at or below one it sent, never an item outside its marker
//! or the requested range, and its consumer accepts everything it sends.

use crate::support::*;
use proptest::prelude::*;
use settee_dcp::{ConsumerStream, FlowControl, ProducerStream, Snapshot, SnapshotKind, StreamOptions};
use settee_mcbp::dcp::{DcpMessage, StreamReqResponse};
use settee_types::{DurabilityLevel, FailoverLog, Seqno, StreamStart, VbId};

/// A snapshot from random parts: a range, which seqnos in it carry items, and what kind of items.
fn snapshot(start: Seqno, len: Seqno, picks: &[(bool, u8)], disk: bool) -> Snapshot {
    let end = start + len;
    let items = (start..=end)
        .zip(picks.iter().cycle())
        .filter(|(_, (keep, _))| *keep)
        .map(|(seqno, (_, kind))| match kind % 4 {
            0 => mutation("m", seqno),
            1 => deletion("d", seqno),
            2 => prepare("p", seqno, DurabilityLevel::Majority),
            _ => abort("p", seqno.saturating_sub(1), seqno),
        })
        .collect();
    let kind = if disk { SnapshotKind::Disk } else { SnapshotKind::Memory };
    Snapshot { start, end, kind, high_completed_seqno: 0, items }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Random snapshot sequences (overlapping, stale, gapped) into a stream with a random range, drained under a
    /// small flow-control window with random acknowledgements: the emitted frames keep every invariant, and a
    /// consumer fed them accepts all of them.
    #[test]
    fn producer_never_emits_a_non_increasing_seqno(
        start in 0u64..20,
        end_offset in 1u64..80,
        sync_writes in any::<bool>(),
        seqno_advanced in any::<bool>(),
        shots in proptest::collection::vec((0u64..60, 0u64..12, any::<bool>()), 1..12),
        picks in proptest::collection::vec((any::<bool>(), any::<u8>()), 1..16),
        acks in proptest::collection::vec(0u32..400, 1..50),
    ) {
        let end = start + end_offset;
        let options = StreamOptions { sync_writes, seqno_advanced, ..StreamOptions::default() };
        let mut stream = open_stream(start, end, 200, options);
        let mut flow = FlowControl::new();
        flow.set_buffer_size(256);
        let mut frames = Vec::new();
        let mut acks = acks.iter().cycle();
        for (snap_start, len, disk) in shots {
            let _ = stream.push_snapshot(snapshot(snap_start, len, &picks, disk));
            for _ in 0..4 {
                while let Some(frame) = stream.poll_frame(&mut flow) {
                    frames.push(frame);
                }
                flow.acked(*acks.next().unwrap());
            }
        }
        flow.set_buffer_size(0);
        frames.extend(std::iter::from_fn(|| stream.poll_frame(&mut flow)));

        let log = FailoverLog::new(0xA, 0);
        let mut consumer = ConsumerStream::new(VbId(VB), OPAQUE, &log, start, (start, start));
        let mut body = Vec::new();
        log.encode(&mut body);
        consumer.on_stream_response(0, &body).unwrap();

        let mut last = start;
        let mut marker: Option<(Seqno, Seqno)> = None;
        for (i, frame) in frames.iter().enumerate() {
            match describe(frame) {
                ("MARKER", s, e) => {
                    prop_assert!(s <= e && e > marker.map_or(start, |m| m.1) && e <= end);
                    marker = Some((s, e));
                }
                ("ITEM", seqno, _) | ("ADVANCED", seqno, _) => {
                    let (s, e) = marker.expect("items follow a marker");
                    prop_assert!(seqno > last, "seqno {} after {}", seqno, last);
                    prop_assert!(s <= seqno && seqno <= e && seqno <= end);
                    last = seqno;
                }
                ("END", _, _) => prop_assert_eq!(i, frames.len() - 1),
                other => prop_assert!(false, "unexpected {:?}", other),
            }
            if !sync_writes {
                let msg = DcpMessage::decode(&request(frame)).unwrap();
                prop_assert!(!matches!(msg, DcpMessage::Prepare(_) | DcpMessage::Abort(_)));
            }
            prop_assert!(consumer.on_message(&request(frame)).is_ok(), "consumer refused frame {}", i);
        }
    }

    /// Whatever the request and the failover log, a rollback point never exceeds the start or the high seqno,
    /// and a producer answers every request without panicking.
    #[test]
    fn rollback_point_is_bounded(
        branches in proptest::collection::vec((1u64..6, 0u64..1_000_000), 0..30),
        uuid in 0u64..7,
        start in any::<u64>(),
        snap in (any::<u64>(), any::<u64>()),
        high in any::<u64>(),
        purge in any::<u64>(),
        flags in 0u8..4,
    ) {
        let mut log = FailoverLog::new(1, 0);
        for (branch_uuid, seqno) in branches {
            log.push(branch_uuid, seqno);
        }
        let req = StreamStart {
            strict_uuid: flags & 1 != 0,
            ignore_purged_tombstones: flags & 2 != 0,
            ..StreamStart::new(uuid, start, snap.0, snap.1)
        };
        if let Some(to) = log.rollback_point(req, high, purge) {
            prop_assert!(to <= start && to <= high);
        }
        let mut wire = stream_req(uuid, start, u64::MAX, snap);
        wire.flags.0 = u32::from(flags) << 5;
        let mut out = Vec::new();
        let result = producer(Default::default()).stream_request(&wire, &log, high, purge, &mut out);
        let (resp, _) = settee_mcbp::decode_response(&out, 1 << 20).unwrap().unwrap();
        let reply = StreamReqResponse::decode(resp.status, resp.value).unwrap();
        prop_assert_eq!(result.is_ok(), matches!(reply, StreamReqResponse::Accepted(_)));
        let _ = ProducerStream::open(&wire, &log, high, purge, StreamOptions::default());
    }
}

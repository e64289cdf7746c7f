//! Connection-wide flow control between producer and consumer.

use std::time::Duration;

use crate::support::*;
use settee_dcp::{ConsumerFlowControl, Snapshot};
use settee_mcbp::dcp::DcpOpenFlags;
use settee_types::{FailoverLog, Status, VbId};

/// With a small buffer the connection stops sending once the window is full, and a BUFFER_ACK lets it resume; a
/// consumer acking at half its buffer keeps the stream flowing to the end.
#[test]
fn flow_control_blocks_then_buffer_ack_resumes() {
    let mut conn = producer(DcpOpenFlags::default());
    assert_eq!(conn.control(b"connection_buffer_size", b"200"), Status::Success);
    let log = FailoverLog::new(0xA, 0);
    conn.stream_request(&stream_req(0, 0, u64::MAX, (0, 0)), &log, 50, 0, &mut Vec::new()).unwrap();
    let items = (1..=20).map(|s| mutation("key", s)).collect();
    conn.push_snapshot(VbId(VB), Snapshot::memory(1, 20, items)).unwrap();

    let mut out = Vec::new();
    let mut sent = 0;
    while conn.poll_into(Duration::ZERO, &mut out).is_some() {
        sent += 1;
    }
    assert!(sent > 1 && sent < 21, "blocked after {sent} frames");
    assert!(conn.flow().unacked_bytes() >= 200);
    assert!(conn.poll_into(Duration::ZERO, &mut out).is_none(), "still blocked");

    conn.buffer_ack(u32::try_from(conn.flow().unacked_bytes()).unwrap());
    assert!(conn.poll_into(Duration::ZERO, &mut out).is_some(), "resumed after the ack");

    // A consumer that acknowledges at half its buffer gets everything.
    let mut consumer = ConsumerFlowControl::new(200);
    consumer.consumed(out.len());
    let mut total = sent + 1;
    loop {
        if let Some(ack) = consumer.take_ack(0) {
            conn.buffer_ack(ack.bytes);
        }
        out.clear();
        match conn.poll_into(Duration::ZERO, &mut out) {
            Some(len) => {
                consumer.consumed(len);
                total += 1;
            }
            None if conn.flow().can_send() => break,
            None => panic!("stalled with {} unacked", conn.flow().unacked_bytes()),
        }
    }
    assert_eq!(total, 21, "a marker and 20 mutations");
}

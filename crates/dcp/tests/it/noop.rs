//! NOOPs and dead-connection detection, with time passed in.

use std::time::Duration;

use crate::support::*;
use settee_mcbp::dcp::{DcpMessage, DcpOpenFlags};
use settee_types::Status;

const SEC: Duration = Duration::from_secs(1);

/// With noops enabled at a 20 s interval: nothing before 20 s, a NOOP at 20 s, none while it is unanswered, the
/// next one 20 s after the last was sent once the reply arrived.
#[test]
fn noop_is_sent_each_interval_once_answered() {
    let mut conn = producer(DcpOpenFlags::default());
    let mut out = Vec::new();
    assert_eq!(conn.poll_into(100 * SEC, &mut out), None, "noops are off by default");
    let mut conn = producer(DcpOpenFlags::default());
    assert_eq!(conn.control(b"enable_noop", b"true"), Status::Success);
    assert_eq!(conn.control(b"set_noop_interval", b"20"), Status::Success);
    assert_eq!(conn.poll_into(19 * SEC, &mut out), None);
    assert!(conn.poll_into(20 * SEC, &mut out).is_some());
    let opaque = match DcpMessage::decode(&request(&out)).unwrap() {
        DcpMessage::Noop(n) => n.opaque,
        other => panic!("{other:?}"),
    };
    out.clear();
    assert_eq!(conn.poll_into(45 * SEC, &mut out), None, "waiting for the reply");
    conn.received(46 * SEC);
    conn.noop_response(opaque + 1);
    assert_eq!(conn.poll_into(46 * SEC, &mut out), None, "a reply with another opaque is not ours");
    conn.noop_response(opaque);
    assert!(conn.poll_into(46 * SEC, &mut out).is_some(), "overdue, so sent at once");
    assert_eq!(conn.flow().unacked_bytes(), 0, "noops are outside flow control");
}

/// With noops enabled, a consumer that sends nothing for longer than the idle timeout is dead; any traffic
/// resets the timer, and without noops nothing is ever declared dead.
#[test]
fn silent_consumer_is_dead_after_the_idle_timeout() {
    let mut conn = producer(DcpOpenFlags::default());
    conn.set_idle_timeout(40 * SEC);
    assert!(!conn.is_dead(1000 * SEC), "no liveness checks without noops");
    conn.control(b"enable_noop", b"true");
    assert!(!conn.is_dead(40 * SEC));
    assert!(conn.is_dead(41 * SEC));
    conn.received(30 * SEC);
    assert!(!conn.is_dead(70 * SEC));
    assert!(conn.is_dead(71 * SEC));
}

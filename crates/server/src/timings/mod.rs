//! Per-command latency on every node: histograms by bucket and opcode recorded by the KV connection loop (from a
//! frame decoded to its reply queued; a durable write's reply is queued when its level is met), read by
//! GET_CMD_TIMER (`kv::handlers::timings`, kv_engine's JSON), `GET /metrics` (`kv_cmd_duration_seconds`,
//! [`prometheus`]) and `settee timings` ([`cli`]); operations over the threshold go to the slow-operation log
//! ([`slow`]).

pub mod cli;
pub mod histogram;
pub mod prometheus;
pub mod recorder;
pub mod slow;
pub mod summary;

use std::net::SocketAddr;
use std::time::Duration;

use settee_mcbp::Request;

pub use histogram::Snapshot;
pub use recorder::Timings;
pub use slow::SlowOps;

use crate::node::{BucketHandle, Node};

/// The node's timings that belong to no bucket, and its slow-operation log.
#[derive(Debug)]
pub struct NodeTimings {
    /// Commands run while the connection had no bucket selected (HELLO, SASL, SELECT_BUCKET, ...): kv_engine's
    /// "no bucket" timings.
    pub no_bucket: Timings,
    pub slow: SlowOps,
}

impl NodeTimings {
    pub fn new(slow_threshold_ms: u64) -> NodeTimings {
        NodeTimings { no_bucket: Timings::new(), slow: SlowOps::new(slow_threshold_ms) }
    }
}

/// SASL replies wait on purpose (a failed attempt is answered late, a PLAIN password is derived): their time says
/// nothing about the node's health, so they are timed but never logged as slow.
fn deliberately_slow(opcode: u8) -> bool {
    opcode == settee_mcbp::Opcode::SaslAuth as u8 || opcode == settee_mcbp::Opcode::SaslStep as u8
}

/// The name a timed opcode is shown under (kv_engine's, as `mctimings` prints it), or its hex value.
pub(crate) fn opcode_label(opcode: u8) -> String {
    settee_mcbp::Opcode::from_byte(opcode).map_or_else(|| format!("0x{opcode:02x}"), |o| o.name().to_owned())
}

/// The data requests (key-addressed reads and writes, whatever they answered) the node's buckets have answered since
/// it started, read from their timings: a gracefully failed-over node drains until this stops growing.
pub fn data_requests(node: &Node) -> u64 {
    let data = |op: u8| settee_mcbp::Opcode::from_byte(op).is_some_and(|o| o.flags().collection_key);
    node.buckets().iter().map(|b| b.timings.count_where(data)).fold(0, u64::saturating_add)
}

/// One operation being timed, from its frame decoded.
#[derive(Clone, Copy, Debug)]
pub struct OpTimer {
    started: Duration,
    opcode: u8,
    vbucket: u16,
}

impl OpTimer {
    /// Starts timing `req` at `now` (the node clock's monotonic time) when the caller knows it, else reads the
    /// clock: the connection loop passes the time the previous request of a batch was answered at, since the next
    /// one starts right then, which saves one of the two clock reads (about 27 ns each on the 2-vCPU VM).
    pub fn start(node: &Node, req: &Request<'_>, now: Option<Duration>) -> OpTimer {
        let started = now.unwrap_or_else(|| node.clock.monotonic());
        OpTimer { started, opcode: req.opcode, vbucket: req.vbucket }
    }

    /// Records the operation in `bucket`'s timings (the no-bucket ones without one) now that its reply is
    /// queued, and logs it when it was slow. Returns the time it read.
    pub fn finish(self, node: &Node, bucket: Option<&BucketHandle>, peer: SocketAddr, agent: &str) -> Duration {
        let now = node.clock.monotonic();
        let elapsed = now.saturating_sub(self.started);
        match bucket {
            Some(b) => b.timings.record(self.opcode, elapsed),
            None => node.timings.no_bucket.record(self.opcode, elapsed),
        }
        let slow = &node.timings.slow;
        if slow.is_slow(elapsed) && !deliberately_slow(self.opcode) {
            let name = bucket.map(|b| b.name()).unwrap_or_default();
            let op = slow::SlowOp { opcode: self.opcode, vbucket: self.vbucket, elapsed, peer, agent, bucket: &name };
            slow.report(&op, now);
        }
        now
    }
}

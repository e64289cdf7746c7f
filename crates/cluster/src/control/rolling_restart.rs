//! Rolling restart (and upgrade): node by node, fail the node over gracefully (its replicas take over its actives
//! without losing a write), restart it, wait for its warmup, mark it for delta recovery and rebalance it back in;
//! the next node only once the cluster is whole again. Clients see their requests move to other nodes and back,
//! never an error, as long as every bucket has a replica.
//!
//! Sans-IO: the `settee cluster rolling-restart` command reads the cluster over REST into a [`ClusterView`], asks
//! [`RollingRestart::step`] what to do, does it and asks again. A run that stopped (a timeout, a failed rebalance,
//! the command killed) resumes by running it again from the node it stopped at: a node found failed over already
//! is restarted without a second failover.

use std::time::Duration;

/// One node as the cluster (and, for its own uptime and warmup, the node itself) reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    /// ns_server's `otpNode`, which failover, recovery and rebalance name nodes by.
    pub otp: String,
    /// `host:port` of its management port.
    pub addr: String,
    /// `active`, `inactiveFailed`, `inactiveAdded`.
    pub membership: String,
    /// `healthy`, `warmup` (a bucket still loading) or `unhealthy`.
    pub status: String,
    /// When the node's process started, in seconds on the command's clock (the time read less the uptime the
    /// node answers itself); None when it does not answer.
    pub started_secs: Option<u64>,
}

/// What the command read before asking for the next step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    pub nodes: Vec<NodeView>,
    /// A rebalance (or graceful failover) is running.
    pub rebalance_running: bool,
    /// Why the rebalance the command started last failed, once it is not running.
    pub rebalance_error: Option<String>,
}

/// What the command does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    GracefulFailover {
        otp: String,
    },
    /// Restart the node's process (with the new binary for an upgrade).
    Restart {
        addr: String,
    },
    DeltaRecovery {
        otp: String,
    },
    /// Rebalance with every node of the cluster kept.
    Rebalance {
        known: Vec<String>,
    },
    /// Nothing yet: read the cluster again in a moment.
    Wait,
    /// Every node was restarted and the cluster is whole.
    Done,
    Failed(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the whole cluster to be active, healthy and not rebalancing before touching the next node.
    Ready,
    FailingOver,
    /// Failed over; clients are given `drain` to move their connections off the node before it stops.
    Draining,
    /// Restart asked at `asked`; waiting for a process started since that has warmed up.
    Restarting {
        asked: Duration,
    },
    /// Marked for delta recovery; the rebalance comes next.
    Recovering,
    Rebalancing,
}

impl Phase {
    fn describe(self) -> &'static str {
        match self {
            Phase::Ready => "waiting for the cluster to be whole",
            Phase::FailingOver => "graceful failover",
            Phase::Draining => "draining",
            Phase::Restarting { .. } => "restart and warmup",
            Phase::Recovering | Phase::Rebalancing => "delta recovery rebalance",
        }
    }
}

pub struct RollingRestart {
    /// Management addresses, in restart order.
    order: Vec<String>,
    next: usize,
    phase: Phase,
    since: Duration,
    phase_timeout: Duration,
    drain: Duration,
}

impl RollingRestart {
    /// Restarts the nodes of `order` (management `host:port`s) in that order; each phase of each node may last
    /// `phase_timeout`; a failed-over node is restarted `drain` after its failover, so that clients, told of the
    /// new map, have closed their connections to it (a request in flight on a connection the restart closes
    /// would fail).
    pub fn new(order: Vec<String>, phase_timeout: Duration, drain: Duration, now: Duration) -> RollingRestart {
        RollingRestart { order, next: 0, phase: Phase::Ready, since: now, phase_timeout, drain }
    }

    /// The node being restarted, if any is left.
    pub fn current(&self) -> Option<&str> {
        self.order.get(self.next).map(String::as_str)
    }

    /// How many nodes are done.
    pub fn done(&self) -> usize {
        self.next
    }

    /// The next thing to do, given the cluster as just read at `now`. An action returned is taken as done once
    /// the command has carried it out (it stops on an error instead of asking again).
    pub fn step(&mut self, view: &ClusterView, now: Duration) -> Step {
        let Some(addr) = self.current().map(str::to_owned) else { return Step::Done };
        let Some(target) = view.nodes.iter().find(|n| n.addr == addr) else {
            return Step::Failed(format!("node {addr} is not in the cluster"));
        };
        if now.saturating_sub(self.since) > self.phase_timeout {
            let what = self.phase.describe();
            return Step::Failed(format!("node {addr}: {what} did not finish within {:?}", self.phase_timeout));
        }
        match self.phase {
            Phase::Ready if target.membership == "inactiveFailed" && !view.rebalance_running => {
                // Resuming a run that stopped after this node's failover.
                self.enter(Phase::Restarting { asked: now }, now);
                Step::Restart { addr }
            }
            Phase::Ready if whole(view) => {
                self.enter(Phase::FailingOver, now);
                Step::GracefulFailover { otp: target.otp.clone() }
            }
            Phase::FailingOver if target.membership == "inactiveFailed" && !view.rebalance_running => {
                self.enter(Phase::Draining, now);
                Step::Wait
            }
            Phase::Draining if now.saturating_sub(self.since) >= self.drain => {
                self.enter(Phase::Restarting { asked: now }, now);
                Step::Restart { addr }
            }
            Phase::Restarting { asked } => {
                // Uptimes are whole seconds: a process started within the second before the restart was asked
                // for counts as the new one (the old one has run at least through its failover).
                let restarted = target.started_secs.is_some_and(|s| s + 1 >= asked.as_secs());
                if restarted && target.status == "healthy" {
                    self.enter(Phase::Recovering, now);
                    return Step::DeltaRecovery { otp: target.otp.clone() };
                }
                Step::Wait
            }
            Phase::Recovering => {
                self.phase = Phase::Rebalancing;
                Step::Rebalance { known: view.nodes.iter().map(|n| n.otp.clone()).collect() }
            }
            Phase::Rebalancing if view.rebalance_running => Step::Wait,
            Phase::Rebalancing => {
                if let Some(e) = &view.rebalance_error {
                    return Step::Failed(format!("node {addr}: the rebalance failed: {e}"));
                }
                if target.membership != "active" || target.status != "healthy" {
                    return Step::Wait;
                }
                self.next += 1;
                self.enter(Phase::Ready, now);
                self.step(view, now)
            }
            _ => Step::Wait,
        }
    }

    fn enter(&mut self, phase: Phase, now: Duration) {
        self.phase = phase;
        self.since = now;
    }
}

/// Every node active and healthy, and no rebalance running.
fn whole(view: &ClusterView) -> bool {
    !view.rebalance_running && view.nodes.iter().all(|n| n.membership == "active" && n.status == "healthy")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: u8, membership: &str, status: &str, started: Option<u64>) -> NodeView {
        NodeView {
            otp: format!("ns_1@127.0.0.{i}"),
            addr: format!("127.0.0.{i}:8091"),
            membership: membership.into(),
            status: status.into(),
            started_secs: started,
        }
    }

    fn view(nodes: Vec<NodeView>, running: bool) -> ClusterView {
        ClusterView { nodes, rebalance_running: running, rebalance_error: None }
    }

    fn whole_cluster(started: u64) -> ClusterView {
        view((1..=3).map(|i| node(i, "active", "healthy", Some(started))).collect(), false)
    }

    const S: fn(u64) -> Duration = Duration::from_secs;

    /// Proves one node goes through failover, restart, warmup, delta recovery and rebalance, in that order, each
    /// step only once the cluster shows the previous one done, and the next node starts only once it is whole.
    #[test]
    fn a_node_is_failed_over_restarted_recovered_and_rebalanced_in_order() {
        let order = vec!["127.0.0.1:8091".to_owned(), "127.0.0.2:8091".to_owned()];
        let mut r = RollingRestart::new(order, S(600), S(5), S(0));
        let mut v = whole_cluster(0);
        assert_eq!(r.step(&v, S(1)), Step::GracefulFailover { otp: "ns_1@127.0.0.1".into() });
        assert_eq!(r.step(&v, S(2)), Step::Wait, "not failed over yet");
        v.nodes[0].membership = "inactiveFailed".into();
        assert_eq!(r.step(&v, S(25)), Step::Wait, "failed over: clients move off");
        assert_eq!(r.step(&v, S(29)), Step::Wait, "still draining");
        assert_eq!(r.step(&v, S(30)), Step::Restart { addr: "127.0.0.1:8091".into() });
        assert_eq!(r.step(&v, S(31)), Step::Wait, "the old process still answers");
        v.nodes[0].started_secs = None;
        assert_eq!(r.step(&v, S(32)), Step::Wait, "down");
        v.nodes[0].started_secs = Some(33);
        v.nodes[0].status = "warmup".into();
        assert_eq!(r.step(&v, S(40)), Step::Wait, "warming up");
        v.nodes[0].status = "healthy".into();
        assert_eq!(r.step(&v, S(50)), Step::DeltaRecovery { otp: "ns_1@127.0.0.1".into() });
        let known: Vec<String> = v.nodes.iter().map(|n| n.otp.clone()).collect();
        assert_eq!(r.step(&v, S(51)), Step::Rebalance { known });
        v.rebalance_running = true;
        assert_eq!(r.step(&v, S(52)), Step::Wait);
        v.rebalance_running = false;
        v.nodes[0].membership = "active".into();
        assert_eq!(r.step(&v, S(53)), Step::GracefulFailover { otp: "ns_1@127.0.0.2".into() });
        assert_eq!(r.done(), 1);
    }

    /// A node that does not come back in time, a failed rebalance and an unknown node stop the run with why.
    #[test]
    fn timeouts_failed_rebalances_and_unknown_nodes_stop_the_run() {
        let mut r = RollingRestart::new(vec!["127.0.0.1:8091".into()], S(60), S(0), S(0));
        let mut v = whole_cluster(0);
        r.step(&v, S(1));
        v.nodes[0].membership = "inactiveFailed".into();
        assert_eq!(r.step(&v, S(2)), Step::Wait, "draining (no time given to it here)");
        assert_eq!(r.step(&v, S(2)), Step::Restart { addr: "127.0.0.1:8091".into() });
        assert!(matches!(r.step(&v, S(63)), Step::Failed(e) if e.contains("restart and warmup")));

        let mut r = RollingRestart::new(vec!["127.0.0.1:8091".into()], S(60), S(0), S(0));
        let mut v = whole_cluster(0);
        r.step(&v, S(1));
        v.nodes[0].membership = "inactiveFailed".into();
        r.step(&v, S(2));
        assert_eq!(r.step(&v, S(3)), Step::Restart { addr: "127.0.0.1:8091".into() });
        v.nodes[0].started_secs = Some(3);
        assert_eq!(r.step(&v, S(4)), Step::DeltaRecovery { otp: "ns_1@127.0.0.1".into() });
        assert!(matches!(r.step(&v, S(4)), Step::Rebalance { .. }));
        v.rebalance_error = Some("stopped".into());
        assert!(matches!(r.step(&v, S(5)), Step::Failed(e) if e.contains("stopped")));

        let mut r = RollingRestart::new(vec!["127.0.0.9:8091".into()], S(60), S(0), S(0));
        assert!(matches!(r.step(&whole_cluster(1), S(1)), Step::Failed(e) if e.contains("not in the cluster")));
    }

    /// A run resumed after a node's failover restarts it without failing it over again; a cluster that is not
    /// whole (another node down) makes the run wait instead of taking a second node out.
    #[test]
    fn a_resumed_run_restarts_a_failed_over_node_and_a_broken_cluster_waits() {
        let mut r = RollingRestart::new(vec!["127.0.0.1:8091".into()], S(60), S(0), S(0));
        let mut v = whole_cluster(0);
        v.nodes[0].membership = "inactiveFailed".into();
        assert_eq!(r.step(&v, S(1)), Step::Restart { addr: "127.0.0.1:8091".into() });

        let mut r = RollingRestart::new(vec!["127.0.0.1:8091".into()], S(60), S(0), S(0));
        let mut v = whole_cluster(0);
        v.nodes[2].status = "unhealthy".into();
        assert_eq!(r.step(&v, S(1)), Step::Wait);
        assert_eq!(r.step(&whole_cluster(0), S(2)), Step::GracefulFailover { otp: "ns_1@127.0.0.1".into() });
        let mut done = RollingRestart::new(vec![], S(60), S(0), S(0));
        assert_eq!(done.step(&whole_cluster(1), S(1)), Step::Done);
    }
}

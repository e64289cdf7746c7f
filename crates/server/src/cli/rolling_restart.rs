//! `settee cluster rolling-restart`: the driver of `settee_cluster::control::rolling_restart` over the REST API.
//! It reads the cluster (`/pools/default` of a node other than the one being restarted, the restarted node's own
//! answer for its uptime and warmup, `/pools/default/tasks` of the node running the rebalance), asks the state
//! machine for the next step and carries it out, printing each step.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde_json::Value;
use settee_cluster::control::rolling_restart::{ClusterView, NodeView, RollingRestart, Step};
use settee_cluster::peer;

use super::ClusterAccess;
use crate::cluster::rest_client;

/// How long one REST call may take (a graceful failover answers once it is done).
const CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// How long reading one node's state may take before it counts as down.
const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause between two readings while waiting.
const POLL_EVERY: Duration = Duration::from_millis(500);

#[derive(Args, Clone, Debug)]
pub struct RollingRestartArgs {
    #[command(flatten)]
    pub access: ClusterAccess,
    /// Upgrade: the executable each node runs after its restart, a path on the nodes' machines in the directory of
    /// the running binary. Without it each node runs the path it started from again.
    #[arg(long)]
    pub binary: Option<String>,
    /// Start at this node (`host:port`), after an earlier run stopped there; the nodes before it are skipped.
    #[arg(long)]
    pub from: Option<String>,
    /// Longest each step of each node may take (failover, restart and warmup, rebalance), in seconds.
    #[arg(long, default_value_t = 600)]
    pub step_timeout_secs: u64,
    /// Seconds between a node's failover and its restart. The failover itself ends once the node's clients have
    /// stopped sending to it (its drain); this adds a margin.
    #[arg(long, default_value_t = 1)]
    pub drain_secs: u64,
}

pub async fn run(args: RollingRestartArgs) -> anyhow::Result<()> {
    let access = &args.access;
    let started = Instant::now();
    // Unix time: the nodes' start times (read as the time less their uptime) are on the same clock, whenever
    // they started.
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let first = read_view(access, &[access.seed()], None, now().as_secs()).await?;
    let members: Vec<String> = first.nodes.iter().map(|n| n.addr.clone()).collect();
    let mut order = members.clone();
    if let Some(from) = &args.from {
        let at = order.iter().position(|a| a == from).with_context(|| format!("{from} is not in the cluster"))?;
        order.drain(..at);
    }
    let (timeout, drain) = (Duration::from_secs(args.step_timeout_secs), Duration::from_secs(args.drain_secs));
    let mut machine = RollingRestart::new(order.clone(), timeout, drain, now());
    let mut orchestrator: Option<String> = None;
    let mut step_began = Instant::now();
    let mut node_began = Instant::now();
    println!("rolling restart of {} nodes: {}", order.len(), order.join(", "));
    print_versions(access, &access.seed(), "before").await;
    loop {
        let view = read_view(access, &members, machine.current(), now().as_secs()).await?;
        let view = with_rebalance(access, view, orchestrator.as_deref()).await;
        let step = machine.step(&view, now());
        let target = machine.current().unwrap_or_default().to_owned();
        let other = members.iter().find(|a| **a != target).cloned().unwrap_or_else(|| access.seed());
        let done = |what: &str, began: &mut Instant| {
            let at = started.elapsed().as_secs_f64();
            println!("[{at:6.1}s]   {target}: {what} ({:.1} s)", began.elapsed().as_secs_f64());
            *began = Instant::now();
        };
        match step {
            Step::Wait => tokio::time::sleep(POLL_EVERY).await,
            Step::Done => {
                done("rebalanced back in", &mut step_began);
                println!("done: {} nodes restarted in {:.1} s", machine.done(), started.elapsed().as_secs_f64());
                print_versions(access, &other, "after").await;
                return Ok(());
            }
            Step::Failed(why) => anyhow::bail!("rolling restart stopped: {why} (run again with --from {target})"),
            Step::GracefulFailover { otp } => {
                if machine.done() > 0 {
                    println!(
                        "  previous node back in the cluster ({:.1} s in all)",
                        node_began.elapsed().as_secs_f64()
                    );
                }
                node_began = Instant::now();
                step_began = Instant::now();
                println!("node {target}:");
                post(access, &other, "/controller/startGracefulFailover", &[("otpNode", &otp)]).await?;
                done("failed over gracefully", &mut step_began);
            }
            Step::Restart { addr } => {
                let binary = args.binary.clone().unwrap_or_default();
                let form: Vec<(&str, &str)> = if binary.is_empty() { vec![] } else { vec![("binary", &binary)] };
                post(access, &addr, "/settee/node/restart", &form).await?;
                done("restart asked", &mut step_began);
            }
            Step::DeltaRecovery { otp } => {
                done("back and warmed up", &mut step_began);
                post(access, &other, "/controller/setRecoveryType", &[("otpNode", &otp), ("recoveryType", "delta")])
                    .await?;
            }
            Step::Rebalance { known } => {
                let known = known.join(",");
                post(access, &other, "/controller/rebalance", &[("knownNodes", &known), ("ejectedNodes", "")]).await?;
                orchestrator = Some(other.clone());
                println!("[{:6.1}s]   {target}: delta recovery rebalance started", started.elapsed().as_secs_f64());
                step_began = Instant::now();
            }
        }
    }
}

/// Prints the cluster's metadata version as `addr` sees it (`GET /settee/cluster/versions`), the figure that tells
/// whether an upgrade's newer command forms are in use; nothing from a node too old to answer it.
async fn print_versions(access: &ClusterAccess, addr: &str, when: &str) {
    let Ok(v) = get(access, addr, "/settee/cluster/versions").await else { return };
    let form = |name: &str| v["commandForms"][name].as_str().unwrap_or("?").to_owned();
    println!(
        "cluster metadata version {when}: {} (graceful failover: {}, add into a group: {})",
        v["clusterMetaVersion"],
        form("gracefulFailover"),
        form("addNodeInGroup")
    );
}

async fn post(access: &ClusterAccess, addr: &str, path: &str, form: &[(&str, &str)]) -> anyhow::Result<()> {
    let creds = (access.username.as_str(), access.password.as_str());
    let reply = rest_client::call(addr, None, None, "POST", path, Some(creds), &peer::form(form), CALL_TIMEOUT)
        .await
        .with_context(|| format!("POST {path} to {addr}"))?;
    if !(200..300).contains(&reply.status) {
        anyhow::bail!("POST {path} to {addr}: {} {}", reply.status, reply.body.trim());
    }
    Ok(())
}

async fn get(access: &ClusterAccess, addr: &str, path: &str) -> anyhow::Result<Value> {
    Ok(serde_json::from_slice(&access.get_bytes(addr, path, READ_TIMEOUT).await?)?)
}

/// The cluster as the first of `members` other than `target` that answers sees it, with `target`'s uptime and
/// status from its own answer (down: no start time, `unhealthy`). Start times are `now_secs` less the uptimes.
async fn read_view(
    access: &ClusterAccess,
    members: &[String],
    target: Option<&str>,
    now_secs: u64,
) -> anyhow::Result<ClusterView> {
    let mut pool = None;
    for addr in members.iter().filter(|a| Some(a.as_str()) != target) {
        if let Ok(p) = get(access, addr, "/pools/default").await {
            pool = Some(p);
            break;
        }
    }
    let pool = match pool {
        Some(p) => p,
        None => get(access, &access.seed(), "/pools/default").await.context("no node of the cluster answers")?,
    };
    let started = |n: &Value| uptime(n).map(|u| now_secs.saturating_sub(u));
    let mut nodes: Vec<NodeView> = pool["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| NodeView { started_secs: started(n), ..node_view(n) })
        .collect();
    if let Some(target) = target {
        let own = get(access, target, "/pools/default").await.ok();
        let me = own.as_ref().and_then(|p| p["nodes"].as_array()?.iter().find(|n| n["thisNode"] == true).cloned());
        if let Some(n) = nodes.iter_mut().find(|n| n.addr == target) {
            match me {
                Some(me) => {
                    n.started_secs = started(&me);
                    if me["status"] == "warmup" {
                        n.status = "warmup".into();
                    }
                }
                None => {
                    n.started_secs = None;
                    n.status = "unhealthy".into();
                }
            }
        }
    }
    Ok(ClusterView { nodes, rebalance_running: false, rebalance_error: None })
}

/// Adds the rebalance status of `orchestrator` (the node the command asked to rebalance; none yet: nothing runs).
async fn with_rebalance(access: &ClusterAccess, mut view: ClusterView, orchestrator: Option<&str>) -> ClusterView {
    let Some(addr) = orchestrator else { return view };
    match get(access, addr, "/pools/default/tasks").await {
        Ok(tasks) => {
            let task = tasks.as_array().and_then(|t| t.iter().find(|t| t["type"] == "rebalance")).cloned();
            let task = task.unwrap_or(Value::Null);
            view.rebalance_running = task["status"] == "running";
            if !view.rebalance_running {
                view.rebalance_error = task["errorMessage"].as_str().map(str::to_owned);
            }
        }
        // The orchestrator not answering: keep waiting (the step timeout ends it).
        Err(_) => view.rebalance_running = true,
    }
    view
}

fn node_view(n: &Value) -> NodeView {
    let text = |k: &str| n[k].as_str().unwrap_or_default().to_owned();
    NodeView {
        otp: text("otpNode"),
        addr: text("hostname"),
        membership: text("clusterMembership"),
        status: text("status"),
        started_secs: None,
    }
}

fn uptime(n: &Value) -> Option<u64> {
    n["uptime"].as_str().and_then(|u| u.parse().ok()).or_else(|| n["uptime"].as_u64())
}

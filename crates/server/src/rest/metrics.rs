//! `GET /metrics`: the node's statistics in Prometheus's text exposition format (version 0.0.4), under Couchbase
//! 7's metric names and labels where Couchbase has one (kv_engine's `stats.def.h` families with the `kv_` prefix,
//! ns_server's `sysproc_*` and `sys_*`), and under `settee_` where it has none.
//!
//! Everything is gathered at scrape time from what the node already counts (the engine's `BucketStats` atomics,
//! the buckets' memory and vBuckets, the connection count, the cluster handle, the per-opcode latency histograms the
//! KV threads record in `crate::timings`, encoded by `timings::prometheus`) and `/proc`: a scrape adds nothing to the
//! KV path. Gathering takes each vBucket's lock briefly (queue sizes, states), so it runs on the blocking pool; the
//! resident ratio is the statistics sampler's latest (`stats_sampler` walks the items a few vBuckets at a time).
//!
//! Couchbase's monotonic families without a `_total` suffix (`kv_ops`, `kv_cmd_lookup`, ...) are typed `gauge` here
//! so that their names stay Couchbase's (the encoder would append `_total` to a counter); `rate()` works on them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::auth::Caller;
use super::error::RestError;
use super::process_stats;
use super::RestState;
use crate::node::{BucketHandle, Node};

/// A metric's labels, in order; `bucket` first on every bucket metric.
type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gauge,
    /// Encoded with `_total` appended to the name.
    Counter,
}

/// One metric family and its samples, gathered before encoding.
#[derive(Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    samples: Vec<(Labels, f64)>,
}

/// The families of one scrape, in the order they were first added.
#[derive(Debug, Default)]
struct Families(Vec<Family>);

impl Families {
    fn add(&mut self, name: &'static str, help: &'static str, kind: Kind, labels: Labels, value: f64) {
        let index = match self.0.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.0.push(Family { name, help, kind, samples: Vec::new() });
                self.0.len() - 1
            }
        };
        self.0[index].samples.push((labels, value));
    }

    fn gauge(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        self.add(name, help, Kind::Gauge, labels, value);
    }

    fn counter(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        self.add(name, help, Kind::Counter, labels, value);
    }
}

/// `GET /metrics`: needs Couchbase's `cluster.stats!read` (the administrators, ro_admin, external_stats_reader).
pub(crate) async fn metrics(caller: Caller, State(state): State<RestState>) -> Result<Response, RestError> {
    caller.require(caller.can_read_stats(), || "cluster.stats!read".to_owned())?;
    let node = state.node.clone();
    let rendered = tokio::task::spawn_blocking(move || render(&node)).await;
    match rendered {
        Ok(Ok(text)) => Ok(([(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)], text).into_response()),
        Ok(Err(e)) => Err(internal(format!("encoding metrics failed: {e}"))),
        Err(e) => Err(internal(format!("gathering metrics failed: {e}"))),
    }
}

fn internal(message: String) -> RestError {
    tracing::warn!(%message, "GET /metrics failed");
    RestError::text(StatusCode::INTERNAL_SERVER_ERROR, &message)
}

/// The node's metrics as Prometheus text.
fn render(node: &Arc<Node>) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(NodeCollector { node: node.clone() }));
    let mut text = String::new();
    prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

/// Gathers the node's families on each scrape.
struct NodeCollector {
    node: Arc<Node>,
}

impl std::fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeCollector")
    }
}

impl Collector for NodeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in gather(&self.node).0 {
            let metric_type = match family.kind {
                Kind::Gauge => MetricType::Gauge,
                Kind::Counter => MetricType::Counter,
            };
            let mut metric = encoder.encode_descriptor(family.name, family.help, None, metric_type)?;
            for (labels, value) in &family.samples {
                let sample = metric.encode_family(labels)?;
                match family.kind {
                    Kind::Gauge => ConstGauge::new(*value).encode(sample)?,
                    Kind::Counter => ConstCounter::new(*value).encode(sample)?,
                }
            }
        }
        crate::timings::prometheus::encode(&self.node, &mut encoder)
    }
}

/// Every family this node reports now.
fn gather(node: &Node) -> Families {
    let mut f = Families::default();
    f.gauge("kv_curr_connections", "Open KV connections", vec![], node.kv_connections.load(Relaxed) as f64);
    let (plain, tls) = node.replication_producers.counts();
    const REPLICATION: &str = "Replication connections other nodes' feeds hold open to this node, by transport";
    f.gauge("settee_dcp_replication_producers", REPLICATION, vec![("transport", "plain".to_owned())], plain as f64);
    f.gauge("settee_dcp_replication_producers", REPLICATION, vec![("transport", "tls".to_owned())], tls as f64);
    const ACCEPTED: &str = "KV connections served since the node started, by the port they came to";
    for (i, transport) in ["plain", "tls"].into_iter().enumerate() {
        let accepted = node.kv_accepted[i].load(Relaxed) as f64;
        f.counter("settee_kv_connections_accepted", ACCEPTED, vec![("transport", transport.to_owned())], accepted);
    }
    f.gauge("kv_uptime_seconds", "Seconds since the node started", vec![], node.started.elapsed().as_secs_f64());
    for bucket in node.buckets() {
        bucket_families(&mut f, node, &bucket);
    }
    process_families(&mut f);
    cluster_families(&mut f, node);
    xdcr_families(&mut f, node);
    let audit = &node.audit.counters;
    f.counter("settee_audit_events_written", "Audit events written to the audit log", vec![], load(&audit.written));
    let help = "Audit events dropped: the writer's queue was full or the file could not be written";
    f.counter("settee_audit_events_dropped", help, vec![], load(&audit.dropped));
    f.counter("settee_audit_rotations", "Audit log files rotated", vec![], load(&audit.rotations));
    f
}

/// The labels `bucket=<name>` plus `extra`.
fn labels(bucket: &str, extra: &[(&'static str, &str)]) -> Labels {
    let mut labels = vec![("bucket", bucket.to_owned())];
    labels.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    labels
}

fn load(counter: &AtomicU64) -> f64 {
    counter.load(Relaxed) as f64
}

/// `kv_ops` by operation and result, as kv_engine labels its memcached counters.
fn op_families(f: &mut Families, name: &str, b: &BucketHandle) {
    const HELP: &str = "KV operations by command and result";
    let s = b.stats();
    let ops: [(&str, Option<&str>, &AtomicU64); 12] = [
        ("get", Some("hit"), &s.get_hits),
        ("get", Some("miss"), &s.get_misses),
        ("set", None, &s.cmd_set),
        ("delete", Some("hit"), &s.delete_hits),
        ("delete", Some("miss"), &s.delete_misses),
        ("incr", Some("hit"), &s.incr_hits),
        ("incr", Some("miss"), &s.incr_misses),
        ("decr", Some("hit"), &s.decr_hits),
        ("decr", Some("miss"), &s.decr_misses),
        ("cas", Some("hit"), &s.cas_hits),
        ("cas", Some("miss"), &s.cas_misses),
        ("cas", Some("badval"), &s.cas_badval),
    ];
    for (op, result, counter) in ops {
        let extra: Vec<(&'static str, &str)> = match result {
            Some(r) => vec![("op", op), ("result", r)],
            None => vec![("op", op)],
        };
        f.gauge("kv_ops", HELP, labels(name, &extra), load(counter));
    }
    f.gauge("kv_ops", HELP, labels(name, &[("op", "touch"), ("result", "hit")]), load(&s.touch_hits));
    f.gauge("kv_ops", HELP, labels(name, &[("op", "touch"), ("result", "miss")]), load(&s.touch_misses));
    f.gauge("kv_cmd_lookup", "Lookup commands (gets, sub-document lookups)", labels(name, &[]), load(&s.cmd_lookup));
    f.gauge("kv_cmd_mutation", "Mutation commands", labels(name, &[]), load(&s.cmd_mutation));
}

/// Items, memory, eviction, disk queue, vBuckets, DCP and warmup of one bucket.
fn bucket_families(f: &mut Families, node: &Node, b: &BucketHandle) {
    let name = b.name();
    let l = || labels(&name, &[]);
    let s = b.stats();
    op_families(f, &name, b);
    let summary = b.summary();
    let items = summary.items;
    f.gauge("kv_curr_items", "Items in the bucket's active vBuckets", l(), items.active as f64);
    f.gauge("kv_curr_items_tot", "Items in the bucket's active, replica and pending vBuckets", l(), items.total as f64);
    for (state, count) in [("active", items.active), ("replica", items.replica), ("pending", items.pending)] {
        let state = labels(&name, &[("state", state)]);
        f.gauge("kv_vb_curr_items", "Items in the bucket's vBuckets of a state", state, count as f64);
    }
    f.gauge("kv_mem_used_bytes", "Memory the bucket's items use", l(), b.mem_used() as f64);
    f.gauge("kv_ep_max_size_bytes", "The bucket's memory quota", l(), b.config().ram_quota_bytes as f64);
    let (low, high) = b.watermark_bytes();
    f.gauge("kv_ep_mem_low_wat_bytes", "The item pager's low watermark", l(), low as f64);
    f.gauge("kv_ep_mem_high_wat_bytes", "The item pager's high watermark", l(), high as f64);
    f.gauge("kv_ep_num_value_ejects", "Values ejected from memory", l(), load(&s.ejected));
    f.gauge("kv_ep_bg_fetched", "Items fetched from disk", l(), load(&s.bg_fetched));
    f.gauge("kv_ep_tmp_oom_errors", "Mutations refused for lack of memory", l(), load(&s.tmp_oom_errors));
    let active = labels(&name, &[("state", "active")]);
    f.gauge("kv_vb_expired", "Items expired", active.clone(), load(&s.expired));
    // The sampler's ratio (it walks a few vBuckets' items per second; a scrape walking them all held every
    // vBucket lock in turn), or a walk before its first sample.
    let sampled = node.stats_history.lock().latest(&name, "vb_active_resident_items_ratio");
    let resident = sampled.unwrap_or_else(|| b.resident_ratio() as f64) / 100.0;
    f.gauge("kv_vb_perc_mem_resident_ratio", "Share of items whose value is in memory", active, resident);
    f.gauge("kv_ep_queue_size", "Items waiting to be written to disk", l(), summary.dirty as f64);
    let v = summary.vbuckets;
    for (state, count) in [("active", v.active), ("replica", v.replica), ("pending", v.pending), ("dead", v.dead)] {
        f.gauge("kv_num_vbuckets", "vBuckets by state", labels(&name, &[("state", state)]), count as f64);
    }
    settee_bucket_families(f, &name, b);
}

/// One bucket's settee-only families: DCP queues, replication received, warmup, persistence failure.
fn settee_bucket_families(f: &mut Families, name: &str, b: &BucketHandle) {
    let l = || labels(name, &[]);
    let received = load(&b.stats().replica_items_received);
    f.counter("settee_dcp_replica_items_received", "Changes applied to replica vBuckets over DCP", l(), received);
    f.gauge("settee_dcp_queued_bytes", "Bytes DCP producers hold queued", l(), b.dcp_hub.queued_bytes() as f64);
    let peak = b.dcp_hub.queued_bytes_peak() as f64;
    f.gauge("settee_dcp_queued_bytes_peak", "Most bytes DCP producers held queued at once", l(), peak);
    let warming = f64::from(u8::from(b.is_warming_up()));
    f.gauge("settee_warmup_running", "1 while the bucket loads from disk (ep_warmup_thread)", l(), warming);
    let failed = f64::from(u8::from(b.store_failed()));
    f.gauge("settee_persistence_failed", "1 when writing the bucket to disk has failed", l(), failed);
}

/// The process's CPU and memory and the host's CPU, named as ns_server names them (`proc="settee"`).
fn process_families(f: &mut Families) {
    let proc_label = |mode: &str| vec![("proc", "settee".to_owned()), ("mode", mode.to_owned())];
    match process_stats::process_cpu() {
        Ok(cpu) => {
            const HELP: &str = "CPU seconds the process used";
            f.counter("sysproc_cpu_seconds", HELP, proc_label("user"), cpu.user);
            f.counter("sysproc_cpu_seconds", HELP, proc_label("sys"), cpu.sys);
        }
        Err(e) => tracing::debug!(error = %e, "no process CPU metrics"),
    }
    match process_stats::process_resident_bytes() {
        Ok(bytes) => {
            let l = vec![("proc", "settee".to_owned())];
            f.gauge("sysproc_mem_resident", "Resident memory of the process in bytes", l, bytes as f64);
        }
        Err(e) => tracing::debug!(error = %e, "no process memory metric"),
    }
    match process_stats::host_cpu() {
        Ok(host) => {
            for (mode, seconds) in host.0 {
                let l = vec![("mode", mode.to_owned())];
                f.counter("sys_cpu_host_seconds", "CPU seconds of the host by mode", l, seconds);
            }
        }
        Err(e) => tracing::debug!(error = %e, "no host CPU metrics"),
    }
}

/// settee's cluster: whether this node leads the metadata Raft group, its members, the metadata revision, and the
/// running or last rebalance's vBucket moves.
fn cluster_families(f: &mut Families, node: &Node) {
    let Some(cluster) = node.cluster() else { return };
    let store = cluster.store();
    f.gauge(
        "settee_cluster_is_leader",
        "1 when this node leads the metadata Raft group",
        vec![],
        bool_f(store.is_leader()),
    );
    f.gauge("settee_cluster_members", "Members of the metadata Raft group", vec![], store.members().len() as f64);
    f.gauge(
        "settee_cluster_metadata_rev",
        "Revision of the applied cluster metadata",
        vec![],
        store.current().rev as f64,
    );
    let rebalance = cluster.rebalance.lock().clone();
    f.gauge("settee_rebalance_running", "1 while a rebalance runs", vec![], bool_f(rebalance.running));
    f.gauge(
        "settee_rebalance_moves_done",
        "vBucket moves done by the running or last rebalance",
        vec![],
        rebalance.done as f64,
    );
    f.gauge(
        "settee_rebalance_moves_planned",
        "vBucket moves the running or last rebalance planned",
        vec![],
        rebalance.total as f64,
    );
}

/// XDCR's counters of this node's runners, under Couchbase's names and labels (`sourceBucketName`,
/// `targetClusterUUID`, `targetBucketName`, `pipelineType`); the encoder adds `_total` to the counters.
fn xdcr_families(f: &mut Families, node: &Node) {
    for (r, st) in node.xdcr.statuses(node) {
        let labels = || -> Labels {
            vec![
                ("sourceBucketName", r.source_bucket.clone()),
                ("targetClusterUUID", r.remote_uuid.clone()),
                ("targetBucketName", r.target_bucket.clone()),
                ("pipelineType", "Main".to_owned()),
            ]
        };
        let s = st.stats;
        let help = "Source changes not yet on the target, over this node's active vBuckets";
        f.gauge("xdcr_changes_left_total", help, labels(), st.changes_left as f64);
        f.counter("xdcr_docs_received_from_dcp", "Changes read from the source", labels(), s.changes_read() as f64);
        f.counter("xdcr_docs_written", "Documents the target accepted", labels(), s.docs_written() as f64);
        let help = "Changes the replication's filters left out";
        f.counter("xdcr_docs_filtered", help, labels(), s.docs_filtered as f64);
        let help = "Documents the target refused by conflict resolution (it held the same or a newer version)";
        f.counter("xdcr_docs_failed_cr_source", help, labels(), s.docs_failed_cr() as f64);
        f.counter("xdcr_num_checkpoints", "vBucket checkpoints saved", labels(), s.checkpoints as f64);
        let splits: [(&'static str, &'static str, u64); 9] = [
            ("xdcr_set_docs_written", "Mutations the target accepted", s.written.sets),
            ("xdcr_deletion_docs_written", "Deletions the target accepted", s.written.deletions),
            ("xdcr_expiry_docs_written", "Expirations the target accepted", s.written.expirations),
            ("xdcr_set_failed_cr_source", "Mutations refused by conflict resolution", s.failed_cr.sets),
            ("xdcr_deletion_failed_cr_source", "Deletions refused by conflict resolution", s.failed_cr.deletions),
            ("xdcr_expiry_failed_cr_source", "Expirations refused by conflict resolution", s.failed_cr.expirations),
            ("xdcr_set_received_from_dcp", "Mutations read from the source", s.read.sets),
            ("xdcr_deletion_received_from_dcp", "Deletions read from the source", s.read.deletions),
            ("xdcr_expiry_received_from_dcp", "Expirations read from the source", s.read.expirations),
        ];
        for (name, help, value) in splits {
            f.counter(name, help, labels(), value as f64);
        }
        // Bytes, named as goxdcr names them (a counter typed gauge so that the encoder adds no `_total`).
        let help = "Bytes of the with-meta requests the target accepted (header, extras, key and value)";
        f.gauge("xdcr_data_replicated_bytes", help, labels(), s.data_replicated as f64);
        let help = "Bytes of keys and values of the writes held for the target (queued, in flight, to retry)";
        f.gauge("xdcr_size_rep_queue_bytes", help, labels(), st.queue_bytes as f64);
        f.counter("xdcr_docs_checked", "Changes checked for replication", labels(), s.changes_read() as f64);
        let help = "Mean time from a write's send to the target's reply, over the last second with replies";
        f.gauge("xdcr_wtavg_docs_latency_seconds", help, labels(), st.docs_latency_ms / 1000.0);
        f.counter(
            // prometheus-client appends `_total` to counters.
            "settee_xdcr_retries",
            "Writes sent again after TMPFAIL or an error",
            labels(),
            s.retries as f64,
        );
        f.counter("settee_xdcr_errors", "Writes answered with an error", labels(), s.errors as f64);
    }
}

fn bool_f(b: bool) -> f64 {
    f64::from(u8::from(b))
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::super::testing::{TestApp, ADMIN};
    use super::*;

    #[tokio::test]
    async fn metrics_need_the_stats_privilege() {
        // Proves 401 without credentials, 403 naming cluster.stats!read for a data role, 200 for
        // external_stats_reader and the admin.
        let app = TestApp::new();
        app.add_user("data", "password", "data_reader[*]");
        app.add_user("scraper", "password", "external_stats_reader");
        assert_eq!(app.call("GET", "/metrics", None, None).await.status, StatusCode::UNAUTHORIZED);
        let refused = app.call("GET", "/metrics", Some(("data", "password")), None).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert_eq!(refused.json["permissions"][0], "cluster.stats!read");
        assert_eq!(app.call("GET", "/metrics", Some(("scraper", "password")), None).await.status, StatusCode::OK);
        assert_eq!(app.call("GET", "/metrics", Some(ADMIN), None).await.status, StatusCode::OK);
    }

    #[test]
    fn every_bucket_sample_carries_its_bucket_label() {
        // Proves the families gathered for a node with a bucket label each bucket sample with bucket=<name> first,
        // and that kv_ops reports get hits and misses from the engine's counters.
        let node = Node::new(crate::config::ServerConfig::for_tests()).expect("node");
        let bucket = node.create_bucket(node.default_bucket_config().expect("default bucket")).expect("bucket");
        bucket.stats().get_hits.fetch_add(3, Relaxed);
        let families = gather(&node);
        let kv_ops = families.0.iter().find(|f| f.name == "kv_ops").expect("kv_ops");
        let hits = kv_ops.samples.iter().find(|(l, _)| l.contains(&("result", "hit".into())) && l[1].1 == "get");
        assert_eq!(hits.expect("get hits").1, 3.0);
        for family in families.0.iter().filter(|f| f.name.starts_with("kv_") && !f.samples[0].0.is_empty()) {
            for (labels, _) in &family.samples {
                assert_eq!(labels[0], ("bucket", bucket.name()), "{} labels {labels:?}", family.name);
            }
        }
    }
}

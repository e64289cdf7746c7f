//! Samples every bucket's statistics once a second into the node's [`History`] (see `stats_history`), from what
//! the node already counts: the engine's `BucketStats` atomics, memory, vBucket states and queue lengths. The
//! resident ratio needs a walk of a vBucket's items under its lock, so each sample walks only
//! [`RESIDENT_VBUCKETS_PER_SAMPLE`] vBuckets, in turn, and the ratio comes from each vBucket's last counts: the
//! whole bucket is walked once every 1024 / 16 = 64 s, its cost spread thin instead of a full walk in one go.
//!
//! [`History`]: crate::stats_history::History

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use settee_types::VbId;
use tokio::sync::watch;

use crate::node::{BucketHandle, Node};
use crate::stats_history::SeriesKey;

/// How often the node samples.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// vBuckets whose items each sample walks for the resident ratio.
const RESIDENT_VBUCKETS_PER_SAMPLE: u16 = 16;

/// Per bucket (by name), each vBucket's last (live, resident) item counts, and the next vBucket to walk.
#[derive(Default)]
struct ResidentCounts(BTreeMap<String, (Vec<(u64, u64)>, u16)>);

impl ResidentCounts {
    /// Walks the next vBuckets of every bucket and returns each bucket's resident ratio in percent (100 with no
    /// item), from the counts known so far. Buckets gone are forgotten.
    fn advance(&mut self, node: &Node) -> BTreeMap<String, f64> {
        let buckets = node.buckets();
        self.0.retain(|name, _| buckets.iter().any(|b| b.name() == *name));
        let mut ratios = BTreeMap::new();
        for b in buckets {
            let n = b.num_vbuckets();
            let (counts, next) = self.0.entry(b.name()).or_insert_with(|| (vec![(0, 0); usize::from(n)], 0));
            for _ in 0..RESIDENT_VBUCKETS_PER_SAMPLE.min(n) {
                if let Some(slot) = counts.get_mut(usize::from(*next)) {
                    *slot = b.resident_counts(VbId(*next));
                }
                *next = (*next + 1) % n.max(1);
            }
            let (live, resident) = counts.iter().fold((0u64, 0u64), |(l, r), (cl, cr)| (l + cl, r + cr));
            ratios.insert(b.name(), (resident * 100).checked_div(live).map_or(100.0, |p| p as f64));
        }
        ratios
    }
}

/// Samples until `stopped`, on the blocking pool (a sample takes every vBucket's lock briefly).
pub(crate) async fn run(node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let resident = Arc::new(parking_lot::Mutex::new(ResidentCounts::default()));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let (sampler, counts) = (node.clone(), resident.clone());
        let sampled = tokio::task::spawn_blocking(move || {
            let ratios = counts.lock().advance(&sampler);
            sample(&sampler, &ratios)
        })
        .await;
        match sampled {
            Ok(values) => {
                let now_ms = node.clock.now_nanos() / 1_000_000;
                node.stats_history.lock().record(now_ms, &values);
            }
            Err(e) => tracing::warn!(error = %e, "statistics sample failed"),
        }
    }
}

/// One sample of every bucket's statistics, under Couchbase's names (`stats_history::STATS`).
pub(crate) fn sample(node: &Node, resident: &BTreeMap<String, f64>) -> BTreeMap<SeriesKey, f64> {
    let mut out = BTreeMap::new();
    out.insert((String::new(), "curr_connections"), node.kv_connections.load(Relaxed) as f64);
    for b in node.buckets() {
        bucket_sample(&mut out, &b, resident.get(&b.name()).copied());
    }
    xdcr_sample(&mut out, node);
    out
}

/// The counts of every replication running on this node, in section `@xdcr-<source bucket>`
/// (`stats_history::XDCR_STATS`), and each section's `replication_changes_left`.
fn xdcr_sample(out: &mut BTreeMap<SeriesKey, f64>, node: &Node) {
    for (r, st) in node.xdcr.statuses(node) {
        if !st.running {
            continue;
        }
        let section = format!("@xdcr-{}", r.source_bucket);
        let item = format!("{section}/replications/{}/{}/{}", r.remote_uuid, r.source_bucket, r.target_bucket);
        let s = st.stats;
        let values: [(&'static str, f64); 23] = [
            ("changes_left", st.changes_left as f64),
            ("docs_checked", s.changes_read() as f64),
            ("docs_received_from_dcp", s.changes_read() as f64),
            ("docs_written", s.docs_written() as f64),
            ("docs_filtered", s.docs_filtered as f64),
            ("docs_failed_cr_source", s.docs_failed_cr() as f64),
            ("set_docs_written", s.written.sets as f64),
            ("deletion_docs_written", s.written.deletions as f64),
            ("expiry_docs_written", s.written.expirations as f64),
            ("set_failed_cr_source", s.failed_cr.sets as f64),
            ("deletion_failed_cr_source", s.failed_cr.deletions as f64),
            ("expiry_failed_cr_source", s.failed_cr.expirations as f64),
            ("set_received_from_dcp", s.read.sets as f64),
            ("deletion_received_from_dcp", s.read.deletions as f64),
            ("expiry_received_from_dcp", s.read.expirations as f64),
            ("data_replicated", s.data_replicated as f64),
            ("docs_rep_queue", st.queue_docs as f64),
            ("size_rep_queue", st.queue_bytes as f64),
            ("num_checkpoints", s.checkpoints as f64),
            ("rate_replicated", s.docs_written() as f64),
            ("rate_received_from_dcp", s.changes_read() as f64),
            ("bandwidth_usage", s.data_replicated as f64),
            ("wtavg_docs_latency", st.docs_latency_ms),
        ];
        for (stat, value) in values {
            out.insert((item.clone(), stat), value);
        }
        *out.entry((section, "replication_changes_left")).or_insert(0.0) += st.changes_left as f64;
    }
}

fn bucket_sample(out: &mut BTreeMap<SeriesKey, f64>, b: &BucketHandle, resident: Option<f64>) {
    let name = b.name();
    let mut put = |stat: &'static str, value: f64| {
        out.insert((name.clone(), stat), value);
    };
    let s = b.stats();
    let load = |c: &AtomicU64| c.load(Relaxed) as f64;
    // Every data operation, as ns_server's `ops` sums them: gets, sets, deletes, increments and decrements (hit or
    // miss), and the sub-document lookups and mutations.
    let ops = [
        &s.get_hits,
        &s.get_misses,
        &s.cmd_set,
        &s.delete_hits,
        &s.delete_misses,
        &s.incr_hits,
        &s.incr_misses,
        &s.decr_hits,
        &s.decr_misses,
        &s.cmd_lookup,
        &s.cmd_mutation,
    ];
    put("ops", ops.iter().map(|c| load(c)).sum());
    put("cmd_get", load(&s.get_hits) + load(&s.get_misses));
    put("cmd_set", load(&s.cmd_set));
    let counters: [(&'static str, &AtomicU64); 13] = [
        ("get_hits", &s.get_hits),
        ("get_misses", &s.get_misses),
        ("delete_hits", &s.delete_hits),
        ("delete_misses", &s.delete_misses),
        ("incr_hits", &s.incr_hits),
        ("incr_misses", &s.incr_misses),
        ("decr_hits", &s.decr_hits),
        ("decr_misses", &s.decr_misses),
        ("cas_hits", &s.cas_hits),
        ("cas_misses", &s.cas_misses),
        ("cas_badval", &s.cas_badval),
        ("ep_num_value_ejects", &s.ejected),
        ("ep_bg_fetched", &s.bg_fetched),
    ];
    for (stat, counter) in counters {
        put(stat, load(counter));
    }
    put("ep_tmp_oom_errors", load(&s.tmp_oom_errors));
    let summary = b.summary();
    let items = summary.items;
    put("curr_items", items.active as f64);
    put("curr_items_tot", items.total as f64);
    put("vb_replica_curr_items", items.replica as f64);
    put("mem_used", b.mem_used() as f64);
    put("ep_max_size", b.config().ram_quota_bytes as f64);
    let (low, high) = b.watermark_bytes();
    put("ep_mem_low_wat", low as f64);
    put("ep_mem_high_wat", high as f64);
    put("ep_queue_size", summary.dirty as f64);
    put("disk_write_queue", summary.dirty as f64);
    put("vb_active_num", summary.vbuckets.active as f64);
    put("vb_replica_num", summary.vbuckets.replica as f64);
    put("vb_pending_num", summary.vbuckets.pending as f64);
    if let Some(ratio) = resident {
        put("vb_active_resident_items_ratio", ratio);
        put("ep_resident_items_rate", ratio);
    }
}

#[cfg(test)]
mod tests {
    use settee_engine::{DocKey, StoreMode, StoreRequest, WriteOptions};

    use super::*;

    /// Regression (found by the console's browser test): `ops` summed only the sub-document counters, so a bucket
    /// taking plain gets and sets showed 0 ops/s. It now counts every data operation.
    #[test]
    fn ops_counts_gets_sets_and_deletes() {
        let node = Node::new(crate::config::ServerConfig::for_tests()).expect("node");
        let b = node.create_bucket(node.default_bucket_config().expect("default")).expect("bucket");
        let key = DocKey::new(0, b"k");
        let req =
            StoreRequest { mode: StoreMode::Set, value: b"v", flags: 0, expiry: 0, opts: WriteOptions::default() };
        b.store(VbId(0), &key, req).expect("store");
        b.get(VbId(0), &key, |_| ()).expect("get");
        let _ = b.get(VbId(0), &DocKey::new(0, b"missing"), |_| ());
        b.delete(VbId(0), &key, WriteOptions::default()).expect("delete");
        let values = sample(&node, &BTreeMap::new());
        assert_eq!(values[&(b.name(), "ops")], 4.0, "one set, a hit, a miss and a delete");
    }

    /// Proves each sample walks the next 16 vBuckets only, keeps the others' last counts, and has walked the whole
    /// bucket after 1024 / 16 samples; an empty bucket reads 100 %.
    #[test]
    fn the_resident_walk_takes_a_few_vbuckets_per_sample_in_turn() {
        let node = Node::new(crate::config::ServerConfig::for_tests()).expect("node");
        let b = node.create_bucket(node.default_bucket_config().expect("default")).expect("bucket");
        let mut counts = ResidentCounts::default();
        assert_eq!(counts.advance(&node)[&b.name()], 100.0, "nothing walked, nothing counted");
        let store = |vb: u16, key: &[u8]| {
            let req =
                StoreRequest { mode: StoreMode::Set, value: b"v", flags: 0, expiry: 0, opts: WriteOptions::default() };
            b.store(VbId(vb), &DocKey::new(0, key), req).expect("store");
        };
        store(3, b"walked-again-later");
        store(40, b"walked-third");
        counts.advance(&node);
        let walked = |c: &ResidentCounts| c.0[&b.name()].0.iter().filter(|(live, _)| *live > 0).count();
        assert_eq!(walked(&counts), 0, "vBuckets 16-31 hold nothing");
        counts.advance(&node);
        assert_eq!(walked(&counts), 1, "vBucket 40 walked in the third sample");
        for _ in 3..64 {
            counts.advance(&node);
        }
        assert_eq!(walked(&counts), 1, "vBucket 3 not walked again yet");
        let ratios = counts.advance(&node);
        assert_eq!(walked(&counts), 2, "a full turn later vBucket 3 is counted too");
        assert_eq!(ratios[&b.name()], 100.0, "every value in memory");
    }
}

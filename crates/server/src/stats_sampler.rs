//! Samples every bucket's statistics once a second into the node's [`History`] (see `stats_history`), from what
//! the node already counts: the engine's `BucketStats` atomics, memory, vBucket states and queue lengths. The
//! resident ratio walks every item, so it is sampled every [`RESIDENT_EVERY`] samples and repeated between.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use settee_engine::VbState;
use settee_types::VbId;
use tokio::sync::watch;

use crate::node::{BucketHandle, Node};
use crate::stats_history::SeriesKey;

/// How often the node samples.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Every how many samples the resident ratio is computed again.
const RESIDENT_EVERY: u64 = 10;

/// Samples until `stopped`, on the blocking pool (a sample takes every vBucket's lock briefly).
pub(crate) async fn run(node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut resident: Arc<BTreeMap<String, f64>> = Arc::default();
    for n in 0u64.. {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let (sampler, last) = (node.clone(), resident.clone());
        let sampled = tokio::task::spawn_blocking(move || {
            let resident = if n % RESIDENT_EVERY == 0 { resident_ratios(&sampler) } else { (*last).clone() };
            (sample(&sampler, &resident), resident)
        })
        .await;
        match sampled {
            Ok((values, ratios)) => {
                resident = Arc::new(ratios);
                let now_ms = node.clock.now_nanos() / 1_000_000;
                node.stats_history.lock().record(now_ms, &values);
            }
            Err(e) => tracing::warn!(error = %e, "statistics sample failed"),
        }
    }
}

/// Each bucket's resident ratio (percent of items whose value is in memory).
fn resident_ratios(node: &Node) -> BTreeMap<String, f64> {
    node.buckets().iter().map(|b| (b.name(), b.resident_ratio() as f64)).collect()
}

/// One sample of every bucket's statistics, under Couchbase's names (`stats_history::STATS`).
pub(crate) fn sample(node: &Node, resident: &BTreeMap<String, f64>) -> BTreeMap<SeriesKey, f64> {
    let mut out = BTreeMap::new();
    out.insert((String::new(), "curr_connections"), node.kv_connections.load(Relaxed) as f64);
    for b in node.buckets() {
        bucket_sample(&mut out, &b, resident.get(&b.name()).copied());
    }
    out
}

fn bucket_sample(out: &mut BTreeMap<SeriesKey, f64>, b: &BucketHandle, resident: Option<f64>) {
    let name = b.name();
    let mut put = |stat: &'static str, value: f64| {
        out.insert((name.clone(), stat), value);
    };
    let s = b.stats();
    let load = |c: &AtomicU64| c.load(Relaxed) as f64;
    put("ops", load(&s.cmd_lookup) + load(&s.cmd_mutation));
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
    let items = b.item_counts();
    put("curr_items", items.active as f64);
    put("curr_items_tot", items.total as f64);
    put("vb_replica_curr_items", items.replica as f64);
    put("mem_used", b.mem_used() as f64);
    put("ep_max_size", b.config().ram_quota_bytes as f64);
    let (low, high) = b.watermark_bytes();
    put("ep_mem_low_wat", low as f64);
    put("ep_mem_high_wat", high as f64);
    let (mut queue, mut active, mut replica, mut pending) = (0usize, 0u32, 0u32, 0u32);
    for vb in (0..b.num_vbuckets()).filter_map(|v| b.vbucket(VbId(v))) {
        queue += vb.dirty_len();
        match vb.state() {
            VbState::Active => active += 1,
            VbState::Replica => replica += 1,
            VbState::Pending => pending += 1,
            VbState::Dead | VbState::Failed => {}
        }
    }
    put("ep_queue_size", queue as f64);
    put("disk_write_queue", queue as f64);
    put("vb_active_num", f64::from(active));
    put("vb_replica_num", f64::from(replica));
    put("vb_pending_num", f64::from(pending));
    if let Some(ratio) = resident {
        put("vb_active_resident_items_ratio", ratio);
        put("ep_resident_items_rate", ratio);
    }
}

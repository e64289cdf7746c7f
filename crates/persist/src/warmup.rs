//! Warmup: loads a persistent bucket from disk before it serves. Keys and metadata of every item are loaded;
//! values are loaded while memory stays under the low watermark, the rest stay on disk (non-resident) and are
//! fetched on access. Under full eviction, items beyond the watermark are not loaded at all. Prepares and aborts
//! found on disk go back to the durability monitor and the abort log; each vBucket continues its seqnos, CAS and
//! failover log from what disk holds; then the bucket serves (`Bucket::finish_warmup`).

use settee_engine::{is_sync_write_key, Bucket, EvictionPolicy, SyncWarmup, VbState};
use settee_store::{StoreError, VbStore};
use settee_types::VbId;

use crate::records::snapshot_of;

/// What warmup loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Warmed {
    pub items: u64,
    pub values: u64,
    /// Sync writes found pending on disk, back in the durability monitor.
    pub prepares: u64,
}

/// Loads every vBucket of `bucket` from `store` and ends the bucket's warmup. A vBucket whose data fails its
/// checksum is taken out of service (the others serve); a store that cannot be read stops persistence.
pub fn load(bucket: &Bucket, store: &dyn VbStore) -> Warmed {
    let config = bucket.config();
    let value_budget = bucket.watermark_bytes().0;
    let full = config.eviction == EvictionPolicy::FullEviction;
    let mut warmed = Warmed::default();
    for v in 0..bucket.num_vbuckets() {
        let vb = VbId(v);
        let mut max_cas = 0;
        let mut skipped = 0;
        let mut sync = SyncWarmup::default();
        let manifest = bucket.manifest();
        let result = store.scan_seqnos(vb, 0, u64::MAX, &mut |r| {
            max_cas = max_cas.max(r.meta.cas);
            // Prepares and aborts are keyed in a namespace of their own, before the document's key.
            let doc_key = if is_sync_write_key(&r.key) { r.key.get(1..).unwrap_or_default() } else { &r.key[..] };
            // Items of collections dropped before the restart stay on disk until compaction; never load them.
            let cid = settee_mcbp::decode_leb128(doc_key).map(|(cid, _)| cid);
            if cid.is_none_or(|cid| manifest.collection(cid).is_none()) {
                return;
            }
            if is_sync_write_key(&r.key) {
                sync.sync_record(snapshot_of(r, true));
                return;
            }
            sync.committed(&r.key);
            let with_value = bucket.mem_used() < value_budget;
            if !with_value && full {
                skipped += 1;
                return;
            }
            warmed.items += 1;
            warmed.values += u64::from(with_value);
            bucket.load_item(vb, snapshot_of(r, with_value));
        });
        match result {
            Ok(()) => {}
            Err(e @ StoreError::Corrupt { .. }) => {
                // Serve the other vBuckets; this one answers EINTERNAL instead of possibly wrong data.
                tracing::error!(bucket = %config.name, vb = v, error = %e, "vBucket taken out of service: stored data failed its checksum");
                if let Some(vbucket) = bucket.vbucket(vb) {
                    vbucket.set_state(VbState::Failed);
                }
                continue;
            }
            Err(e) => {
                tracing::error!(bucket = %config.name, vb = v, error = %e, "warmup cannot read the store: persistence stopped");
                bucket.fail_persistence();
                break;
            }
        }
        if sync.damaged > 0 {
            tracing::error!(bucket = %config.name, vb = v, records = sync.damaged, "warmup skipped prepare or abort records it cannot read");
        }
        let state = store.vb_state(vb).ok().flatten();
        sync.completed_to = state.as_ref().map_or(0, |s| s.prepares_completed_to);
        warmed.prepares += sync.pending() as u64;
        bucket.restore_sync_writes(vb, sync);
        let high = store.high_seqno(vb).unwrap_or(0).max(state.as_ref().map_or(0, |s| s.high_seqno));
        let max_cas = max_cas.max(state.as_ref().map_or(0, |s| s.max_cas));
        let failover = state.as_ref().map_or(&[][..], |s| &s.failover[..]);
        bucket.restore_vbucket(vb, high, max_cas, skipped, failover);
    }
    bucket.finish_warmup();
    warmed
}

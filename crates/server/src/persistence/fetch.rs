//! Background fetch: reads an ejected item from the store off the async workers and gives it back to the engine.

use std::sync::Arc;

use settee_engine::Bucket;
use settee_store::VbStore;
use settee_types::VbId;

use settee_persist::snapshot_of;

/// Reads `key` of `vb` from disk and completes the engine's fetch (value restored, or the key known absent).
/// Errors (corruption, a failed store) are logged; the retried operation then fails with TMPFAIL.
pub async fn fetch_item(bucket: Arc<Bucket>, store: Arc<dyn VbStore>, vb: VbId, key: Vec<u8>) {
    let outcome = tokio::task::spawn_blocking(move || {
        let found = store.get(vb, &key);
        (key, found)
    })
    .await;
    match outcome {
        Ok((key, Ok(found))) => bucket.complete_fetch(vb, &key, found.map(|r| snapshot_of(r, true))),
        Ok((_, Err(e @ settee_store::StoreError::Corrupt { .. }))) => {
            tracing::error!(bucket = %bucket.name(), vb = vb.0, error = %e, "vBucket taken out of service: stored data failed its checksum");
            if let Some(vbucket) = bucket.vbucket(vb) {
                vbucket.set_state(settee_engine::VbState::Failed);
            }
        }
        Ok((_, Err(e))) => tracing::error!(bucket = %bucket.name(), vb = vb.0, error = %e, "background fetch failed"),
        Err(e) => tracing::error!(error = %e, "background fetch task failed"),
    }
}

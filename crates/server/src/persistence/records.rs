//! Opening the store, and reading committed changes back from it for DCP backfills and XDCR. (The conversion
//! between items and records is `settee_persist::records`.)

use std::path::Path;
use std::sync::Arc;

use settee_persist::snapshot_of;
use settee_store::{FaultInjector, FjallConfig, FjallStore, VbStore};

/// Opens the bucket's fjall store, its memory sized for the bucket's quota, with `faults` as its file-system seam
/// (tests use it to simulate a full disk).
pub(crate) fn open_store(dir: &Path, quota_bytes: u64, faults: Arc<FaultInjector>) -> anyhow::Result<Arc<dyn VbStore>> {
    let config = FjallConfig { faults: Some(faults), ..FjallConfig::for_quota(quota_bytes) };
    let store =
        FjallStore::open_with(dir, config).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", dir.display()))?;
    Ok(Arc::new(store))
}
/// The committed changes of `vb` that are on disk only, seqnos `after + 1 ..= up_to`, read from the store's seqno
/// index, with the pending `prepares` of that range (memory only) merged in by seqno; at most about `limit_bytes`
/// of them (at least one). Returns them and the seqno they reach: `up_to`, or just below the first record left for
/// the next read. Prepares and aborts on disk (kept for warmup) are skipped: streams take them from memory. Blocks
/// on the store: call it off the async workers. Shared by DCP backfills and XDCR.
pub(crate) fn disk_changes(
    store: &dyn settee_store::VbStore,
    vb: settee_types::VbId,
    after: u64,
    up_to: u64,
    prepares: Vec<settee_engine::DcpChange>,
    limit_bytes: usize,
) -> Result<(Vec<settee_engine::DcpChange>, u64), settee_store::StoreError> {
    let mut changes: Vec<settee_engine::DcpChange> = Vec::new();
    let (mut bytes, mut end) = (0usize, up_to);
    store.scan_seqnos_while(vb, after + 1, up_to, &mut |r| {
        if bytes >= limit_bytes && !changes.is_empty() {
            end = r.meta.seqno - 1;
            return false;
        }
        if settee_engine::is_sync_write_key(&r.key) {
            return true;
        }
        bytes = bytes.saturating_add(r.key.len() + r.value.len());
        changes.push(snapshot_of(r, true).into());
        true
    })?;
    changes.extend(prepares.into_iter().filter(|c| c.item.seqno <= end));
    changes.sort_by_key(|c| c.item.seqno);
    Ok((changes, end))
}

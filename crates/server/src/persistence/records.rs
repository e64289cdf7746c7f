//! Conversion between the engine's item snapshots and the store's checksummed records, and opening the store.

use std::path::Path;
use std::sync::Arc;

use settee_engine::ItemSnapshot;
use settee_store::{FaultInjector, FjallConfig, FjallStore, Record, RecordMeta, VbStore};

/// Opens the bucket's fjall store, its memory sized for the bucket's quota, with `faults` as its file-system seam
/// (tests use it to simulate a full disk).
pub(crate) fn open_store(dir: &Path, quota_bytes: u64, faults: Arc<FaultInjector>) -> anyhow::Result<Arc<dyn VbStore>> {
    let config = FjallConfig { faults: Some(faults), ..FjallConfig::for_quota(quota_bytes) };
    let store =
        FjallStore::open_with(dir, config).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", dir.display()))?;
    Ok(Arc::new(store))
}

pub(crate) fn record_of(item: ItemSnapshot) -> Record {
    let meta = RecordMeta {
        cas: item.cas,
        seqno: item.seqno,
        rev: item.rev,
        flags: item.flags,
        expiry: item.expiry,
        datatype: item.datatype,
        deleted: item.deleted,
    };
    Record::new(item.key, item.value, meta)
}

pub(crate) fn snapshot_of(r: Record, with_value: bool) -> ItemSnapshot {
    ItemSnapshot {
        key: r.key,
        value: if with_value { r.value } else { Vec::new() },
        cas: r.meta.cas,
        seqno: r.meta.seqno,
        rev: r.meta.rev,
        flags: r.meta.flags,
        expiry: r.meta.expiry,
        datatype: r.meta.datatype,
        deleted: r.meta.deleted,
        value_missing: !with_value,
    }
}

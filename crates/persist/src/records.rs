//! Conversion between the engine's item snapshots and the store's checksummed records.

use settee_engine::ItemSnapshot;
use settee_store::{Record, RecordMeta};

pub fn record_of(item: ItemSnapshot) -> Record {
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

/// The item a record holds; without its value (`with_value` false) it loads non-resident.
pub fn snapshot_of(r: Record, with_value: bool) -> ItemSnapshot {
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

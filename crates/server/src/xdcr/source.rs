//! Reading this node's active vBuckets of the source bucket for one replication: the engine's DCP cursors (the
//! ones the DCP producer and the index feeders use), read in pieces of bounded bytes on the blocking pool; values
//! the pager ejected and changes that live only on disk (full eviction) are read from the store.

use settee_engine::{ChangeKind as EngineChange, DcpChange, DcpRead, DocKey, EngineError, ItemSnapshot};
use settee_types::VbId;
use settee_xdcr::{Change, ChangeKind};

use crate::node::BucketHandle;

/// One read piece: the changes of `start..=end`, in seqno order (`collection` still the source's id).
#[derive(Debug)]
pub struct Piece {
    pub start: u64,
    pub end: u64,
    pub changes: Vec<Change>,
}

#[derive(Debug)]
pub enum VbRead {
    /// Pieces read (possibly none: up to date), and the position after them.
    Read { pieces: Vec<Piece>, position: u64 },
    /// The vBucket is no longer active here.
    Lost,
    /// A read failed (logged); try again later.
    Failed,
}

/// Reads vBucket `vb` from after `position` with `cursor`, about `budget_bytes` of keys and values at most.
pub fn read(b: &BucketHandle, vb: u16, cursor: u64, mut position: u64, budget_bytes: usize) -> VbRead {
    let id = VbId(vb);
    let mut pieces = Vec::new();
    let mut bytes = 0usize;
    loop {
        match b.bucket.read_cursor(id, cursor, position, budget_bytes) {
            Ok(DcpRead::UpToDate) => break,
            Ok(DcpRead::Snapshot(snap)) => {
                let changes = convert(b, vb, snap.items);
                bytes += changes.iter().map(Change::bytes).sum::<usize>();
                pieces.push(Piece { start: snap.start, end: snap.end, changes });
                position = snap.end;
            }
            Ok(DcpRead::FromDisk { up_to, prepares }) => {
                // A bounded piece of the range (as a DCP backfill reads it), ending just before what is left.
                let Some(p) = &b.persistence else { return VbRead::Failed };
                let left = budget_bytes.saturating_sub(bytes).max(1);
                let (items, end) =
                    match crate::persistence::disk_changes(&*p.store, id, position, up_to, prepares, left) {
                        Ok(read) => read,
                        Err(e) => {
                            tracing::error!(vb, error = %e, "xdcr: reading from disk failed");
                            return VbRead::Failed;
                        }
                    };
                let changes = convert(b, vb, items);
                bytes += changes.iter().map(Change::bytes).sum::<usize>();
                pieces.push(Piece { start: position + 1, end, changes });
                position = end;
            }
            Err(EngineError::NotMyVbucket) => return VbRead::Lost,
            Err(e) => {
                tracing::debug!(vb, error = %e, "xdcr: vBucket not readable");
                return VbRead::Failed;
            }
        }
        if bytes >= budget_bytes {
            break;
        }
    }
    VbRead::Read { pieces, position }
}

/// The replicated form of the committed changes (prepares and aborts are not replicated: the commit is).
fn convert(b: &BucketHandle, vb: u16, items: Vec<DcpChange>) -> Vec<Change> {
    let mut out = Vec::with_capacity(items.len());
    for c in items {
        if matches!(c.kind, EngineChange::Prepare(_) | EngineChange::Abort { .. }) {
            continue;
        }
        let item = if c.item.value_missing && !c.item.deleted {
            // An ejected value whose version is no longer the stored one: a newer change follows, skip this one
            // (as a DCP stream does) rather than send an empty body.
            match reload(b, vb, c.item) {
                Some(item) => item,
                None => continue,
            }
        } else {
            c.item
        };
        let Some(key) = DocKey::from_encoded(&item.key) else { continue };
        let kind = if item.deleted { ChangeKind::Deletion } else { ChangeKind::Mutation };
        out.push(Change {
            kind,
            key: key.key().to_vec(),
            collection: key.cid(),
            cas: item.cas,
            seqno: item.seqno,
            rev: item.rev,
            flags: item.flags,
            expiry: item.expiry,
            datatype: item.datatype,
            value: item.value,
        });
    }
    out
}

/// The value of an item the pager ejected, read back from the store; None when the stored version is another one.
fn reload(b: &BucketHandle, vb: u16, item: ItemSnapshot) -> Option<ItemSnapshot> {
    let found = b.persistence.as_ref().and_then(|p| p.store.get(VbId(vb), &item.key).ok().flatten())?;
    (found.meta.seqno == item.seqno).then(|| crate::persistence::snapshot_of(found, true))
}

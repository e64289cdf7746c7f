//! What a stream carries: [`DcpItem`]s grouped into [`Snapshot`]s, and their translation to and from the wire.

use bytes::Bytes;
use settee_mcbp::dcp::{Abort, Commit, DcpMessage, Deletion, Expiration, Mutation, Prepare};
use settee_types::{Cas, Datatype, DurabilityLevel, Seqno, VbId};

/// One change of a vBucket, as a stream sends it. Values and keys are sent as given: shaping them for the
/// connection's DCP_OPEN flags (stripping xattrs, NO_VALUE) needs the document layer and is the driver's job. Keys
/// are opaque (with a LEB128 collection prefix when collections are on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DcpItem {
    Mutation {
        key: Bytes,
        value: Bytes,
        cas: Cas,
        seqno: Seqno,
        rev: u64,
        flags: u32,
        expiry: u32,
        datatype: Datatype,
    },
    /// A deletion; the value holds the tombstone's xattrs, if any.
    Deletion {
        key: Bytes,
        value: Bytes,
        cas: Cas,
        seqno: Seqno,
        rev: u64,
        delete_time: u32,
        datatype: Datatype,
    },
    Expiration {
        key: Bytes,
        cas: Cas,
        seqno: Seqno,
        rev: u64,
        delete_time: u32,
    },
    /// The first half of a durable write.
    Prepare {
        key: Bytes,
        value: Bytes,
        cas: Cas,
        seqno: Seqno,
        rev: u64,
        flags: u32,
        expiry: u32,
        datatype: Datatype,
        level: DurabilityLevel,
        deleted: bool,
    },
    Commit {
        key: Bytes,
        prepared_seqno: Seqno,
        commit_seqno: Seqno,
    },
    Abort {
        key: Bytes,
        prepared_seqno: Seqno,
        abort_seqno: Seqno,
    },
}

impl DcpItem {
    /// The seqno the item occupies in the vBucket (the commit or abort seqno for those).
    pub fn seqno(&self) -> Seqno {
        match self {
            Self::Mutation { seqno, .. }
            | Self::Deletion { seqno, .. }
            | Self::Expiration { seqno, .. }
            | Self::Prepare { seqno, .. } => *seqno,
            Self::Commit { commit_seqno, .. } => *commit_seqno,
            Self::Abort { abort_seqno, .. } => *abort_seqno,
        }
    }

    pub fn key(&self) -> &Bytes {
        match self {
            Self::Mutation { key, .. }
            | Self::Deletion { key, .. }
            | Self::Expiration { key, .. }
            | Self::Prepare { key, .. }
            | Self::Commit { key, .. }
            | Self::Abort { key, .. } => key,
        }
    }

    /// Whether readers see the item: prepares and aborts are not visible (the snapshot's max visible seqno skips
    /// them).
    pub fn is_visible(&self) -> bool {
        !matches!(self, Self::Prepare { .. } | Self::Abort { .. })
    }

    /// Whether only a stream with sync writes enabled carries the item.
    pub fn is_sync_write(&self) -> bool {
        matches!(self, Self::Prepare { .. } | Self::Commit { .. } | Self::Abort { .. })
    }

    /// A rough size of the encoded frame, for queue accounting.
    pub fn frame_bytes_estimate(&self) -> usize {
        let value = match self {
            Self::Mutation { value, .. } | Self::Deletion { value, .. } | Self::Prepare { value, .. } => value.len(),
            _ => 0,
        };
        settee_mcbp::HEADER_BYTES + 31 + self.key().len() + value
    }

    /// Appends the item's frame. Deletions use the v2 layout when `delete_times` is set; expirations travel as
    /// deletions unless `expiry_opcode` is set, as Couchbase does for consumers that did not ask for them.
    pub(crate) fn encode(&self, vb: VbId, opaque: u32, delete_times: bool, expiry_opcode: bool, out: &mut Vec<u8>) {
        let vbucket = vb.0;
        match self {
            Self::Mutation { key, value, cas, seqno, rev, flags, expiry, datatype } => Mutation {
                opaque,
                vbucket,
                cas: *cas,
                datatype: *datatype,
                by_seqno: *seqno,
                rev_seqno: *rev,
                flags: *flags,
                expiration: *expiry,
                lock_time: 0,
                nru: 0,
                key,
                value,
            }
            .encode(out),
            Self::Deletion { key, value, cas, seqno, rev, delete_time, datatype } => Deletion {
                opaque,
                vbucket,
                cas: *cas,
                datatype: *datatype,
                by_seqno: *seqno,
                rev_seqno: *rev,
                delete_time: delete_times.then_some(*delete_time),
                key,
                value,
            }
            .encode(out),
            Self::Expiration { key, cas, seqno, rev, delete_time } if expiry_opcode => Expiration {
                opaque,
                vbucket,
                cas: *cas,
                datatype: Datatype::RAW,
                by_seqno: *seqno,
                rev_seqno: *rev,
                delete_time: *delete_time,
                key,
                value: &[],
            }
            .encode(out),
            Self::Expiration { key, cas, seqno, rev, delete_time } => Deletion {
                opaque,
                vbucket,
                cas: *cas,
                datatype: Datatype::RAW,
                by_seqno: *seqno,
                rev_seqno: *rev,
                delete_time: delete_times.then_some(*delete_time),
                key,
                value: &[],
            }
            .encode(out),
            Self::Prepare { key, value, cas, seqno, rev, flags, expiry, datatype, level, deleted } => Prepare {
                opaque,
                vbucket,
                cas: *cas,
                datatype: *datatype,
                by_seqno: *seqno,
                rev_seqno: *rev,
                flags: *flags,
                expiration: *expiry,
                lock_time: 0,
                nru: 0,
                deleted: *deleted,
                level: *level,
                key,
                value,
            }
            .encode(out),
            Self::Commit { key, prepared_seqno, commit_seqno } => {
                Commit { opaque, vbucket, prepared_seqno: *prepared_seqno, commit_seqno: *commit_seqno, key }
                    .encode(out)
            }
            Self::Abort { key, prepared_seqno, abort_seqno } => {
                Abort { opaque, vbucket, prepared_seqno: *prepared_seqno, abort_seqno: *abort_seqno, key }.encode(out)
            }
        }
    }

    /// The item a data message carries (copied out of the read buffer), or None for other messages.
    pub fn from_message(msg: &DcpMessage<'_>) -> Option<DcpItem> {
        let b = Bytes::copy_from_slice;
        Some(match msg {
            DcpMessage::Mutation(m) => Self::Mutation {
                key: b(m.key),
                value: b(m.value),
                cas: m.cas,
                seqno: m.by_seqno,
                rev: m.rev_seqno,
                flags: m.flags,
                expiry: m.expiration,
                datatype: m.datatype,
            },
            DcpMessage::Deletion(d) => Self::Deletion {
                key: b(d.key),
                value: b(d.value),
                cas: d.cas,
                seqno: d.by_seqno,
                rev: d.rev_seqno,
                delete_time: d.delete_time.unwrap_or(0),
                datatype: d.datatype,
            },
            DcpMessage::Expiration(e) => Self::Expiration {
                key: b(e.key),
                cas: e.cas,
                seqno: e.by_seqno,
                rev: e.rev_seqno,
                delete_time: e.delete_time,
            },
            DcpMessage::Prepare(p) => Self::Prepare {
                key: b(p.key),
                value: b(p.value),
                cas: p.cas,
                seqno: p.by_seqno,
                rev: p.rev_seqno,
                flags: p.flags,
                expiry: p.expiration,
                datatype: p.datatype,
                level: p.level,
                deleted: p.deleted,
            },
            DcpMessage::Commit(c) => {
                Self::Commit { key: b(c.key), prepared_seqno: c.prepared_seqno, commit_seqno: c.commit_seqno }
            }
            DcpMessage::Abort(a) => {
                Self::Abort { key: b(a.key), prepared_seqno: a.prepared_seqno, abort_seqno: a.abort_seqno }
            }
            _ => return None,
        })
    }
}

/// Where a snapshot's items come from: the in-memory checkpoints or a backfill from disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SnapshotKind {
    Memory,
    Disk,
}

/// A consistent batch of a vBucket's changes covering seqnos `[start, end]`: at most one item per key (the
/// latest), in seqno order. Seqnos in the range may be missing (deduplicated, or not sent to this stream).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub start: Seqno,
    pub end: Seqno,
    pub kind: SnapshotKind,
    /// The vBucket's high completed seqno (the newest committed or aborted prepare), sent in v2 markers of disk
    /// snapshots; 0 when unknown.
    pub high_completed_seqno: Seqno,
    pub items: Vec<DcpItem>,
}

impl Snapshot {
    pub fn memory(start: Seqno, end: Seqno, items: Vec<DcpItem>) -> Snapshot {
        Snapshot { start, end, kind: SnapshotKind::Memory, high_completed_seqno: 0, items }
    }
    pub fn disk(start: Seqno, end: Seqno, items: Vec<DcpItem>) -> Snapshot {
        Snapshot { start, end, kind: SnapshotKind::Disk, high_completed_seqno: 0, items }
    }
}

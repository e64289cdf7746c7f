//! Conflict resolution for writes that carry their own metadata (SET_WITH_META, ADD_WITH_META, DEL_WITH_META):
//! whether an incoming version of a document beats the version a vBucket holds. Restores use it so that an older
//! backup does not overwrite newer data, and XDCR uses it so that two clusters replicating to each other converge
//! on the same version (a version never beats itself, so a mutation does not bounce back and forth).
//!
//! A pure function of the two versions' metadata and the bucket's mode, as Couchbase's buckets choose it
//! (`conflictResolutionType`):
//! - `seqno` ("most writes wins"): the higher revision seqno wins; on a tie the higher CAS, then (for a mutation)
//!   the later expiry, then the higher flags, then the version with xattrs over the one without.
//! - `lww` (last write wins): the higher CAS (a hybrid logical clock) wins; on a tie the higher revision, then as
//!   above.
//!
//! A deletion is compared on revision and CAS only (kv_engine's documented order for DEL_WITH_META). When every
//! compared field is equal the local version stays: the incoming write is refused (KEY_EEXISTS on the wire).

use std::cmp::Ordering;

use settee_types::Cas;

/// How a bucket resolves conflicts (Couchbase's `conflictResolutionType`, by its names in JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConflictMode {
    /// Revision seqno first (Couchbase's default, `seqno`).
    #[default]
    #[serde(rename = "seqno")]
    RevisionSeqno,
    /// CAS first (`lww`).
    #[serde(rename = "lww")]
    LastWriteWins,
}

impl ConflictMode {
    /// Couchbase's name: `seqno` or `lww`.
    pub fn name(self) -> &'static str {
        match self {
            ConflictMode::RevisionSeqno => "seqno",
            ConflictMode::LastWriteWins => "lww",
        }
    }

    /// The mode Couchbase's name gives (None for any other, `custom` included).
    pub fn from_name(name: &str) -> Option<ConflictMode> {
        [ConflictMode::RevisionSeqno, ConflictMode::LastWriteWins].into_iter().find(|m| m.name() == name)
    }
}

/// The metadata of one version of a document that conflict resolution compares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VersionMeta {
    pub rev: u64,
    pub cas: Cas,
    /// Absolute expiry (Unix seconds, 0 = never); a tombstone's delete time.
    pub expiry: u32,
    pub flags: u32,
    /// The value carries an xattr section.
    pub xattr: bool,
}

/// Whether `incoming` beats `local` under `mode`. `deletion` says the incoming write is a deletion.
pub fn incoming_wins(mode: ConflictMode, local: &VersionMeta, incoming: &VersionMeta, deletion: bool) -> bool {
    let first = match mode {
        ConflictMode::RevisionSeqno => incoming.rev.cmp(&local.rev).then(incoming.cas.cmp(&local.cas)),
        ConflictMode::LastWriteWins => incoming.cas.cmp(&local.cas).then(incoming.rev.cmp(&local.rev)),
    };
    let order = if deletion {
        first
    } else {
        first
            .then(incoming.expiry.cmp(&local.expiry))
            .then(incoming.flags.cmp(&local.flags))
            .then(incoming.xattr.cmp(&local.xattr))
    };
    order == Ordering::Greater
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(rev: u64, cas: Cas, expiry: u32, flags: u32) -> VersionMeta {
        VersionMeta { rev, cas, expiry, flags, xattr: false }
    }

    /// Proves the seqno mode's order: revision decides before CAS, CAS before expiry, expiry before flags, flags
    /// before xattrs, and a tie keeps the local version.
    #[test]
    fn seqno_mode_compares_revision_then_cas_then_expiry_then_flags() {
        let m = ConflictMode::RevisionSeqno;
        let local = meta(5, 100, 10, 1);
        assert!(incoming_wins(m, &local, &meta(6, 1, 0, 0), false), "higher revision wins despite lower CAS");
        assert!(!incoming_wins(m, &local, &meta(4, 999, 99, 9), false), "lower revision loses despite higher CAS");
        assert!(incoming_wins(m, &local, &meta(5, 101, 0, 0), false), "same revision: higher CAS wins");
        assert!(!incoming_wins(m, &local, &meta(5, 99, 99, 9), false), "same revision: lower CAS loses");
        assert!(incoming_wins(m, &local, &meta(5, 100, 11, 0), false), "then the later expiry");
        assert!(incoming_wins(m, &local, &meta(5, 100, 10, 2), false), "then the higher flags");
        assert!(!incoming_wins(m, &local, &local, false), "a version never beats itself");
        let with_xattr = VersionMeta { xattr: true, ..local };
        assert!(incoming_wins(m, &local, &with_xattr, false), "then xattrs over none");
    }

    /// Proves the lww mode's order: CAS decides before the revision.
    #[test]
    fn lww_mode_compares_cas_before_revision() {
        let m = ConflictMode::LastWriteWins;
        let local = meta(5, 100, 0, 0);
        assert!(incoming_wins(m, &local, &meta(1, 101, 0, 0), false), "higher CAS wins despite lower revision");
        assert!(!incoming_wins(m, &local, &meta(9, 99, 0, 0), false), "lower CAS loses despite higher revision");
        assert!(incoming_wins(m, &local, &meta(6, 100, 0, 0), false), "same CAS: higher revision wins");
        assert!(!incoming_wins(m, &local, &local, false));
    }

    /// Proves that a deletion is compared on revision and CAS only: a tie there keeps the local version even when
    /// the incoming tombstone's delete time or flags are higher.
    #[test]
    fn deletion_ignores_expiry_and_flags_when_revision_and_cas_tie() {
        let local = meta(3, 50, 0, 0);
        for m in [ConflictMode::RevisionSeqno, ConflictMode::LastWriteWins] {
            assert!(!incoming_wins(m, &local, &meta(3, 50, 999, 7), true));
            assert!(incoming_wins(m, &local, &meta(4, 51, 0, 0), true));
        }
    }
}

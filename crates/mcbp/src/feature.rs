/// HELLO feature codes (kv_engine include/mcbp/protocol/feature.h); PROTOCOL.md §2.2 says what each one obliges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Feature {
    Tls = 0x02,
    TcpNoDelay = 0x03,
    MutationSeqno = 0x04,
    TcpDelay = 0x05,
    Xattr = 0x06,
    Xerror = 0x07,
    SelectBucket = 0x08,
    Snappy = 0x0a,
    Json = 0x0b,
    Duplex = 0x0c,
    ClustermapChangeNotification = 0x0d,
    UnorderedExecution = 0x0e,
    Tracing = 0x0f,
    AltRequestSupport = 0x10,
    SyncReplication = 0x11,
    Collections = 0x12,
    SnappyEverywhere = 0x13,
    PreserveTtl = 0x14,
    VAttr = 0x15,
    SubdocCreateAsDeleted = 0x17,
    SubdocDocumentMacroSupport = 0x18,
    SubdocReplaceBodyWithXattr = 0x19,
    SubdocReplicaRead = 0x1c,
    GetClusterConfigWithKnownVersion = 0x1d,
    DedupeNotMyVbucketClustermap = 0x1e,
    ClustermapChangeNotificationBrief = 0x1f,
    SubdocBinaryXattr = 0x21,
}

impl Feature {
    pub fn from_code(c: u16) -> Option<Feature> {
        use Feature::*;
        Some(match c {
            0x02 => Tls,
            0x03 => TcpNoDelay,
            0x04 => MutationSeqno,
            0x05 => TcpDelay,
            0x06 => Xattr,
            0x07 => Xerror,
            0x08 => SelectBucket,
            0x0a => Snappy,
            0x0b => Json,
            0x0c => Duplex,
            0x0d => ClustermapChangeNotification,
            0x0e => UnorderedExecution,
            0x0f => Tracing,
            0x10 => AltRequestSupport,
            0x11 => SyncReplication,
            0x12 => Collections,
            0x13 => SnappyEverywhere,
            0x14 => PreserveTtl,
            0x15 => VAttr,
            0x17 => SubdocCreateAsDeleted,
            0x18 => SubdocDocumentMacroSupport,
            0x19 => SubdocReplaceBodyWithXattr,
            0x1c => SubdocReplicaRead,
            0x1d => GetClusterConfigWithKnownVersion,
            0x1e => DedupeNotMyVbucketClustermap,
            0x1f => ClustermapChangeNotificationBrief,
            0x21 => SubdocBinaryXattr,
            _ => return None,
        })
    }
    pub fn code(self) -> u16 {
        self as u16
    }
}

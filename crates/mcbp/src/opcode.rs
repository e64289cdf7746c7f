//! The opcode table, defined once: code, name, and the properties the server derives its checks from.

/// What the protocol says about an opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpcodeFlags {
    /// The key starts with a LEB128 collection id when Collections was negotiated.
    pub collection_key: bool,
    /// Allowed before authentication (kv_engine's allow-list).
    pub pre_auth: bool,
    /// Needs a selected bucket.
    pub needs_bucket: bool,
    /// Changes a document; may carry durability and preserve-TTL frames.
    pub mutation: bool,
}

const fn f(collection_key: bool, pre_auth: bool, needs_bucket: bool, mutation: bool) -> OpcodeFlags {
    OpcodeFlags { collection_key, pre_auth, needs_bucket, mutation }
}
/// Document reads: collection key, bucket.
const READ: OpcodeFlags = f(true, false, true, false);
/// Document writes.
const WRITE: OpcodeFlags = f(true, false, true, true);
/// Session commands allowed before auth.
const PRE_AUTH: OpcodeFlags = f(false, true, false, false);
/// Bucket-level commands without a document key.
const BUCKET: OpcodeFlags = f(false, false, true, false);
/// Connection-level commands after auth.
const CONN: OpcodeFlags = f(false, false, false, false);
/// DCP commands (their bodies are in [`crate::dcp`]): bucket-level, only meaningful on a DCP connection.
const DCP: OpcodeFlags = BUCKET;

macro_rules! opcodes {
    ($( $variant:ident = $code:literal, $name:literal, $flags:expr; )*) => {
        /// Every opcode settee understands. Anything else is answered UNKNOWN_COMMAND.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Opcode {
            $( $variant = $code, )*
        }

        impl Opcode {
            pub const ALL: &'static [Opcode] = &[$( Opcode::$variant, )*];

            pub fn from_byte(b: u8) -> Option<Opcode> {
                match b {
                    $( $code => Some(Opcode::$variant), )*
                    _ => None,
                }
            }
            pub fn name(self) -> &'static str {
                match self { $( Opcode::$variant => $name, )* }
            }
            pub fn flags(self) -> OpcodeFlags {
                match self { $( Opcode::$variant => $flags, )* }
            }
        }
    };
}

opcodes! {
    Get = 0x00, "GET", READ;
    Set = 0x01, "SET", WRITE;
    Add = 0x02, "ADD", WRITE;
    Replace = 0x03, "REPLACE", WRITE;
    Delete = 0x04, "DELETE", WRITE;
    Increment = 0x05, "INCREMENT", WRITE;
    Decrement = 0x06, "DECREMENT", WRITE;
    Noop = 0x0a, "NOOP", CONN;
    Version = 0x0b, "VERSION", CONN;
    Append = 0x0e, "APPEND", WRITE;
    Prepend = 0x0f, "PREPEND", WRITE;
    Stat = 0x10, "STAT", BUCKET;
    Touch = 0x1c, "TOUCH", WRITE;
    Gat = 0x1d, "GAT", WRITE;
    Hello = 0x1f, "HELLO", PRE_AUTH;
    SaslListMechs = 0x20, "SASL_LIST_MECHS", PRE_AUTH;
    SaslAuth = 0x21, "SASL_AUTH", PRE_AUTH;
    SaslStep = 0x22, "SASL_STEP", PRE_AUTH;
    DcpOpen = 0x50, "DCP_OPEN", DCP;
    DcpAddStream = 0x51, "DCP_ADD_STREAM", DCP;
    DcpCloseStream = 0x52, "DCP_CLOSE_STREAM", DCP;
    DcpStreamReq = 0x53, "DCP_STREAM_REQ", DCP;
    DcpGetFailoverLog = 0x54, "DCP_GET_FAILOVER_LOG", DCP;
    DcpStreamEnd = 0x55, "DCP_STREAM_END", DCP;
    DcpSnapshotMarker = 0x56, "DCP_SNAPSHOT_MARKER", DCP;
    DcpMutation = 0x57, "DCP_MUTATION", DCP;
    DcpDeletion = 0x58, "DCP_DELETION", DCP;
    DcpExpiration = 0x59, "DCP_EXPIRATION", DCP;
    DcpSetVbucketState = 0x5b, "DCP_SET_VBUCKET_STATE", DCP;
    DcpNoop = 0x5c, "DCP_NOOP", DCP;
    DcpBufferAck = 0x5d, "DCP_BUFFER_ACKNOWLEDGEMENT", DCP;
    DcpControl = 0x5e, "DCP_CONTROL", DCP;
    DcpSystemEvent = 0x5f, "DCP_SYSTEM_EVENT", DCP;
    DcpPrepare = 0x60, "DCP_PREPARE", DCP;
    DcpSeqnoAcknowledged = 0x61, "DCP_SEQNO_ACKNOWLEDGED", DCP;
    DcpCommit = 0x62, "DCP_COMMIT", DCP;
    DcpAbort = 0x63, "DCP_ABORT", DCP;
    DcpSeqnoAdvanced = 0x64, "DCP_SEQNO_ADVANCED", DCP;
    DcpOsoSnapshot = 0x65, "DCP_OSO_SNAPSHOT", DCP;
    SetParam = 0x82, "SET_PARAM", BUCKET;
    GetReplica = 0x83, "GET_REPLICA", READ;
    SelectBucket = 0x89, "SELECT_BUCKET", CONN;
    ObserveSeqno = 0x91, "OBSERVE_SEQNO", BUCKET;
    GetLocked = 0x94, "GET_LOCKED", WRITE;
    Unlock = 0x95, "UNLOCK", WRITE;
    GetMeta = 0xa0, "GET_META", READ;
    SetWithMeta = 0xa2, "SET_WITH_META", WRITE;
    AddWithMeta = 0xa4, "ADD_WITH_META", WRITE;
    DelWithMeta = 0xa8, "DEL_WITH_META", WRITE;
    GetClusterConfig = 0xb5, "GET_CLUSTER_CONFIG", CONN;
    GetRandomKey = 0xb6, "GET_RANDOM_KEY", BUCKET;
    GetCollectionsManifest = 0xba, "GET_COLLECTIONS_MANIFEST", BUCKET;
    GetCollectionId = 0xbb, "GET_COLLECTION_ID", BUCKET;
    SubdocGet = 0xc5, "SUBDOC_GET", READ;
    SubdocExists = 0xc6, "SUBDOC_EXISTS", READ;
    SubdocDictAdd = 0xc7, "SUBDOC_DICT_ADD", WRITE;
    SubdocDictUpsert = 0xc8, "SUBDOC_DICT_UPSERT", WRITE;
    SubdocDelete = 0xc9, "SUBDOC_DELETE", WRITE;
    SubdocReplace = 0xca, "SUBDOC_REPLACE", WRITE;
    SubdocArrayPushLast = 0xcb, "SUBDOC_ARRAY_PUSH_LAST", WRITE;
    SubdocArrayPushFirst = 0xcc, "SUBDOC_ARRAY_PUSH_FIRST", WRITE;
    SubdocArrayInsert = 0xcd, "SUBDOC_ARRAY_INSERT", WRITE;
    SubdocArrayAddUnique = 0xce, "SUBDOC_ARRAY_ADD_UNIQUE", WRITE;
    SubdocCounter = 0xcf, "SUBDOC_COUNTER", WRITE;
    SubdocMultiLookup = 0xd0, "SUBDOC_MULTI_LOOKUP", READ;
    SubdocMultiMutation = 0xd1, "SUBDOC_MULTI_MUTATION", WRITE;
    SubdocGetCount = 0xd2, "SUBDOC_GET_COUNT", READ;
    SubdocReplaceBodyWithXattr = 0xd3, "SUBDOC_REPLACE_BODY_WITH_XATTR", WRITE;
    GetCmdTimer = 0xf3, "GET_CMD_TIMER", CONN;
    GetErrorMap = 0xfe, "GET_ERROR_MAP", PRE_AUTH;
}

impl Opcode {
    /// The DCP commands (0x50..=0x65), whose bodies [`crate::dcp`] encodes and decodes.
    pub fn is_dcp(self) -> bool {
        (0x50..=0x65).contains(&(self as u8))
    }

    /// The single-path sub-document opcodes, which share their code with the spec opcode of a multi-path request.
    pub fn is_single_path_subdoc(self) -> bool {
        let c = self as u8;
        (0xc5..=0xcf).contains(&c) || c == 0xd2 || c == 0xd3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every opcode in the table round-trips through its byte, and unknown bytes are not opcodes.
    #[test]
    fn opcode_table_round_trips() {
        for op in Opcode::ALL {
            assert_eq!(Opcode::from_byte(*op as u8), Some(*op));
        }
        assert_eq!(Opcode::from_byte(0x7f), None);
        assert!(Opcode::Hello.flags().pre_auth && !Opcode::Get.flags().pre_auth);
        assert!(Opcode::SubdocCounter.is_single_path_subdoc() && !Opcode::SubdocMultiLookup.is_single_path_subdoc());
    }
}

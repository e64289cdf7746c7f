//! DCP (Database Change Protocol) message bodies: one typed struct per message with `encode` into a whole request
//! frame and `decode` from a decoded [`Request`], plus [`DcpMessage`] to decode whichever arrives.
//!
//! Layouts follow kv_engine's docs/dcp/documentation/commands/*.md and docs/BinaryProtocol.md. Every DCP message is
//! a request (magic 0x80), whichever side sends it: the producer's data messages travel server → client. Decoders
//! check the opcode, the extras length and the presence of key and value before reading, and never panic. Keys are
//! opaque bytes: with collections they start with a LEB128 collection id, which is the caller's business.

mod codec;
mod control;
mod item;
mod stream;
#[cfg(test)]
mod tests;

pub use control::{
    AddStream, BufferAck, CloseStream, DcpControl, DcpNoop, DcpOpen, GetFailoverLog, SeqnoAcknowledged,
    SetVbucketState, VbucketState,
};
pub use item::{Abort, Commit, Deletion, Expiration, Mutation, Prepare};
pub use stream::{
    encode_failover_log_response, MarkerFormat, OsoSnapshot, SeqnoAdvanced, SnapshotMarker, StreamEnd, StreamEndReason,
    StreamReq, StreamReqResponse, SystemEvent,
};

use crate::opcode::Opcode;
use crate::request::Request;
use crate::response::encode_response;
use settee_types::Status;

/// The status of a STREAM_REQ reply telling the consumer to roll back (body: the seqno, u64).
pub const STATUS_ROLLBACK: u16 = 0x23;

/// A DCP frame whose layout is wrong. The receiver answers EINVAL (or drops the connection, for a consumer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DcpDecodeError {
    /// The opcode byte is not a DCP opcode.
    NotDcp(u8),
    /// A typed decoder was given another opcode's frame.
    WrongOpcode {
        expected: Opcode,
        got: u8,
    },
    ExtrasLength {
        opcode: Opcode,
        len: usize,
    },
    MissingKey(Opcode),
    UnexpectedKey(Opcode),
    UnexpectedValue(Opcode),
    /// The value is missing or does not have the message's layout.
    BadValue(Opcode),
    MarkerVersion(u8),
    DurabilityLevel(u8),
    VbucketState(u8),
}

impl DcpDecodeError {
    /// The status a receiver answers with.
    pub fn status(&self) -> Status {
        Status::Einval
    }
}

impl std::fmt::Display for DcpDecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotDcp(b) => write!(f, "opcode 0x{b:02x} is not a DCP opcode"),
            Self::WrongOpcode { expected, got } => write!(f, "expected {}, got opcode 0x{got:02x}", expected.name()),
            Self::ExtrasLength { opcode, len } => write!(f, "{}: invalid extras length {len}", opcode.name()),
            Self::MissingKey(op) => write!(f, "{}: key required", op.name()),
            Self::UnexpectedKey(op) => write!(f, "{}: key not allowed", op.name()),
            Self::UnexpectedValue(op) => write!(f, "{}: value not allowed", op.name()),
            Self::BadValue(op) => write!(f, "{}: invalid value", op.name()),
            Self::MarkerVersion(v) => write!(f, "unknown snapshot marker version {v}"),
            Self::DurabilityLevel(l) => write!(f, "invalid durability level {l}"),
            Self::VbucketState(s) => write!(f, "invalid vbucket state {s}"),
        }
    }
}

impl std::error::Error for DcpDecodeError {}

macro_rules! flag_set {
    ($(#[$doc:meta])* $name:ident { $( $(#[$fdoc:meta])* $flag:ident = $bit:literal, )* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name(pub u32);

        impl $name {
            $( $(#[$fdoc])* pub const $flag: $name = $name($bit); )*

            pub fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }
            pub fn with(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }
        }
    };
}

flag_set! {
    /// DCP_OPEN flags (open-connection.md).
    DcpOpenFlags {
        /// Open a producer (the sender will consume); clear for a consumer.
        PRODUCER = 0x01,
        /// Formerly the notifier flag; must be clear.
        INVALID = 0x02,
        INCLUDE_XATTRS = 0x04,
        NO_VALUE = 0x08,
        /// Deletions use the v2 layout carrying a delete time.
        INCLUDE_DELETE_TIMES = 0x20,
        NO_VALUE_WITH_UNDERLYING_DATATYPE = 0x40,
        INCLUDE_DELETED_USER_XATTRS = 0x100,
        SKIP_DELETES_IN_INITIAL_BACKFILL = 0x200,
    }
}

flag_set! {
    /// DCP_STREAM_REQ / DCP_ADD_STREAM flags (add-stream.md).
    StreamFlags {
        TAKEOVER = 0x01,
        DISK_ONLY = 0x02,
        /// Stream up to the vBucket's high seqno at the time of the request, whatever the end seqno says.
        TO_LATEST = 0x04,
        /// Removed in 5.0 (use DCP_OPEN's NO_VALUE).
        NO_VALUE = 0x08,
        ACTIVE_VB_ONLY = 0x10,
        STRICT_VB_UUID = 0x20,
        /// Start from the vBucket's high seqno; the start seqno is ignored.
        FROM_LATEST = 0x40,
        IGNORE_PURGED_TOMBSTONES = 0x80,
        CACHE_TRANSFER = 0x100,
    }
}

flag_set! {
    /// Snapshot marker flags (snapshot-marker.md).
    SnapshotFlags {
        MEMORY = 0x01,
        DISK = 0x02,
        CHECKPOINT = 0x04,
        /// The consumer replies to the marker once it has the whole snapshot (takeover).
        ACK = 0x08,
        HISTORY = 0x10,
        MAY_CONTAIN_DUPLICATES = 0x20,
    }
}

/// Defines [`DcpMessage`] from one table (variant, body type, opcode): the enum, decoding by opcode, and the
/// methods every body shares.
macro_rules! dcp_messages {
    ($( $variant:ident($body:ty) = $opcode:ident, )*) => {
        /// Any DCP message, decoded.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum DcpMessage<'a> {
            $( $variant($body), )*
        }

        impl<'a> DcpMessage<'a> {
            /// Decodes any DCP request by its opcode.
            pub fn decode(req: &Request<'a>) -> Result<DcpMessage<'a>, DcpDecodeError> {
                let not_dcp = DcpDecodeError::NotDcp(req.opcode);
                Ok(match Opcode::from_byte(req.opcode).ok_or(not_dcp)? {
                    $( Opcode::$opcode => DcpMessage::$variant(<$body>::decode(req)?), )*
                    _ => return Err(not_dcp),
                })
            }

            /// Appends the whole request frame.
            pub fn encode(&self, out: &mut Vec<u8>) {
                match self {
                    $( DcpMessage::$variant(m) => m.encode(out), )*
                }
            }

            /// The opaque of the frame: the stream's opaque for stream messages.
            pub fn opaque(&self) -> u32 {
                match self {
                    $( DcpMessage::$variant(m) => m.opaque, )*
                }
            }
        }
    };
}

dcp_messages! {
    Open(DcpOpen<'a>) = DcpOpen,
    AddStream(AddStream) = DcpAddStream,
    CloseStream(CloseStream) = DcpCloseStream,
    StreamReq(StreamReq<'a>) = DcpStreamReq,
    GetFailoverLog(GetFailoverLog) = DcpGetFailoverLog,
    StreamEnd(StreamEnd) = DcpStreamEnd,
    SnapshotMarker(SnapshotMarker) = DcpSnapshotMarker,
    Mutation(Mutation<'a>) = DcpMutation,
    Deletion(Deletion<'a>) = DcpDeletion,
    Expiration(Expiration<'a>) = DcpExpiration,
    SetVbucketState(SetVbucketState<'a>) = DcpSetVbucketState,
    Noop(DcpNoop) = DcpNoop,
    BufferAck(BufferAck) = DcpBufferAck,
    Control(DcpControl<'a>) = DcpControl,
    SystemEvent(SystemEvent<'a>) = DcpSystemEvent,
    Prepare(Prepare<'a>) = DcpPrepare,
    SeqnoAcknowledged(SeqnoAcknowledged) = DcpSeqnoAcknowledged,
    Commit(Commit<'a>) = DcpCommit,
    Abort(Abort<'a>) = DcpAbort,
    SeqnoAdvanced(SeqnoAdvanced) = DcpSeqnoAdvanced,
    OsoSnapshot(OsoSnapshot) = DcpOsoSnapshot,
}

/// Appends a reply to a DCP request with no body (NOOP, CONTROL, BUFFER_ACK, a snapshot-marker ACK, or an error).
pub fn encode_dcp_response(out: &mut Vec<u8>, opcode: Opcode, status: u16, opaque: u32) {
    encode_response(out, opcode as u8, status, opaque, 0, 0, &[], &[], &[], &[]);
}

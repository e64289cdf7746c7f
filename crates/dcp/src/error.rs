//! The errors of each operation a caller must branch on, with the wire status each one answers with.

use settee_mcbp::dcp::{DcpDecodeError, STATUS_ROLLBACK};
use settee_types::{Seqno, Status, VbId};

/// Why a producer refused a DCP_STREAM_REQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StreamRequestError {
    /// The consumer's history diverges from the producer's: it must roll back to `to` and ask again.
    #[error("consumer must roll back to seqno {to}")]
    Rollback { to: Seqno },
    /// start > end, or the snapshot does not contain the start seqno.
    #[error("invalid seqno range")]
    InvalidRange,
    /// The connection already streams this vBucket.
    #[error("a stream for this vBucket already exists on the connection")]
    StreamExists,
    /// Flags this producer does not implement (takeover, disk only).
    #[error("unsupported stream flags 0x{0:x}")]
    UnsupportedFlags(u32),
    /// A collections filter or stream id in the value, which this producer does not implement.
    #[error("stream-request values (collection filters, stream ids) are not supported")]
    ValueNotSupported,
}

impl StreamRequestError {
    /// The reply status. ROLLBACK (0x23) has no entry in `settee_types::Status` yet, so this is the raw code.
    pub fn status_code(&self) -> u16 {
        match self {
            Self::Rollback { .. } => STATUS_ROLLBACK,
            Self::InvalidRange => Status::Erange.code(),
            Self::StreamExists => Status::KeyEexists.code(),
            Self::UnsupportedFlags(_) | Self::ValueNotSupported => Status::NotSupported.code(),
        }
    }
}

/// A driver fed a producer stream something it must not: a bug in the driver, reported instead of sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("no stream for vBucket {0:?}")]
    NoStream(VbId),
    #[error("the stream has ended")]
    NotActive,
    #[error("snapshot start {start} is after its end {end}")]
    BadRange { start: Seqno, end: Seqno },
    #[error("item seqno {seqno} lies outside its snapshot [{start}, {end}]")]
    ItemOutsideSnapshot { seqno: Seqno, start: Seqno, end: Seqno },
    #[error("item seqno {seqno} does not follow {previous}")]
    NotIncreasing { seqno: Seqno, previous: Seqno },
    /// A stream without sync writes cannot express a commit: the driver must send the committed document as a
    /// mutation.
    #[error("commit at seqno {seqno} on a stream without sync writes")]
    CommitWithoutSyncWrites { seqno: Seqno },
}

/// Why a DCP_OPEN cannot make a producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The PRODUCER flag is clear: the client wants this node to consume.
    #[error("not a producer open")]
    NotProducer,
    /// The invalid bit (0x02) is set, or NO_VALUE is combined with NO_VALUE_WITH_UNDERLYING_DATATYPE.
    #[error("invalid DCP_OPEN flags 0x{0:x}")]
    InvalidFlags(u32),
    /// Connection names are at most 200 bytes.
    #[error("connection name of {0} bytes exceeds 200")]
    NameTooLong(usize),
}

impl OpenError {
    pub fn status(&self) -> Status {
        Status::Einval
    }
}

/// A consumer stream received something a correct producer does not send; the driver drops the stream (and
/// typically the connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConsumerError {
    #[error("malformed message: {0}")]
    Decode(#[from] DcpDecodeError),
    #[error("stream is not accepting messages")]
    NotStreaming,
    #[error("message for vBucket {vbucket} opaque {opaque} reached another stream")]
    WrongStream { vbucket: u16, opaque: u32 },
    #[error("item seqno {seqno} arrived before any snapshot marker")]
    NoSnapshot { seqno: Seqno },
    #[error("item seqno {seqno} lies outside the snapshot [{start}, {end}]")]
    OutsideSnapshot { seqno: Seqno, start: Seqno, end: Seqno },
    #[error("seqno {seqno} does not follow {last}")]
    NotIncreasing { seqno: Seqno, last: Seqno },
    #[error("snapshot marker [{start}, {end}] does not advance past {position}")]
    BadMarker { start: Seqno, end: Seqno, position: Seqno },
    #[error("unexpected opcode 0x{0:02x} on a stream")]
    Unexpected(u8),
    #[error("malformed stream-request reply")]
    BadResponse,
}

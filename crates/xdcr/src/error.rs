//! What the core refuses: events that break the reading contract (a driver bug or a misbehaving source).

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum XdcrError {
    #[error("vBucket {0} is not being read")]
    NotReading(u16),
    #[error("vBucket {vb}: change at seqno {seqno} does not follow seqno {after}")]
    OutOfOrder { vb: u16, seqno: u64, after: u64 },
    #[error("vBucket {vb}: change at seqno {seqno} outside the snapshot {start}..={end}")]
    OutsideSnapshot { vb: u16, seqno: u64, start: u64, end: u64 },
}

//! The vocabulary every other settee crate speaks: vBucket ids, seqnos, CAS values, collection ids, datatypes,
//! durability levels, the failover log, wire statuses, protocol limits and the `Clock` all time comes from.
//!
//! This crate holds plain data and depends on nothing, so that every other crate can depend on it.

mod clock;
mod datatype;
mod durability;
mod failover;
mod ids;
pub mod limits;
mod status;
mod utc;

pub use clock::{Clock, ManualClock, SystemClock};
pub use datatype::Datatype;
pub use durability::DurabilityLevel;
pub use failover::{FailoverEntry, FailoverLog, StreamStart, FAILOVER_ENTRY_BYTES};
pub use ids::{vbucket_for_key, Cas, CollectionId, OnDisk, Seqno, VbId, VbUuid, LOCKED_CAS};
pub use status::{ErrorAttr, Status};
pub use utc::UtcTime;

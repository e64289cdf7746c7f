//! Persistence between the engine and the store, without threads, clocks or I/O of its own beyond the
//! [`settee_store::VbStore`] calls: a flusher round ([`flusher::write_round`], then the caller's fsync, then
//! [`flusher::Written::persisted`]) and warmup ([`warmup::load`]).
//!
//! The server runs these on its flusher and warmup threads (`server/src/persistence`); the deterministic simulator
//! (`crates/sim`) runs the same functions on its simulated clock, with the fsync of a round landing at a later step
//! and crashes that lose what was not synced (ADR 0004).

pub mod flusher;
pub mod records;
pub mod warmup;

pub use flusher::{write_round, Written, ROUND_BYTES_TARGET};
pub use records::{record_of, snapshot_of};
pub use warmup::{load, Warmed};

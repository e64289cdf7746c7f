//! settee-store integration tests: crash consistency with a writer process killed by SIGKILL, torn journal tails,
//! a full disk through the fault seam, and space reclamation by purge and compaction.

mod crash;
mod disk_full;
mod space;
mod torn_tail;
mod writer;

//! `settee backup`: backups of a cluster's buckets into an archive directory, in the manner of Couchbase's
//! cbbackupmgr (`config`, `backup`, `restore`, `info`, `merge`, `remove`), so its users find the same commands and flags.
//!
//! - A backup reads every vBucket over DCP from the node holding it active (the bucket's vBucket map), up to the
//!   vBucket's high seqno at the moment the stream starts (a consistent point per vBucket), and saves every
//!   document version with its metadata ([`record`]), the seqno and vbuuid reached per vBucket, the bucket's
//!   settings and its scopes and collections ([`layout`]). The next backup of the repository starts each vBucket
//!   where the previous one stopped (incremental); a vBucket whose history changed (a rollback) is read whole.
//! - Every file is checksummed (CRC32C); [`info`] reports damaged files and a restore refuses them.
//! - A restore writes through the KV service with SET_WITH_META / DEL_WITH_META so CAS, revision, flags and expiry
//!   are kept, creating missing scopes and collections first.
//!
//! It depends on the codec, the DCP consumer state machine, the smart client and tokio; never on the server or
//! the engine: it talks to a cluster only through its public ports, as cbbackupmgr does.

mod backup;
mod cli;
mod create_bucket;
mod dcp_reader;
mod error;
mod indexes;
mod info;
mod layout;
mod merge;
mod record;
mod repo;
mod rest;
mod restore;
mod time;
mod users;

pub use cli::{BackupCommand, Subcommand};
pub use error::BackupError;
pub use record::{Record, RecordKind};

/// Runs one `settee backup` subcommand on a runtime of its own.
pub fn run(cmd: BackupCommand) -> Result<(), BackupError> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(BackupError::Io)?;
    runtime.block_on(cli::dispatch(cmd))
}

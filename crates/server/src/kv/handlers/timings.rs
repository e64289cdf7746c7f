//! GET_CMD_TIMER (0xf3): one opcode's latency histogram in kv_engine's JSON (`total`, `bucketsLow`, `data`), which
//! Couchbase's `mctimings` and `settee timings` read. The opcode to report is the one byte of extras; the key
//! names what to report on, as kv_engine reads it:
//! - empty, or the selected bucket's name: the selected bucket (its stats privilege, Couchbase's SimpleStats);
//! - `/all/`: every bucket the user may read the stats of, plus the no-bucket timings for a user with the global
//!   stats privilege; EACCESS when that is nothing;
//! - `@no bucket@`, or any key while no bucket is selected: the commands run outside a bucket, which needs the
//!   global stats privilege (Couchbase's Stats: here the roles that read cluster settings);
//! - another bucket's name: NOT_SUPPORTED (kv_engine dropped that).

use settee_mcbp::Request;
use settee_types::Status;

use crate::kv::dispatch::{KvError, KvResult};
use crate::kv::pending::Out;
use crate::kv::reply;
use crate::kv::session::Session;
use crate::node::Node;
use crate::timings::Snapshot;

pub fn get_cmd_timer(node: &Node, s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let [opcode] = req.extras else {
        return Err(KvError::Status(Status::Einval));
    };
    let opcode = *opcode;
    let global_stats = || s.user.as_deref().is_some_and(|u| node.users.can_read_settings(u));
    let snapshot = match (req.key, &s.bucket) {
        (b"/all/", _) => all_buckets(node, s, opcode, global_stats())?,
        (b"@no bucket@", _) | (_, None) => {
            if !global_stats() {
                return Err(KvError::Status(Status::Eaccess));
            }
            node.timings.no_bucket.snapshot(opcode)
        }
        (key, Some(b)) if key.is_empty() || key == b.name().as_bytes() => {
            if !s.access.stats {
                return Err(KvError::Status(Status::Eaccess));
            }
            b.timings.snapshot(opcode)
        }
        _ => return Err(KvError::Status(Status::NotSupported)),
    };
    reply::json(out, req, Status::Success, snapshot.to_kv_json().to_string().as_bytes());
    Ok(())
}

/// The sum over every bucket whose stats the user may read (and the no-bucket timings with `global_stats`).
fn all_buckets(node: &Node, s: &Session, opcode: u8, global_stats: bool) -> Result<Snapshot, KvError> {
    let user = s.user.as_deref().unwrap_or_default();
    let mut sum = Snapshot::default();
    let mut any = global_stats;
    if global_stats {
        sum.merge(&node.timings.no_bucket.snapshot(opcode));
    }
    for b in node.buckets() {
        if node.users.bucket_access(user, &b.name()).stats {
            any = true;
            sum.merge(&b.timings.snapshot(opcode));
        }
    }
    if any {
        Ok(sum)
    } else {
        Err(KvError::Status(Status::Eaccess))
    }
}

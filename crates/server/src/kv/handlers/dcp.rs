//! DCP_OPEN on a KV connection: the connection becomes a DCP producer (`crate::dcp::producer` takes its socket
//! once the reply is written). Other DCP commands are only valid on such a connection.

use settee_dcp::{OpenError, ProducerConnection};
use settee_mcbp::dcp::{DcpOpen, DcpOpenFlags};
use settee_mcbp::Request;
use settee_types::Status;

use crate::audit::events;
use crate::kv::dispatch::{KvError, KvResult};
use crate::kv::pending::Out;
use crate::kv::reply;
use crate::kv::session::Session;
use crate::node::Node;

/// What the connection loop needs to become a producer.
pub struct DcpUpgrade {
    pub conn: ProducerConnection,
    pub include_xattrs: bool,
    /// Counts the connection while it lives when another node's replication feed opened it.
    pub replication: Option<crate::dcp::ReplicationGuard>,
}

pub fn open(node: &Node, s: &mut Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let open = DcpOpen::decode(req).map_err(|e| KvError::Status(e.status()))?;
    if !s.access.dcp {
        // Couchbase's DcpProducer privilege (data_dcp_reader, bucket_full_access, admin ...): reading documents
        // one by one (data_reader) does not allow streaming the whole bucket.
        tracing::info!(peer = %s.peer, user = s.user.as_deref().unwrap_or_default(), "dcp open refused: no dcp privilege");
        return Err(KvError::Status(Status::Eaccess));
    }
    let conn = ProducerConnection::open(&open, s.collections(), std::time::Duration::ZERO).map_err(|e| {
        tracing::info!(peer = %s.peer, error = %e, "dcp open refused");
        KvError::Status(match e {
            OpenError::NotProducer => Status::NotSupported,
            _ => Status::Einval,
        })
    })?;
    let include_xattrs = open.flags.contains(DcpOpenFlags::INCLUDE_XATTRS);
    if node.audit.wants(events::DCP_OPEN) {
        let bucket = s.bucket.as_ref().map(|b| b.name()).unwrap_or_default();
        let name = String::from_utf8_lossy(req.key).into_owned();
        let fields = crate::audit_fields![("bucket", bucket), ("name", name)];
        node.audit.log(events::DCP_OPEN, s.identity(), s.addrs(), fields);
    }
    let name = String::from_utf8_lossy(req.key);
    let replication = crate::dcp::replica_node_of(&name).map(|_| node.replication_producers.open(s.tls));
    s.dcp = Some(Box::new(DcpUpgrade { conn, include_xattrs, replication }));
    reply::status(out, req, Status::Success);
    Ok(())
}

/// A DCP command on a connection that did not open DCP.
pub fn not_open(s: &Session, req: &Request<'_>) -> KvResult {
    tracing::debug!(peer = %s.peer, opcode = req.opcode, "dcp command on a connection without DCP_OPEN");
    Err(KvError::Status(Status::Einval))
}

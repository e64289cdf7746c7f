//! Per-connection protocol state: negotiated features, authentication, the selected bucket.

use std::net::SocketAddr;
use std::sync::Arc;

use settee_mcbp::Feature;

use crate::auth::{BucketAccess, ScramServer};
use crate::node::BucketHandle;

/// The HELLO features of one connection, as a bit set indexed by feature code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features(u64);

impl Features {
    pub fn has(self, f: Feature) -> bool {
        self.0 & (1 << f.code()) != 0
    }
    pub fn insert(&mut self, f: Feature) {
        self.0 |= 1 << f.code();
    }
}

/// The features settee agrees to, with what each obliges the server to do (PROTOCOL.md §2.2). With
/// UnorderedExecution a durable write waiting for persistence does not hold up the requests behind it.
/// Cluster-map notifications (0x0d full, 0x1f brief) are pushed on every config change to connections that also
/// agreed Duplex (gocbcore stops polling a connection that agreed 0x1f). Tracing and SnappyEverywhere are left out
/// until implemented.
pub const SUPPORTED_FEATURES: &[Feature] = &[
    Feature::TcpNoDelay,
    Feature::MutationSeqno,
    Feature::Xattr,
    Feature::Xerror,
    Feature::SelectBucket,
    Feature::Snappy,
    Feature::Json,
    Feature::Duplex,
    Feature::ClustermapChangeNotification,
    Feature::ClustermapChangeNotificationBrief,
    Feature::UnorderedExecution,
    Feature::AltRequestSupport,
    Feature::SyncReplication,
    Feature::Collections,
    Feature::PreserveTtl,
    Feature::VAttr,
    Feature::SubdocCreateAsDeleted,
    Feature::SubdocDocumentMacroSupport,
    Feature::SubdocReplaceBodyWithXattr,
    Feature::SubdocReplicaRead,
    Feature::GetClusterConfigWithKnownVersion,
    Feature::DedupeNotMyVbucketClustermap,
    Feature::SubdocBinaryXattr,
];

pub struct Session {
    pub peer: SocketAddr,
    /// The node's end of the connection, for the audit log.
    pub local: Option<SocketAddr>,
    /// Whether the connection came to the TLS port (PLAIN may be refused elsewhere).
    pub tls: bool,
    /// The user name the last SASL attempt named, for the audit log's failure events.
    pub auth_attempt: String,
    /// The SASL mechanism of the last attempt (`PLAIN`, `SCRAM-SHA512` ...), for the audit log.
    pub auth_mechanism: &'static str,
    pub features: Features,
    /// The client's HELLO agent string, for logs.
    pub agent: String,
    pub user: Option<String>,
    pub scram: Option<ScramServer>,
    pub bucket: Option<Arc<BucketHandle>>,
    /// What the user may do with the whole selected bucket (the fast path of every check).
    pub access: BucketAccess,
    /// The user's roles narrowed to scopes or collections of the selected bucket; empty for most users.
    pub scoped: Vec<crate::auth::ScopedGrant>,
    /// The user store's generation `access` was computed at; a role change makes it stale.
    pub users_generation: u64,
    /// The connection's place among its user's connections and commands (`auth::limits`), from authentication on.
    pub meter: Option<crate::auth::KvMeter>,
    /// Failed SASL attempts on this connection; each one is answered later than the one before.
    pub auth_failures: u32,
    /// Set when the connection must close after the current batch is written.
    pub close: bool,
    /// Set by DCP_OPEN: once the batch is written, the connection becomes a DCP producer.
    pub dcp: Option<Box<crate::kv::handlers::dcp::DcpUpgrade>>,
}

impl Session {
    pub fn new(peer: SocketAddr) -> Session {
        Session {
            peer,
            local: None,
            tls: false,
            auth_attempt: String::new(),
            auth_mechanism: "",
            features: Features::default(),
            agent: String::new(),
            user: None,
            scram: None,
            bucket: None,
            access: BucketAccess::NONE,
            scoped: Vec::new(),
            users_generation: 0,
            meter: None,
            auth_failures: 0,
            close: false,
            dcp: None,
        }
    }
    /// Takes what `user` may do with `bucket` (just selected, or the user's roles changed).
    pub fn set_access(&mut self, user: &crate::auth::User, bucket: &str) {
        self.access = user.bucket_access(bucket);
        self.scoped = user.scoped_grants(bucket);
    }

    /// Whether the user may do what `wanted` asks with the documents of collection `cid` of the selected bucket:
    /// a role on the whole bucket (one field test, the usual case), else a role narrowed to the collection or its
    /// scope (the names looked up in the bucket's manifest).
    pub fn may(&self, cid: u32, wanted: fn(&BucketAccess) -> bool) -> bool {
        if wanted(&self.access) {
            return true;
        }
        if self.scoped.is_empty() {
            return false;
        }
        let Some(bucket) = &self.bucket else { return false };
        let manifest = bucket.manifest();
        let Some((scope, collection)) = manifest.names_of(cid) else { return false };
        self.scoped.iter().any(|g| wanted(&g.access) && g.covers(scope, collection))
    }

    /// The connection's two ends, for audit events.
    pub fn addrs(&self) -> crate::audit::Addrs {
        crate::audit::Addrs { remote: Some(self.peer), local: self.local }
    }

    /// The authenticated user as audit events name it (kv_engine's domain for local users).
    pub fn identity(&self) -> Option<crate::audit::Identity> {
        self.user.as_ref().map(|u| crate::audit::Identity { domain: "local", user: u.clone() })
    }

    pub fn has(&self, f: Feature) -> bool {
        self.features.has(f)
    }
    /// Whether config changes are pushed to this connection.
    pub fn wants_config_pushes(&self) -> bool {
        self.has(Feature::Duplex)
            && (self.has(Feature::ClustermapChangeNotification) || self.has(Feature::ClustermapChangeNotificationBrief))
    }
    pub fn collections(&self) -> bool {
        self.features.has(Feature::Collections)
    }
}

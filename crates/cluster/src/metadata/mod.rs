//! The cluster's metadata and the commands that change it: the state machine replicated by Raft.
//!
//! [`ClusterMetadata::apply`] is pure and deterministic: every node applies the same committed commands in the same
//! order and reaches the same state. A command is validated against the current state first and is either applied
//! whole or refused with a [`MetaError`] and no change; every applied command bumps `rev`.
//!
//! Nodes of different settee versions share one log during a rolling upgrade (see [`compat`]). The rule for
//! anyone adding or changing a command:
//! - a new [`MetaCommand`] variant gets the next metadata version in [`MetaCommand::since`] (and
//!   [`compat::META_VERSION`] rises); its proposers use the form it replaces while
//!   [`ClusterMetadata::meta_version`] is lower, chosen in [`compat::CommandForms`];
//! - an existing command keeps its JSON and its effect: an older node applies it with its own code, and both
//!   must reach the same state (change the effect only through a new command);
//! - a new field of the state or of a command's payload takes `#[serde(default)]` (older metadata lacks it) and
//!   must not matter to an older node that drops it; never `deny_unknown_fields`.

mod apply;
pub mod compat;
mod indexes;
mod server_groups;
#[cfg(test)]
mod server_groups_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use settee_engine::Manifest;

pub use compat::{CommandForms, LogCommand, META_VERSION};
pub use indexes::{IndexKeySpec, IndexSpec};
pub use server_groups::{
    check_group_name, ServerGroup, ServerGroups, DEFAULT_GROUP_NAME, DEFAULT_GROUP_UUID, GROUP_NAME_BYTES_MAX,
};

use crate::vbmap::{NodeId, VbMap};

/// Everything the cluster agrees on. Small (tens of kilobytes per bucket, the vBucket map being most of it), so
/// it is cloned whole for every applied command and shipped whole in snapshots.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMetadata {
    /// Grows by one with every applied command; the cluster config revision clients see derives from it.
    pub rev: u64,
    pub nodes: BTreeMap<NodeId, NodeInfo>,
    pub buckets: BTreeMap<String, BucketMeta>,
    /// Opaque to this crate: the server owns the user model (salted credentials and roles) and stores it whole.
    pub users: serde_json::Value,
    /// The user groups (`/settings/rbac/groups`), opaque as the users are. Null until first set (no groups).
    #[serde(default)]
    pub groups: serde_json::Value,
    /// The administrator's credentials once reset cluster-wide (`/controller/resetAdminPassword`), opaque as the
    /// users are. Null until first set: each node then keeps the password its command line gave.
    #[serde(default)]
    pub admin: serde_json::Value,
    pub auto_failover: AutoFailoverSettings,
    /// How each failed-over node marked for recovery rejoins at the next rebalance; the entry stays while that
    /// rebalance runs (a delta-recovering node keeps its data until then) and goes when it ends.
    #[serde(default)]
    pub recovery: BTreeMap<NodeId, Recovery>,
    #[serde(default)]
    pub rebalance: RebalanceSettings,
    /// The audit settings (`/settings/audit`). Opaque to this crate, as the users are: the server owns the model
    /// and validates it before proposing. Null until first set (audit off).
    #[serde(default)]
    pub audit: serde_json::Value,
    /// The security settings (`/settings/security`, `/settings/clientCertAuth`). Opaque to this crate, as the audit
    /// settings are. Null until first set (the defaults).
    #[serde(default)]
    pub security: serde_json::Value,
    /// The cluster-wide management settings that change nothing inside this crate (`clusterName` and the service
    /// quotas of `POST /pools/default`, `/settings/indexes`, `/settings/stats`), one JSON object per endpoint.
    /// Opaque, as the audit settings are: the server validates them before proposing. Null until first set.
    #[serde(default)]
    pub settings: serde_json::Value,
    /// XDCR's remote clusters and replications (`/pools/default/remoteClusters`, `/controller/createReplication`).
    /// Opaque to this crate like the audit settings: the server's `xdcr` module owns and validates the model.
    #[serde(default)]
    pub xdcr: serde_json::Value,
    /// XDCR checkpoints, cluster-wide (Couchbase keeps them in metakv): replication id → source vBucket →
    /// (vbuuid, seqno below which every change is on the target). Each node records what it saves, so the node a
    /// vBucket moves to (rebalance, failover) resumes from there instead of from zero.
    #[serde(default)]
    pub xdcr_checkpoints: BTreeMap<String, BTreeMap<u16, (u64, u64)>>,
    /// The server groups as stored; read them through [`ClusterMetadata::server_groups`], which applies the
    /// invariant (every node in exactly one group) to metadata written before groups existed.
    #[serde(default, rename = "server_groups")]
    pub(crate) server_groups_stored: ServerGroups,
    /// Gracefully failed-over nodes that clients may still be sending to: each stays in the buckets' server lists
    /// (with no vBucket) until `EndDrain`, so an SDK keeps its connection to the node and a request it has in
    /// flight there is answered (NOT_MY_VBUCKET, then retried elsewhere) instead of canceled with the connection.
    #[serde(default)]
    pub draining: BTreeSet<NodeId>,
}

/// Couchbase's recovery types for a failed-over node (`POST /controller/setRecoveryType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Recovery {
    /// Keep the node's data and catch it up: the rebalance gives it back the vBuckets it holds where it can.
    Delta,
    /// Drop the node's data; it is rebuilt as for a new node.
    Full,
}

impl Recovery {
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::Delta => "delta",
            Recovery::Full => "full",
        }
    }
}

/// Couchbase's rebalance settings (`/settings/rebalance`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebalanceSettings {
    /// vBucket moves a node takes part in at once (as the source or a destination of a copy).
    pub moves_per_node: u32,
}

impl RebalanceSettings {
    pub const MOVES_PER_NODE_MAX: u32 = 64;
}

impl Default for RebalanceSettings {
    fn default() -> Self {
        RebalanceSettings { moves_per_node: 4 }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: NodeId,
    /// Host name or address only, without a port.
    pub hostname: String,
    pub kv_port: u16,
    pub mgmt_port: u16,
    pub query_port: u16,
    pub membership: Membership,
    pub services: Vec<String>,
    /// The node's TLS ports (0 = off), advertised as `kvSSL`, `mgmtSSL` and `n1qlSSL`. Metadata written before
    /// TLS existed reads as all off.
    #[serde(default)]
    pub tls_ports: TlsPorts,
    /// Couchbase's per-node `nodeEncryption` (`setupNetConfig`): the node takes part in node-to-node encryption.
    /// The cluster's `clusterEncryptionLevel` applies only while every node has it on. Older metadata: off.
    #[serde(default)]
    pub node_encryption: bool,
    /// The CA certificates (PEM) the node's TLS certificate chains to, which the other nodes trust for
    /// node-to-node TLS besides their own: nodes given certificates from different CAs still verify each other.
    /// Empty in metadata written before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tls_ca: String,
    /// The metadata version the node reads ([`compat`]): set when it joins, recorded again (`UpdateNode`) when it
    /// restarts on another binary. Absent in entries written by a settee from before it existed: 1.
    #[serde(default = "compat::unmarked_version")]
    pub meta_version: u32,
}

/// A node's TLS ports, each 0 when off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsPorts {
    pub kv: u16,
    pub mgmt: u16,
    pub query: u16,
}

impl NodeInfo {
    /// An Active data node at `hostname` with Couchbase's default KV and query ports and management port
    /// `mgmt_port`, no TLS, reading this build's metadata version: the entry tests and the simulator start from
    /// (struct update syntax for the rest), so a new field is given its default in one place.
    pub fn new(id: NodeId, hostname: &str, mgmt_port: u16) -> NodeInfo {
        NodeInfo {
            id,
            hostname: hostname.to_owned(),
            kv_port: 11210,
            mgmt_port,
            query_port: 8093,
            membership: Membership::Active,
            services: vec!["kv".into()],
            tls_ports: TlsPorts::default(),
            node_encryption: false,
            tls_ca: String::new(),
            meta_version: META_VERSION,
        }
    }

    /// "host:port" for `port` on this node (IPv6 hosts in brackets).
    pub fn addr_with(&self, port: u16) -> String {
        if self.hostname.contains(':') && !self.hostname.starts_with('[') {
            format!("[{}]:{}", self.hostname, port)
        } else {
            format!("{}:{}", self.hostname, port)
        }
    }

    /// "host:mgmtport", the address the Raft transport reaches the node at (IPv6 hosts in brackets).
    pub fn mgmt_addr(&self) -> String {
        self.addr_with(self.mgmt_port)
    }
}

/// A node's place in the cluster, spelled as Couchbase's `clusterMembership`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Membership {
    /// Serving: may hold vBuckets.
    Active,
    /// Added but not yet rebalanced in: holds no vBuckets.
    InactiveAdded,
    /// Failed over: its copies were dropped from every map.
    InactiveFailed,
}

impl Membership {
    pub fn as_str(self) -> &'static str {
        match self {
            Membership::Active => "active",
            Membership::InactiveAdded => "inactiveAdded",
            Membership::InactiveFailed => "inactiveFailed",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketMeta {
    pub spec: BucketSpec,
    pub manifest: Manifest,
    pub map: VbMap,
    /// Grows with every failover that touched this bucket's map.
    pub failover_epoch: u64,
    /// Copies being built ahead of a map change (rebalance): per vBucket, nodes outside its chain that stream it
    /// from its active as replicas would, but are neither in the client map nor counted for durability until a
    /// `SetMap` puts them in the chain (which ends their entry).
    #[serde(default)]
    pub building: BTreeMap<u16, Vec<NodeId>>,
    /// Query index definitions on the bucket's collections, by index id.
    #[serde(default)]
    pub indexes: BTreeMap<String, IndexSpec>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketSpec {
    pub name: String,
    pub uuid: String,
    pub ephemeral: bool,
    pub ram_quota_bytes: u64,
    pub replicas: u8,
    pub eviction: String,
    pub max_ttl: u32,
    pub flush_enabled: bool,
    pub durability_min_level: Option<u8>,
    /// How writes carrying their own metadata resolve conflicts (`conflictResolutionType`), fixed at creation
    /// (absent from metadata written before it: `seqno`).
    #[serde(default)]
    pub conflict_resolution: settee_engine::ConflictMode,
}

/// Couchbase's auto-failover settings (`/settings/autoFailover`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoFailoverSettings {
    pub enabled: bool,
    pub timeout_secs: u32,
    pub max_count: u32,
    /// Automatic failovers since the count was last reset.
    pub count: u32,
}

impl AutoFailoverSettings {
    pub const TIMEOUT_SECS_MIN: u32 = 5;
    pub const TIMEOUT_SECS_MAX: u32 = 3600;
    pub const MAX_COUNT_MAX: u32 = 100;
}

impl Default for AutoFailoverSettings {
    fn default() -> Self {
        AutoFailoverSettings { enabled: true, timeout_secs: 120, max_count: 1, count: 0 }
    }
}

/// A change to the metadata, as proposed to and committed by Raft.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaCommand {
    /// Adds a node. The first node of an empty cluster becomes Active; any other joins as InactiveAdded (it gets
    /// vBuckets only at rebalance) whatever `membership` says, and a `SetMembership` may then make it Active.
    AddNode(NodeInfo),
    /// Adds a node as `AddNode` does, straight into the server group whose uuid is `group`, in one change, so the
    /// node is never in another group (`POST /pools/default/serverGroups/<uuid>/addNode`).
    AddNodeInGroup {
        node: NodeInfo,
        group: String,
    },
    /// Changes a member's address, ports or services (a node restarted with other ports); membership is kept.
    UpdateNode(NodeInfo),
    /// Changes a node's membership; InactiveFailed is reached only through `Failover`, and left only by a node
    /// marked for recovery.
    SetMembership {
        node: NodeId,
        membership: Membership,
    },
    /// Removes a node that holds no copy in any map (and from its server group).
    RemoveNode(NodeId),
    /// Creates an empty server group; `uuid` is chosen by the proposer and must be new, `name` too.
    CreateServerGroup {
        uuid: String,
        name: String,
    },
    /// Renames a server group; the new name must be free.
    RenameServerGroup {
        uuid: String,
        name: String,
    },
    /// Deletes an empty server group.
    DeleteServerGroup {
        uuid: String,
    },
    /// Replaces every server group's members at once: every group listed, every node in exactly one, and `rev`
    /// the groups' current revision (a stale listing is refused). Takes effect on the maps at the next rebalance.
    SetServerGroupMembers {
        rev: u64,
        members: BTreeMap<String, BTreeSet<NodeId>>,
    },
    /// Moves one node into a server group.
    MoveToServerGroup {
        node: NodeId,
        group: String,
    },
    /// Creates a bucket with the default manifest and a map planned over the Active nodes.
    CreateBucket(BucketSpec),
    /// Replaces a bucket's settings; its uuid and type cannot change, and a new replica count takes effect at the
    /// next rebalance (the map is kept).
    UpdateBucket(BucketSpec),
    DeleteBucket(String),
    /// Replaces a bucket's collections manifest; its uid may not go backwards.
    SetManifest {
        bucket: String,
        manifest: Manifest,
    },
    /// Replaces the copies being built for a bucket (rebalance): each listed node must be Active and outside the
    /// vBucket's chain; an empty list ends the building.
    SetBuilding {
        bucket: String,
        building: BTreeMap<u16, Vec<NodeId>>,
    },
    /// Replaces a bucket's vBucket map (rebalance).
    SetMap {
        bucket: String,
        map: VbMap,
    },
    /// Hard failover: every map loses the nodes (replicas promoted), the nodes become InactiveFailed and every
    /// bucket's failover epoch grows.
    Failover {
        nodes: Vec<NodeId>,
    },
    /// Graceful failover's last step: `Failover` of `node` with the replicas it held rebuilt on the Active nodes in
    /// the same change (`vbmap::repair_replicas`), so no vBucket is ever left without the replica a `majority`
    /// write needs; the node also stays in the buckets' server lists, with no vBucket, until `EndDrain` (see
    /// `ClusterMetadata::draining`).
    FailoverDraining {
        node: NodeId,
    },
    /// Ends the drain of a gracefully failed-over node: it leaves the buckets' server lists. A node not draining is
    /// left as it is.
    EndDrain {
        node: NodeId,
    },
    /// Auto-reprovision (Couchbase's, for memory-only buckets): `node` restarted and lost its copies of `bucket`
    /// (ephemeral), so it leaves every chain of that bucket that keeps another copy, replicas promoted, before it
    /// may serve; it stays a member, and a rebalance gives it copies again. Refused for a persistent bucket.
    Reprovision {
        bucket: String,
        node: NodeId,
    },
    /// A restarted `node` hands the active copies of `bucket` it came back behind on to replicas that hold more
    /// (`promote`: vBucket to the replica taking over), before it may serve: a persistent bucket's copies come
    /// back with what reached the disk, while a `majority` write acknowledged just before the crash lives only in
    /// its replicas' memory. Each named replica swaps places with `node` in the chain (see [`crate::vbmap::promote`]); a
    /// vBucket the map has since given to another active is left alone.
    PromoteReplicas {
        bucket: String,
        node: NodeId,
        promote: BTreeMap<u16, NodeId>,
    },
    SetUsers(serde_json::Value),
    /// Replaces the administrator's credentials (opaque, see `ClusterMetadata::admin`).
    SetAdmin(serde_json::Value),
    /// Replaces the user groups (opaque, see `ClusterMetadata::groups`).
    SetGroups(serde_json::Value),
    /// Replaces the audit settings (opaque, see `ClusterMetadata::audit`).
    SetAudit(serde_json::Value),
    /// Replaces the security settings (opaque, see `ClusterMetadata::security`).
    SetSecurity(serde_json::Value),
    /// Replaces one section (`key`) of the opaque management settings (see `ClusterMetadata::settings`).
    SetSettings {
        key: String,
        value: serde_json::Value,
    },
    /// Replaces the XDCR remote clusters and replications (opaque, see `ClusterMetadata::xdcr`).
    SetXdcr(serde_json::Value),
    /// Records checkpoints of replication `replication` (each vBucket's replaces the one held).
    SaveXdcrCheckpoints {
        replication: String,
        vbuckets: BTreeMap<u16, (u64, u64)>,
    },
    /// Drops every checkpoint of a deleted replication.
    ForgetXdcrCheckpoints {
        replication: String,
    },
    SetAutoFailover(AutoFailoverSettings),
    /// Marks a failed-over node for recovery at the next rebalance, or (None) ends its recovery. A recovery can
    /// be set only while the node is inactiveFailed or already marked.
    SetRecovery {
        node: NodeId,
        recovery: Option<Recovery>,
    },
    SetRebalanceSettings(RebalanceSettings),
    /// Adds a query index definition; its name must be new in its collection.
    CreateIndex {
        bucket: String,
        index: IndexSpec,
    },
    /// Removes a query index definition by id.
    DropIndex {
        bucket: String,
        id: String,
    },
    /// Starts building deferred indexes (BUILD INDEX).
    BuildIndexes {
        bucket: String,
        ids: Vec<String>,
    },
}

/// Why a command was refused. Deterministic: every node refuses the same command the same way.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum MetaError {
    #[error("node {0} is already a member")]
    NodeExists(NodeId),
    #[error("another node already uses {0}")]
    AddressInUse(String),
    #[error("unknown node {0}")]
    UnknownNode(NodeId),
    #[error("node {node} still holds vBuckets of bucket {bucket}")]
    NodeInUse { node: NodeId, bucket: String },
    #[error("node {0} can only become inactiveFailed through failover")]
    MembershipNeedsFailover(NodeId),
    #[error("bucket {0} already exists")]
    BucketExists(String),
    #[error("unknown bucket {0}")]
    UnknownBucket(String),
    #[error("invalid settings for bucket {bucket}: {reason}")]
    InvalidBucket { bucket: String, reason: String },
    #[error("no active node to place vBuckets on")]
    NoActiveNodes,
    #[error("manifest uid {proposed:x} of bucket {bucket} is older than {current:x}")]
    StaleManifest { bucket: String, current: u64, proposed: u64 },
    #[error("invalid copies to build for bucket {bucket}: {reason}")]
    InvalidBuilding { bucket: String, reason: String },
    #[error("invalid vBucket map for bucket {bucket}: {reason}")]
    InvalidMap { bucket: String, reason: String },
    #[error("bucket {0} is persistent: its node reloads its copies from disk, nothing to reprovision")]
    NotEphemeral(String),
    #[error("failover needs at least one node")]
    EmptyFailover,
    #[error("failover would leave no active node")]
    LastActiveNode,
    #[error("invalid auto-failover settings: {0}")]
    InvalidAutoFailover(String),
    #[error("node {0} is failed over and not marked for recovery")]
    RecoveryNotSet(NodeId),
    #[error("node {0} is not failed over")]
    NotFailedOver(NodeId),
    #[error("invalid rebalance settings: {0}")]
    InvalidRebalanceSettings(String),
    #[error("unknown collection {0}")]
    UnknownCollection(String),
    #[error("the index {0} already exists")]
    IndexExists(String),
    #[error("unknown index {0}")]
    UnknownIndex(String),
    #[error("invalid server group: {0}")]
    InvalidServerGroup(String),
    #[error("a server group named {0} already exists")]
    ServerGroupExists(String),
    #[error("unknown server group {0}")]
    UnknownServerGroup(String),
    #[error("server group {0} is not empty")]
    ServerGroupNotEmpty(String),
    #[error("server groups revision {proposed} is not the current {current}")]
    StaleServerGroups { current: u64, proposed: u64 },
    #[error("invalid server group members: {0}")]
    InvalidServerGroupMembers(String),
    /// Refused before it reached the log: the command is newer than what this node reads.
    #[error("metadata command {command} needs metadata version {needs}; this node reads up to {reads}")]
    CommandTooNew { command: String, needs: u32, reads: u32 },
}

impl ClusterMetadata {
    /// The Active nodes, in id order.
    pub fn active_nodes(&self) -> Vec<NodeId> {
        self.nodes.values().filter(|n| n.membership == Membership::Active).map(|n| n.id).collect()
    }

    /// Whether the clients' configs list node `id`: Active, or draining after a graceful failover (see
    /// [`ClusterMetadata::draining`]). A bucket's config also lists every other node its map names.
    pub fn is_listed(&self, id: NodeId) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.membership == Membership::Active) || self.draining.contains(&id)
    }

    /// The failed-over nodes (hard, graceful or automatic failover; recovered or not yet).
    pub fn failed_over_nodes(&self) -> Vec<NodeId> {
        self.nodes.values().filter(|n| n.membership == Membership::InactiveFailed).map(|n| n.id).collect()
    }
}

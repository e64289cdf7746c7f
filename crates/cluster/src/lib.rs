//! Cluster metadata for settee: what the nodes agree on (nodes, buckets, collection manifests, vBucket maps, users,
//! auto-failover settings), the Raft group that replicates it, and the pure planners that compute vBucket maps.
//!
//! - [`vbmap`]: [`VbMap`] and the deterministic planners: [`vbmap::plan`] (balanced initial placement),
//!   [`vbmap::rebalance`] (balanced target with minimal movement), [`vbmap::failover`] (replica promotion), all
//!   placing replicas in server groups other than their active's where [`vbmap::NodeGroups`] allows.
//! - [`metadata`]: [`ClusterMetadata`] and [`MetaCommand`], the state machine: `apply` validates and applies one
//!   command, deterministically, and bumps `rev`.
//! - [`MetadataStore`]: the metadata replicated by Raft (openraft 0.9, storage-v2): propose from any node
//!   (followers forward to the leader), watch the applied state, change the Raft membership. Durable state lives
//!   in one directory per node. openraft stays behind this API; its message types show only in
//!   [`transport::rpc`], for whoever writes another transport.
//! - [`transport`]: how stores reach each other: the [`RaftTransport`] trait, [`HttpTransport`] (JSON over
//!   HTTP/1.1 with Basic auth) and [`raft_router`], the axum router that receives it under `/settee/raft/`.
//! - [`control`]: the control plane as sans-IO state machines (rebalance and its moves, graceful failover,
//!   auto-failover, delta/full recovery), peer health and takeover holds: events in, commands out.
//! - [`peer`]: the typed messages of the node-to-node calls outside Raft (seqno reports, takeover holds, joining,
//!   health probes), shared by the caller and the handler.
//!
//! This crate sits below the server: it must not depend on `settee-server` (nor on sockets other than through
//! its transport). The vbmap, metadata and control modules are sans-IO, with no clock and no randomness: time is
//! passed in.

// Time from a `Clock`, randomness from a seeded `Rng` (see clippy.toml): a violation fails `cargo clippy`.
#![deny(clippy::disallowed_methods)]

pub mod control;
pub mod metadata;
pub mod peer;
mod store;
pub mod transport;
pub mod vbmap;

pub use metadata::{
    AutoFailoverSettings, BucketMeta, BucketSpec, ClusterMetadata, IndexKeySpec, IndexSpec, Membership, MetaCommand,
    MetaError, NodeInfo, RebalanceSettings, Recovery, ServerGroup, ServerGroups, TlsPorts,
};
pub use store::{write_atomic, ConsensusError, MetadataStore, OpenError, ProposeError, StoreOptions};
pub use transport::{
    raft_router, HttpTransport, MemberRequest, PeerConnector, PeerTls, Proposed, RaftTransport, TlsSwitch,
    TransportError,
};
pub use vbmap::{NodeId, VbMap, VbMove};

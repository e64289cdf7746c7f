//! The node's place in the cluster: the Raft-replicated metadata (`settee_cluster::MetadataStore`) is the source
//! of truth for nodes, buckets, collection manifests, vBucket maps and users; this module opens it, joins or forms
//! a cluster, keeps the local node in step with it, and drives the control plane.
//!
//! - `ClusterHandle` (`handle`): what the node and its services hold: the store, this node's id, whether its
//!   metadata is current, the peers' health, the rebalance status, and a mailbox to the driver. It never calls
//!   into the node.
//! - `ClusterDriver` (`driver`): owns the node and the handle; starts, joins and follows the cluster, answers the
//!   handle's requests, and runs the control-plane state machines of `settee_cluster::control` (their decisions
//!   are there; the driver carries out their commands): `rebalance`, `failover` (hard and graceful), `monitor`
//!   (health probes, auto-failover, hold leases), `holds` (holding this node's actives for a takeover).
//! - `takeback`: a restarted member hands the persistent actives its replicas are ahead of over to them before
//!   it serves (`settee_cluster::control::restart` decides).
//! - `reconcile`: makes the local buckets, vBucket states, replication feeds and users match the metadata.
//! - `ops`: the changes REST makes (buckets, manifests, users), proposed to Raft first and then applied locally.
//! - `peers`: the typed node-to-node calls (`settee_cluster::peer`) over `rest_client`.
//!
//! The store lives in `<data-dir>/raft`. A node started without `--join` forms a one-node cluster on first start
//! (and creates the command line's bucket); with `--join` it asks that member's cluster to add it.

mod driver;
mod failover;
mod handle;
mod holds;
mod monitor;
mod ops;
pub(crate) mod peer_links;
pub(crate) mod peers;
mod rebalance;
mod reconcile;
pub(crate) mod rest_client;
mod takeback;
mod versions;

use settee_cluster::BucketSpec;
use settee_engine::{BucketConfig, BucketKind, EvictionPolicy};
use settee_types::DurabilityLevel;

pub use driver::ClusterDriver;
pub use handle::{ClusterHandle, Health, Proposal, RebalanceStatus};
pub use ops::ClusterOpError;

/// Hidden, for tests of a mixed-version cluster only: the metadata version this node reads and announces
/// instead of this build's (`settee_cluster::metadata::META_VERSION`). At 1 the node behaves as a settee from
/// before versions were recorded: it announces 1, never proposes a newer command, and stops at one it is sent.
pub const TEST_META_VERSION_ENV: &str = "SETTEE_TEST_META_VERSION";

/// The metadata version this node reads and announces: this build's, unless [`TEST_META_VERSION_ENV`] names an
/// older one (read once).
pub fn meta_version() -> u32 {
    use settee_cluster::metadata::compat::META_VERSION_UNMARKED;
    use settee_cluster::metadata::META_VERSION;
    static VERSION: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let Ok(text) = std::env::var(TEST_META_VERSION_ENV) else { return META_VERSION };
        match text.parse::<u32>() {
            Ok(v) if (META_VERSION_UNMARKED..=META_VERSION).contains(&v) => {
                tracing::warn!(
                    version = v,
                    "{TEST_META_VERSION_ENV}: this node reads metadata version {v} (tests only)"
                );
                v
            }
            _ => {
                tracing::error!(value = %text, "{TEST_META_VERSION_ENV} ignored: not a version from \
                    {META_VERSION_UNMARKED} to {META_VERSION}");
                META_VERSION
            }
        }
    })
}

/// The metadata form of a bucket's settings.
pub fn spec_of(c: &BucketConfig) -> BucketSpec {
    BucketSpec {
        name: c.name.clone(),
        uuid: c.uuid.clone(),
        ephemeral: c.kind == BucketKind::Ephemeral,
        ram_quota_bytes: c.ram_quota_bytes,
        replicas: c.replicas,
        eviction: c.eviction.as_str().to_owned(),
        max_ttl: c.max_ttl,
        flush_enabled: c.flush_enabled,
        durability_min_level: c.durability_min_level.map(|l| l as u8),
        conflict_resolution: c.conflict_resolution,
    }
}

/// The engine form of a bucket's settings (an unknown eviction name, which no settee wrote, reads as the type's
/// default).
pub fn config_of(s: &BucketSpec) -> BucketConfig {
    let kind = if s.ephemeral { BucketKind::Ephemeral } else { BucketKind::Couchbase };
    BucketConfig {
        name: s.name.clone(),
        uuid: s.uuid.clone(),
        kind,
        ram_quota_bytes: s.ram_quota_bytes,
        replicas: s.replicas,
        eviction: EvictionPolicy::parse(&s.eviction).unwrap_or(EvictionPolicy::default_for(kind)),
        max_ttl: s.max_ttl,
        flush_enabled: s.flush_enabled,
        durability_min_level: s.durability_min_level.and_then(DurabilityLevel::from_wire),
        conflict_resolution: s.conflict_resolution,
    }
}

//! Builders for the control-plane tests: metadata with given nodes and buckets.

use crate::metadata::{BucketMeta, BucketSpec, ClusterMetadata, Membership, NodeInfo};
use crate::vbmap::{NodeId, VbMap};

/// Metadata listing `nodes` with their memberships (node n's management port is 9000 + n), and nothing else.
pub(crate) fn meta_with_nodes(nodes: &[(NodeId, Membership)]) -> ClusterMetadata {
    let mut meta = ClusterMetadata::default();
    for (id, membership) in nodes {
        let mgmt_port = 9000 + u16::try_from(*id).expect("small test id");
        let info = NodeInfo { membership: *membership, ..NodeInfo::new(*id, "127.0.0.1", mgmt_port) };
        meta.nodes.insert(*id, info);
    }
    meta
}

/// Bucket `name` with `map` and `replicas` replicas.
pub(crate) fn bucket_meta(name: &str, map: VbMap, replicas: u8) -> BucketMeta {
    let spec = BucketSpec {
        name: name.into(),
        uuid: format!("uuid-{name}"),
        ephemeral: false,
        ram_quota_bytes: 100 << 20,
        replicas,
        eviction: "valueOnly".into(),
        max_ttl: 0,
        flush_enabled: false,
        durability_min_level: None,
        conflict_resolution: Default::default(),
    };
    BucketMeta {
        spec,
        manifest: Default::default(),
        map,
        failover_epoch: 0,
        building: Default::default(),
        indexes: Default::default(),
    }
}

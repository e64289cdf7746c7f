//! The terse cluster configs clients bootstrap from (GET_CLUSTER_CONFIG, NOT_MY_VBUCKET bodies, `/pools/default/b`),
//! shaped exactly as PROTOCOL.md §2.6 requires: `nodes` beside `nodesExt`, `kv` and `mgmt` ports, a hex
//! `collectionsManifestUid`, `thisNode`, and a `vBucketMap` whose rows are `numReplicas + 1` long.

use serde_json::{json, Value};
use settee_types::limits::NUM_VBUCKETS;

use crate::node::{BucketHandle, Node};

/// Bucket capabilities settee really implements.
pub const BUCKET_CAPABILITIES: &[&str] = &[
    "collections",
    "durableWrite",
    "tombstonedUserXAttrs",
    "cbhello",
    "touch",
    "cccp",
    "nodesExt",
    "xattr",
    "subdoc.ReplicaRead",
    "subdoc.AccessDeleted",
    "subdoc.ReviveDocument",
    "subdoc.ReplaceBodyWithXattr",
    "subdoc.DocumentMacroSupport",
];

impl Node {
    /// The hostname to advertise: the bound address, or `$HOST` (the address the client connected to) when the
    /// node listens on every interface.
    pub fn advertised_host(&self) -> &str {
        match self.config.host.as_str() {
            "0.0.0.0" | "::" | "[::]" => "$HOST",
            h => h,
        }
    }

    fn host_port(&self, port: u16) -> String {
        let h = self.advertised_host();
        if h.contains(':') && !h.starts_with('[') {
            format!("[{h}]:{port}")
        } else {
            format!("{h}:{port}")
        }
    }

    fn node_ext(&self) -> Value {
        json!({
            "services": {"kv": self.config.kv_port, "mgmt": self.config.mgmt_port, "n1ql": self.config.query_port},
            "hostname": self.advertised_host(),
            "thisNode": true,
        })
    }

    fn cluster_capabilities() -> Value {
        // No query feature is advertised until the query service implements it.
        json!({"n1ql": []})
    }

    /// The bucket-less (GCCCP) config: no name, uuid, nodeLocator or vBucket map.
    pub fn global_config(&self) -> Value {
        json!({
            "rev": self.rev(),
            "revEpoch": 1,
            "nodesExt": [self.node_ext()],
            "clusterCapabilitiesVer": [1, 0],
            "clusterCapabilities": Self::cluster_capabilities(),
        })
    }

    /// The terse bucket config. On one node every vBucket is active here; replica slots are -1.
    pub fn bucket_config(&self, b: &BucketHandle) -> Value {
        let cfg = b.config();
        let row: Vec<i32> = std::iter::once(0).chain(std::iter::repeat_n(-1, usize::from(cfg.replicas))).collect();
        let map: Vec<&Vec<i32>> = (0..NUM_VBUCKETS).map(|_| &row).collect();
        json!({
            "rev": self.rev(),
            "revEpoch": 1,
            "name": cfg.name,
            "uuid": cfg.uuid,
            "uri": format!("/pools/default/buckets/{}?bucket_uuid={}", cfg.name, cfg.uuid),
            "streamingUri": format!("/pools/default/bucketsStreaming/{}?bucket_uuid={}", cfg.name, cfg.uuid),
            "nodeLocator": "vbucket",
            "bucketCapabilitiesVer": "",
            "bucketCapabilities": BUCKET_CAPABILITIES,
            "collectionsManifestUid": format!("{:x}", b.manifest().uid),
            "ddocs": {"uri": format!("/pools/default/buckets/{}/ddocs", cfg.name)},
            "vBucketServerMap": {
                "hashAlgorithm": "CRC",
                "numReplicas": cfg.replicas,
                "serverList": [self.host_port(self.config.kv_port)],
                "vBucketMap": map,
            },
            "nodes": [{
                "hostname": self.host_port(self.config.mgmt_port),
                "ports": {"direct": self.config.kv_port},
            }],
            "nodesExt": [self.node_ext()],
            "clusterCapabilitiesVer": [1, 0],
            "clusterCapabilities": Self::cluster_capabilities(),
        })
    }
}

//! The terse cluster configs clients bootstrap from (GET_CLUSTER_CONFIG, NOT_MY_VBUCKET bodies, `/pools/default/b`),
//! shaped exactly as PROTOCOL.md §2.6 requires: `nodes` beside `nodesExt`, `kv` and `mgmt` ports (and the TLS ports
//! `kvSSL`, `mgmtSSL`, `n1qlSSL` when on), a hex
//! `collectionsManifestUid`, `thisNode`, each node's `serverGroup`, and a `vBucketMap` whose rows are
//! `numReplicas + 1` long.

use std::sync::Arc;

use serde_json::{json, Value};
use settee_cluster::{BucketMeta, ClusterMetadata, NodeId};
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

    /// The nodes a config lists, in `serverList` order: every Active or draining node (see
    /// `ClusterMetadata::is_listed`) plus any other node the bucket's map uses, by id; this node alone when it has
    /// no cluster.
    fn servers(&self, bucket: Option<&BucketMeta>) -> (Vec<Server>, Option<Arc<ClusterMetadata>>) {
        let me = Server {
            id: None,
            host: self.advertised_host().to_owned(),
            kv: self.config.kv_port,
            mgmt: self.config.mgmt_port,
            query: self.config.query_port,
            tls: settee_cluster::TlsPorts {
                kv: self.config.kv_tls_port,
                mgmt: self.config.mgmt_tls_port,
                query: self.config.query_tls_port,
            },
            this: true,
            group: settee_cluster::metadata::DEFAULT_GROUP_NAME.to_owned(),
        };
        let Some(cluster) = self.cluster() else { return (vec![me], None) };
        let meta = cluster.metadata();
        let in_map = bucket.map(|b| b.map.nodes()).unwrap_or_default();
        let groups = meta.server_groups();
        let group_of = |id| groups.of(id).map(|g| g.name.clone()).unwrap_or_default();
        let servers = meta
            .nodes
            .values()
            .filter(|n| meta.is_listed(n.id) || in_map.contains(&n.id))
            .map(|n| {
                if n.id == cluster.me {
                    Server { id: Some(n.id), group: group_of(n.id), ..me.clone() }
                } else {
                    Server {
                        id: Some(n.id),
                        host: n.hostname.clone(),
                        kv: n.kv_port,
                        mgmt: n.mgmt_port,
                        query: n.query_port,
                        tls: n.tls_ports,
                        this: false,
                        group: group_of(n.id),
                    }
                }
            })
            .collect();
        (servers, Some(meta))
    }

    fn cluster_capabilities() -> Value {
        // No query feature is advertised until the query service implements it.
        json!({"n1ql": ["enhancedPreparedStatements"]})
    }

    /// The bucket-less (GCCCP) config: no name, uuid, nodeLocator or vBucket map.
    pub fn global_config(&self) -> Value {
        let (servers, _) = self.servers(None);
        json!({
            "rev": self.rev(),
            "revEpoch": 1,
            "nodesExt": servers.iter().map(Server::node_ext).collect::<Vec<_>>(),
            "clusterCapabilitiesVer": [1, 0],
            "clusterCapabilities": Self::cluster_capabilities(),
        })
    }

    /// The terse bucket config: the map rows hold indexes into `serverList` (-1 for a missing copy).
    pub fn bucket_config(&self, b: &BucketHandle) -> Value {
        let cfg = b.config();
        let meta_bucket = self.cluster().and_then(|c| c.metadata().buckets.get(&cfg.name).cloned());
        let (servers, _) = self.servers(meta_bucket.as_ref());
        let (replicas, map): (usize, Vec<Vec<i32>>) = match &meta_bucket {
            Some(mb) => {
                let index = |n: &Option<NodeId>| -> i32 {
                    n.and_then(|id| servers.iter().position(|s| s.id == Some(id)))
                        .and_then(|i| i32::try_from(i).ok())
                        .unwrap_or(-1)
                };
                let rows = mb.map.chains.iter().map(|chain| chain.iter().map(index).collect()).collect();
                (mb.map.replicas(), rows)
            }
            None => {
                let row: Vec<i32> =
                    std::iter::once(0).chain(std::iter::repeat_n(-1, usize::from(cfg.replicas))).collect();
                (usize::from(cfg.replicas), (0..NUM_VBUCKETS).map(|_| row.clone()).collect())
            }
        };
        let manifest_uid = meta_bucket.as_ref().map_or_else(|| b.manifest().uid, |mb| mb.manifest.uid);
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
            "collectionsManifestUid": format!("{manifest_uid:x}"),
            "ddocs": {"uri": format!("/pools/default/buckets/{}/ddocs", cfg.name)},
            "vBucketServerMap": {
                "hashAlgorithm": "CRC",
                "numReplicas": replicas,
                "serverList": servers.iter().map(|s| host_port(&s.host, s.kv)).collect::<Vec<_>>(),
                "vBucketMap": map,
            },
            "nodes": servers.iter().map(|s| json!({
                "hostname": host_port(&s.host, s.mgmt),
                "ports": {"direct": s.kv},
            })).collect::<Vec<_>>(),
            "nodesExt": servers.iter().map(Server::node_ext).collect::<Vec<_>>(),
            "clusterCapabilitiesVer": [1, 0],
            "clusterCapabilities": Self::cluster_capabilities(),
        })
    }
}

/// Whether a config from [`Node::bucket_config`] or [`Node::global_config`] lists the node that made it
/// (`thisNode`): not once the node is failed over or rebalanced out.
pub(crate) fn lists_this_node(config: &Value) -> bool {
    config["nodesExt"].as_array().is_some_and(|nodes| nodes.iter().any(|n| n["thisNode"] == true))
}

/// One node as configs list it.
#[derive(Clone)]
struct Server {
    id: Option<NodeId>,
    host: String,
    kv: u16,
    mgmt: u16,
    query: u16,
    tls: settee_cluster::TlsPorts,
    this: bool,
    /// The node's server group name (`serverGroup`, Couchbase 7.6.2+): the SDKs' `selected_server_group` read
    /// preference picks the copies in the client's group from it.
    group: String,
}

impl Server {
    fn node_ext(&self) -> Value {
        let mut services = json!({"kv": self.kv, "mgmt": self.mgmt, "n1ql": self.query});
        // The TLS ports under Couchbase's names: `couchbases://` clients connect to these.
        for (name, port) in [("kvSSL", self.tls.kv), ("mgmtSSL", self.tls.mgmt), ("n1qlSSL", self.tls.query)] {
            if port != 0 {
                services[name] = json!(port);
            }
        }
        let mut ext = json!({"services": services, "hostname": self.host, "serverGroup": self.group});
        if self.this {
            ext["thisNode"] = json!(true);
        }
        ext
    }
}

/// `host:port`, bracketing IPv6 literals (an already bracketed host is kept).
pub(crate) fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

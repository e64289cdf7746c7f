//! The cluster map a smart client routes by: the terse bucket config from GET_CLUSTER_CONFIG (or the body of a
//! NOT_MY_VBUCKET reply), reduced to what routing needs: the KV endpoint of every node and the active node of
//! every vBucket; and the query endpoints (`nodesExt[].services.n1ql`), which the SDKs spread query requests over.

use serde_json::Value;

use crate::connection::ClientError;

/// A parsed bucket config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    pub rev_epoch: i64,
    pub rev: i64,
    pub bucket: Option<String>,
    /// KV endpoints (`host:port`), indexed as `vbucket_map` indexes them.
    pub kv_nodes: Vec<String>,
    /// The index into `kv_nodes` of each vBucket's active copy; -1 when it has none.
    pub vbucket_map: Vec<i32>,
    pub num_replicas: u32,
    /// Query service endpoints (`host:port`) of the nodes whose `nodesExt` entry lists `n1ql`, in `nodesExt` order.
    pub query_nodes: Vec<String>,
    /// The TLS KV endpoint (`kvSSL`) of each of `kv_nodes`, from the same node's `nodesExt` entry; None when the
    /// node lists none.
    pub kv_tls_nodes: Vec<Option<String>>,
}

impl ClusterConfig {
    /// Parses a config. `$HOST` (which a node listening on every interface advertises) becomes `seed_host`, the
    /// host the client bootstrapped from.
    pub fn parse(body: &[u8], seed_host: &str) -> Result<ClusterConfig, ClientError> {
        let v: Value = serde_json::from_slice(body).map_err(|e| ClientError::Config(e.to_string()))?;
        let bad = |what: &str| ClientError::Config(what.to_owned());
        let map = &v["vBucketServerMap"];
        let vbucket_map: Vec<i32> = map["vBucketMap"]
            .as_array()
            .ok_or_else(|| bad("no vBucketServerMap.vBucketMap"))?
            .iter()
            .map(|row| row.get(0).and_then(Value::as_i64).map(|n| n as i32).ok_or_else(|| bad("vBucketMap row")))
            .collect::<Result<_, _>>()?;
        if vbucket_map.is_empty() || vbucket_map.len() > usize::from(u16::MAX) {
            return Err(bad("vBucketMap length"));
        }
        let kv_nodes = kv_endpoints(&v, seed_host)?;
        if let Some(n) = vbucket_map.iter().find(|&&n| n >= kv_nodes.len() as i32) {
            return Err(ClientError::Config(format!("vBucketMap names node {n} of {}", kv_nodes.len())));
        }
        let kv_tls_nodes = kv_nodes.iter().map(|node| tls_endpoint(&v, node, seed_host)).collect();
        Ok(ClusterConfig {
            kv_tls_nodes,
            rev_epoch: v["revEpoch"].as_i64().unwrap_or(0),
            rev: v["rev"].as_i64().unwrap_or(0),
            bucket: v["name"].as_str().map(str::to_owned),
            kv_nodes,
            vbucket_map,
            num_replicas: map["numReplicas"].as_u64().unwrap_or(0) as u32,
            query_nodes: service_endpoints(&v, "n1ql", seed_host),
        })
    }

    pub fn num_vbuckets(&self) -> u16 {
        // Parse bounds the map by u16::MAX entries.
        self.vbucket_map.len() as u16
    }

    /// The vBucket of a key (without its collection prefix), as every Couchbase client computes it.
    pub fn vbucket_of(&self, key: &[u8]) -> u16 {
        vbucket_of(key, self.num_vbuckets())
    }

    /// The index into `kv_nodes` of the node holding `vb` active, if any.
    pub fn active_node(&self, vb: u16) -> Option<usize> {
        self.vbucket_map.get(usize::from(vb)).and_then(|&n| usize::try_from(n).ok())
    }

    /// The address to dial for KV node `node`: its plain endpoint, or its TLS one (`kvSSL`) for a TLS client.
    pub fn dial_addr(&self, node: usize, tls: bool) -> Result<&str, ClientError> {
        let missing = || ClientError::Config(format!("no KV node {node} in the config"));
        if !tls {
            return self.kv_nodes.get(node).map(String::as_str).ok_or_else(missing);
        }
        match self.kv_tls_nodes.get(node).ok_or_else(missing)? {
            Some(addr) => Ok(addr),
            None => Err(ClientError::Config(format!("KV node {} lists no TLS port (kvSSL)", self.kv_nodes[node]))),
        }
    }

    /// Whether this config supersedes `other` (compared by epoch, then revision).
    pub fn is_newer_than(&self, other: &ClusterConfig) -> bool {
        (self.rev_epoch, self.rev) > (other.rev_epoch, other.rev)
    }
}

/// CRC32 (IEEE) of the key, bits 16..31, modulo the vBucket count.
pub fn vbucket_of(key: &[u8], num_vbuckets: u16) -> u16 {
    let crc = crc32fast::hash(key);
    (((crc >> 16) & 0x7fff) % u32::from(num_vbuckets.max(1))) as u16
}

/// The endpoints (`host:port`) of `service` (a `nodesExt[].services` key such as `kv`, `kvSSL` or `n1ql`) in
/// `nodesExt` order, from a bucket config or `/pools/default/nodeServices`; a node without a hostname (or with
/// `$HOST`) is `seed_host`, the host the document came from.
pub fn service_endpoints(v: &Value, service: &str, seed_host: &str) -> Vec<String> {
    let Some(nodes) = v["nodesExt"].as_array() else { return Vec::new() };
    nodes.iter().filter_map(|n| node_endpoint(n, service, seed_host)).collect()
}

fn node_endpoint(n: &Value, service: &str, seed_host: &str) -> Option<String> {
    let port = n["services"][service].as_u64()?;
    let host = n["hostname"].as_str().filter(|h| !h.is_empty()).unwrap_or("$HOST");
    Some(host_port(&substitute(host, seed_host), port))
}

/// The `kvSSL` endpoint of the `nodesExt` entry whose `kv` endpoint is `kv` (`host:port`).
fn tls_endpoint(v: &Value, kv: &str, seed_host: &str) -> Option<String> {
    let node = v["nodesExt"].as_array()?.iter().find(|n| node_endpoint(n, "kv", seed_host).as_deref() == Some(kv))?;
    node_endpoint(node, "kvSSL", seed_host)
}

/// The KV endpoints in `serverList` order (the order `vBucketMap` indexes), each confirmed against `nodesExt` when
/// the config has it; with no `serverList`, the KV services of `nodesExt` in order.
fn kv_endpoints(v: &Value, seed_host: &str) -> Result<Vec<String>, ClientError> {
    let ext = service_endpoints(v, "kv", seed_host);
    let Some(list) = v["vBucketServerMap"]["serverList"].as_array() else {
        return if ext.is_empty() { Err(ClientError::Config("no KV nodes".into())) } else { Ok(ext) };
    };
    list.iter()
        .map(|s| {
            let s = s.as_str().ok_or_else(|| ClientError::Config("serverList entry".into()))?;
            let s = s.replace("$HOST", &bracket(seed_host));
            if !ext.is_empty() && !ext.contains(&s) {
                return Err(ClientError::Config(format!("serverList entry {s} is not a KV node of nodesExt")));
            }
            Ok(s)
        })
        .collect()
}

fn substitute(host: &str, seed_host: &str) -> String {
    if host == "$HOST" {
        seed_host.to_owned()
    } else {
        host.to_owned()
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

fn host_port(host: &str, port: u64) -> String {
    format!("{}:{port}", bracket(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(server_list: &str, nodes_ext: &str, map: &str) -> Vec<u8> {
        format!(
            r#"{{"rev":7,"revEpoch":1,"name":"default","nodeLocator":"vbucket",
                "vBucketServerMap":{{"hashAlgorithm":"CRC","numReplicas":1,"serverList":{server_list},
                "vBucketMap":{map}}},"nodesExt":{nodes_ext}}}"#
        )
        .into_bytes()
    }

    /// A two-node config routes each vBucket to the node its map row names first, in serverList order.
    #[test]
    fn routes_by_vbucket_map_and_server_list() {
        let body = config(
            r#"["10.0.0.1:11210","10.0.0.2:11210"]"#,
            r#"[{"hostname":"10.0.0.2","services":{"kv":11210}},{"hostname":"10.0.0.1","services":{"kv":11210}}]"#,
            "[[1,0],[0,1],[-1,-1],[1,0]]",
        );
        let c = ClusterConfig::parse(&body, "seed").unwrap();
        assert_eq!(c.kv_nodes, ["10.0.0.1:11210", "10.0.0.2:11210"]);
        assert_eq!((c.rev, c.num_vbuckets(), c.num_replicas), (7, 4, 1));
        assert_eq!(
            [c.active_node(0), c.active_node(1), c.active_node(2), c.active_node(9)],
            [Some(1), Some(0), None, None]
        );
    }

    /// `$HOST` and a missing nodesExt hostname both mean the host the client bootstrapped from.
    #[test]
    fn host_placeholder_is_the_seed_host() {
        let body = config(r#"["$HOST:11210"]"#, r#"[{"services":{"kv":11210,"mgmt":8091}}]"#, "[[0]]");
        let c = ClusterConfig::parse(&body, "127.0.0.1").unwrap();
        assert_eq!(c.kv_nodes, ["127.0.0.1:11210"]);
        assert!(c.query_nodes.is_empty(), "no node lists n1ql");
        let c = ClusterConfig::parse(&body, "::1").unwrap();
        assert_eq!(c.kv_nodes, ["[::1]:11210"]);
    }

    /// `/pools/default/nodeServices` (what XDCR reads of a remote cluster) gives its KV endpoints the same way; an
    /// empty hostname is the seed host too.
    #[test]
    fn node_services_give_their_service_endpoints() {
        let v: Value = serde_json::from_str(
            r#"{"rev":3,"nodesExt":[{"hostname":"","services":{"kv":11210,"kvSSL":11207}},
                {"hostname":"10.0.0.2","services":{"kv":11999,"mgmt":8091}}]}"#,
        )
        .unwrap();
        assert_eq!(service_endpoints(&v, "kv", "h"), ["h:11210", "10.0.0.2:11999"]);
        assert_eq!(service_endpoints(&v, "kvSSL", "h"), ["h:11207"]);
        assert_eq!(tls_endpoint(&v, "h:11210", "h").as_deref(), Some("h:11207"));
    }

    /// The query endpoints are the nodes whose nodesExt entry lists n1ql, in nodesExt order, with `$HOST`
    /// substituted; a node without the service is left out.
    #[test]
    fn query_endpoints_come_from_nodes_ext() {
        let ext = r#"[{"hostname":"b","services":{"kv":2,"n1ql":8093}},{"hostname":"a","services":{"kv":1}},
                      {"services":{"kv":3,"n1ql":9000}}]"#;
        let c = ClusterConfig::parse(&config(r#"["a:1","b:2","seed:3"]"#, ext, "[[0]]"), "seed").unwrap();
        assert_eq!(c.query_nodes, ["b:8093", "seed:9000"]);
    }

    /// Each KV node's TLS endpoint is the kvSSL port of its own nodesExt entry (not of another node on the same
    /// host), in serverList order; a node without kvSSL has none, and a TLS client cannot dial it.
    #[test]
    fn tls_endpoints_follow_each_nodes_kv_ssl_port() {
        let ext = r#"[{"hostname":"h","services":{"kv":2,"kvSSL":12}},{"hostname":"h","services":{"kv":1,"kvSSL":11}},
                      {"hostname":"g","services":{"kv":3}}]"#;
        let c = ClusterConfig::parse(&config(r#"["h:1","h:2","g:3"]"#, ext, "[[0]]"), "seed").unwrap();
        assert_eq!(c.kv_tls_nodes, [Some("h:11".to_owned()), Some("h:12".to_owned()), None]);
        assert_eq!((c.dial_addr(1, false).unwrap(), c.dial_addr(1, true).unwrap()), ("h:2", "h:12"));
        assert!(c.dial_addr(2, true).is_err() && c.dial_addr(3, false).is_err());
    }

    /// A map that names a node the config does not list, or a serverList nodesExt does not confirm, is refused.
    #[test]
    fn inconsistent_configs_are_errors() {
        let ext = r#"[{"hostname":"a","services":{"kv":1}}]"#;
        assert!(ClusterConfig::parse(&config(r#"["a:1"]"#, ext, "[[1]]"), "s").is_err());
        assert!(ClusterConfig::parse(&config(r#"["b:1"]"#, ext, "[[0]]"), "s").is_err());
        assert!(ClusterConfig::parse(b"{}", "s").is_err());
        assert!(ClusterConfig::parse(b"not json", "s").is_err());
    }

    /// The crc32fast-based hash agrees with the one the server and the SDKs use.
    #[test]
    fn vbucket_hash_matches_the_protocol_reference() {
        for key in [&b"foo"[..], b"", b"00000000000000000042", b"user6284781860667377211"] {
            assert_eq!(vbucket_of(key, 1024), settee_types::vbucket_for_key(key, 1024).0);
        }
        assert_eq!(vbucket_of(b"anything", 1), 0);
    }

    /// Newer means a higher (epoch, rev) pair.
    #[test]
    fn newer_compares_epoch_then_rev() {
        let body = config(r#"["a:1"]"#, "[]", "[[0]]");
        let a = ClusterConfig::parse(&body, "s").unwrap();
        let mut b = a.clone();
        b.rev += 1;
        assert!(b.is_newer_than(&a) && !a.is_newer_than(&b) && !a.is_newer_than(&a));
        b.rev_epoch = 0;
        assert!(a.is_newer_than(&b));
    }
}

//! Talking to a remote cluster's management service: its uuid (`GET /pools`) when a reference is created, and its
//! KV addresses (`GET /pools/default/nodeServices`) to bootstrap the replicator's connections from.

use std::time::Duration;

use settee_cluster::peer::Body;

use crate::cluster::rest_client;

const REMOTE_TIMEOUT: Duration = Duration::from_secs(10);

/// `hostname` as `host:port` (Couchbase accepts a bare host for port 8091).
pub fn normalise_hostname(hostname: &str) -> Result<String, String> {
    let h = hostname.trim().trim_start_matches("http://").trim_end_matches('/');
    if h.is_empty() || h.contains('/') || h.starts_with("https://") {
        return Err("hostname must be host or host:port".into());
    }
    match h.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(h.to_owned()),
        Some(_) => Err("hostname must be host or host:port".into()),
        None => Ok(format!("{h}:8091")),
    }
}

async fn get_json(hostname: &str, user: &str, password: &str, path: &str) -> Result<serde_json::Value, String> {
    let reply =
        rest_client::call(hostname, None, None, "GET", path, Some((user, password)), &Body::Empty, REMOTE_TIMEOUT)
            .await
            .map_err(|e| format!("cannot reach the remote cluster at {hostname}: {e}"))?;
    match reply.status {
        200 => serde_json::from_str(&reply.body).map_err(|e| format!("{hostname}{path}: not JSON: {e}")),
        401 | 403 => Err(format!("authentication failed on the remote cluster at {hostname} (HTTP {})", reply.status)),
        s => Err(format!("{hostname}{path} answered HTTP {s}")),
    }
}

/// The remote's cluster uuid.
pub async fn cluster_uuid(hostname: &str, user: &str, password: &str) -> Result<String, String> {
    let pools = get_json(hostname, user, password, "/pools").await?;
    pools["uuid"].as_str().map(str::to_owned).ok_or_else(|| format!("{hostname}/pools has no uuid"))
}

/// `host:port` of every KV service of the remote (nodes without a host of their own take the reference's).
pub async fn kv_seeds(hostname: &str, user: &str, password: &str) -> Result<Vec<String>, String> {
    let services = get_json(hostname, user, password, "/pools/default/nodeServices").await?;
    let default_host = hostname.rsplit_once(':').map_or(hostname, |(h, _)| h);
    let seeds: Vec<String> = services["nodesExt"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| {
            let port = n["services"]["kv"].as_u64()?;
            let host = n["hostname"].as_str().filter(|h| !h.is_empty()).unwrap_or(default_host);
            Some(format!("{host}:{port}"))
        })
        .collect();
    if seeds.is_empty() {
        return Err(format!("{hostname} lists no KV service"));
    }
    Ok(seeds)
}

#[cfg(test)]
mod tests {
    use super::normalise_hostname;

    /// Proves a bare host gets port 8091, host:port is kept, and anything else is refused.
    #[test]
    fn hostname_gets_the_default_port_when_none_is_given() {
        assert_eq!(normalise_hostname("10.0.0.2").unwrap(), "10.0.0.2:8091");
        assert_eq!(normalise_hostname("127.0.0.2:9000").unwrap(), "127.0.0.2:9000");
        assert_eq!(normalise_hostname("http://h:1/").unwrap(), "h:1");
        assert!(normalise_hostname("").is_err());
        assert!(normalise_hostname("h:notaport").is_err());
        assert!(normalise_hostname("h/x").is_err());
    }
}

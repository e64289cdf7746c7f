//! Talking to a remote cluster's management service: its uuid (`GET /pools`) when a reference is created, and its
//! KV addresses (`GET /pools/default/nodeServices`) to bootstrap the replicator's connections from; over HTTPS to
//! its TLS ports, trusting the reference's CA, when the reference demands encryption.

use std::time::Duration;

use settee_cluster::peer::Body;

use super::model::RemoteCluster;
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

/// One GET to the remote's management service as `remote`'s user: over HTTPS to its TLS management port,
/// trusting only the reference's CA, when the reference demands encryption. A TLS failure (a certificate the CA
/// did not sign) is goxdcr's "Invalid remote cluster".
pub async fn get(remote: &RemoteCluster, path: &str) -> Result<rest_client::Reply, String> {
    // No username: the reference authenticates by its client certificate.
    let creds = (!remote.username.is_empty()).then_some((remote.username.as_str(), remote.password.as_str()));
    match &remote.encryption {
        None => rest_client::call(&remote.hostname, None, None, "GET", path, creds, &Body::Empty, REMOTE_TIMEOUT)
            .await
            .map_err(|e| format!("cannot reach the remote cluster at {}: {e}", remote.hostname)),
        Some(tls) => {
            let client = tls.client(&remote.hostname).map_err(|e| format!("{INVALID_REMOTE}{e}"))?;
            rest_client::call(&tls.mgmt_tls, None, Some(&client), "GET", path, creds, &Body::Empty, REMOTE_TIMEOUT)
                .await
                .map_err(|e| format!("{INVALID_REMOTE}{} over TLS: {e:#}", tls.mgmt_tls))
        }
    }
}

/// goxdcr's prefix for a remote it cannot validate.
pub const INVALID_REMOTE: &str = "Invalid remote cluster. ";

async fn get_json(remote: &RemoteCluster, path: &str) -> Result<serde_json::Value, String> {
    let reply = get(remote, path).await?;
    let hostname = &remote.hostname;
    match reply.status {
        200 => serde_json::from_str(&reply.body).map_err(|e| format!("{hostname}{path}: not JSON: {e}")),
        401 | 403 => Err(format!("authentication failed on the remote cluster at {hostname} (HTTP {})", reply.status)),
        s => Err(format!("{hostname}{path} answered HTTP {s}")),
    }
}

/// The remote's cluster uuid.
pub async fn cluster_uuid(remote: &RemoteCluster) -> Result<String, String> {
    let pools = get_json(remote, "/pools").await?;
    pools["uuid"].as_str().map(str::to_owned).ok_or_else(|| format!("{}/pools has no uuid", remote.hostname))
}

/// The remote's HTTPS management address, as goxdcr learns it: `/nodes/self/xdcrSSLPorts` on the plain port,
/// asked without credentials (nothing secret travels in clear), gives `httpsMgmt`.
pub async fn tls_mgmt_addr(hostname: &str) -> Result<String, String> {
    let reply =
        rest_client::call(hostname, None, None, "GET", "/nodes/self/xdcrSSLPorts", None, &Body::Empty, REMOTE_TIMEOUT)
            .await
            .map_err(|e| format!("{INVALID_REMOTE}Could not get ssl port. err={e}"))?;
    let ports: serde_json::Value = serde_json::from_str(&reply.body).unwrap_or_default();
    let port = ports["httpsMgmt"].as_u64().filter(|_| reply.status == 200);
    let port =
        port.ok_or_else(|| format!("{INVALID_REMOTE}Could not get ssl port: the remote has no TLS management port"))?;
    let host = hostname.rsplit_once(':').map_or(hostname, |(h, _)| h);
    Ok(format!("{host}:{port}"))
}

/// The remote's KV endpoints to bootstrap from: its TLS ones (`kvSSL`) when the reference demands full encryption.
/// Read from its `nodesExt` as the client reads a bucket config (`settee_client::service_endpoints`; a node without
/// a host of its own is the reference's host). The nodes of the bucket's map are then dialled on the ports its
/// config names for them (`ClusterConfig::dial_addr`).
pub async fn kv_seeds(remote: &RemoteCluster) -> Result<Vec<String>, String> {
    let services = get_json(remote, "/pools/default/nodeServices").await?;
    let hostname = remote.hostname.as_str();
    let default_host = hostname.rsplit_once(':').map_or(hostname, |(h, _)| h);
    let tls = remote.encryption.as_ref().is_some_and(|t| !t.half);
    let service = if tls { "kvSSL" } else { "kv" };
    let seeds = settee_client::service_endpoints(&services, service, default_host);
    if seeds.is_empty() {
        let which = if tls { "TLS KV (kvSSL)" } else { "KV" };
        return Err(format!("{hostname} lists no {which} service"));
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

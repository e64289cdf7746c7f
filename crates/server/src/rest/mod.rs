//! The REST services: Couchbase's management API on the mgmt port and a stub query service on the query port.
//!
//! Every answer is shaped as ns_server (or the query service) shapes it, because the SDKs' managers pattern-match
//! status codes and message texts (PROTOCOL.md §7 and §11.1). Handlers are plain functions from an authenticated
//! [`auth::Caller`] and parsed input to JSON or a [`error::RestError`]; one middleware logs every failure once.
//!
//! Layout: `pools` (cluster and node views), `buckets` (reading bucket settings and configs), `bucket_settings`
//! (create, edit, delete, flush), `collections` (scopes and collections), `users` and `roles` (RBAC), `cluster`
//! (adding nodes, failover, auto-failover settings, the metadata store's Raft endpoints), `cluster_settings` (the
//! cluster name, quotas and the other settings couchbase-cli writes), `node_init` (`/nodeInit`), `certificates`
//! (the TLS CA and `reloadCertificate`; the TLS ports serve these same routers), `query`
//! (the query port), `audit` (`/settings/audit`; `conn_info` records each connection's addresses for the audit
//! events), `metrics` (`/metrics` for Prometheus, with `process_stats` reading `/proc`), `auth` (Basic auth and
//! privilege checks), `form` (urlencoded bodies), `error`, `console` (the web console's built-in files at `/ui/`),
//! `documents` (the REST document endpoint the console edits documents through), `timings` (per-opcode latency
//! percentiles as JSON); `/_p/query/query/service` is the query service answered in-process on this port, as
//! Couchbase's console proxies it.
//!
//! Not a hot path: handlers allocate freely and log at INFO.

mod admin_password;
mod audit;
pub(crate) mod auth;
mod bucket_settings;
mod bucket_stats;
mod buckets;
mod certificates;
mod cluster;
pub(crate) mod cluster_settings;
mod collections;
mod conn_info;
mod console;
mod documents;
pub(crate) mod error;
mod faults;
pub(crate) mod form;
mod index_status;
mod log_level;
mod metrics;
mod net_config;
mod node_init;
mod node_restart;
mod pools;
mod process_stats;
mod roles;
mod security;
mod server_groups;
mod stats_range;
mod stats_range_xdcr;
mod timings;
mod users;
mod users_backup;
mod write_stall;
mod xdcr;

#[cfg(test)]
pub(crate) mod testing;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, patch, post, put};
use axum::Router;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::node::Node;
use crate::tls::http_listener::TlsListener;

/// What every REST handler can reach.
#[derive(Clone)]
pub(crate) struct RestState {
    pub(crate) node: Arc<Node>,
    /// When the service started; `/pools/default` reports the uptime from it.
    pub(crate) started: Instant,
}

impl RestState {
    pub(crate) fn new(node: Arc<Node>) -> RestState {
        RestState { node, started: Instant::now() }
    }
}

/// Serves the management API on `listener` until `shutdown` completes, then lets in-flight requests finish.
pub async fn serve_mgmt(
    node: Arc<Node>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let write_timeout = std::time::Duration::from_secs(node.config.rest_write_timeout_secs);
    let links = node.peer_links.clone();
    let listener = write_stall::GuardedListener { listener, write_timeout, links };
    let app = mgmt_router(RestState::new(node)).into_make_service_with_connect_info::<conn_info::ConnAddrs>();
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// Serves the management API over TLS on `listener` (`--mgmt-tls-port`) until `shutdown` completes.
pub async fn serve_mgmt_tls(
    node: Arc<Node>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = TlsListener::new(listener, node.tls.clone(), crate::tls::TlsPort::Mgmt)?;
    let app = mgmt_router(RestState::new(node)).into_make_service_with_connect_info::<conn_info::ConnAddrs>();
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// A plain listener with TCP_NODELAY on every accepted connection, closing those the `strict` encryption level
/// refuses. An answer goes out in several writes (the headers, then the chunks a query streams); with Nagle's
/// algorithm each small write after the first waits for the client's ACK, which a client delays by up to 40 ms: a
/// kept-alive SDK connection then saw most short queries take ~40 ms.
struct PlainListener {
    listener: TcpListener,
    links: Arc<crate::cluster::peer_links::PeerLinks>,
}

impl axum::serve::Listener for PlainListener {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = axum::serve::Listener::accept(&mut self.listener).await;
            if self.links.refuses_plain(&stream, addr) {
                continue;
            }
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY on an accepted connection");
            }
            return (stream, addr);
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// Serves the query port (`/admin/ping` and a `/query/service` that answers "not implemented") until `shutdown`.
pub async fn serve_query(
    node: Arc<Node>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = PlainListener { listener, links: node.peer_links.clone() };
    axum::serve(listener, crate::query::http::router(RestState::new(node))).with_graceful_shutdown(shutdown).await
}

/// Serves the query port over TLS on `listener` (`--query-tls-port`) until `shutdown` completes.
pub async fn serve_query_tls(
    node: Arc<Node>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = TlsListener::new(listener, node.tls.clone(), crate::tls::TlsPort::Query)?;
    // With the connection's client certificate, which may authenticate its requests (`/settings/clientCertAuth`).
    let app =
        crate::query::http::router(RestState::new(node)).into_make_service_with_connect_info::<conn_info::ConnAddrs>();
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// Every management endpoint. Unknown paths get ns_server's 404 text, which the SDKs read as "not found". A trailing
/// slash is ignored, as ns_server ignores it (the Java SDK's bucket manager asks for `/pools/default/buckets/`).
pub(crate) fn mgmt_router(state: RestState) -> Router {
    trailing_slash_ignored(mgmt_routes(state))
}

/// `inner` reached with any trailing `/` of the path removed (the root path `/` and the console's `/ui/...` stay).
fn trailing_slash_ignored(inner: Router) -> Router {
    Router::new().fallback_service(tower::service_fn(move |mut request: Request| {
        let inner = inner.clone();
        let path = request.uri().path();
        // The console's files are a directory of their own (`/ui/` is its index, `/ui/app.js/` is nothing).
        let console = path == "/ui" || path.starts_with("/ui/");
        if path.len() > 1 && path.ends_with('/') && !console {
            let trimmed = path.trim_end_matches('/');
            let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
            let rewritten = match request.uri().query() {
                Some(query) => format!("{trimmed}?{query}"),
                None => trimmed.to_owned(),
            };
            // A path that was valid stays valid without its trailing slashes; should it not, the request goes on
            // unchanged and gets the 404 it would have had.
            if let Ok(uri) = rewritten.parse::<axum::http::Uri>() {
                *request.uri_mut() = uri;
            }
        }
        inner.oneshot(request)
    }))
}

fn mgmt_routes(state: RestState) -> Router {
    const BUCKET: &str = "/pools/default/buckets/{bucket}";
    Router::new()
        .route("/", get(pools::root))
        .route("/whoami", get(pools::whoami))
        .route("/pools", get(pools::pools))
        .route("/pools/default", get(pools::pool_default).post(cluster_settings::set_pool))
        .route("/nodes/self", get(pools::node_self))
        .route("/nodes/self/xdcrSSLPorts", get(pools::xdcr_ssl_ports))
        .route("/nodeInit", post(node_init::node_init))
        .route("/settings/indexes", get(cluster_settings::get_indexes).post(cluster_settings::set_indexes))
        .route("/settings/stats", get(cluster_settings::get_stats).post(cluster_settings::set_stats))
        .route("/internalSettings", get(cluster_settings::get_internal).post(cluster_settings::set_internal))
        .route(
            "/settings/retryRebalance",
            get(cluster_settings::get_retry_rebalance).post(cluster_settings::set_retry_rebalance),
        )
        .route("/pools/default/pendingRetryRebalance", get(cluster_settings::pending_retry_rebalance))
        .route("/pools/nodes", get(pools::pool_default))
        .route("/pools/default/nodeServices", get(pools::node_services))
        .route("/indexStatus", get(index_status::index_status))
        .route("/metrics", get(metrics::metrics))
        .route("/pools/default/buckets", get(buckets::list).post(bucket_settings::create))
        .route(BUCKET, get(buckets::get).post(bucket_settings::edit).delete(bucket_settings::delete))
        .route(&format!("{BUCKET}/controller/doFlush"), post(bucket_settings::flush))
        .route(&format!("{BUCKET}/controller/compactBucket"), post(bucket_settings::compact))
        .route("/pools/default/b/{bucket}", get(buckets::terse))
        .route("/pools/default/bs/{bucket}", get(buckets::streaming))
        .route("/pools/default/bucketsStreaming/{bucket}", get(buckets::streaming))
        .route(&format!("{BUCKET}/scopes"), get(collections::list).post(collections::create_scope))
        .route(&format!("{BUCKET}/scopes/"), get(collections::list).post(collections::create_scope))
        .route(&format!("{BUCKET}/scopes/{{scope}}"), delete(collections::drop_scope))
        .route(&format!("{BUCKET}/scopes/{{scope}}/collections"), post(collections::create_collection))
        .route(
            &format!("{BUCKET}/scopes/{{scope}}/collections/{{collection}}"),
            patch(collections::update_collection).delete(collections::drop_collection),
        )
        .route("/pools/default/certificate", get(certificates::certificate))
        .route("/pools/default/trustedCAs", get(certificates::trusted_cas))
        .route("/node/controller/reloadCertificate", post(certificates::reload_certificate))
        .route("/node/controller/loadTrustedCAs", post(certificates::load_trusted_cas))
        .route("/node/controller/enableExternalListener", post(net_config::enable_external_listener))
        .route("/node/controller/disableExternalListener", post(net_config::disable_external_listener))
        .route("/node/controller/disableUnusedExternalListeners", post(net_config::disable_unused_external_listeners))
        .route("/node/controller/setupNetConfig", post(net_config::setup_net_config))
        .route("/settee/tls/ca", get(certificates::cluster_ca))
        .route("/settings/rbac/users", get(users::list))
        .route("/settings/rbac/users/local", get(users::list))
        .route("/settings/rbac/users/local/{user}", get(users::get).put(users::upsert).delete(users::delete))
        .route("/settings/rbac/roles", get(users::roles))
        .route("/settings/rbac/backup", get(users_backup::get).put(users_backup::put))
        .route("/settings/rbac/groups", get(users::groups))
        .route("/settings/rbac/groups/{group}", get(users::group).put(users::put_group).delete(users::delete_group))
        .route("/controller/changePassword", post(users::change_password))
        .route("/controller/resetAdminPassword", post(admin_password::reset_admin_password))
        .route("/settee/node/peerSecret", get(admin_password::peer_secret))
        .route("/settings/audit", get(audit::get_settings).post(audit::set_settings))
        .route("/settings/audit/descriptors", get(audit::descriptors))
        .route("/settings/security", get(security::get_settings).post(security::set_settings))
        .route("/settings/clientCertAuth", get(security::get_client_cert_auth).post(security::set_client_cert_auth))
        .route("/settings/passwordPolicy", get(security::get_password_policy).post(security::set_password_policy))
        .route("/controller/addNode", post(cluster::add_node))
        .route(
            "/pools/default/serverGroups",
            get(server_groups::list).post(server_groups::create).put(server_groups::set_members),
        )
        .route("/pools/default/serverGroups/{uuid}", put(server_groups::rename).delete(server_groups::delete))
        .route("/pools/default/serverGroups/{uuid}/addNode", post(server_groups::add_node))
        .route("/node/controller/doJoinCluster", post(cluster::do_join_cluster))
        .route("/controller/failOver", post(cluster::fail_over))
        .route("/controller/startGracefulFailover", post(cluster::graceful_fail_over))
        .route("/settee/node/drain", post(cluster::drain))
        .route("/settee/node/flush", post(bucket_settings::node_flush))
        .route("/settee/node/seqnos", get(cluster::replica_seqnos))
        .route("/settee/node/bucketSamples", post(bucket_stats::node_samples))
        .route("/settee/node/restart", post(node_restart::restart))
        .route("/pools/default/stats/range/{metric}", get(stats_range::range))
        .route("/pools/default/stats/range/{metric}/{function}", get(stats_range::range_with_function))
        .route("/settings/logLevel", get(log_level::get_log_level).post(log_level::set_log_level))
        .route(&format!("{BUCKET}/stats"), get(bucket_stats::bucket_stats))
        .route(&format!("{BUCKET}/nodes/{{node}}/stats"), get(bucket_stats::node_bucket_stats))
        .route("/settee/testing/faults", post(faults::set_faults))
        .route("/controller/rebalance", post(cluster::rebalance))
        .route("/controller/stopRebalance", post(cluster::stop_rebalance))
        .route("/controller/setRecoveryType", post(cluster::set_recovery_type))
        .route("/controller/reAddNode", post(cluster::re_add_node))
        .route("/settings/rebalance", get(cluster::get_rebalance_settings).post(cluster::set_rebalance_settings))
        .route("/pools/default/rebalanceProgress", get(cluster::rebalance_progress))
        .route("/pools/default/tasks", get(cluster::tasks))
        .route("/pools/default/remoteClusters", get(xdcr::list_remotes).post(xdcr::create_remote))
        .route("/pools/default/remoteClusters/{name}", post(xdcr::edit_remote).delete(xdcr::delete_remote))
        .route("/controller/createReplication", post(xdcr::create_replication))
        .route("/settings/replications", get(xdcr::default_settings))
        .route("/settings/replications/{*id}", get(xdcr::get_settings).post(xdcr::set_settings))
        .route("/controller/cancelXDCR/{*id}", delete(xdcr::cancel))
        .route("/settings/autoFailover", get(cluster::get_auto_failover).post(cluster::set_auto_failover))
        .route("/settings/autoFailover/resetCount", post(cluster::reset_auto_failover_count))
        .route("/settee/raft/{*rest}", post(cluster::raft))
        .route("/settee/cluster/versions", get(cluster::versions))
        .route("/settee/timings", get(timings::cluster_timings))
        .route("/settee/node/timings", get(timings::node_timings))
        .route(
            &format!("{BUCKET}/docs/{{id}}"),
            get(documents::get_default).post(documents::post_default).delete(documents::delete_default),
        )
        .route(
            &format!("{BUCKET}/scopes/{{scope}}/collections/{{collection}}/docs/{{id}}"),
            get(documents::get).post(documents::post).delete(documents::delete),
        )
        .route("/_p/query/query/service", get(crate::query::http::service_get).post(crate::query::http::service_post))
        .route("/ui", get(console::redirect))
        .route("/ui/", get(console::index))
        .route("/ui/{file}", get(console::file))
        .fallback(|| async { error::RestError::NotFound })
        .layer(middleware::from_fn(log_failures))
        .layer(middleware::from_fn(console::no_browser_prompt))
        .with_state(state)
}

/// Logs each failed request once, with the reason the handler attached (see `RestError`).
pub(crate) async fn log_failures(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status();
    if status.is_client_error() || status.is_server_error() {
        let reason = response.extensions().get::<error::FailureReason>().map_or("", |r| r.0.as_str());
        if status.is_server_error() {
            tracing::warn!(%method, %path, status = status.as_u16(), reason, "REST request failed");
        } else {
            tracing::info!(%method, %path, status = status.as_u16(), reason, "REST request refused");
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Regression (issue 15, `settee bench --query`): accepted connections had Nagle's algorithm on, so a streamed
    /// answer's later chunks waited for the client's delayed ACK and short queries took ~40 ms. Every connection
    /// the REST and query listeners accept now has TCP_NODELAY.
    #[tokio::test]
    async fn accepted_connections_have_tcp_nodelay() {
        use axum::serve::Listener as _;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let links = Arc::new(crate::cluster::peer_links::PeerLinks::new(None));
        let mut listener = PlainListener { listener, links };
        let client = tokio::spawn(async move { tokio::net::TcpStream::connect(addr).await.unwrap() });
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().unwrap(), "the accepted socket has TCP_NODELAY");
        drop(client.await.unwrap());
    }

    /// Sends one HTTP/1.1 request that closes the connection and returns the raw answer.
    async fn raw_get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        answer
    }

    #[tokio::test]
    async fn the_management_port_proxies_the_query_service() {
        // Proves `/_p/query/query/service` (the console's workbench) runs a statement as the query port does, with
        // the caller's credentials: rows for the administrator, 401 without credentials.
        let app = testing::TestApp::new();
        let reply = app
            .call("POST", "/_p/query/query/service", Some(testing::ADMIN), Some("statement=SELECT%201%20AS%20one"))
            .await;
        assert_eq!(reply.status, axum::http::StatusCode::OK, "{}", reply.text);
        assert_eq!(reply.json["results"], serde_json::json!([{"one": 1}]));
        let refused = app.call("POST", "/_p/query/query/service", None, Some("statement=SELECT%201")).await;
        assert_eq!(refused.status, axum::http::StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn both_services_answer_over_tcp_and_stop_on_shutdown() {
        // Proves serve_mgmt and serve_query answer real HTTP/1.1 and return Ok once their shutdown future completes.
        let node = Node::new(crate::config::ServerConfig::for_tests()).expect("node");
        let mgmt = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let query = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (mgmt_addr, query_addr) = (mgmt.local_addr().unwrap(), query.local_addr().unwrap());
        let (stop_mgmt, stopped_mgmt) = tokio::sync::oneshot::channel::<()>();
        let (stop_query, stopped_query) = tokio::sync::oneshot::channel::<()>();
        let mgmt_task = tokio::spawn(serve_mgmt(node.clone(), mgmt, async move {
            let _ = stopped_mgmt.await;
        }));
        let query_task = tokio::spawn(serve_query(node, query, async move {
            let _ = stopped_query.await;
        }));
        assert!(raw_get(mgmt_addr, "/").await.starts_with("HTTP/1.1 200"));
        assert!(raw_get(mgmt_addr, "/pools/default").await.starts_with("HTTP/1.1 401"));
        assert!(raw_get(query_addr, "/admin/ping").await.starts_with("HTTP/1.1 200"));
        stop_mgmt.send(()).expect("mgmt still running");
        stop_query.send(()).expect("query still running");
        let deadline = Duration::from_secs(10);
        assert!(tokio::time::timeout(deadline, mgmt_task).await.expect("mgmt stops").expect("no panic").is_ok());
        assert!(tokio::time::timeout(deadline, query_task).await.expect("query stops").expect("no panic").is_ok());
    }
}

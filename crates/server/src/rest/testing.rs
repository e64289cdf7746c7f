//! A node with its default bucket behind the management router, driven request by request without a socket.

use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde_json::Value;
use tower::ServiceExt;

use super::RestState;
use crate::auth::Role;
use crate::node::Node;

/// The administrator of `ServerConfig::defaults()`.
pub(crate) const ADMIN: (&str, &str) = ("Administrator", "password");

pub(crate) struct TestApp {
    pub(crate) state: RestState,
    router: Router,
}

/// One answer: status, headers, the body as text and, when it parses, as JSON (else `Null`).
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) text: String,
    pub(crate) json: Value,
}

impl TestApp {
    /// A node from the CLI defaults with its `default` bucket, behind the management router.
    pub(crate) fn new() -> TestApp {
        let node = Node::new(crate::config::ServerConfig::for_tests()).expect("default config is valid");
        node.create_bucket(node.default_bucket_config().expect("a default bucket")).expect("default bucket");
        let state = RestState::new(node);
        TestApp { router: super::mgmt_router(state.clone()), state }
    }

    /// The query-port router over the same node.
    pub(crate) fn query(&self) -> TestApp {
        TestApp { router: crate::query::http::router(self.state.clone()), state: self.state.clone() }
    }

    pub(crate) fn add_user(&self, id: &str, password: &str, roles: &str) {
        let roles = Role::parse_list(roles).expect("test roles parse");
        self.state.node.users.upsert(id, id, Some(password), roles).expect("test user");
    }

    /// Sends one request; a body is sent as a urlencoded form.
    pub(crate) async fn call(&self, method: &str, uri: &str, auth: Option<(&str, &str)>, body: Option<&str>) -> Reply {
        self.call_from(None, method, uri, auth, body).await
    }

    /// [`TestApp::call`] as if the connection came from `remote` (the handlers read it from `ConnectInfo`).
    pub(crate) async fn call_from(
        &self,
        remote: Option<std::net::SocketAddr>,
        method: &str,
        uri: &str,
        auth: Option<(&str, &str)>,
        body: Option<&str>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(remote) = remote {
            let addrs = crate::audit::Addrs { remote: Some(remote), local: None };
            request = request.extension(axum::extract::ConnectInfo(super::conn_info::ConnAddrs(addrs, None)));
        }
        if let Some((user, password)) = auth {
            request =
                request.header(header::AUTHORIZATION, format!("Basic {}", BASE64.encode(format!("{user}:{password}"))));
        }
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        let request = request.body(Body::from(body.unwrap_or("").to_owned())).expect("valid test request");
        let response = self.router.clone().oneshot(request).await.expect("the router is infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body reads");
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply { status, headers, text, json }
    }

    /// GET as the administrator, asserting 200; returns the JSON.
    pub(crate) async fn get_ok(&self, uri: &str) -> Value {
        let reply = self.call("GET", uri, Some(ADMIN), None).await;
        assert_eq!(reply.status, StatusCode::OK, "GET {uri}: {}", reply.text);
        reply.json
    }
}

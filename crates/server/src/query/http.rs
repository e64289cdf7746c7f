//! The query port: `POST /query/service` (and GET / form bodies for curl and cbq), `/admin/ping`,
//! `/admin/vitals`, `/admin/active_requests`.
//!
//! A request is parsed and authenticated here, then runs on the blocking pool (at most `QueryService::servicers`
//! at once) while this task streams its answer. The HTTP status is decided when the executor either starts the
//! answer (200; later errors go in the body) or fails before that (the error's status).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, Extensions, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Json as AxumJson, Router};
use serde_json::{json, Value as Json};
use settee_query::exec::{Cx, DmlOptions, Memory, TIMED_OUT};
use settee_query::functions::FnContext;
use settee_query::{parse, QueryError, StatementEnv};
use tokio::sync::{mpsc, oneshot};

use super::datastore::NodeDatastore;
use super::request::{self, Profile, QueryRequest};
use super::requests::ActiveRequest;
use super::response::{self, Head, StreamSink};
use super::SystemCatalog;
use crate::rest::auth;
use crate::rest::RestState;

/// Body chunks buffered between the executor and the HTTP connection.
const BODY_CHUNKS: usize = 8;
/// The largest request body accepted (Couchbase: 64 MiB by default; a statement plus its parameters).
const REQUEST_BYTES_MAX: usize = 64 << 20;

pub(crate) fn router(state: RestState) -> Router {
    Router::new()
        .route("/admin/ping", get(ping))
        .route("/admin/vitals", get(vitals))
        .route("/admin/active_requests", get(active_requests))
        .route("/api/v1/stats", get(super::index_stats::node_stats))
        .route("/api/v1/stats/{keyspace}", get(super::index_stats::keyspace_stats))
        .route("/api/v1/stats/{keyspace}/{index}", get(super::index_stats::index_stats))
        .route("/query/service", get(service_get).post(service_post))
        .route("/query", get(service_get).post(service_post))
        .route("/settee/query/fetch", axum::routing::post(super::peer::fetch))
        .route("/settee/query/mutate", axum::routing::post(super::peer::mutate))
        .route("/settee/query/scan", axum::routing::post(super::peer::scan))
        .route("/settee/query/count", axum::routing::post(super::peer::count))
        .route("/settee/query/count_range", axum::routing::post(super::peer::count_range))
        .route("/settee/query/wait", axum::routing::post(super::peer::wait))
        .route("/settee/query/prepared", axum::routing::post(super::peer::prepared))
        .route("/settee/query/index_state", axum::routing::post(super::peer::index_state))
        .fallback(|| async { crate::rest::error::RestError::NotFound })
        .layer(middleware::from_fn(crate::rest::log_failures))
        .layer(axum::extract::DefaultBodyLimit::max(REQUEST_BYTES_MAX))
        .with_state(state)
}

/// `GET /admin/ping`: liveness, unauthenticated as in Couchbase.
async fn ping() -> AxumJson<Json> {
    AxumJson(json!({}))
}

/// `GET /admin/vitals`: the query service's state, as Couchbase's endpoint reports it (a subset).
async fn vitals(State(state): State<RestState>) -> AxumJson<Json> {
    let q = &state.node.query;
    AxumJson(json!({
        "uptime": response::go_duration(state.node.started.elapsed()),
        "version": crate::node::COUCHBASE_VERSION,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "total.threads": q.servicers,
        "request.active.count": q.requests.active_count(),
        "request.completed.count": q.completed.load(Ordering::Relaxed),
        "request.prepared.count": q.engine.prepareds.list().len(),
    }))
}

/// `GET /admin/active_requests`: the running requests (administrators only).
async fn active_requests(State(state): State<RestState>, headers: HeaderMap, extensions: Extensions) -> Response {
    match auth::authenticate_request(&state, &headers, &extensions).await {
        Ok(c) if c.user.is_admin() => {
            let rows: Vec<Json> =
                state.node.query.requests.active_rows().into_iter().map(|(_, v)| to_json(&v)).collect();
            AxumJson(Json::Array(rows)).into_response()
        }
        Ok(_) => StatusCode::FORBIDDEN.into_response(),
        Err(_) => StatusCode::UNAUTHORIZED.into_response(),
    }
}

pub(crate) fn to_json(v: &settee_query::value::Value) -> Json {
    serde_json::from_str(&v.to_json_string()).unwrap_or(Json::Null)
}

pub(crate) async fn service_get(
    State(state): State<RestState>,
    headers: HeaderMap,
    extensions: Extensions,
    Query(q): Query<Vec<(String, String)>>,
) -> Response {
    let fields = q.into_iter().map(|(k, v)| (k, Json::String(v))).collect();
    service(state, headers, extensions, Ok((fields, true))).await
}

pub(crate) async fn service_post(
    State(state): State<RestState>,
    method: Method,
    headers: HeaderMap,
    extensions: Extensions,
    body: Bytes,
) -> Response {
    let _ = method;
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let fields = if form {
        Ok((form_fields(&body), true))
    } else {
        match serde_json::from_slice::<Json>(&body) {
            Ok(Json::Object(o)) => Ok((o.into_iter().collect(), false)),
            // A body that is not a JSON object: Couchbase treats a plain body as the statement.
            Ok(_) | Err(_) if !body.is_empty() && !body.starts_with(b"{") => {
                Ok((vec![("statement".to_string(), Json::String(String::from_utf8_lossy(&body).into()))], false))
            }
            Ok(_) | Err(_) => Err(QueryError::BadValue("request body: a JSON object is expected".into())),
        }
    };
    service(state, headers, extensions, fields).await
}

fn form_fields(body: &[u8]) -> Vec<(String, Json)> {
    crate::rest::form::Form::parse(body).into_pairs().into_iter().map(|(k, v)| (k, Json::String(v))).collect()
}

async fn service(
    state: RestState,
    headers: HeaderMap,
    extensions: Extensions,
    fields: Result<(Vec<(String, Json)>, bool), QueryError>,
) -> Response {
    let started = Instant::now();
    let node = state.node.clone();
    let q = node.query.clone();
    let request_id = settee_query::uuid(rand::random(), rand::random());
    let (fields, from_form) = match fields {
        Ok(f) => f,
        Err(e) => return early(&request_id, None, e, started),
    };
    let context_id = fields.iter().find(|(k, _)| k == "client_context_id").map(|(_, v)| match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    });
    let caller = match auth::authenticate_request(&state, &headers, &extensions).await {
        Ok(c) => c,
        Err(_) => return early(&request_id, context_id.as_deref(), no_credentials(), started),
    };
    let ticket = match admit(&node, &caller.user, &fields) {
        Ok(t) => t,
        Err(e) => return early(&request_id, context_id.as_deref(), e, started),
    };
    let req = match request::parse(fields, from_form) {
        Ok(r) => r,
        Err(e) => return early(&request_id, context_id.as_deref(), e, started),
    };
    if req.statement.is_none() && req.prepared.is_none() {
        return early(&request_id, context_id.as_deref(), QueryError::NoStatement, started);
    }
    let Ok(admission) = q.admitted.clone().try_acquire_owned() else {
        return early(&request_id, context_id.as_deref(), QueryError::QueueFull, started);
    };
    let Ok(permit) = q.limiter.clone().acquire_owned().await else {
        return early(&request_id, context_id.as_deref(), QueryError::ShuttingDown, started);
    };
    let run_state = Arc::new(AtomicU8::new(settee_query::exec::RUNNING));
    let active = Arc::new(ActiveRequest {
        id: request_id.clone(),
        client_context_id: context_id.clone().unwrap_or_default(),
        statement: req.statement.clone().or_else(|| req.prepared.clone()).unwrap_or_default(),
        user: caller.user.id.clone(),
        started,
        request_time: request_time(&node),
        consistency: req.consistency_name,
        state: run_state.clone(),
    });
    q.requests.start(active.clone());
    if let Some((limit, _)) = &req.timeout {
        let (limit, flag) = (*limit, run_state.clone());
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            let _ = flag.compare_exchange(settee_query::exec::RUNNING, TIMED_OUT, Ordering::AcqRel, Ordering::Acquire);
        });
    }
    let (tx, mut rx) = mpsc::channel::<Bytes>(BODY_CHUNKS);
    let (head_tx, head_rx) = oneshot::channel();
    let prefix = response::prefix(&request_id, context_id.as_deref());
    let stall = Duration::from_millis(q.send_stall_timeout_ms.load(Ordering::Relaxed));
    let servicer = response::Servicer {
        limiter: q.limiter.clone(),
        permit: Some(permit),
        runtime: tokio::runtime::Handle::current(),
        stall,
    };
    let sink = StreamSink::new(tx, head_tx, prefix.clone(), run_state.clone(), req.signature, servicer);
    let exec = Exec {
        node: node.clone(),
        user: caller.user.clone(),
        req,
        state: run_state.clone(),
        started,
        runtime: tokio::runtime::Handle::current(),
    };
    let metrics_wanted = exec.req.metrics;
    let finish_q = q.clone();
    tokio::task::spawn_blocking(move || {
        let outcome = exec.run(sink);
        finish_q.requests.finish(&active, outcome.0, outcome.1, outcome.2);
        finish_q.completed.fetch_add(1, Ordering::Relaxed);
        drop(admission);
    });
    match head_rx.await {
        Ok(Head::Started) => {
            // The client going away drops the body stream, which fails the executor's next send and stops it.
            let stream = async_stream_body(rx, ticket);
            let mut resp = Response::new(Body::from_stream(stream));
            resp.headers_mut().insert(header::CONTENT_TYPE, "application/json; version=7.6.2".parse().expect("static"));
            resp
        }
        Ok(Head::Failed(e)) => {
            rx.close();
            let m = metrics_wanted
                .then(|| response::metrics(started.elapsed(), started.elapsed(), &Default::default(), 0, 0, 1));
            reply(e.http_status(), response::error_body(&prefix, &e, m))
        }
        Err(_) => reply(
            500,
            response::error_body(&prefix, &QueryError::internal("the request ended without an answer"), None),
        ),
    }
}

/// The executor's chunks as the response body. The user's ticket (`auth::limits`) lives as long as the body, so the
/// query counts among the user's running ones until its last chunk is sent, and each chunk counts as sent bytes.
fn async_stream_body(
    rx: mpsc::Receiver<Bytes>,
    ticket: crate::auth::QueryTicket,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::unfold((rx, ticket), |(mut rx, ticket)| async move {
        let chunk = rx.recv().await?;
        ticket.sent(chunk.len() as u64);
        Some((Ok(chunk), (rx, ticket)))
    })
}

/// Admits a request of `user` under its query limits (`auth::limits`), or answers which one it is over
/// (Couchbase's 1191-1194). The request's size is only added up for a user who has query limits.
fn admit(
    node: &crate::node::Node,
    user: &crate::auth::User,
    fields: &[(String, Json)],
) -> Result<crate::auth::QueryTicket, QueryError> {
    use crate::auth::QueryLimit;
    let limited = user.limits.as_ref().is_some_and(|l| l.query.is_some());
    let bytes = if limited {
        fields.iter().map(|(k, v)| k.len() + v.as_str().map_or_else(|| v.to_string().len(), str::len)).sum::<usize>()
    } else {
        0
    };
    node.limits.query_admit(user, bytes as u64).map_err(|limit| {
        tracing::debug!(user = %user.id, ?limit, "query over the user's limits");
        match limit {
            QueryLimit::Concurrent => QueryError::UserRequestsExceeded,
            QueryLimit::Rate => QueryError::UserRequestRateExceeded,
            QueryLimit::Ingress => QueryError::UserRequestSizeExceeded,
            QueryLimit::Egress => QueryError::UserResultSizeExceeded,
        }
    })
}

fn no_credentials() -> QueryError {
    QueryError::InsufficientCredentials("queries. Authentication failure.".into())
}

fn early(request_id: &str, context_id: Option<&str>, e: QueryError, started: Instant) -> Response {
    let prefix = response::prefix(request_id, context_id);
    let m = response::metrics(started.elapsed(), started.elapsed(), &Default::default(), 0, 0, 1);
    reply(e.http_status(), response::error_body(&prefix, &e, Some(m)))
}

fn reply(status: u16, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(header::CONTENT_TYPE, "application/json; version=7.6.2".parse().expect("static"));
    r
}

fn request_time(node: &crate::node::Node) -> String {
    let nanos = node.clock.now_nanos();
    settee_types::UtcTime::from_unix_nanos(nanos).iso8601_millis()
}

/// One request on the blocking pool.
struct Exec {
    node: Arc<crate::node::Node>,
    user: Arc<crate::auth::User>,
    req: QueryRequest,
    state: Arc<AtomicU8>,
    started: Instant,
    runtime: tokio::runtime::Handle,
}

impl Exec {
    /// Runs the request and writes its answer; returns (status, result count, error count) for the request log.
    fn run(self, mut sink: StreamSink) -> (&'static str, u64, u64) {
        let q = self.node.query.clone();
        let ds = NodeDatastore {
            node: self.node.clone(),
            registry: q.indexes.clone(),
            user: Some(self.user.clone()),
            runtime: self.runtime.clone(),
        };
        let clock = self.node.clock.clone();
        let now = clock.now_nanos() as i64;
        let clock_fn = move || clock.now_nanos() as i64;
        let random = || rand::random::<u64>();
        let fnctx = FnContext { now_nanos: now, clock: &clock_fn, random: &random };
        let mut cx = Cx::new(&ds, &self.req.named, &self.req.positional, fnctx, &self.state);
        let timeout_text = self.req.timeout.as_ref().map(|(_, t)| t.clone()).unwrap_or_default();
        cx.timeout_text = &timeout_text;
        cx.consistency = self.req.consistency.clone();
        let wait = self.req.scan_wait.or(self.req.timeout.as_ref().map(|(d, _)| *d)).unwrap_or(Duration::from_secs(75));
        cx.scan_deadline_nanos = now.saturating_add(wait.as_nanos().min(i64::MAX as u128) as i64);
        let quota_mb = if self.req.memory_quota_mb > 0 { self.req.memory_quota_mb } else { q.memory_quota_mb };
        cx.memory = Memory::new(quota_mb.saturating_mul(1 << 20));
        cx.dml = DmlOptions { preserve_expiry: self.req.preserve_expiry, durability: self.req.durability };
        let catalog = SystemCatalog { node: self.node.clone(), requests: &q.requests, engine: &q.engine };
        cx.system = Some(&catalog);
        let env = StatementEnv {
            context: self.req.query_context.clone(),
            readonly: self.req.readonly,
            auto_execute: self.req.auto_execute,
        };
        let exec_started = Instant::now();
        let result = self.statement(&q, &env, &cx, &mut sink);
        let mut errors = std::mem::take(&mut *cx.dml_errors.borrow_mut());
        if let Err(e) = result {
            if !sink.started() && errors.is_empty() {
                sink.fail_early(e);
                return ("fatal", 0, 1);
            }
            errors.push(e);
        }
        let status = match errors.first() {
            None => "success",
            Some(QueryError::Timeout(_)) => "timeout",
            Some(e) if response::status_of(e) == "stopped" => "stopped",
            Some(_) => "errors",
        };
        let mut tail = serde_json::Map::new();
        tail.insert("status".into(), json!(status));
        if self.req.metrics {
            let m = response::metrics(
                self.started.elapsed(),
                exec_started.elapsed(),
                &sink.tally,
                cx.stats.mutations.get(),
                cx.stats.sorts.get(),
                errors.len() as u64,
            );
            tail.insert("metrics".into(), m);
        }
        if self.req.profile != Profile::Off {
            let host = format!("{}:{}", self.node.config.host, self.node.config.query_port);
            tail.insert("profile".into(), response::profile(self.started, &request_time(&self.node), &host, None));
        }
        let counts = (sink.tally.result_count, errors.len() as u64);
        sink.finish(&errors, Json::Object(tail));
        (status, counts.0, counts.1)
    }

    /// A statement prepared on another node of the cluster: its text is fetched and prepared here under the same
    /// name, so a name prepared anywhere runs everywhere.
    fn prepared_from_peers(
        &self,
        q: &super::QueryService,
        name: &str,
        context: &settee_query::plan::QueryContext,
    ) -> Option<Arc<settee_query::prepared::Prepared>> {
        let cluster = self.node.cluster()?;
        let meta = cluster.metadata();
        let client = super::routing::peers(&self.node);
        for (id, info) in &meta.nodes {
            if *id == cluster.me {
                continue;
            }
            let addr = format!("{}:{}", info.hostname, info.query_port);
            let req = super::peer::PreparedRequest { name: name.to_string(), context: context.key() };
            let reply: Result<super::peer::PreparedReply, _> =
                self.runtime.block_on(client.call(&addr, "prepared", &req, Duration::from_secs(5)));
            if let Ok(super::peer::PreparedReply { found: Some((text, ctx)) }) = reply {
                let stmt = parse(&text).ok()?;
                let ctx = settee_query::plan::parse_query_context(&ctx).ok()?;
                let now = self.node.clock.now_nanos() as i64;
                let p = Arc::new(settee_query::prepared::Prepared::new(name.to_string(), text, stmt, ctx, now));
                q.engine.prepareds.insert(p.clone());
                return Some(p);
            }
        }
        None
    }

    fn statement(
        &self,
        q: &super::QueryService,
        env: &StatementEnv,
        cx: &Cx<'_>,
        sink: &mut StreamSink,
    ) -> Result<(), QueryError> {
        if let Some(name) = &self.req.prepared {
            let p = match q.engine.lookup(name, &env.context) {
                Ok(p) => p,
                Err(e) => self.prepared_from_peers(q, name, &env.context).ok_or(e)?,
            };
            super::auth::check(&self.user, &p.statement, &p.context)?;
            return q.engine.run_prepared(&p, env, cx, sink);
        }
        let text = self.req.statement.as_deref().unwrap_or_default();
        let stmt = parse(text)?;
        if let settee_query::ast::Statement::Execute { name: settee_query::ast::Expr::Literal(v), .. } = &stmt {
            if let Some(p) = v.as_str().and_then(|n| q.engine.prepareds.get(n, &env.context)) {
                super::auth::check(&self.user, &p.statement, &p.context)?;
            }
        }
        super::auth::check(&self.user, &stmt, &env.context)?;
        q.engine.execute(&stmt, text, env, cx, sink)
    }
}

#[cfg(test)]
mod tests {
    use crate::rest::testing::{TestApp, ADMIN};
    use axum::http::StatusCode;
    use serde_json::json;

    #[tokio::test]
    async fn ping_answers_200_without_credentials() {
        // Proves the readiness probe of the C++ and Go SDKs passes.
        let app = TestApp::new().query();
        let reply = app.call("GET", "/admin/ping", None, None).await;
        assert_eq!((reply.status, reply.json), (StatusCode::OK, json!({})));
    }

    #[tokio::test]
    async fn a_select_streams_its_members_in_couchbases_order() {
        // Proves the answer's shape: requestID, the echoed clientContextID, signature, results (top-level members
        // in projection order), status and metrics, each member on its own line.
        let app = TestApp::new().query();
        let body = "statement=SELECT%202%20AS%20b,%201%20AS%20a&client_context_id=ctx-1";
        let reply = app.call("POST", "/query/service", Some(ADMIN), Some(body)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        let keys: Vec<&String> = reply.json.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["requestID", "clientContextID", "signature", "results", "status", "metrics"]);
        assert_eq!(reply.json["clientContextID"], "ctx-1");
        assert_eq!(reply.json["status"], "success");
        assert_eq!(reply.json["metrics"]["resultCount"], 1);
        assert!(reply.text.contains(r#"{"b":2,"a":1}"#), "{}", reply.text);
        assert!(reply.text.lines().any(|l| l.starts_with("\"status\": ")), "{}", reply.text);
    }

    #[tokio::test]
    async fn get_with_a_statement_parameter_runs_it() {
        // Proves curl's GET ?statement= form.
        let app = TestApp::new().query();
        let reply = app.call("GET", "/query/service?statement=SELECT%20RAW%201", Some(ADMIN), None).await;
        assert_eq!(reply.json["results"], json!([1]), "{}", reply.text);
    }

    #[tokio::test]
    async fn request_errors_get_couchbases_codes_and_statuses() {
        // Proves 401/13014 for bad credentials, 400/1050 without a statement, 400/1065 for an unknown field and
        // 400/3000 for a syntax error, each with status "fatal" and no results.
        let app = TestApp::new().query();
        let cases = [
            (Some(("Administrator", "wrong")), "statement=SELECT%201", StatusCode::UNAUTHORIZED, 13014),
            (Some(ADMIN), "metrics=true", StatusCode::BAD_REQUEST, 1050),
            (Some(ADMIN), "statement=SELECT%201&bogus=1", StatusCode::BAD_REQUEST, 1065),
            (Some(ADMIN), "statement=SLECT%201", StatusCode::BAD_REQUEST, 3000),
        ];
        for (auth, body, status, code) in cases {
            let reply = app.call("POST", "/query/service", auth, Some(body)).await;
            assert_eq!(reply.status, status, "{body}: {}", reply.text);
            assert_eq!(reply.json["errors"][0]["code"], code, "{body}: {}", reply.text);
            assert_eq!(reply.json["status"], "fatal");
            assert!(reply.json.get("results").is_none());
        }
    }

    #[tokio::test]
    async fn metrics_false_leaves_metrics_out() {
        // Proves `metrics=false` (what the SDKs send by default) omits the member, as the Python SDK expects.
        let app = TestApp::new().query();
        let reply = app.call("POST", "/query/service", Some(ADMIN), Some("statement=SELECT%201&metrics=false")).await;
        assert!(reply.json.get("metrics").is_none(), "{}", reply.text);
    }
}

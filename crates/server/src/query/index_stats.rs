//! `GET /api/v1/stats[/{keyspace}[/{index}]]`: the Index Statistics API (Couchbase serves it on the index
//! service's port 9102; settee, whose indexes live in the data nodes, on the query port). Each index appears as
//! `bucket:index` (default collection) or `bucket:scope:collection:index`, with Couchbase's statistic names where
//! settee has the figure, plus `lag_ms`; the node-wide `indexer` object comes with the whole-node request.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json as AxumJson;
use serde_json::{json, Map, Value as Json};

use crate::rest::auth::Caller;
use crate::rest::RestState;

/// Which indexes a request asks for: a bucket, optionally narrowed to a scope and collection, and an index.
#[derive(Debug, Default, PartialEq, Eq)]
struct Filter {
    bucket: Option<String>,
    scope: Option<String>,
    collection: Option<String>,
    index: Option<String>,
}

/// Splits `bucket[.scope[.collection]]` on dots outside backticks, dropping the backticks.
fn parse_keyspace(text: &str) -> Option<Vec<String>> {
    let (mut parts, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in text.chars() {
        match c {
            '`' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    parts.push(cur);
    (!quoted && (1..=3).contains(&parts.len()) && parts.iter().all(|p| !p.is_empty())).then_some(parts)
}

pub(crate) async fn node_stats(
    State(state): State<RestState>,
    caller: Caller,
    query: Query<Vec<(String, String)>>,
) -> Response {
    answer(&state, &caller, Filter::default(), &query)
}

pub(crate) async fn keyspace_stats(
    State(state): State<RestState>,
    caller: Caller,
    Path(keyspace): Path<String>,
    query: Query<Vec<(String, String)>>,
) -> Response {
    match filter_of(&keyspace, None) {
        Some(f) => answer(&state, &caller, f, &query),
        None => (StatusCode::BAD_REQUEST, format!("invalid keyspace {keyspace}")).into_response(),
    }
}

pub(crate) async fn index_stats(
    State(state): State<RestState>,
    caller: Caller,
    Path((keyspace, index)): Path<(String, String)>,
    query: Query<Vec<(String, String)>>,
) -> Response {
    match filter_of(&keyspace, Some(index)) {
        Some(f) => answer(&state, &caller, f, &query),
        None => (StatusCode::BAD_REQUEST, format!("invalid keyspace {keyspace}")).into_response(),
    }
}

fn filter_of(keyspace: &str, index: Option<String>) -> Option<Filter> {
    let mut parts = parse_keyspace(keyspace)?.into_iter();
    Some(Filter { bucket: parts.next(), scope: parts.next(), collection: parts.next(), index })
}

fn answer(state: &RestState, caller: &Caller, filter: Filter, query: &[(String, String)]) -> Response {
    let flag = |name: &str| query.iter().any(|(k, v)| k == name && v == "true");
    let node = &state.node;
    let registry = &node.query.indexes;
    let now = node.clock.now_nanos();
    let mut out = Map::new();
    if filter.bucket.is_none() {
        let loaded = registry.all_loaded();
        out.insert(
            "indexer".into(),
            json!({
                "indexer_state": if loaded { "Active" } else { "Warmup" },
                "memory_quota": registry.memory_quota(),
                "memory_used": registry.memory_used(),
                "memory_total_storage": registry.memory_used(),
            }),
        );
    }
    for b in registry.buckets() {
        let bucket = b.bucket.name();
        let visible = caller.user.is_admin() || super::auth::has_any_query_role(&caller.user, &bucket);
        if !visible || filter.bucket.as_ref().is_some_and(|f| *f != bucket) {
            continue;
        }
        for inst in b.instances.read().iter() {
            let ks = &inst.def.keyspace;
            let wanted = filter.scope.as_ref().is_none_or(|s| *s == ks.scope)
                && filter.collection.as_ref().is_none_or(|c| *c == ks.collection)
                && filter.index.as_ref().is_none_or(|i| *i == inst.def.name);
            if !wanted {
                continue;
            }
            let name = if ks.scope == "_default" && ks.collection == "_default" {
                format!("{bucket}:{}", inst.def.name)
            } else {
                format!("{bucket}:{}:{}:{}", ks.scope, ks.collection, inst.def.name)
            };
            let key = if flag("redact") { inst.def.id.clone() } else { name };
            out.insert(key, stats_json(&inst.stats(&b.bucket, now), flag("skipEmpty")));
        }
    }
    if filter.bucket.is_some() && out.is_empty() {
        let mut what =
            [filter.bucket, filter.scope, filter.collection].into_iter().flatten().collect::<Vec<_>>().join(".");
        if let Some(i) = filter.index {
            what = format!("{what}:{i}");
        }
        return (StatusCode::NOT_FOUND, what).into_response();
    }
    let body = Json::Object(out);
    if flag("pretty") {
        let text = serde_json::to_string_pretty(&body).unwrap_or_default();
        return ([(axum::http::header::CONTENT_TYPE, "application/json")], text).into_response();
    }
    AxumJson(body).into_response()
}

fn stats_json(s: &super::indexes::IndexStats, skip_empty: bool) -> Json {
    let avg_item = s.memory_bytes.checked_div(s.items).unwrap_or(0);
    let mut m = Map::new();
    let fields: [(&str, Json); 12] = [
        ("avg_item_size", json!(avg_item)),
        ("data_size", json!(s.memory_bytes)),
        ("disk_size", json!(s.disk_bytes)),
        ("index_state", json!(s.state.as_str())),
        ("initial_build_progress", json!(s.build_progress)),
        ("items_count", json!(s.items)),
        ("lag_ms", s.lag_ms.map_or(Json::Null, |l| json!(l))),
        ("memory_used", json!(s.memory_bytes)),
        ("num_docs_indexed", json!(s.docs_indexed)),
        ("num_docs_pending", json!(s.docs_pending)),
        ("num_docs_queued", json!(0)),
        ("recs_in_mem", json!(s.items)),
    ];
    for (k, v) in fields {
        let empty = v.is_null() || v == json!(0) || v == json!("");
        if !(skip_empty && empty) {
            m.insert(k.to_string(), v);
        }
    }
    Json::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspaces_split_on_dots_outside_backticks() {
        // Proves the keyspace path parameter follows Couchbase's spelling: dots separate, backticks quote.
        assert_eq!(parse_keyspace("b"), Some(vec!["b".to_string()]));
        assert_eq!(parse_keyspace("b.s.c"), Some(vec!["b".into(), "s".into(), "c".into()]));
        assert_eq!(parse_keyspace("`b.1`.s"), Some(vec!["b.1".into(), "s".into()]));
        assert_eq!(parse_keyspace("b..c"), None);
        assert_eq!(parse_keyspace("a.b.c.d"), None);
        assert_eq!(parse_keyspace("`b"), None);
    }
}

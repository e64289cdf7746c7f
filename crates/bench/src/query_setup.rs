//! Before a query workload runs: find the query service (the cluster map's `nodesExt[].services.n1ql`, or
//! `--query-port` on every KV node), render the request bodies, and make sure the keyspace has the online index the
//! queries need (the primary index, or the secondary index on `field0` for the field lookups) holding every loaded
//! document (`CREATE [PRIMARY] INDEX`, then a `request_plus` probe until it answers).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cli::RunArgs;
use crate::http_link::{HttpLink, QueryEndpoint};
use crate::link::LinkFactory;
use crate::query_answer;
use crate::query_driver::QueryWork;
use crate::query_request::{
    keyspace_path, one_off, QueryMode, RequestOptions, RequestWriter, ScanConsistency, FIELD_INDEX,
};
use crate::stats::{OpKind, Outcome};
use crate::BenchError;

/// How long the primary index may take to come online and catch up with the loaded documents.
const INDEX_WAIT_MAX: Duration = Duration::from_secs(30 * 60);
const INDEX_POLL: Duration = Duration::from_millis(200);
/// No online index can answer (`No index available on keyspace ...`).
const NO_INDEX: u32 = 4000;
/// Answers that mean "not yet": no online primary index (still building), the consistency wait or the request
/// timed out.
const NOT_YET: [u32; 3] = [NO_INDEX, 12015, 1080];
/// Couchbase's "index already exists".
const INDEX_EXISTS: u32 = 4300;

fn failed(why: String) -> BenchError {
    BenchError::QueryService(why)
}

/// The query endpoints and the request bodies of a query workload.
pub(crate) async fn query_work(
    args: &RunArgs,
    factory: &LinkFactory,
    bucket: &str,
    kinds: &[OpKind],
) -> Result<QueryWork, BenchError> {
    let LinkFactory::Couchbase { cluster, .. } = factory else {
        return Err(BenchError::Invalid("query workloads need a couchbase:// target".into()));
    };
    let config = cluster.config();
    let names: Vec<String> = match args.query_port {
        Some(port) => config.kv_nodes.iter().map(|n| format!("{}:{port}", host_of(n))).collect(),
        None => config.query_nodes.clone(),
    };
    if names.is_empty() {
        return Err(failed("no node of the cluster map lists a query service (n1ql); give --query-port".into()));
    }
    let mut endpoints = Vec::with_capacity(names.len());
    for name in &names {
        let addr = settee_client::resolve(name).await?;
        let endpoint = QueryEndpoint::new(addr, &args.username, &args.password).map_err(|e| failed(e.to_string()))?;
        endpoints.push(Arc::new(endpoint));
    }
    let ks = keyspace_path(bucket, args.collection.as_deref());
    let options = RequestOptions { consistency: args.scan_consistency, timeout: timeout_of(args) };
    let lookup = args.query.unwrap_or(QueryMode::UseKeys);
    Ok(QueryWork {
        endpoints,
        requests: RequestWriter::new(kinds, lookup, &ks, options),
        scan_length: args.scan_length,
        lookup_field: lookup.by_field().then_some(args.field_length),
    })
}

fn timeout_of(args: &RunArgs) -> Duration {
    Duration::from_secs_f64(args.timeout)
}

/// `host` of `host:port` (`[v6]` stays bracketed).
fn host_of(endpoint: &str) -> &str {
    endpoint.rsplit_once(':').map_or(endpoint, |(h, _)| h)
}

/// Creates the index the run's queries need if there is none (so a user without `query_manage_index` can run over
/// an index made before): the primary index, or for the field lookups the secondary index on `field0`; then waits
/// until it is online and a `request_plus` query through it answers, i.e. it holds every document stored so far.
/// Returns how long that took.
pub(crate) async fn ensure_index(
    work: &QueryWork,
    bucket: &str,
    collection: Option<&str>,
) -> Result<Duration, BenchError> {
    let started = Instant::now();
    let ks = keyspace_path(bucket, collection);
    let endpoint = work.endpoints.first().cloned().ok_or_else(|| failed("no query endpoint".into()))?;
    let mut http = HttpLink::connect(endpoint).await.map_err(|e| failed(e.to_string()))?;
    let by_field = work.lookup_field.is_some();
    let (create_text, probe_text) = if by_field {
        (
            format!("CREATE INDEX `{FIELD_INDEX}` ON {ks}(field0)"),
            format!("SELECT RAW META(d).id FROM {ks} AS d WHERE d.field0 = \"\" LIMIT 1"),
        )
    } else {
        (format!("CREATE PRIMARY INDEX ON {ks}"), format!("SELECT RAW META(d).id FROM {ks} AS d LIMIT 1"))
    };
    let exists = if by_field {
        index_state(&mut http, bucket, collection).await?.is_some()
    } else {
        let (status, body) = post(&mut http, one_off(&probe_text, ScanConsistency::NotBounded, INDEX_WAIT_MAX)).await?;
        match query_answer::read(status, &body, false).outcome {
            Outcome::Ok => true,
            Outcome::Query(NO_INDEX) => false,
            _ => return Err(failed(format!("{probe_text}: HTTP {status}: {}", text(&body)))),
        }
    };
    if !exists {
        let (status, body) =
            post(&mut http, one_off(&create_text, ScanConsistency::NotBounded, INDEX_WAIT_MAX)).await?;
        match query_answer::read(status, &body, false).outcome {
            Outcome::Ok | Outcome::Query(INDEX_EXISTS) => {}
            // Couchbase also reports an existing index as an internal error whose text says so.
            Outcome::Query(5000) if String::from_utf8_lossy(&body).contains("already exist") => {}
            _ => return Err(failed(format!("{create_text}: HTTP {status}: {}", text(&body)))),
        }
    }
    // A field lookup could be answered through the primary index while the secondary one builds: wait for its state.
    while by_field && index_state(&mut http, bucket, collection).await?.as_deref() != Some("online") {
        if started.elapsed() >= INDEX_WAIT_MAX {
            return Err(failed(format!("the index {FIELD_INDEX} on {ks} did not come online")));
        }
        tokio::time::sleep(INDEX_POLL).await;
    }
    let probe = one_off(&probe_text, ScanConsistency::RequestPlus, INDEX_WAIT_MAX);
    loop {
        let (status, body) = post(&mut http, probe.clone()).await?;
        match query_answer::read(status, &body, false).outcome {
            Outcome::Ok => return Ok(started.elapsed()),
            Outcome::Query(code) if NOT_YET.contains(&code) && started.elapsed() < INDEX_WAIT_MAX => {
                tokio::time::sleep(INDEX_POLL).await;
            }
            _ => return Err(failed(format!("the index on {ks} did not come online: {}", text(&body)))),
        }
    }
}

/// The `state` of the bench's `field0` index on the keyspace (`system:indexes`), if it exists.
async fn index_state(
    http: &mut HttpLink,
    bucket: &str,
    collection: Option<&str>,
) -> Result<Option<String>, BenchError> {
    let text = state_query(bucket, collection);
    let (status, body) = post(http, one_off(&text, ScanConsistency::NotBounded, INDEX_WAIT_MAX)).await?;
    let answer: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| failed(format!("{text}: HTTP {status}: {e}")))?;
    match answer["results"].as_array() {
        Some(rows) => Ok(rows.first().and_then(|r| r.as_str()).map(str::to_owned)),
        None => Err(failed(format!("{text}: HTTP {status}: {}", self::text(&body)))),
    }
}

/// The `system:indexes` query for the state of the `field0` index: a named collection's row names its bucket and
/// scope, the default collection's names the bucket as its keyspace.
fn state_query(bucket: &str, collection: Option<&str>) -> String {
    let lit = |s: &str| serde_json::Value::from(s).to_string();
    let place = match collection.and_then(|c| c.split_once('.')) {
        Some((scope, coll)) => {
            format!("bucket_id = {} AND scope_id = {} AND keyspace_id = {}", lit(bucket), lit(scope), lit(coll))
        }
        None => format!("keyspace_id = {} AND bucket_id IS MISSING", lit(bucket)),
    };
    format!("SELECT RAW state FROM system:indexes WHERE name = {} AND {place}", lit(FIELD_INDEX))
}

async fn post(http: &mut HttpLink, body: Vec<u8>) -> Result<(u16, bytes::Bytes), BenchError> {
    http.post(body.into()).await.map_err(|e| failed(e.to_string()))
}

/// The start of an answer, for an error message.
fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(500)]).replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--query-port` keeps each KV node's host, IPv6 brackets included.
    #[test]
    fn query_port_keeps_the_kv_host() {
        assert_eq!(host_of("10.0.0.1:11210"), "10.0.0.1");
        assert_eq!(host_of("[::1]:11210"), "[::1]");
    }

    /// The state query finds the field index of the default collection by its bucket, of a named collection by
    /// bucket, scope and collection, with the names quoted as string literals.
    #[test]
    fn state_query_names_the_keyspace() {
        assert_eq!(
            state_query("default", None),
            r#"SELECT RAW state FROM system:indexes WHERE name = "bench_field0" AND keyspace_id = "default" AND bucket_id IS MISSING"#
        );
        assert!(state_query("b", Some("s.c")).ends_with(r#"bucket_id = "b" AND scope_id = "s" AND keyspace_id = "c""#));
        assert!(state_query(r#"we"ird"#, None).contains(r#"keyspace_id = "we\"ird""#));
    }
}

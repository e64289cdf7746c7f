//! `GET /indexStatus`: every index with its state and build progress, as ns_server reports them to its console and
//! to tools (the Rust SDK's management core reads it). Indexes live on the data nodes here: each node answers for
//! its own part of each index.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};
use settee_query::index::{IndexDef, IndexState};

use super::auth::Caller;
use super::RestState;

pub(crate) async fn index_status(State(state): State<RestState>, caller: Caller) -> Json<Value> {
    let node = &state.node;
    let host = format!("{}:{}", node.config.host, node.config.mgmt_port);
    let now = node.clock.now_nanos();
    let mut indexes = Vec::new();
    for b in node.query.indexes.buckets() {
        let bucket = b.bucket.name();
        if !caller.can_see_bucket(&bucket) {
            continue;
        }
        for inst in b.instances.read().iter() {
            let stats = inst.stats(&b.bucket, now);
            let def = &inst.def;
            indexes.push(json!({
                "bucket": bucket,
                "scope": def.keyspace.scope,
                "collection": def.keyspace.collection,
                "index": def.name,
                "indexName": def.name,
                "id": u64::from_str_radix(&def.id, 16).unwrap_or(0),
                "definition": definition(def, stats.state),
                "status": match stats.state {
                    IndexState::Online => "Ready",
                    IndexState::Building => "Building",
                    IndexState::Deferred => "Created",
                },
                "progress": stats.build_progress,
                "hosts": [host],
                "storageMode": "memory_optimized",
                "numReplica": def.num_replica,
                "numPartition": 1,
                "partitioned": def.partition.is_some(),
                "replicaId": 0,
                "lastScanTime": "NA",
            }));
        }
    }
    indexes
        .sort_by(|a, b| (a["bucket"].as_str(), a["index"].as_str()).cmp(&(b["bucket"].as_str(), b["index"].as_str())));
    Json(json!({"indexes": indexes, "version": node.rev(), "warnings": []}))
}

/// The statement that creates the index, as ns_server shows it: its `WITH` names `defer_build` while the index
/// waits for BUILD INDEX and `num_replica` when it has replicas, so the statement recreates it as it is (backups
/// keep it so).
fn definition(def: &IndexDef, state: IndexState) -> String {
    let ks = &def.keyspace;
    let on = if ks.scope == "_default" && ks.collection == "_default" {
        format!("`{}`", ks.bucket)
    } else {
        format!("`{}`.`{}`.`{}`", ks.bucket, ks.scope, ks.collection)
    };
    let mut text = if def.is_primary {
        format!("CREATE PRIMARY INDEX `{}` ON {on}", def.name)
    } else {
        let keys: Vec<String> = def.keys.iter().map(settee_query::index::key_display).collect();
        format!("CREATE INDEX `{}` ON {on}({})", def.name, keys.join(","))
    };
    if let Some(p) = &def.partition {
        text.push_str(&format!(" PARTITION BY {p}"));
    }
    if let Some(c) = &def.condition {
        text.push_str(&format!(" WHERE {c}"));
    }
    let mut with = Vec::new();
    if state == IndexState::Deferred {
        with.push("\"defer_build\":true".to_owned());
    }
    if def.num_replica > 0 {
        with.push(format!("\"num_replica\":{}", def.num_replica));
    }
    if !with.is_empty() {
        text.push_str(&format!(" WITH {{  {} }}", with.join(", ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use settee_query::datastore::KeyspaceName;
    use settee_query::index::{IndexDef, IndexState};

    use super::definition;

    fn primary(num_replica: u32) -> IndexDef {
        IndexDef {
            id: "1".into(),
            name: "p".into(),
            keyspace: KeyspaceName::new("b", "s", "c"),
            is_primary: true,
            keys: Vec::new(),
            condition: None,
            partition: None,
            num_replica,
        }
    }

    /// Proves the statement shown recreates the index as it is: `defer_build` while deferred, `num_replica` when it
    /// has replicas (a backup of the statement used to lose the replicas), nothing else.
    #[test]
    fn the_definition_keeps_defer_build_and_num_replica() {
        assert_eq!(definition(&primary(0), IndexState::Online), "CREATE PRIMARY INDEX `p` ON `b`.`s`.`c`");
        assert_eq!(
            definition(&primary(0), IndexState::Deferred),
            "CREATE PRIMARY INDEX `p` ON `b`.`s`.`c` WITH {  \"defer_build\":true }"
        );
        assert_eq!(
            definition(&primary(2), IndexState::Online),
            "CREATE PRIMARY INDEX `p` ON `b`.`s`.`c` WITH {  \"num_replica\":2 }"
        );
        assert_eq!(
            definition(&primary(1), IndexState::Deferred),
            "CREATE PRIMARY INDEX `p` ON `b`.`s`.`c` WITH {  \"defer_build\":true, \"num_replica\":1 }"
        );
    }
}

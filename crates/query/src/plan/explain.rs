//! EXPLAIN: a plan as JSON, with Couchbase's operator names (`Sequence`, `PrimaryScan3`, `KeyScan`, `Fetch`,
//! `Filter`, `InitialProject`, `Order`, `Limit` ...) so that tooling that looks for them finds them.

use serde_json::{json, Value as Json};

use super::{IdSpans, IndexScanPlan, Node, Plan, Pushed};

/// The `plan` member of an EXPLAIN row.
pub fn explain(plan: &Plan) -> Json {
    let mut ops = Vec::new();
    flatten(&plan.root, &mut ops);
    json!({"#operator": "Sequence", "~children": ops})
}

fn ks_fields(name: &crate::datastore::KeyspaceName) -> serde_json::Map<String, Json> {
    let mut m = serde_json::Map::new();
    m.insert("namespace".into(), json!("default"));
    m.insert("bucket".into(), json!(name.bucket));
    if !name.is_default_collection() {
        m.insert("scope".into(), json!(name.scope));
    }
    m.insert("keyspace".into(), json!(if name.is_default_collection() { &name.bucket } else { &name.collection }));
    m
}

fn op(name: &str, mut fields: serde_json::Map<String, Json>) -> Json {
    fields.insert("#operator".into(), json!(name));
    Json::Object(fields)
}

/// The fields every index scan shows: the keyspace, the index and its spans.
fn scan_fields(scan: &IndexScanPlan) -> serde_json::Map<String, Json> {
    let mut f = ks_fields(&scan.ks.name);
    f.insert("index".into(), json!(scan.index.as_ref()));
    f.insert("using".into(), json!("gsi"));
    f.insert("spans".into(), json!("index keys"));
    f
}

/// An IndexScan3 with its pushdowns: `covers` and `filter_covers` for a covering scan, `offset` and `limit`, and
/// `index_order` when it reads the first entry for MIN, or reads from the top down (ORDER BY ... DESC, MAX).
fn index_scan3(scan: &IndexScanPlan) -> Json {
    let mut f = scan_fields(scan);
    let e = &scan.explain;
    if !e.covers.is_empty() {
        f.insert("covers".into(), json!(e.covers));
    }
    if !e.filter_covers.is_empty() {
        let covers: serde_json::Map<String, Json> =
            e.filter_covers.iter().map(|(text, v)| (text.clone(), json_of(v))).collect();
        f.insert("filter_covers".into(), Json::Object(covers));
    }
    if e.first_entry && !scan.reverse {
        f.insert("index_order".into(), json!([{"keypos": 0}]));
    }
    page_fields(&mut f, scan.reverse, &scan.offset, &scan.limit);
    op("IndexScan3", f)
}

/// What a scan shows of reading backwards (`index_order` descending) and of the OFFSET and LIMIT pushed into it.
fn page_fields(f: &mut serde_json::Map<String, Json>, reverse: bool, offset: &Option<Pushed>, limit: &Option<Pushed>) {
    if reverse {
        f.insert("index_order".into(), json!([{"desc": true, "keypos": 0}]));
    }
    if let Some(offset) = offset {
        f.insert("offset".into(), json!(offset.text));
    }
    if let Some(limit) = limit {
        f.insert("limit".into(), json!(limit.text));
    }
}

/// Appends the operators of `node` in execution order (inputs first), as Couchbase's Sequence lists them.
fn flatten(node: &Node, out: &mut Vec<Json>) {
    match node {
        Node::Dummy => out.push(op("DummyScan", Default::default())),
        Node::KeyScan { ks, .. } => {
            out.push(op("KeyScan", Default::default()));
            out.push(op("Fetch", ks_fields(&ks.name)));
        }
        Node::PrimaryScan { ks, index, spans, reverse, offset, limit, .. } => {
            let mut f = ks_fields(&ks.name);
            f.insert("index".into(), json!(index.as_ref()));
            f.insert("using".into(), json!("gsi"));
            if !matches!(spans, IdSpans::All) {
                f.insert("spans".into(), json!("META().id"));
            }
            page_fields(&mut f, *reverse, offset, limit);
            out.push(op("PrimaryScan3", f));
            out.push(op("Fetch", ks_fields(&ks.name)));
        }
        Node::IndexScan(scan) => {
            out.push(index_scan3(scan));
            if scan.distinct {
                out.push(op("DistinctScan", Default::default()));
            }
            if scan.cover.is_none() {
                out.push(op("Fetch", ks_fields(&scan.ks.name)));
            }
        }
        Node::UnionScan { ks, scans, .. } => {
            let mut f = serde_json::Map::new();
            f.insert("scans".into(), Json::Array(scans.iter().map(index_scan3).collect()));
            out.push(op("UnionScan", f));
            out.push(op("Fetch", ks_fields(&ks.name)));
        }
        Node::IndexCountScan { scan, .. } => {
            let mut f = scan_fields(scan);
            f.insert("covers".into(), json!(scan.explain.covers));
            out.push(op("IndexCountScan2", f));
        }
        Node::PendingScan { ks, .. } => out.push(op("PrimaryScan3", ks_fields(&ks.name))),
        Node::CountScan { ks, .. } => out.push(op("CountScan", ks_fields(&ks.name))),
        Node::SystemScan { which, .. } => {
            let mut f = serde_json::Map::new();
            f.insert("namespace".into(), json!("#system"));
            f.insert("keyspace".into(), json!(which.name()));
            out.push(op("PrimaryScan", f.clone()));
            out.push(op("Fetch", f));
        }
        Node::ExprScan { .. } => out.push(op("ExpressionScan", Default::default())),
        Node::SubqueryScan { plan, .. } => {
            let mut f = serde_json::Map::new();
            f.insert("subquery".into(), explain(plan));
            out.push(op("Alias", f));
        }
        Node::LookupJoin { input, ks, nest, outer, .. } => {
            flatten(input, out);
            let mut f = ks_fields(&ks.name);
            f.insert("outer".into(), json!(outer));
            out.push(op(if *nest { "Nest" } else { "Join" }, f));
        }
        Node::NestedLoopJoin { input, right, outer, .. } => {
            flatten(input, out);
            let mut inner = Vec::new();
            flatten(right, &mut inner);
            let mut f = serde_json::Map::new();
            f.insert("outer".into(), json!(outer));
            f.insert("~child".into(), json!({"#operator": "Sequence", "~children": inner}));
            out.push(op("NestedLoopJoin", f));
        }
        Node::NestedLoopNest { input, right, outer, .. } => {
            flatten(input, out);
            let mut inner = Vec::new();
            flatten(right, &mut inner);
            let mut f = serde_json::Map::new();
            f.insert("outer".into(), json!(outer));
            f.insert("~child".into(), json!({"#operator": "Sequence", "~children": inner}));
            out.push(op("NestedLoopNest", f));
        }
        Node::Unnest { input, outer, .. } => {
            flatten(input, out);
            let mut f = serde_json::Map::new();
            f.insert("outer".into(), json!(outer));
            out.push(op("Unnest", f));
        }
        Node::Let { input, .. } => {
            flatten(input, out);
            out.push(op("Let", Default::default()));
        }
        Node::With { input, .. } => {
            out.push(op("With", Default::default()));
            flatten(input, out);
        }
        Node::Filter { input, .. } => {
            flatten(input, out);
            out.push(op("Filter", Default::default()));
        }
        Node::Group { input, .. } => {
            flatten(input, out);
            out.push(op("InitialGroup", Default::default()));
            out.push(op("IntermediateGroup", Default::default()));
            out.push(op("FinalGroup", Default::default()));
        }
        Node::Project { input, raw, .. } => {
            flatten(input, out);
            let mut f = serde_json::Map::new();
            if *raw {
                f.insert("raw".into(), json!(true));
            }
            // A count read from an index is projected by Couchbase's IndexCountProject.
            let counted = matches!(**input, Node::CountScan { .. } | Node::IndexCountScan { .. });
            out.push(op(if counted { "IndexCountProject" } else { "InitialProject" }, f));
        }
        Node::Distinct { input, .. } => {
            flatten(input, out);
            out.push(op("Distinct", Default::default()));
        }
        Node::Order { input, .. } => {
            flatten(input, out);
            out.push(op("Order", Default::default()));
        }
        Node::Offset { input, .. } => {
            flatten(input, out);
            out.push(op("Offset", Default::default()));
        }
        Node::Limit { input, .. } => {
            flatten(input, out);
            out.push(op("Limit", Default::default()));
        }
        Node::SetOp { op: set_op, all, left, right, .. } => {
            let (mut l, mut r) = (Vec::new(), Vec::new());
            flatten(left, &mut l);
            flatten(right, &mut r);
            let name = match (set_op, all) {
                (crate::ast::SetOp::Union, true) => "UnionAll",
                (crate::ast::SetOp::Union, false) => "Union",
                (crate::ast::SetOp::Intersect, true) => "IntersectAll",
                (crate::ast::SetOp::Intersect, false) => "Intersect",
                (crate::ast::SetOp::Except, true) => "ExceptAll",
                (crate::ast::SetOp::Except, false) => "Except",
            };
            let mut f = serde_json::Map::new();
            f.insert(
                "~children".into(),
                json!([{"#operator": "Sequence", "~children": l}, {"#operator": "Sequence", "~children": r}]),
            );
            out.push(op(name, f));
        }
        Node::Dml(d) => {
            flatten(&d.input, out);
            let name = match d.kind {
                super::DmlKind::Insert => "SendInsert",
                super::DmlKind::Upsert => "SendUpsert",
                super::DmlKind::Update => "SendUpdate",
                super::DmlKind::Delete => "SendDelete",
                super::DmlKind::Merge => "Merge",
            };
            out.push(op(name, ks_fields(&d.ks.name)));
        }
    }
}

/// A value as plan JSON.
fn json_of(v: &crate::value::Value) -> Json {
    serde_json::from_str(&v.to_json_string()).unwrap_or(Json::Null)
}

//! Bucket-level commands: STAT, OBSERVE_SEQNO, SET_PARAM, GET_COLLECTIONS_MANIFEST, GET_COLLECTION_ID.

use crate::kv::pending::Out;
use std::sync::atomic::Ordering;

use settee_engine::{EngineError, Watermark};
use settee_mcbp::{encode_response, Request};
use settee_types::{Status, VbId};

use super::request::be_u64;
use super::selected_bucket;
use crate::kv::dispatch::{KvError, KvResult};
use crate::kv::reply;
use crate::kv::session::Session;
use crate::node::{Node, COUCHBASE_VERSION};

/// STAT: one reply per statistic (key = name, value = decimal text) and an empty reply to end the group.
/// Groups: "" (default), "memory", "uuid", "vbucket-seqno". Other groups are KEY_ENOENT, as kv_engine answers unknown ones.
/// Needs the bucket's stats privilege (Couchbase's SimpleStats: the monitoring and administrative roles, not the
/// data roles).
pub fn stat(node: &Node, s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let b = selected_bucket(s)?;
    if !s.access.stats {
        return Err(KvError::Status(Status::Eaccess));
    }
    let cfg = b.config();
    let mut stats: Vec<(String, String)> = Vec::new();
    let mut push = |k: &str, v: String| stats.push((k.to_owned(), v));
    match req.key {
        b"" => {
            push("pid", std::process::id().to_string());
            push("uptime", node.started.elapsed().as_secs().to_string());
            push("time", node.clock.now_secs().to_string());
            push("version", COUCHBASE_VERSION.to_string());
            push("curr_connections", node.kv_connections.load(Ordering::Relaxed).to_string());
            let summary = b.summary();
            let items = summary.items;
            push("curr_items", items.active.to_string());
            push("curr_items_tot", items.total.to_string());
            push("vb_active_curr_items", items.active.to_string());
            push("vb_replica_curr_items", items.replica.to_string());
            push("vb_pending_curr_items", items.pending.to_string());
            push("mem_used", b.mem_used().to_string());
            push("ep_max_size", cfg.ram_quota_bytes.to_string());
            push(
                "ep_bucket_type",
                if cfg.kind == settee_engine::BucketKind::Ephemeral { "ephemeral" } else { "persistent" }.to_string(),
            );
            let ops: u64 = b.stats().pairs().iter().filter(|(k, _)| k.starts_with("cmd_")).map(|(_, v)| v).sum();
            push("ops", ops.to_string());
            for (k, v) in b.stats().pairs() {
                push(k, v.to_string());
            }
            push("ep_queue_size", summary.dirty.to_string());
            push("ep_warmup_thread", if b.is_warming_up() { "running" } else { "complete" }.to_string());
            push("vb_active_perc_mem_resident", b.resident_ratio().to_string());
            push("ep_persistence_failed", u8::from(b.store_failed()).to_string());
        }
        b"vbucket-seqno" => {
            for v in 0..b.num_vbuckets() {
                let Some(vb) = b.vbucket(VbId(v)) else { continue };
                push(&format!("vb_{v}:high_seqno"), vb.high_seqno().to_string());
                push(&format!("vb_{v}:last_persisted_seqno"), vb.persisted_seqno().to_string());
                push(&format!("vb_{v}:uuid"), vb.uuid().to_string());
            }
        }
        b"memory" => {
            let (low, high) = b.watermark_bytes();
            let (low_ratio, high_ratio) = b.watermark_ratios();
            push("mem_used", b.mem_used().to_string());
            push("ep_max_size", cfg.ram_quota_bytes.to_string());
            push("ep_mem_high_wat", high.to_string());
            push("ep_mem_low_wat", low.to_string());
            push("ep_mem_high_wat_percent", high_ratio.to_string());
            push("ep_mem_low_wat_percent", low_ratio.to_string());
        }
        b"uuid" => push("uuid", cfg.uuid.clone()),
        _ => return Err(KvError::Status(Status::KeyEnoent)),
    }
    for (k, v) in &stats {
        encode_response(out, req.opcode, 0, req.opaque, 0, 0, &[], &[], k.as_bytes(), v.as_bytes());
    }
    reply::status(out, req, Status::Success);
    Ok(())
}

/// SET_PARAM's parameter types (the request's 4-byte extras), as cbepctl sends them.
const PARAM_FLUSH: u32 = 1;
const PARAM_CONFIG: u32 = 6;

/// SET_PARAM (`cbepctl set flush_param NAME VALUE`, and how ns_server applies bucket settings): extras = the
/// parameter type, key = its name, value = the new value as text. Settable: the item pager's watermarks,
/// `mem_low_wat_percent` and `mem_high_wat_percent` (fractions of the quota, e.g. `0.8`; Couchbase 8 names, as
/// flush or config parameters), until the bucket is reloaded. The byte forms `mem_low_wat` / `mem_high_wat` are
/// refused with EINVAL as Couchbase 8 refuses them; any other name is KEY_ENOENT. Needs the bucket's management
/// right.
pub fn set_param(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let b = selected_bucket(s)?;
    let kind = match req.extras {
        [a, b, c, d] => u32::from_be_bytes([*a, *b, *c, *d]),
        _ => return Err(KvError::Status(Status::Einval)),
    };
    if !s.access.manage {
        return Err(KvError::Status(Status::Eaccess));
    }
    let which =
        match (kind, req.key) {
            (PARAM_FLUSH | PARAM_CONFIG, b"mem_low_wat_percent") => Watermark::Low,
            (PARAM_FLUSH | PARAM_CONFIG, b"mem_high_wat_percent") => Watermark::High,
            (PARAM_FLUSH, b"mem_low_wat" | b"mem_high_wat") => return Err(KvError::Engine(EngineError::Invalid(
                "setting a watermark in bytes is no longer supported: set mem_low_wat_percent or mem_high_wat_percent",
            ))),
            _ => return Err(KvError::Status(Status::KeyEnoent)),
        };
    let ratio = std::str::from_utf8(req.value)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or(KvError::Engine(EngineError::Invalid("the value is not a number")))?;
    b.set_watermark(which, ratio)?;
    tracing::info!(bucket = %b.name(), param = %String::from_utf8_lossy(req.key), ratio, "watermark changed");
    reply::status(out, req, Status::Success);
    Ok(())
}

/// OBSERVE_SEQNO: value = vbuuid (8 bytes). Reply format 0: format u8, vb u16, vbuuid u64, persisted seqno u64,
/// current seqno u64.
pub fn observe_seqno(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    if req.value.len() != 8 || !req.extras.is_empty() || !req.key.is_empty() {
        return Err(KvError::Status(Status::Einval));
    }
    // memcached asks `MetaRead`, which replication_target holds (XDCR observes its target's persistence).
    if !s.access.read && !s.access.meta_write {
        return Err(KvError::Status(Status::Eaccess));
    }
    let b = selected_bucket(s)?;
    let _asked = be_u64(req.value);
    let o = b.observe_seqno(VbId(req.vbucket))?;
    let mut body = Vec::with_capacity(27);
    body.push(0);
    body.extend_from_slice(&req.vbucket.to_be_bytes());
    body.extend_from_slice(&o.vbuuid.to_be_bytes());
    body.extend_from_slice(&o.persisted_seqno.to_be_bytes());
    body.extend_from_slice(&o.current_seqno.to_be_bytes());
    reply::with_value(out, req, Status::Success, 0, &[], &body);
    Ok(())
}

/// GET_COLLECTIONS_MANIFEST: the whole manifest for a user with a role on the whole bucket; for one whose roles are
/// narrowed to scopes or collections, only those (kv_engine filters the manifest by privilege the same way, so the
/// names of collections a user may not touch stay hidden).
pub fn get_collections_manifest(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let b = selected_bucket(s)?;
    let mut manifest = b.manifest().to_json();
    if !s.access.any() {
        let covered = |scope: &str, collection: &str| s.scoped.iter().any(|g| g.covers(scope, collection));
        if let Some(scopes) = manifest["scopes"].as_array_mut() {
            for scope in scopes.iter_mut() {
                let name = scope["name"].as_str().unwrap_or_default().to_owned();
                if let Some(collections) = scope["collections"].as_array_mut() {
                    collections.retain(|c| covered(&name, c["name"].as_str().unwrap_or_default()));
                }
            }
            scopes.retain(|scope| scope["collections"].as_array().is_some_and(|c| !c.is_empty()));
        }
    }
    reply::json(out, req, Status::Success, manifest.to_string().as_bytes());
    Ok(())
}

/// GET_COLLECTION_ID: the path `scope.collection` comes in the value (older clients put it in the key). Reply:
/// 12 extras bytes, manifest uid u64 then collection id u32.
pub fn get_collection_id(s: &Session, req: &Request<'_>, out: &mut Out) -> KvResult {
    let raw = if req.value.is_empty() { req.key } else { req.value };
    let path = std::str::from_utf8(raw).map_err(|_| KvError::Status(Status::Einval))?;
    let b = selected_bucket(s)?;
    let (uid, cid) = b.resolve_collection(path)?;
    let mut extras = [0u8; 12];
    extras[..8].copy_from_slice(&uid.to_be_bytes());
    extras[8..].copy_from_slice(&cid.to_be_bytes());
    reply::with_value(out, req, Status::Success, 0, &extras, &[]);
    Ok(())
}

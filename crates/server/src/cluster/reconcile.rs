//! Makes the local node match the cluster metadata: buckets (created, re-configured, deleted, collection
//! manifests), every vBucket's state from the map, the replication feeds that fill this node's replica vBuckets,
//! and the users. Idempotent: running it twice with the same metadata changes nothing the second time.

use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use settee_cluster::{BucketMeta, ClusterMetadata, Membership, NodeId, NodeInfo, Recovery};
use settee_engine::VbState;
use settee_types::limits::NUM_VBUCKETS;
use settee_types::VbId;
use tokio::sync::watch;

use super::{config_of, spec_of, ClusterDriver};
use crate::auth::User;
use crate::dcp::consumer::{self, FeedSpec, FeedTls};
use crate::node::{BucketHandle, Node};

/// Recomputes which peer connections run over TLS (node-to-node encryption) and hands the result to the Raft
/// transport and the query service's peer client; replication feeds read it as the reconcile builds their specs.
fn apply_peer_links(driver: &ClusterDriver, meta: &ClusterMetadata) {
    let node = &driver.node;
    let settings = crate::auth::SecuritySettings::from_metadata(&meta.security);
    let changed = node.peer_links.update(meta, &settings, &node.tls.peer_roots());
    driver.transport.tls().set(node.peer_links.control_plane());
    crate::query::routing::peers(node).tls().set(node.peer_links.query());
    if changed {
        let level = node.peer_links.level().map_or("none", |l| l.name());
        tracing::info!(level, "node-to-node encryption level in force changed");
    }
}

/// One replication connection: a bucket's replica vBuckets whose active copies are on one source node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct FeedKey {
    bucket: String,
    uuid: String,
    source: NodeId,
}

struct Feed {
    spec: FeedSpec,
    /// The vBuckets the running feed streams; it follows changes without reconnecting.
    vbuckets: watch::Sender<Vec<VbId>>,
    stop: watch::Sender<bool>,
}

#[derive(Default)]
pub(super) struct Reconciler {
    feeds: HashMap<FeedKey, Feed>,
    /// The users value last applied from the metadata.
    users_applied: Option<serde_json::Value>,
    /// The administrator value last applied from the metadata.
    admin_applied: Option<serde_json::Value>,
    /// The audit settings value last applied from the metadata.
    audit_applied: Option<serde_json::Value>,
    /// The security settings value last applied from the metadata.
    security_applied: Option<serde_json::Value>,
    /// The user groups value last applied from the metadata.
    groups_applied: Option<serde_json::Value>,
    /// The newest revision applied: an older state (a watcher that read it before a proposal's reconcile ran)
    /// is skipped, so it cannot undo a newer change.
    applied_rev: u64,
    /// The last apply left copies the map no longer gives this node alone because their bucket was warming up:
    /// the next call applies the state again even if it is not newer (the node calls it when a warmup ends).
    deferred: bool,
}

impl Reconciler {
    /// Applies `meta`; a state already applied is applied again only when `again` (something local changed, such
    /// as the node becoming current or holding vBuckets for a takeover) or when the last apply deferred work.
    pub(super) async fn apply(&mut self, driver: &ClusterDriver, meta: &ClusterMetadata, again: bool) {
        let node: &Node = &driver.node;
        if meta.rev < self.applied_rev || (meta.rev == self.applied_rev && !again && !self.deferred) {
            return;
        }
        self.applied_rev = meta.rev;
        self.deferred = false;
        self.apply_groups(node, meta);
        self.apply_users(node, meta);
        self.apply_admin(node, meta);
        self.apply_audit(node, meta);
        self.apply_security(node, meta);
        node.limits.set_enforced(crate::rest::cluster_settings::limits_enforced(meta));
        apply_peer_links(driver, meta);
        for local in node.buckets() {
            let cfg = local.config();
            if meta.buckets.get(&cfg.name).is_none_or(|b| b.spec.uuid != cfg.uuid) {
                self.stop_feeds_of(&cfg.name);
                if let Err(e) = node.delete_bucket(&cfg.name) {
                    tracing::warn!(bucket = %cfg.name, error = %e, "cannot delete a bucket the cluster dropped");
                }
            }
        }
        let mut wanted = BTreeMap::new();
        let (peer_user, peer_password) = node.peer_credentials();
        for (name, b) in &meta.buckets {
            let handle = match node.bucket(name) {
                Some(h) => h,
                None => match node.create_bucket_for_map(config_of(&b.spec)) {
                    Ok(h) => h,
                    Err(e) => {
                        tracing::error!(bucket = %name, error = %e, "cannot create a bucket the cluster holds");
                        continue;
                    }
                },
            };
            apply_settings(&handle, b);
            let me = driver.me();
            driver.end_committed_holds(name, &b.map);
            let here = Here {
                me,
                current: driver.handle.is_current(),
                keep_data: keeps_unowned_data(meta, me),
                new_uuid: &|| driver.random(),
            };
            self.deferred |= apply_vbucket_states(&handle, b, &here, &driver.held_vbuckets(name));
            for (source, vbuckets) in replica_sources(b, me) {
                let Some(info) = meta.nodes.get(&source) else { continue };
                let Some(addr) = kv_addr(info) else {
                    tracing::warn!(node = source, host = %info.hostname, "cannot resolve a replication source");
                    continue;
                };
                // At `all` and `strict` the feed streams from the source's KV TLS port.
                let (addr, tls) = match node.peer_links.kv(info, addr) {
                    Some((tls_addr, tls)) => (tls_addr, FeedTls(Some(tls))),
                    None => (addr, FeedTls(None)),
                };
                let key = FeedKey { bucket: name.clone(), uuid: b.spec.uuid.clone(), source };
                let spec = FeedSpec {
                    source: addr,
                    vbuckets,
                    username: peer_user.clone(),
                    password: peer_password.clone(),
                    bind: driver.peer_source(),
                    name: crate::dcp::replication_connection_name(me, name),
                    timeouts: Default::default(),
                    tls,
                };
                wanted.insert(key, (handle.clone(), spec));
            }
        }
        self.set_feeds(wanted);
        node.query.indexes.reconcile(node, meta);
    }

    /// Applies the cluster's user groups when they changed (before the users, whose roles they extend).
    fn apply_groups(&mut self, node: &Node, meta: &ClusterMetadata) {
        if self.groups_applied.as_ref() == Some(&meta.groups) {
            return;
        }
        let groups: Vec<crate::auth::Group> = match &meta.groups {
            serde_json::Value::Null => Vec::new(),
            value => match serde_json::from_value(value.clone()) {
                Ok(g) => g,
                Err(e) => {
                    tracing::error!(error = %e, "the cluster's user groups cannot be read; keeping the local ones");
                    return;
                }
            },
        };
        node.users.set_groups(groups);
        self.groups_applied = Some(meta.groups.clone());
    }

    fn apply_users(&mut self, node: &Node, meta: &ClusterMetadata) {
        if meta.users.is_null() || self.users_applied.as_ref() == Some(&meta.users) {
            return;
        }
        let users: Vec<User> = match serde_json::from_value(meta.users.clone()) {
            Ok(u) => u,
            Err(e) => {
                tracing::error!(error = %e, "the cluster's user list cannot be read; keeping the local users");
                return;
            }
        };
        let admin = node.users.get(&node.config.username);
        let mut all: Vec<User> = users.into_iter().filter(|u| u.id != node.config.username).collect();
        // The command line's administrator always exists on its node, with the password it was started with.
        all.extend(admin.map(|a| (*a).clone()));
        match node.users.restore(all) {
            Ok(()) => {
                self.users_applied = Some(meta.users.clone());
                node.limits.forget_absent(|user| node.users.get(user).is_some());
            }
            Err(e) => tracing::error!(error = %e, "cannot apply the cluster's users"),
        }
    }

    /// Applies the administrator's credentials once reset cluster-wide (null: each node keeps its command line's).
    fn apply_admin(&mut self, node: &Node, meta: &ClusterMetadata) {
        if meta.admin.is_null() || self.admin_applied.as_ref() == Some(&meta.admin) {
            return;
        }
        match serde_json::from_value::<User>(meta.admin.clone()) {
            Ok(admin) => {
                node.apply_admin(admin);
                self.admin_applied = Some(meta.admin.clone());
            }
            Err(e) => tracing::error!(error = %e, "the cluster's administrator cannot be read; keeping this node's"),
        }
    }

    /// Applies the cluster's audit settings on this node when they changed (null: audit off, the defaults).
    fn apply_audit(&mut self, node: &Node, meta: &ClusterMetadata) {
        if self.audit_applied.as_ref() == Some(&meta.audit) {
            return;
        }
        node.audit.apply(&crate::audit::AuditSettings::from_metadata(&meta.audit));
        self.audit_applied = Some(meta.audit.clone());
    }

    /// Applies the cluster's security settings on this node when they changed (null: the defaults).
    fn apply_security(&mut self, node: &Node, meta: &ClusterMetadata) {
        if self.security_applied.as_ref() == Some(&meta.security) {
            return;
        }
        node.apply_security(crate::auth::SecuritySettings::from_metadata(&meta.security));
        self.security_applied = Some(meta.security.clone());
    }

    /// Starts, updates or stops feeds so that exactly `wanted` run. A feed whose transport changed (node-to-node
    /// encryption turned on or off) is stopped and started again over the new one. A feed whose vBucket list alone changed keeps
    /// its connection and opens or closes just the streams that differ.
    fn set_feeds(&mut self, wanted: BTreeMap<FeedKey, (Arc<BucketHandle>, FeedSpec)>) {
        self.feeds.retain(|key, feed| {
            let keep = wanted.get(key).is_some_and(|(_, spec)| spec.same_connection(&feed.spec));
            if !keep {
                let _ = feed.stop.send(true);
                tracing::info!(bucket = %key.bucket, source = key.source, "replication feed stopped");
            }
            keep
        });
        for (key, (handle, spec)) in wanted {
            if let Some(feed) = self.feeds.get_mut(&key) {
                if feed.spec.vbuckets != spec.vbuckets {
                    let _ = feed.vbuckets.send(spec.vbuckets.clone());
                    feed.spec = spec;
                }
                continue;
            }
            let (stop, stopped) = watch::channel(false);
            let (vbuckets, streamed) = watch::channel(spec.vbuckets.clone());
            tracing::info!(bucket = %key.bucket, source = key.source, addr = %spec.source, vbuckets = spec.vbuckets.len(), "replication feed started");
            tokio::spawn(consumer::run(handle, spec.clone(), streamed, stopped));
            self.feeds.insert(key, Feed { spec, vbuckets, stop });
        }
    }

    fn stop_feeds_of(&mut self, bucket: &str) {
        self.stop_feeds_where(|key| key.bucket == bucket);
    }

    fn stop_feeds_where(&mut self, stop: impl Fn(&FeedKey) -> bool) {
        self.feeds.retain(|key, feed| {
            let stopped = stop(key);
            if stopped {
                let _ = feed.stop.send(true);
            }
            !stopped
        });
    }

    /// The newest revision applied (0 after [`Reconciler::forget_applied`]).
    pub(super) fn applied_rev(&self) -> u64 {
        self.applied_rev
    }

    /// Forgets what was applied: the node joined another cluster, whose revisions start again.
    pub(super) fn forget_applied(&mut self) {
        self.applied_rev = 0;
        self.users_applied = None;
        self.admin_applied = None;
        self.audit_applied = None;
        self.security_applied = None;
        self.groups_applied = None;
    }

    pub(super) fn stop_feeds(&mut self) {
        self.stop_feeds_where(|_| true);
    }
}

/// Settings and the collections manifest, when the metadata's differ from the local bucket's.
fn apply_settings(handle: &BucketHandle, b: &BucketMeta) {
    if spec_of(&handle.config()) != b.spec {
        let wanted = config_of(&b.spec);
        handle.update_config(|c| *c = wanted);
        tracing::info!(bucket = %b.spec.name, "bucket settings applied from the cluster");
    }
    if b.manifest.uid > handle.manifest().uid {
        let manifest = b.manifest.clone();
        // Through edit_manifest, so the items of dropped collections go too.
        let _ = handle.edit_manifest(|m| {
            *m = manifest;
            Ok(())
        });
    }
}

/// What vBucket `vb` should be on node `me` by the map. Until the node's metadata is known current, nothing is
/// active here.
fn wanted_state(b: &BucketMeta, vb: u16, me: NodeId, current: bool) -> VbState {
    let Some(chain) = b.map.chains.get(usize::from(vb)) else { return VbState::Dead };
    if chain.first() == Some(&Some(me)) {
        if current {
            VbState::Active
        } else {
            VbState::Dead
        }
    } else if chain.iter().skip(1).any(|n| *n == Some(me)) || is_building(b, vb, me) {
        VbState::Replica
    } else {
        VbState::Dead
    }
}

/// What the reconciler needs to know about this node.
struct Here<'a> {
    me: NodeId,
    /// Whether the node's metadata is confirmed current (until then nothing is active here).
    current: bool,
    /// Whether copies the map does not place here keep their data (see [`keeps_unowned_data`]).
    keep_data: bool,
    /// A new vBucket uuid (the failover-log branch a state change starts), from the driver's seeded generator.
    new_uuid: &'a dyn Fn() -> u64,
}

/// A failed-over node keeps the data of its (dead) vBuckets, and so does one in delta recovery until its
/// rebalance ends: that is what delta recovery resumes from. Every other node drops what the map does not give it.
fn keeps_unowned_data(meta: &ClusterMetadata, me: NodeId) -> bool {
    meta.nodes.get(&me).is_some_and(|n| n.membership == Membership::InactiveFailed)
        || meta.recovery.get(&me) == Some(&Recovery::Delta)
}

/// Applies the map's states to the local vBuckets. Until the node is `current` nothing is active here; an active
/// in `held` (a takeover in progress) is pending: clients are refused while DCP still streams it to the copy that
/// takes over. A copy the (confirmed) map no longer places on this node is emptied in memory and on disk, unless
/// the node keeps such data (failed over, or in delta recovery). Returns whether such a drop waits for the
/// bucket's warmup.
fn apply_vbucket_states(
    handle: &BucketHandle,
    b: &BucketMeta,
    here: &Here<'_>,
    held: &std::collections::BTreeSet<u16>,
) -> bool {
    let mut changed = 0;
    let mut dropped = 0;
    let mut deferred = false;
    for vb in 0..NUM_VBUCKETS {
        let owned = wanted_state(b, vb, here.me, true);
        let wanted = match owned {
            VbState::Active if !here.current => VbState::Dead,
            VbState::Active if held.contains(&vb) => VbState::Pending,
            state => state,
        };
        let Some(vbucket) = handle.vbucket(VbId(vb)) else { continue };
        let state = vbucket.state();
        // A vBucket taken out of service by a checksum failure stays out until an operator acts.
        if state == VbState::Failed {
            continue;
        }
        if state != wanted {
            if state == VbState::Active && wanted == VbState::Replica {
                // Demoted: the new active's history decides what this copy keeps (the feed rolls it back if needed).
                tracing::info!(bucket = %b.spec.name, vb, "active vBucket becomes a replica");
            }
            handle.set_vbucket_state(VbId(vb), wanted, (here.new_uuid)());
            changed += 1;
        }
        // Not while warmup loads the bucket: a vBucket not loaded yet looks empty, and one emptied now would get
        // its old items back from warmup; the map is applied again once warmup is done.
        let unowned = owned == VbState::Dead && here.current && !held.contains(&vb) && !here.keep_data;
        if unowned && handle.is_warming_up() {
            deferred = true;
        } else if unowned && vbucket.high_seqno() > 0 {
            crate::dcp::consumer::reset_replica(handle, VbId(vb));
            dropped += 1;
        }
        if wanted == VbState::Active {
            // Durable writes count acknowledgements from exactly these replicas.
            let chain = &b.map.chains[usize::from(vb)];
            handle.set_replication_chain(VbId(vb), &chain[1..]);
        }
    }
    if changed > 0 || dropped > 0 {
        tracing::info!(bucket = %b.spec.name, changed, dropped, "vBucket states applied from the map");
    }
    deferred
}

/// Whether `me` is building a copy of `vb` (a rebalance streams it in before the map names it).
fn is_building(b: &BucketMeta, vb: u16, me: NodeId) -> bool {
    b.building.get(&vb).is_some_and(|nodes| nodes.contains(&me))
}

/// The replica vBuckets of `me` (copies being built included), grouped by the node that holds their active copy.
fn replica_sources(b: &BucketMeta, me: NodeId) -> BTreeMap<NodeId, Vec<VbId>> {
    let mut by_source: BTreeMap<NodeId, Vec<VbId>> = BTreeMap::new();
    for (vb, chain) in (0..=u16::MAX).zip(&b.map.chains) {
        if let Some(Some(active)) = chain.first() {
            if *active != me && (chain.iter().skip(1).any(|n| *n == Some(me)) || is_building(b, vb, me)) {
                by_source.entry(*active).or_default().push(VbId(vb));
            }
        }
    }
    by_source
}

fn kv_addr(info: &NodeInfo) -> Option<SocketAddr> {
    let host = info.hostname.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Some(SocketAddr::new(ip, info.kv_port));
    }
    (host, info.kv_port).to_socket_addrs().ok()?.next()
}

#[cfg(test)]
mod tests {
    use settee_cluster::{vbmap, BucketSpec, VbMap};

    use super::*;

    fn bucket(map: VbMap) -> BucketMeta {
        let spec = BucketSpec {
            name: "b".into(),
            uuid: "u".into(),
            ephemeral: true,
            ram_quota_bytes: 100 << 20,
            replicas: 1,
            eviction: "noEviction".into(),
            max_ttl: 0,
            flush_enabled: false,
            durability_min_level: None,
            conflict_resolution: Default::default(),
        };
        BucketMeta {
            spec,
            manifest: Default::default(),
            map,
            failover_epoch: 0,
            building: Default::default(),
            indexes: Default::default(),
        }
    }

    #[test]
    fn states_and_feeds_follow_the_map() {
        // Proves each node gets Active for its actives (Dead until current), Replica for its replicas, Dead for
        // the rest, and one feed per source node covering exactly its replicas.
        let b = bucket(vbmap::plan(&[1, 2, 3], NUM_VBUCKETS, 1));
        let mut active = 0;
        for vb in 0..NUM_VBUCKETS {
            let chain = &b.map.chains[usize::from(vb)];
            let st = wanted_state(&b, vb, 2, true);
            assert_eq!(st == VbState::Active, chain[0] == Some(2));
            assert_eq!(st == VbState::Replica, chain[1] == Some(2));
            active += usize::from(st == VbState::Active);
            if chain[0] == Some(2) {
                assert_eq!(wanted_state(&b, vb, 2, false), VbState::Dead, "not current: nothing active");
            }
        }
        assert!(active > 300 && active < 380, "actives spread over three nodes: {active}");
        let feeds = replica_sources(&b, 2);
        assert_eq!(feeds.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
        let total: usize = feeds.values().map(Vec::len).sum();
        assert_eq!(total, b.map.replicas_of(2).len());
        for (source, vbs) in feeds {
            assert!(vbs.iter().all(|vb| b.map.active(vb.0) == Some(source)));
        }
    }

    #[test]
    fn a_copy_being_built_is_a_replica_fed_by_the_active() {
        // Proves a node listed as building a vBucket's copy holds it as a replica and streams it from the active,
        // while the copies the map names are unchanged.
        let mut b = bucket(vbmap::plan(&[1, 2], NUM_VBUCKETS, 1));
        let active = b.map.active(5).unwrap();
        assert_eq!(wanted_state(&b, 5, 3, true), VbState::Dead);
        b.building.insert(5, vec![3]);
        assert_eq!(wanted_state(&b, 5, 3, true), VbState::Replica);
        assert_eq!(replica_sources(&b, 3), BTreeMap::from([(active, vec![VbId(5)])]));
        assert_eq!(wanted_state(&b, 5, active, true), VbState::Active);
    }

    #[test]
    fn a_bucket_created_for_the_map_serves_nothing_before_its_states_apply() {
        // Proves the bucket the reconcile creates starts with every vBucket dead (a new engine bucket's are
        // active): an empty active, before the map's states applied, would answer NOT_FOUND and tell replicas
        // streaming from it to roll back to zero (what the simulator found on restarted memory-only nodes).
        let node = crate::node::Node::new(crate::config::ServerConfig::for_tests()).expect("node");
        let spec = bucket(vbmap::plan(&[1, 2], NUM_VBUCKETS, 1)).spec;
        let handle = node.create_bucket_for_map(config_of(&spec)).expect("bucket");
        assert!((0..NUM_VBUCKETS).all(|vb| handle.vbucket(VbId(vb)).is_some_and(|v| v.state() == VbState::Dead)));
        let alone = node.create_bucket(settee_engine::BucketConfig {
            name: "alone".into(),
            uuid: String::new(),
            ..config_of(&spec)
        });
        let alone = alone.expect("bucket");
        assert!((0..NUM_VBUCKETS).all(|vb| alone.vbucket(VbId(vb)).is_some_and(|v| v.state() == VbState::Active)));
    }
}

//! One test per command: the change it makes, the refusals it can give, and that a refusal changes nothing.

use serde_json::json;
use settee_engine::Manifest;
use settee_types::limits::NUM_VBUCKETS;

use super::*;
use crate::vbmap;

pub(super) fn node(id: NodeId) -> NodeInfo {
    NodeInfo::new(id, "127.0.0.1", 8090 + u16::try_from(id).expect("small test id"))
}

fn spec(name: &str, replicas: u8) -> BucketSpec {
    BucketSpec {
        name: name.into(),
        uuid: format!("uuid-{name}"),
        ephemeral: false,
        ram_quota_bytes: 100 << 20,
        replicas,
        eviction: "valueOnly".into(),
        max_ttl: 0,
        flush_enabled: false,
        durability_min_level: None,
        conflict_resolution: Default::default(),
    }
}

/// Applies `cmd` expecting a refusal, and checks the refusal left the state exactly as it was.
pub(super) fn refused(meta: &mut ClusterMetadata, cmd: MetaCommand) -> MetaError {
    let before = meta.clone();
    let err = meta.apply(&cmd).expect_err("command should be refused");
    assert_eq!(*meta, before, "a refused command changed the state");
    err
}

/// Three Active nodes and bucket "b" with one replica.
pub(super) fn cluster() -> ClusterMetadata {
    let mut meta = ClusterMetadata::default();
    for id in 1..=3 {
        meta.apply(&MetaCommand::AddNode(node(id))).expect("add");
        meta.apply(&MetaCommand::SetMembership { node: id, membership: Membership::Active }).expect("activate");
    }
    meta.apply(&MetaCommand::CreateBucket(spec("b", 1))).expect("create");
    meta
}

/// The first node of an empty cluster is Active, later ones join as inactiveAdded; ids and addresses are unique.
#[test]
fn add_node_first_active_then_inactive_added() {
    let mut meta = ClusterMetadata::default();
    meta.apply(&MetaCommand::AddNode(node(1))).expect("first");
    meta.apply(&MetaCommand::AddNode(node(2))).expect("second");
    assert_eq!(meta.rev, 2);
    assert_eq!(meta.nodes[&1].membership, Membership::Active);
    assert_eq!(meta.nodes[&2].membership, Membership::InactiveAdded);
    assert_eq!(refused(&mut meta, MetaCommand::AddNode(node(2))), MetaError::NodeExists(2));
    let same_addr = NodeInfo { id: 9, ..node(2) };
    assert_eq!(refused(&mut meta, MetaCommand::AddNode(same_addr)), MetaError::AddressInUse("127.0.0.1:8092".into()));
}

/// UpdateNode changes a member's ports but keeps its membership; unknown ids and taken addresses are refused.
#[test]
fn update_node_keeps_membership() {
    let mut meta = ClusterMetadata::default();
    meta.apply(&MetaCommand::AddNode(node(1))).expect("add");
    meta.apply(&MetaCommand::AddNode(node(2))).expect("add");
    let moved = NodeInfo { kv_port: 12000, membership: Membership::Active, ..node(2) };
    meta.apply(&MetaCommand::UpdateNode(moved)).expect("update");
    assert_eq!((meta.nodes[&2].kv_port, meta.nodes[&2].membership), (12000, Membership::InactiveAdded));
    assert_eq!(refused(&mut meta, MetaCommand::UpdateNode(node(5))), MetaError::UnknownNode(5));
    let clash = NodeInfo { mgmt_port: 8091, ..node(2) };
    assert_eq!(refused(&mut meta, MetaCommand::UpdateNode(clash)), MetaError::AddressInUse("127.0.0.1:8091".into()));
}

/// SetMembership activates a node; InactiveFailed is only reachable by failover; unknown nodes are refused.
#[test]
fn set_membership_rules() {
    let mut meta = ClusterMetadata::default();
    meta.apply(&MetaCommand::AddNode(node(1))).expect("add");
    meta.apply(&MetaCommand::AddNode(node(2))).expect("add");
    meta.apply(&MetaCommand::SetMembership { node: 2, membership: Membership::Active }).expect("activate");
    assert_eq!(meta.active_nodes(), vec![1, 2]);
    let failed = MetaCommand::SetMembership { node: 2, membership: Membership::InactiveFailed };
    assert_eq!(refused(&mut meta, failed), MetaError::MembershipNeedsFailover(2));
    let unknown = MetaCommand::SetMembership { node: 7, membership: Membership::Active };
    assert_eq!(refused(&mut meta, unknown), MetaError::UnknownNode(7));
}

/// A node still holding copies cannot be removed; after failover it holds none and can be.
#[test]
fn remove_node_only_when_it_holds_no_copies() {
    let mut meta = cluster();
    assert_eq!(refused(&mut meta, MetaCommand::RemoveNode(3)), MetaError::NodeInUse { node: 3, bucket: "b".into() });
    assert_eq!(refused(&mut meta, MetaCommand::RemoveNode(8)), MetaError::UnknownNode(8));
    meta.apply(&MetaCommand::Failover { nodes: vec![3] }).expect("failover");
    meta.apply(&MetaCommand::RemoveNode(3)).expect("remove");
    assert!(!meta.nodes.contains_key(&3));
}

/// CreateBucket plans the map over Active nodes only, with the default manifest; names and replicas are checked.
#[test]
fn create_bucket_plans_over_active_nodes() {
    let mut meta = cluster();
    meta.apply(&MetaCommand::AddNode(node(4))).expect("add inactive");
    meta.apply(&MetaCommand::CreateBucket(spec("c", 2))).expect("create");
    let c = &meta.buckets["c"];
    assert_eq!(c.map.chains.len(), usize::from(NUM_VBUCKETS));
    assert_eq!(c.map.nodes(), [1, 2, 3].into_iter().collect());
    assert_eq!(c.map.replicas(), 2);
    assert_eq!(c.manifest, Manifest::default());
    assert_eq!(refused(&mut meta, MetaCommand::CreateBucket(spec("c", 1))), MetaError::BucketExists("c".into()));
    assert!(matches!(
        refused(&mut meta, MetaCommand::CreateBucket(spec("bad/name", 1))),
        MetaError::InvalidBucket { .. }
    ));
    assert!(matches!(refused(&mut meta, MetaCommand::CreateBucket(spec("d", 4))), MetaError::InvalidBucket { .. }));
    let mut empty = ClusterMetadata::default();
    assert_eq!(refused(&mut empty, MetaCommand::CreateBucket(spec("e", 0))), MetaError::NoActiveNodes);
}

/// UpdateBucket replaces the settings but keeps the map; uuid and type are immutable.
#[test]
fn update_bucket_keeps_map_and_identity() {
    let mut meta = cluster();
    let map = meta.buckets["b"].map.clone();
    let update = BucketSpec { ram_quota_bytes: 200 << 20, replicas: 2, ..spec("b", 1) };
    meta.apply(&MetaCommand::UpdateBucket(update.clone())).expect("update");
    assert_eq!(meta.buckets["b"].spec, update);
    assert_eq!(meta.buckets["b"].map, map);
    let new_uuid = BucketSpec { uuid: "other".into(), ..spec("b", 1) };
    assert!(matches!(refused(&mut meta, MetaCommand::UpdateBucket(new_uuid)), MetaError::InvalidBucket { .. }));
    let ephemeral = BucketSpec { ephemeral: true, ..spec("b", 1) };
    assert!(matches!(refused(&mut meta, MetaCommand::UpdateBucket(ephemeral)), MetaError::InvalidBucket { .. }));
    assert_eq!(refused(&mut meta, MetaCommand::UpdateBucket(spec("x", 1))), MetaError::UnknownBucket("x".into()));
}

/// DeleteBucket removes the bucket; a second delete is refused.
#[test]
fn delete_bucket_removes_it_once() {
    let mut meta = cluster();
    meta.apply(&MetaCommand::DeleteBucket("b".into())).expect("delete");
    assert!(meta.buckets.is_empty());
    assert_eq!(refused(&mut meta, MetaCommand::DeleteBucket("b".into())), MetaError::UnknownBucket("b".into()));
}

/// SetManifest accepts a newer manifest and refuses one whose uid went backwards.
#[test]
fn set_manifest_never_goes_backwards() {
    let mut meta = cluster();
    let mut manifest = Manifest::default();
    manifest.create_scope("inventory").expect("scope");
    let newer = manifest.clone();
    meta.apply(&MetaCommand::SetManifest { bucket: "b".into(), manifest: newer.clone() }).expect("set");
    assert_eq!(meta.buckets["b"].manifest, newer);
    let stale = MetaCommand::SetManifest { bucket: "b".into(), manifest: Manifest::default() };
    assert!(matches!(refused(&mut meta, stale), MetaError::StaleManifest { current: 1, proposed: 0, .. }));
    let unknown = MetaCommand::SetManifest { bucket: "x".into(), manifest };
    assert_eq!(refused(&mut meta, unknown), MetaError::UnknownBucket("x".into()));
}

/// SetMap installs a valid map and refuses wrong sizes, duplicates, unknown and failed-over nodes.
#[test]
fn set_map_validates_the_map() {
    let mut meta = cluster();
    let set = |map: VbMap| MetaCommand::SetMap { bucket: "b".into(), map };
    let rebalanced = vbmap::plan(&[2, 3], NUM_VBUCKETS, 1);
    meta.apply(&set(rebalanced.clone())).expect("set map");
    assert_eq!(meta.buckets["b"].map, rebalanced);

    let short = VbMap { chains: rebalanced.chains[..10].to_vec() };
    assert!(matches!(refused(&mut meta, set(short)), MetaError::InvalidMap { .. }));
    let mut dup = rebalanced.clone();
    dup.chains[5] = vec![Some(2), Some(2)];
    assert!(matches!(refused(&mut meta, set(dup)), MetaError::InvalidMap { .. }));
    let mut unknown = rebalanced.clone();
    unknown.chains[5] = vec![Some(2), Some(9)];
    assert!(matches!(refused(&mut meta, set(unknown)), MetaError::InvalidMap { .. }));
    let wrong_len = vbmap::plan(&[1, 2, 3], NUM_VBUCKETS, 2);
    assert!(matches!(refused(&mut meta, set(wrong_len)), MetaError::InvalidMap { .. }));
    meta.apply(&MetaCommand::Failover { nodes: vec![1] }).expect("failover");
    assert!(matches!(refused(&mut meta, set(vbmap::plan(&[1, 2], NUM_VBUCKETS, 1))), MetaError::InvalidMap { .. }));
}

/// Failover promotes replicas in every bucket, marks the nodes failed and bumps every failover epoch; it refuses
/// an empty list, unknown nodes and failing over the last active node.
#[test]
fn failover_promotes_and_marks_failed() {
    let mut meta = cluster();
    let before = meta.buckets["b"].map.clone();
    meta.apply(&MetaCommand::Failover { nodes: vec![1] }).expect("failover");
    let b = &meta.buckets["b"];
    assert_eq!(b.map, vbmap::failover(&before, &[1], &vbmap::NodeGroups::default()));
    assert!(!b.map.contains_node(1));
    assert!(b.map.chains.iter().all(|c| c[0].is_some()), "one replica: every vBucket keeps a copy");
    assert_eq!(b.failover_epoch, 1);
    assert_eq!(meta.nodes[&1].membership, Membership::InactiveFailed);
    assert_eq!(refused(&mut meta, MetaCommand::Failover { nodes: vec![] }), MetaError::EmptyFailover);
    assert_eq!(refused(&mut meta, MetaCommand::Failover { nodes: vec![6] }), MetaError::UnknownNode(6));
    assert_eq!(refused(&mut meta, MetaCommand::Failover { nodes: vec![2, 3] }), MetaError::LastActiveNode);
}

/// A draining failover is a failover (the same membership and epoch, the replicas it lost rebuilt in the same
/// change: a `majority` write never finds a vBucket without its replica) after which the node stays listed for
/// clients until EndDrain; a recovery (the node Active again) or a hard failover also ends the drain, and EndDrain
/// of an unknown node is refused.
#[test]
fn failover_draining_keeps_the_node_listed_until_end_drain() {
    let mut hard = cluster();
    hard.apply(&MetaCommand::Failover { nodes: vec![1] }).expect("failover");
    let mut meta = cluster();
    meta.apply(&MetaCommand::FailoverDraining { node: 1 }).expect("failover draining");
    let groups = vbmap::NodeGroups::default();
    let repaired = vbmap::repair_replicas(&hard.buckets["b"].map, &[2, 3], &groups);
    assert_eq!(meta.buckets["b"].map, repaired, "the replicas rebuilt in the same change");
    assert!(meta.buckets["b"].map.chains.iter().all(|c| c.iter().all(Option::is_some)), "no copy missing");
    assert_eq!(meta.buckets["b"].failover_epoch, hard.buckets["b"].failover_epoch);
    assert_eq!(meta.nodes, hard.nodes);
    assert!(meta.is_listed(1) && !hard.is_listed(1));
    assert_eq!(refused(&mut meta, MetaCommand::EndDrain { node: 9 }), MetaError::UnknownNode(9));
    meta.apply(&MetaCommand::EndDrain { node: 1 }).expect("end drain");
    assert!(!meta.is_listed(1) && meta.draining.is_empty());
    meta.apply(&MetaCommand::EndDrain { node: 1 }).expect("ending no drain changes nothing");

    let mut recovered = cluster();
    recovered.apply(&MetaCommand::FailoverDraining { node: 2 }).expect("failover draining");
    recovered.apply(&MetaCommand::SetRecovery { node: 2, recovery: Some(Recovery::Delta) }).expect("recovery");
    recovered.apply(&MetaCommand::SetMembership { node: 2, membership: Membership::Active }).expect("active");
    assert!(recovered.draining.is_empty() && recovered.is_listed(2));
    let mut failed_again = cluster();
    failed_again.apply(&MetaCommand::FailoverDraining { node: 3 }).expect("failover draining");
    failed_again.apply(&MetaCommand::Failover { nodes: vec![3] }).expect("hard failover");
    assert!(failed_again.draining.is_empty());
}

/// Reprovision takes a restarted node out of an ephemeral bucket's chains (replicas promoted), keeps it a member,
/// and refuses persistent buckets and unknown names.
#[test]
fn reprovision_promotes_replicas_of_an_ephemeral_bucket_only() {
    let mut meta = cluster();
    let before = meta.buckets["b"].map.clone();
    assert_eq!(
        refused(&mut meta, MetaCommand::Reprovision { bucket: "b".into(), node: 1 }),
        MetaError::NotEphemeral("b".into())
    );
    meta.buckets.get_mut("b").expect("bucket").spec.ephemeral = true;
    meta.apply(&MetaCommand::Reprovision { bucket: "b".into(), node: 1 }).expect("reprovision");
    let b = &meta.buckets["b"];
    assert_eq!(b.map, vbmap::reprovision(&before, 1));
    assert!(!b.map.contains_node(1) && b.failover_epoch == 1);
    assert_eq!(meta.nodes[&1].membership, Membership::Active);
    assert_eq!(
        refused(&mut meta, MetaCommand::Reprovision { bucket: "x".into(), node: 1 }),
        MetaError::UnknownBucket("x".into())
    );
}

/// PromoteReplicas hands a restarted node's active copies over to the named replicas of a persistent bucket (the
/// node stays in the chain as a replica), is a no-op for vBuckets the node no longer leads, and refuses unknown
/// nodes and buckets.
#[test]
fn promote_replicas_swaps_the_restarted_active_with_the_replica_ahead() {
    let mut meta = cluster();
    let before = meta.buckets["b"].map.clone();
    let vb = before.actives_of(1)[0];
    let replica = before.chains[usize::from(vb)][1].expect("a replica");
    let promote: BTreeMap<u16, NodeId> = [(vb, replica)].into_iter().collect();
    let cmd = MetaCommand::PromoteReplicas { bucket: "b".into(), node: 1, promote: promote.clone() };
    meta.apply(&cmd).expect("promote");
    let b = &meta.buckets["b"];
    assert_eq!(b.map.chains[usize::from(vb)][..2], [Some(replica), Some(1)]);
    assert_eq!(b.map, vbmap::promote(&before, 1, &promote));
    assert_eq!(b.failover_epoch, 1);
    meta.apply(&cmd).expect("a repeated promotion is harmless");
    assert_eq!(meta.buckets["b"].failover_epoch, 1, "nothing changed the second time");
    let unknown_bucket = MetaCommand::PromoteReplicas { bucket: "x".into(), node: 1, promote: promote.clone() };
    assert_eq!(refused(&mut meta, unknown_bucket), MetaError::UnknownBucket("x".into()));
    let unknown_node = MetaCommand::PromoteReplicas { bucket: "b".into(), node: 9, promote };
    assert_eq!(refused(&mut meta, unknown_node), MetaError::UnknownNode(9));
}

/// SetUsers stores the server's user model as given.
#[test]
fn set_users_stores_opaque_value() {
    let mut meta = ClusterMetadata::default();
    let users = json!({"alice": {"roles": ["admin"]}});
    meta.apply(&MetaCommand::SetUsers(users.clone())).expect("set users");
    assert_eq!(meta.users, users);
    assert_eq!(meta.rev, 1);
}

/// SetAudit, SetSecurity, SetGroups and SetAdmin store the server's values as given, and metadata written before they existed reads
/// them as null.
#[test]
fn set_audit_security_and_groups_store_opaque_values_and_old_metadata_reads_null() {
    let mut meta = ClusterMetadata::default();
    let audit = json!({"enabled": true, "disabled": [20488]});
    meta.apply(&MetaCommand::SetAudit(audit.clone())).expect("set audit");
    assert_eq!((meta.audit.clone(), meta.rev), (audit, 1));
    let security = json!({"tlsMinVersion": "tlsv1.3"});
    meta.apply(&MetaCommand::SetSecurity(security.clone())).expect("set security");
    assert_eq!((meta.security.clone(), meta.rev), (security, 2));
    let groups = json!([{"id": "g", "roles": ["admin"]}]);
    meta.apply(&MetaCommand::SetGroups(groups.clone())).expect("set groups");
    assert_eq!((meta.groups.clone(), meta.rev), (groups, 3));
    let admin = json!({"id": "Administrator", "credentials": "opaque"});
    meta.apply(&MetaCommand::SetAdmin(admin.clone())).expect("set admin");
    assert_eq!((meta.admin.clone(), meta.rev), (admin, 4));
    let mut old = serde_json::to_value(ClusterMetadata::default()).expect("encode");
    old.as_object_mut().expect("object").remove("admin");
    old.as_object_mut().expect("object").remove("audit");
    old.as_object_mut().expect("object").remove("security");
    old.as_object_mut().expect("object").remove("groups");
    let read: ClusterMetadata = serde_json::from_value(old).expect("decode without the fields");
    assert!(read.audit.is_null() && read.security.is_null() && read.groups.is_null() && read.admin.is_null());
}

/// SetSettings replaces one section of the opaque management settings and keeps the others; metadata written
/// before the settings existed reads as null.
#[test]
fn set_settings_replaces_one_section_and_keeps_the_others() {
    let mut meta = ClusterMetadata::default();
    let pool = json!({"clusterName": "prod"});
    meta.apply(&MetaCommand::SetSettings { key: "pool".into(), value: pool.clone() }).expect("set pool");
    meta.apply(&MetaCommand::SetSettings { key: "stats".into(), value: json!({"sendStats": false}) }).expect("stats");
    let renamed = json!({"clusterName": "staging"});
    meta.apply(&MetaCommand::SetSettings { key: "pool".into(), value: renamed.clone() }).expect("rename");
    assert_eq!(meta.settings, json!({"pool": renamed, "stats": {"sendStats": false}}));
    assert_eq!(meta.rev, 3);
    let mut old = serde_json::to_value(ClusterMetadata::default()).expect("encode");
    old.as_object_mut().expect("object").remove("settings");
    let read: ClusterMetadata = serde_json::from_value(old).expect("decode without the field");
    assert!(read.settings.is_null());
}

/// XDCR checkpoints are recorded per replication and vBucket (a later save of a vBucket replaces its entry, the
/// others stay), dropped whole with their replication, and read as none from metadata written before them.
#[test]
fn xdcr_checkpoints_merge_per_vbucket_and_go_with_their_replication() {
    let mut meta = ClusterMetadata::default();
    let save = |vbuckets: &[(u16, u64, u64)]| MetaCommand::SaveXdcrCheckpoints {
        replication: "r".into(),
        vbuckets: vbuckets.iter().map(|&(vb, uuid, seqno)| (vb, (uuid, seqno))).collect(),
    };
    meta.apply(&save(&[(1, 7, 10), (2, 7, 20)])).unwrap();
    meta.apply(&save(&[(2, 8, 25)])).unwrap();
    assert_eq!(
        meta.xdcr_checkpoints["r"].iter().map(|(v, c)| (*v, *c)).collect::<Vec<_>>(),
        [(1, (7, 10)), (2, (8, 25))]
    );
    let mut old = serde_json::to_value(&meta).unwrap();
    old.as_object_mut().unwrap().remove("xdcr_checkpoints");
    assert!(serde_json::from_value::<ClusterMetadata>(old).unwrap().xdcr_checkpoints.is_empty());
    meta.apply(&MetaCommand::ForgetXdcrCheckpoints { replication: "r".into() }).unwrap();
    assert!(meta.xdcr_checkpoints.is_empty());
}

/// SetXdcr stores the server's XDCR model as given, and metadata written before XDCR existed reads as null.
#[test]
fn set_xdcr_stores_opaque_value_and_old_metadata_reads_null() {
    let mut meta = ClusterMetadata::default();
    let xdcr = json!({"remotes": [{"name": "dc2"}], "replications": []});
    meta.apply(&MetaCommand::SetXdcr(xdcr.clone())).expect("set xdcr");
    assert_eq!((meta.xdcr.clone(), meta.rev), (xdcr, 1));
    let mut old = serde_json::to_value(ClusterMetadata::default()).expect("encode");
    old.as_object_mut().expect("object").remove("xdcr");
    let read: ClusterMetadata = serde_json::from_value(old).expect("decode without the field");
    assert!(read.xdcr.is_null());
}

/// SetAutoFailover accepts Couchbase's ranges and refuses a timeout outside 5..=3600 or a zero max count.
#[test]
fn set_auto_failover_checks_ranges() {
    let mut meta = ClusterMetadata::default();
    assert_eq!(meta.auto_failover.timeout_secs, 120);
    let ok = AutoFailoverSettings { enabled: true, timeout_secs: 5, max_count: 3, count: 1 };
    meta.apply(&MetaCommand::SetAutoFailover(ok.clone())).expect("valid");
    assert_eq!(meta.auto_failover, ok);
    for bad in [4, 3601] {
        let cmd = MetaCommand::SetAutoFailover(AutoFailoverSettings { timeout_secs: bad, ..ok.clone() });
        assert!(matches!(refused(&mut meta, cmd), MetaError::InvalidAutoFailover(_)));
    }
    let zero = MetaCommand::SetAutoFailover(AutoFailoverSettings { max_count: 0, ..ok });
    assert!(matches!(refused(&mut meta, zero), MetaError::InvalidAutoFailover(_)));
}

/// Membership serialises as Couchbase's clusterMembership strings, and the metadata round-trips through JSON.
#[test]
fn metadata_round_trips_through_json() {
    let meta = cluster();
    assert_eq!(serde_json::to_value(Membership::InactiveAdded).expect("json"), json!("inactiveAdded"));
    let text = serde_json::to_string(&meta).expect("encode");
    let back: ClusterMetadata = serde_json::from_str(&text).expect("decode");
    assert_eq!(back, meta);
}

/// Copies being built: only Active nodes outside the chain, once each; SetMap ends the entries it puts in the
/// chain and keeps the others; failover drops the failed node's; an empty list ends the building.
#[test]
fn building_copies_follow_the_map() {
    let mut meta = cluster();
    meta.apply(&MetaCommand::AddNode(node(4))).expect("add");
    let chain = meta.buckets["b"].map.chains[0].clone();
    let outside: Vec<NodeId> = (1..=3).filter(|n| !chain.contains(&Some(*n))).collect();
    let (free, inside) = (outside[0], chain[0].expect("active"));
    let refused_building = |meta: &mut ClusterMetadata, nodes: Vec<NodeId>| {
        let building = BTreeMap::from([(0u16, nodes)]);
        refused(meta, MetaCommand::SetBuilding { bucket: "b".into(), building })
    };
    assert!(matches!(refused_building(&mut meta, vec![inside]), MetaError::InvalidBuilding { .. }));
    assert!(matches!(refused_building(&mut meta, vec![4]), MetaError::InvalidBuilding { .. }), "inactiveAdded");
    assert!(matches!(refused_building(&mut meta, vec![free, free]), MetaError::InvalidBuilding { .. }));
    let building = BTreeMap::from([(0u16, vec![free]), (1u16, vec![])]);
    meta.apply(&MetaCommand::SetBuilding { bucket: "b".into(), building }).expect("build");
    assert_eq!(meta.buckets["b"].building, BTreeMap::from([(0u16, vec![free])]), "empty lists are dropped");

    // A map that puts the copy in the chain ends its entry.
    let mut map = meta.buckets["b"].map.clone();
    map.chains[0] = vec![Some(free), chain[0]];
    meta.apply(&MetaCommand::SetMap { bucket: "b".into(), map }).expect("map");
    assert!(meta.buckets["b"].building.is_empty());

    // Failover drops the failed node's copies.
    let chain1 = meta.buckets["b"].map.chains[1].clone();
    let other = (1..=3).find(|n| !chain1.contains(&Some(*n))).expect("a node outside vBucket 1");
    let building = BTreeMap::from([(1u16, vec![other])]);
    meta.apply(&MetaCommand::SetBuilding { bucket: "b".into(), building }).expect("build");
    meta.apply(&MetaCommand::Failover { nodes: vec![other] }).expect("failover");
    assert!(meta.buckets["b"].building.is_empty());
}

/// Recovery: only a failed-over node can be marked; a failed-over node becomes Active again only once marked; a
/// new failover or removal forgets the mark, and None ends it.
#[test]
fn recovery_marks_only_failed_over_nodes() {
    let mut meta = cluster();
    let delta = |node| MetaCommand::SetRecovery { node, recovery: Some(Recovery::Delta) };
    assert_eq!(refused(&mut meta, delta(3)), MetaError::NotFailedOver(3));
    assert_eq!(refused(&mut meta, delta(9)), MetaError::UnknownNode(9));
    meta.apply(&MetaCommand::Failover { nodes: vec![3] }).expect("failover");
    let activate = MetaCommand::SetMembership { node: 3, membership: Membership::Active };
    assert_eq!(refused(&mut meta, activate.clone()), MetaError::RecoveryNotSet(3));

    meta.apply(&delta(3)).expect("mark");
    assert_eq!(meta.recovery.get(&3), Some(&Recovery::Delta));
    meta.apply(&activate).expect("a marked node comes back");
    // Still marked while its rebalance runs; the mark can change, then ends.
    meta.apply(&MetaCommand::SetRecovery { node: 3, recovery: Some(Recovery::Full) }).expect("remark");
    meta.apply(&MetaCommand::SetRecovery { node: 3, recovery: None }).expect("end");
    assert!(meta.recovery.is_empty());

    meta.apply(&MetaCommand::Failover { nodes: vec![3] }).expect("failover again");
    meta.apply(&delta(3)).expect("mark");
    meta.apply(&MetaCommand::Failover { nodes: vec![2] }).expect("another failover");
    assert_eq!(meta.recovery.get(&3), Some(&Recovery::Delta), "another node's failover keeps the mark");
    meta.apply(&MetaCommand::RemoveNode(3)).expect("remove");
    assert!(meta.recovery.is_empty(), "a removed node's mark goes with it");
}

/// Rebalance moves per node: 1 to 64, default 4.
#[test]
fn rebalance_settings_are_validated() {
    let mut meta = cluster();
    assert_eq!(meta.rebalance.moves_per_node, 4);
    for bad in [0, 65] {
        let cmd = MetaCommand::SetRebalanceSettings(RebalanceSettings { moves_per_node: bad });
        assert!(matches!(refused(&mut meta, cmd), MetaError::InvalidRebalanceSettings(_)));
    }
    meta.apply(&MetaCommand::SetRebalanceSettings(RebalanceSettings { moves_per_node: 64 })).expect("max");
    assert_eq!(meta.rebalance.moves_per_node, 64);
}

fn index(id: &str, name: &str, scope: &str, collection: &str) -> IndexSpec {
    IndexSpec {
        id: id.into(),
        name: name.into(),
        scope: scope.into(),
        collection: collection.into(),
        is_primary: true,
        keys: vec![],
        condition: None,
        partition: None,
        num_replica: 0,
        deferred: true,
    }
}

/// Index names are unique per collection (the same name may exist in two collections), deferred indexes are
/// built by id, and a drop removes by id.
#[test]
fn index_definitions_are_unique_per_collection_and_built_by_id() {
    let mut meta = cluster();
    let mut manifest = meta.buckets["b"].manifest.clone();
    manifest.create_scope("s").expect("scope");
    manifest.create_collection("s", "c", None, false).expect("collection");
    meta.apply(&MetaCommand::SetManifest { bucket: "b".into(), manifest }).expect("manifest");
    let create = |spec| MetaCommand::CreateIndex { bucket: "b".into(), index: spec };
    meta.apply(&create(index("1", "ix", "_default", "_default"))).expect("first");
    meta.apply(&create(index("2", "ix", "s", "c"))).expect("same name, other collection");
    assert_eq!(refused(&mut meta, create(index("3", "ix", "s", "c"))), MetaError::IndexExists("ix".into()));
    assert!(matches!(refused(&mut meta, create(index("4", "x", "s", "nope"))), MetaError::UnknownCollection(_)));
    meta.apply(&MetaCommand::BuildIndexes { bucket: "b".into(), ids: vec!["2".into()] }).expect("build");
    assert!(!meta.buckets["b"].indexes["2"].deferred && meta.buckets["b"].indexes["1"].deferred);
    let unknown = MetaCommand::BuildIndexes { bucket: "b".into(), ids: vec!["2".into(), "9".into()] };
    assert_eq!(refused(&mut meta, unknown), MetaError::UnknownIndex("9".into()));
    meta.apply(&MetaCommand::DropIndex { bucket: "b".into(), id: "1".into() }).expect("drop");
    let again = MetaCommand::DropIndex { bucket: "b".into(), id: "1".into() };
    assert_eq!(refused(&mut meta, again), MetaError::UnknownIndex("1".into()));
}

/// Dropping a collection (a manifest without it) drops the indexes on it.
#[test]
fn dropping_a_collection_drops_its_indexes() {
    let mut meta = cluster();
    let mut manifest = meta.buckets["b"].manifest.clone();
    manifest.create_scope("s").expect("scope");
    manifest.create_collection("s", "c", None, false).expect("collection");
    meta.apply(&MetaCommand::SetManifest { bucket: "b".into(), manifest: manifest.clone() }).expect("manifest");
    let create = MetaCommand::CreateIndex { bucket: "b".into(), index: index("1", "ix", "s", "c") };
    meta.apply(&create).expect("create");
    manifest.drop_collection("s", "c").expect("drop");
    meta.apply(&MetaCommand::SetManifest { bucket: "b".into(), manifest }).expect("manifest");
    assert!(meta.buckets["b"].indexes.is_empty());
}

/// Proves metadata written before nodes had TLS ports still reads: a node entry without `tls_ports` gets all of
/// them off (0), so a node upgraded in place keeps its Raft log and snapshots.
#[test]
fn node_info_without_tls_ports_reads_as_tls_off() {
    let mut json = serde_json::to_value(node(3)).expect("serialises");
    json.as_object_mut().expect("an object").remove("tls_ports");
    let info: NodeInfo = serde_json::from_value(json).expect("old metadata reads");
    assert_eq!(info.tls_ports, crate::metadata::TlsPorts::default());
    assert_eq!(info, node(3));
}

/// Proves a node joining a cluster whose nodes all have node encryption on gets it too when its TLS ports are on
/// (so the cluster's encryption level keeps applying), and does not without them or in a cluster not encrypted.
#[test]
fn add_node_takes_node_encryption_from_a_fully_encrypted_cluster() {
    let tls = TlsPorts { kv: 11207, mgmt: 18091, query: 18093 };
    let mut meta = ClusterMetadata::default();
    meta.apply(&MetaCommand::AddNode(NodeInfo { tls_ports: tls, ..node(1) })).expect("first node");
    meta.apply(&MetaCommand::AddNode(NodeInfo { tls_ports: tls, ..node(2) })).expect("joins");
    assert!(!meta.nodes[&2].node_encryption, "the cluster does not encrypt");
    for id in [1, 2] {
        let info = NodeInfo { node_encryption: true, ..meta.nodes[&id].clone() };
        meta.apply(&MetaCommand::UpdateNode(info)).expect("setupNetConfig");
    }
    meta.apply(&MetaCommand::AddNode(NodeInfo { tls_ports: tls, ..node(3) })).expect("joins");
    assert!(meta.nodes[&3].node_encryption, "joins an encrypted cluster encrypted");
    meta.apply(&MetaCommand::AddNode(node(4))).expect("joins");
    assert!(!meta.nodes[&4].node_encryption, "no TLS ports, no node encryption");
}

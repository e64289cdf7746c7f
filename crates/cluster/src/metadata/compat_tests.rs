//! Metadata versions: the forms chosen for each version, the JSON read from and by the previous settee, and the
//! log commands this build cannot read.

use serde::Deserialize;

use super::*;
use crate::metadata::tests::node;
use crate::metadata::{Membership, Recovery};
use crate::transport::TypeConfig;

/// The metadata, one node's entry and one Raft log entry as the settee before `meta_version` wrote them (main at
/// ab2fc08, 2026-11-26): three nodes and bucket "b" with one replica, node 3 failed over and marked for delta
/// recovery, node 4 (TLS ports, a CA) added into server group "rack2"; the log entry is a `SetBuilding`.
const METADATA_V1: &str = include_str!("fixtures/metadata-v1.json");
const NODE_V1: &str = include_str!("fixtures/node-v1.json");
const LOG_ENTRY_V1: &str = include_str!("fixtures/log-entry-v1.json");

fn with_versions(versions: &[u32]) -> ClusterMetadata {
    let mut meta = ClusterMetadata::default();
    for (i, version) in versions.iter().enumerate() {
        let id = i as NodeId + 1;
        meta.nodes.insert(id, NodeInfo { meta_version: *version, ..node(id) });
    }
    meta
}

/// The cluster's version is the lowest of its members' (failed-over ones included), and the forms follow it: the
/// older forms below 2, the one-change forms from 2; an empty cluster has nobody to wait for.
#[test]
fn the_lowest_member_version_chooses_the_command_forms() {
    assert_eq!(with_versions(&[]).meta_version(), META_VERSION);
    assert_eq!(with_versions(&[2, 2, 2]).meta_version(), 2);
    let mut mixed = with_versions(&[2, 1, 2]);
    assert_eq!(mixed.meta_version(), 1);
    mixed.nodes.get_mut(&2).expect("node 2").membership = Membership::InactiveFailed;
    assert_eq!(mixed.meta_version(), 1, "a failed-over member still receives the log");

    let old = CommandForms::for_version(1);
    assert_eq!(old.graceful_failover, FailoverForm::Separate);
    assert_eq!(old.add_in_group, AddInGroupForm::AddThenMove);
    let new = CommandForms::for_version(2);
    assert_eq!(new.graceful_failover, FailoverForm::Draining);
    assert_eq!(new.add_in_group, AddInGroupForm::OneChange);
    assert_eq!(CommandForms::of(&mixed), old);
    assert_eq!(CommandForms::for_version(META_VERSION + 1), new, "a newer cluster keeps the newest forms");
}

/// Registering a node into a group: one `AddNodeInGroup` from version 2; before, `AddNode` then
/// `MoveToServerGroup`, which leaves the node in the same group as the one command does. Without a group both
/// are a plain `AddNode`.
#[test]
fn registering_into_a_group_uses_add_then_move_below_version_2() {
    let group = "0123456789abcdef0123456789abcdef".to_owned();
    let joiner = NodeInfo { membership: Membership::InactiveAdded, ..node(4) };
    let old = CommandForms::for_version(1).register(joiner.clone(), Some(group.clone()));
    assert_eq!(
        old,
        vec![MetaCommand::AddNode(joiner.clone()), MetaCommand::MoveToServerGroup { node: 4, group: group.clone() }]
    );
    let new = CommandForms::for_version(2).register(joiner.clone(), Some(group.clone()));
    assert_eq!(new, vec![MetaCommand::AddNodeInGroup { node: joiner.clone(), group: group.clone() }]);
    assert_eq!(CommandForms::for_version(1).register(joiner.clone(), None), vec![MetaCommand::AddNode(joiner)]);
    assert!(old.iter().all(|c| c.since() == 1), "the older form is readable by version 1");

    let mut base = with_versions(&[1, 1, 1]);
    base.apply(&MetaCommand::CreateServerGroup { uuid: group.clone(), name: "rack2".into() }).expect("group");
    let (mut one, mut two) = (base.clone(), base);
    for cmd in &new {
        one.apply(cmd).expect("one change");
    }
    for cmd in &old {
        two.apply(cmd).expect("two changes");
    }
    assert_eq!(one.nodes, two.nodes);
    assert_eq!(one.server_groups().of(4).map(|g| g.uuid.clone()), Some(group.clone()));
    assert_eq!(two.server_groups().of(4).map(|g| g.uuid.clone()), Some(group));
}

/// The commands of version 2 are exactly the three that version 1 cannot read; every other is version 1.
#[test]
fn only_the_drain_and_group_add_commands_need_version_2() {
    let v2 = [
        MetaCommand::FailoverDraining { node: 1 },
        MetaCommand::EndDrain { node: 1 },
        MetaCommand::AddNodeInGroup { node: node(1), group: "g".into() },
    ];
    assert!(v2.iter().all(|c| c.since() == 2));
    assert_eq!(MetaCommand::Failover { nodes: vec![1] }.since(), 1);
    assert_eq!(MetaCommand::AddNode(node(1)).since(), 1);
    assert_eq!(MetaCommand::FailoverDraining { node: 1 }.name(), "FailoverDraining");
    assert_eq!(MetaCommand::DeleteBucket("b".into()).name(), "DeleteBucket");
}

/// What the previous settee wrote reads here: its metadata snapshot (every node at the unmarked version 1, so the
/// cluster's version is 1) and a node entry; and it writes back the same (nothing of it is lost on the way).
#[test]
fn metadata_written_by_the_previous_version_reads_at_version_1() {
    let meta: ClusterMetadata = serde_json::from_str(METADATA_V1).expect("the previous snapshot reads");
    assert_eq!(meta.nodes.len(), 4);
    assert!(meta.nodes.values().all(|n| n.meta_version == META_VERSION_UNMARKED));
    assert_eq!(meta.meta_version(), 1);
    assert_eq!(meta.recovery.get(&3), Some(&Recovery::Delta));
    assert_eq!(meta.nodes[&3].membership, Membership::InactiveFailed);
    assert_eq!(meta.server_groups().of(4).map(|g| g.name.as_str()), Some("rack2"));
    assert_eq!(meta.nodes[&4].tls_ports.mgmt, 18091);

    let info: NodeInfo = serde_json::from_str(NODE_V1).expect("the previous node entry reads");
    assert_eq!(info.meta_version, 1);
    assert_eq!(info, meta.nodes[&4]);

    let again: serde_json::Value = serde_json::to_value(&meta).expect("serialise");
    let before: serde_json::Value = serde_json::from_str(METADATA_V1).expect("json");
    let mut again_without = again.clone();
    for n in again_without["nodes"].as_object_mut().expect("nodes").values_mut() {
        n.as_object_mut().expect("node").remove("meta_version");
    }
    assert_eq!(again_without, before, "only the new field was added");
}

/// The node entry as the previous settee's struct reads it: the same fields, and `meta_version` ignored (serde's
/// default: unknown fields are skipped; the previous `NodeInfo` had no `deny_unknown_fields`).
#[test]
fn this_versions_node_entry_reads_in_the_previous_shape() {
    #[derive(Deserialize, PartialEq, Debug)]
    struct NodeInfoV1 {
        id: NodeId,
        hostname: String,
        kv_port: u16,
        mgmt_port: u16,
        query_port: u16,
        membership: Membership,
        services: Vec<String>,
        #[serde(default)]
        tls_ports: super::super::TlsPorts,
        #[serde(default)]
        node_encryption: bool,
        #[serde(default)]
        tls_ca: String,
    }
    let now = NodeInfo { meta_version: META_VERSION, tls_ca: "CA".into(), ..node(7) };
    let json = serde_json::to_string(&now).expect("serialise");
    assert!(json.contains("\"meta_version\":2"), "{json}");
    let old: NodeInfoV1 = serde_json::from_str(&json).expect("the previous shape reads it");
    assert_eq!((old.id, old.mgmt_port, old.tls_ca.as_str()), (7, now.mgmt_port, "CA"));
    assert_eq!(old.membership, now.membership);
}

/// A log entry of the previous settee reads as the command it holds (integer keys included), and writes back as it
/// was.
#[test]
fn a_log_entry_of_the_previous_version_reads_as_its_command() {
    let entry: openraft::Entry<TypeConfig> = serde_json::from_str(LOG_ENTRY_V1).expect("the entry reads");
    let openraft::EntryPayload::Normal(LogCommand::Known(MetaCommand::SetBuilding { bucket, building })) =
        &entry.payload
    else {
        panic!("not the SetBuilding it holds: {:?}", entry.payload);
    };
    assert_eq!((bucket.as_str(), building.get(&7)), ("b", Some(&vec![2])));
    let again = serde_json::to_string(&entry).expect("serialise");
    assert_eq!(again, LOG_ENTRY_V1.trim());
}

/// A command this build does not know (a newer settee's) reads as `Unreadable` with its name, instead of failing
/// the whole append, and is written back byte for byte, so a log holding it stays intact.
#[test]
fn an_unknown_command_reads_as_unreadable_and_writes_back_unchanged() {
    let json = r#"{"log_id":{"leader_id":{"term":5,"node_id":2},"index":9},"payload":{"Normal":{"DrainHarder":{"node":3,"secs":9}}}}"#;
    let entry: openraft::Entry<TypeConfig> = serde_json::from_str(json).expect("reads");
    let openraft::EntryPayload::Normal(LogCommand::Unreadable { name, reason, .. }) = &entry.payload else {
        panic!("an unknown command read as {:?}", entry.payload);
    };
    assert_eq!(name, "DrainHarder");
    assert!(reason.contains("unknown variant"), "{reason}");
    assert_eq!(serde_json::to_string(&entry).expect("serialise"), json);

    let bad_payload: LogCommand = serde_json::from_str(r#"{"Failover":{"nodes":"all"}}"#).expect("reads");
    assert!(matches!(&bad_payload, LogCommand::Unreadable { name, .. } if name == "Failover"), "{bad_payload:?}");
    assert!(serde_json::from_str::<LogCommand>("{").is_err(), "broken JSON is still an error");
}

/// A node records its version again when its own entry is wrong in its view (an older leader dropped the field),
/// or when another member's version rose (that member's view may lack ours); otherwise never, and not before it is
/// a member.
#[test]
fn a_node_records_its_version_again_when_a_view_may_lack_it() {
    let before = with_versions(&[2, 1, 1]);
    assert_eq!(announce_needed(&before, &before, 1, 2), None);
    let mut upgraded = before.clone();
    upgraded.nodes.get_mut(&2).expect("node 2").meta_version = 2;
    assert_eq!(announce_needed(&before, &upgraded, 1, 2), Some(Announce::MemberUpgraded));
    assert_eq!(announce_needed(&upgraded, &upgraded, 1, 2), None, "once per rise");
    let stale = with_versions(&[1, 2, 2]);
    assert_eq!(announce_needed(&stale, &stale, 1, 2), Some(Announce::OwnEntryStale));
    assert_eq!(announce_needed(&stale, &stale, 1, 1), None, "a node told to read version 1 says 1");
    assert_eq!(announce_needed(&stale, &stale, 9, 2), None, "not a member yet");
    let mut own_rose = stale.clone();
    own_rose.nodes.get_mut(&1).expect("node 1").meta_version = 2;
    assert_eq!(announce_needed(&stale, &own_rose, 1, 2), None, "its own rise is no reason");
}

//! The server-group commands: the change each makes, the refusals it gives (and that a refusal changes nothing),
//! and the invariant that every node is in exactly one group.

use std::collections::{BTreeMap, BTreeSet};

use super::tests::{cluster, node, refused};
use super::*;

fn members(of: &[(&str, &[NodeId])]) -> BTreeMap<String, BTreeSet<NodeId>> {
    of.iter().map(|(uuid, nodes)| (uuid.to_string(), nodes.iter().copied().collect())).collect()
}

fn names(meta: &ClusterMetadata) -> Vec<(String, Vec<NodeId>)> {
    meta.server_groups().groups.iter().map(|g| (g.name.clone(), g.nodes.iter().copied().collect())).collect()
}

fn create(meta: &mut ClusterMetadata, uuid: &str, name: &str) {
    let cmd = MetaCommand::CreateServerGroup { uuid: uuid.into(), name: name.into() };
    meta.apply(&cmd).expect("create group");
}

/// Every node starts in "Group 1" (uuid "0"), and metadata written before groups reads the same way.
#[test]
fn nodes_start_in_group_1_when_no_group_was_made() {
    let meta = cluster();
    assert_eq!(names(&meta), vec![("Group 1".to_string(), vec![1, 2, 3])]);
    assert_eq!(meta.server_groups().groups[0].uuid, DEFAULT_GROUP_UUID);
    let mut old = meta.clone();
    old.server_groups_stored = ServerGroups::default();
    assert_eq!(old.server_groups().groups, meta.server_groups().groups);
    let json = serde_json::to_value(&meta).expect("serialize");
    let mut without = json.clone();
    without.as_object_mut().expect("object").remove("server_groups");
    let read: ClusterMetadata = serde_json::from_value(without).expect("metadata from before groups");
    assert_eq!(read.server_groups().groups, meta.server_groups().groups);
}

/// Creating, renaming and deleting a group, with ns_server's refusals: a taken name, an unknown group, a group
/// that still has nodes; names are trimmed and at most 64 bytes.
#[test]
fn group_lifecycle_refuses_taken_names_and_non_empty_deletes() {
    let mut meta = cluster();
    create(&mut meta, "u2", "  Rack 2 ");
    assert_eq!(names(&meta)[1], ("Rack 2".to_string(), vec![]));
    let taken = MetaCommand::CreateServerGroup { uuid: "u3".into(), name: "Rack 2".into() };
    assert_eq!(refused(&mut meta, taken), MetaError::ServerGroupExists("Rack 2".into()));
    let same_uuid = MetaCommand::CreateServerGroup { uuid: "u2".into(), name: "Other".into() };
    assert!(matches!(refused(&mut meta, same_uuid), MetaError::InvalidServerGroup(_)));
    let long = MetaCommand::CreateServerGroup { uuid: "u4".into(), name: "x".repeat(65) };
    assert!(matches!(refused(&mut meta, long), MetaError::InvalidServerGroup(_)));
    let blank = MetaCommand::RenameServerGroup { uuid: "u2".into(), name: "  ".into() };
    assert!(matches!(refused(&mut meta, blank), MetaError::InvalidServerGroup(_)));
    meta.apply(&MetaCommand::RenameServerGroup { uuid: "u2".into(), name: "Rack B".into() }).expect("rename");
    let clash = MetaCommand::RenameServerGroup { uuid: "u2".into(), name: "Group 1".into() };
    assert_eq!(refused(&mut meta, clash), MetaError::ServerGroupExists("Group 1".into()));
    let unknown = MetaCommand::RenameServerGroup { uuid: "nope".into(), name: "X".into() };
    assert_eq!(refused(&mut meta, unknown), MetaError::UnknownServerGroup("nope".into()));
    let busy = MetaCommand::DeleteServerGroup { uuid: "0".into() };
    assert_eq!(refused(&mut meta, busy), MetaError::ServerGroupNotEmpty("0".into()));
    meta.apply(&MetaCommand::DeleteServerGroup { uuid: "u2".into() }).expect("delete empty");
    assert_eq!(names(&meta), vec![("Group 1".to_string(), vec![1, 2, 3])]);
}

/// Moving nodes replaces every group's members at once, at the current revision only; a listing that misses a
/// group or a node, names one twice, or names an unknown one is refused.
#[test]
fn moving_nodes_needs_the_current_revision_and_a_full_listing() {
    let mut meta = cluster();
    create(&mut meta, "u2", "Rack 2");
    let rev = meta.server_groups().rev;
    let moved = members(&[("0", &[1, 2]), ("u2", &[3])]);
    meta.apply(&MetaCommand::SetServerGroupMembers { rev, members: moved.clone() }).expect("move");
    assert_eq!(names(&meta), vec![("Group 1".to_string(), vec![1, 2]), ("Rack 2".to_string(), vec![3])]);
    let stale = MetaCommand::SetServerGroupMembers { rev, members: moved };
    assert_eq!(refused(&mut meta, stale), MetaError::StaleServerGroups { current: rev + 1, proposed: rev });
    let rev = meta.server_groups().rev;
    for bad in [
        members(&[("0", &[1, 2, 3])]),
        members(&[("0", &[1, 2]), ("u2", &[2, 3])]),
        members(&[("0", &[1]), ("u2", &[3])]),
        members(&[("0", &[1, 2]), ("u2", &[3, 9])]),
        members(&[("0", &[1, 2]), ("u2", &[3]), ("u9", &[])]),
    ] {
        let cmd = MetaCommand::SetServerGroupMembers { rev, members: bad };
        assert!(matches!(refused(&mut meta, cmd), MetaError::InvalidServerGroupMembers(_)));
    }
}

/// A node added joins "Group 1" (or the first group once "Group 1" is gone) and can be moved into another group
/// on its own; a removed node leaves its group.
#[test]
fn added_nodes_join_the_default_group_and_move_into_theirs() {
    let mut meta = cluster();
    create(&mut meta, "u2", "Rack 2");
    meta.apply(&MetaCommand::AddNode(node(4))).expect("add");
    assert!(meta.server_groups().groups[0].nodes.contains(&4));
    meta.apply(&MetaCommand::MoveToServerGroup { node: 4, group: "u2".into() }).expect("move one");
    assert_eq!(meta.server_groups().of(4).map(|g| g.uuid.clone()), Some("u2".into()));
    let unknown = MetaCommand::MoveToServerGroup { node: 4, group: "u9".into() };
    assert_eq!(refused(&mut meta, unknown), MetaError::UnknownServerGroup("u9".into()));
    let nobody = MetaCommand::MoveToServerGroup { node: 9, group: "u2".into() };
    assert_eq!(refused(&mut meta, nobody), MetaError::UnknownNode(9));
    meta.apply(&MetaCommand::RemoveNode(4)).expect("remove: node 4 holds no vBuckets");
    assert!(meta.server_groups().of(4).is_none());
    let rev = meta.server_groups().rev;
    let all_in_rack_2 = members(&[("0", &[]), ("u2", &[1, 2, 3])]);
    meta.apply(&MetaCommand::SetServerGroupMembers { rev, members: all_in_rack_2 }).expect("move all");
    meta.apply(&MetaCommand::DeleteServerGroup { uuid: "0".into() }).expect("delete Group 1");
    meta.apply(&MetaCommand::AddNode(node(5))).expect("add");
    assert_eq!(names(&meta), vec![("Rack 2".to_string(), vec![1, 2, 3, 5])]);
}

/// A bucket created over two groups places every replica in the group its active is not in, and a failover
/// hands the planners the same groups.
#[test]
fn bucket_created_over_two_groups_places_replicas_across() {
    let mut meta = cluster();
    meta.apply(&MetaCommand::AddNode(node(4))).expect("add");
    meta.apply(&MetaCommand::SetMembership { node: 4, membership: Membership::Active }).expect("activate");
    create(&mut meta, "u2", "Rack 2");
    let rev = meta.server_groups().rev;
    let racks = members(&[("0", &[1, 2]), ("u2", &[3, 4])]);
    meta.apply(&MetaCommand::SetServerGroupMembers { rev, members: racks }).expect("move");
    let mut spec = meta.buckets["b"].spec.clone();
    spec.name = "racked".into();
    spec.uuid = "uuid-racked".into();
    meta.apply(&MetaCommand::CreateBucket(spec)).expect("create");
    let groups = meta.node_groups();
    assert!(meta.buckets["racked"].map.chains.iter().all(|c| groups.spread_of(c) == 2));
    assert!(meta.buckets["b"].map.chains.iter().any(|c| groups.spread_of(c) == 1), "old maps wait for a rebalance");
}

/// A node added into a group is in that group from the one change that adds it, never in the default group; an
/// unknown group refuses the whole command (the node is not added).
#[test]
fn a_node_added_into_a_group_is_never_in_another() {
    let mut meta = cluster();
    create(&mut meta, "u2", "Rack B");
    let (rev, groups_rev) = (meta.rev, meta.server_groups().rev);
    meta.apply(&MetaCommand::AddNodeInGroup { node: node(4), group: "u2".into() }).expect("add into group");
    assert_eq!((meta.rev, meta.server_groups().rev), (rev + 1, groups_rev + 1), "one change of the groups");
    assert_eq!(names(&meta), vec![("Group 1".to_string(), vec![1, 2, 3]), ("Rack B".to_string(), vec![4])]);
    assert_eq!(meta.nodes[&4].membership, Membership::InactiveAdded);
    let unknown = MetaCommand::AddNodeInGroup { node: node(5), group: "nope".into() };
    assert_eq!(refused(&mut meta, unknown), MetaError::UnknownServerGroup("nope".into()));
    let again = MetaCommand::AddNodeInGroup { node: node(4), group: "u2".into() };
    assert_eq!(refused(&mut meta, again), MetaError::NodeExists(4));
}

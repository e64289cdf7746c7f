//! Server groups (Couchbase's rack awareness): named sets of nodes that partition the cluster. The planners place
//! a vBucket's replicas in groups other than its active's, so losing a whole group (a rack, a zone) loses no data
//! that has a replica.
//!
//! Invariant, kept by every command: each node is in exactly one group. A cluster starts with ns_server's default
//! group, "Group 1" (uuid "0"); a node added without a group joins it (or the first group if it was deleted).
//! Metadata written before groups existed has none stored and reads as every node in "Group 1".

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{ClusterMetadata, MetaError};
use crate::vbmap::{NodeGroups, NodeId};

/// ns_server's default group.
pub const DEFAULT_GROUP_UUID: &str = "0";
pub const DEFAULT_GROUP_NAME: &str = "Group 1";
/// ns_server's limit on a group name.
pub const GROUP_NAME_BYTES_MAX: usize = 64;

/// One server group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerGroup {
    pub uuid: String,
    pub name: String,
    pub nodes: BTreeSet<NodeId>,
}

/// The cluster's server groups, in uuid order (as ns_server sorts them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerGroups {
    /// Grows with every change to the groups or their members: `PUT /pools/default/serverGroups?rev=` must name
    /// the current one, so a client moving nodes from a stale listing is refused.
    pub rev: u64,
    pub groups: Vec<ServerGroup>,
}

impl ServerGroups {
    pub fn find(&self, uuid: &str) -> Option<&ServerGroup> {
        self.groups.iter().find(|g| g.uuid == uuid)
    }

    /// The group `node` is in.
    pub fn of(&self, node: NodeId) -> Option<&ServerGroup> {
        self.groups.iter().find(|g| g.nodes.contains(&node))
    }

    /// Where a node added without a group goes: "Group 1" while it exists, else the first group.
    fn default_index(&self) -> Option<usize> {
        self.groups.iter().position(|g| g.uuid == DEFAULT_GROUP_UUID).or(if self.groups.is_empty() {
            None
        } else {
            Some(0)
        })
    }
}

/// A group name as ns_server takes it: trimmed, not empty, at most 64 bytes; the error is ns_server's text for
/// the `name` field.
pub fn check_group_name(name: &str) -> Result<String, &'static str> {
    if name.len() > GROUP_NAME_BYTES_MAX {
        return Err("cannot be longer than 64 bytes");
    }
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err("cannot be empty");
    }
    Ok(trimmed.to_owned())
}

impl ClusterMetadata {
    /// The server groups with the invariant applied: metadata from before groups reads as one "Group 1" of every
    /// node, a node missing from every group counts in the default one, and a group member that is no longer a
    /// node is left out.
    pub fn server_groups(&self) -> ServerGroups {
        let mut view = self.server_groups_stored.clone();
        if view.groups.is_empty() {
            view.groups.push(ServerGroup {
                uuid: DEFAULT_GROUP_UUID.into(),
                name: DEFAULT_GROUP_NAME.into(),
                nodes: BTreeSet::new(),
            });
        }
        let mut placed = BTreeSet::new();
        for group in &mut view.groups {
            group.nodes.retain(|n| self.nodes.contains_key(n) && placed.insert(*n));
        }
        if let Some(default) = view.default_index() {
            let unplaced = self.nodes.keys().filter(|n| !placed.contains(n));
            view.groups[default].nodes.extend(unplaced);
        }
        view
    }

    /// Each node's group as the planners take it (groups numbered in uuid order).
    pub fn node_groups(&self) -> NodeGroups {
        let view = self.server_groups();
        let numbered = (0u32..).zip(&view.groups);
        NodeGroups::from_pairs(numbered.flat_map(|(i, g)| g.nodes.iter().map(move |n| (*n, i))))
    }

    /// Stores `groups` as the new server groups, one revision later.
    fn store_server_groups(&mut self, mut groups: ServerGroups) {
        groups.rev = self.server_groups_stored.rev + 1;
        groups.groups.sort_by(|a, b| a.uuid.cmp(&b.uuid));
        self.server_groups_stored = groups;
    }

    /// Puts a newly added node in the group whose uuid is `group` (checked to exist), else the default group
    /// (AddNode, AddNodeInGroup): one new revision of the groups.
    pub(super) fn place_new_node(&mut self, node: NodeId, group: Option<&str>) {
        let mut view = self.server_groups();
        for g in &mut view.groups {
            g.nodes.remove(&node);
        }
        let at = match group {
            Some(uuid) => view.groups.iter().position(|g| g.uuid == uuid),
            None => view.default_index(),
        };
        if let Some(at) = at {
            view.groups[at].nodes.insert(node);
        }
        self.store_server_groups(view);
    }

    /// Takes a removed node out of its group (RemoveNode).
    pub(super) fn unplace_node(&mut self, node: NodeId) {
        let view = self.server_groups();
        self.store_server_groups(view);
        debug_assert!(self.server_groups_stored.of(node).is_none(), "a removed node left in a group");
    }

    pub(super) fn create_server_group(&mut self, uuid: &str, name: &str) -> Result<(), MetaError> {
        let name = check_group_name(name).map_err(|why| MetaError::InvalidServerGroup(format!("name {why}")))?;
        let mut view = self.server_groups();
        if uuid.is_empty() || view.find(uuid).is_some() {
            return Err(MetaError::InvalidServerGroup(format!("the uuid {uuid:?} is empty or taken")));
        }
        if view.groups.iter().any(|g| g.name == name) {
            return Err(MetaError::ServerGroupExists(name));
        }
        view.groups.push(ServerGroup { uuid: uuid.into(), name, nodes: BTreeSet::new() });
        self.store_server_groups(view);
        Ok(())
    }

    pub(super) fn rename_server_group(&mut self, uuid: &str, name: &str) -> Result<(), MetaError> {
        let name = check_group_name(name).map_err(|why| MetaError::InvalidServerGroup(format!("name {why}")))?;
        let mut view = self.server_groups();
        if view.find(uuid).is_none() {
            return Err(MetaError::UnknownServerGroup(uuid.into()));
        }
        if view.groups.iter().any(|g| g.name == name) {
            return Err(MetaError::ServerGroupExists(name));
        }
        if let Some(group) = view.groups.iter_mut().find(|g| g.uuid == uuid) {
            group.name = name;
        }
        self.store_server_groups(view);
        Ok(())
    }

    pub(super) fn delete_server_group(&mut self, uuid: &str) -> Result<(), MetaError> {
        let mut view = self.server_groups();
        let group = view.find(uuid).ok_or_else(|| MetaError::UnknownServerGroup(uuid.into()))?;
        if !group.nodes.is_empty() {
            return Err(MetaError::ServerGroupNotEmpty(uuid.into()));
        }
        view.groups.retain(|g| g.uuid != uuid);
        self.store_server_groups(view);
        Ok(())
    }

    /// Replaces every group's members at once (`PUT /pools/default/serverGroups`): `members` must name every
    /// group and place every node exactly once, and `rev` must be the current revision.
    pub(super) fn set_server_group_members(
        &mut self,
        rev: u64,
        members: &BTreeMap<String, BTreeSet<NodeId>>,
    ) -> Result<(), MetaError> {
        let mut view = self.server_groups();
        if rev != view.rev {
            return Err(MetaError::StaleServerGroups { current: view.rev, proposed: rev });
        }
        let bad = |why: String| Err(MetaError::InvalidServerGroupMembers(why));
        let listed: BTreeSet<&str> = members.keys().map(String::as_str).collect();
        let existing: BTreeSet<&str> = view.groups.iter().map(|g| g.uuid.as_str()).collect();
        if listed != existing {
            return bad("every group, and no other, must be listed".into());
        }
        let mut placed = BTreeSet::new();
        for node in members.values().flatten() {
            if !self.nodes.contains_key(node) {
                return bad(format!("unknown node {node}"));
            }
            if !placed.insert(*node) {
                return bad(format!("node {node} is listed in two groups"));
            }
        }
        if placed.len() != self.nodes.len() {
            return bad("every node must be listed in a group".into());
        }
        for group in &mut view.groups {
            group.nodes = members.get(&group.uuid).cloned().unwrap_or_default();
        }
        self.store_server_groups(view);
        Ok(())
    }

    /// Moves one node into group `uuid` (a node added to a group: it joins the default group, then moves).
    pub(super) fn move_to_server_group(&mut self, node: NodeId, uuid: &str) -> Result<(), MetaError> {
        if !self.nodes.contains_key(&node) {
            return Err(MetaError::UnknownNode(node));
        }
        let mut view = self.server_groups();
        if view.find(uuid).is_none() {
            return Err(MetaError::UnknownServerGroup(uuid.into()));
        }
        for group in &mut view.groups {
            if group.uuid == uuid {
                group.nodes.insert(node);
            } else {
                group.nodes.remove(&node);
            }
        }
        self.store_server_groups(view);
        Ok(())
    }
}

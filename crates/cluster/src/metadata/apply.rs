//! `ClusterMetadata::apply`: validation first, then the change, so a refused command leaves the state untouched.

use std::collections::{BTreeMap, BTreeSet};

use settee_engine::Manifest;
use settee_types::limits::NUM_VBUCKETS;

use super::{
    AutoFailoverSettings, BucketMeta, BucketSpec, ClusterMetadata, Membership, MetaCommand, MetaError, NodeInfo,
    RebalanceSettings, Recovery,
};
use crate::vbmap::{self, NodeId, VbMap, REPLICAS_MAX};

/// Couchbase's limit on bucket name length.
const BUCKET_NAME_BYTES_MAX: usize = 100;

impl ClusterMetadata {
    /// Applies `cmd`, or refuses it without changing anything. Every applied command bumps `rev`.
    pub fn apply(&mut self, cmd: &MetaCommand) -> Result<(), MetaError> {
        match cmd {
            MetaCommand::AddNode(node) => self.add_node(node, None)?,
            MetaCommand::AddNodeInGroup { node, group } => self.add_node(node, Some(group))?,
            MetaCommand::UpdateNode(node) => self.update_node(node)?,
            MetaCommand::SetMembership { node, membership } => self.set_membership(*node, *membership)?,
            MetaCommand::RemoveNode(node) => self.remove_node(*node)?,
            MetaCommand::CreateServerGroup { uuid, name } => self.create_server_group(uuid, name)?,
            MetaCommand::RenameServerGroup { uuid, name } => self.rename_server_group(uuid, name)?,
            MetaCommand::DeleteServerGroup { uuid } => self.delete_server_group(uuid)?,
            MetaCommand::SetServerGroupMembers { rev, members } => self.set_server_group_members(*rev, members)?,
            MetaCommand::MoveToServerGroup { node, group } => self.move_to_server_group(*node, group)?,
            MetaCommand::CreateBucket(spec) => self.create_bucket(spec)?,
            MetaCommand::UpdateBucket(spec) => self.update_bucket(spec)?,
            MetaCommand::DeleteBucket(name) => {
                self.buckets.remove(name).ok_or_else(|| MetaError::UnknownBucket(name.clone()))?;
            }
            MetaCommand::SetManifest { bucket, manifest } => self.set_manifest(bucket, manifest)?,
            MetaCommand::SetBuilding { bucket, building } => self.set_building(bucket, building)?,
            MetaCommand::SetMap { bucket, map } => self.set_map(bucket, map)?,
            MetaCommand::Failover { nodes } => self.failover(nodes)?,
            MetaCommand::FailoverDraining { node } => {
                self.failover(&[*node])?;
                self.repair_replicas();
                self.draining.insert(*node);
            }
            MetaCommand::EndDrain { node } => {
                if !self.nodes.contains_key(node) {
                    return Err(MetaError::UnknownNode(*node));
                }
                self.draining.remove(node);
            }
            MetaCommand::Reprovision { bucket, node } => self.reprovision(bucket, *node)?,
            MetaCommand::PromoteReplicas { bucket, node, promote } => self.promote_replicas(bucket, *node, promote)?,
            MetaCommand::SetUsers(users) => self.users = users.clone(),
            MetaCommand::SetAdmin(admin) => self.admin = admin.clone(),
            MetaCommand::SetGroups(groups) => self.groups = groups.clone(),
            MetaCommand::SetAudit(audit) => self.audit = audit.clone(),
            MetaCommand::SetSecurity(security) => self.security = security.clone(),
            MetaCommand::SetSettings { key, value } => {
                if !self.settings.is_object() {
                    self.settings = serde_json::Value::Object(serde_json::Map::new());
                }
                if let Some(sections) = self.settings.as_object_mut() {
                    sections.insert(key.clone(), value.clone());
                }
            }
            MetaCommand::SetXdcr(xdcr) => self.xdcr = xdcr.clone(),
            MetaCommand::SaveXdcrCheckpoints { replication, vbuckets } => {
                self.xdcr_checkpoints.entry(replication.clone()).or_default().extend(vbuckets);
            }
            MetaCommand::ForgetXdcrCheckpoints { replication } => {
                self.xdcr_checkpoints.remove(replication);
            }
            MetaCommand::SetAutoFailover(settings) => {
                check_auto_failover(settings)?;
                self.auto_failover = settings.clone();
            }
            MetaCommand::SetRecovery { node, recovery } => self.set_recovery(*node, *recovery)?,
            MetaCommand::SetRebalanceSettings(settings) => {
                let max = RebalanceSettings::MOVES_PER_NODE_MAX;
                if !(1..=max).contains(&settings.moves_per_node) {
                    return Err(MetaError::InvalidRebalanceSettings(format!(
                        "rebalanceMovesPerNode must be between 1 and {max}"
                    )));
                }
                self.rebalance = settings.clone();
            }
            MetaCommand::CreateIndex { bucket, index } => self.create_index(bucket, index)?,
            MetaCommand::DropIndex { bucket, id } => self.drop_index(bucket, id)?,
            MetaCommand::BuildIndexes { bucket, ids } => self.build_indexes(bucket, ids)?,
        }
        self.rev += 1;
        Ok(())
    }

    /// Adds `node` into server group `group` (a uuid), or the default group.
    fn add_node(&mut self, node: &NodeInfo, group: Option<&str>) -> Result<(), MetaError> {
        if let Some(group) = group.filter(|g| self.server_groups().find(g).is_none()) {
            return Err(MetaError::UnknownServerGroup(group.to_owned()));
        }
        if self.nodes.contains_key(&node.id) {
            return Err(MetaError::NodeExists(node.id));
        }
        let addr = node.mgmt_addr();
        if self.nodes.values().any(|n| n.mgmt_addr() == addr) {
            return Err(MetaError::AddressInUse(addr));
        }
        let membership = if self.nodes.is_empty() { Membership::Active } else { Membership::InactiveAdded };
        // A node joining a cluster whose nodes all encrypt node-to-node traffic takes part too (as ns_server
        // configures a joining node's encryption to match), when its TLS ports are on; otherwise the cluster's
        // level stops applying until an operator turns it on for the newcomer.
        let tls_on = node.tls_ports.kv != 0 && node.tls_ports.mgmt != 0;
        let joins_encrypted = !self.nodes.is_empty() && self.nodes.values().all(|n| n.node_encryption) && tls_on;
        let node_encryption = node.node_encryption || joins_encrypted;
        self.nodes.insert(node.id, NodeInfo { membership, node_encryption, ..node.clone() });
        self.place_new_node(node.id, group);
        Ok(())
    }

    fn update_node(&mut self, node: &NodeInfo) -> Result<(), MetaError> {
        let addr = node.mgmt_addr();
        if self.nodes.values().any(|n| n.id != node.id && n.mgmt_addr() == addr) {
            return Err(MetaError::AddressInUse(addr));
        }
        let current = self.nodes.get_mut(&node.id).ok_or(MetaError::UnknownNode(node.id))?;
        *current = NodeInfo { membership: current.membership, ..node.clone() };
        Ok(())
    }

    fn set_membership(&mut self, id: NodeId, membership: Membership) -> Result<(), MetaError> {
        if membership == Membership::InactiveFailed {
            return Err(MetaError::MembershipNeedsFailover(id));
        }
        let node = self.nodes.get_mut(&id).ok_or(MetaError::UnknownNode(id))?;
        if node.membership == Membership::InactiveFailed && !self.recovery.contains_key(&id) {
            return Err(MetaError::RecoveryNotSet(id));
        }
        node.membership = membership;
        // A recovered node is listed for being Active again: its drain, if it had not ended, ends here.
        self.draining.remove(&id);
        Ok(())
    }

    fn remove_node(&mut self, id: NodeId) -> Result<(), MetaError> {
        if !self.nodes.contains_key(&id) {
            return Err(MetaError::UnknownNode(id));
        }
        if let Some(bucket) = self.buckets.values().find(|b| b.map.contains_node(id)) {
            return Err(MetaError::NodeInUse { node: id, bucket: bucket.spec.name.clone() });
        }
        self.nodes.remove(&id);
        self.recovery.remove(&id);
        self.draining.remove(&id);
        self.unplace_node(id);
        Ok(())
    }

    fn set_recovery(&mut self, id: NodeId, recovery: Option<Recovery>) -> Result<(), MetaError> {
        let node = self.nodes.get(&id).ok_or(MetaError::UnknownNode(id))?;
        match recovery {
            None => {
                self.recovery.remove(&id);
            }
            Some(r) => {
                if node.membership != Membership::InactiveFailed && !self.recovery.contains_key(&id) {
                    return Err(MetaError::NotFailedOver(id));
                }
                self.recovery.insert(id, r);
            }
        }
        Ok(())
    }

    fn create_bucket(&mut self, spec: &BucketSpec) -> Result<(), MetaError> {
        check_spec(spec)?;
        if self.buckets.contains_key(&spec.name) {
            return Err(MetaError::BucketExists(spec.name.clone()));
        }
        let active = self.active_nodes();
        if active.is_empty() {
            return Err(MetaError::NoActiveNodes);
        }
        let map = vbmap::plan_in_groups(&active, &self.node_groups(), NUM_VBUCKETS, usize::from(spec.replicas));
        let meta = BucketMeta {
            spec: spec.clone(),
            manifest: Manifest::default(),
            map,
            failover_epoch: 0,
            building: Default::default(),
            indexes: Default::default(),
        };
        self.buckets.insert(spec.name.clone(), meta);
        Ok(())
    }

    fn update_bucket(&mut self, spec: &BucketSpec) -> Result<(), MetaError> {
        check_spec(spec)?;
        let bucket = self.buckets.get_mut(&spec.name).ok_or_else(|| MetaError::UnknownBucket(spec.name.clone()))?;
        let invalid = |reason: &str| MetaError::InvalidBucket { bucket: spec.name.clone(), reason: reason.into() };
        if bucket.spec.uuid != spec.uuid {
            return Err(invalid("the uuid cannot change"));
        }
        if bucket.spec.ephemeral != spec.ephemeral {
            return Err(invalid("the bucket type cannot change"));
        }
        bucket.spec = spec.clone();
        Ok(())
    }

    fn set_manifest(&mut self, name: &str, manifest: &Manifest) -> Result<(), MetaError> {
        let bucket = self.buckets.get_mut(name).ok_or_else(|| MetaError::UnknownBucket(name.into()))?;
        if manifest.uid < bucket.manifest.uid {
            return Err(MetaError::StaleManifest {
                bucket: name.into(),
                current: bucket.manifest.uid,
                proposed: manifest.uid,
            });
        }
        bucket.manifest = manifest.clone();
        super::indexes::drop_orphaned_indexes(bucket);
        Ok(())
    }

    fn set_map(&mut self, name: &str, map: &VbMap) -> Result<(), MetaError> {
        let bucket = self.buckets.get(name).ok_or_else(|| MetaError::UnknownBucket(name.into()))?;
        let invalid = |reason: String| MetaError::InvalidMap { bucket: name.into(), reason };
        if map.chains.len() != usize::from(NUM_VBUCKETS) {
            return Err(invalid(format!("{} vBuckets instead of {NUM_VBUCKETS}", map.chains.len())));
        }
        let chain_len = usize::from(bucket.spec.replicas) + 1;
        for (vb, chain) in map.chains.iter().enumerate() {
            if chain.len() != chain_len {
                return Err(invalid(format!("vBucket {vb} has {} copies instead of {chain_len}", chain.len())));
            }
            let mut seen = BTreeSet::new();
            for node in chain.iter().flatten() {
                if !seen.insert(*node) {
                    return Err(invalid(format!("node {node} appears twice in vBucket {vb}")));
                }
                match self.nodes.get(node).map(|n| n.membership) {
                    None => return Err(invalid(format!("unknown node {node} in vBucket {vb}"))),
                    Some(Membership::InactiveFailed) => {
                        return Err(invalid(format!("failed-over node {node} in vBucket {vb}")))
                    }
                    Some(_) => {}
                }
            }
        }
        if let Some(bucket) = self.buckets.get_mut(name) {
            bucket.map = map.clone();
            // A copy the new chain includes is built; one it still leaves out keeps building.
            retain_building(&mut bucket.building, |vb, node| !bucket.map.chains[usize::from(vb)].contains(&Some(node)));
        }
        Ok(())
    }

    fn set_building(&mut self, name: &str, building: &BTreeMap<u16, Vec<NodeId>>) -> Result<(), MetaError> {
        let bucket = self.buckets.get(name).ok_or_else(|| MetaError::UnknownBucket(name.into()))?;
        let invalid = |reason: String| MetaError::InvalidBuilding { bucket: name.into(), reason };
        for (vb, nodes) in building {
            let chain = bucket.map.chains.get(usize::from(*vb)).ok_or_else(|| invalid(format!("no vBucket {vb}")))?;
            let mut seen = BTreeSet::new();
            for node in nodes {
                if !seen.insert(*node) {
                    return Err(invalid(format!("node {node} listed twice for vBucket {vb}")));
                }
                if chain.contains(&Some(*node)) {
                    return Err(invalid(format!("node {node} already holds vBucket {vb}")));
                }
                if self.nodes.get(node).map(|n| n.membership) != Some(Membership::Active) {
                    return Err(invalid(format!("node {node} is not an active node")));
                }
            }
        }
        if let Some(bucket) = self.buckets.get_mut(name) {
            bucket.building = building.iter().filter(|(_, n)| !n.is_empty()).map(|(vb, n)| (*vb, n.clone())).collect();
        }
        Ok(())
    }

    fn reprovision(&mut self, name: &str, node: NodeId) -> Result<(), MetaError> {
        if !self.nodes.contains_key(&node) {
            return Err(MetaError::UnknownNode(node));
        }
        let bucket = self.buckets.get_mut(name).ok_or_else(|| MetaError::UnknownBucket(name.into()))?;
        if !bucket.spec.ephemeral {
            return Err(MetaError::NotEphemeral(name.into()));
        }
        bucket.map = vbmap::reprovision(&bucket.map, node);
        bucket.failover_epoch += 1;
        retain_building(&mut bucket.building, |_, n| n != node);
        Ok(())
    }

    fn promote_replicas(&mut self, name: &str, node: NodeId, promote: &BTreeMap<u16, NodeId>) -> Result<(), MetaError> {
        if !self.nodes.contains_key(&node) {
            return Err(MetaError::UnknownNode(node));
        }
        let bucket = self.buckets.get_mut(name).ok_or_else(|| MetaError::UnknownBucket(name.into()))?;
        let map = vbmap::promote(&bucket.map, node, promote);
        if map != bucket.map {
            bucket.map = map;
            bucket.failover_epoch += 1;
        }
        Ok(())
    }

    fn failover(&mut self, nodes: &[NodeId]) -> Result<(), MetaError> {
        if nodes.is_empty() {
            return Err(MetaError::EmptyFailover);
        }
        if let Some(unknown) = nodes.iter().find(|n| !self.nodes.contains_key(n)) {
            return Err(MetaError::UnknownNode(*unknown));
        }
        if self.active_nodes().iter().all(|n| nodes.contains(n)) {
            return Err(MetaError::LastActiveNode);
        }
        let groups = self.node_groups();
        for bucket in self.buckets.values_mut() {
            bucket.map = vbmap::failover(&bucket.map, nodes, &groups);
            bucket.failover_epoch += 1;
            retain_building(&mut bucket.building, |_, node| !nodes.contains(&node));
        }
        for node in nodes {
            if let Some(info) = self.nodes.get_mut(node) {
                info.membership = Membership::InactiveFailed;
            }
            self.recovery.remove(node);
            // A hard failover of a draining node (gone, or failed over again) ends its drain.
            self.draining.remove(node);
        }
        Ok(())
    }
}

impl ClusterMetadata {
    /// Places every missing replica of every bucket on the Active nodes (`vbmap::repair_replicas`; actives stay).
    fn repair_replicas(&mut self) {
        let (active, groups) = (self.active_nodes(), self.node_groups());
        for bucket in self.buckets.values_mut() {
            bucket.map = vbmap::repair_replicas(&bucket.map, &active, &groups);
        }
    }
}

/// Keeps the building copies `keep` accepts, dropping vBuckets left with none.
fn retain_building(building: &mut BTreeMap<u16, Vec<NodeId>>, keep: impl Fn(u16, NodeId) -> bool) {
    building.retain(|vb, nodes| {
        nodes.retain(|n| keep(*vb, *n));
        !nodes.is_empty()
    });
}

fn check_spec(spec: &BucketSpec) -> Result<(), MetaError> {
    let invalid = |reason: String| MetaError::InvalidBucket { bucket: spec.name.clone(), reason };
    let name_ok = !spec.name.is_empty()
        && spec.name.len() <= BUCKET_NAME_BYTES_MAX
        && !spec.name.starts_with('.')
        && spec.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-%".contains(&b));
    if !name_ok {
        return Err(invalid("the name must be 1 to 100 of A-Z a-z 0-9 . _ - % and not start with '.'".into()));
    }
    if usize::from(spec.replicas) > REPLICAS_MAX {
        return Err(invalid(format!("at most {REPLICAS_MAX} replicas")));
    }
    Ok(())
}

fn check_auto_failover(settings: &AutoFailoverSettings) -> Result<(), MetaError> {
    let timeout = AutoFailoverSettings::TIMEOUT_SECS_MIN..=AutoFailoverSettings::TIMEOUT_SECS_MAX;
    if !timeout.contains(&settings.timeout_secs) {
        return Err(MetaError::InvalidAutoFailover(format!(
            "timeout must be between {} and {} seconds",
            timeout.start(),
            timeout.end()
        )));
    }
    if !(1..=AutoFailoverSettings::MAX_COUNT_MAX).contains(&settings.max_count) {
        return Err(MetaError::InvalidAutoFailover(format!(
            "maxCount must be between 1 and {}",
            AutoFailoverSettings::MAX_COUNT_MAX
        )));
    }
    Ok(())
}

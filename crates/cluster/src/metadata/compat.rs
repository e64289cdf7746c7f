//! Metadata versions: which commands a settee reads, and the forms a proposer picks so that every member reads
//! what it proposes (ns_server's cluster compatibility version, for the replicated metadata log).
//!
//! Every node records in its [`NodeInfo::meta_version`] the version of the metadata commands it reads
//! ([`META_VERSION`] for this build; [`META_VERSION_UNMARKED`] for a settee from before the field existed, whose
//! entries lack it). The cluster's version ([`ClusterMetadata::meta_version`]) is the lowest over its members, and
//! [`CommandForms::for_version`] turns it into the forms proposers use: a command newer than the cluster's version
//! ([`MetaCommand::since`]) is never proposed, the older form it replaced is.
//!
//! A node that meets a command it cannot read anyway (a newer settee proposed it, or the node was downgraded) does
//! not guess: [`LogCommand`] keeps such a log entry as it came, and the state machine stops at it (see
//! `store::state_machine`), so the node never applies the log with a gap.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{ClusterMetadata, MetaCommand, NodeInfo};
use crate::vbmap::NodeId;

/// The metadata version this build reads and writes.
///
/// 1: every command up to `SetRebalanceSettings`, `CreateIndex`... (what settee had before 2026-11-26's
/// `FailoverDraining`). 2: `FailoverDraining`, `EndDrain`, `AddNodeInGroup`, and `NodeInfo::meta_version` itself.
pub const META_VERSION: u32 = 2;

/// The version of a node whose entry has no `meta_version`: a settee from before versions were recorded.
pub const META_VERSION_UNMARKED: u32 = 1;

/// The serde default of [`NodeInfo::meta_version`] and `MemberRequest::meta_version`.
pub(crate) fn unmarked_version() -> u32 {
    META_VERSION_UNMARKED
}

impl MetaCommand {
    /// The metadata version that introduced this command: a node of an older version cannot read it.
    ///
    /// Adding a command: give it the next version here, raise [`META_VERSION`], and have its proposers use the
    /// older form while [`ClusterMetadata::meta_version`] is lower (a [`CommandForms`] field).
    pub fn since(&self) -> u32 {
        match self {
            MetaCommand::AddNodeInGroup { .. }
            | MetaCommand::FailoverDraining { .. }
            | MetaCommand::EndDrain { .. } => 2,
            MetaCommand::AddNode(_)
            | MetaCommand::UpdateNode(_)
            | MetaCommand::SetMembership { .. }
            | MetaCommand::RemoveNode(_)
            | MetaCommand::CreateServerGroup { .. }
            | MetaCommand::RenameServerGroup { .. }
            | MetaCommand::DeleteServerGroup { .. }
            | MetaCommand::SetServerGroupMembers { .. }
            | MetaCommand::MoveToServerGroup { .. }
            | MetaCommand::CreateBucket(_)
            | MetaCommand::UpdateBucket(_)
            | MetaCommand::DeleteBucket(_)
            | MetaCommand::SetManifest { .. }
            | MetaCommand::SetBuilding { .. }
            | MetaCommand::SetMap { .. }
            | MetaCommand::Failover { .. }
            | MetaCommand::Reprovision { .. }
            | MetaCommand::PromoteReplicas { .. }
            | MetaCommand::SetUsers(_)
            | MetaCommand::SetAdmin(_)
            | MetaCommand::SetGroups(_)
            | MetaCommand::SetAudit(_)
            | MetaCommand::SetSecurity(_)
            | MetaCommand::SetSettings { .. }
            | MetaCommand::SetXdcr(_)
            | MetaCommand::SaveXdcrCheckpoints { .. }
            | MetaCommand::ForgetXdcrCheckpoints { .. }
            | MetaCommand::SetAutoFailover(_)
            | MetaCommand::SetRecovery { .. }
            | MetaCommand::SetRebalanceSettings(_)
            | MetaCommand::CreateIndex { .. }
            | MetaCommand::DropIndex { .. }
            | MetaCommand::BuildIndexes { .. } => 1,
        }
    }

    /// The command's name as its JSON spells it (`"FailoverDraining"`).
    pub fn name(&self) -> String {
        command_name(&serde_json::to_value(self).unwrap_or_default())
    }
}

impl ClusterMetadata {
    /// The cluster's metadata version: the lowest any member reads (this build's when there is no member yet).
    /// Failed-over members count: they still receive the log.
    pub fn meta_version(&self) -> u32 {
        self.nodes.values().map(|n| n.meta_version).min().unwrap_or(META_VERSION)
    }
}

/// How a graceful failover is proposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverForm {
    /// `FailoverDraining` (replicas rebuilt in the same change, the node listed until `EndDrain`).
    Draining,
    /// `Failover`, then a `SetMap` per bucket that rebuilds the replicas the node held; no drain: the node leaves
    /// the clients' server lists at the failover (a request in flight there may fail with RequestCanceled), and a
    /// `majority` write between the two changes may find a vBucket without its replica.
    Separate,
}

/// How a node is added into a server group other than the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddInGroupForm {
    /// `AddNodeInGroup`: one change.
    OneChange,
    /// `AddNode` (into the default group), then `MoveToServerGroup`: the node is in the default group between
    /// the two (it holds no vBucket until a rebalance, so nothing is placed by it).
    AddThenMove,
}

/// The command forms a proposer uses: the newest every member reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandForms {
    pub graceful_failover: FailoverForm,
    pub add_in_group: AddInGroupForm,
}

impl CommandForms {
    /// The forms for a cluster whose members read metadata version `version` and up: the one place the choice is made.
    pub fn for_version(version: u32) -> CommandForms {
        if version >= 2 {
            CommandForms { graceful_failover: FailoverForm::Draining, add_in_group: AddInGroupForm::OneChange }
        } else {
            CommandForms { graceful_failover: FailoverForm::Separate, add_in_group: AddInGroupForm::AddThenMove }
        }
    }

    /// The forms for the cluster `meta` describes.
    pub fn of(meta: &ClusterMetadata) -> CommandForms {
        CommandForms::for_version(meta.meta_version())
    }

    /// The commands that register `node` with the cluster, in server group `group` (a uuid) when given, in order.
    pub fn register(&self, node: NodeInfo, group: Option<String>) -> Vec<MetaCommand> {
        match (group, self.add_in_group) {
            (None, _) => vec![MetaCommand::AddNode(node)],
            (Some(group), AddInGroupForm::OneChange) => vec![MetaCommand::AddNodeInGroup { node, group }],
            (Some(group), AddInGroupForm::AddThenMove) => {
                let id = node.id;
                vec![MetaCommand::AddNode(node), MetaCommand::MoveToServerGroup { node: id, group }]
            }
        }
    }
}

/// Whether node `me`, which reads version `mine`, should record its version again (an `UpdateNode` of its own
/// entry) now that its view of the metadata went from `before` to `after`.
///
/// A settee of an older version drops the field when it applies a change (and when it is the leader, from the
/// commands it appends), and its snapshots lack it: a view restored from those, or a command that went through
/// such a leader, records an upgraded node at the unmarked version. Any node that sees a member's version rise
/// (a node restarted on a newer binary) records its own again, so every view is right once the last node is
/// upgraded; a node whose own entry is wrong in its own view records it again too (the caller paces that, as it
/// may recur while an older node leads).
pub fn announce_needed(before: &ClusterMetadata, after: &ClusterMetadata, me: NodeId, mine: u32) -> Option<Announce> {
    let own = after.nodes.get(&me)?;
    let rose = after
        .nodes
        .iter()
        .any(|(id, n)| *id != me && before.nodes.get(id).is_some_and(|was| n.meta_version > was.meta_version));
    if rose {
        return Some(Announce::MemberUpgraded);
    }
    (own.meta_version != mine).then_some(Announce::OwnEntryStale)
}

/// Why a node records its version again (see [`announce_needed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Announce {
    /// Another member's version rose in this node's view: record ours so that member's view has it.
    MemberUpgraded,
    /// This node's own entry does not say the version it reads.
    OwnEntryStale,
}

/// A command as the Raft log holds it: one this build reads, or one it cannot (kept as it came, so the log and
/// what is sent on from it stay intact). Its JSON is exactly the command's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogCommand {
    Known(MetaCommand),
    /// A command this build cannot read: `name` is its tag, `reason` what the parser said.
    Unreadable {
        name: String,
        reason: String,
        raw: serde_json::Value,
    },
}

impl LogCommand {
    /// The command's name as its JSON spells it.
    pub fn name(&self) -> String {
        match self {
            LogCommand::Known(cmd) => cmd.name(),
            LogCommand::Unreadable { name, .. } => name.clone(),
        }
    }
}

impl From<MetaCommand> for LogCommand {
    fn from(cmd: MetaCommand) -> Self {
        LogCommand::Known(cmd)
    }
}

impl fmt::Display for LogCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for LogCommand {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            LogCommand::Known(cmd) => cmd.serialize(serializer),
            LogCommand::Unreadable { raw, .. } => raw.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for LogCommand {
    /// Read through a `serde_json::Value`, which takes any well-formed command; then as a [`MetaCommand`]. (serde's
    /// untagged fallback would not do: it buffers in a form that cannot read the integer keys of `SetBuilding`.)
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = serde_json::Value::deserialize(deserializer)?;
        match MetaCommand::deserialize(&raw) {
            Ok(cmd) => Ok(LogCommand::Known(cmd)),
            Err(e) => Ok(LogCommand::Unreadable { name: command_name(&raw), reason: e.to_string(), raw }),
        }
    }
}

/// The tag of a command's JSON: the one key of an object, or a unit variant's string.
fn command_name(raw: &serde_json::Value) -> String {
    match raw {
        serde_json::Value::Object(fields) if fields.len() == 1 => fields.keys().next().cloned().unwrap_or_default(),
        serde_json::Value::String(unit) => unit.clone(),
        other => format!("(not a command: {})", truncate(&other.to_string(), 60)),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

#[cfg(test)]
#[path = "compat_tests.rs"]
mod tests;

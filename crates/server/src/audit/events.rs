//! The audit events settee writes, under Couchbase's ids, names and descriptions where Couchbase has the event
//! (kv_engine's `memcached` module for the KV port, ns_server's for the REST API). `GET /settings/audit/descriptors`
//! lists the filterable ones; `disabled` in `/settings/audit` names ids from this table.

/// One kind of audit event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub id: u32,
    pub name: &'static str,
    pub description: &'static str,
    /// `memcached` (KV) or `ns_server` (REST), as Couchbase's descriptors name their modules.
    pub module: &'static str,
    /// Whether `disabled` may name it; the others are always written while audit is on.
    pub filterable: bool,
    /// Whether it is written when the settings do not say (Couchbase's `enabled` in its descriptor).
    pub enabled_by_default: bool,
}

const fn kv(id: u32, name: &'static str, description: &'static str, filterable: bool, on: bool) -> Descriptor {
    Descriptor { id, name, description, module: "memcached", filterable, enabled_by_default: on }
}

const fn rest(id: u32, name: &'static str, description: &'static str, filterable: bool, on: bool) -> Descriptor {
    Descriptor { id, name, description, module: "ns_server", filterable, enabled_by_default: on }
}

pub const DCP_OPEN: u32 = 20480;
pub const KV_AUTH_FAILED: u32 = 20481;
pub const KV_AUTH_SUCCEEDED: u32 = 20485;
pub const DOCUMENT_READ: u32 = 20488;
pub const DOCUMENT_LOCKED: u32 = 20489;
pub const DOCUMENT_MODIFY: u32 = 20490;
pub const DOCUMENT_DELETE: u32 = 20491;
pub const LOGIN_SUCCESS: u32 = 8192;
pub const DELETE_USER: u32 = 8194;
pub const PASSWORD_CHANGE: u32 = 8195;
pub const ADD_NODE: u32 = 8196;
pub const REMOVE_NODE: u32 = 8197;
pub const FAILOVER_NODES: u32 = 8198;
pub const ENTER_NODE_RECOVERY: u32 = 8199;
pub const REBALANCE_INITIATED: u32 = 8200;
pub const CREATE_BUCKET: u32 = 8201;
pub const MODIFY_BUCKET: u32 = 8202;
pub const DELETE_BUCKET: u32 = 8203;
pub const FLUSH_BUCKET: u32 = 8204;
pub const ENABLE_AUTO_FAILOVER: u32 = 8220;
pub const DISABLE_AUTO_FAILOVER: u32 = 8221;
pub const RESET_AUTO_FAILOVER_COUNT: u32 = 8222;
pub const UPLOAD_CLUSTER_CA: u32 = 8229;
pub const RELOAD_NODE_CERTIFICATE: u32 = 8230;
pub const SET_USER: u32 = 8232;
pub const PASSWORD_POLICY: u32 = 8235;
pub const CLIENT_CERT_AUTH: u32 = 8236;
pub const SECURITY_SETTINGS: u32 = 8237;
pub const MODIFY_AUDIT_SETTINGS: u32 = 8240;
pub const SET_USER_GROUP: u32 = 8244;
pub const DELETE_USER_GROUP: u32 = 8245;
pub const CREATE_SCOPE: u32 = 8259;
pub const DROP_SCOPE: u32 = 8260;
pub const CREATE_COLLECTION: u32 = 8261;
pub const DROP_COLLECTION: u32 = 8262;
pub const REST_AUTH_FAILURE: u32 = 8264;
pub const ADMIN_PASSWORD_RESET: u32 = 8266;
pub const MODIFY_COLLECTION: u32 = 8270;
pub const ADD_GROUP: u32 = 8210;
pub const DELETE_GROUP: u32 = 8211;
pub const UPDATE_GROUP: u32 = 8212;

/// Every event, in a fixed order: an event's index here is its bit in the enabled-events mask (at most 64).
pub const EVENTS: &[Descriptor] = &[
    kv(DCP_OPEN, "opened DCP connection", "opened DCP connection", true, true),
    kv(KV_AUTH_FAILED, "authentication failed", "Authentication to the cluster failed", false, true),
    kv(KV_AUTH_SUCCEEDED, "authentication succeeded", "Authentication to the cluster succeeded", true, false),
    kv(DOCUMENT_READ, "document read", "The named document was read", true, false),
    kv(DOCUMENT_LOCKED, "document locked", "The named document was locked", true, false),
    kv(DOCUMENT_MODIFY, "document modify", "The named document was modified", true, false),
    kv(DOCUMENT_DELETE, "document delete", "The named document was deleted", true, false),
    rest(LOGIN_SUCCESS, "login success", "Successful login to couchbase cluster", true, false),
    rest(DELETE_USER, "delete user", "User was deleted", true, true),
    rest(PASSWORD_CHANGE, "password change", "Password was changed", true, true),
    rest(ADD_NODE, "add node", "Node was added to the cluster", true, true),
    rest(REMOVE_NODE, "remove node", "Node was removed from the cluster", true, true),
    rest(FAILOVER_NODES, "failover nodes", "Nodes were failed over", true, true),
    rest(ENTER_NODE_RECOVERY, "enter node recovery", "Node entered recovery mode", true, true),
    rest(REBALANCE_INITIATED, "rebalance initiated", "Rebalance was started", true, true),
    rest(CREATE_BUCKET, "create bucket", "Bucket was created", true, true),
    rest(MODIFY_BUCKET, "modify bucket", "Bucket was modified", true, true),
    rest(DELETE_BUCKET, "delete bucket", "Bucket was deleted", true, true),
    rest(FLUSH_BUCKET, "flush bucket", "Bucket was flushed", true, true),
    rest(ENABLE_AUTO_FAILOVER, "enable auto failover", "Auto failover was enabled", true, true),
    rest(DISABLE_AUTO_FAILOVER, "disable auto failover", "Auto failover was disabled", true, true),
    rest(RESET_AUTO_FAILOVER_COUNT, "reset auto failover count", "Auto failover count was reset", true, true),
    rest(UPLOAD_CLUSTER_CA, "upload cluster ca", "Trusted CA certificates were loaded", true, true),
    rest(RELOAD_NODE_CERTIFICATE, "reload node certificate", "The node certificate was reloaded", true, true),
    rest(SET_USER, "set user", "User was added or updated", true, true),
    rest(PASSWORD_POLICY, "password policy", "Password policy was changed", false, true),
    rest(CLIENT_CERT_AUTH, "client cert auth", "Client certificate authentication settings were changed", false, true),
    rest(SECURITY_SETTINGS, "security settings", "Security settings were changed", false, true),
    rest(MODIFY_AUDIT_SETTINGS, "modify audit settings", "Audit configuration was changed", false, true),
    rest(SET_USER_GROUP, "set user group", "User group was added or updated", true, true),
    rest(DELETE_USER_GROUP, "delete user group", "User group was deleted", true, true),
    rest(CREATE_SCOPE, "create scope", "Scope was created", true, true),
    rest(DROP_SCOPE, "drop scope", "Scope was dropped", true, true),
    rest(CREATE_COLLECTION, "create collection", "Collection was created", true, true),
    rest(DROP_COLLECTION, "drop collection", "Collection was dropped", true, true),
    rest(REST_AUTH_FAILURE, "auth failure", "Authentication to the REST API failed", false, true),
    rest(ADMIN_PASSWORD_RESET, "admin password reset", "The administrator password was reset", true, true),
    rest(MODIFY_COLLECTION, "modify collection", "Collection was modified", true, true),
    // Appended, not in id order: an event's position is its bit in the enabled-events mask.
    rest(ADD_GROUP, "add group", "Server group was added", false, true),
    rest(DELETE_GROUP, "delete group", "Server group was deleted", false, true),
    rest(UPDATE_GROUP, "update group", "Server group was updated", false, true),
];

/// The event with `id`, and its bit in the enabled-events mask.
pub fn lookup(id: u32) -> Option<(usize, &'static Descriptor)> {
    position(id).map(|at| (at, &EVENTS[at]))
}

/// The position (and so the filter bit) of event `id` in [`EVENTS`]; usable in constants.
pub const fn position(id: u32) -> Option<usize> {
    let mut at = 0;
    while at < EVENTS.len() {
        if EVENTS[at].id == id {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// The filterable events off by default: what `disabled` holds until an administrator changes it.
pub fn default_disabled() -> Vec<u32> {
    EVENTS.iter().filter(|d| d.filterable && !d.enabled_by_default).map(|d| d.id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_fits_the_mask_and_ids_are_unique() {
        // Proves every event has its own bit (the mask is 64 bits) and its own id.
        assert!(EVENTS.len() <= 64);
        let mut ids: Vec<u32> = EVENTS.iter().map(|d| d.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), EVENTS.len());
        assert_eq!(lookup(DOCUMENT_READ).map(|(_, d)| d.name), Some("document read"));
        assert!(lookup(1).is_none());
    }

    #[test]
    fn data_access_is_off_by_default_and_failures_cannot_be_filtered() {
        // Proves Couchbase's defaults: document events and KV auth success are off until enabled; an
        // authentication failure and an audit settings change can never be disabled.
        let off = default_disabled();
        for id in [DOCUMENT_READ, DOCUMENT_LOCKED, DOCUMENT_MODIFY, DOCUMENT_DELETE, KV_AUTH_SUCCEEDED] {
            assert!(off.contains(&id), "{id} off by default");
        }
        for id in [KV_AUTH_FAILED, REST_AUTH_FAILURE, MODIFY_AUDIT_SETTINGS] {
            assert!(!lookup(id).expect("known").1.filterable);
        }
    }
}

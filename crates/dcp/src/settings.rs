//! What a consumer negotiates with DCP_CONTROL (control.md), and the answer to each key. Keys this producer
//! implements change its behaviour; keys that only tune Couchbase internals are accepted and ignored; features it
//! lacks answer NOT_SUPPORTED, as a Couchbase node with the feature disabled does; anything else is EINVAL.

use std::time::Duration;

use settee_mcbp::dcp::DcpOpenFlags;
use settee_types::Status;

/// Couchbase's `connection_manager_interval`: a noop interval below it is refused.
pub const NOOP_INTERVAL_MIN: Duration = Duration::from_secs(1);
/// The noop interval until the consumer sets one (Couchbase's `dcp_noop_tx_interval`).
pub const NOOP_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);

/// How eagerly the connection is served; recorded for the driver, which owns scheduling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Priority {
    High,
    #[default]
    Medium,
    Low,
}

/// A producer connection's negotiated settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerSettings {
    pub open_flags: DcpOpenFlags,
    pub connection_buffer_bytes: u32,
    pub noop_enabled: bool,
    pub noop_interval: Duration,
    pub priority: Priority,
    pub send_stream_end_on_client_close: bool,
    /// Only takes effect with INCLUDE_DELETE_TIMES, since DCP_EXPIRATION carries a delete time.
    pub expiry_opcode: bool,
    pub sync_writes: bool,
    pub consumer_name: Option<String>,
    pub v7_status_codes: bool,
}

impl ProducerSettings {
    pub fn new(open_flags: DcpOpenFlags) -> ProducerSettings {
        ProducerSettings {
            open_flags,
            connection_buffer_bytes: 0,
            noop_enabled: false,
            noop_interval: NOOP_INTERVAL_DEFAULT,
            priority: Priority::default(),
            send_stream_end_on_client_close: false,
            expiry_opcode: false,
            sync_writes: false,
            consumer_name: None,
            v7_status_codes: false,
        }
    }

    /// Whether the consumer may send SEQNO_ACKNOWLEDGED: sync writes plus a consumer name (Couchbase's
    /// "SyncReplication").
    pub fn sync_replication(&self) -> bool {
        self.sync_writes && self.consumer_name.is_some()
    }

    /// Applies one DCP_CONTROL and returns the reply status.
    pub fn apply(&mut self, key: &[u8], value: &[u8]) -> Status {
        let (Ok(key), Ok(value)) = (std::str::from_utf8(key), std::str::from_utf8(value)) else {
            return Status::Einval;
        };
        let is_true = value == "true";
        match key {
            "connection_buffer_size" => match value.parse::<u32>() {
                Ok(bytes) => self.connection_buffer_bytes = bytes,
                Err(_) => return Status::Einval,
            },
            "enable_noop" => self.noop_enabled = is_true,
            "set_noop_interval" => match value.parse::<f64>() {
                // Couchbase 7.6+ consumers send fractional seconds ("1.000000"); older ones whole seconds.
                Ok(secs) if secs.is_finite() && secs >= NOOP_INTERVAL_MIN.as_secs_f64() && secs <= 1e9 => {
                    self.noop_interval = Duration::from_secs_f64(secs)
                }
                _ => return Status::Einval,
            },
            "set_priority" => {
                self.priority = match value {
                    "high" => Priority::High,
                    "medium" => Priority::Medium,
                    "low" => Priority::Low,
                    _ => return Status::Einval,
                }
            }
            // A one-way switch: once asked for, the client cannot turn it off.
            "send_stream_end_on_client_close_stream" => self.send_stream_end_on_client_close |= is_true,
            "enable_expiry_opcode" => {
                self.expiry_opcode = is_true && self.open_flags.contains(DcpOpenFlags::INCLUDE_DELETE_TIMES)
            }
            "enable_sync_writes" if is_true => self.sync_writes = true,
            "consumer_name" if !value.is_empty() => self.consumer_name = Some(value.to_owned()),
            "include_deleted_user_xattrs" if is_true => {
                if !self.open_flags.contains(DcpOpenFlags::INCLUDE_DELETED_USER_XATTRS) {
                    return Status::Einval;
                }
            }
            "v7_dcp_status_codes" if is_true => self.v7_status_codes = true,
            "backfill_order" if matches!(value, "round-robin" | "sequential") => {}
            // Accepted and ignored: the producer never drops cursors, never compresses on its own, may always send
            // in order, and has no MFU or FlatBuffers events to send.
            "supports_cursor_dropping" | "supports_cursor_dropping_vulcan" | "supports_hifi_MFU" => {}
            "enable_out_of_order_snapshots" if matches!(value, "true" | "true_with_seqno_advanced") => {}
            "flatbuffers_system_events" if is_true => {}
            // Not implemented here; Couchbase answers the same when the feature is off.
            "stream_buffer_size" | "enable_stream_id" | "change_streams" | "max_marker_version" | "cache_transfer" => {
                return Status::NotSupported
            }
            // Needs datatype snappy on the connection and value compression, which this producer does not do:
            // refused as Couchbase refuses it without snappy.
            "force_value_compression" => return Status::Einval,
            _ => return Status::Einval,
        }
        Status::Success
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(s: &mut ProducerSettings, key: &str, value: &str) -> Status {
        s.apply(key.as_bytes(), value.as_bytes())
    }

    /// The keys a Couchbase replica consumer sends at connection set-up are all accepted and take effect.
    #[test]
    fn replica_consumer_controls_are_accepted() {
        let mut s = ProducerSettings::new(DcpOpenFlags::PRODUCER.with(DcpOpenFlags::INCLUDE_DELETE_TIMES));
        for (key, value) in [
            ("connection_buffer_size", "10485760"),
            ("enable_noop", "true"),
            ("set_noop_interval", "1.000000"),
            ("set_priority", "high"),
            ("supports_cursor_dropping_vulcan", "true"),
            ("supports_hifi_MFU", "true"),
            ("send_stream_end_on_client_close_stream", "true"),
            ("enable_expiry_opcode", "true"),
            ("enable_sync_writes", "true"),
            ("consumer_name", "replication:ns_1@a->ns_1@b:default"),
            ("v7_dcp_status_codes", "true"),
        ] {
            assert_eq!(apply(&mut s, key, value), Status::Success, "{key}");
        }
        assert_eq!(s.connection_buffer_bytes, 10 << 20);
        assert!(s.noop_enabled && s.expiry_opcode && s.sync_replication() && s.send_stream_end_on_client_close);
        assert_eq!((s.noop_interval, s.priority), (Duration::from_secs(1), Priority::High));
    }

    /// Bad values and unknown keys are EINVAL; features this producer lacks are NOT_SUPPORTED.
    #[test]
    fn bad_and_unsupported_controls() {
        let mut s = ProducerSettings::new(DcpOpenFlags::PRODUCER);
        assert_eq!(apply(&mut s, "connection_buffer_size", "-1"), Status::Einval);
        assert_eq!(apply(&mut s, "connection_buffer_size", "4294967296"), Status::Einval);
        assert_eq!(apply(&mut s, "set_noop_interval", "0.5"), Status::Einval);
        assert_eq!(apply(&mut s, "set_noop_interval", "NaN"), Status::Einval);
        assert_eq!(apply(&mut s, "set_priority", "urgent"), Status::Einval);
        assert_eq!(apply(&mut s, "enable_sync_writes", "false"), Status::Einval);
        assert_eq!(apply(&mut s, "include_deleted_user_xattrs", "true"), Status::Einval);
        assert_eq!(apply(&mut s, "no_such_key", "true"), Status::Einval);
        assert_eq!(apply(&mut s, "force_value_compression", "true"), Status::Einval);
        assert_eq!(apply(&mut s, "enable_stream_id", "true"), Status::NotSupported);
        assert_eq!(apply(&mut s, "stream_buffer_size", "1024"), Status::NotSupported);
        // Expiry opcodes need delete times, so without them the control succeeds but changes nothing.
        assert_eq!(apply(&mut s, "enable_expiry_opcode", "true"), Status::Success);
        assert!(!s.expiry_opcode);
    }
}

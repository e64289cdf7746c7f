//! The KV service: the memcached binary protocol with Couchbase's extensions on the KV port.
//!
//! Flow: [`listener::serve_kv`] accepts (bounded by `--max-connections`) → [`connection`] reads and frames →
//! [`dispatch`] checks auth, bucket and opcode → `handlers/*` call the engine and write replies.

pub mod connection;
pub mod dispatch;
pub(crate) mod durable_replies;
pub mod handlers;
pub mod listener;
pub mod pending;
pub mod read_budget;
pub mod reply;
pub mod session;
pub mod unauthenticated;

//! The settee node: the only crate that wires everything together. It owns the listeners (KV, REST management,
//! query), the per-connection protocol state (HELLO features, SASL, the selected bucket), dispatch from opcodes to
//! engine calls, the cluster configs clients bootstrap from, and the `settee` binary's command line.
//!
//! Key types: [`node::Node`] (buckets, users, config revision), [`config::ServerConfig`] (the CLI contract),
//! [`run`] (start every service and stop on a signal).

pub mod audit;
pub mod auth;
pub mod cli;
pub mod cluster;
pub mod cluster_config;
pub mod config;
pub mod dcp;
pub mod error_map;
#[doc(hidden)]
pub mod fuzzing;
mod held_wakes;
pub mod kv;
pub mod logging;
pub mod node;
pub mod persistence;
pub mod query;
pub mod rest;
mod service;
pub mod stats_history;
mod stats_sampler;
pub mod timings;
pub mod tls;
pub mod xdcr;

pub use service::{run, RunningNode};

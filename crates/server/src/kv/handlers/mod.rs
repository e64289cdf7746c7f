//! One file per command family. Each handler validates its request's syntax, calls the engine and writes its
//! success reply; errors go back to the dispatcher, which writes them.

pub mod bucket;
pub mod dcp;
pub mod mutation;
pub mod retrieval;
pub mod session;
pub mod subdoc;
pub mod timings;
pub mod with_meta;

mod request;

pub(crate) use request::{doc_key, expect_layout, request_value, selected_bucket, write_options};

//! SQL++ (N1QL), the query language of Couchbase Server, as settee's query service runs it.
//!
//! The pipeline: text → `lexer` → `parser` → `ast::Statement` → semantic checks and name resolution → a plan of
//! operators → a streaming executor whose rows leave as they are produced. Documents and indexes are reached only
//! through the `datastore` traits, so the same engine runs over a local bucket and over a cluster.
//!
//! Key types: `Value` (JSON plus MISSING, with Couchbase's collation), `ast::Statement`, `QueryError` (every error
//! with its Couchbase code and message).
//!
//! This crate must not depend on the server, the engine, the store or tokio: the server implements the datastore
//! traits and drives the executor from a blocking thread.

pub mod ast;
pub mod datastore;
mod engine;
mod error;
pub mod exec;
pub mod functions;
pub mod index;
mod lexer;
mod parser;
pub mod plan;
pub mod prepared;
pub mod value;

pub use engine::{uuid, Engine, Sink, StatementEnv};
pub use error::{DmlReason, QueryError};
pub use parser::{parse, parse_expression};
pub use value::Value;

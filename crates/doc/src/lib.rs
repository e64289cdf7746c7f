//! Sub-document operations as Couchbase Server 7.6 performs them: paths, lookups, atomic multi-path mutations,
//! the XATTR section stored in front of a document body, virtual xattrs and macros.
//!
//! The engine hands this crate a stored value (snappy already removed) and the request's specs, and gets back per-
//! spec results (`lookup`) or a new value to store (`mutate`). Everything here is pure computation on bytes: no
//! I/O, no clock (times come in as arguments), no shared state.
//!
//! Key types: `Xattrs` (the XATTR section, with `split_value` / `join_value`), `Path` (`parse_path`), `DocMeta`
//! (what `$document` reports), `LookupSpec` / `SpecResult`, and `MutationSpec` / `MutationContext` /
//! `MutationOutcome` / `SpecFailure`.
//!
//! JSON is handled as text, never parsed into a value tree: a document is opened only along the paths a request
//! walks, and everything else is copied byte for byte. That keeps numbers of any size or precision exact, keeps key
//! order and escapes, returns values with their stored bytes, and compares keys in their escaped form, all as
//! Couchbase's own splicing does. `serde_json` is used only to write small JSON values.
//!
//! This crate must not depend on the engine, the server, the store or tokio: it sits below them.

mod counter;
mod edit;
mod lookup;
mod macros;
mod meta;
mod mutation;
mod node;
mod path;
mod spec;
mod syntax;
mod tree;
mod vattr;
mod xattr;
mod xattr_key;

pub use lookup::{lookup, LookupSpec, SpecResult};
pub use meta::DocMeta;
pub use mutation::{mutate, MutationContext, MutationOutcome, MutationSpec, SpecFailure};
pub use path::{parse_path, Path, PathComponent};
pub use spec::{doc_flag, op, path_flag};
pub use xattr::{join_value, split_value, Xattrs};

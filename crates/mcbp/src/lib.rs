//! A sans-IO codec for the memcached binary protocol (MCBP) with Couchbase's extensions: flexible framing
//! (magic 0x08/0x18), frame infos, server push (0x82), LEB128 collection prefixes, the HELLO feature set and the
//! opcode table, and the DCP message bodies (`dcp`).
//!
//! Decoders borrow from the caller's buffer and never panic on any input: a frame is checked for completeness and
//! consistent lengths before anything is read from it. This crate has no sockets and knows nothing of buckets; it
//! depends only on `settee-types`.

pub mod dcp;
mod feature;
mod frame_info;
mod header;
mod leb128;
mod opcode;
mod request;
mod response;
mod with_meta;

pub use feature::Feature;
pub use frame_info::{FrameInfoError, RequestFrameInfos};
pub use header::{Magic, HEADER_BYTES};
pub use leb128::{decode_leb128, encode_leb128, LEB128_BYTES_MAX};
pub use opcode::{Opcode, OpcodeFlags};
pub use request::{decode_request, encode_request, DecodeError, Request};
pub use response::{decode_response, encode_response, encode_server_push, Response};
pub use with_meta::WithMetaExtras;

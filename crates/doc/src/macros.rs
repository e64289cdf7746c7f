//! Macro expansion for xattr mutations with EXPAND_MACROS: the spec's whole value is a macro name in quotes.
//!
//! `"${Mutation.CAS}"`, `"${Mutation.seqno}"` and `"${Mutation.value_crc32c}"` become facts about the mutation
//! being made; `"${$document}"` and `"${$document.<field>}"` become facts about the document before it. The CAS is
//! formatted from its bytes in network order (Couchbase formats the byte-swapped value; clients swap it back), the
//! seqno as 16 hex digits, the CRC32C of the final body as 8.

use settee_types::Status;

use crate::meta::DocMeta;
use crate::vattr::{document_field, document_json};

const CAS: &[u8] = b"\"${Mutation.CAS}\"";
const SEQNO: &[u8] = b"\"${Mutation.seqno}\"";
const VALUE_CRC32C: &[u8] = b"\"${Mutation.value_crc32c}\"";
const DOCUMENT_PREFIX: &[u8] = b"\"${$document";
const SUFFIX: &[u8] = b"}\"";

/// The `$document` fields a macro may name; Couchbase offers no `value_crc32c` here.
const DOCUMENT_MACRO_FIELDS: [&str; 10] = [
    "CAS",
    "vbucket_uuid",
    "seqno",
    "revid",
    "exptime",
    "flags",
    "value_bytes",
    "datatype",
    "deleted",
    "last_modified",
];

/// Whether a value names a macro the request checks accept (XATTR_UNKNOWN_MACRO otherwise). Any `$document` form
/// passes here; an unknown field fails later, per spec, with XATTR_UNKNOWN_VATTR_MACRO.
pub(crate) fn is_known_macro(value: &[u8]) -> bool {
    value == CAS
        || value == SEQNO
        || value == VALUE_CRC32C
        || (value.starts_with(DOCUMENT_PREFIX)
            && value.ends_with(SUFFIX)
            && value.len() >= DOCUMENT_PREFIX.len() + SUFFIX.len())
}

/// What the mutation macros expand to.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MutationFacts {
    pub(crate) cas: u64,
    pub(crate) seqno: u64,
    /// CRC32C of the final body; only known after the body specs ran, see `uses_crc32c`.
    pub(crate) crc32c: u32,
}

/// Whether expanding `value` needs the final body's CRC32C.
pub(crate) fn uses_crc32c(value: &[u8]) -> bool {
    value == VALUE_CRC32C
}

/// The JSON text a macro value expands to.
pub(crate) fn expand(value: &[u8], facts: &MutationFacts, meta: &DocMeta) -> Result<String, Status> {
    if value == CAS {
        return Ok(format!("\"0x{:016x}\"", u64::from_le_bytes(facts.cas.to_be_bytes())));
    }
    if value == SEQNO {
        return Ok(format!("\"0x{:016x}\"", facts.seqno));
    }
    if value == VALUE_CRC32C {
        return Ok(format!("\"0x{:08x}\"", facts.crc32c));
    }
    let unknown = Status::SubdocXattrUnknownVattrMacro;
    let inner = value.strip_prefix(DOCUMENT_PREFIX).and_then(|rest| rest.strip_suffix(SUFFIX)).ok_or(unknown)?;
    if inner.is_empty() {
        return Ok(document_json(meta));
    }
    let field = inner.strip_prefix(b".").and_then(|f| std::str::from_utf8(f).ok()).ok_or(unknown)?;
    if !DOCUMENT_MACRO_FIELDS.contains(&field) {
        return Err(unknown);
    }
    document_field(meta, field).ok_or(unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> MutationFacts {
        MutationFacts { cas: 0x0102_0304_0506_0708, seqno: 0x2a, crc32c: 0xdead_beef }
    }

    /// The request check accepts exactly the three mutation macros and any quoted $document macro.
    #[test]
    fn known_macros() {
        for value in [
            "\"${Mutation.CAS}\"",
            "\"${Mutation.seqno}\"",
            "\"${Mutation.value_crc32c}\"",
            "\"${$document}\"",
            "\"${$document.CAS}\"",
            "\"${$document.bogus}\"",
        ] {
            assert!(is_known_macro(value.as_bytes()), "{value}");
        }
        for value in ["${Mutation.CAS}", "\"${UnknownMacro}\"", "\"${Mutation.cas}\"", "{\"a\":1}", "\"${$document\""] {
            assert!(!is_known_macro(value.as_bytes()), "{value}");
        }
    }

    /// The CAS is written from its network-order bytes, the seqno and CRC as plain hex.
    #[test]
    fn mutation_macros_expand() {
        let meta = DocMeta::default();
        assert_eq!(expand(CAS, &facts(), &meta).unwrap(), "\"0x0807060504030201\"");
        assert_eq!(expand(SEQNO, &facts(), &meta).unwrap(), "\"0x000000000000002a\"");
        assert_eq!(expand(VALUE_CRC32C, &facts(), &meta).unwrap(), "\"0xdeadbeef\"");
    }

    /// $document macros expand to the pre-mutation metadata; unknown fields are XATTR_UNKNOWN_VATTR_MACRO.
    #[test]
    fn document_macros_expand() {
        let meta = DocMeta { cas: 0x10, revid: 3, deleted: true, ..DocMeta::default() };
        assert_eq!(expand(b"\"${$document.CAS}\"", &facts(), &meta).unwrap(), "\"0x0000000000000010\"");
        assert_eq!(expand(b"\"${$document.revid}\"", &facts(), &meta).unwrap(), "\"3\"");
        assert_eq!(expand(b"\"${$document.deleted}\"", &facts(), &meta).unwrap(), "true");
        assert!(expand(b"\"${$document}\"", &facts(), &meta).unwrap().starts_with("{\"CAS\":"));
        for bad in ["\"${$document.value_crc32c}\"", "\"${$document.nope}\"", "\"${$documentX}\""] {
            assert_eq!(expand(bad.as_bytes(), &facts(), &meta), Err(Status::SubdocXattrUnknownVattrMacro), "{bad}");
        }
    }
}

//! Virtual xattrs: `$document`, `$vbucket` and `$XTOC`, computed from the document's metadata on every read.
//!
//! The shapes are Couchbase's, down to the types clients parse: `$document.CAS`, `.seqno` and `.vbucket_uuid` are
//! `"0x%016x"` strings, `.value_crc32c` a `"0x%08x"` string, `.revid` and `.last_modified` decimal strings,
//! `.exptime`, `.flags` and `.value_bytes` numbers, `.datatype` an array of names and `.deleted` a bool. Members are
//! written in byte order of their names, as Couchbase's JSON library writes them.

use std::borrow::Cow;

use settee_types::Status;

use crate::meta::DocMeta;
use crate::node::Node;
use crate::syntax::check_value;
use crate::tree::Tree;
use crate::xattr::Xattrs;

pub(crate) const DOCUMENT: &str = "$document";
pub(crate) const VBUCKET: &str = "$vbucket";
pub(crate) const XTOC: &str = "$XTOC";

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Writes one member's value as JSON text.
type FieldText = fn(&DocMeta) -> String;

/// The members of `$document`, by name, in the order they are written.
const DOCUMENT_FIELDS: [(&str, FieldText); 11] = [
    ("CAS", |m| hex64(m.cas)),
    ("datatype", |m| datatype_names(m.datatype)),
    ("deleted", |m| m.deleted.to_string()),
    ("exptime", |m| m.exptime.to_string()),
    ("flags", |m| m.flags.to_string()),
    // The CAS is a hybrid logical clock in nanoseconds, so its seconds are the last modification time.
    ("last_modified", |m| format!("\"{}\"", m.cas / NANOS_PER_SEC)),
    ("revid", |m| format!("\"{}\"", m.revid)),
    ("seqno", |m| hex64(m.seqno)),
    ("value_bytes", |m| m.value_bytes.to_string()),
    ("value_crc32c", |m| format!("\"0x{:08x}\"", m.crc32c)),
    ("vbucket_uuid", |m| hex64(m.vbuuid)),
];

/// `$document` as JSON text.
pub(crate) fn document_json(meta: &DocMeta) -> String {
    let mut out = String::from("{");
    for (i, (name, field)) in DOCUMENT_FIELDS.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        out.push_str(name);
        out.push_str("\":");
        out.push_str(&field(meta));
    }
    out.push('}');
    out
}

/// One member of `$document` as JSON text.
pub(crate) fn document_field(meta: &DocMeta, name: &str) -> Option<String> {
    DOCUMENT_FIELDS.iter().find(|(n, _)| *n == name).map(|(_, field)| field(meta))
}

/// `$vbucket`: the vBucket's hybrid logical clock, in seconds, as a decimal string.
pub(crate) fn vbucket_json(now_secs: u32) -> String {
    format!("{{\"HLC\":{{\"mode\":\"real\",\"now\":\"{now_secs}\"}}}}")
}

/// `$XTOC`: the names of the document's xattrs.
pub(crate) fn xtoc_json(xattrs: &Xattrs) -> String {
    let names: Vec<&str> = xattrs.iter().map(|(key, _)| key).collect();
    // Serializing a list of strings cannot fail; the fallback only exists to avoid a panic path.
    serde_json::to_string(&names).unwrap_or_else(|_| "[]".to_string())
}

/// A tree holding the single virtual xattr `key`, for a lookup to walk. SUBDOC_XATTR_UNKNOWN_VATTR for any `$`
/// name that is not one of the three.
pub(crate) fn vattr_tree(key: &str, meta: &DocMeta, xattrs: &Xattrs, now_secs: u32) -> Result<Tree<'static>, Status> {
    let text = match key {
        DOCUMENT => document_json(meta),
        VBUCKET => vbucket_json(now_secs),
        XTOC => xtoc_json(xattrs),
        _ => return Err(Status::SubdocXattrUnknownVattr),
    };
    let levels = check_value(&text).ok_or(Status::Einternal)? + 1;
    let root = Node::Object(vec![(Cow::Owned(key.to_string()), Node::text(Cow::Owned(text)))]);
    Ok(Tree::new(root, levels))
}

fn hex64(value: u64) -> String {
    format!("\"0x{value:016x}\"")
}

/// The datatype as names, in Couchbase's order; `["raw"]` when no bit is set.
fn datatype_names(datatype: u8) -> String {
    let names: Vec<&str> = [(0x02, "snappy"), (0x01, "json"), (0x04, "xattr")]
        .into_iter()
        .filter(|(bit, _)| datatype & bit != 0)
        .map(|(_, name)| name)
        .collect();
    if names.is_empty() {
        return "[\"raw\"]".to_string();
    }
    serde_json::to_string(&names).unwrap_or_else(|_| "[\"raw\"]".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> DocMeta {
        DocMeta {
            cas: 0x1700_0000_0000_0001,
            seqno: 42,
            vbuuid: 0xabcdef,
            revid: 7,
            exptime: 1_700_000_000,
            flags: 0x0200_0006,
            deleted: false,
            datatype: 0x05,
            value_bytes: 13,
            crc32c: 0xdead_beef,
        }
    }

    /// $document has every field with the types clients parse, in Couchbase's member order.
    #[test]
    fn document_has_couchbase_shape() {
        let text = document_json(&meta());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["CAS"], "0x1700000000000001");
        assert_eq!(v["seqno"], "0x000000000000002a");
        assert_eq!(v["vbucket_uuid"], "0x0000000000abcdef");
        assert_eq!(v["value_crc32c"], "0xdeadbeef");
        assert_eq!(v["revid"], "7");
        assert_eq!(v["last_modified"], (0x1700_0000_0000_0001u64 / 1_000_000_000).to_string());
        assert_eq!(v["exptime"], 1_700_000_000);
        assert_eq!(v["flags"], 0x0200_0006);
        assert_eq!(v["value_bytes"], 13);
        assert_eq!(v["datatype"], serde_json::json!(["json", "xattr"]));
        assert_eq!(v["deleted"], false);
        let names: Vec<&String> = v.as_object().unwrap().keys().collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }

    /// A field on its own is the same text as inside the object.
    #[test]
    fn fields_match_the_whole_object() {
        assert_eq!(document_field(&meta(), "CAS").unwrap(), "\"0x1700000000000001\"");
        assert_eq!(document_field(&meta(), "deleted").unwrap(), "false");
        assert_eq!(document_field(&meta(), "nope"), None);
    }

    /// Datatype names follow Couchbase's order and say "raw" when no bit is set.
    #[test]
    fn datatype_names_in_order() {
        assert_eq!(datatype_names(0), "[\"raw\"]");
        assert_eq!(datatype_names(0x07), "[\"snappy\",\"json\",\"xattr\"]");
        assert_eq!(datatype_names(0x04), "[\"xattr\"]");
    }

    /// $vbucket carries the clock as a decimal string in real mode; $XTOC lists xattr names in order.
    #[test]
    fn vbucket_and_xtoc() {
        assert_eq!(vbucket_json(1234), r#"{"HLC":{"mode":"real","now":"1234"}}"#);
        let mut x = Xattrs::new();
        x.set("_sync", b"1".to_vec());
        x.set("user", b"2".to_vec());
        assert_eq!(xtoc_json(&x), r#"["_sync","user"]"#);
        assert_eq!(xtoc_json(&Xattrs::new()), "[]");
    }

    /// Unknown virtual xattrs are refused with XATTR_UNKNOWN_VATTR.
    #[test]
    fn unknown_vattr() {
        let err = vattr_tree("$nope", &meta(), &Xattrs::new(), 0).map(|_| ());
        assert_eq!(err, Err(Status::SubdocXattrUnknownVattr));
    }
}

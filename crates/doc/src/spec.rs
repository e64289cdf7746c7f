//! The spec opcode table and the request-level checks Couchbase runs before executing any spec.
//!
//! Every opcode's rules (which path and doc flags it takes, whether it has a value, whether its path may be
//! empty) live in one table, and `check_request` derives every request-level error from it, in Couchbase's order:
//! a failing request returns one status and executes nothing.

use settee_types::limits::{SUBDOC_PATH_BYTES_MAX, SUBDOC_SPECS_MAX};
use settee_types::Status;

use crate::macros::is_known_macro;
use crate::xattr_key::{is_valid_xattr_path, is_virtual_path};

/// Spec opcodes.
pub mod op {
    pub const GET_DOC: u8 = 0x00;
    pub const SET_DOC: u8 = 0x01;
    pub const REMOVE_DOC: u8 = 0x04;
    pub const GET: u8 = 0xc5;
    pub const EXISTS: u8 = 0xc6;
    pub const DICT_ADD: u8 = 0xc7;
    pub const DICT_UPSERT: u8 = 0xc8;
    pub const REMOVE: u8 = 0xc9;
    pub const REPLACE: u8 = 0xca;
    pub const ARRAY_PUSH_LAST: u8 = 0xcb;
    pub const ARRAY_PUSH_FIRST: u8 = 0xcc;
    pub const ARRAY_INSERT: u8 = 0xcd;
    pub const ARRAY_ADD_UNIQUE: u8 = 0xce;
    pub const COUNTER: u8 = 0xcf;
    pub const GET_COUNT: u8 = 0xd2;
    pub const REPLACE_BODY_WITH_XATTR: u8 = 0xd3;
}

/// Per-spec path flags.
pub mod path_flag {
    /// Create missing parent objects.
    pub const MKDIR_P: u8 = 0x01;
    /// The path names an extended attribute.
    pub const XATTR: u8 = 0x04;
    /// Expand a macro value (`"${Mutation.CAS}"`...); needs XATTR.
    pub const EXPAND_MACROS: u8 = 0x10;
    /// The value is binary; accepted where Couchbase accepts it, otherwise ignored.
    pub const BINARY_VALUE: u8 = 0x20;
}

/// Per-request document flags (the last byte of a multi-path request's extras).
pub mod doc_flag {
    pub const MKDOC: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const ACCESS_DELETED: u8 = 0x04;
    pub const CREATE_AS_DELETED: u8 = 0x08;
    pub const REVIVE_DOCUMENT: u8 = 0x10;
    pub const REPLICA_READ: u8 = 0x20;
    /// Every defined flag; the top two bits are invalid.
    pub const ALL: u8 = 0x3f;
}

/// What a spec does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpecOp {
    GetDoc,
    SetDoc,
    RemoveDoc,
    Get,
    Exists,
    DictAdd,
    DictUpsert,
    Remove,
    Replace,
    ArrayPushLast,
    ArrayPushFirst,
    ArrayInsert,
    ArrayAddUnique,
    Counter,
    GetCount,
    ReplaceBodyWithXattr,
}

/// The rules for one opcode (Couchbase's "subdoc command traits").
#[derive(Debug)]
pub(crate) struct OpRules {
    pub(crate) code: u8,
    pub(crate) op: SpecOp,
    /// Operates on the whole body rather than a path in it.
    pub(crate) whole_doc: bool,
    pub(crate) mutator: bool,
    valid_flags: u8,
    mandatory_flags: u8,
    valid_doc_flags: u8,
    has_value: bool,
    allow_empty_path: bool,
}

const fn rules(
    code: u8,
    op: SpecOp,
    whole_doc: bool,
    mutator: bool,
    flags: (u8, u8, u8),
    value: bool,
    empty: bool,
) -> OpRules {
    OpRules {
        code,
        op,
        whole_doc,
        mutator,
        valid_flags: flags.0,
        mandatory_flags: flags.1,
        valid_doc_flags: flags.2,
        has_value: value,
        allow_empty_path: empty,
    }
}

use doc_flag::{ACCESS_DELETED as AD, ADD, CREATE_AS_DELETED as CD, MKDOC as MK};
use doc_flag::{REPLICA_READ as RR, REVIVE_DOCUMENT as RV};
use path_flag::{BINARY_VALUE as B, EXPAND_MACROS as E, MKDIR_P as M, XATTR as X};

/// The opcode table, Couchbase Server 7.6's rules flag for flag. Kept one opcode per line so it reads as a table.
#[rustfmt::skip]
static TABLE: [OpRules; 16] = [
    //    code                         op                                 whole  mutator (path flags, mandatory, doc flags)                value  empty path
    rules(op::GET_DOC,                 SpecOp::GetDoc,                    true,  false,  (0,             0, AD | RV | RR),                 false, true),
    rules(op::SET_DOC,                 SpecOp::SetDoc,                    true,  true,   (0,             0, MK | ADD),                     true,  true),
    rules(op::REMOVE_DOC,              SpecOp::RemoveDoc,                 true,  true,   (0,             0, AD | RV),                      false, true),
    rules(op::GET,                     SpecOp::Get,                       false, false,  (X | B,         0, AD | RV | RR),                 false, false),
    rules(op::EXISTS,                  SpecOp::Exists,                    false, false,  (X,             0, AD | RV | RR),                 false, false),
    rules(op::DICT_ADD,                SpecOp::DictAdd,                   false, true,   (M | X | E | B, 0, MK | AD | RV | ADD | CD),      true,  false),
    rules(op::DICT_UPSERT,             SpecOp::DictUpsert,                false, true,   (M | X | E | B, 0, MK | AD | RV | ADD | CD),      true,  false),
    rules(op::REMOVE,                  SpecOp::Remove,                    false, true,   (X,             0, AD | RV),                      false, false),
    rules(op::REPLACE,                 SpecOp::Replace,                   false, true,   (X | E | B,     0, AD | RV | ADD),                true,  false),
    rules(op::ARRAY_PUSH_LAST,         SpecOp::ArrayPushLast,             false, true,   (M | X | E,     0, MK | AD | RV | ADD | CD),      true,  true),
    rules(op::ARRAY_PUSH_FIRST,        SpecOp::ArrayPushFirst,            false, true,   (M | X | E,     0, MK | AD | RV | ADD | CD),      true,  true),
    rules(op::ARRAY_INSERT,            SpecOp::ArrayInsert,               false, true,   (X | E,         0, AD | RV | ADD | CD),           true,  false),
    rules(op::ARRAY_ADD_UNIQUE,        SpecOp::ArrayAddUnique,            false, true,   (M | X,         0, MK | AD | RV | ADD | CD),      true,  true),
    rules(op::COUNTER,                 SpecOp::Counter,                   false, true,   (M | X,         0, MK | AD | RV | ADD | CD),      true,  false),
    rules(op::GET_COUNT,               SpecOp::GetCount,                  false, false,  (X,             0, AD | RV | RR),                 false, true),
    rules(op::REPLACE_BODY_WITH_XATTR, SpecOp::ReplaceBodyWithXattr,      false, true,   (X | B,         X, AD | RV),                      false, false),
];

pub(crate) fn rules_for(code: u8) -> Option<&'static OpRules> {
    TABLE.iter().find(|r| r.code == code)
}

/// A spec as it arrived: lookups have an empty value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawSpec<'s> {
    pub(crate) opcode: u8,
    pub(crate) flags: u8,
    pub(crate) path: &'s [u8],
    pub(crate) value: &'s [u8],
}

/// A spec that passed the request checks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CheckedSpec<'s> {
    pub(crate) rules: &'static OpRules,
    pub(crate) flags: u8,
    pub(crate) path: &'s [u8],
    pub(crate) value: &'s [u8],
}

impl CheckedSpec<'_> {
    pub(crate) fn op(&self) -> SpecOp {
        self.rules.op
    }
    pub(crate) fn is_xattr(&self) -> bool {
        self.flags & path_flag::XATTR != 0
    }
    pub(crate) fn mkdir_p(&self) -> bool {
        self.flags & path_flag::MKDIR_P != 0
    }
    pub(crate) fn expand_macros(&self) -> bool {
        self.flags & path_flag::EXPAND_MACROS != 0
    }
}

/// Checks the request as a whole; the first problem found is the request's status.
pub(crate) fn check_request<'s>(
    specs: &[RawSpec<'s>],
    mutator: bool,
    doc_flags: u8,
) -> Result<Vec<CheckedSpec<'s>>, Status> {
    check_doc_flags(mutator, doc_flags)?;
    if specs.is_empty() {
        return Err(Status::SubdocInvalidCombo);
    }
    let mut checked = Vec::with_capacity(specs.len().min(SUBDOC_SPECS_MAX));
    // Xattr specs must all come before body specs; a whole-document delete must be the only body spec and last.
    let mut xattrs_allowed = true;
    let mut more_allowed = true;
    for spec in specs.iter().take(SUBDOC_SPECS_MAX) {
        if !more_allowed {
            return Err(Status::SubdocInvalidCombo);
        }
        let spec = check_spec(spec, mutator, doc_flags)?;
        let removes_doc = spec.op() == SpecOp::RemoveDoc;
        if xattrs_allowed {
            xattrs_allowed = spec.is_xattr();
        } else if spec.is_xattr() {
            return Err(Status::SubdocInvalidXattrOrder);
        } else if removes_doc {
            return Err(Status::SubdocInvalidCombo);
        }
        more_allowed = !removes_doc;
        checked.push(spec);
    }
    if specs.len() > SUBDOC_SPECS_MAX {
        return Err(Status::SubdocInvalidCombo);
    }
    Ok(checked)
}

fn check_doc_flags(mutator: bool, doc_flags: u8) -> Result<(), Status> {
    let has = |flag: u8| doc_flags & flag != 0;
    let invalid = doc_flags & !doc_flag::ALL != 0
        || (mutator && has(doc_flag::MKDOC) && has(doc_flag::ADD))
        || (mutator && has(doc_flag::REVIVE_DOCUMENT) && !has(doc_flag::ACCESS_DELETED))
        || (mutator && has(doc_flag::REVIVE_DOCUMENT) && has(doc_flag::CREATE_AS_DELETED));
    if invalid {
        return Err(Status::Einval);
    }
    Ok(())
}

fn check_spec<'s>(spec: &RawSpec<'s>, mutator: bool, doc_flags: u8) -> Result<CheckedSpec<'s>, Status> {
    let rules = rules_for(spec.opcode).ok_or(Status::SubdocInvalidCombo)?;
    if rules.mutator != mutator {
        return Err(Status::SubdocInvalidCombo);
    }
    let flags = spec.flags;
    let einval = flags & !rules.valid_flags != 0
        || flags & rules.mandatory_flags != rules.mandatory_flags
        || doc_flags & !rules.valid_doc_flags != 0
        || spec.path.len() > SUBDOC_PATH_BYTES_MAX
        || (rules.whole_doc && !spec.path.is_empty());
    if einval {
        return Err(Status::Einval);
    }
    check_xattr_flags(spec, mutator)?;
    let xattr = flags & path_flag::XATTR != 0;
    if !xattr && !rules.allow_empty_path && spec.path.is_empty() {
        return Err(Status::Einval);
    }
    if rules.has_value == spec.value.is_empty() {
        return Err(Status::Einval);
    }
    Ok(CheckedSpec { rules, flags, path: spec.path, value: spec.value })
}

/// Flag combinations, the xattr key, virtual-xattr writes and macro names.
fn check_xattr_flags(spec: &RawSpec, mutator: bool) -> Result<(), Status> {
    let has = |flag: u8| spec.flags & flag != 0;
    if !has(path_flag::XATTR) {
        if has(path_flag::EXPAND_MACROS) || has(path_flag::BINARY_VALUE) {
            return Err(Status::SubdocXattrInvalidFlagCombo);
        }
        return Ok(());
    }
    if has(path_flag::BINARY_VALUE) && has(path_flag::EXPAND_MACROS) {
        return Err(Status::SubdocXattrInvalidFlagCombo);
    }
    if !is_valid_xattr_path(spec.path) {
        return Err(Status::XattrEinval);
    }
    if mutator && is_virtual_path(spec.path) {
        return Err(Status::SubdocXattrCantModifyVattr);
    }
    if has(path_flag::EXPAND_MACROS) && !is_known_macro(spec.value) {
        return Err(Status::SubdocXattrUnknownMacro);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(opcode: u8, flags: u8, path: &str) -> RawSpec<'_> {
        RawSpec { opcode, flags, path: path.as_bytes(), value: b"" }
    }

    fn mutation<'s>(opcode: u8, flags: u8, path: &'s str, value: &'s str) -> RawSpec<'s> {
        RawSpec { opcode, flags, path: path.as_bytes(), value: value.as_bytes() }
    }

    fn check(specs: &[RawSpec], mutator: bool) -> Result<(), Status> {
        check_request(specs, mutator, 0).map(|_| ())
    }

    /// Every opcode is in the table exactly once.
    #[test]
    fn table_has_each_opcode_once() {
        for rules in &TABLE {
            assert_eq!(TABLE.iter().filter(|r| r.code == rules.code).count(), 1);
        }
    }

    /// No specs, more than 16, unknown opcodes and opcodes of the other kind are INVALID_COMBO.
    #[test]
    fn bad_spec_lists_are_invalid_combo() {
        assert_eq!(check(&[], false), Err(Status::SubdocInvalidCombo));
        assert_eq!(check(&vec![lookup(op::GET, 0, "a"); 17], false), Err(Status::SubdocInvalidCombo));
        assert!(check(&vec![lookup(op::GET, 0, "a"); 16], false).is_ok());
        assert_eq!(check(&[lookup(0x42, 0, "a")], false), Err(Status::SubdocInvalidCombo));
        assert_eq!(check(&[mutation(op::DICT_ADD, 0, "a", "1")], false), Err(Status::SubdocInvalidCombo));
        assert_eq!(check(&[lookup(op::GET, 0, "a")], true), Err(Status::SubdocInvalidCombo));
    }

    /// A bad spec among the first 16 reports its own error rather than the count.
    #[test]
    fn early_spec_errors_win_over_the_count() {
        let mut specs = vec![lookup(op::GET, 0, "a"); 17];
        specs[3] = lookup(op::GET, 0, "");
        assert_eq!(check(&specs, false), Err(Status::Einval));
    }

    /// Xattr specs must precede body specs.
    #[test]
    fn xattrs_must_come_first() {
        let x = lookup(op::EXISTS, path_flag::XATTR, "_sync.cas");
        let body = lookup(op::EXISTS, 0, "meta.author");
        assert!(check(&[x, body], false).is_ok());
        assert_eq!(check(&[body, x], false), Err(Status::SubdocInvalidXattrOrder));
    }

    /// Flags outside an opcode's set, missing mandatory flags, bad paths and values are EINVAL.
    #[test]
    fn invalid_flags_paths_and_values_are_einval() {
        assert_eq!(check(&[lookup(op::GET, path_flag::MKDIR_P, "a")], false), Err(Status::Einval));
        assert_eq!(
            check(&[lookup(op::GET, path_flag::EXPAND_MACROS | path_flag::XATTR, "_a")], false),
            Err(Status::Einval)
        );
        assert_eq!(check(&[lookup(op::GET_DOC, path_flag::XATTR, "")], false), Err(Status::Einval));
        assert_eq!(check(&[lookup(op::GET_DOC, 0, "a")], false), Err(Status::Einval));
        assert_eq!(check(&[lookup(op::GET, 0, "")], false), Err(Status::Einval));
        assert_eq!(check(&[lookup(op::GET, 0, &"a".repeat(1025))], false), Err(Status::Einval));
        assert_eq!(check(&[mutation(op::DICT_UPSERT, 0, "a", "")], true), Err(Status::Einval));
        assert_eq!(check(&[mutation(op::REMOVE, 0, "a", "1")], true), Err(Status::Einval));
        assert_eq!(check(&[mutation(op::REPLACE, path_flag::MKDIR_P, "a", "1")], true), Err(Status::Einval));
        assert_eq!(check(&[mutation(op::REPLACE_BODY_WITH_XATTR, 0, "a", "")], true), Err(Status::Einval));
        assert_eq!(
            check(
                &[mutation(
                    op::ARRAY_ADD_UNIQUE,
                    path_flag::XATTR | path_flag::EXPAND_MACROS,
                    "_a",
                    "\"${Mutation.CAS}\""
                )],
                true
            ),
            Err(Status::Einval)
        );
        assert!(check(&[lookup(op::GET_COUNT, 0, "")], false).is_ok());
        assert!(check(&[mutation(op::ARRAY_PUSH_LAST, 0, "", "1")], true).is_ok());
    }

    /// Macros need the XATTR flag, BINARY_VALUE needs XATTR and excludes macros, and macro names must be known.
    #[test]
    fn xattr_flag_combinations() {
        let cas = "\"${Mutation.CAS}\"";
        let x = path_flag::XATTR;
        assert!(check(&[mutation(op::DICT_UPSERT, x | path_flag::EXPAND_MACROS, "_sync.cas", cas)], true).is_ok());
        assert_eq!(
            check(&[mutation(op::DICT_UPSERT, path_flag::EXPAND_MACROS, "_sync.cas", cas)], true),
            Err(Status::SubdocXattrInvalidFlagCombo)
        );
        assert_eq!(
            check(&[mutation(op::DICT_UPSERT, path_flag::BINARY_VALUE, "a", "1")], true),
            Err(Status::SubdocXattrInvalidFlagCombo)
        );
        assert_eq!(
            check(
                &[mutation(op::DICT_UPSERT, x | path_flag::BINARY_VALUE | path_flag::EXPAND_MACROS, "_a", cas)],
                true
            ),
            Err(Status::SubdocXattrInvalidFlagCombo)
        );
        assert_eq!(
            check(&[mutation(op::DICT_UPSERT, x | path_flag::EXPAND_MACROS, "_a", "${UnknownMacro}")], true),
            Err(Status::SubdocXattrUnknownMacro)
        );
        assert_eq!(
            check(&[mutation(op::DICT_UPSERT, x | path_flag::EXPAND_MACROS, "_a", "{\"a\":1}")], true),
            Err(Status::SubdocXattrUnknownMacro)
        );
        assert!(check(&[mutation(op::DICT_UPSERT, x | path_flag::EXPAND_MACROS, "_a", "\"${$document.CAS}\"")], true)
            .is_ok());
    }

    /// Xattr keys are validated (XATTR_EINVAL) and virtual xattrs cannot be written.
    #[test]
    fn xattr_keys_and_vattrs() {
        assert_eq!(
            check(&[lookup(op::EXISTS, path_flag::XATTR, "ThisIsASuperDuperLongPath")], false),
            Err(Status::XattrEinval)
        );
        assert!(check(&[lookup(op::GET, path_flag::XATTR, "$document.CAS")], false).is_ok());
        assert_eq!(
            check(&[mutation(op::DICT_UPSERT, path_flag::XATTR, "$document.CAS", "1")], true),
            Err(Status::SubdocXattrCantModifyVattr)
        );
    }

    /// A whole-document delete may follow xattr specs but nothing may follow it, and it must be the only body spec.
    #[test]
    fn remove_doc_must_be_the_last_and_only_body_spec() {
        let x = mutation(op::REPLACE, path_flag::XATTR, "_sync.cas", "1");
        let delete = mutation(op::REMOVE_DOC, 0, "", "");
        let body = mutation(op::DICT_UPSERT, 0, "a", "1");
        assert!(check(&[x, delete], true).is_ok());
        assert_eq!(check(&[delete, body], true), Err(Status::SubdocInvalidCombo));
        assert_eq!(check(&[body, delete], true), Err(Status::SubdocInvalidCombo));
        assert_eq!(check(&[delete, x], true), Err(Status::SubdocInvalidCombo));
    }

    /// Doc flags must be defined, compatible with each other and with every spec's opcode.
    #[test]
    fn doc_flags_are_checked() {
        let upsert = [mutation(op::DICT_UPSERT, 0, "a", "1")];
        assert!(check_request(&upsert, true, doc_flag::MKDOC).is_ok());
        assert_eq!(check_request(&upsert, true, doc_flag::MKDOC | doc_flag::ADD).map(|_| ()), Err(Status::Einval));
        assert_eq!(check_request(&upsert, true, 0x40).map(|_| ()), Err(Status::Einval));
        assert_eq!(check_request(&upsert, true, doc_flag::REVIVE_DOCUMENT).map(|_| ()), Err(Status::Einval));
        assert_eq!(check_request(&upsert, true, doc_flag::REPLICA_READ).map(|_| ()), Err(Status::Einval));
        let replace = [mutation(op::REPLACE, 0, "a", "1")];
        assert_eq!(check_request(&replace, true, doc_flag::MKDOC).map(|_| ()), Err(Status::Einval));
        let set = [mutation(op::SET_DOC, 0, "", "{}")];
        assert_eq!(check_request(&set, true, doc_flag::ACCESS_DELETED).map(|_| ()), Err(Status::Einval));
    }
}

//! SUBDOC_MULTI_MUTATION (and single-path mutations as one-spec requests): every spec applies, or none does.
//!
//! Specs run in request order against an in-memory view of the document (all xattrs as one object, then the
//! body); the first failure abandons the view, so the stored value is only ever replaced by a fully mutated one.
//! The value is rebuilt from the view at the end, copying every part no spec touched byte for byte.

use std::borrow::Cow;

use settee_types::limits::VALUE_BYTES_MAX;
use settee_types::Status;

use crate::edit::{End, Store};
use crate::macros::{expand, uses_crc32c, MutationFacts};
use crate::meta::DocMeta;
use crate::node::Node;
use crate::path::{parse_path, PathComponent};
use crate::spec::{check_request, doc_flag, CheckedSpec, RawSpec, SpecOp};
use crate::syntax::check_value;
use crate::tree::Tree;
use crate::xattr::{join_value, split_value, XattrView, Xattrs};
use crate::xattr_key::parse_xattr_path;

/// One mutation spec as it arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MutationSpec<'a> {
    pub opcode: u8,
    pub flags: u8,
    pub path: &'a [u8],
    pub value: &'a [u8],
}

/// What the engine decides for this mutation before it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MutationContext {
    /// The CAS the new value will be stored with, for `${Mutation.CAS}`.
    pub new_cas: u64,
    /// The seqno the new value will be stored with, for `${Mutation.seqno}`.
    pub new_seqno: u64,
    pub now_secs: u32,
    /// The request's doc flags (MKDOC, ADD, ACCESS_DELETED, CREATE_AS_DELETED, REVIVE_DOCUMENT). They are checked
    /// against every spec's opcode, and MKDOC and ADD imply MKDIR_P on every path, as on Couchbase.
    pub doc_flags: u8,
}

/// A successful mutation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutationOutcome {
    /// The new stored value: xattr section (if any) then body.
    pub value: Vec<u8>,
    pub has_xattr: bool,
    /// The body is valid JSON.
    pub is_json: bool,
    /// (spec index, value) for the specs that return a value, which are the counters.
    pub results: Vec<(u8, Vec<u8>)>,
    /// A REMOVE_DOC spec deleted the document: the body is empty and only system xattrs remain.
    pub delete_document: bool,
}

/// Why a mutation was refused: the first failing spec's index and status, or no index for a request-level error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("sub-document mutation refused with {status:?} (spec {index:?})")]
pub struct SpecFailure {
    pub index: Option<u8>,
    pub status: Status,
}

impl SpecFailure {
    fn request(status: Status) -> SpecFailure {
        SpecFailure { index: None, status }
    }
}

/// Applies all specs atomically. `existing` is the stored value and its XATTR datatype bit, or None when the
/// document does not exist and the request may create it (MKDOC, ADD, CREATE_AS_DELETED); a new document's body
/// starts as `{}`, or `[]` when the first path spec addresses an array at the root, or empty when created deleted.
/// For a deleted document the caller passes its remaining xattrs with an empty body.
pub fn mutate(
    existing: Option<(&[u8], bool)>,
    meta: &DocMeta,
    specs: &[MutationSpec],
    ctx: &MutationContext,
) -> Result<MutationOutcome, SpecFailure> {
    let raw: Vec<RawSpec> =
        specs.iter().map(|s| RawSpec { opcode: s.opcode, flags: s.flags, path: s.path, value: s.value }).collect();
    let specs = check_request(&raw, true, ctx.doc_flags).map_err(SpecFailure::request)?;
    let has = |flag: u8| ctx.doc_flags & flag != 0;
    if has(doc_flag::REVIVE_DOCUMENT) && existing.is_some() && !meta.deleted {
        return Err(SpecFailure::request(Status::SubdocCanOnlyReviveDeletedDocuments));
    }
    let (xattrs, body) = match existing {
        Some((value, has_xattr)) => split_value(value, has_xattr).map_err(SpecFailure::request)?,
        None => (Xattrs::new(), initial_body(&specs, ctx.doc_flags)),
    };
    let view = xattrs.view().map_err(SpecFailure::request)?;
    let run = Run { view: &view, meta, mkdir_p: has(doc_flag::MKDOC) || has(doc_flag::ADD) };
    let mut facts = MutationFacts { cas: ctx.new_cas, seqno: ctx.new_seqno, crc32c: 0 };
    let mut state = run.apply(&specs, body, &facts)?;
    if specs.iter().any(|s| s.expand_macros() && uses_crc32c(s.value)) {
        // `${Mutation.value_crc32c}` is the CRC of the final body, known only after every spec ran, so the specs
        // run a second time with it filled in. The body comes out the same, since only REPLACE_BODY_WITH_XATTR lets
        // an xattr reach the body; copying the CRC into the very body it describes is circular on Couchbase too.
        facts.crc32c = crc32c::crc32c(&state.final_body());
        state = run.apply(&specs, body, &facts)?;
    }
    let stays_deleted = if existing.is_some() { meta.deleted } else { has(doc_flag::CREATE_AS_DELETED) };
    state.finish(stays_deleted && !has(doc_flag::REVIVE_DOCUMENT))
}

/// The body a document created by this request starts with, following Couchbase's choice of root.
fn initial_body(specs: &[CheckedSpec], doc_flags: u8) -> &'static [u8] {
    if doc_flags & doc_flag::CREATE_AS_DELETED != 0 {
        return b"";
    }
    let first = specs.iter().find(|s| !s.rules.whole_doc && s.op() != SpecOp::ReplaceBodyWithXattr);
    let Some(first) = first else {
        return b"";
    };
    let pushes = matches!(first.op(), SpecOp::ArrayPushLast | SpecOp::ArrayPushFirst | SpecOp::ArrayAddUnique);
    let array_root = !first.is_xattr() && (first.path.first() == Some(&b'[') || (first.path.is_empty() && pushes));
    if array_root {
        b"[]"
    } else {
        b"{}"
    }
}

/// The request-wide inputs of a run over the specs.
struct Run<'r, 'a> {
    view: &'r XattrView<'a>,
    meta: &'r DocMeta,
    /// MKDOC or ADD: every path behaves as if MKDIR_P were set.
    mkdir_p: bool,
}

impl<'a> Run<'_, 'a> {
    fn apply(
        &self,
        specs: &[CheckedSpec<'a>],
        body: &'a [u8],
        facts: &MutationFacts,
    ) -> Result<State<'a>, SpecFailure> {
        let mut state = State {
            xattrs: self.view.tree(),
            body: Body::new(Cow::Borrowed(body)),
            original_body: body,
            body_touched: false,
            results: Vec::new(),
            delete_document: false,
        };
        for (index, spec) in specs.iter().enumerate() {
            // At most SUBDOC_SPECS_MAX (16) specs pass the request checks, so every index fits a u8.
            let index = u8::try_from(index).unwrap_or(u8::MAX);
            match self.run_spec(&mut state, spec, facts) {
                Ok(Some(value)) => state.results.push((index, value)),
                Ok(None) => {}
                Err(status) => return Err(SpecFailure { index: Some(index), status }),
            }
        }
        Ok(state)
    }

    fn run_spec(
        &self,
        state: &mut State<'a>,
        spec: &CheckedSpec<'a>,
        facts: &MutationFacts,
    ) -> Result<Option<Vec<u8>>, Status> {
        let mkdir_p = self.mkdir_p || spec.mkdir_p();
        match spec.op() {
            SpecOp::SetDoc => state.set_body(Body::new(Cow::Borrowed(spec.value))),
            SpecOp::RemoveDoc => {
                state.set_body(Body::Other(Cow::Borrowed(&[])));
                state.delete_document = true;
            }
            SpecOp::ReplaceBodyWithXattr => {
                let path = parse_xattr_path(spec.path)?;
                let text = state.xattrs.get(&path.components)?;
                state.set_body(Body::new(Cow::Owned(text)));
            }
            _ if spec.is_xattr() => {
                // Couchbase expands a macro before it looks at the path.
                let expanded = match spec.expand_macros() {
                    true => Some(expand(spec.value, facts, self.meta)?),
                    false => None,
                };
                let path = parse_xattr_path(spec.path)?;
                let value = match expanded {
                    Some(text) => Cow::Owned(text),
                    None => value_text(spec)?,
                };
                return edit(spec.op(), &mut state.xattrs, &path.components, value, mkdir_p);
            }
            _ => {
                let Body::Json(tree) = &mut state.body else {
                    return Err(Status::SubdocDocNotjson);
                };
                let path = parse_path(spec.path)?;
                let result = edit(spec.op(), tree, &path.components, value_text(spec)?, mkdir_p)?;
                state.body_touched = true;
                return Ok(result);
            }
        }
        Ok(None)
    }
}

/// The spec's value as text; a value that is not UTF-8 cannot be JSON.
fn value_text<'a>(spec: &CheckedSpec<'a>) -> Result<Cow<'a, str>, Status> {
    match std::str::from_utf8(spec.value) {
        Ok(text) => Ok(Cow::Borrowed(text)),
        Err(_) if spec.op() == SpecOp::Counter => Err(Status::SubdocDeltaEinval),
        Err(_) => Err(Status::SubdocValueCantinsert),
    }
}

/// Runs one path mutation; only counters return a value.
fn edit<'a>(
    op: SpecOp,
    tree: &mut Tree<'a>,
    path: &[PathComponent],
    value: Cow<'a, str>,
    mkdir_p: bool,
) -> Result<Option<Vec<u8>>, Status> {
    match op {
        SpecOp::DictAdd => tree.dict_store(path, value, Store::Add, mkdir_p),
        SpecOp::DictUpsert => tree.dict_store(path, value, Store::Upsert, mkdir_p),
        SpecOp::Remove => tree.remove(path),
        SpecOp::Replace => tree.replace(path, value),
        SpecOp::ArrayPushLast => tree.push(path, value, End::Last, mkdir_p),
        SpecOp::ArrayPushFirst => tree.push(path, value, End::First, mkdir_p),
        SpecOp::ArrayInsert => tree.insert(path, value),
        SpecOp::ArrayAddUnique => tree.add_unique(path, value, mkdir_p),
        SpecOp::Counter => return tree.counter(path, &value, mkdir_p).map(|v| Some(v.into_bytes())),
        // The request checks admit only mutation opcodes, and whole-document ones never get here.
        _ => Err(Status::Einternal),
    }
    .map(|()| None)
}

/// A document body: JSON that path specs can work on, or anything else.
enum Body<'a> {
    Json(Tree<'a>),
    Other(Cow<'a, [u8]>),
}

impl<'a> Body<'a> {
    fn new(bytes: Cow<'a, [u8]>) -> Body<'a> {
        match bytes {
            Cow::Borrowed(b) => match std::str::from_utf8(b).ok().and_then(Tree::parse) {
                Some(tree) => Body::Json(tree),
                None => Body::Other(Cow::Borrowed(b)),
            },
            Cow::Owned(b) => match String::from_utf8(b) {
                Ok(text) => match check_value(&text) {
                    Some(levels) => Body::Json(Tree::new(Node::text(Cow::Owned(text)), levels)),
                    None => Body::Other(Cow::Owned(text.into_bytes())),
                },
                Err(e) => Body::Other(Cow::Owned(e.into_bytes())),
            },
        }
    }

    fn bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Body::Json(tree) => match tree.to_text() {
                Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
                Cow::Owned(text) => Cow::Owned(text.into_bytes()),
            },
            Body::Other(bytes) => Cow::Borrowed(bytes),
        }
    }
}

/// The document as the specs have left it so far.
struct State<'a> {
    xattrs: Tree<'a>,
    body: Body<'a>,
    /// The body as stored, returned unchanged (whitespace included) when no spec touched the body.
    original_body: &'a [u8],
    body_touched: bool,
    results: Vec<(u8, Vec<u8>)>,
    delete_document: bool,
}

impl<'a> State<'a> {
    fn set_body(&mut self, body: Body<'a>) {
        self.body = body;
        self.body_touched = true;
    }

    fn final_body(&self) -> Cow<'_, [u8]> {
        if self.delete_document {
            Cow::Borrowed(&[])
        } else if self.body_touched {
            self.body.bytes()
        } else {
            Cow::Borrowed(self.original_body)
        }
    }

    /// Builds the new stored value. `stays_deleted`: the document is deleted and not being revived, so it may
    /// not end up with a body.
    fn finish(self, stays_deleted: bool) -> Result<MutationOutcome, SpecFailure> {
        let mut xattrs = Xattrs::from_tree(&self.xattrs).map_err(SpecFailure::request)?;
        if self.delete_document {
            xattrs.retain_system();
        }
        let body = self.final_body();
        if stays_deleted && !body.is_empty() {
            return Err(SpecFailure::request(Status::SubdocDeletedDocumentCantHaveValue));
        }
        let (value, has_xattr) = join_value(&xattrs, &body);
        if value.len() > VALUE_BYTES_MAX {
            return Err(SpecFailure::request(Status::E2big));
        }
        let is_json = !self.delete_document && matches!(self.body, Body::Json(_));
        Ok(MutationOutcome { value, has_xattr, is_json, results: self.results, delete_document: self.delete_document })
    }
}

#[cfg(test)]
#[path = "mutation_tests.rs"]
mod tests;

//! A replication's document filters: `filterExpression` (compiled once per run as a
//! `settee_query::index::DocFilter`) and the `filterDeletion` / `filterExpiration` / `filterBinary` switches,
//! applied by the runner before a change reaches the core; and [`DocInput`], a change read once as the evaluator
//! sees a document, shared by the filter and the migration rules.

use std::sync::Arc;

use settee_query::datastore::DocMeta;
use settee_query::index::DocFilter;
use settee_types::Datatype;
use settee_xdcr::{Change, ChangeKind};

use super::model::ReplSettings;

/// A change as a filter evaluates it: its key, its JSON body without xattrs (MISSING for a binary document) and
/// its metadata.
pub struct DocInput {
    id: Arc<str>,
    doc: settee_query::Value,
    meta: DocMeta,
}

impl DocInput {
    pub fn of(c: &Change) -> DocInput {
        let datatype = Datatype(c.datatype);
        let is_json = datatype.is_json();
        let body = match settee_doc::split_value(&c.value, datatype.has_xattr()) {
            Ok((_, body)) => body,
            Err(_) => &c.value[..],
        };
        let doc = if is_json { settee_query::Value::from_json(body).unwrap_or_default() } else { Default::default() };
        let meta = DocMeta { cas: c.cas, expiration: c.expiry, flags: c.flags, is_json };
        DocInput { id: Arc::from(String::from_utf8_lossy(&c.key).as_ref()), doc, meta }
    }

    /// Whether `filter` is true of the document; one it cannot evaluate does not match (goxdcr counts it as
    /// unable to filter and does not replicate it).
    pub fn matches(&self, filter: &DocFilter) -> bool {
        filter.matches(&self.id, &self.doc, &self.meta).unwrap_or(false)
    }
}

/// The filters of one run of a replication.
pub struct Filters {
    expression: Option<DocFilter>,
    deletion: bool,
    expiration: bool,
    binary: bool,
}

impl Filters {
    pub fn new(settings: &ReplSettings, replication: &str) -> Filters {
        let expression = match settings.filter_expression.as_str() {
            "" => None,
            text => match DocFilter::compile(text) {
                Ok(f) => Some(f),
                Err(e) => {
                    // Checked when it was set: only a filter stored by another version could fail here. Nothing
                    // is replicated rather than everything.
                    tracing::error!(replication, error = %e, "xdcr filter expression does not compile");
                    Some(DocFilter::compile("FALSE").expect("a literal compiles"))
                }
            },
        };
        Filters {
            expression,
            deletion: settings.filter_deletion,
            expiration: settings.filter_expiration,
            binary: settings.filter_binary,
        }
    }

    /// Whether [`Self::passes`] reads the document of `c`.
    pub fn needs_document(&self, c: &Change) -> bool {
        self.expression.is_some() && c.kind == ChangeKind::Mutation
    }

    /// Whether the filters let `c` through: deletions and expirations unless `filterDeletion` /
    /// `filterExpiration`; a document that is not JSON unless `filterBinary`; then the filter expression over
    /// `doc` (given when [`Self::needs_document`]).
    pub fn passes(&self, c: &Change, doc: Option<&DocInput>) -> bool {
        match c.kind {
            ChangeKind::Deletion => return !self.deletion,
            ChangeKind::Expiration => return !self.expiration,
            ChangeKind::Mutation => {}
        }
        if self.binary && !Datatype(c.datatype).is_json() {
            return false;
        }
        match (&self.expression, doc) {
            (None, _) => true,
            (Some(filter), Some(doc)) => doc.matches(filter),
            (Some(_), None) => false,
        }
    }
}

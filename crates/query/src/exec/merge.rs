//! MERGE: for each source row, find the target documents it matches (by key for a lookup merge, by the ON
//! condition for an ANSI merge) and update or delete each of them, or insert when it matches none
//! (Couchbase's `execution/merge.go`). A target may be changed only once per statement: a second UPDATE or DELETE
//! of the same document fails the statement with 5320.

use std::collections::HashSet;
use std::sync::Arc;

use super::dml::{current_meta, delete, insert, update};
use super::eval::eval;
use super::ops::build as build_op;
use super::{Cx, Row, RowMeta};
use crate::plan::{CExpr, DmlKind, DmlNode};
use crate::value::Value;
use crate::QueryError;

/// Applies MERGE's actions for one source row; returns the rows it changed (for RETURNING and the count).
pub(super) fn merge(
    d: &DmlNode,
    mut row: Row,
    cx: &Cx<'_>,
    merged: &mut HashSet<Arc<str>>,
) -> Result<Vec<Row>, QueryError> {
    let mut changed = Vec::new();
    let mut matched = false;
    if let Some(key) = &d.merge_key {
        let key = eval(key, &mut row, cx)?;
        let Value::String(k) = key else {
            return Err(QueryError::ExecutionValue(format!("Invalid MERGE key {}.", key.to_json_string())));
        };
        if let Some(doc) = d.ks.keyspace.fetch(&[k])?.into_iter().next().flatten() {
            let keyspace = Arc::from(d.ks.name.display_path());
            let meta = RowMeta { id: doc.key, meta: doc.meta, keyspace };
            row.set_doc(d.slot, doc.value, Some(Arc::new(meta)));
            matched = true;
            changed.extend(when_matched(d, row.clone(), cx, merged)?);
        }
    } else if let (Some(scan), Some(cond)) = (&d.merge_scan, &d.merge_cond) {
        // ANSI merge: every target document the condition accepts.
        let mut targets = build_op(scan, &row);
        while let Some(mut t) = targets.next(cx)? {
            if eval(cond, &mut t, cx)?.truth() {
                matched = true;
                changed.extend(when_matched(d, t, cx, merged)?);
            }
        }
    }
    if !matched {
        if let Some((tuple, w)) = &d.merge.insert {
            if passes(w.as_ref(), &mut row, cx)? && insert(d, DmlKind::Insert, tuple, &mut row, cx)?.is_some() {
                changed.push(row);
            }
        }
    }
    Ok(changed)
}

/// WHEN MATCHED: the UPDATE whose WHERE holds, else the DELETE whose WHERE holds; each target once.
fn when_matched(
    d: &DmlNode,
    mut row: Row,
    cx: &Cx<'_>,
    merged: &mut HashSet<Arc<str>>,
) -> Result<Option<Row>, QueryError> {
    let key = current_meta(&row, d.slot)?.id.clone();
    let updates = match &d.merge.update {
        Some((_, w)) => passes(w.as_ref(), &mut row, cx)?,
        None => false,
    };
    let deletes = match &d.merge.delete {
        Some(w) => passes(w.as_ref(), &mut row, cx)?,
        None => false,
    };
    if !updates && !deletes {
        return Ok(None);
    }
    // A document both updated and deleted, or matched by two source rows, is changed twice.
    if (updates && deletes) || !merged.insert(key.clone()) {
        return Err(QueryError::MergeMultiUpdate(key.to_string()));
    }
    let done = match &d.merge.update {
        Some((set, _)) if updates => update(d, set, &mut row, cx)?,
        _ => delete(d, &mut row, cx)?,
    };
    Ok(done.map(|_| row))
}

fn passes(w: Option<&CExpr>, row: &mut Row, cx: &Cx<'_>) -> Result<bool, QueryError> {
    Ok(match w {
        Some(w) => eval(w, row, cx)?.truth(),
        None => true,
    })
}

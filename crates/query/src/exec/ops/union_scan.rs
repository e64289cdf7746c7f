//! The documents of several index scans, each once: an OR whose terms different indexes serve reads one scan per
//! term, one after the other, and fetches each document id the first time any scan reads it.

use std::collections::HashSet;
use std::sync::Arc;

use super::index_scan::Entries;
use super::scan::fetch_rows;
use super::{Op, Ready};
use crate::exec::{Cx, Row};
use crate::plan::{IndexScanPlan, KeyspaceHandle, Slot};
use crate::QueryError;

pub(super) struct UnionScan<'p> {
    ks: &'p KeyspaceHandle,
    slot: Slot,
    base: Row,
    scans: Vec<Entries<'p>>,
    /// The scan being read.
    current: usize,
    /// Document ids fetched so far.
    seen: HashSet<Arc<str>>,
    ready: Ready,
}

impl<'p> UnionScan<'p> {
    pub(super) fn new(ks: &'p KeyspaceHandle, slot: Slot, scans: &'p [IndexScanPlan], base: &Row) -> UnionScan<'p> {
        UnionScan {
            ks,
            slot,
            base: base.clone(),
            scans: scans.iter().map(Entries::new).collect(),
            current: 0,
            seen: HashSet::new(),
            ready: Ready::new(),
        }
    }
}

impl Op for UnionScan<'_> {
    fn next(&mut self, cx: &Cx<'_>) -> Result<Option<Row>, QueryError> {
        loop {
            // Checked per row, not per chunk: a timed-out request must not hand out thousands of buffered rows.
            cx.check()?;
            if let Some(row) = self.ready.pop_front() {
                return Ok(Some(row));
            }
            let Some(scan) = self.scans.get_mut(self.current) else { return Ok(None) };
            let Some(entries) = scan.next_chunk(&self.base, cx)? else {
                self.current += 1;
                continue;
            };
            let mut keys = Vec::with_capacity(entries.len());
            for e in entries {
                if self.seen.contains(&e.doc_id) {
                    continue;
                }
                cx.memory.charge(48 + e.doc_id.len())?;
                self.seen.insert(e.doc_id.clone());
                keys.push(e.doc_id);
            }
            fetch_rows(self.ks, &keys, &self.base, self.slot, cx, &mut self.ready)?;
        }
    }
}

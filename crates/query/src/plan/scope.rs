//! Name scopes during compilation: which names are bound to which slots, and which FROM term an unqualified
//! field belongs to.
//!
//! A query block (a SELECT, or a DML statement) opens a frame; range variables (ANY ... IN, ARRAY ... FOR) open
//! nested frames that see everything outside them. A subquery's block sees the names of the blocks around it,
//! which is what makes it correlated.

use super::Slot;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VarKind {
    /// A FROM term (keyspace, subquery, expression, unnest): its slot holds a document, and META() may ask for it.
    Term { is_keyspace: bool },
    /// A LET / LETTING / WITH / GROUP BY alias or range variable.
    Variable,
}

struct Frame {
    vars: Vec<(String, Slot, VarKind)>,
    /// Whether this frame starts a query block (the default FROM term is looked up per block).
    block: bool,
    /// The block's FROM terms, in order.
    terms: Vec<(String, Slot)>,
}

/// The stack of scopes of the statement being compiled, and its slot counter.
pub(crate) struct Scopes {
    frames: Vec<Frame>,
    next_slot: Slot,
}

impl Scopes {
    pub fn new() -> Scopes {
        Scopes { frames: vec![Frame { vars: Vec::new(), block: true, terms: Vec::new() }], next_slot: 0 }
    }

    /// A fresh slot.
    pub fn alloc(&mut self) -> Slot {
        self.next_slot += 1;
        self.next_slot - 1
    }

    /// How many slots the statement uses so far.
    pub fn slot_count(&self) -> usize {
        self.next_slot
    }

    pub fn push_block(&mut self) {
        self.frames.push(Frame { vars: Vec::new(), block: true, terms: Vec::new() });
    }

    pub fn push(&mut self) {
        self.frames.push(Frame { vars: Vec::new(), block: false, terms: Vec::new() });
    }

    pub fn pop(&mut self) {
        self.frames.pop();
    }

    fn top(&mut self) -> &mut Frame {
        // The constructor pushes the outermost frame and pops are paired with pushes.
        self.frames.last_mut().expect("the outermost frame is never popped")
    }

    /// Binds `name` in the innermost frame to a new slot.
    pub fn bind(&mut self, name: &str, kind: VarKind) -> Slot {
        let slot = self.alloc();
        self.bind_slot(name, slot, kind);
        slot
    }

    pub fn bind_slot(&mut self, name: &str, slot: Slot, kind: VarKind) {
        let top = self.top();
        top.vars.push((name.to_string(), slot, kind));
        if let VarKind::Term { .. } = kind {
            // The nearest block frame owns the term.
            if let Some(block) = self.frames.iter_mut().rev().find(|f| f.block) {
                block.terms.push((name.to_string(), slot));
            }
        }
    }

    /// Whether `name` is already bound in the current block (for duplicate-alias checks).
    pub fn bound_in_block(&self, name: &str) -> bool {
        for f in self.frames.iter().rev() {
            if f.vars.iter().any(|(n, _, _)| n == name) {
                return true;
            }
            if f.block {
                break;
            }
        }
        false
    }

    /// The slot and kind `name` is bound to, innermost first.
    pub fn lookup(&self, name: &str) -> Option<(Slot, VarKind)> {
        self.frames.iter().rev().flat_map(|f| f.vars.iter().rev()).find(|(n, _, _)| n == name).map(|(_, s, k)| (*s, *k))
    }

    /// The FROM terms of the innermost block that has any.
    pub fn block_terms(&self) -> Option<&[(String, Slot)]> {
        self.frames.iter().rev().filter(|f| f.block).map(|f| f.terms.as_slice()).find(|t| !t.is_empty())
    }

    /// The FROM terms of the innermost block.
    pub fn current_block_terms(&self) -> &[(String, Slot)] {
        self.frames.iter().rev().find(|f| f.block).map(|f| f.terms.as_slice()).unwrap_or(&[])
    }
}

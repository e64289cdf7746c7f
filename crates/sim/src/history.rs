//! What the clients did: every operation's invocation and completion time and outcome, per key, and the
//! linearizability check of each key's history against a register with compare-and-set (the Wing & Gong search
//! with memoised states, as Knossos and Porcupine do it).
//!
//! Written values are unique, so a CAS that names the CAS of a value read is a compare-and-set on that value.
//! A write whose outcome is unknown (a timeout, SYNC_WRITE_AMBIGUOUS, a crash with the request in flight) may
//! take effect at any time after its invocation, or never; an operation that definitely failed never did, and
//! is left out.

use std::collections::HashSet;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Read,
    Write(u64),
    /// Replace the value `expect` (read before) with `new`.
    Cas {
        expect: u64,
        new: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done: a read's value (None: not found); None for writes.
    Ok(Option<u64>),
    /// Definitely not applied (a refusal, a CAS mismatch).
    Failed,
    /// May or may not have been applied.
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Op {
    pub client: usize,
    pub key: usize,
    pub kind: OpKind,
    pub invoke: Duration,
    pub complete: Duration,
    pub outcome: Outcome,
}

/// The verdict on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    /// No order of the operations explains what the clients saw.
    Violation,
    /// The search gave up (too many interleavings); neither proven nor refuted.
    Inconclusive,
}

const SEARCH_STEPS_MAX: u64 = 2_000_000;

/// The completion time by which a non-linearizable history first becomes one: the shortest prefix of operations
/// (by completion, unknown ones included by invocation) that no order explains. For reports.
pub fn first_violation(ops: &[Op]) -> Option<Duration> {
    let mut times: Vec<Duration> = ops.iter().map(|o| o.complete).collect();
    times.sort();
    times.dedup();
    let upto = |t: Duration| -> Vec<Op> { ops.iter().filter(|o| o.complete <= t).cloned().collect() };
    let (mut lo, mut hi) = (0usize, times.len());
    if hi == 0 || check_key(&upto(times[hi - 1])) != Verdict::Violation {
        return None;
    }
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if check_key(&upto(times[mid - 1])) == Verdict::Violation {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(times[hi - 1])
}

/// Checks one key's operations (all of the same key).
pub fn check_key(ops: &[Op]) -> Verdict {
    let mut ops: Vec<&Op> = ops
        .iter()
        .filter(|o| match o.outcome {
            Outcome::Failed => false,
            Outcome::Unknown => o.kind != OpKind::Read,
            Outcome::Ok(_) => true,
        })
        .collect();
    ops.sort_by_key(|o| o.invoke);
    let mut search = Search { ops: &ops, seen: HashSet::new(), steps: 0 };
    let mut done = vec![false; ops.len()];
    match search.run(&mut done, None) {
        Some(true) => Verdict::Linearizable,
        Some(false) => Verdict::Violation,
        None => Verdict::Inconclusive,
    }
}

struct Search<'a> {
    ops: &'a [&'a Op],
    seen: HashSet<(Vec<bool>, Option<u64>)>,
    steps: u64,
}

impl Search<'_> {
    /// Whether the operations not `done` can follow from `state`; None when the search ran out of steps.
    fn run(&mut self, done: &mut Vec<bool>, state: Option<u64>) -> Option<bool> {
        self.steps += 1;
        if self.steps > SEARCH_STEPS_MAX {
            return None;
        }
        let required_left = self.ops.iter().zip(done.iter()).any(|(o, d)| !d && o.outcome != Outcome::Unknown);
        if !required_left {
            return Some(true);
        }
        if !self.seen.insert((done.clone(), state)) {
            return Some(false);
        }
        // An operation can come next only if it was invoked before every pending one that completed.
        let horizon = self
            .ops
            .iter()
            .zip(done.iter())
            .filter(|(o, d)| !**d && o.outcome != Outcome::Unknown)
            .map(|(o, _)| o.complete)
            .min()
            .unwrap_or(Duration::MAX);
        for i in 0..self.ops.len() {
            let op = self.ops[i];
            if done[i] || op.invoke > horizon {
                continue;
            }
            let Some(next) = step(op, state) else { continue };
            done[i] = true;
            let r = self.run(done, next);
            done[i] = false;
            match r {
                Some(true) => return Some(true),
                None => return None,
                Some(false) => {}
            }
        }
        Some(false)
    }
}

/// The register's state after `op`, if `op` can happen in `state` with the outcome it had.
fn step(op: &Op, state: Option<u64>) -> Option<Option<u64>> {
    match (op.kind, op.outcome) {
        (OpKind::Read, Outcome::Ok(seen)) => (seen == state).then_some(state),
        (OpKind::Read, _) => None,
        (OpKind::Write(v), _) => Some(Some(v)),
        (OpKind::Cas { expect, new }, _) => (state == Some(expect)).then_some(Some(new)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: OpKind, invoke: u64, complete: u64, outcome: Outcome) -> Op {
        let ms = Duration::from_millis;
        Op { client: 0, key: 0, kind, invoke: ms(invoke), complete: ms(complete), outcome }
    }

    /// A read of a value written and acknowledged before it is fine; a read after an acknowledged overwrite that
    /// returns the old value is a violation (a lost or stale write); overlapping operations may take either order.
    #[test]
    fn stale_reads_after_acknowledged_writes_are_violations() {
        let ok = Outcome::Ok(None);
        let good = [
            op(OpKind::Write(1), 0, 10, ok),
            op(OpKind::Write(2), 20, 30, ok),
            op(OpKind::Read, 25, 26, Outcome::Ok(Some(1))),
            op(OpKind::Read, 40, 41, Outcome::Ok(Some(2))),
        ];
        assert_eq!(check_key(&good), Verdict::Linearizable);
        let lost = [
            op(OpKind::Write(1), 0, 10, ok),
            op(OpKind::Write(2), 20, 30, ok),
            op(OpKind::Read, 40, 41, Outcome::Ok(Some(1))),
        ];
        assert_eq!(check_key(&lost), Verdict::Violation);
        let vanished = [op(OpKind::Write(1), 0, 10, ok), op(OpKind::Read, 40, 41, Outcome::Ok(None))];
        assert_eq!(check_key(&vanished), Verdict::Violation);
    }

    /// An unknown write may have happened (a later read sees it) or not (a later read does not), but not both
    /// ways in one history; a failed CAS is left out; a successful CAS needs its expected value.
    #[test]
    fn unknown_writes_may_or_may_not_apply_but_once() {
        let ok = Outcome::Ok(None);
        let seen = [op(OpKind::Write(7), 0, 10, Outcome::Unknown), op(OpKind::Read, 20, 21, Outcome::Ok(Some(7)))];
        assert_eq!(check_key(&seen), Verdict::Linearizable);
        let unseen = [op(OpKind::Write(7), 0, 10, Outcome::Unknown), op(OpKind::Read, 20, 21, Outcome::Ok(None))];
        assert_eq!(check_key(&unseen), Verdict::Linearizable);
        let flapping = [
            op(OpKind::Write(1), 0, 5, ok),
            op(OpKind::Write(7), 10, 11, Outcome::Unknown),
            op(OpKind::Read, 20, 21, Outcome::Ok(Some(7))),
            op(OpKind::Read, 30, 31, Outcome::Ok(Some(1))),
        ];
        assert_eq!(check_key(&flapping), Verdict::Violation);
        let cas = [
            op(OpKind::Write(1), 0, 5, ok),
            op(OpKind::Cas { expect: 9, new: 3 }, 10, 11, Outcome::Failed),
            op(OpKind::Cas { expect: 1, new: 2 }, 12, 13, ok),
            op(OpKind::Read, 20, 21, Outcome::Ok(Some(2))),
        ];
        assert_eq!(check_key(&cas), Verdict::Linearizable);
        let bad_cas = [op(OpKind::Write(1), 0, 5, ok), op(OpKind::Cas { expect: 4, new: 2 }, 12, 13, ok)];
        assert_eq!(check_key(&bad_cas), Verdict::Violation);
    }
}

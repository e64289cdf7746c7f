//! The replies of one connection's durable writes while they wait for their outcomes (under unordered execution
//! many at once, otherwise one), with one deadline queue for all of them.
//!
//! The thread that completes a durable write (the DCP producer applying a replica's acknowledgement, a flusher)
//! queues its outcome in the connection's [`Inbox`] and notifies the connection's task, which a burst of outcomes
//! wakes once; the connection takes the ready replies on its own worker thread and sends them together. Each reply
//! used to be a task of its own with its own durability timer and channel; here the connection keeps the replies
//! in a map and their deadlines in one ordered set, with a single timer armed at the earliest deadline: per durable
//! write no task, no timer and no cross-thread wake-up of its own.
//!
//! The DCP producer applies a replica's acknowledgements for several vBuckets from one read; it holds the
//! connections' notifications back until it has applied them all ([`hold_outcomes`], [`release_outcomes`]), so a
//! connection whose writes complete in that pass is woken once, not once per vBucket while it is already taking
//! the first outcomes on its own thread.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::pin::Pin;
use std::sync::Arc;

use settee_engine::EngineError;
use tokio::time::{Instant, Sleep};

use super::pending::{Outcome, Pending};
use crate::held_wakes::{Held, Wakeable};
use crate::timings::OpTimer;

/// The outcomes of one connection's durable writes, handed over by the threads that complete them. Holds at most
/// the connection's durable writes in flight (`INFLIGHT_MAX`). Its lock is a leaf: taken with no other lock held,
/// by engine waiters (called with no vBucket lock held) and by the connection.
#[derive(Default)]
pub struct Inbox {
    done: parking_lot::Mutex<Vec<(u64, Outcome)>>,
    notify: tokio::sync::Notify,
}

impl Inbox {
    /// The durable write `token` of the connection is complete.
    pub(crate) fn deliver(self: &Arc<Self>, token: u64, outcome: Outcome) {
        self.done.lock().push((token, outcome));
        Held::wake(&HELD, self);
    }
}

impl Wakeable for Inbox {
    fn notify(&self) -> &tokio::sync::Notify {
        &self.notify
    }
}

thread_local! {
    /// The connections this thread notifies at [`release_outcomes`].
    static HELD: RefCell<Held<Inbox>> = const { RefCell::new(Held::new()) };
}

/// From now until [`release_outcomes`], connections whose durable writes complete on this thread are notified only
/// then. The caller must release before it awaits anything.
pub(crate) fn hold_outcomes() {
    Held::hold(&HELD);
}

/// Notifies, once each, the connections given outcomes since [`hold_outcomes`], and stops holding.
pub(crate) fn release_outcomes() {
    Held::release(&HELD);
}

struct Waiting {
    pending: Pending,
    timer: OpTimer,
    deadline: Instant,
}

/// The connection's durable writes that wait for their outcomes. Dropping it (the connection ended) drops each
/// [`Pending`], which aborts its prepare so that the key is free again; outcomes that arrive later are dropped with
/// the inbox.
pub(crate) struct DurableReplies {
    inbox: Arc<Inbox>,
    waiting: HashMap<u64, Waiting>,
    /// Each waiting write's deadline, earliest first.
    deadlines: BTreeSet<(Instant, u64)>,
    /// One timer for the connection, made at its first durable write and armed at the earliest deadline; left
    /// armed when that write completes first (it then fires early once, and is armed again).
    timer: Option<Pin<Box<Sleep>>>,
    armed: Option<Instant>,
    /// The inbox's outcomes are swapped out into this list, so both keep their allocation.
    taken: Vec<(u64, Outcome)>,
}

impl DurableReplies {
    pub(crate) fn new(inbox: Arc<Inbox>) -> DurableReplies {
        DurableReplies {
            inbox,
            waiting: HashMap::new(),
            deadlines: BTreeSet::new(),
            timer: None,
            armed: None,
            taken: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Holds `pending`'s reply until its outcome arrives or its durability timeout passes.
    pub(crate) fn insert(&mut self, pending: Pending, timer: OpTimer) {
        let token = pending.token();
        let deadline = Instant::now() + pending.timeout();
        self.deadlines.insert((deadline, token));
        self.waiting.insert(token, Waiting { pending, timer, deadline });
    }

    /// Waits until an outcome has arrived or a deadline has passed; then [`Self::take_ready`] has something to do
    /// (or nothing, when the timer fired for a write that had completed). Cancel-safe: a notification received by
    /// a cancelled wait is kept for the next.
    pub(crate) async fn changed(&mut self) {
        let Some(&(earliest, _)) = self.deadlines.first() else { return self.inbox.notify.notified().await };
        if self.armed.is_none_or(|at| at > earliest) {
            match &mut self.timer {
                Some(t) => t.as_mut().reset(earliest),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(earliest))),
            }
            self.armed = Some(earliest);
        }
        let Self { inbox, timer, armed, .. } = self;
        let Some(timer) = timer.as_mut() else { return inbox.notify.notified().await };
        tokio::select! {
            () = inbox.notify.notified() => {}
            () = timer.as_mut() => *armed = None,
        }
    }

    /// Hands `f` each reply whose outcome has arrived, and for each write whose deadline has passed, its prepare
    /// aborted, SYNC_WRITE_AMBIGUOUS (or its success reply, when it committed before the abort).
    pub(crate) fn take_ready(&mut self, mut f: impl FnMut(Vec<u8>, OpTimer)) {
        let mut expired = Vec::new();
        if self.deadlines.first().is_some_and(|&(at, _)| at <= Instant::now()) {
            let now = Instant::now();
            while let Some(&(at, token)) = self.deadlines.first() {
                if at > now {
                    break;
                }
                self.deadlines.pop_first();
                if let Some(w) = self.waiting.get_mut(&token) {
                    // An abort that succeeds delivers the write's outcome (ambiguous) before it returns.
                    w.pending.abort();
                    expired.push(token);
                }
            }
        }
        std::mem::swap(&mut self.taken, &mut *self.inbox.done.lock());
        for (token, outcome) in self.taken.drain(..) {
            if let Some(w) = self.waiting.remove(&token) {
                self.deadlines.remove(&(w.deadline, token));
                f(w.pending.finish(outcome), w.timer);
            }
        }
        for token in expired {
            // Committed, but its outcome not handed over yet: ambiguous, as the writer gave up.
            if let Some(w) = self.waiting.remove(&token) {
                f(w.pending.finish(Err(EngineError::SyncWriteAmbiguous)), w.timer);
            }
        }
    }
}

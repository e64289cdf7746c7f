//! Replies that wait: a durable write (a prepare in the engine) is answered only once the engine says it committed
//! and its level is met. The handler encodes the success reply as usual; [`Out::mutation_reply`] moves it aside
//! into a [`Pending`] that the connection loop awaits (before the next request, or beside it under unordered
//! execution), so replies keep the order the connection promised.
//!
//! The durability timeout is enforced here: when it passes, or when the reply is abandoned (the connection closed),
//! the prepare is aborted in the engine so that its key is free again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use settee_engine::{Bucket, EngineError, MutationResult};
use settee_mcbp::{encode_response, Request, RequestFrameInfos};
use settee_types::{Seqno, Status, VbId};
use tokio::sync::oneshot;

use crate::node::BucketHandle;

/// How long a durable write may wait when the client gave no timeout (kv_engine's default is 30 s too).
const DURABILITY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// The reply buffer of one batch, plus at most one reply that must wait, one background fetch the current request
/// needs before it can be retried, or one authentication step to finish.
#[derive(Default)]
pub struct Out {
    pub buf: Vec<u8>,
    pub pending: Option<Pending>,
    pub fetch: Option<Fetch>,
    /// A SASL step to finish (a derivation, or a failure to answer late) before the next request runs.
    pub auth: Option<crate::kv::handlers::session::AuthWork>,
    /// Where the outcomes of this connection's durable writes arrive (made at its first durable write).
    inbox: Option<InboxHandle>,
}

type Outcome = Result<(), EngineError>;

/// The outcomes of one connection's durable writes, handed over by the thread that completes them (the DCP
/// producer applying a replica's acknowledgement, a flusher). Waking a task of the connection's worker thread from
/// another thread costs a write to the worker's eventfd, so each outcome used to cost one; here the completing
/// thread only queues the outcome and notifies the connection's [`pump`], which a burst of outcomes wakes once, and
/// the pump hands them to their replies on the worker thread itself. Holds at most the connection's durable writes
/// in flight (`INFLIGHT_MAX` under unordered execution, one otherwise). Its lock is a leaf: taken with no other
/// lock held, by engine waiters (called with no vBucket lock held) and by the pump.
#[derive(Default)]
struct Inbox {
    done: parking_lot::Mutex<Vec<(oneshot::Sender<Outcome>, Outcome)>>,
    notify: tokio::sync::Notify,
    /// The connection has gone: the pump stops after its next wake-up.
    closed: AtomicBool,
}

impl Inbox {
    fn deliver(&self, tx: oneshot::Sender<Outcome>, outcome: Outcome) {
        self.done.lock().push((tx, outcome));
        self.notify.notify_one();
    }
}

/// Hands queued outcomes to their replies, a burst per wake-up, until the connection goes.
async fn pump(inbox: Arc<Inbox>) {
    let mut batch = Vec::new();
    loop {
        inbox.notify.notified().await;
        std::mem::swap(&mut batch, &mut *inbox.done.lock());
        for (tx, outcome) in batch.drain(..) {
            let _ = tx.send(outcome);
        }
        if inbox.closed.load(Ordering::Acquire) {
            return;
        }
    }
}

/// The connection's hold on its inbox: dropping it (the connection ended) stops the pump. Outcomes that arrive
/// later are dropped with the inbox, as are the replies that waited for them.
struct InboxHandle(Arc<Inbox>);

impl Drop for InboxHandle {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.notify.notify_one();
    }
}

/// An item the engine must read from disk before the request can run (it was ejected).
pub struct Fetch {
    pub bucket: std::sync::Arc<BucketHandle>,
    pub vb: settee_types::VbId,
    pub key: Vec<u8>,
}

impl Fetch {
    pub async fn run(self) {
        match &self.bucket.persistence {
            Some(p) => {
                crate::persistence::fetch_item(self.bucket.bucket.clone(), p.store.clone(), self.vb, self.key).await
            }
            None => tracing::error!("background fetch requested for a bucket without persistence"),
        }
    }
}

impl std::ops::Deref for Out {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.buf
    }
}

impl std::ops::DerefMut for Out {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

pub struct Pending {
    rx: oneshot::Receiver<Result<(), EngineError>>,
    timeout: Duration,
    /// The encoded success reply.
    reply: Vec<u8>,
    opcode: u8,
    opaque: u32,
    /// The prepare to abort if the reply is given up; None once the outcome is known.
    prepare: Option<(Arc<Bucket>, VbId, Seqno)>,
}

impl Out {
    /// Writes a mutation's success reply with `write`; if `m` is a durable write still pending, the reply is held
    /// back until the engine completes it instead of going out with the batch.
    pub fn mutation_reply(
        &mut self,
        b: &BucketHandle,
        m: &MutationResult,
        req: &Request<'_>,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        let start = self.buf.len();
        write(&mut self.buf);
        if !m.sync_write {
            return;
        }
        let reply = self.buf.split_off(start);
        let timeout = RequestFrameInfos::parse(req.framing)
            .ok()
            .and_then(|f| f.durability)
            .and_then(|(_, ms)| ms)
            .map_or(DURABILITY_TIMEOUT_DEFAULT, |ms| Duration::from_millis(u64::from(ms)));
        let (tx, rx) = oneshot::channel();
        let waiter: settee_engine::PersistWaiter = match self.inbox() {
            Some(inbox) => Box::new(move |r| inbox.deliver(tx, r)),
            None => Box::new(move |r| {
                let _ = tx.send(r);
            }),
        };
        b.when_sync_write_completes(m.vb, m.seqno, waiter);
        let prepare = Some((b.bucket.clone(), m.vb, m.seqno));
        self.pending = Some(Pending { rx, timeout, reply, opcode: req.opcode, opaque: req.opaque, prepare });
    }
}

impl Out {
    /// An empty reply buffer of `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Out {
        Out { buf: Vec::with_capacity(capacity), ..Out::default() }
    }

    /// The connection's inbox, made (with its pump on the current runtime) at the first durable write; None
    /// outside a runtime.
    fn inbox(&mut self) -> Option<Arc<Inbox>> {
        if self.inbox.is_none() {
            let runtime = tokio::runtime::Handle::try_current().ok()?;
            let inbox = Arc::new(Inbox::default());
            runtime.spawn(pump(inbox.clone()));
            self.inbox = Some(InboxHandle(inbox));
        }
        self.inbox.as_ref().map(|h| h.0.clone())
    }
}

impl Pending {
    /// Waits for the outcome and returns the bytes to send: the success reply, or SYNC_WRITE_AMBIGUOUS when the
    /// write was aborted, timed out (its prepare is aborted then), the vBucket moved, or the store failed.
    pub async fn resolve(mut self) -> Vec<u8> {
        let outcome = match tokio::time::timeout(self.timeout, &mut self.rx).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(EngineError::SyncWriteAmbiguous),
            Err(_) => {
                // The prepare stops holding its key; if it committed just before, the channel says so.
                self.abort();
                self.rx.try_recv().unwrap_or(Err(EngineError::SyncWriteAmbiguous))
            }
        };
        self.prepare = None;
        if outcome.is_ok() {
            return std::mem::take(&mut self.reply);
        }
        tracing::debug!(opaque = self.opaque, ?outcome, "durable write not confirmed: ambiguous");
        let mut out = Vec::with_capacity(24);
        let status = Status::SyncWriteAmbiguous.code();
        encode_response(&mut out, self.opcode, status, self.opaque, 0, 0, &[], &[], &[], &[]);
        out
    }

    fn abort(&mut self) {
        if let Some((bucket, vb, seqno)) = self.prepare.take() {
            bucket.abort_prepare(vb, seqno);
        }
    }
}

impl Drop for Pending {
    /// A reply given up before its outcome (the connection closed): the prepare must not hold its key forever.
    fn drop(&mut self) {
        self.abort();
    }
}

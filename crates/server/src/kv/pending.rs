//! Replies that wait: a durable write (a prepare in the engine) is answered only once the engine says it committed
//! and its level is met. The handler encodes the success reply as usual; [`Out::mutation_reply`] moves it aside
//! into a [`Pending`], which the connection hands to its [`super::durable_replies::DurableReplies`] (and waits for
//! before the next request, unless the client negotiated unordered execution), so replies keep the order the
//! connection promised.
//!
//! The durability timeout is enforced there: when it passes, or when the reply is abandoned (the connection
//! closed), the prepare is aborted in the engine so that its key is free again.

use std::sync::Arc;
use std::time::Duration;

use super::durable_replies::Inbox;
use crate::node::BucketHandle;
use settee_engine::{Bucket, EngineError, MutationResult};
use settee_mcbp::{encode_response, Request, RequestFrameInfos};
use settee_types::{Seqno, Status, VbId};

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
    /// Where the outcomes of this connection's durable writes arrive, and the token of its next durable write.
    inbox: Arc<Inbox>,
    next_token: u64,
}

pub(crate) type Outcome = Result<(), EngineError>;

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
    /// Names the write's outcome in the connection's inbox.
    token: u64,
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
        let token = self.next_token;
        self.next_token += 1;
        let inbox = self.inbox.clone();
        b.when_sync_write_completes(m.vb, m.seqno, Box::new(move |r| inbox.deliver(token, r)));
        let prepare = Some((b.bucket.clone(), m.vb, m.seqno));
        self.pending = Some(Pending { token, timeout, reply, opcode: req.opcode, opaque: req.opaque, prepare });
    }
}

impl Out {
    /// An empty reply buffer of `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Out {
        Out { buf: Vec::with_capacity(capacity), ..Out::default() }
    }

    /// Where the outcomes of this connection's durable writes arrive: its [`super::durable_replies::DurableReplies`]
    /// takes them from there.
    pub(crate) fn inbox(&self) -> Arc<Inbox> {
        self.inbox.clone()
    }
}

impl Pending {
    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    /// How long the write may wait for its outcome.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The bytes to send once the outcome is known: the success reply, or SYNC_WRITE_AMBIGUOUS when the write was
    /// aborted, timed out (its prepare is aborted then), the vBucket moved, or the store failed.
    pub(crate) fn finish(mut self, outcome: Outcome) -> Vec<u8> {
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

    /// Aborts the prepare (its timeout passed): its key is free again. An abort that succeeds delivers the write's
    /// outcome, ambiguous, to the inbox; one that finds the write already committed does nothing.
    pub(crate) fn abort(&mut self) {
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

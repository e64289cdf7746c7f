//! Replies that wait: a durable write (a prepare in the engine) is answered only once the engine says it committed
//! and its level is met. The handler encodes the success reply as usual; [`Out::mutation_reply`] moves it aside
//! into a [`Pending`] that the connection loop awaits (before the next request, or beside it under unordered
//! execution), so replies keep the order the connection promised.
//!
//! The durability timeout is enforced here: when it passes, or when the reply is abandoned (the connection closed),
//! the prepare is aborted in the engine so that its key is free again.

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
        b.when_sync_write_completes(
            m.vb,
            m.seqno,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        let prepare = Some((b.bucket.clone(), m.vb, m.seqno));
        self.pending = Some(Pending { rx, timeout, reply, opcode: req.opcode, opaque: req.opaque, prepare });
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

//! Replies that wait: a durable write is answered only once its seqno is persisted. The handler encodes the
//! success reply as usual; [`Out::mutation_reply`] moves it aside into a [`Pending`] that the connection loop
//! awaits before it executes the next request, so replies stay in request order.

use std::time::Duration;

use settee_engine::{EngineError, MutationResult};
use settee_mcbp::{encode_response, Request, RequestFrameInfos};
use settee_types::Status;
use tokio::sync::oneshot;

use crate::node::BucketHandle;

/// How long a durable write may wait when the client gave no timeout (kv_engine's default is 30 s too).
const DURABILITY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// The reply buffer of one batch, plus at most one reply that must wait, or one background fetch the current
/// request needs before it can be retried.
#[derive(Default)]
pub struct Out {
    pub buf: Vec<u8>,
    pub pending: Option<Pending>,
    pub fetch: Option<Fetch>,
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
}

impl Out {
    /// Writes a mutation's success reply with `write`; if `m` is a durable write that must wait for persistence,
    /// the reply is held back until the write is persisted instead of going out with the batch.
    pub fn mutation_reply(
        &mut self,
        b: &BucketHandle,
        m: &MutationResult,
        req: &Request<'_>,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        let start = self.buf.len();
        write(&mut self.buf);
        if !m.await_persistence {
            return;
        }
        let reply = self.buf.split_off(start);
        let timeout = RequestFrameInfos::parse(req.framing)
            .ok()
            .and_then(|f| f.durability)
            .and_then(|(_, ms)| ms)
            .map_or(DURABILITY_TIMEOUT_DEFAULT, |ms| Duration::from_millis(u64::from(ms)));
        let (tx, rx) = oneshot::channel();
        b.when_persisted(
            m.vb,
            m.seqno,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        self.pending = Some(Pending { rx, timeout, reply, opcode: req.opcode, opaque: req.opaque });
    }
}

impl Pending {
    /// Waits for the outcome and returns the bytes to send: the success reply, or SYNC_WRITE_AMBIGUOUS when the
    /// write timed out or the store failed (the value is in memory and may or may not be on disk).
    pub async fn resolve(self) -> Vec<u8> {
        match tokio::time::timeout(self.timeout, self.rx).await {
            Ok(Ok(Ok(()))) => self.reply,
            outcome => {
                tracing::warn!(opaque = self.opaque, ?outcome, "durable write not confirmed: ambiguous");
                let mut out = Vec::with_capacity(24);
                let status = Status::SyncWriteAmbiguous.code();
                encode_response(&mut out, self.opcode, status, self.opaque, 0, 0, &[], &[], &[], &[]);
                out
            }
        }
    }
}

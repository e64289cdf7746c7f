//! One pipelined connection to a target node: writes SET_WITH_META / DEL_WITH_META for the batches the runner
//! hands it and reports each reply (or the connection's end) back. It holds no decision: retries, routing and
//! checkpoints are the core's.

use std::collections::HashMap;
use std::time::Duration;

use settee_client::{Connection, WithMetaWrite};
use settee_mcbp::{Opcode, Request, WithMetaExtras};
use settee_types::Status;
use settee_xdcr::{ChangeKind, Outcome, Write};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What a writer reports: `generation` tells the runner whether the writer still belongs to the current map.
#[derive(Debug)]
pub enum WriterReport {
    /// `latency`: from the write's flush to its reply (goxdcr's docs latency).
    Reply {
        generation: u64,
        node: usize,
        id: u64,
        outcome: Outcome,
        latency: Duration,
    },
    Down {
        generation: u64,
        node: usize,
    },
    /// OBSERVE_SEQNO's answer for `vb`: (vbuuid, persisted seqno, current seqno); None when the target refused it.
    Observed {
        generation: u64,
        vb: u16,
        probe: u64,
        answer: Option<(u64, u64, u64)>,
    },
}

/// What the runner hands a writer.
#[derive(Debug)]
pub enum ToWriter {
    Batch(Vec<Write>),
    /// OBSERVE_SEQNO for target vBucket `vb`, on behalf of the core's `probe`.
    Observe {
        vb: u16,
        probe: u64,
    },
}

/// What a request in flight was.
enum Pending {
    Write(u64, Instant),
    Observe(u16, u64),
}

/// Runs until `batches` closes or the connection breaks (then reports Down).
pub async fn run(
    mut conn: Connection,
    generation: u64,
    node: usize,
    mut batches: mpsc::Receiver<ToWriter>,
    reports: mpsc::Sender<WriterReport>,
) {
    // Opaque → the write (id, when its batch was flushed) or the observe.
    let mut inflight: HashMap<u32, Pending> = HashMap::new();
    loop {
        tokio::select! {
            batch = batches.recv() => {
                let Some(batch) = batch else { return };
                let sent = Instant::now();
                match batch {
                    ToWriter::Batch(batch) => {
                        for w in &batch {
                            inflight.insert(queue(&mut conn, w), Pending::Write(w.id, sent));
                        }
                    }
                    ToWriter::Observe { vb, probe } => {
                        inflight.insert(queue_observe(&mut conn, vb), Pending::Observe(vb, probe));
                    }
                }
                if conn.flush().await.is_err() {
                    let _ = reports.send(WriterReport::Down { generation, node }).await;
                    return;
                }
            }
            filled = conn.fill(), if !inflight.is_empty() => {
                if filled.is_err() {
                    let _ = reports.send(WriterReport::Down { generation, node }).await;
                    return;
                }
                let mut answered = Vec::new();
                loop {
                    match conn.next_response() {
                        Ok(Some(r)) => answered.push((r.opaque, r.status, observed(r.value))),
                        Ok(None) => break,
                        Err(_) => {
                            let _ = reports.send(WriterReport::Down { generation, node }).await;
                            return;
                        }
                    }
                }
                let now = Instant::now();
                for (opaque, status, answer) in answered {
                    let report = match inflight.remove(&opaque) {
                        Some(Pending::Write(id, sent)) => {
                            let (outcome, latency) = (outcome_of(status), now.saturating_duration_since(sent));
                            WriterReport::Reply { generation, node, id, outcome, latency }
                        }
                        // NOT_MY_VBUCKET, TMPFAIL (a target warming up) or a short answer is not reported: the
                        // core asks again next interval. A refusal is reported (the core stops waiting for it).
                        Some(Pending::Observe(vb, probe)) => match (outcome_of(status), answer) {
                            (Outcome::Success, Some(answer)) => {
                                WriterReport::Observed { generation, vb, probe, answer: Some(answer) }
                            }
                            (Outcome::NotMyVbucket | Outcome::TempFail, _) | (Outcome::Success, None) => continue,
                            (_, _) => {
                                tracing::debug!(vb, status, "xdcr: OBSERVE_SEQNO refused by the target");
                                WriterReport::Observed { generation, vb, probe, answer: None }
                            }
                        },
                        None => continue,
                    };
                    if reports.send(report).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// The core's view of a with-meta reply status.
pub fn outcome_of(status: u16) -> Outcome {
    match Status::from_code(status) {
        Some(Status::Success) => Outcome::Success,
        Some(Status::KeyEexists) => Outcome::LostConflict,
        Some(Status::NotMyVbucket) => Outcome::NotMyVbucket,
        Some(Status::Etmpfail | Status::Enomem | Status::Ebusy) => Outcome::TempFail,
        _ => Outcome::Failed(status),
    }
}

/// Queues OBSERVE_SEQNO for `vb` (the vbuuid asked about is ignored by the answer's format 0); returns its opaque.
fn queue_observe(conn: &mut Connection, vb: u16) -> u32 {
    let value = 0u64.to_be_bytes();
    let mut req = Request::client(Opcode::ObserveSeqno as u8, &[]);
    req.vbucket = vb;
    req.value = &value;
    conn.queue(&req)
}

/// (vbuuid, persisted, current) of an OBSERVE_SEQNO answer: format u8, vb u16, vbuuid, persisted, current (u64
/// each); format 1 (a failover happened) carries more after, which is not needed here.
fn observed(value: &[u8]) -> Option<(u64, u64, u64)> {
    let field = |at: usize| value.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
    Some((field(3)?, field(11)?, field(19)?))
}

/// Queues one write; returns its opaque. Values go as the source holds them.
fn queue(conn: &mut Connection, w: &Write) -> u32 {
    let c = &w.change;
    let options = if c.kind == ChangeKind::Expiration { WithMetaExtras::IS_EXPIRATION } else { 0 };
    let (flags, expiry, rev, cas) = (c.flags, c.expiry, c.rev, c.cas);
    conn.queue_with_meta(&WithMetaWrite {
        vbucket: w.vbucket,
        collection: c.collection,
        key: &c.key,
        delete: c.kind != ChangeKind::Mutation,
        extras: WithMetaExtras { flags, expiry, rev, cas, options, ext_meta_len: 0 },
        datatype: c.datatype,
        value: &c.value,
    })
}

#[cfg(test)]
mod tests {
    use super::outcome_of;
    use settee_xdcr::Outcome;

    /// Proves the statuses the core branches on map to its outcomes and anything else is a counted failure.
    #[test]
    fn statuses_map_to_outcomes_when_the_target_answers() {
        assert_eq!(outcome_of(0x00), Outcome::Success);
        assert_eq!(outcome_of(0x02), Outcome::LostConflict);
        assert_eq!(outcome_of(0x07), Outcome::NotMyVbucket);
        assert_eq!(outcome_of(0x86), Outcome::TempFail);
        assert_eq!(outcome_of(0x24), Outcome::Failed(0x24));
    }
}

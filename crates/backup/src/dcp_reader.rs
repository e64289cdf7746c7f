//! Reads vBuckets of one node over DCP into data files: one DCP connection per node, at most
//! [`STREAMS_OPEN_MAX`] streams open at once, each from where the previous backup stopped (or from zero) up to
//! the vBucket's high seqno when the stream starts (`TO_LATEST`): a consistent point per vBucket.
//!
//! Every message is checked by `settee_dcp::ConsumerStream` (inside a snapshot, seqnos increasing). A stream the
//! producer answers with a rollback (the vBucket's history changed since the previous backup) is read again from
//! zero; any other refusal fails the backup. BUFFER_ACKNOWLEDGEMENT keeps the producer's window open.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use settee_client::Connection;
use settee_client::KvStream;
use settee_dcp::{ConsumerAction, ConsumerEvent, ConsumerFlowControl, ConsumerStream, DcpItem};
use settee_mcbp::dcp::{encode_dcp_response, DcpControl, DcpOpen, DcpOpenFlags, StreamEndReason, StreamFlags};
use settee_mcbp::{decode_leb128, decode_request, decode_response, Feature, Opcode};
use settee_types::{FailoverLog, VbId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::BackupError;
use crate::layout::{FileMeta, VbPosition};
use crate::record::{Record, RecordKind, RecordWriter};

/// Streams open at once on a connection: bounds the open files and buffers.
const STREAMS_OPEN_MAX: usize = 64;
const BUFFER_BYTES: u32 = 8 << 20;
const FRAME_BYTES_MAX: usize = 64 << 20;
/// A producer that sends nothing for this long is given up on (the backup fails, and can be run again).
const SILENCE_MAX: std::time::Duration = std::time::Duration::from_secs(120);

/// What to read of one vBucket.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VbTask {
    pub vb: u16,
    /// Where the previous backup stopped; None reads the vBucket from zero.
    pub from: Option<VbPosition>,
}

/// What was read of one vBucket.
#[derive(Debug)]
pub(crate) struct VbOutcome {
    pub vb: u16,
    pub position: VbPosition,
    pub full: bool,
    pub file: Option<FileMeta>,
    pub mutations: u64,
    pub deletions: u64,
}

pub(crate) struct NodeRead {
    pub addr: SocketAddr,
    pub username: String,
    pub password: String,
    pub bucket: String,
    /// The bucket's directory in the backup; data files go under `data/`.
    pub dir: PathBuf,
    /// Counts documents read, for progress lines.
    pub progress: Arc<AtomicU64>,
}

struct OpenStream {
    task: VbTask,
    stream: ConsumerStream,
    full: bool,
    uuid: u64,
    writer: Option<RecordWriter<BufWriter<File>>>,
    mutations: u64,
    deletions: u64,
}

/// Reads `tasks` from the node; returns one outcome per task.
pub(crate) async fn read_node(r: &NodeRead, tasks: Vec<VbTask>) -> Result<Vec<VbOutcome>, BackupError> {
    let (mut sock, unread) = open(r).await?;
    let mut rbuf = BytesMut::from(&unread[..]);
    let mut pending: VecDeque<VbTask> = tasks.into();
    let mut open_streams: BTreeMap<u32, OpenStream> = BTreeMap::new();
    let mut done = Vec::new();
    let mut flow = ConsumerFlowControl::new(BUFFER_BYTES);
    let mut out = Vec::new();
    loop {
        while open_streams.len() < STREAMS_OPEN_MAX {
            let Some(task) = pending.pop_front() else { break };
            let s = request(task, task.from.is_none(), &mut out);
            open_streams.insert(u32::from(task.vb), s);
        }
        if !out.is_empty() {
            sock.write_all(&out).await?;
            sock.flush().await?;
            out.clear();
        }
        if open_streams.is_empty() {
            return Ok(done);
        }
        let read = tokio::time::timeout(SILENCE_MAX, sock.read_buf(&mut rbuf)).await.map_err(|_| {
            BackupError::Dcp(format!("{} sent nothing for {} s; giving up", r.addr, SILENCE_MAX.as_secs()))
        })?;
        if read? == 0 {
            return Err(BackupError::Dcp(format!("{} closed the DCP connection", r.addr)));
        }
        while let Some(used) = frame(&rbuf)? {
            let frame = rbuf.split_to(used);
            on_frame(r, &frame, &mut open_streams, &mut done, &mut out)?;
            if frame[0] == 0x80 || frame[0] == 0x08 {
                flow.consumed(used);
                if let Some(ack) = flow.take_ack(0) {
                    ack.encode(&mut out);
                }
            }
        }
    }
}

/// Connects, authenticates, selects the bucket and opens a DCP producer with xattrs and delete times.
async fn open(r: &NodeRead) -> Result<(KvStream, Vec<u8>), BackupError> {
    let features = [Feature::Collections, Feature::Xattr, Feature::Json];
    let mut c = Connection::connect(r.addr, &r.username, &r.password, Some(&r.bucket), &features).await?;
    let name = format!("settee-backup:{}:{}", r.bucket, std::process::id());
    let flags = DcpOpenFlags::PRODUCER.with(DcpOpenFlags::INCLUDE_XATTRS).with(DcpOpenFlags::INCLUDE_DELETE_TIMES);
    let mut out = Vec::new();
    DcpOpen { opaque: 0, flags, name: name.as_bytes(), value: &[] }.encode(&mut out);
    let buffer = BUFFER_BYTES.to_string();
    DcpControl { opaque: 0, key: b"connection_buffer_size", value: buffer.as_bytes() }.encode(&mut out);
    c.send_raw(&out).await?;
    for what in ["DCP_OPEN", "DCP_CONTROL"] {
        let resp = c.read_response().await?;
        if resp.status != 0 {
            return Err(BackupError::Dcp(format!("{} refused {what}: status 0x{:04x}", r.addr, resp.status)));
        }
    }
    Ok(c.into_parts())
}

/// A stream for `task` and its request appended to `out`. From zero: any vbuuid; else the saved one.
fn request(task: VbTask, full: bool, out: &mut Vec<u8>) -> OpenStream {
    let pos =
        if full { VbPosition { uuid: 0, seqno: 0 } } else { task.from.unwrap_or(VbPosition { uuid: 0, seqno: 0 }) };
    let log = FailoverLog::new(pos.uuid, 0);
    let stream = ConsumerStream::new(VbId(task.vb), u32::from(task.vb), &log, pos.seqno, (pos.seqno, pos.seqno));
    let mut req = stream.request();
    req.flags = StreamFlags::TO_LATEST;
    req.encode(out);
    OpenStream { task, stream, full, uuid: pos.uuid, writer: None, mutations: 0, deletions: 0 }
}

/// The length of the complete frame at the start of `buf`, if one is there.
fn frame(buf: &[u8]) -> Result<Option<usize>, BackupError> {
    let bad = |e: settee_mcbp::DecodeError| BackupError::Dcp(format!("bad frame: {e}"));
    match buf.first() {
        None => Ok(None),
        Some(0x81 | 0x18) => Ok(decode_response(buf, FRAME_BYTES_MAX).map_err(bad)?.map(|(_, n)| n)),
        Some(_) => Ok(decode_request(buf, FRAME_BYTES_MAX).map_err(bad)?.map(|(_, n)| n)),
    }
}

fn on_frame(
    r: &NodeRead,
    frame: &[u8],
    open_streams: &mut BTreeMap<u32, OpenStream>,
    done: &mut Vec<VbOutcome>,
    out: &mut Vec<u8>,
) -> Result<(), BackupError> {
    let dcp = |e: settee_dcp::ConsumerError| BackupError::Dcp(e.to_string());
    if matches!(frame[0], 0x81 | 0x18) {
        let Some((resp, _)) = decode_response(frame, FRAME_BYTES_MAX).ok().flatten() else { return Ok(()) };
        if resp.opcode != Opcode::DcpStreamReq as u8 {
            return Ok(()); // a BUFFER_ACK's reply
        }
        let Some(s) = open_streams.get_mut(&resp.opaque) else { return Ok(()) };
        match s.stream.on_stream_response(resp.status, resp.value).map_err(dcp)? {
            ConsumerEvent::Accepted { failover_log } => s.uuid = failover_log.latest().uuid,
            ConsumerEvent::RollbackTo(_) => {
                // The vBucket's history changed since the previous backup: read all of it again.
                let task = s.task;
                *s = request(task, true, out);
            }
            ConsumerEvent::Rejected(status) => {
                return Err(BackupError::Dcp(format!(
                    "{} refused the stream of vBucket {}: status 0x{status:04x} (did the cluster map change?)",
                    r.addr, s.task.vb
                )))
            }
        }
        return Ok(());
    }
    let Some((req, _)) = decode_request(frame, FRAME_BYTES_MAX).ok().flatten() else { return Ok(()) };
    if req.opcode == Opcode::DcpNoop as u8 {
        encode_dcp_response(out, Opcode::DcpNoop, 0, req.opaque);
        return Ok(());
    }
    let Some(s) = open_streams.get_mut(&req.opaque) else { return Ok(()) };
    match s.stream.on_message(&req).map_err(dcp)? {
        ConsumerAction::Apply(item) => {
            if let Some(rec) = record_of(s.task.vb, item)? {
                if rec.kind == RecordKind::Mutation {
                    s.mutations += 1
                } else {
                    s.deletions += 1
                }
                writer(&r.dir, s)?.write(&rec)?;
                r.progress.fetch_add(1, Ordering::Relaxed);
            }
        }
        ConsumerAction::StreamEnd(reason) => {
            if reason != StreamEndReason::Ok {
                return Err(BackupError::Dcp(format!("stream of vBucket {} ended: {reason:?}", s.task.vb)));
            }
            let s = open_streams.remove(&req.opaque).expect("looked up above");
            done.push(finish(&r.dir, s)?);
        }
        _ => {}
    }
    Ok(())
}

fn data_path(dir: &Path, vb: u16) -> (PathBuf, String) {
    let rel = format!("data/vb-{vb:04}.dat");
    (dir.join(&rel), rel)
}

fn writer<'s>(dir: &Path, s: &'s mut OpenStream) -> Result<&'s mut RecordWriter<BufWriter<File>>, BackupError> {
    if s.writer.is_none() {
        let (path, _) = data_path(dir, s.task.vb);
        let f = File::create(&path).map_err(BackupError::file(&path))?;
        s.writer = Some(RecordWriter::new(BufWriter::with_capacity(64 << 10, f))?);
    }
    Ok(s.writer.as_mut().expect("set above"))
}

fn finish(dir: &Path, s: OpenStream) -> Result<VbOutcome, BackupError> {
    let position = VbPosition { uuid: s.uuid, seqno: s.stream.resume_point().0 };
    let file = match s.writer {
        None => None,
        Some(w) => {
            let (path, rel) = data_path(dir, s.task.vb);
            let (bytes, records, crc) = (w.bytes, w.records, w.crc);
            // Synced with the other files once every stream ended (`layout::sync_files`), not one at a time here.
            w.finish()?.into_inner().map_err(|e| BackupError::file(&path)(e.into_error()))?;
            Some(FileMeta { path: rel, bytes, crc32c: crc, records })
        }
    };
    Ok(VbOutcome { vb: s.task.vb, position, full: s.full, file, mutations: s.mutations, deletions: s.deletions })
}

/// The record of a DCP item; None for what a backup does not keep (sync-write steps: this connection does not ask
/// for them, so a committed write arrives as a mutation).
fn record_of(vb: u16, item: DcpItem) -> Result<Option<Record>, BackupError> {
    let split = |key: &[u8]| -> Result<(u32, Vec<u8>), BackupError> {
        let (cid, n) = decode_leb128(key).ok_or_else(|| BackupError::Dcp("key without a collection id".into()))?;
        Ok((cid, key[n..].to_vec()))
    };
    let rec = match item {
        DcpItem::Mutation { key, value, cas, seqno, rev, flags, expiry, datatype } => {
            let (collection, key) = split(&key)?;
            let (kind, value) = (RecordKind::Mutation, value.to_vec());
            Record { kind, datatype: datatype.0, vbucket: vb, collection, seqno, cas, rev, flags, expiry, key, value }
        }
        DcpItem::Deletion { key, value, cas, seqno, rev, delete_time, datatype } => {
            let (collection, key) = split(&key)?;
            let (kind, value, flags, expiry) = (RecordKind::Deletion, value.to_vec(), 0, delete_time);
            Record { kind, datatype: datatype.0, vbucket: vb, collection, seqno, cas, rev, flags, expiry, key, value }
        }
        DcpItem::Expiration { key, cas, seqno, rev, delete_time } => {
            let (collection, key) = split(&key)?;
            let (kind, value, flags, expiry, datatype) = (RecordKind::Expiration, Vec::new(), 0, delete_time, 0);
            Record { kind, datatype, vbucket: vb, collection, seqno, cas, rev, flags, expiry, key, value }
        }
        _ => return Ok(None),
    };
    Ok(Some(rec))
}

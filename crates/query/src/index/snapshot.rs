//! The byte format of an index snapshot: an index's entries and, per vBucket, the seqnos they reflect, so a node
//! restarts its indexes from disk and catches up from the saved seqnos instead of rebuilding them from zero.
//!
//! A snapshot is written while the index keeps changing (a fuzzy snapshot): for each vBucket it records `start`,
//! the seqno applied when writing began, and `end`, the seqno applied when it finished. Every entry in the file
//! reflects the document at some point between the two, so replaying the vBucket's changes after `start` (each
//! document's latest change replaces whatever the file held for it) gives exactly the index at the replayed seqno,
//! provided the data service still has every change up to `end` on the same history (see
//! `SnapshotReader::vbuckets`: the caller checks that against the failover log).
//!
//! Layout (integers little-endian), one CRC32C over every byte before it:
//!
//! ```text
//! header:  "STIX" | version u8 | primary u8 | vBuckets u16 | id length u16 | id
//! entries: (0x01 | doc id length u32 | doc id | key arity u16 | values)*
//! trailer: 0x00 | entry count u64 | per vBucket (start u64, end u64, vbuuid u64, valid u8) | crc32c u32
//! ```
//!
//! A value is a tag byte and its payload: 0 MISSING, 1 null, 2 false, 3 true, 4 integer (i64), 5 float (f64
//! bits), 6 string (u32 length, UTF-8), 7 array (u32 count, values), 8 object (u32 count, (u32 length, name,
//! value) each), 9 binary (u32 length, bytes). Nothing is trusted before the checksum is: a reader streams the
//! entries out and reports the damage at the end, so the caller loads into a fresh index and keeps it only when
//! the whole file checked out.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use super::IndexEntry;
use crate::value::{Number, Object, Value};

const MAGIC: &[u8; 4] = b"STIX";
const VERSION: u8 = 1;
const TAG_ENTRY: u8 = 0x01;
const TAG_END: u8 = 0x00;
/// Bytes per vBucket in the trailer.
const VB_BYTES: u64 = 8 + 8 + 8 + 1;
/// Nesting deeper than this is damage (index keys come from parsed JSON, whose depth is bounded far below).
const DEPTH_MAX: usize = 1024;

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    #[error("damaged index snapshot: {0}")]
    Corrupt(&'static str),
    #[error("the snapshot belongs to index {found:?}, not {expected:?}")]
    OtherIndex { expected: String, found: String },
}

/// What a snapshot says of one vBucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VbPoint {
    /// The seqno the index had applied when the snapshot began: replay from here.
    pub start: u64,
    /// The seqno it had applied when the snapshot ended: the data service must still hold this much.
    pub end: u64,
    /// The vBucket's branch (failover log uuid) at `end`.
    pub uuid: u64,
    /// The index held the vBucket's entries for the whole snapshot; when false its entries are not to be used.
    pub valid: bool,
}

/// A `Write` that feeds a CRC32C with everything it passes on.
struct CrcWrite<W> {
    inner: W,
    crc: u32,
}

impl<W: Write> CrcWrite<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.inner.write_all(bytes)
    }
}

/// Writes a snapshot: the header at `new`, each entry in index order, the trailer at `finish`.
pub struct SnapshotWriter<W: Write> {
    out: CrcWrite<W>,
    entries: u64,
    vbuckets: u16,
    scratch: Vec<u8>,
}

impl<W: Write> SnapshotWriter<W> {
    pub fn new(out: W, index_id: &str, primary: bool, vbuckets: u16) -> io::Result<SnapshotWriter<W>> {
        let id = index_id.as_bytes();
        let id_len = u16::try_from(id.len()).map_err(|_| io::Error::other("index id longer than 64 KiB"))?;
        let mut w = SnapshotWriter { out: CrcWrite { inner: out, crc: 0 }, entries: 0, vbuckets, scratch: Vec::new() };
        w.out.put(MAGIC)?;
        w.out.put(&[VERSION, u8::from(primary)])?;
        w.out.put(&vbuckets.to_le_bytes())?;
        w.out.put(&id_len.to_le_bytes())?;
        w.out.put(id)?;
        Ok(w)
    }

    pub fn entry(&mut self, e: &IndexEntry) -> io::Result<()> {
        let arity = u16::try_from(e.key.len()).map_err(|_| io::Error::other("index key with more than 65535 parts"))?;
        let buf = &mut self.scratch;
        buf.clear();
        buf.push(TAG_ENTRY);
        put_bytes(buf, e.doc_id.as_bytes())?;
        buf.extend_from_slice(&arity.to_le_bytes());
        for v in &e.key {
            encode_value(buf, v)?;
        }
        self.out.put(&self.scratch)?;
        self.entries += 1;
        Ok(())
    }

    /// Writes the trailer with one point per vBucket and returns the destination (to flush and sync).
    pub fn finish(mut self, points: &[VbPoint]) -> io::Result<W> {
        if points.len() != usize::from(self.vbuckets) {
            return Err(io::Error::other("one point per vBucket is needed"));
        }
        let mut t = Vec::with_capacity(9 + points.len() * VB_BYTES as usize);
        t.push(TAG_END);
        t.extend_from_slice(&self.entries.to_le_bytes());
        for p in points {
            t.extend_from_slice(&p.start.to_le_bytes());
            t.extend_from_slice(&p.end.to_le_bytes());
            t.extend_from_slice(&p.uuid.to_le_bytes());
            t.push(u8::from(p.valid));
        }
        self.out.put(&t)?;
        let crc = self.out.crc;
        self.out.inner.write_all(&crc.to_le_bytes())?;
        Ok(self.out.inner)
    }
}

fn put_len(buf: &mut Vec<u8>, n: usize) -> io::Result<()> {
    let n = u32::try_from(n).map_err(|_| io::Error::other("value part longer than 4 GiB"))?;
    buf.extend_from_slice(&n.to_le_bytes());
    Ok(())
}

fn put_bytes(buf: &mut Vec<u8>, b: &[u8]) -> io::Result<()> {
    put_len(buf, b.len())?;
    buf.extend_from_slice(b);
    Ok(())
}

fn encode_value(buf: &mut Vec<u8>, v: &Value) -> io::Result<()> {
    match v {
        Value::Missing => buf.push(0),
        Value::Null => buf.push(1),
        Value::Bool(false) => buf.push(2),
        Value::Bool(true) => buf.push(3),
        Value::Number(Number::Int(i)) => {
            buf.push(4);
            buf.extend_from_slice(&i.to_le_bytes());
        }
        Value::Number(Number::Float(f)) => {
            buf.push(5);
            buf.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Value::String(s) => {
            buf.push(6);
            put_bytes(buf, s.as_bytes())?;
        }
        Value::Array(a) => {
            buf.push(7);
            put_len(buf, a.len())?;
            for x in a.iter() {
                encode_value(buf, x)?;
            }
        }
        Value::Object(o) => {
            buf.push(8);
            put_len(buf, o.len())?;
            for (name, x) in o.iter() {
                put_bytes(buf, name.as_bytes())?;
                encode_value(buf, x)?;
            }
        }
        Value::Binary(b) => {
            buf.push(9);
            put_bytes(buf, b)?;
        }
    }
    Ok(())
}

/// A `Read` that feeds a CRC32C with everything it returns and counts the bytes.
struct CrcRead<R> {
    inner: R,
    crc: u32,
    read: u64,
}

impl<R: Read> Read for CrcRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// Reads a snapshot: [`SnapshotReader::open`] checks the header and reads the trailer's vBucket points, then
/// [`SnapshotReader::entries`] streams the entries and verifies the checksum last.
pub struct SnapshotReader<R> {
    input: R,
    primary: bool,
    points: Vec<VbPoint>,
    count: u64,
    /// Where the trailer starts (the entries end).
    trailer_at: u64,
    trailer: Vec<u8>,
    stored_crc: u32,
}

impl<R: Read + Seek> SnapshotReader<R> {
    /// Opens the snapshot of index `index_id` (a file of another index is an error).
    pub fn open(mut input: R, index_id: &str) -> Result<SnapshotReader<R>, SnapshotError> {
        let total = input.seek(SeekFrom::End(0))?;
        input.seek(SeekFrom::Start(0))?;
        let mut head = [0u8; 10];
        read_exact(&mut input, &mut head)?;
        if &head[..4] != MAGIC {
            return Err(SnapshotError::Corrupt("not an index snapshot"));
        }
        if head[4] != VERSION {
            return Err(SnapshotError::Corrupt("unknown snapshot version"));
        }
        let primary = head[5] == 1;
        let vbuckets = u16::from_le_bytes([head[6], head[7]]);
        let mut id = vec![0u8; usize::from(u16::from_le_bytes([head[8], head[9]]))];
        read_exact(&mut input, &mut id)?;
        if id != index_id.as_bytes() {
            return Err(SnapshotError::OtherIndex {
                expected: index_id.to_string(),
                found: String::from_utf8_lossy(&id).into_owned(),
            });
        }
        let trailer_len = 1 + 8 + u64::from(vbuckets) * VB_BYTES;
        let header_len = 10 + id.len() as u64;
        let trailer_at = total
            .checked_sub(trailer_len + 4)
            .filter(|&at| at >= header_len)
            .ok_or(SnapshotError::Corrupt("the file is too short"))?;
        input.seek(SeekFrom::Start(trailer_at))?;
        let mut trailer = vec![0u8; trailer_len as usize];
        read_exact(&mut input, &mut trailer)?;
        let mut crc = [0u8; 4];
        read_exact(&mut input, &mut crc)?;
        if trailer[0] != TAG_END {
            return Err(SnapshotError::Corrupt("no trailer"));
        }
        let u64_at = |at: usize| u64::from_le_bytes(trailer[at..at + 8].try_into().unwrap_or([0; 8]));
        let count = u64_at(1);
        let points = (0..usize::from(vbuckets))
            .map(|i| {
                let at = 9 + i * VB_BYTES as usize;
                VbPoint { start: u64_at(at), end: u64_at(at + 8), uuid: u64_at(at + 16), valid: trailer[at + 24] == 1 }
            })
            .collect();
        input.seek(SeekFrom::Start(0))?;
        Ok(SnapshotReader { input, primary, points, count, trailer_at, trailer, stored_crc: u32::from_le_bytes(crc) })
    }

    pub fn primary(&self) -> bool {
        self.primary
    }

    /// What the snapshot says of each vBucket (unverified until [`SnapshotReader::entries`] returned `Ok`).
    pub fn vbuckets(&self) -> &[VbPoint] {
        &self.points
    }

    /// Passes every entry to `sink` in index order, then checks the count and the checksum: an error means
    /// nothing passed to `sink` may be used.
    pub fn entries(self, mut sink: impl FnMut(IndexEntry)) -> Result<(), SnapshotError> {
        let mut r = CrcRead { inner: io::BufReader::with_capacity(1 << 16, self.input), crc: 0, read: 0 };
        // The header again, this time through the checksum.
        let mut head = [0u8; 10];
        read_exact(&mut r, &mut head)?;
        let mut id = vec![0u8; usize::from(u16::from_le_bytes([head[8], head[9]]))];
        read_exact(&mut r, &mut id)?;
        let mut seen = 0u64;
        while r.read < self.trailer_at {
            let tag = read_u8(&mut r)?;
            if tag != TAG_ENTRY {
                return Err(SnapshotError::Corrupt("an entry without its tag"));
            }
            let doc = read_string(&mut r)?;
            let mut arity = [0u8; 2];
            read_exact(&mut r, &mut arity)?;
            let mut key = Vec::with_capacity(usize::from(u16::from_le_bytes(arity)).min(64));
            for _ in 0..u16::from_le_bytes(arity) {
                key.push(decode_value(&mut r, 0)?);
            }
            if r.read > self.trailer_at {
                return Err(SnapshotError::Corrupt("an entry runs into the trailer"));
            }
            sink(IndexEntry { key, doc_id: doc });
            seen += 1;
        }
        let crc = crc32c::crc32c_append(r.crc, &self.trailer);
        if crc != self.stored_crc {
            return Err(SnapshotError::Corrupt("checksum mismatch"));
        }
        if seen != self.count {
            return Err(SnapshotError::Corrupt("entry count mismatch"));
        }
        Ok(())
    }
}

fn read_exact(r: &mut impl Read, buf: &mut [u8]) -> Result<(), SnapshotError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => SnapshotError::Corrupt("the file ends early"),
        _ => SnapshotError::Io(e),
    })
}

fn read_u8(r: &mut impl Read) -> Result<u8, SnapshotError> {
    let mut b = [0u8; 1];
    read_exact(r, &mut b)?;
    Ok(b[0])
}

fn read_u32(r: &mut impl Read) -> Result<u32, SnapshotError> {
    let mut b = [0u8; 4];
    read_exact(r, &mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(r: &mut impl Read) -> Result<u64, SnapshotError> {
    let mut b = [0u8; 8];
    read_exact(r, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// A length-prefixed byte string; a damaged length reads at most to the end of the file, never allocates ahead.
fn read_bytes(r: &mut impl Read) -> Result<Vec<u8>, SnapshotError> {
    let len = u64::from(read_u32(r)?);
    let mut out = Vec::new();
    r.take(len).read_to_end(&mut out)?;
    if out.len() as u64 != len {
        return Err(SnapshotError::Corrupt("the file ends early"));
    }
    Ok(out)
}

fn read_string(r: &mut impl Read) -> Result<Arc<str>, SnapshotError> {
    let bytes = read_bytes(r)?;
    let s = String::from_utf8(bytes).map_err(|_| SnapshotError::Corrupt("a string that is not UTF-8"))?;
    Ok(Arc::from(s))
}

fn decode_value(r: &mut impl Read, depth: usize) -> Result<Value, SnapshotError> {
    if depth > DEPTH_MAX {
        return Err(SnapshotError::Corrupt("values nested too deep"));
    }
    Ok(match read_u8(r)? {
        0 => Value::Missing,
        1 => Value::Null,
        2 => Value::Bool(false),
        3 => Value::Bool(true),
        4 => Value::Number(Number::Int(read_u64(r)? as i64)),
        5 => Value::Number(Number::Float(f64::from_bits(read_u64(r)?))),
        6 => Value::String(read_string(r)?),
        7 => {
            let n = read_u32(r)?;
            let mut items = Vec::new();
            for _ in 0..n {
                items.push(decode_value(r, depth + 1)?);
            }
            Value::Array(Arc::new(items))
        }
        8 => {
            let n = read_u32(r)?;
            let mut fields = Object::new();
            for _ in 0..n {
                let name = String::from_utf8(read_bytes(r)?)
                    .map_err(|_| SnapshotError::Corrupt("a field name that is not UTF-8"))?;
                fields.insert(name, decode_value(r, depth + 1)?);
            }
            Value::Object(Arc::new(fields))
        }
        9 => Value::Binary(Arc::from(read_bytes(r)?)),
        _ => return Err(SnapshotError::Corrupt("an unknown value tag")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn entry(doc: &str, key: Vec<Value>) -> IndexEntry {
        IndexEntry { key, doc_id: Arc::from(doc) }
    }

    fn sample() -> (Vec<IndexEntry>, Vec<VbPoint>) {
        let mut obj = Object::new();
        obj.insert("name".into(), Value::string("ünïcode"));
        obj.insert("n".into(), Value::Null);
        let entries = vec![
            entry("a", vec![Value::Missing, Value::Null, Value::Bool(true), Value::Bool(false)]),
            entry("b", vec![Value::int(-7), Value::float(2.5), Value::float(f64::NAN), Value::int(i64::MAX)]),
            entry(
                "c",
                vec![Value::Array(Arc::new(vec![Value::int(1), Value::string("x")])), Value::Object(Arc::new(obj))],
            ),
            entry("d", vec![Value::Binary(Arc::from(&b"\x00\xff"[..]))]),
            entry("e", vec![]),
        ];
        let points = (0..4u64).map(|i| VbPoint { start: i, end: i * 10, uuid: 100 + i, valid: i != 2 }).collect();
        (entries, points)
    }

    fn write(entries: &[IndexEntry], points: &[VbPoint]) -> Vec<u8> {
        let mut w = SnapshotWriter::new(Vec::new(), "ix-1", false, 4).unwrap();
        for e in entries {
            w.entry(e).unwrap();
        }
        w.finish(points).unwrap()
    }

    fn read(bytes: &[u8], id: &str) -> Result<(Vec<VbPoint>, Vec<IndexEntry>), SnapshotError> {
        let r = SnapshotReader::open(Cursor::new(bytes), id)?;
        let points = r.vbuckets().to_vec();
        let mut out = Vec::new();
        r.entries(|e| out.push(e))?;
        Ok((points, out))
    }

    #[test]
    fn entries_and_vbucket_points_survive_a_round_trip() {
        // Proves every kind of value (MISSING, NaN and binary included) and every vBucket point read back as written.
        let (entries, points) = sample();
        let (got_points, got) = read(&write(&entries, &points), "ix-1").unwrap();
        assert_eq!(got_points, points);
        assert_eq!(got.len(), entries.len());
        for (a, b) in got.iter().zip(&entries) {
            assert_eq!(a.doc_id, b.doc_id);
            assert_eq!(format!("{:?}", a.key), format!("{:?}", b.key));
        }
    }

    #[test]
    fn any_flipped_byte_is_reported_as_damage() {
        // Proves no single damaged byte anywhere in the file yields a snapshot that loads without an error.
        let (entries, points) = sample();
        let good = write(&entries, &points);
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            assert!(read(&bad, "ix-1").is_err(), "byte {at} flipped went unnoticed");
        }
    }

    #[test]
    fn a_truncated_file_or_another_index_is_refused() {
        // Proves a file cut short at any length, or written for another index, is refused.
        let (entries, points) = sample();
        let good = write(&entries, &points);
        for len in 0..good.len() {
            assert!(read(&good[..len], "ix-1").is_err(), "cut at {len} went unnoticed");
        }
        assert!(matches!(read(&good, "ix-2"), Err(SnapshotError::OtherIndex { .. })));
    }
}

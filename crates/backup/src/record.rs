//! One document version as a backup stores it, and the data files that hold them.
//!
//! A data file (`data/vb-NNNN.dat`, one per vBucket that changed) starts with the 8 bytes `STBKDAT1` and holds
//! records back to back, in the order DCP sent them (ascending seqno). A record is
//! `body_len u32 | crc32c(body) u32 | body`, all integers big-endian, and the body is
//! `kind u8 | datatype u8 | vbucket u16 | collection u32 | seqno u64 | cas u64 | rev u64 | flags u32 |
//! expiry u32 | key_len u16 | key | value`. The value is the whole stored value (xattr section first when the
//! datatype says XATTR), never compressed; a deletion's value holds only its xattrs, and its expiry is the delete
//! time. Each record's checksum, and the whole file's in the backup's metadata, let `info` name a damaged file and
//! `restore` refuse it.

use std::io::{Read, Write};

use crate::error::BackupError;

pub(crate) const FILE_MAGIC: &[u8; 8] = b"STBKDAT1";
/// The fixed part of a body, before the key.
const FIXED_BYTES: usize = 1 + 1 + 2 + 4 + 8 + 8 + 8 + 4 + 4 + 2;
/// A body can hold at most a key of 250 bytes and a value of 20 MiB plus xattrs: anything larger is damage.
const BODY_BYTES_MAX: usize = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    Mutation = 0,
    Deletion = 1,
    Expiration = 2,
}

/// A document version with everything a restore needs to write it back unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: RecordKind,
    pub datatype: u8,
    pub vbucket: u16,
    pub collection: u32,
    pub seqno: u64,
    pub cas: u64,
    pub rev: u64,
    pub flags: u32,
    pub expiry: u32,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl Record {
    /// Appends the framed record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let body_len = FIXED_BYTES + self.key.len() + self.value.len();
        let start = out.len();
        out.extend_from_slice(&(body_len as u32).to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        let body = out.len();
        out.push(self.kind as u8);
        out.push(self.datatype);
        out.extend_from_slice(&self.vbucket.to_be_bytes());
        out.extend_from_slice(&self.collection.to_be_bytes());
        for n in [self.seqno, self.cas, self.rev] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.extend_from_slice(&self.expiry.to_be_bytes());
        out.extend_from_slice(&(self.key.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.key);
        out.extend_from_slice(&self.value);
        let crc = crc32c::crc32c(&out[body..]);
        out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
    }

    /// Decodes a body whose checksum was verified; None when its layout is wrong.
    fn decode(body: &[u8]) -> Option<Record> {
        let fixed = body.get(..FIXED_BYTES)?;
        let u16_at = |i: usize| u16::from_be_bytes([fixed[i], fixed[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes(fixed[i..i + 4].try_into().unwrap_or_default());
        let u64_at = |i: usize| u64::from_be_bytes(fixed[i..i + 8].try_into().unwrap_or_default());
        let kind = match fixed[0] {
            0 => RecordKind::Mutation,
            1 => RecordKind::Deletion,
            2 => RecordKind::Expiration,
            _ => return None,
        };
        let key_len = usize::from(u16_at(FIXED_BYTES - 2));
        let key = body.get(FIXED_BYTES..FIXED_BYTES + key_len)?.to_vec();
        let value = body.get(FIXED_BYTES + key_len..)?.to_vec();
        Some(Record {
            kind,
            datatype: fixed[1],
            vbucket: u16_at(2),
            collection: u32_at(4),
            seqno: u64_at(8),
            cas: u64_at(16),
            rev: u64_at(24),
            flags: u32_at(32),
            expiry: u32_at(36),
            key,
            value,
        })
    }
}

/// Reads the records of one data file, verifying each record's checksum.
pub(crate) struct RecordReader<R> {
    inner: R,
    name: String,
    body: Vec<u8>,
}

impl<R: Read> RecordReader<R> {
    pub(crate) fn new(mut inner: R, name: String) -> Result<RecordReader<R>, BackupError> {
        let mut magic = [0u8; 8];
        inner.read_exact(&mut magic).map_err(|_| BackupError::Damaged(format!("{name}: truncated header")))?;
        if &magic != FILE_MAGIC {
            return Err(BackupError::Damaged(format!("{name}: not a settee backup data file")));
        }
        Ok(RecordReader { inner, name, body: Vec::new() })
    }

    /// The next record, None at the end of the file.
    pub(crate) fn next_record(&mut self) -> Result<Option<Record>, BackupError> {
        let mut head = [0u8; 8];
        match read_full(&mut self.inner, &mut head)? {
            0 => return Ok(None),
            8 => {}
            _ => return Err(self.damaged("truncated record header")),
        }
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if !(FIXED_BYTES..=BODY_BYTES_MAX).contains(&len) {
            return Err(self.damaged("record length out of range"));
        }
        self.body.resize(len, 0);
        if read_full(&mut self.inner, &mut self.body)? != len {
            return Err(self.damaged("truncated record"));
        }
        if crc32c::crc32c(&self.body) != crc {
            return Err(self.damaged("record checksum mismatch"));
        }
        Record::decode(&self.body).map(Some).ok_or_else(|| self.damaged("malformed record"))
    }

    fn damaged(&self, why: &str) -> BackupError {
        BackupError::Damaged(format!("{}: {why}", self.name))
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, BackupError> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(BackupError::Io(e)),
        }
    }
    Ok(n)
}

/// Writes one data file, counting its bytes, records and whole-file CRC32C as it goes.
pub(crate) struct RecordWriter<W> {
    inner: W,
    pub(crate) bytes: u64,
    pub(crate) records: u64,
    pub(crate) crc: u32,
    buf: Vec<u8>,
}

impl<W: Write> RecordWriter<W> {
    pub(crate) fn new(inner: W) -> Result<RecordWriter<W>, BackupError> {
        let mut w = RecordWriter { inner, bytes: 0, records: 0, crc: 0, buf: Vec::new() };
        w.write_raw(FILE_MAGIC)?;
        Ok(w)
    }

    pub(crate) fn write(&mut self, r: &Record) -> Result<(), BackupError> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        r.encode(&mut buf);
        self.write_raw(&buf)?;
        self.buf = buf;
        self.records += 1;
        Ok(())
    }

    fn write_raw(&mut self, b: &[u8]) -> Result<(), BackupError> {
        self.inner.write_all(b)?;
        self.crc = crc32c::crc32c_append(self.crc, b);
        self.bytes += b.len() as u64;
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<W, BackupError> {
        self.inner.flush()?;
        Ok(self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seqno: u64) -> Record {
        Record {
            kind: RecordKind::Mutation,
            datatype: 1,
            vbucket: 7,
            collection: 8,
            seqno,
            cas: 0x1122_3344_5566_7788,
            rev: 3,
            flags: 0x0200_0006,
            expiry: 1_800_000_000,
            key: b"key".to_vec(),
            value: br#"{"a":1}"#.to_vec(),
        }
    }

    /// Proves records round-trip through a data file with every field intact, and the file's CRC covers it all.
    #[test]
    fn records_round_trip_when_written_and_read_back() {
        let mut w = RecordWriter::new(Vec::new()).unwrap();
        let del = Record { kind: RecordKind::Deletion, value: Vec::new(), ..sample(2) };
        w.write(&sample(1)).unwrap();
        w.write(&del).unwrap();
        let crc = w.crc;
        let bytes = w.finish().unwrap();
        assert_eq!(crc, crc32c::crc32c(&bytes));
        let mut r = RecordReader::new(&bytes[..], "f".into()).unwrap();
        assert_eq!(r.next_record().unwrap(), Some(sample(1)));
        assert_eq!(r.next_record().unwrap(), Some(del));
        assert_eq!(r.next_record().unwrap(), None);
    }

    /// Proves a flipped byte in a record or a cut-off file is reported as damage, never returned as a record.
    #[test]
    fn damage_is_reported_when_a_byte_flips_or_the_file_is_cut() {
        let mut w = RecordWriter::new(Vec::new()).unwrap();
        w.write(&sample(1)).unwrap();
        let bytes = w.finish().unwrap();
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        let mut r = RecordReader::new(&flipped[..], "f".into()).unwrap();
        assert!(matches!(r.next_record(), Err(BackupError::Damaged(_))));
        let mut r = RecordReader::new(&bytes[..bytes.len() - 3], "f".into()).unwrap();
        assert!(matches!(r.next_record(), Err(BackupError::Damaged(_))));
        assert!(RecordReader::new(&b"NOTMAGIC"[..], "f".into()).is_err());
    }
}

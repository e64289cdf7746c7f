//! Document bodies. Random bytes and random JSON are generated once before a run, so that sending one costs a
//! slice and a copy into the write buffer; YCSB records are written per operation, because each field's value is a
//! function of the record number and the field (so a query knows the value a loaded record holds). None is
//! trivially compressible: random bytes, or JSON whose strings are random characters.

use std::sync::Arc;

use crate::rng::{splitmix64, Rng};

/// How many distinct JSON bodies a pool holds.
const JSON_POOL_SIZE: usize = 1024;
/// YCSB's record shape by default: `fieldcount` fields of `fieldlength` characters.
pub(crate) const YCSB_FIELD_COUNT: usize = 10;
pub(crate) const YCSB_FIELD_BYTES: usize = 100;
/// Most fields and characters per field a record may have (a record stays under 1 MiB).
pub(crate) const YCSB_FIELD_COUNT_MAX: usize = 1000;
pub(crate) const YCSB_FIELD_BYTES_MAX: usize = 1000;
/// The smallest JSON body the generator can shape to a size.
pub(crate) const JSON_BYTES_MIN: usize = 32;

/// The bodies a run sends; cheap to clone (shared).
#[derive(Clone, Debug)]
pub(crate) enum ValuePool {
    /// Random bytes; a value of `n` bytes is a window of `n` bytes at a random offset.
    Binary { bytes: Arc<[u8]>, min: usize, max: usize },
    /// Pre-built JSON documents of sizes spread over the requested range.
    Json { docs: Arc<[Box<[u8]>]> },
    /// YCSB records `{"field0":"...",...}`: `fields` fields of `length` random characters each, the characters of
    /// field `f` of record `r` drawn from a stream seeded by `(r, f)` alone, so every write of a record (load,
    /// update, insert) stores the same values, whatever the run's seed.
    Ycsb { fields: usize, length: usize },
}

impl ValuePool {
    pub(crate) fn binary(seed: u64, min: usize, max: usize) -> ValuePool {
        let mut rng = Rng::new(seed);
        let len = max + 64 * 1024;
        let bytes: Vec<u8> = (0..len.div_ceil(8)).flat_map(|_| rng.next_u64().to_le_bytes()).take(len).collect();
        ValuePool::Binary { bytes: bytes.into(), min, max }
    }

    /// Random JSON documents of `min..=max` bytes (at least [`JSON_BYTES_MIN`]).
    pub(crate) fn json(seed: u64, min: usize, max: usize) -> ValuePool {
        let mut rng = Rng::new(seed);
        let docs: Vec<Box<[u8]>> = (0..JSON_POOL_SIZE)
            .map(|i| {
                let size = rng.between(min as u64, max as u64) as usize;
                json_doc(&mut rng, i, size).into_boxed_slice()
            })
            .collect();
        ValuePool::Json { docs: docs.into() }
    }

    /// YCSB records of `fields` fields of `length` characters, as JSON.
    pub(crate) fn ycsb(fields: usize, length: usize) -> ValuePool {
        ValuePool::Ycsb { fields, length }
    }

    pub(crate) fn is_json(&self) -> bool {
        matches!(self, ValuePool::Json { .. } | ValuePool::Ycsb { .. })
    }

    /// The body a write of record `record` sends: a random one from the pool, or the record's YCSB document
    /// written into `scratch`.
    pub(crate) fn value<'a>(&'a self, record: u64, rng: &mut Rng, scratch: &'a mut Vec<u8>) -> &'a [u8] {
        match self {
            ValuePool::Binary { bytes, min, max } => {
                let n = rng.between(*min as u64, *max as u64) as usize;
                let off = rng.below((bytes.len() - n) as u64) as usize;
                &bytes[off..off + n]
            }
            ValuePool::Json { docs } => &docs[rng.below(docs.len() as u64) as usize],
            ValuePool::Ycsb { fields, length } => {
                scratch.clear();
                ycsb_record(record, *fields, *length, scratch);
                scratch
            }
        }
    }
}

/// Appends the value of field `field` of YCSB record `record` (`length` characters, no quotes).
pub(crate) fn ycsb_field(record: u64, field: usize, length: usize, out: &mut Vec<u8>) {
    let mut state = record ^ (field as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let mut rng = Rng::new(splitmix64(&mut state));
    push_random_chars(&mut rng, out, length);
}

/// Characters for JSON strings: nothing that needs escaping.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn push_random_chars(rng: &mut Rng, out: &mut Vec<u8>, n: usize) {
    let mut left = n;
    while left > 0 {
        let mut r = rng.next_u64();
        for _ in 0..left.min(10) {
            out.push(ALPHABET[(r & 63) as usize]);
            r >>= 6;
            left -= 1;
        }
    }
}

/// `{"id":i,"kind":"bench","body":"<random>"}` padded with random characters to exactly `size` bytes (or the
/// smallest such document, if `size` is below it).
fn json_doc(rng: &mut Rng, i: usize, size: usize) -> Vec<u8> {
    let mut doc = format!(r#"{{"id":{i},"kind":"bench","body":""#).into_bytes();
    let fill = size.saturating_sub(doc.len() + 2);
    push_random_chars(rng, &mut doc, fill);
    doc.extend_from_slice(b"\"}");
    doc
}

/// Appends record `record` as JSON: `{"field0":"...","field1":"...",...}`.
fn ycsb_record(record: u64, fields: usize, length: usize, doc: &mut Vec<u8>) {
    doc.reserve(fields * (length + 14) + 2);
    doc.push(b'{');
    for f in 0..fields {
        if f > 0 {
            doc.push(b',');
        }
        doc.extend_from_slice(b"\"field");
        crate::keys::push_decimal(doc, f as u64, 0);
        doc.extend_from_slice(b"\":\"");
        ycsb_field(record, f, length, doc);
        doc.push(b'"');
    }
    doc.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Binary values have sizes in range; JSON documents parse and hit their target size; YCSB records have the
    /// requested number of fields of the requested length.
    #[test]
    fn pools_produce_values_of_the_requested_shape() {
        let (mut rng, mut scratch) = (Rng::new(5), Vec::new());
        let bin = ValuePool::binary(1, 10, 20);
        for _ in 0..1000 {
            assert!((10..=20).contains(&bin.value(0, &mut rng, &mut scratch).len()));
        }
        let json = ValuePool::json(1, 200, 200);
        let v: serde_json::Value = serde_json::from_slice(json.value(0, &mut rng, &mut scratch)).unwrap();
        assert_eq!(serde_json::to_vec(&v).unwrap().len(), 200);
        for (fields, length) in [(10, 100), (4, 38), (12, 1)] {
            let y = ValuePool::ycsb(fields, length);
            let v: serde_json::Value = serde_json::from_slice(y.value(7, &mut rng, &mut scratch)).unwrap();
            let obj = v.as_object().unwrap();
            assert_eq!(obj.len(), fields);
            assert!((0..fields).all(|f| obj[&format!("field{f}")].as_str().unwrap().len() == length));
        }
        assert!(ValuePool::ycsb(1, 1).is_json() && !bin.is_json());
    }

    /// A YCSB record's fields are a function of the record number and the field only: every write of record 5
    /// sends the same body whatever the random stream, `ycsb_field` gives the value the body holds, and records and
    /// fields differ from one another.
    #[test]
    fn ycsb_fields_are_a_function_of_record_and_field() {
        let pool = ValuePool::ycsb(4, 38);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let first = pool.value(5, &mut Rng::new(1), &mut a).to_vec();
        assert_eq!(pool.value(5, &mut Rng::new(2), &mut b), &first[..]);
        let doc: serde_json::Value = serde_json::from_slice(&first).unwrap();
        let mut field1 = Vec::new();
        ycsb_field(5, 1, 38, &mut field1);
        assert_eq!(doc["field1"].as_str().unwrap().as_bytes(), &field1[..]);
        let field0s: std::collections::HashSet<Vec<u8>> = (0..10_000)
            .map(|r| {
                let mut v = Vec::new();
                ycsb_field(r, 0, 38, &mut v);
                v
            })
            .collect();
        assert_eq!(field0s.len(), 10_000, "every record's field0 is its own");
        assert_ne!(doc["field0"], doc["field1"]);
    }

    /// Random JSON is not trivially compressible: no 8-byte run of the body repeats in a 200-byte document.
    #[test]
    fn json_bodies_do_not_repeat_themselves() {
        let pool = ValuePool::json(3, 200, 200);
        let doc = pool.value(0, &mut Rng::new(1), &mut Vec::new()).to_vec();
        let windows: std::collections::HashSet<&[u8]> = doc.windows(8).collect();
        assert_eq!(windows.len(), doc.len() - 7);
    }
}

//! Document bodies, generated once before a run so that sending one costs a slice and a copy into the write
//! buffer. None is trivially compressible: random bytes, or JSON whose strings are random characters.

use std::sync::Arc;

use crate::rng::Rng;

/// How many distinct JSON bodies a pool holds.
const JSON_POOL_SIZE: usize = 1024;
/// YCSB's record shape: `fieldcount` fields of `fieldlength` characters.
pub(crate) const YCSB_FIELD_COUNT: usize = 10;
pub(crate) const YCSB_FIELD_BYTES: usize = 100;
/// The smallest JSON body the generator can shape to a size.
pub(crate) const JSON_BYTES_MIN: usize = 32;

/// The bodies a run sends; cheap to clone (shared).
#[derive(Clone, Debug)]
pub(crate) enum ValuePool {
    /// Random bytes; a value of `n` bytes is a window of `n` bytes at a random offset.
    Binary { bytes: Arc<[u8]>, min: usize, max: usize },
    /// Pre-built JSON documents of sizes spread over the requested range.
    Json { docs: Arc<[Box<[u8]>]> },
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

    /// YCSB records: ten fields of 100 random characters, as JSON.
    pub(crate) fn ycsb(seed: u64) -> ValuePool {
        let mut rng = Rng::new(seed);
        let docs: Vec<Box<[u8]>> = (0..JSON_POOL_SIZE).map(|_| ycsb_record(&mut rng).into_boxed_slice()).collect();
        ValuePool::Json { docs: docs.into() }
    }

    pub(crate) fn is_json(&self) -> bool {
        matches!(self, ValuePool::Json { .. })
    }

    pub(crate) fn pick(&self, rng: &mut Rng) -> &[u8] {
        match self {
            ValuePool::Binary { bytes, min, max } => {
                let n = rng.between(*min as u64, *max as u64) as usize;
                let off = rng.below((bytes.len() - n) as u64) as usize;
                &bytes[off..off + n]
            }
            ValuePool::Json { docs } => &docs[rng.below(docs.len() as u64) as usize],
        }
    }
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

fn ycsb_record(rng: &mut Rng) -> Vec<u8> {
    let mut doc = Vec::with_capacity(YCSB_FIELD_COUNT * (YCSB_FIELD_BYTES + 12) + 2);
    doc.push(b'{');
    for f in 0..YCSB_FIELD_COUNT {
        if f > 0 {
            doc.push(b',');
        }
        doc.extend_from_slice(format!("\"field{f}\":\"").as_bytes());
        push_random_chars(rng, &mut doc, YCSB_FIELD_BYTES);
        doc.push(b'"');
    }
    doc.push(b'}');
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Binary values have sizes in range; JSON documents parse and hit their target size; YCSB records have ten
    /// 100-character fields.
    #[test]
    fn pools_produce_values_of_the_requested_shape() {
        let mut rng = Rng::new(5);
        let bin = ValuePool::binary(1, 10, 20);
        for _ in 0..1000 {
            assert!((10..=20).contains(&bin.pick(&mut rng).len()));
        }
        let json = ValuePool::json(1, 200, 200);
        let v: serde_json::Value = serde_json::from_slice(json.pick(&mut rng)).unwrap();
        assert_eq!(serde_json::to_vec(&v).unwrap().len(), 200);
        let y = ValuePool::ycsb(1);
        let v: serde_json::Value = serde_json::from_slice(y.pick(&mut rng)).unwrap();
        let fields = v.as_object().unwrap();
        assert_eq!(fields.len(), 10);
        assert!(fields.values().all(|f| f.as_str().unwrap().len() == 100));
    }

    /// Random JSON is not trivially compressible: no 8-byte run of the body repeats in a 200-byte document.
    #[test]
    fn json_bodies_do_not_repeat_themselves() {
        let pool = ValuePool::json(3, 200, 200);
        let doc = pool.pick(&mut Rng::new(1));
        let windows: std::collections::HashSet<&[u8]> = doc.windows(8).collect();
        assert_eq!(windows.len(), doc.len() - 7);
    }
}

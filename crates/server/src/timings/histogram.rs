//! The latency histogram's shape and its read-side form: fixed log-linear buckets over nanoseconds (8 linear
//! sub-buckets per power of two, so a value is known within 12.5%, finer than kv_engine's one significant figure),
//! the [`Snapshot`] a reader sums from the per-thread recorders, percentiles, kv_engine's GET_CMD_TIMER JSON and
//! the Prometheus bucket boundaries.
//!
//! Bucket `i < 8` holds the value `i`; above, bucket `(e - 2) * 8 + s` holds `[(8 + s) << (e - 3), (9 + s) << (e - 3))`
//! for the value's highest set bit `e`. Values of 2^36 ns (about 69 s) and more fall in the last bucket.

/// Linear sub-buckets per power of two (`1 << SUB_BITS`).
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Values at or above `1 << TOP_BIT` nanoseconds are counted in the last bucket.
const TOP_BIT: u32 = 36;
/// Buckets of one histogram.
pub const BUCKETS: usize = (TOP_BIT as usize - 2) * SUB;

/// The bucket that counts `nanos`.
pub fn bucket_of(nanos: u64) -> usize {
    if nanos < SUB as u64 {
        return nanos as usize;
    }
    let e = 63 - nanos.leading_zeros();
    if e >= TOP_BIT {
        return BUCKETS - 1;
    }
    let sub = (nanos >> (e - SUB_BITS)) as usize & (SUB - 1);
    (e as usize - 2) * SUB + sub
}

/// The smallest value bucket `i` counts.
pub fn lower_bound(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let e = (i / SUB + 2) as u32;
    ((SUB + i % SUB) as u64) << (e - SUB_BITS)
}

/// The first value above bucket `i` (exclusive upper bound).
pub fn upper_bound(i: usize) -> u64 {
    if i < SUB {
        return i as u64 + 1;
    }
    let e = (i / SUB + 2) as u32;
    ((SUB + i % SUB + 1) as u64) << (e - SUB_BITS)
}

/// One histogram as read: per-bucket counts, the sum and the largest value, in nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub counts: Vec<u64>,
    pub sum_ns: u64,
    pub max_ns: u64,
}

impl Default for Snapshot {
    fn default() -> Snapshot {
        Snapshot { counts: vec![0; BUCKETS], sum_ns: 0, max_ns: 0 }
    }
}

impl Snapshot {
    /// Operations counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other`'s operations (histograms merge by bucket; percentiles never do).
    pub fn merge(&mut self, other: &Snapshot) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// kv_engine's GET_CMD_TIMER reply: `total`, `bucketsLow` (the first bucket's lower bound) and `data`, one
    /// `[upper bound, count, percentile]` per non-empty bucket in microseconds (buckets that round to the same
    /// microsecond are joined), which `mctimings` prints; settee adds `max_ns` and `sum_ns`, which it ignores.
    pub fn to_kv_json(&self) -> serde_json::Value {
        let total = self.count();
        let mut data: Vec<(u64, u64)> = Vec::new();
        let mut low_us = 0;
        for (i, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            let upper_us = upper_bound(i).div_ceil(1000);
            match data.last_mut() {
                Some((u, c)) if *u == upper_us => *c += n,
                _ => {
                    if data.is_empty() {
                        low_us = lower_bound(i) / 1000;
                    }
                    data.push((upper_us, n));
                }
            }
        }
        let mut cumulative = 0;
        let rows: Vec<serde_json::Value> = data
            .iter()
            .map(|&(upper, n)| {
                cumulative += n;
                serde_json::json!([upper, n, cumulative as f64 * 100.0 / total as f64])
            })
            .collect();
        serde_json::json!({
            "total": total,
            "bucketsLow": low_us,
            "data": rows,
            "max_ns": self.max_ns,
            "sum_ns": self.sum_ns,
        })
    }

    /// The Prometheus buckets for `kv_cmd_duration_seconds`: (upper bound in seconds, operations in that bucket
    /// and not in the one before), at powers of two of a nanosecond from 2^10 (1.024 µs) to 2^35 (34.4 s), then
    /// +Inf. Each boundary is a bucket boundary here, so the counts are exact.
    pub fn prometheus_buckets(&self) -> Vec<(f64, u64)> {
        let mut out: Vec<(f64, u64)> = (10..TOP_BIT).map(|k| ((1u64 << k) as f64 / 1e9, 0)).collect();
        out.push((f64::INFINITY, 0));
        for (i, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            let upper = upper_bound(i);
            // The first boundary at or above the bucket's exclusive upper bound.
            let slot = (10..TOP_BIT).position(|k| upper <= 1u64 << k).unwrap_or(out.len() - 1);
            out[slot].1 += n;
        }
        out
    }
}

/// A GET_CMD_TIMER reply as a reader gets it (microsecond buckets), summed over nodes by `settee timings`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MicrosHistogram {
    /// Operations per bucket, by the bucket's upper bound in microseconds.
    pub buckets: std::collections::BTreeMap<u64, u64>,
    /// The largest value, when the server reported it (settee's `max_ns`).
    pub max_ns: Option<u64>,
}

impl MicrosHistogram {
    /// Reads kv_engine's JSON (`data` rows of `[upper µs, count, percentile]`); None when it is not that shape.
    pub fn from_kv_json(v: &serde_json::Value) -> Option<MicrosHistogram> {
        let mut h =
            MicrosHistogram { max_ns: v.get("max_ns").and_then(serde_json::Value::as_u64), ..Default::default() };
        for row in v.get("data")?.as_array()? {
            let upper = row.get(0)?.as_u64()?;
            let count = row.get(1)?.as_u64()?;
            *h.buckets.entry(upper).or_default() += count;
        }
        Some(h)
    }

    pub fn count(&self) -> u64 {
        self.buckets.values().sum()
    }

    pub fn merge(&mut self, other: &MicrosHistogram) {
        for (upper, n) in &other.buckets {
            *self.buckets.entry(*upper).or_default() += n;
        }
        self.max_ns = match (self.max_ns, other.max_ns) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    /// What was counted since `earlier` (a previous reading of the same counters); the largest value is not known
    /// for an interval, so only the buckets are kept.
    pub fn since(&self, earlier: &MicrosHistogram) -> MicrosHistogram {
        let mut buckets = std::collections::BTreeMap::new();
        for (upper, n) in &self.buckets {
            let delta = n.saturating_sub(earlier.buckets.get(upper).copied().unwrap_or(0));
            if delta > 0 {
                buckets.insert(*upper, delta);
            }
        }
        MicrosHistogram { buckets, max_ns: None }
    }

    /// The upper bound (µs) of the bucket holding the `p`th percentile (0-100]; None when empty.
    pub fn percentile_us(&self, p: f64) -> Option<u64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((p / 100.0 * total as f64).ceil() as u64).clamp(1, total);
        let mut cumulative = 0;
        for (upper, n) in &self.buckets {
            cumulative += n;
            if cumulative >= rank {
                return Some(*upper);
            }
        }
        self.buckets.keys().next_back().copied()
    }

    /// The largest value in microseconds: the reported one, else the last bucket's upper bound.
    pub fn max_us(&self) -> Option<f64> {
        match self.max_ns {
            Some(ns) if self.count() > 0 => Some(ns as f64 / 1000.0),
            _ => self.buckets.keys().next_back().map(|&u| u as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_a_bucket_whose_bounds_hold_it() {
        // Proves the bucket arithmetic: each value lies within its bucket's bounds, buckets are contiguous, and
        // the precision is 1/8 of the value.
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 1, 999_999, 1_000_000_000, (1 << 36) - 1]) {
            let i = bucket_of(v);
            assert!(lower_bound(i) <= v && v < upper_bound(i), "{v} in bucket {i}");
        }
        for i in 0..BUCKETS - 1 {
            assert_eq!(upper_bound(i), lower_bound(i + 1), "bucket {i}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    fn snapshot_of(values: &[u64]) -> Snapshot {
        let mut s = Snapshot::default();
        for &v in values {
            s.counts[bucket_of(v)] += 1;
            s.sum_ns += v;
            s.max_ns = s.max_ns.max(v);
        }
        s
    }

    #[test]
    fn kv_json_reads_back_with_its_counts_and_percentiles() {
        // Proves the GET_CMD_TIMER JSON carries kv_engine's fields, that its rows sum to the total, and that a
        // reader finds the percentiles in the right microsecond buckets.
        let mut values = vec![5_000u64; 90];
        values.extend([2_000_000u64; 10]);
        let json = snapshot_of(&values).to_kv_json();
        assert_eq!(json["total"], 100);
        assert_eq!(json["bucketsLow"], 4, "5 µs lies in the bucket from 4.608 µs");
        let rows = json["data"].as_array().expect("data");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1][2], 100.0);
        let h = MicrosHistogram::from_kv_json(&json).expect("parses");
        assert_eq!(h.count(), 100);
        let p50 = h.percentile_us(50.0).expect("p50");
        assert!((5..=6).contains(&p50), "p50 {p50}");
        let p99 = h.percentile_us(99.0).expect("p99");
        assert!((2000..=2300).contains(&p99), "p99 {p99}");
        assert_eq!(h.max_us(), Some(2000.0));
    }

    #[test]
    fn merged_histograms_count_both_nodes_operations() {
        // Proves merging by bucket: the cluster view of two nodes has both nodes' counts and the larger maximum,
        // and its p99 is the slow node's, which averaging the nodes' percentiles would hide.
        let fast = MicrosHistogram::from_kv_json(&snapshot_of(&[1_000; 98]).to_kv_json()).expect("fast");
        let slow = MicrosHistogram::from_kv_json(&snapshot_of(&[50_000_000; 2]).to_kv_json()).expect("slow");
        let mut both = fast.clone();
        both.merge(&slow);
        assert_eq!(both.count(), 100);
        assert!(both.percentile_us(99.0).expect("p99") >= 50_000);
        assert_eq!(both.max_ns, Some(50_000_000));
        let interval = both.since(&fast);
        assert_eq!(interval.count(), 2);
    }

    #[test]
    fn prometheus_buckets_hold_every_operation_once() {
        // Proves the exported buckets add up to the count and put a 5 µs operation under le=8.192e-6 but not
        // under le=4.096e-6.
        let s = snapshot_of(&[5_000, 5_000, 3_000_000_000_000]);
        let buckets = s.prometheus_buckets();
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 3);
        let at = |le: f64| buckets.iter().find(|b| (b.0 - le).abs() < 1e-12).map(|b| b.1);
        assert_eq!(at(4.096e-6), Some(0));
        assert_eq!(at(8.192e-6), Some(2));
        assert_eq!(buckets.last().map(|b| b.1), Some(1));
    }
}

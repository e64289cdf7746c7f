//! Request distributions, ported from YCSB's generators so that workloads A–F pick keys as YCSB does:
//! `ZipfianGenerator` (Gray et al., "Quickly generating billion-record synthetic databases"), its scrambled form
//! (`ScrambledZipfianGenerator`: zipfian popularity spread over the key space by an FNV hash) and
//! `SkewedLatestGenerator` (the most recently inserted keys are the most popular).

use crate::rng::Rng;

/// YCSB's default zipfian constant.
pub(crate) const ZIPFIAN_CONSTANT: f64 = 0.99;
/// The item count YCSB's scrambled zipfian draws from before hashing, and its precomputed zeta.
const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// How keys are chosen among the existing records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestDistribution {
    Uniform,
    Zipfian,
    Latest,
}

/// A key chooser: returns record numbers in `0..count`, where `count` is the number of records that exist now
/// (it grows during workload D).
#[derive(Clone, Debug)]
pub(crate) enum KeyChooser {
    Uniform,
    Zipfian(Zipfian),
    Latest(Zipfian),
}

impl KeyChooser {
    pub(crate) fn new(d: RequestDistribution, count: u64) -> KeyChooser {
        match d {
            RequestDistribution::Uniform => KeyChooser::Uniform,
            RequestDistribution::Zipfian => {
                KeyChooser::Zipfian(Zipfian::with_zetan(SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN))
            }
            RequestDistribution::Latest => KeyChooser::Latest(Zipfian::new(count.max(1), ZIPFIAN_CONSTANT)),
        }
    }

    pub(crate) fn next(&mut self, rng: &mut Rng, count: u64) -> u64 {
        let count = count.max(1);
        match self {
            KeyChooser::Uniform => rng.below(count),
            // ScrambledZipfianGenerator: a zipfian draw over a huge range, hashed into the record range.
            KeyChooser::Zipfian(z) => fnv_hash64(z.next(rng, SCRAMBLED_ITEM_COUNT)) % count,
            // SkewedLatestGenerator: `max - zipfian(max)`; here 0-based, so the newest record is `count - 1`.
            KeyChooser::Latest(z) => (count - 1).saturating_sub(z.next(rng, count)),
        }
    }
}

/// YCSB's `ZipfianGenerator` over `0..items`, with the incremental zeta update it does when the item count grows.
#[derive(Clone, Debug)]
pub(crate) struct Zipfian {
    theta: f64,
    alpha: f64,
    zeta2theta: f64,
    count_for_zeta: u64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    pub(crate) fn new(items: u64, theta: f64) -> Zipfian {
        Zipfian::with_zetan(items, theta, zeta(0, items, theta, 0.0))
    }

    fn with_zetan(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian { theta, alpha: 1.0 / (1.0 - theta), zeta2theta, count_for_zeta: items, zetan, eta: 0.0 };
        z.eta = z.eta_for(items);
        z
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / self.zetan)
    }

    /// A draw in `0..items`; small numbers are the most popular.
    pub(crate) fn next(&mut self, rng: &mut Rng, items: u64) -> u64 {
        if items != self.count_for_zeta {
            self.zetan = if items > self.count_for_zeta {
                zeta(self.count_for_zeta, items, self.theta, self.zetan)
            } else {
                zeta(0, items, self.theta, 0.0)
            };
            self.count_for_zeta = items;
            self.eta = self.eta_for(items);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(items - 1);
        }
        let ret = (items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        ret.min(items - 1)
    }
}

/// `sum_{i = from+1}^{to} 1 / i^theta`, added to `initial` (the zeta of the first `from` items).
fn zeta(from: u64, to: u64, theta: f64, initial: f64) -> f64 {
    (from..to).fold(initial, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

/// YCSB's `Utils.fnvhash64`: FNV-1a over the eight little-endian bytes of `v`, made non-negative as Java's
/// `Math.abs` does.
pub(crate) fn fnv_hash64(mut v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(1_099_511_628_211);
        v >>= 8;
    }
    (h as i64).unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The zipfian draw stays in range and is skewed: item 0 is by far the most popular.
    #[test]
    fn zipfian_is_skewed_towards_small_numbers() {
        let mut rng = Rng::new(3);
        let mut z = Zipfian::new(1000, ZIPFIAN_CONSTANT);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[z.next(&mut rng, 1000) as usize] += 1;
        }
        assert!(counts[0] > counts[10] && counts[10] > counts[500]);
        // With theta 0.99 over 1000 items, item 0 gets about 1/zeta(1000) ≈ 13% of draws.
        assert!((10_000..16_000).contains(&counts[0]), "{}", counts[0]);
    }

    /// The incremental zeta equals the zeta computed from scratch.
    #[test]
    fn zeta_grows_incrementally() {
        let a = zeta(0, 5000, 0.99, 0.0);
        let b = zeta(2000, 5000, 0.99, zeta(0, 2000, 0.99, 0.0));
        assert!((a - b).abs() < 1e-9);
        let mut rng = Rng::new(1);
        let mut z = Zipfian::new(10, 0.99);
        for n in [10, 20, 15, 1] {
            assert!(z.next(&mut rng, n) < n);
        }
    }

    /// Scrambled zipfian and uniform choose records in range; "latest" prefers the newest records.
    #[test]
    fn choosers_stay_in_range_and_latest_prefers_new_records() {
        let mut rng = Rng::new(9);
        for d in [RequestDistribution::Uniform, RequestDistribution::Zipfian, RequestDistribution::Latest] {
            let mut k = KeyChooser::new(d, 100);
            for n in [100, 150, 1] {
                for _ in 0..1000 {
                    assert!(k.next(&mut rng, n) < n);
                }
            }
        }
        let mut latest = KeyChooser::new(RequestDistribution::Latest, 1000);
        let newest = (0..10_000).filter(|_| latest.next(&mut rng, 1000) >= 990).count();
        assert!(newest > 3_000, "{newest}");
    }

    /// FNV values match YCSB's (record 0 is the familiar "user6284781860667377211").
    #[test]
    fn fnv_hash_matches_ycsb() {
        assert_eq!(fnv_hash64(0), 6_284_781_860_667_377_211);
        assert_eq!(fnv_hash64(1), 8_517_097_267_634_966_620);
    }
}

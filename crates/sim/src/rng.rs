//! The simulation's only source of randomness: SplitMix64 from a seed, so a seed repeats a run exactly.

/// A seeded pseudo-random generator (SplitMix64: tiny, fast, good enough for scheduling faults).
#[derive(Clone, Debug)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        SimRng { state: seed ^ 0x5851_f42d_4c95_7f2d }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same seed gives the same sequence, another seed another one: runs repeat from their seed alone.
    #[test]
    fn a_seed_repeats_its_sequence() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = SimRng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = SimRng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let c = SimRng::new(8).next_u64();
        assert_eq!(a, b);
        assert_ne!(a[0], c);
        let mut r = SimRng::new(1);
        assert!((0..1000).all(|_| r.below(3) < 3));
    }
}

//! A small, fast, seeded random number generator (xoshiro256++, seeded through SplitMix64). Every connection of a
//! run gets its own stream from the run's seed, so a run's request sequence is reproducible.

/// xoshiro256++ (Blackman and Vigna): fast, 256 bits of state, good enough for load generation.
#[derive(Clone, Debug)]
pub(crate) struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        let mut sm = seed;
        let s = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        Rng { s }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-64 * n, irrelevant here). `n` = 0 gives 0.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `pct` percent.
    pub(crate) fn percent(&mut self, pct: u32) -> bool {
        self.below(100) < u64::from(pct)
    }
}

/// SplitMix64: the recommended seeder for xoshiro, and a good 64-bit mix on its own.
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same seed gives the same stream; different seeds differ.
    #[test]
    fn seeded_streams_are_reproducible() {
        let (mut a, mut b, mut c) = (Rng::new(7), Rng::new(7), Rng::new(8));
        let xs: Vec<u64> = (0..10).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..10).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert_ne!(xs, (0..10).map(|_| c.next_u64()).collect::<Vec<_>>());
    }

    /// `below`, `between` and `next_f64` stay in range, and `below` covers its range roughly evenly.
    #[test]
    fn ranges_are_respected_and_roughly_uniform() {
        let mut r = Rng::new(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[r.below(10) as usize] += 1;
            let x = r.between(5, 9);
            assert!((5..=9).contains(&x));
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        assert_eq!(r.below(0), 0);
    }
}

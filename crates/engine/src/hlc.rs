/// A hybrid logical clock for CAS values: nanoseconds of wall time with the low 16 bits used as a logical counter,
/// so CAS values carry real time (`$document.last_modified`) and still strictly increase when the clock stalls or
/// steps back.
#[derive(Debug, Default)]
pub(crate) struct Hlc {
    last: u64,
}

const LOGICAL_MASK: u64 = 0xFFFF;

impl Hlc {
    pub(crate) fn next(&mut self, now_nanos: u64) -> u64 {
        let physical = now_nanos & !LOGICAL_MASK;
        self.last = if physical > self.last { physical } else { self.last + 1 };
        self.last
    }
    /// The last CAS handed out (or observed).
    pub(crate) fn last(&self) -> u64 {
        self.last
    }
    /// Never hand out a CAS at or below one already seen (for values restored from elsewhere).
    pub(crate) fn observe(&mut self, cas: u64) {
        self.last = self.last.max(cas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CAS values strictly increase even when the wall clock stands still or goes backwards.
    #[test]
    fn hlc_is_strictly_monotonic() {
        let mut h = Hlc::default();
        let a = h.next(5_000_000_000);
        let b = h.next(5_000_000_000);
        let c = h.next(4_000_000_000);
        let d = h.next(6_000_000_000);
        assert!(a < b && b < c && c < d);
        assert_eq!(a & LOGICAL_MASK, 0);
        assert_eq!(d, 6_000_000_000 & !LOGICAL_MASK);
    }
}

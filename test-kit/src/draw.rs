//! The tests' and benchmarks' random numbers.

/// The one generator of the tests and benchmarks: small and deterministic (xorshift), so a
/// workload is the same on every engine and every run, and one printed seed replays it.
pub struct Draw(pub u64);

impl Draw {
    /// A generator from `seed` (any value: xorshift's one fixed point, 0, is avoided).
    pub fn seeded(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next number below `below`.
    pub fn next(&mut self, below: u64) -> u64 {
        self.next_u64() % below
    }

    /// A product id in 1..=`n` with Zipf-like popularity (s ≈ 1).
    pub fn zipf(&mut self, n: u64) -> i64 {
        let u = (self.next_u64() % 1_000_000) as f64 / 1_000_000.0;
        ((n as f64).powf(u)).floor() as i64
    }
}

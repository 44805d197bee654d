//! Seeds, and the numbers drawn from them: a test that draws what it does prints its seed,
//! and the same seed draws the same on every machine (SplitMix64, integers only).

/// SplitMix64's finaliser: a good 64-bit mix, used to derive seeds.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64: small, fast, and good enough to draw test cases.
pub struct Rng(u64);

impl Rng {
    /// The numbers `seed` draws.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// About log-uniform in `lo..=hi` (`1 <= lo <= hi < 2^63`): a power of two drawn uniformly,
    /// then a value within it; as many small values as large ones. Integers only, so that a seed
    /// draws the same case on every machine.
    pub fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let (low_bit, high_bit) = (lo.ilog2(), hi.ilog2());
        let bit = low_bit + self.below(u64::from(high_bit - low_bit + 1)) as u32;
        let (from, to) = (lo.max(1 << bit), hi.min((2 << bit) - 1));
        from + self.below(to - from + 1)
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }

    /// One of `items`, each as likely.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A number from the environment: decimal or `0x` hexadecimal.
pub fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={text:?}: not a number")))
}

/// A seed nobody chose, for a run that was given none: the clock and the process.
pub fn fresh_seed() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(1, |d| d.as_nanos() as u64) ^ u64::from(std::process::id())
}
